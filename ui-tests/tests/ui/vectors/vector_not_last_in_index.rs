// Issue #29: a vector index pre-filtered on other properties lists them first, then the
// vector: a vector anywhere else in an index is an error on it.
use datastore_entity::prelude::*;
use datastore_entity::Vector;

#[derive(Entity)]
#[entity(index(emb, label))]
struct Doc {
    #[key]
    id: KeyName,
    label: String,
    #[vector_index(3)]
    emb: Vector,
}

fn main() {}
