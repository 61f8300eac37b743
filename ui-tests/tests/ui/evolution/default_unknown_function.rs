// `default = "path"` names a function: an unknown one is reported at the literal.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Customer {
    #[key]
    id: KeyId,
    #[property(default = "defaults::no_such_fn")]
    email: String,
}

mod defaults {}

fn main() {
    let _ = Customer::EMAIL.eq("a@x");
}
