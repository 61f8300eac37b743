// R-I2: keep composite indexes few: the same index twice is an error.
use datastore_entity::prelude::*;

#[derive(Entity)]
#[entity(index(author, -rank), index(author, -rank))]
struct Post {
    #[key]
    id: Option<KeyId>,
    author: String,
    rank: i64,
}

fn main() {}
