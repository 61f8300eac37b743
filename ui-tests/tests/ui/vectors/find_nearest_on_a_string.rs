// Issue #29: `find_nearest` searches a vector property; on another property it does not
// compile.
use datastore_entity::prelude::*;
use datastore_entity::{Distance, Vector};

#[derive(Entity)]
struct Doc {
    #[key]
    id: KeyName,
    label: String,
    emb: Vector,
}

fn main() {
    let db = Db::in_memory();
    let v = Vector::new(vec![1.0]).unwrap();
    let _ = db.query::<Doc>().find_nearest(Doc::LABEL, &v, Distance::Cosine, 3);
}
