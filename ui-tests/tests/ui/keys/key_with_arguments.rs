// `#[key]` is a bare word.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Account {
    #[key(auto)]
    name: KeyName,
}

fn main() {}
