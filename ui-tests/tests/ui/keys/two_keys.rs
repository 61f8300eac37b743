// An entity has exactly one `#[key]`.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Account {
    #[key]
    name: KeyName,
    #[key]
    id: KeyId,
}

fn main() {}
