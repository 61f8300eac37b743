// R-S3: the plain value of a sharded-index field is excluded; it is queried through its helper.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Event {
    #[key]
    id: Option<KeyId>,
    #[sharded_index(8)]
    at: Timestamp,
}

fn main() {
    let _ = Event::AT.lt(Timestamp::now());
}
