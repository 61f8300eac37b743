// `#[property(default)]` needs the field's type to implement `Default`.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Customer {
    #[key]
    id: KeyId,
    #[property(default)]
    at: GeoPoint,
}

fn main() {
    let _ = Customer::AT;
}
