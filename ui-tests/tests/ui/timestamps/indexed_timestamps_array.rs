// R-I3: an array of timestamps, or an optional one, is indexed the same way.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Event {
    #[key]
    id: Option<KeyId>,
    seen: Vec<Timestamp>,
    closed: Option<Timestamp>,
}

fn main() {}
