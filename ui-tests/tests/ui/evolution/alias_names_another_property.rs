// An alias may not be a name another property of the entity uses: a write removes the
// aliased property, which would remove that property.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Customer {
    #[key]
    id: KeyId,
    #[property(alias = "phone")]
    email: String,
    phone: Option<String>,
}

fn main() {
    let _ = Customer::EMAIL.eq("a@x");
}
