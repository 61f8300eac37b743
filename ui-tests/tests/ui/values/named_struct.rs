// A struct with named fields is an embedded entity (`Entity`), not a single value.
use datastore_entity::prelude::*;

#[derive(PropertyValue)]
struct Money {
    cents: i64,
}

fn main() {}
