// A field of a type that is not a property type, listed in a projection, is reported once, on
// the type, even when the file uses the projection.
use datastore_entity::prelude::*;

struct Money {
    cents: i64,
}

#[derive(Entity)]
#[entity(projection(Line: label, price))]
struct Invoice {
    #[key]
    id: Option<KeyId>,
    label: String,
    price: Money,
}

async fn uses(db: &Db) -> Result<(), Error> {
    let rows = db.query::<Invoice>().project::<Line>().fetch().await?;
    let _ = rows.items[0].price.cents;
    let _ = rows.items[0].label.len();
    Ok(())
}

fn main() {
    let _ = uses;
}
