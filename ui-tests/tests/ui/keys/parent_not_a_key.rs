// `#[parent]` holds the typed key of the parent entity.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Post {
    #[parent]
    account: String,
    #[key]
    id: Option<KeyId>,
}

fn main() {}
