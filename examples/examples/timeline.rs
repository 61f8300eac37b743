//! A timeline read newest first through a sharded timestamp index (R-S3, R-I3): an indexed
//! timestamp would send every new event to the end of one index range; `#[sharded_index(8)]`
//! stores it behind 8 shard prefixes instead, and `Event::query_by_at` runs the 8 shard
//! queries concurrently and merges them, with one cursor for all of them.
//!
//! Run it with `cargo run -p datastore-entity-examples --example timeline`.

use datastore_entity::prelude::*;

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(index(author, -at))] // the composite index of a filtered timeline, newest first
pub struct Event {
    #[key]
    pub id: Option<KeyId>,
    pub author: String,
    pub text: String,
    #[sharded_index(8)]
    pub at: Timestamp,
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let db = Db::in_memory();
    let start = 1_700_000_000_000_000; // 2023-11-14T22:13:20Z
    let events: Vec<Event> = (0..40)
        .map(|i| Event {
            id: None,
            author: if i % 4 == 0 { "ann" } else { "bob" }.into(),
            text: format!("event {i}"),
            at: Timestamp::from_micros(start + i * 60_000_000),
        })
        .collect();
    db.put_many(&events).await?;
    println!("Wrote {} events, one a minute.", events.len());

    println!("The timeline, newest first, 15 per page:");
    let mut cursor = None;
    let mut previous: Option<Timestamp> = None;
    let mut count = 0;
    loop {
        let page = Event::query_by_at(&db)
            .desc()
            .limit(15)
            .start_after(cursor)
            .fetch()
            .await?;
        let first = page
            .items
            .first()
            .map(|e| e.at.to_string())
            .unwrap_or_default();
        let last = page
            .items
            .last()
            .map(|e| e.at.to_string())
            .unwrap_or_default();
        println!("  {} events, {first} back to {last}", page.items.len());
        for event in &page.items {
            assert!(previous.is_none_or(|p| p > event.at), "out of order");
            previous = Some(event.at);
        }
        count += page.items.len();
        match page.next {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    assert_eq!(count, events.len(), "every event exactly once");

    let ann: Vec<String> = Event::query_by_at(&db)
        .filter(Event::AUTHOR.eq("ann"))
        .desc()
        .limit(3)
        .fetch()
        .await?
        .items
        .into_iter()
        .map(|e| e.text)
        .collect();
    println!("Ann's three latest: {}.", ann.join(", "));
    assert_eq!(ann, ["event 36", "event 32", "event 28"]);
    // Google's scale rules watched at run time (R-K4, R-E2, R-S4, R-S6) found nothing here.
    assert_eq!(db.diagnostics(), [], "{:?}", db.diagnostics());
    Ok(())
}
