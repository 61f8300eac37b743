//! The global cache shared with python-ndb (issue #31): NDB's own `RedisCache` and this crate
//! on one Redis and one Firestore emulator. NDB fills, Rust reads NDB's entity from the cache;
//! Rust writes, NDB reads fresh; both lock protocols interleaved at random, then at once, with
//! no stale read on either side. NDB is driven by `tests/interop/ndb_cache.py`.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};

use datastore_entity::GlobalCache;
use datastore_entity::prelude::*;
use datastore_entity_tests::harness::{self, Backend};
use datastore_entity_tests::redis::Redis;
use datastore_entity_tests::{item, item_key as key};
use serde_json::{Value as Json, json};

/// python-ndb, answering one command per line.
struct Ndb {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Drop for Ndb {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Ndb {
    fn call(&mut self, command: Json) -> Json {
        writeln!(self.stdin, "{command}").expect("NDB reads");
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("NDB answers");
        let answer: Json = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("NDB answered {line:?} to {command}: {e}"));
        assert!(answer.get("error").is_none(), "NDB, on {command}: {answer}");
        answer
    }

    fn put(&mut self, name: &str, v: i64) {
        self.call(json!({"op": "put", "name": name, "v": v}));
    }

    fn get(&mut self, name: &str) -> Option<i64> {
        self.call(json!({"op": "get", "name": name}))["v"].as_i64()
    }

