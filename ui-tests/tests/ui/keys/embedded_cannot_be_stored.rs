// A struct without `#[key]` is an embedded entity: it cannot be stored on its own.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Address {
    city: String,
}

fn store<E: Entity>(_entity: &E) {}

fn main() {
    store(&Address { city: "Paris".into() });
}
