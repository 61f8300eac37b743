use datastore_entity::prelude::*;

#[derive(Entity)]
struct Marker;

fn main() {}
