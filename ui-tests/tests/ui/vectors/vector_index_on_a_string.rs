// Issue #29: `#[vector_index(n)]` declares the index of a vector; on another type it is an
// error at the attribute.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Doc {
    #[key]
    id: KeyName,
    #[vector_index(3)]
    label: String,
}

fn main() {}
