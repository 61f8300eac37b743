// The key is not a property: it has no former name and no default.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Customer {
    #[key]
    #[property(alias = "name")]
    id: KeyId,
    email: String,
}

fn main() {
    let _ = Customer::EMAIL.eq("a@x");
}
