// `#[property(flatten)]` stores an embedded entity as `field.sub` properties: a plain value
// has no sub-properties.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Shop {
    #[key]
    id: KeyId,
    #[property(flatten)]
    name: String,
}

fn main() {
    // The descriptor still exists: no follow-on error about `NAME`.
    let _ = Shop::NAME.name();
}
