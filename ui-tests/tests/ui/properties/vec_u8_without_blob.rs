// R-P1: bytes are a byte string, not an array of integers.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Avatar {
    #[key]
    name: KeyName,
    png: Vec<u8>,
}

fn main() {}
