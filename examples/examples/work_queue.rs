//! A work queue that deletes what it processed (R-Q4): each round asks for the next tasks
//! *after the last one it processed* (`resume_after`), instead of from the start of the index,
//! where the service would step over the entries of every task deleted so far (until its
//! compaction) and an offset would skip tasks (deleted ones no longer count).
//!
//! Run it with `cargo run -p datastore-entity-examples --example work_queue`.

use datastore_entity::prelude::*;

#[derive(Entity, Debug, Clone, PartialEq)]
pub struct Task {
    #[key]
    pub id: KeyName,
    /// Enqueue order: a sequence number per producer, ties broken by the key.
    pub ticket: i64,
    #[exclude_from_index]
    pub payload: String,
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let db = Db::in_memory();
    let tasks: Vec<Task> = (0..60)
        .map(|i| {
            Ok(Task {
                id: KeyName::scattered(format!("task-{i}"))?,
                ticket: i / 3, // three producers: each ticket three times
                payload: format!("resize image {i}"),
            })
        })
        .collect::<Result<_, Error>>()?;
    db.put_many(&tasks).await?;

    let mut last: Option<Task> = None;
    let (mut rounds, mut done) = (0, Vec::new());
    loop {
        let mut next = db.query::<Task>().order(Task::TICKET.asc());
        if let Some(last) = &last {
            next = next.resume_after(last);
        }
        let batch = next.limit(8).fetch().await?.items;
        let Some(tail) = batch.last().cloned() else {
            break;
        };
        // Process, then delete what was processed.
        let keys: Vec<Key<Task>> = batch.iter().map(|t| Task::key(t.id.clone())).collect();
        db.delete_many(&keys).await?;
        done.extend(batch.into_iter().map(|t| t.ticket));
        last = Some(tail);
        rounds += 1;
    }
    assert_eq!(done.len(), 60, "every task processed once");
    assert!(done.windows(2).all(|w| w[0] <= w[1]), "in ticket order");
    assert_eq!(db.query::<Task>().count().await?, 0);
    println!("Processed 60 tasks in {rounds} rounds, each resuming after the last task processed.");
    // Google's scale rules watched at run time (R-K4, R-E2, R-S4, R-S6) found nothing here.
    assert_eq!(db.diagnostics(), [], "{:?}", db.diagnostics());
    Ok(())
}
