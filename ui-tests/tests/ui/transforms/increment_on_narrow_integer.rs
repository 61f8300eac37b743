// Issue #29: an increment of an `i32` field could leave its range on the server (which adds
// in `i64`): only `i64` and `f64` fields take numeric transforms.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Gauge {
    #[key]
    id: KeyName,
    level: i32,
}

async fn raise(db: &Db, key: &Key<Gauge>) -> Result<(), Error> {
    db.transform(key, [Gauge::LEVEL.maximum(3)]).await?;
    Ok(())
}

fn main() {
    let _ = raise;
}
