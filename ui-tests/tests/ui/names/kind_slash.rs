// R-N2: a kind must not contain `/`.
use datastore_entity::prelude::*;

#[derive(Entity)]
#[entity(kind = "billing/Account")]
struct Account {
    #[key]
    name: KeyName,
}

fn main() {}
