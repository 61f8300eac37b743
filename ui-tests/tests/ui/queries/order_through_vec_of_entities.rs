// R-P2: an order through a `Vec` of embedded entities does not compile either.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct LineItem {
    sku: String,
}

#[derive(Entity)]
struct Order {
    #[key]
    id: KeyId,
    items: Vec<LineItem>,
}

fn main() {
    let _order = Order::ITEMS.dot(LineItem::SKU).asc();
}
