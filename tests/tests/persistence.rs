//! `Db::open`: the embedded engine in a `redb` file. Every acknowledged write survives
//! `kill -9`; the file always reopens; a second process gets a clear error; cursors and
//! declared indexes outlive the process; transactions stay serializable under many tasks.

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use datastore_entity::prelude::*;
use datastore_entity::{Cursor, Error};
use datastore_entity_tests::{Account, Ledger, Note, account};

/// A scratch directory, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir =
            std::env::temp_dir().join(format!("datastore-entity-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a scratch directory");
        Scratch(dir)
    }

    fn file(&self) -> PathBuf {
        self.0.join("store.redb")
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The crash writer, started on `path` from note `first`, once it has the file open.
fn writer(path: &Path, first: i64) -> (Child, std::sync::mpsc::Receiver<String>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_crash_writer"))
        .arg(path)
        .arg(first.to_string())
        .stdout(Stdio::piped())
        .spawn()
        .expect("the crash writer starts");
    let stdout = child.stdout.take().expect("piped");
    let (lines, received) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let ready = received
        .recv_timeout(Duration::from_secs(60))
        .expect("the writer says it is ready");
    assert_eq!(ready, "ready");
    (child, received)
}

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(future)
}

/// Every note in the file, by number: what a kind query returns and what a property index
/// query on `n` returns must agree.
async fn notes(db: &Db) -> Vec<Note> {
    let all: Vec<Note> = db.query::<Note>().stream().try_collect().await.unwrap();
    let by_n: Vec<Note> = db
        .query::<Note>()
        .filter(Note::N.ge(1))
        .stream()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(
        all.len(),
        by_n.len(),
        "the kinds table and the index of `n` agree"
    );
    all
}

#[test]
fn crash_every_acknowledged_write_survives_kill_9_at_random_points() {
    let scratch = Scratch::new("crash");
    let path = scratch.file();
    let mut acknowledged: Vec<(i64, i64)> = Vec::new(); // (note, way)
    let mut next = 1;
    let rounds = 25;
    for round in 0..rounds {
        let (mut child, lines) = writer(&path, next);
        // Anywhere from the first write to a few hundred in.
        std::thread::sleep(Duration::from_millis(fastrand_delay(round)));
        child.kill().expect("SIGKILL");
        child.wait().expect("the writer is reaped");
        // Every line the writer printed was printed after its write returned.
        for line in lines.iter() {
            let parts: Vec<i64> = line
                .strip_prefix("ack ")
                .unwrap_or_else(|| panic!("an acknowledgement, not {line:?}"))
                .split(' ')
                .map(|n| n.parse().expect("numbers"))
                .collect();
            let [first, last, way] = parts[..] else {
                panic!("ack FIRST LAST WAY, not {line:?}")
            };
            acknowledged.extend((first..=last).map(|n| (n, way)));
        }
        // The file reopens, and holds every acknowledged note, as written.
        let found = block_on(async {
            let db = Db::open(&path).expect("the file reopens after kill -9");
            for (n, way) in &acknowledged {
                let note = db.get(&Note::key(KeyId::new(*n).unwrap())).await.unwrap();
                assert_eq!(note, Some(Note::numbered(*n, *way)), "round {round}");
            }
            let notes = notes(&db).await;
            // Transactions wrote their note and counted it in one commit: both or neither.
            let ledger = db
                .get(&Ledger::key(KeyName::new("ledger").unwrap()))
                .await
                .unwrap()
                .map_or(0, |l| l.notes);
            let by_transactions = notes.iter().filter(|n| n.way == 2).count();
            assert_eq!(ledger, by_transactions as i64, "round {round}");
            notes
        });
        // Writes that landed without being acknowledged are there too; never fewer.
        assert!(found.len() >= acknowledged.len());
        next = found.iter().map(|n| n.n).max().unwrap_or(0) + 1;
    }
    assert!(
        acknowledged.len() > rounds,
        "the writer got writes in before most kills: {} acknowledged",
        acknowledged.len()
    );
    eprintln!(
        "{rounds} kills; {} acknowledged notes, all found after reopening",
        acknowledged.len()
    );
}

/// A pseudo-random delay (10 to 250 ms), different each round.
fn fastrand_delay(round: usize) -> u64 {
    let seed = u64::from(std::process::id()).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ round as u64;
    10 + seed.wrapping_mul(0xBF58_476D_1CE4_E5B9).rotate_left(17) % 240
}

#[test]
fn a_second_process_gets_a_clear_error_not_a_shared_file() {
    let scratch = Scratch::new("locked");
    let path = scratch.file();
    let (mut child, _lines) = writer(&path, 1);
    let refused = Db::open(&path);
    child.kill().expect("SIGKILL");
    child.wait().expect("reaped");
    match refused {
        Err(Error::Storage { reason, .. }) => {
            assert!(reason.contains("already open"), "{reason}");
            assert!(reason.contains(&path.display().to_string()), "{reason}");
        }
        other => panic!("expected Error::Storage, got {other:?}"),
    }
    // Once the other process is gone, the file opens.
    let db = Db::open(&path).expect("the file opens once it is free");
    // And within one process, a second open of the same file is refused too.
    assert!(matches!(Db::open(&path), Err(Error::Storage { .. })));
    drop(db);
}

