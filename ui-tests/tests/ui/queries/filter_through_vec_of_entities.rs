// R-P2: the service indexes nothing inside an array of embedded entities; a filter there
// does not compile, and the error suggests `#[property(flatten)]`.
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
    let _filter = Order::ITEMS.dot(LineItem::SKU).eq("A-1");
}
