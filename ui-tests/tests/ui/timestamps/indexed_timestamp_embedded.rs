// R-I3: inside an embedded entity too (it is indexed as `outer.inner`).
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Audit {
    at: Timestamp,
}

fn main() {}
