// `#[parent]` needs a `#[key]` beside it.
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
    title: String,
}

fn main() {}
