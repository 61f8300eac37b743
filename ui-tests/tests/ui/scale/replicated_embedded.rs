// R-S2: replicas are entities of their own; an embedded struct has no key to copy.
use datastore_entity::prelude::*;

#[derive(Entity)]
#[replicated(3)]
struct Banner {
    text: String,
}

fn main() {}
