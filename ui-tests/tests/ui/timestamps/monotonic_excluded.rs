// R-I3: `#[index(monotonic)]` accepts the hotspot of an index; an excluded field has none.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Event {
    #[key]
    id: Option<KeyId>,
    #[exclude_from_index]
    #[index(monotonic)]
    at: Timestamp,
}

fn main() {}
