// Issue #29: `request_time` on a property that is not a timestamp does not compile.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Visit {
    #[key]
    id: KeyName,
    count: i64,
}

async fn stamp(db: &Db, key: &Key<Visit>) -> Result<(), Error> {
    db.transform(key, [Visit::COUNT.request_time()]).await?;
    Ok(())
}

fn main() {
    let _ = stamp;
}
