// R-I3: an indexed timestamp is a write hotspot unless acknowledged; the error is on the type.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Event {
    #[key]
    id: Option<KeyId>,
    at: Timestamp,
}

fn main() {}
