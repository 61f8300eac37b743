// The key is not a property: it cannot be excluded from indexes.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Account {
    #[key]
    #[exclude_from_index]
    name: KeyName,
}

fn main() {}
