// R-S3: a sharded index has 2 to 100 shards.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Event {
    #[key]
    id: Option<KeyId>,
    #[sharded_index(101)]
    at: Timestamp,
}

fn main() {}
