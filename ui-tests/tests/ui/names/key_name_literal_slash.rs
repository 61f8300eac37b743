// R-N2: a literal key name is checked at compile time.
fn main() {
    let _name = datastore_entity::key_name!("orders/2024");
}
