// Issue #29: a vector is always excluded from indexes (the service refuses an indexed one), so
// a filter on it does not compile: vectors are searched with `find_nearest`.
use datastore_entity::prelude::*;
use datastore_entity::Vector;

#[derive(Entity)]
struct Doc {
    #[key]
    id: KeyName,
    emb: Vector,
}

fn main() {
    let v = Vector::new(vec![1.0]).unwrap();
    let _ = Doc::EMB.eq(v);
}
