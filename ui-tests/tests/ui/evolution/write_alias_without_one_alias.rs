// `write_alias` writes the value under the field's former name too: it needs exactly one.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Customer {
    #[key]
    id: KeyId,
    #[property(write_alias)]
    email: String,
}

#[derive(Entity)]
struct Supplier {
    #[key]
    id: KeyId,
    #[property(alias = "mail", alias = "e_mail", write_alias)]
    email: String,
}

fn main() {
    let _ = Customer::EMAIL.eq("a@x");
    let _ = Supplier::EMAIL.eq("a@x");
}
