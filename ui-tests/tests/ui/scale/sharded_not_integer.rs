// R-S1: a sharded counter is an integer, summed over its shards.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Post {
    #[key]
    id: Option<KeyId>,
    #[sharded(10)]
    rating: f64,
}

fn main() {}
