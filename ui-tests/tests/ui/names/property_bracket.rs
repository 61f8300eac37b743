// R-N4: Firestore field names avoid `[` and `]`.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Account {
    #[key]
    name: KeyName,
    #[property(rename = "tags[0]")]
    first_tag: String,
}

fn main() {}
