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
    let _ = Shop::NAME.eq("x");
}
