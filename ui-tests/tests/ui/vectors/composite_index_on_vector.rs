// Issue #29: a vector cannot be a column of a composite index: it has no index entries.
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
