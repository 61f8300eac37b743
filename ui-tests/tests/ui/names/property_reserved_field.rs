// R-N5: a field name used as the property name must not match `__.*__`.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Account {
    #[key]
    name: KeyName,
    __meta__: String,
}

fn main() {}
