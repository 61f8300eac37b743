// R-P1: `#[blob]` is for bytes; text is a string.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Avatar {
    #[key]
    name: KeyName,
    #[blob]
    caption: String,
}

fn main() {}
