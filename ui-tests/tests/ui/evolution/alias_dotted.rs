// An alias is a property name like any other: R-N3 forbids a dot in it (a dot makes a path).
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Customer {
    #[key]
    id: KeyId,
    #[property(alias = "contact.email")]
    email: String,
}

fn main() {
    let _ = Customer::EMAIL.eq("a@x");
}
