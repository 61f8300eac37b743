// R-N4: Firestore field names avoid `*`.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Account {
    #[key]
    name: KeyName,
    #[property(rename = "rating*")]
    rating: i64,
}

fn main() {}
