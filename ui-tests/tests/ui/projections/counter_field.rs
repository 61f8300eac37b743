// R-Q2, R-S1: a sharded counter lives in its shards, not in the index of the kind.
use datastore_entity::prelude::*;

#[derive(Entity)]
#[entity(projection(PostCard: title, likes))]
struct Post {
    #[key]
    id: Option<KeyId>,
    title: String,
    #[sharded(10)]
    likes: i64,
}

fn main() {}
