// R-S1: shards are keyed by their owner's key; an embedded struct has none.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Stats {
    #[sharded(10)]
    views: i64,
}

fn main() {}
