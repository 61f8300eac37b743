// A struct without `#[key]` is an embedded entity: `Db::put` does not take it.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Address {
    city: String,
}

async fn save(db: &Db) -> Result<(), Error> {
    db.put(&Address { city: "Paris".into() }).await?;
    Ok(())
}

fn main() {
    let _ = save;
}
