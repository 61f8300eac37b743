// R-K2: a literal id of zero does not build.
fn main() {
    let _id = datastore_entity::key_id!(0);
}
