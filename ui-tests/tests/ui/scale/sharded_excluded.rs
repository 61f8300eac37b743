// R-S1: a counter is not stored on the entity, so index attributes do not apply to it.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Post {
    #[key]
    id: Option<KeyId>,
    #[sharded(10)]
    #[exclude_from_index]
    likes: i64,
}

fn main() {}
