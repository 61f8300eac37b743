// An index lists fields, `-` for descending.
use datastore_entity::prelude::*;

#[derive(Entity)]
#[entity(index(author, +rank))]
struct Post {
    #[key]
    id: Option<KeyId>,
    author: String,
    rank: i64,
}

fn main() {}
