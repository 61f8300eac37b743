// The key is not a property: it has no property name to rename.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Account {
    #[key]
    #[property(rename = "id")]
    name: KeyName,
}

fn main() {}
