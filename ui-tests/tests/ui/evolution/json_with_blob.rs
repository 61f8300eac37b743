// A JSON property is stored as its JSON text: it has no other stored form.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Profile {
    #[key]
    id: KeyName,
    #[blob]
    #[property(json)]
    prefs: Vec<u8>,
}

fn main() {}
