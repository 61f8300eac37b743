// A field of a type that is not a property type is reported once, on the type, even when
// the file uses the type's generated API.
use datastore_entity::prelude::*;

struct Money {
    cents: i64,
}

#[derive(Entity)]
struct Invoice {
    #[key]
    id: Option<KeyId>,
    number: String,
    total: Money,
}

async fn uses(db: &Db) -> Result<(), Error> {
    let invoice = Invoice { id: None, number: "A-1".into(), total: Money { cents: 100 } };
    let key = db.put(&invoice).await?;
    let loaded = db.get(&key).await?.unwrap();
    let _ = loaded.total.cents;
    let _ = db.query::<Invoice>().filter(Invoice::NUMBER.eq("A-1")).fetch().await?;
    let _ = Invoice::key(datastore_entity::key_id!(1));
    Ok(())
}

fn main() {
    let _ = uses;
}
