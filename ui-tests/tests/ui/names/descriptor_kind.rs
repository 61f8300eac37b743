// A field named `kind` would shadow `Entity::KIND` with its descriptor: rename the field.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Vehicle {
    #[key]
    id: Option<KeyId>,
    kind: String,
}

fn main() {
    let _: &str = <Vehicle as Entity>::KIND;
}
