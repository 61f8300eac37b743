// A `#[property(flatten)]` field is stored as its sub-properties: it is filtered through
// `.dot(...)`, not as a whole.
use datastore_entity::prelude::*;

#[derive(Entity, Clone, PartialEq)]
struct LineItem {
    sku: String,
}

#[derive(Entity)]
struct Order {
    #[key]
    id: KeyId,
    #[property(flatten)]
    items: Vec<LineItem>,
}

fn main() {
    let _filter = Order::ITEMS.eq(LineItem { sku: "A-1".to_owned() });
}
