// A flattened field is read from its `name.sub` properties: a former name is not supported.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Place {
    city: String,
}

#[derive(Entity)]
struct Shop {
    #[key]
    id: KeyId,
    #[property(flatten, alias = "location")]
    address: Place,
}

fn main() {
    let _ = Shop::ADDRESS.dot(Place::CITY).eq("Paris");
}