#[test]
fn a_file_that_is_not_a_store_is_refused() {
    let scratch = Scratch::new("garbage");
    let path = scratch.file();
    std::fs::write(&path, b"not a database, just some bytes").unwrap();
    let refused = Db::open(&path).unwrap_err();
    // The storage engine's own error is kept as the source, not only quoted.
    let Error::Storage {
        source: Some(cause),
        ..
    } = &refused
    else {
        panic!("a storage error with its cause: {refused:?}");
    };
    let source = std::error::Error::source(&refused).expect("source() is the cause");
    assert_eq!(source.to_string(), cause.to_string());
    assert!(
        refused.to_string().contains(&cause.to_string()),
        "{refused}"
    );
    assert!(!refused.is_retryable());
    // Nothing was written over it.
    assert_eq!(
        std::fs::read(&path).unwrap(),
        b"not a database, just some bytes"
    );
}

#[test]
fn a_file_reopened_keeps_no_past_versions() {
    // README: past versions are kept in memory; a file reopened starts with none, so a read
    // at a time before the reopening is refused, before the body runs.
    let scratch = Scratch::new("versions");
    let path = scratch.file();
    let before = block_on(async {
        let db = Db::open(&path).unwrap();
        db.put(&account("ann")).await.unwrap();
        std::thread::sleep(Duration::from_millis(20));
        Timestamp::now()
    });
    std::thread::sleep(Duration::from_millis(20));
    block_on(async {
        let db = Db::open(&path).unwrap();
        let ran = std::sync::atomic::AtomicBool::new(false);
        let read = db
            .read_only_transaction_at(before, |tx| {
                ran.store(true, std::sync::atomic::Ordering::SeqCst);
                async move { tx.get(&datastore_entity_tests::account_key("ann")).await }
            })
            .await;
        match read {
            Err(Error::Service { code, .. }) => assert_eq!(code, "FAILED_PRECONDITION"),
            other => panic!("{other:?}"),
        }
        assert!(
            !ran.load(std::sync::atomic::Ordering::SeqCst),
            "the body ran"
        );
        // Now is readable, and holds what the file holds.
        let now = db
            .read_only_transaction_at(Timestamp::now(), |tx| async move {
                tx.get(&datastore_entity_tests::account_key("ann")).await
            })
            .await
            .unwrap();
        assert_eq!(now.map(|a| a.name), Some(account("ann").name));
    });
}

#[test]
fn versions_and_times_outlive_the_process_and_only_grow() {
    // An entity's version, create and update time are kept in the file; the last commit's
    // time too, so versions grow after a reopen even if the clock went back meanwhile (the
    // engine's clock is never behind the file's).
    let scratch = Scratch::new("stamps");
    let path = scratch.file();
    let key = datastore_entity_tests::account_key("stamped");
    let first = block_on(async {
        let db = Db::open(&path).unwrap();
        db.put_versioned(&account("stamped")).await.unwrap()
    });
    let read = block_on(async {
        let db = Db::open(&path).unwrap();
        let read = db.get_versioned(&key).await.unwrap().expect("kept");
        assert_eq!(read.version, first.version);
        assert_eq!(read.update_time, first.update_time);
        assert_eq!(read.create_time, first.update_time);
        // A conditional write with the version read before the reopen still holds.
        let mut changed = account("stamped");
        changed.balance = 1;
        let second = db.put_if_version(&changed, read.version).await.unwrap();
        assert!(second.version > read.version);
        read
    });
    block_on(async {
        let db = Db::open(&path).unwrap();
        let stale = db.put_if_version(&account("stamped"), read.version).await;
        assert!(matches!(stale, Err(Error::Conflict { .. })), "{stale:?}");
        let now = db.get_versioned(&key).await.unwrap().expect("kept");
        assert_eq!(now.create_time, read.create_time, "created once");
        assert_eq!(now.entity.balance, 1);
    });
    // The file's last commit an hour ahead of this machine's clock (written by a machine whose
    // clock ran ahead): the next write is still later than it.
    let ahead = Timestamp::now().as_micros() + 3_600_000_000;
    {
        use redb::ReadableTable as _;
        let file = redb::Database::open(&path).unwrap();
        let write = file.begin_write().unwrap();
        {
            let meta = redb::TableDefinition::<&[u8], &[u8]>::new("meta");
            let mut meta = write.open_table(meta).unwrap();
            assert!(
                meta.get(&b"clock"[..]).unwrap().is_some(),
                "the clock is kept"
            );
            meta.insert(&b"clock"[..], &ahead.to_be_bytes()[..])
                .unwrap();
        }
        write.commit().unwrap();
    }
    block_on(async {
        let db = Db::open(&path).unwrap();
        let mut changed = account("stamped");
        changed.balance = 2;
        let written = db.put_versioned(&changed).await.unwrap();
        assert!(written.version > ahead as u64, "{written:?}");
    });
}

