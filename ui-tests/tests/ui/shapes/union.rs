use datastore_entity::prelude::*;

#[derive(Entity)]
union Bits {
    int: u32,
    float: f32,
}

fn main() {}
