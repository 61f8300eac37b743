// `#[index(...)]` on a field takes only `monotonic`.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Event {
    #[key]
    id: Option<KeyId>,
    #[index(descending)]
    at: Timestamp,
}

fn main() {}