    fn delete(&mut self, name: &str) {
        self.call(json!({"op": "delete", "name": name}));
    }
}

/// Nothing, after saying why (which fails the test in CI).
fn unavailable<T>(reason: String) -> Option<T> {
    if std::env::var_os("CI").is_some() {
        panic!("CI runs the NDB cache tests, but: {reason}");
    }
    eprintln!("skipped: {reason}");
    None
}

/// Redis, a Rust handle with the global cache on the Firestore emulator, and NDB on both, in
/// one namespace.
async fn setup(test: &str) -> Option<(Redis, Db, Ndb)> {
    let redis = Redis::start().map_or_else(unavailable, Some)?;
    let python = harness::ndb_python().map_or_else(unavailable, Some)?;
    let host = harness::emulator_host(Backend::Firestore).map_or_else(unavailable, Some)?;
    let db = harness::db(Backend::Firestore, test).await?;
    let db = db.with_global_cache(GlobalCache::redis(&redis.url()).unwrap());
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/interop/ndb_cache.py");
    let mut child = Command::new(python)
        .arg(script)
        .arg(&db.partition().namespace)
        .envs(harness::client_env(&host))
        .env("DATASTORE_PROJECT_ID", harness::PROJECT)
        .env("REDIS_CACHE_URL", redis.url())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python runs");
    let stdin = child.stdin.take().expect("its input");
    let stdout = BufReader::new(child.stdout.take().expect("its output"));
    let ndb = Ndb {
        child,
        stdin,
        stdout,
    };
    Some((redis, db, ndb))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ndb_and_rust_share_one_cache() {
    let Some((redis, db, mut ndb)) = setup("cache_ndb_share").await else {
        return;
    };
    // NDB writes and reads: NDB's entity is in Redis, and Rust reads it from there.
    ndb.put("a", 1);
    assert_eq!(ndb.get("a"), Some(1));
    assert_eq!(redis.command(&["DBSIZE"]).unwrap(), ":1");
    assert_eq!(db.get(&key("a")).await.unwrap(), Some(item("a", 1)));
    assert_eq!(
        db.cache_stats().hits,
        1,
        "NDB's cached entity, read by Rust"
    );
    // Rust writes: NDB reads the new value, not the one cached.
    db.put(&item("a", 2)).await.unwrap();
    assert_eq!(ndb.get("a"), Some(2));
    // Rust fills the cache; NDB reads Rust's entity from it (its value left as it was).
    db.put(&item("a", 3)).await.unwrap();
    assert_eq!(db.get(&key("a")).await.unwrap(), Some(item("a", 3)));
    let cache_key = redis.raw(&[b"RANDOMKEY"]).unwrap();
    let cached = redis.raw(&[b"GET", &cache_key]).unwrap();
    assert!(
        cached.starts_with(b"\x0a"),
        "an entity, key first: {cached:?}"
    );
    assert_eq!(ndb.get("a"), Some(3));
    assert_eq!(redis.raw(&[b"GET", &cache_key]).unwrap(), cached, "a hit");
    // NDB deletes: Rust reads nothing; Rust deletes what NDB cached: NDB reads nothing.
    ndb.delete("a");
    assert_eq!(db.get(&key("a")).await.unwrap(), None);
    ndb.put("b", 1);
    assert_eq!(ndb.get("b"), Some(1));
    db.delete(&key("b")).await.unwrap();
    assert_eq!(ndb.get("b"), None);
}

/// Random steps, each by NDB or by Rust: a put, a get or a delete of one of three keys. Every
/// get must read the last value written, whoever wrote it and whoever cached it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ndb_and_rust_interleaved_at_random_read_nothing_stale() {
    let Some((_redis, db, mut ndb)) = setup("cache_ndb_random").await else {
        return;
    };
    let seed = std::env::var("CACHE_SEED").map_or(0x5eed, |s| s.parse().unwrap());
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut expected: [Option<i64>; 3] = [None; 3];
    let (mut stale, mut gets) = (0, 0);
    for step in 1..=150i64 {
        let k = rng.usize(..3);
        let name = format!("k{k}");
        let by_ndb = rng.bool();
        match rng.u8(..10) {
            0..=3 => {
                match by_ndb {
                    true => ndb.put(&name, step),
                    false => drop(db.put(&item(&name, step)).await.unwrap()),
                }
                expected[k] = Some(step);
            }
            4..=8 => {
                let got = match by_ndb {
                    true => ndb.get(&name),
                    false => db.get(&key(&name)).await.unwrap().map(|i| i.v),
                };
                gets += 1;
                if got != expected[k] {
                    stale += 1;
                    eprintln!(
                        "step {step}: {name} read {got:?} by NDB: {by_ndb}, expected {:?}",
                        expected[k]
                    );
                }
            }
            _ => {
                match by_ndb {
                    true => ndb.delete(&name),
                    false => db.delete(&key(&name)).await.unwrap(),
                }
                expected[k] = None;
            }
        }
    }
    assert_eq!(stale, 0, "stale reads among {gets} (seed {seed})");
    assert!(db.cache_stats().hits > 0, "{:?}", db.cache_stats());
}

/// NDB and Rust at once: each writes its own keys with increasing values, and both read all
/// of them; a read must never return a value older than one whose write had finished before
/// the read began.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ndb_and_rust_at_once_read_nothing_stale() {
    let Some((_redis, db, mut ndb)) = setup("cache_ndb_race").await else {
        return;
    };
    const KEYS: usize = 4;
    let written: Arc<Vec<AtomicI64>> = Arc::new((0..KEYS).map(|_| AtomicI64::new(0)).collect());
    for k in 0..KEYS {
        db.replace(&item(&format!("k{k}"), 0)).await.unwrap();
    }
    let stale = Arc::new(AtomicUsize::new(0));
    // NDB, in its own thread: writes the even keys, reads all.
    let python = {
        let (written, stale) = (written.clone(), stale.clone());
        tokio::task::spawn_blocking(move || {
            let mut rng = fastrand::Rng::with_seed(1);
            for step in 1..=80i64 {
                let k = rng.usize(..KEYS);
                if rng.bool() {
                    let k = k / 2 * 2;
                    ndb.put(&format!("k{k}"), step);
                    written[k].fetch_max(step, Ordering::SeqCst);
                } else {
                    let floor = written[k].load(Ordering::SeqCst);
                    let got = ndb.get(&format!("k{k}")).expect("written");
                    if got < floor {
                        stale.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        })
    };
    // Rust: writes the odd keys, and reads all, in two tasks.
    let mut tasks = Vec::new();
    for t in 0..2u64 {
        let (db, written, stale) = (db.clone(), written.clone(), stale.clone());
        tasks.push(tokio::spawn(async move {
            let mut rng = fastrand::Rng::with_seed(10 + t);
            for step in 1..=80i64 {
                let k = rng.usize(..KEYS);
                if t == 0 {
                    let k = k / 2 * 2 + 1;
                    db.replace(&item(&format!("k{k}"), step)).await.unwrap();
                    written[k].fetch_max(step, Ordering::SeqCst);
                } else {
                    let floor = written[k].load(Ordering::SeqCst);
                    let got = db.get(&key(&format!("k{k}"))).await.unwrap();
                    if got.expect("written").v < floor {
                        stale.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    python.await.unwrap();
    assert_eq!(stale.load(Ordering::Relaxed), 0);
    assert!(db.cache_stats().hits > 0, "{:?}", db.cache_stats());
}
