//! Independent reads overlap: a lookup and a query run at the same time with
//! `tokio::join!` instead of one after the other (R-A3).
//!
//! Run it with `cargo run -p datastore-entity-examples --example concurrent`.

use datastore_entity::prelude::*;

#[derive(Entity, Debug, Clone, PartialEq)]
pub struct Profile {
    #[key]
    pub name: KeyName,
    pub city: String,
}

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(index(customer, -total_cents))] // a customer's orders, largest first (R-I2)
pub struct Order {
    #[key]
    pub id: Option<KeyId>,
    pub customer: String,
    pub total_cents: i64,
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let db = Db::in_memory();
    db.put(&Profile {
        name: KeyName::new("ann")?,
        city: "Paris".into(),
    })
    .await?;
    let orders: Vec<Order> = (1..=5)
        .map(|i| Order {
            id: None,
            customer: "ann".into(),
            total_cents: i * 1250,
        })
        .collect();
    db.put_many(&orders).await?;
    println!("Saved a profile and {} orders.", orders.len());

    // Both requests are in flight together; neither waits for the other to finish.
    let profile_key = Profile::key(KeyName::new("ann")?);
    let lookup = db.get(&profile_key);
    let query = db
        .query::<Order>()
        .filter(Order::CUSTOMER.eq("ann"))
        .order(Order::TOTAL_CENTS.desc())
        .limit(3)
        .fetch();
    let (profile, top_orders) = tokio::join!(lookup, query);

    let profile = profile?.expect("saved above");
    let top_orders = top_orders?;
    println!("Ran a lookup and a query concurrently:");
    println!("  the lookup found {} from {};", profile.name, profile.city);
    let totals: Vec<String> = top_orders
        .items
        .iter()
        .map(|o| format!("{:.2}", o.total_cents as f64 / 100.0))
        .collect();
    println!(
        "  the query found her 3 largest orders: {}.",
        totals.join(", ")
    );
    // Google's scale rules watched at run time (R-K4, R-E2, R-S4, R-S6) found nothing here.
    assert_eq!(db.diagnostics(), [], "{:?}", db.diagnostics());
    Ok(())
}
