// Issue #29: a vector index is an index of a kind; an embedded entity (no `#[key]`) has none.
use datastore_entity::prelude::*;
use datastore_entity::Vector;

#[derive(Entity)]
struct Passage {
    text: String,
    #[vector_index(3)]
    emb: Vector,
}

fn main() {}
