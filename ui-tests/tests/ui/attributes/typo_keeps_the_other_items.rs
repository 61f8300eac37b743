// A typo in one field's `#[property(...)]` is the only error: the struct's `#[entity(...)]`
// items are still read (`rename_all` included), so nothing that depends on them fails
// after it. Without `rename_all`, `__legacy__` would be a reserved name (R-N3).
use datastore_entity::prelude::*;

#[derive(Entity)]
#[entity(rename_all = "camelCase")]
struct Account {
    #[key]
    name: KeyName,
    __legacy__: String,
    #[property(renam = "mail")]
    email: String,
}

fn main() {}
