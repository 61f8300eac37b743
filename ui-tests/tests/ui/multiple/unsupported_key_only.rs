// An unsupported key type is reported once, on the type, even when the file uses the API.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Sensor {
    #[key]
    serial: i32,
    reading: f64,
}

async fn uses(db: &Db) -> Result<(), Error> {
    let key = Sensor::key(datastore_entity::key_id!(3));
    let _ = db.get(&key).await?;
    db.put(&Sensor { serial: 3, reading: 1.5 }).await?;
    Ok(())
}

fn main() {
    let _ = uses;
}
