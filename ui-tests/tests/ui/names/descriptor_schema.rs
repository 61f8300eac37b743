// A field named `schema` would shadow `Entity::SCHEMA` with its descriptor.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Table {
    #[key]
    name: KeyName,
    schema: String,
}

fn main() {}
