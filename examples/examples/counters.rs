//! A page-view counter hammered by many tasks at once (R-S1): `#[sharded(20)]` keeps the
//! count in 20 shard entities, each increment updates one of them in a transaction, and the
//! total is read back in one lookup. Every increment counts; the program checks it.
//!
//! Run it with `cargo run -p datastore-entity-examples --example counters`.

use std::time::Instant;

use datastore_entity::prelude::*;

#[derive(Entity, Debug, Clone, PartialEq)]
pub struct WebPage {
    #[key]
    pub path: KeyName,
    pub title: String,
    #[sharded(20)] // each shard takes about one write per second on the service (R-E2)
    pub views: i64,
}

// 400 increments: under the 500 writes/s a new kind starts with (R-S4), which `db.diagnostics()`
// would report.
const TASKS: i64 = 8;
const VIEWS_EACH: i64 = 50;

#[tokio::main]
async fn main() -> Result<(), Error> {
    let db = Db::in_memory();
    let home = db
        .put(&WebPage {
            path: KeyName::new("home")?,
            title: "Welcome".into(),
            views: 0, // ignored by put: the counter lives in its shards
        })
        .await?;

    let started = Instant::now();
    let tasks: Vec<_> = (0..TASKS)
        .map(|_| {
            let (db, home) = (db.clone(), home.clone());
            tokio::spawn(async move {
                for _ in 0..VIEWS_EACH {
                    WebPage::increment_views(&db, &home, 1).await?;
                }
                Ok::<(), Error>(())
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("the task did not panic")?;
    }
    let elapsed = started.elapsed();

    let total = WebPage::views_total(&db, &home).await?;
    let page = db.get(&home).await?.expect("saved above");
    println!(
        "{TASKS} tasks × {VIEWS_EACH} views in {:.0} ms: the counter reads {total}, `get` filled views = {}.",
        elapsed.as_secs_f64() * 1000.0,
        page.views
    );
    let expected = TASKS * VIEWS_EACH;
    assert_eq!(total, expected, "an increment was lost");
    assert_eq!(page.views, expected);
    println!("Every one of the {expected} increments landed.");

    db.delete(&home).await?;
    println!(
        "Deleted the page and its 20 shards in one commit; the counter now reads {}.",
        WebPage::views_total(&db, &home).await?
    );
    // Google's scale rules watched at run time (R-K4, R-E2, R-S4, R-S6) found nothing here.
    assert_eq!(db.diagnostics(), [], "{:?}", db.diagnostics());
    Ok(())
}
