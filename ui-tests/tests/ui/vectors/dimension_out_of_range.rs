// Issue #29: a vector index has 1 to 2,048 dimensions (the service's bound).
use datastore_entity::prelude::*;
use datastore_entity::Vector;

#[derive(Entity)]
struct Doc {
    #[key]
    id: KeyName,
    #[vector_index(4096)]
    emb: Vector,
}

fn main() {}
