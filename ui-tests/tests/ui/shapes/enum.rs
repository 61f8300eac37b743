use datastore_entity::prelude::*;

#[derive(Entity)]
enum Status {
    Active,
    Closed,
}

fn main() {}
