// R-Q2, R-P2: an embedded entity is not indexed as a whole value, so it cannot be projected.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Address {
    city: String,
}

#[derive(Entity)]
#[entity(projection(Card: home))]
struct Person {
    #[key]
    name: KeyName,
    home: Address,
}

fn main() {}
