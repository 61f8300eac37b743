// R-I2: one property is already indexed by the built-in index; a composite index has two or more.
use datastore_entity::prelude::*;

#[derive(Entity)]
#[entity(index(-author))]
struct Post {
    #[key]
    id: Option<KeyId>,
    author: String,
}

fn main() {}
