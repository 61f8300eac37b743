// R-S1: a sharded counter has 1 to 1,000 shards.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Post {
    #[key]
    id: Option<KeyId>,
    #[sharded(1001)]
    likes: i64,
}

fn main() {}
