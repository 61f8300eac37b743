// R-N7: a property name is not empty.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Account {
    #[key]
    name: KeyName,
    #[property(rename = "")]
    email: String,
}

fn main() {}
