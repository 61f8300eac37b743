// `#[property(json)]` needs serde's traits and the crate's `serde` feature (off here).
use datastore_entity::prelude::*;

struct Prefs {
    theme: String,
}

#[derive(Entity)]
struct Profile {
    #[key]
    id: KeyName,
    #[property(json)]
    prefs: Prefs,
}

fn main() {
    let _ = Prefs { theme: String::new() }.theme;
}
