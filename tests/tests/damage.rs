//! A `Db::open` file damaged at rest: single bit flips anywhere in the file. Every flip
//! must end in an error (at open or on read) or in the data as it was: never altered or
//! missing data, never a panic. Runs `FLIPS` flips (200 by default; `FLIPS=2000` for more).
//! And files that are not this engine's at all, refused untouched.

use std::panic::AssertUnwindSafe;

use datastore_entity::Error;
use datastore_entity::prelude::*;
use datastore_entity_tests::{Account, account};

fn accounts() -> Vec<Account> {
    (0..300)
        .map(|i| {
            let mut a = account(&format!("flip-{i:03}"));
            a.balance = i * 7;
            a.bio = format!("account number {i}, with some text to damage");
            a
        })
        .collect()
}

/// What the damaged copy answers: `Ok(true)` when every read returned the data as written,
/// `Ok(false)` with a description when a read returned other data, `Err` when it refused.
async fn read_back(
    path: &std::path::Path,
    expected: &[Account],
) -> Result<Result<(), String>, Error> {
    let db = Db::open(path)?;
    let keys: Vec<Key<Account>> = expected
        .iter()
        .map(|a| Account::key(a.name.clone()))
        .collect();
    let found = db.get_many(&keys).await?;
    for (got, want) in found.iter().zip(expected) {
        if got.as_ref() != Some(want) {
            return Ok(Err(format!("get {:?}: {got:?}", want.name)));
        }
    }
    let mut all: Vec<Account> = db.query::<Account>().stream().try_collect().await?;
    all.sort_by(|a, b| a.name.as_str().cmp(b.name.as_str()));
    if all != expected {
        return Ok(Err(format!("a full query returned {} entities", all.len())));
    }
    let rich = db
        .query::<Account>()
        .filter(Account::BALANCE.ge(700))
        .count()
        .await?;
    if rich != expected.iter().filter(|a| a.balance >= 700).count() as u64 {
        return Ok(Err(format!("count {rich}")));
    }
    Ok(Ok(()))
}

#[test]
fn every_bit_flip_is_an_error_or_the_data_as_written_never_a_panic() {
    let flips: usize = std::env::var("FLIPS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(200);
    let dir = std::env::temp_dir().join(format!("datastore-entity-flips-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let original = dir.join("original.redb");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut expected = accounts();
    expected.sort_by(|a, b| a.name.as_str().cmp(b.name.as_str()));
    runtime.block_on(async {
        let db = Db::open(&original).unwrap();
        db.put_many(&expected).await.unwrap();
    });
    let bytes = std::fs::read(&original).unwrap();
    // Half the flips anywhere, half in bytes that are not zero (where the data is).
    let nonzero: Vec<usize> = (0..bytes.len()).filter(|&i| bytes[i] != 0).collect();
    let mut rng = fastrand::Rng::with_seed(0x5eed);
    let (mut refused, mut intact) = (0, 0);
    let mut altered = Vec::new();
    // redb's own panics are caught by the engine; a panic reaching here is a failure. The
    // default hook would print each caught one: keep the output readable.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    for flip in 0..flips {
        let at = match flip % 2 {
            0 => rng.usize(..bytes.len()),
            _ => nonzero[rng.usize(..nonzero.len())],
        };
        let bit = rng.u8(..8);
        let mut damaged = bytes.clone();
        damaged[at] ^= 1 << bit;
        let copy = dir.join(format!("flip-{flip}.redb"));
        std::fs::write(&copy, &damaged).unwrap();
        let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| {
            runtime.block_on(read_back(&copy, &expected))
        }));
        match outcome {
            Err(_) => altered.push(format!("byte {at} bit {bit}: a panic reached the caller")),
            Ok(Err(_)) => refused += 1,
            Ok(Ok(Ok(()))) => intact += 1,
            Ok(Ok(Err(what))) => altered.push(format!("byte {at} bit {bit}: {what}")),
        }
        let _ = std::fs::remove_file(&copy);
    }
    std::panic::set_hook(hook);
    let _ = std::fs::remove_dir_all(&dir);
    eprintln!(
        "{flips} flips in a {} KiB file: {refused} refused with an error, {intact} read back intact, {} altered",
        bytes.len() / 1024,
        altered.len()
    );
    assert!(altered.is_empty(), "{altered:#?}");
    assert!(
        refused > 0,
        "no flip was detected: the test damaged nothing that matters"
    );
}

/// Issue #26: `Db::open` wrote its tables into a redb database of another program. Another
/// program's file — a redb database with tables of its own, or one with this engine's table
/// names but no format record, or no database at all — is refused with `Error::Storage`,
/// and left byte for byte as it was.
#[test]
fn a_file_of_another_program_is_refused_and_left_byte_for_byte_untouched() {
    let dir = std::env::temp_dir().join(format!("datastore-entity-foreign-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    const THEIRS: redb::TableDefinition<&str, u64> = redb::TableDefinition::new("their_table");
    const LOOKALIKE: redb::TableDefinition<&[u8], &[u8]> = redb::TableDefinition::new("entities");
    let redb_file = |name: &str, write: &dyn Fn(&redb::WriteTransaction)| {
        let path = dir.join(name);
        let db = redb::Database::create(&path).unwrap();
        let tx = db.begin_write().unwrap();
        write(&tx);
        tx.commit().unwrap();
        drop(db);
        path
    };
    let files = [
        redb_file("theirs.redb", &|tx| {
            tx.open_table(THEIRS).unwrap().insert("answer", 42).unwrap();
        }),
        redb_file("lookalike.redb", &|tx| {
            tx.open_table(LOOKALIKE)
                .unwrap()
                .insert(&b"k"[..], &b"v"[..])
                .unwrap();
        }),
        {
            let path = dir.join("text.redb");
            std::fs::write(&path, "not a database at all\n".repeat(100)).unwrap();
            path
        },
    ];
    for path in &files {
        let before = std::fs::read(path).unwrap();
        match Db::open(path) {
            Err(Error::Storage { reason, .. }) => {
                assert!(
                    reason.contains("left as it is"),
                    "{}: {reason}",
                    path.display()
                )
            }
            other => panic!("{}: {other:?}", path.display()),
        }
        assert_eq!(std::fs::read(path).unwrap(), before, "{}", path.display());
    }
    // A database of this engine opens, and a new file is one.
    let ours = dir.join("ours.redb");
    drop(Db::open(&ours).unwrap());
    drop(Db::open(&ours).unwrap());
    let _ = std::fs::remove_dir_all(&dir);
}
