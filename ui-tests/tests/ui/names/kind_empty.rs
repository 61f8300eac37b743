// R-N7: a kind is not empty.
use datastore_entity::prelude::*;

#[derive(Entity)]
#[entity(kind = "")]
struct Account {
    #[key]
    name: KeyName,
}

fn main() {}
