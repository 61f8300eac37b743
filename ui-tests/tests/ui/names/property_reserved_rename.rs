// R-N5: `__key__` is the service's own name.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Account {
    #[key]
    name: KeyName,
    #[property(rename = "__key__")]
    key_copy: String,
}

fn main() {}
