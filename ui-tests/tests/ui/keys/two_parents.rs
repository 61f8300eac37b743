// An entity has at most one `#[parent]`.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Account {
    #[key]
    name: KeyName,
}

#[derive(Entity)]
struct Post {
    #[parent]
    account: Key<Account>,
    #[parent]
    other: Key<Account>,
    #[key]
    id: Option<KeyId>,
}

fn main() {}
