//! Expiring entities by generation number (R-S7), not by an indexed expiry timestamp.
//!
//! Deleting many entities in a narrow index range slows every later query over that range
//! until the service's compaction has run; an indexed `expires_at` puts the expired entries
//! (to delete) right next to the live ones (to query). Here each session carries the
//! *generation* it was written in; the current generation lives in one small entity. Reads
//! ask for the current generation only; expiring is one write that moves to the next
//! generation, and the old generation's sessions are then deleted through an equality query
//! on their generation, whose index range no live query reads.
//!
//! Run it with `cargo run -p datastore-entity-examples --example expiry`.

use datastore_entity::prelude::*;
use datastore_entity::{BulkWriter, RampUp};

#[derive(Entity, Debug, Clone, PartialEq)]
pub struct Session {
    #[key]
    pub id: KeyName,
    pub generation: i64,
    #[exclude_from_index]
    pub user: String,
}

/// The generation sessions are written in and read from now.
#[derive(Entity, Debug, Clone, PartialEq)]
pub struct SessionGeneration {
    #[key]
    pub name: KeyName,
    pub current: i64,
}

fn generation_key() -> Result<Key<SessionGeneration>, Error> {
    Ok(SessionGeneration::key(KeyName::new("sessions")?))
}

async fn current(db: &Db) -> Result<i64, Error> {
    Ok(db.get(&generation_key()?).await?.map_or(1, |g| g.current))
}

/// One writer for the kind, for the whole program: its ramp paces every load and delete.
async fn open_sessions(
    db: &Db,
    writer: &mut BulkWriter<'_>,
    count: usize,
    tag: &str,
) -> Result<(), Error> {
    let generation = current(db).await?;
    let sessions: Vec<Session> = (0..count)
        .map(|i| {
            Ok(Session {
                id: KeyName::scattered(format!("{tag}-{i}"))?,
                generation,
                user: format!("user-{}", i % 50),
            })
        })
        .collect::<Result<_, Error>>()?;
    writer.put_all(&sessions).await?;
    Ok(())
}

async fn live(db: &Db) -> Result<u64, Error> {
    let generation = current(db).await?;
    db.query::<Session>()
        .filter(Session::GENERATION.eq(generation))
        .count()
        .await
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let db = Db::in_memory();
    let mut writer = BulkWriter::new(&db).ramp(RampUp::new());
    open_sessions(&db, &mut writer, 400, "monday").await?;
    println!("Generation 1: {} live sessions.", live(&db).await?);

    // Expire every session of generation 1: one write moves reads and writes to the next.
    let expired = db
        .transaction(async |tx| {
            let key = generation_key()?;
            let now = tx.get(&key).await?.map_or(1, |g| g.current);
            let name = KeyName::new("sessions")?;
            tx.put(&SessionGeneration {
                name,
                current: now + 1,
            })
            .await?;
            Ok::<_, Error>(now)
        })
        .await?;
    assert_eq!(
        live(&db).await?,
        0,
        "the expired generation is invisible at once"
    );
    open_sessions(&db, &mut writer, 250, "tuesday").await?;

    // Then drop the expired generation's entities, paced, through an equality query on
    // their generation: an index range live queries never read.
    let old: Vec<Key<Session>> = db
        .query::<Session>()
        .filter(Session::GENERATION.eq(expired))
        .keys_only()
        .stream()
        .try_collect()
        .await?;
    writer.delete_all(&old).await?;

    assert_eq!(live(&db).await?, 250);
    assert_eq!(db.query::<Session>().count().await?, 250);
    println!(
        "Generation {}: {} live sessions; the {} sessions of generation {expired} were deleted \
         without a range delete under an indexed timestamp.",
        current(&db).await?,
        live(&db).await?,
        old.len()
    );
    // Google's scale rules watched at run time (R-K4, R-E2, R-S4, R-S6) found nothing here.
    assert_eq!(db.diagnostics(), [], "{:?}", db.diagnostics());
    Ok(())
}
