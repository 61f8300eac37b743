// Issue #29: an index may end with a vector (a search pre-filtered on the properties before
// it) only when the field declares the vectors' dimension with `#[vector_index(n)]`.
use datastore_entity::prelude::*;
use datastore_entity::Vector;

#[derive(Entity)]
#[entity(index(label, emb))]
struct Doc {
    #[key]
    id: KeyName,
    label: String,
    emb: Vector,
}

fn main() {}
