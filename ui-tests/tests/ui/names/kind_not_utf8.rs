// R-N1: a kind given as a byte string must be valid UTF-8.
use datastore_entity::prelude::*;

#[derive(Entity)]
#[entity(kind = b"Acc\xffount")]
struct Account {
    #[key]
    name: KeyName,
}

fn main() {}
