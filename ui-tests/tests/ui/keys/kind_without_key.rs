// A struct with a kind must have a key: without one it is an embedded entity.
use datastore_entity::prelude::*;

#[derive(Entity)]
#[entity(kind = "Account")]
struct Account {
    email: String,
}

fn main() {}
