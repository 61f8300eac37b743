//! A writer for the crash test (`tests/tests/persistence.rs`): opens the file it is given,
//! prints `ready`, then writes notes from `FIRST_ID` on until it is killed, printing
//! `ack FIRST LAST WAY` after each write of notes FIRST..=LAST returns. Writes take turns: a put,
//! a batch of three, a transaction that also counts its note in the ledger — so a kill can
//! land inside any of them.

use std::io::Write as _;

use datastore_entity::prelude::*;
use datastore_entity_tests::{Ledger, Note};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    let mut args = std::env::args().skip(1);
    let (Some(path), Some(first)) = (args.next(), args.next()) else {
        eprintln!("usage: crash_writer FILE FIRST_ID");
        std::process::exit(2);
    };
    let Ok(mut id) = first.parse::<i64>() else {
        eprintln!("FIRST_ID must be a number, not {first}");
        std::process::exit(2);
    };
    let db = Db::open(&path)?;
    let mut out = std::io::stdout().lock();
    let mut say = |line: String| {
        // The parent may have stopped reading: that only ends the acknowledgements.
        let _ = writeln!(out, "{line}").and_then(|()| out.flush());
    };
    say("ready".into());
    for turn in 0_i64.. {
        let way = turn % 3;
        let last = match way {
            0 => {
                db.put(&Note::numbered(id, way)).await?;
                id
            }
            1 => {
                let batch: Vec<Note> = (id..id + 3).map(|n| Note::numbered(n, way)).collect();
                db.put_many(&batch).await?;
                id + 2
            }
            _ => {
                let note = Note::numbered(id, way);
                db.transaction(async |tx| {
                    let key = Ledger::key(KeyName::new("ledger")?);
                    let mut ledger = tx.get(&key).await?.unwrap_or(Ledger {
                        name: KeyName::new("ledger")?,
                        notes: 0,
                    });
                    ledger.notes += 1;
                    tx.put(&ledger).await?;
                    tx.put(&note).await?;
                    Ok(())
                })
                .await?;
                id
            }
        };
        say(format!("ack {id} {last} {way}"));
        id = last + 1;
    }
    Ok(())
}
