// R-N1: a property name given as a byte string must be valid UTF-8.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Account {
    #[key]
    name: KeyName,
    #[property(rename = b"e\xc3\x28mail")]
    email: String,
}

fn main() {}
