// `#[sharded]` needs its number of shards.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Post {
    #[key]
    id: Option<KeyId>,
    #[sharded]
    likes: i64,
}

fn main() {}
