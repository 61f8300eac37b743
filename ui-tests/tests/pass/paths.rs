// Paths through embedded entities that can be queried: through one, an `Option` or a `Box`
// of one, several levels deep, and through a `#[property(flatten)]` `Vec` (one array per
// sub-property, each indexed).
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Geo {
    zone: String,
}

#[derive(Entity)]
struct Place {
    city: String,
    geo: Option<Box<Geo>>,
}

#[derive(Entity)]
struct Shop {
    #[key]
    id: KeyId,
    address: Place,
    previous: Option<Place>,
    boxed: Box<Place>,
    #[property(flatten)]
    branches: Vec<Place>,
    #[property(flatten)]
    head_office: Option<Place>,
}

fn main() {
    let _ = Shop::ADDRESS.dot(Place::CITY).eq("Paris");
    let _ = Shop::PREVIOUS.dot(Place::CITY).ne("Paris");
    let _ = Shop::BOXED.dot(Place::GEO).dot(Geo::ZONE).asc();
    let _ = Shop::BRANCHES.dot(Place::CITY).eq("Nice");
    let _ = Shop::BRANCHES.dot(Place::GEO).dot(Geo::ZONE).desc();
    let _ = Shop::HEAD_OFFICE.dot(Place::CITY).gt("A");
}
