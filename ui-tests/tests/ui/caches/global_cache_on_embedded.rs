// Issue #31: an embedded entity (no `#[key]`) is cached with the entity that holds it.
use datastore_entity::prelude::*;

#[derive(Entity)]
#[entity(global_cache = false)]
struct Address {
    city: String,
}

fn main() {}
