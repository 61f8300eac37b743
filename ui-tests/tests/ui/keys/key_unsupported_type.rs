// A key is a name or a positive id: a float cannot be one.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Reading {
    #[key]
    at: f64,
    value: i64,
}

fn main() {}
