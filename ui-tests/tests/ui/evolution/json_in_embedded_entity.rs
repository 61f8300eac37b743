// `#[property(json)]` is for an entity's own properties: serializing can fail, and an
// embedded entity's conversion cannot report it.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Settings {
    #[property(json)]
    raw: Vec<String>,
}

fn main() {}
