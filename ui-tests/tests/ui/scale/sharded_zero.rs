// R-S1: a sharded counter has 1 to 1,000 shards; the error points at the count.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Post {
    #[key]
    id: Option<KeyId>,
    #[sharded(0)]
    likes: i64,
}

fn main() {}
