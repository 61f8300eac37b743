// R-S3: the companion property `at_sharded` must not be another field's property.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Event {
    #[key]
    id: Option<KeyId>,
    #[sharded_index(8)]
    at: Timestamp,
    at_sharded: String,
}

fn main() {}
