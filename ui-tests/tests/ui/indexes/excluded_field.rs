// R-I2, R-I1: an excluded property has no index entries, so no composite index can hold it.
use datastore_entity::prelude::*;

#[derive(Entity)]
#[entity(index(author, -body))]
struct Post {
    #[key]
    id: Option<KeyId>,
    author: String,
    #[exclude_from_index]
    body: String,
}

fn main() {}