/// `Note`'s kind, without `Note`'s declared index: a process that only knows this type still
/// has the index, from the file.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(kind = "Note")]
struct UndeclaredNote {
    #[key]
    id: KeyId,
    n: i64,
    way: i64,
    text: String,
}

#[test]
fn cursors_and_declared_indexes_outlive_the_process() {
    let scratch = Scratch::new("reopen");
    let path = scratch.file();
    let cursor: String = block_on(async {
        let db = Db::open(&path).unwrap();
        let notes: Vec<Note> = (1..=10).map(|n| Note::numbered(n, n % 3)).collect();
        db.put_many(&notes).await.unwrap();
        let page = db
            .query::<Note>()
            .filter(Note::WAY.eq(1))
            .order(Note::N.desc())
            .limit(2)
            .fetch()
            .await
            .unwrap();
        let ns: Vec<i64> = page.items.iter().map(|n| n.n).collect();
        assert_eq!(ns, [10, 7]);
        page.next.expect("more notes follow").to_string()
    });
    block_on(async {
        let db = Db::open(&path).unwrap();
        // A note written after the reopen, by a type that declares nothing: the index the
        // first process declared is recorded in the file, and maintained.
        let eight = Note::numbered(8, 1);
        db.put(&UndeclaredNote {
            id: eight.id,
            n: eight.n,
            way: eight.way,
            text: eight.text,
        })
        .await
        .unwrap();
        let query = || {
            db.query::<UndeclaredNote>()
                .filter(UndeclaredNote::WAY.eq(1))
                .order(UndeclaredNote::N.desc())
        };
        let cursor: Cursor = cursor.parse().unwrap();
        let rest = query().start_after(Some(cursor)).fetch().await.unwrap();
        let ns: Vec<i64> = rest.items.iter().map(|n| n.n).collect();
        assert_eq!(ns, [4, 1], "resumed from the first process's cursor");
        let all = query().fetch().await.unwrap();
        let ns: Vec<i64> = all.items.iter().map(|n| n.n).collect();
        assert_eq!(ns, [10, 8, 7, 4, 1]);
    });
}

#[test]
fn transactions_stay_serializable_with_many_concurrent_tasks() {
    let scratch = Scratch::new("serializable");
    let path = scratch.file();
    let (total, moves, ledger) = block_on(async {
        let db = Db::open(&path).unwrap();
        let names = ["a", "b", "c", "d"];
        for name in names {
            let mut holder = account(&format!("holder-{name}"));
            holder.balance = 100;
            db.put(&holder).await.unwrap();
        }
        let tasks: Vec<_> = (0..16_u64)
            .map(|task| {
                let db = db.clone();
                tokio::spawn(async move {
                    let mut committed = 0;
                    for step in 0..10_u64 {
                        let from = names[((task + step) % 4) as usize];
                        let to = names[((task * 3 + step + 1) % 4) as usize];
                        if from == to {
                            continue;
                        }
                        let amount = ((task * 7 + step) % 30) as i64;
                        let moved = db
                            .transaction(async |tx| {
                                let from_key =
                                    Account::key(KeyName::new(format!("holder-{from}"))?);
                                let to_key = Account::key(KeyName::new(format!("holder-{to}"))?);
                                let mut a = tx.get(&from_key).await?.expect("exists");
                                let mut b = tx.get(&to_key).await?.expect("exists");
                                let mut ledger = tx
                                    .get(&Ledger::key(KeyName::new("moves")?))
                                    .await?
                                    .unwrap_or(Ledger {
                                        name: KeyName::new("moves")?,
                                        notes: 0,
                                    });
                                if a.balance < amount {
                                    return Ok::<_, Error>(false);
                                }
                                a.balance -= amount;
                                b.balance += amount;
                                ledger.notes += 1;
                                tx.put(&a).await?;
                                tx.put(&b).await?;
                                tx.put(&ledger).await?;
                                Ok(true)
                            })
                            .await
                            .expect("retries absorb the contention");
                        committed += i64::from(moved);
                    }
                    committed
                })
            })
            .collect();
        let mut moves = 0;
        for task in tasks {
            moves += task.await.unwrap();
        }
        drop(db);
        // Read back after a reopen: what was committed is what is on disk.
        let db = Db::open(&path).unwrap();
        let mut total = 0;
        for name in names {
            let key = Account::key(KeyName::new(format!("holder-{name}")).unwrap());
            total += db.get(&key).await.unwrap().unwrap().balance;
        }
        let ledger = db
            .get(&Ledger::key(KeyName::new("moves").unwrap()))
            .await
            .unwrap()
            .map_or(0, |l| l.notes);
        (total, moves, ledger)
    });
    assert_eq!(total, 400, "no money created or lost");
    assert_eq!(
        ledger, moves,
        "every committed transfer counted exactly once"
    );
    assert!(moves > 50, "most transfers committed: {moves}");
}
