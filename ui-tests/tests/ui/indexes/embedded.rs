// R-I2: an embedded struct has no kind, so no index of its own.
use datastore_entity::prelude::*;

#[derive(Entity)]
#[entity(index(city, street))]
struct Address {
    city: String,
    street: String,
}

fn main() {}
