// R-N1: a name is a string literal; a number is not a name.
use datastore_entity::prelude::*;

#[derive(Entity)]
#[entity(kind = 42)]
struct Account {
    #[key]
    name: KeyName,
}

fn main() {}
