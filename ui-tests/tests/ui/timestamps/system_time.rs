// `SystemTime` is not a property type: the error says to store a `Timestamp` instead.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Event {
    #[key]
    id: Option<KeyId>,
    #[index(monotonic)]
    at: std::time::SystemTime,
}

fn main() {}
