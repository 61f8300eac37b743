//! The caches (issue #31): a context cache per handle, and a global cache in a real Redis,
//! never wrong — after a put, a delete, a failed commit, a transaction, a writer killed between
//! its lock and its commit (a lock left by hand, and a real writer dropped after its commit was
//! applied), with Redis stopped mid-run — on the embedded engine and on the
//! Firestore emulator.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::time::Duration;

use datastore_entity::prelude::*;
use datastore_entity::{Error, GlobalCache};
use datastore_entity_tests::faults::{Fault, FaultProxy};
use datastore_entity_tests::harness::{self, Backend};
use datastore_entity_tests::redis::Redis;
use datastore_entity_tests::{Item, item, item_key as key};

/// A kind that opts out of the global cache.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(kind = "Private", global_cache = false)]
struct Private {
    #[key]
    name: KeyName,
    v: i64,
}

/// A kind kept one second in the global cache.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(kind = "Brief", global_cache_timeout = 1)]
struct Brief {
    #[key]
    name: KeyName,
    v: i64,
}

/// A Redis server, or why there is none (which fails the test in CI).
fn redis() -> Option<Redis> {
    match Redis::start() {
        Ok(redis) => Some(redis),
        Err(reason) if std::env::var_os("CI").is_some() => panic!("CI needs Redis: {reason}"),
        Err(reason) => {
            eprintln!("skipped: {reason}");
            None
        }
    }
}

/// A handle on `backend` in a namespace of its own, with the global cache at `redis`.
async fn cached(backend: Backend, test: &str, redis: &Redis) -> Option<Db> {
    let cache = GlobalCache::redis(&redis.url())
        .unwrap()
        .lock_time(Duration::from_secs(1));
    Some(harness::db(backend, test).await?.with_global_cache(cache))
}

async fn the_context_cache_answers_what_the_handle_read_and_wrote(backend: Backend) {
    let Some(db) = harness::db(backend, "context_cache").await else {
        return;
    };
    let request = db.with_context_cache();
    let k = key("a");
    assert_eq!(request.get(&k).await.unwrap(), None);
    assert_eq!(request.get(&k).await.unwrap(), None, "missing, from memory");
    assert_eq!(request.cache_stats().context_hits, 1);
    // Another handle's write is not seen by a scope that read the key already (a context
    // cache is one request's); cleared, the scope reads it.
    db.replace(&item("a", 1)).await.unwrap();
    assert_eq!(request.get(&k).await.unwrap(), None);
    request.clear_context_cache();
    assert_eq!(request.get(&k).await.unwrap(), Some(item("a", 1)));
    // A whole entity written through the scope is read back from memory.
    request.replace(&item("a", 2)).await.unwrap();
    let hits = request.cache_stats().context_hits;
    assert_eq!(request.get(&k).await.unwrap(), Some(item("a", 2)));
    assert_eq!(request.cache_stats().context_hits, hits + 1);
    assert_eq!(
        db.get(&k).await.unwrap(),
        Some(item("a", 2)),
        "written through"
    );
    // A put sets only the properties the type declares: the key is forgotten, then read.
    request.put(&item("a", 3)).await.unwrap();
    let hits = request.cache_stats().context_hits;
    assert_eq!(request.get(&k).await.unwrap(), Some(item("a", 3)));
    assert_eq!(
        request.cache_stats().context_hits,
        hits,
        "read from the database"
    );
    // A deletion is remembered as "missing".
    request.delete(&k).await.unwrap();
    assert_eq!(request.get(&k).await.unwrap(), None);
    // A failed commit forgets what it would have written.
    request.insert(&item("a", 4)).await.unwrap();
    assert_eq!(request.get(&k).await.unwrap(), Some(item("a", 4)));
    let refused = request.insert(&item("a", 5)).await;
    assert!(
        matches!(refused, Err(Error::AlreadyExists { .. })),
        "{refused:?}"
    );
    assert_eq!(request.get(&k).await.unwrap(), Some(item("a", 4)));
    // Transactions and queries read the database, never the scope's memory.
    db.replace(&item("a", 6)).await.unwrap();
    let read = request
        .transaction(|tx| {
            let k = k.clone();
            async move { tx.get(&k).await }
        })
        .await
        .unwrap();
    assert_eq!(read, Some(item("a", 6)));
    let page = request.query::<Item>().fetch().await.unwrap();
    assert_eq!(page.items, [item("a", 6)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_context_cache_answers_what_the_handle_read_and_wrote_embedded() {
    the_context_cache_answers_what_the_handle_read_and_wrote(Backend::Embedded).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_context_cache_answers_what_the_handle_read_and_wrote_firestore() {
    the_context_cache_answers_what_the_handle_read_and_wrote(Backend::Firestore).await;
}

/// Reads fill the cache, then are answered from it; what Redis holds is NDB's form.
async fn reads_fill_then_hit(backend: Backend) {
    let Some(redis) = redis() else { return };
    let Some(db) = cached(backend, "cache_fill", &redis).await else {
        return;
    };
    db.replace(&item("a", 1)).await.unwrap();
    assert_eq!(db.get(&key("a")).await.unwrap(), Some(item("a", 1)));
    let stats = db.cache_stats();
    assert_eq!((stats.hits, stats.misses), (0, 1), "{stats:?}");
    assert_eq!(db.get(&key("a")).await.unwrap(), Some(item("a", 1)));
    assert_eq!(db.cache_stats().hits, 1);
    // A missing entity is not cached: read from the database each time.
    assert_eq!(db.get(&key("nothing")).await.unwrap(), None);
    assert_eq!(db.get(&key("nothing")).await.unwrap(), None);
    assert_eq!(db.cache_stats().hits, 1);
    // A kind that opts out is never read from the cache, nor written to it.
    let private = Private {
        name: KeyName::new("p").unwrap(),
        v: 1,
    };
    db.replace(&private).await.unwrap();
    for _ in 0..2 {
        assert_eq!(
            db.get(&Private::key(KeyName::new("p").unwrap()))
                .await
                .unwrap(),
            Some(private.clone())
        );
    }
    assert_eq!(db.cache_stats().hits, 1);
    // Item "a" only: the missing key's reader released its lock, the private kind is not
    // there.
    assert_eq!(redis.command(&["DBSIZE"]).unwrap(), ":1");
    let cache_key = one_key(&redis);
    assert_eq!(
        redis.raw(&[b"TTL", &cache_key]).unwrap(),
        b":-1",
        "kept until written"
    );
    // A kind with a timeout is cached that long.
    let brief = Brief {
        name: KeyName::new("b").unwrap(),
        v: 1,
    };
    let brief_key = Brief::key(KeyName::new("b").unwrap());
    db.replace(&brief).await.unwrap();
    let (hits, misses) = (db.cache_stats().hits, db.cache_stats().misses);
    for _ in 0..2 {
        assert_eq!(db.get(&brief_key).await.unwrap(), Some(brief.clone()));
    }
    assert_eq!(
        (db.cache_stats().hits, db.cache_stats().misses),
        (hits + 1, misses + 1)
    );
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    db.get(&brief_key).await.unwrap();
    assert_eq!(db.cache_stats().misses, misses + 2, "expired, read again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_fill_the_global_cache_then_hit_it_embedded() {
    reads_fill_then_hit(Backend::Embedded).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_fill_the_global_cache_then_hit_it_firestore() {
    reads_fill_then_hit(Backend::Firestore).await;
}

/// After a put, a delete, a failed commit or a transaction, the next read is the database's.
async fn no_stale_read_after_a_write(backend: Backend) {
    let Some(redis) = redis() else { return };
    let Some(db) = cached(backend, "cache_writes", &redis).await else {
        return;
    };
    let other = db.without_global_cache();
    let read = async || db.get(&key("a")).await.unwrap();
    let warm = async || {
        let first = read().await;
        assert_eq!(read().await, first);
        first
    };
    db.replace(&item("a", 1)).await.unwrap();
    assert_eq!(warm().await, Some(item("a", 1)));
    db.put(&item("a", 2)).await.unwrap();
    assert_eq!(warm().await, Some(item("a", 2)), "after a put");
    db.delete(&key("a")).await.unwrap();
    assert_eq!(warm().await, None, "after a delete");
    db.insert(&item("a", 3)).await.unwrap();
    assert_eq!(warm().await, Some(item("a", 3)), "after an insert");
    let refused = db.insert(&item("a", 4)).await;
    assert!(
        matches!(refused, Err(Error::AlreadyExists { .. })),
        "{refused:?}"
    );
    assert_eq!(warm().await, Some(item("a", 3)), "after a failed commit");
    db.transaction(|tx| async move {
        let mut a = tx.get(&key("a")).await?.expect("written");
        a.v += 10;
        tx.put(&a).await
    })
    .await
    .unwrap();
    assert_eq!(warm().await, Some(item("a", 13)), "after a transaction");
    // A handle that reads around the cache still locks what it writes.
    other.put(&item("a", 20)).await.unwrap();
    assert_eq!(
        warm().await,
        Some(item("a", 20)),
        "after another handle's put"
    );
    let stats = db.cache_stats();
    assert!(stats.hits >= 6 && stats.bypasses == 0, "{stats:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_stale_read_after_a_write_embedded() {
    no_stale_read_after_a_write(Backend::Embedded).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_stale_read_after_a_write_firestore() {
    no_stale_read_after_a_write(Backend::Firestore).await;
}

/// A writer killed between its lock and its commit leaves a lock: readers read the database
/// and cache nothing until it expires; then the cache fills again.
async fn a_crashed_writers_lock_expires(backend: Backend) {
    let Some(redis) = redis() else { return };
    let Some(db) = cached(backend, "cache_crash", &redis).await else {
        return;
    };
    db.replace(&item("a", 1)).await.unwrap();
    db.get(&key("a")).await.unwrap();
    let cache_key = one_key(&redis);
    assert!(cache_key.starts_with(b"NDB30"), "{cache_key:?}");
    // A writer locks, then dies before its commit.
    let lock = format!("00.{}", "0a1b2c3d-0000-4000-8000-000000000000");
    redis
        .raw(&[b"SET", &cache_key, lock.as_bytes(), b"EX", b"1"])
        .unwrap();
    for _ in 0..3 {
        assert_eq!(db.get(&key("a")).await.unwrap(), Some(item("a", 1)));
    }
    assert_eq!(db.cache_stats().locked, 3);
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let hits = db.cache_stats().hits;
    db.get(&key("a")).await.unwrap();
    db.get(&key("a")).await.unwrap();
    assert_eq!(db.cache_stats().hits, hits + 1, "filled again, then hit");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_writers_lock_expires_embedded() {
    a_crashed_writers_lock_expires(Backend::Embedded).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_writers_lock_expires_firestore() {
    a_crashed_writers_lock_expires(Backend::Firestore).await;
}

/// A real writer killed between its lock and its answer, on the Firestore emulator: its commit
/// reaches the database but the answer is lost (a fault proxy swallows it), and its task is
/// dropped while it waits, as a process that dies. Its lock stays in Redis: readers read the
/// new value from the database and cache nothing until the lock expires; then the cache fills
/// with the new value. No read returns the value the commit replaced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_killed_after_its_commit_was_sent_leaves_a_lock_readers_read_around() {
    let Some(redis) = redis() else { return };
    let Some(emulator) = harness::shared_emulator(Backend::Firestore) else {
        return;
    };
    let proxy = FaultProxy::start(emulator.port).await;
    let cache = GlobalCache::redis(&redis.url())
        .unwrap()
        // Long enough for the steps below on a loaded machine.
        .lock_time(Duration::from_secs(5));
    let db = Db::cloud_builder(harness::PROJECT)
        .endpoint(proxy.endpoint())
        .timeout(Duration::from_secs(30))
        .build()
        .await
        .unwrap()
        .namespace("cache_killed_writer")
        .unwrap()
        .with_global_cache(cache);
    db.replace(&item("a", 1)).await.unwrap();
    assert_eq!(db.get(&key("a")).await.unwrap(), Some(item("a", 1)));
    let cache_key = one_key(&redis);
    let cached = redis.raw(&[b"GET", &cache_key]).unwrap();
    assert!(
        !cached.starts_with(b"00"),
        "the entity is cached, not locked"
    );

    proxy.set(Fault::SwallowAnswers);
    let writer = {
        let db = db.clone();
        tokio::spawn(async move { db.replace(&item("a", 2)).await })
    };
    // Killed once its lock is in Redis and its commit is in the database.
    let mut waited = 0;
    while !redis.raw(&[b"GET", &cache_key]).unwrap().starts_with(b"00") {
        waited += 1;
        assert!(waited < 200, "the writer never locked its key");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let direct = Db::cloud_builder(harness::PROJECT)
        .endpoint(format!("http://127.0.0.1:{}", emulator.port))
        .build()
        .await
        .unwrap()
        .namespace("cache_killed_writer")
        .unwrap();
    let mut waited = 0;
    while direct.get(&key("a")).await.unwrap() != Some(item("a", 2)) {
        waited += 1;
        assert!(
            waited < 200,
            "the writer's commit never reached the database"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    writer.abort();
    assert!(writer.await.unwrap_err().is_cancelled());
    proxy.set(Fault::None);
    proxy.reset_all();

    let locked = db.cache_stats().locked;
    for _ in 0..3 {
        assert_eq!(
            db.get(&key("a")).await.unwrap(),
            Some(item("a", 2)),
            "read from the database while the dead writer's lock stands"
        );
    }
    assert_eq!(db.cache_stats().locked, locked + 3);
    assert!(
        redis.raw(&[b"GET", &cache_key]).unwrap().starts_with(b"00"),
        "the lock stands until it expires"
    );
    tokio::time::sleep(Duration::from_millis(5_500)).await;
    let hits = db.cache_stats().hits;
    assert_eq!(db.get(&key("a")).await.unwrap(), Some(item("a", 2)));
    assert_eq!(db.get(&key("a")).await.unwrap(), Some(item("a", 2)));
    assert_eq!(db.cache_stats().hits, hits + 1, "filled again, then hit");
}

/// The one key Redis holds.
fn one_key(redis: &Redis) -> Vec<u8> {
    let key = redis.raw(&[b"RANDOMKEY"]).unwrap();
    assert_ne!(key, b"$-1", "a key is cached");
    key
}

/// Redis paused (slow), then stopped mid-run: reads keep working, from the database, within
/// the timeout, each bypass counted; writes fail unwritten; Redis back, the cache serves again.
async fn redis_slow_or_stopped_is_read_around(backend: Backend) {
    let Some(redis) = redis() else { return };
    let port = redis.port;
    let Some(db) = cached(backend, "cache_down", &redis).await else {
        return;
    };
    db.replace(&item("a", 1)).await.unwrap();
    db.get(&key("a")).await.unwrap();
    db.get(&key("a")).await.unwrap();
    assert_eq!(db.cache_stats().hits, 1);
    // Slow: Redis answers no client for 3 s. A kind that opts out does not ask it.
    let private = Private {
        name: KeyName::new("p").unwrap(),
        v: 1,
    };
    db.replace(&private).await.unwrap();
    assert_eq!(
        redis.command(&["CLIENT", "PAUSE", "3000", "ALL"]).unwrap(),
        "+OK"
    );
    let started = std::time::Instant::now();
    let private_key = Private::key(KeyName::new("p").unwrap());
    assert_eq!(db.get(&private_key).await.unwrap(), Some(private));
    assert!(
        started.elapsed() < Duration::from_millis(90),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(db.cache_stats().bypasses, 0);
    let started = std::time::Instant::now();
    assert_eq!(db.get(&key("a")).await.unwrap(), Some(item("a", 1)));
    assert!(
        started.elapsed() < Duration::from_millis(1_500),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(db.cache_stats().bypasses, 1);
    drop(redis);
    let started = std::time::Instant::now();
    for _ in 0..5 {
        assert_eq!(db.get(&key("a")).await.unwrap(), Some(item("a", 1)));
    }
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "reads are not slowed past the timeout: {:?}",
        started.elapsed()
    );
    assert_eq!(db.cache_stats().bypasses, 6);
    let refused = db.put(&item("a", 2)).await;
    assert!(
        matches!(refused, Err(Error::Unavailable { .. })),
        "{refused:?}"
    );
    assert_eq!(
        db.without_global_cache().get(&key("a")).await.unwrap(),
        Some(item("a", 1)),
        "nothing written"
    );
    let redis = Redis::start_on(port).expect("Redis starts again");
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    db.put(&item("a", 3)).await.unwrap();
    assert_eq!(db.get(&key("a")).await.unwrap(), Some(item("a", 3)));
    let hits = db.cache_stats().hits;
    assert_eq!(db.get(&key("a")).await.unwrap(), Some(item("a", 3)));
    assert_eq!(db.cache_stats().hits, hits + 1);
    drop(redis);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_slow_or_stopped_is_read_around_embedded() {
    redis_slow_or_stopped_is_read_around(Backend::Embedded).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_slow_or_stopped_is_read_around_firestore() {
    redis_slow_or_stopped_is_read_around(Backend::Firestore).await;
}

/// Readers and writers at once, on two handles (two processes' worth: each its own
/// connection), over a few keys: a read never returns a value older than one whose write had
/// finished before the read began.
async fn concurrent_readers_and_writers_read_nothing_stale(backend: Backend) {
    let Some(redis) = redis() else { return };
    let Some(a) = cached(backend, "cache_race", &redis).await else {
        return;
    };
    let b = a.with_global_cache(GlobalCache::redis(&redis.url()).unwrap());
    const KEYS: usize = 4;
    let written: Arc<Vec<AtomicI64>> = Arc::new((0..KEYS).map(|_| AtomicI64::new(0)).collect());
    for k in 0..KEYS {
        a.replace(&item(&format!("k{k}"), 0)).await.unwrap();
    }
    let stale = Arc::new(AtomicUsize::new(0));
    let reads = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for t in 0..6usize {
        let db = if t % 2 == 0 { a.clone() } else { b.clone() };
        let (written, stale, reads) = (written.clone(), stale.clone(), reads.clone());
        tasks.push(tokio::spawn(async move {
            let mut rng = fastrand::Rng::with_seed(t as u64);
            for step in 1..=60i64 {
                let mut k = rng.usize(..KEYS);
                if t < 2 {
                    // Writers: each its own keys, with increasing values, recorded once
                    // written.
                    k = k / 2 * 2 + t;
                    let name = format!("k{k}");
                    db.replace(&item(&name, step)).await.unwrap();
                    written[k].fetch_max(step, Ordering::SeqCst);
                } else {
                    let name = format!("k{k}");
                    let floor = written[k].load(Ordering::SeqCst);
                    let got = db.get(&key(&name)).await.unwrap().expect("written").v;
                    reads.fetch_add(1, Ordering::Relaxed);
                    if got < floor {
                        stale.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(
        stale.load(Ordering::Relaxed),
        0,
        "stale reads among {reads:?}"
    );
    let stats = a.cache_stats();
    assert!(stats.hits > 0, "the cache served some reads: {stats:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_readers_and_writers_read_nothing_stale_embedded() {
    concurrent_readers_and_writers_read_nothing_stale(Backend::Embedded).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_readers_and_writers_read_nothing_stale_firestore() {
    concurrent_readers_and_writers_read_nothing_stale(Backend::Firestore).await;
}

/// What the global cache answers is logged: one `debug` event per lookup with its counts, and
/// a `warn` (with the reason, without keys) when Redis does not answer.
#[tokio::test]
async fn the_global_cache_reports_through_tracing() {
    use datastore_entity_tests::recorder::{self, Recorder};
    let Some(redis) = redis() else { return };
    let recorded = Recorder::default();
    let _guard = recorder::scoped(recorded.clone());
    let db = Db::in_memory().with_global_cache(GlobalCache::redis(&redis.url()).unwrap());
    db.replace(&item("secret-name", 1)).await.unwrap();
    db.get(&key("secret-name")).await.unwrap();
    db.get(&key("secret-name")).await.unwrap();
    drop(redis);
    db.get(&key("secret-name")).await.unwrap();
    let logged = recorded.take();
    let lookups: Vec<String> = logged
        .iter()
        .filter(|l| l.text().contains("global cache lookup"))
        .map(|l| l.text())
        .collect();
    assert_eq!(lookups.len(), 3, "{lookups:#?}");
    for (lookup, counted) in lookups.iter().zip(["misses=1", "hits=1", "bypassed=1"]) {
        assert!(lookup.contains(counted), "{counted} in {lookup}");
    }
    let warned: Vec<&datastore_entity_tests::recorder::Logged> = logged
        .iter()
        .filter(|l| l.level == tracing::Level::WARN)
        .collect();
    assert_eq!(warned.len(), 1, "{warned:#?}");
    assert!(warned[0].text().contains("did not answer"), "{warned:?}");
    assert!(
        !logged
            .iter()
            .any(|l| l.level < tracing::Level::DEBUG && l.text().contains("secret-name"))
    );
}

/// A large entity, near the service's 1 MiB limit.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(kind = "Large")]
struct Large {
    #[key]
    id: KeyId,
    #[exclude_from_index]
    body: String,
}

/// Twelve entities of 900 KB each, read at once: offered to Redis a few MiB at a time, all
/// cached, then all read from it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_large_entities_are_cached_a_few_mib_at_a_time() {
    let Some(redis) = redis() else { return };
    let Some(db) = cached(Backend::Embedded, "cache_large", &redis).await else {
        return;
    };
    let db = db.with_global_cache(
        GlobalCache::redis(&redis.url())
            .unwrap()
            .timeout(Duration::from_secs(2)),
    );
    let entities: Vec<Large> = (1..=12)
        .map(|i| Large {
            id: KeyId::new(i).unwrap(),
            body: char::from(b'a' + i as u8).to_string().repeat(900_000),
        })
        .collect();
    // 10.8 MB: two commits (one is at most 10 MiB).
    db.put_chunked(&entities).await.unwrap();
    let keys: Vec<Key<Large>> = (1..=12)
        .map(|i| Large::key(KeyId::new(i).unwrap()))
        .collect();
    let first: Vec<Option<Large>> = db.get_many(&keys).await.unwrap();
    assert_eq!(first.iter().flatten().count(), 12);
    assert_eq!(redis.command(&["DBSIZE"]).unwrap(), ":12");
    let again = db.get_many(&keys).await.unwrap();
    assert_eq!(again, first);
    let stats = db.cache_stats();
    assert_eq!(
        (stats.misses, stats.hits, stats.bypasses),
        (12, 12, 0),
        "{stats:?}"
    );
}

/// Reads and writes at once through clones of one handle with a context cache: a read never
/// returns a value older than a write that had finished before it began.
async fn the_context_cache_stays_exact_under_concurrent_reads_and_writes(
    backend: Backend,
    steps: i64,
) {
    let Some(db) = harness::db(backend, "context_race").await else {
        return;
    };
    let request = db.with_context_cache();
    request.replace(&item("a", 0)).await.unwrap();
    let written = Arc::new(AtomicI64::new(0));
    let stale = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for t in 0..4 {
        let (db, written, stale) = (request.clone(), written.clone(), stale.clone());
        tasks.push(tokio::spawn(async move {
            for v in 1..=steps {
                if t == 0 {
                    // A put forgets the key (reads go to the database), a replace records it.
                    match v % 2 {
                        0 => db.replace(&item("a", v)).await.unwrap(),
                        _ => db.put(&item("a", v)).await.unwrap(),
                    };
                    written.store(v, Ordering::SeqCst);
                } else {
                    let floor = written.load(Ordering::SeqCst);
                    let got = db.get(&key("a")).await.unwrap().expect("written").v;
                    if got < floor {
                        stale.fetch_add(1, Ordering::Relaxed);
                    }
                    tokio::task::yield_now().await;
                }
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(stale.load(Ordering::Relaxed), 0);
    assert_eq!(
        request.get(&key("a")).await.unwrap(),
        Some(item("a", steps))
    );
    assert!(request.cache_stats().context_hits > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_context_cache_stays_exact_under_concurrent_reads_and_writes_embedded() {
    the_context_cache_stays_exact_under_concurrent_reads_and_writes(Backend::Embedded, 3_000).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_context_cache_stays_exact_under_concurrent_reads_and_writes_firestore() {
    the_context_cache_stays_exact_under_concurrent_reads_and_writes(Backend::Firestore, 60).await;
}

/// A commit that writes one key twice is refused, and leaves the key unlocked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_commit_with_a_key_twice_leaves_it_unlocked() {
    let Some(redis) = redis() else { return };
    let Some(db) = cached(Backend::Embedded, "cache_twice", &redis).await else {
        return;
    };
    db.replace(&item("a", 1)).await.unwrap();
    let refused = db.put_many(&[item("a", 2), item("a", 3)]).await;
    assert!(refused.is_err(), "{refused:?}");
    db.get(&key("a")).await.unwrap();
    db.get(&key("a")).await.unwrap();
    let stats = db.cache_stats();
    assert_eq!((stats.locked, stats.hits), (0, 1), "{stats:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn engines_sharing_a_redis_never_read_each_others_entities() {
    // Issue #48: the engine's keys name no project, so two engines' cache keys were one.
    let Some(redis) = redis() else { return };
    let cache = || GlobalCache::redis(&redis.url()).unwrap();
    let dir = std::env::temp_dir().join(format!("shared-redis-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (path_a, path_b) = (dir.join("a.redb"), dir.join("b.redb"));
    for (a, b) in [
        (Db::in_memory(), Db::in_memory()),
        (Db::open(&path_a).unwrap(), Db::open(&path_b).unwrap()),
    ] {
        let (a, b) = (a.with_global_cache(cache()), b.with_global_cache(cache()));
        a.replace(&item("shared", 1)).await.unwrap();
        assert_eq!(
            a.get(&key("shared")).await.unwrap(),
            Some(item("shared", 1))
        );
        assert_eq!(
            a.get(&key("shared")).await.unwrap(),
            Some(item("shared", 1))
        );
        assert_eq!(a.cache_stats().hits, 1, "A reads its own through the cache");
        assert_eq!(
            b.get(&key("shared")).await.unwrap(),
            None,
            "B never held it"
        );
        b.replace(&item("shared", 2)).await.unwrap();
        assert_eq!(
            b.get(&key("shared")).await.unwrap(),
            Some(item("shared", 2))
        );
        assert_eq!(
            a.get(&key("shared")).await.unwrap(),
            Some(item("shared", 1))
        );
    }
    // A file keeps its identity: reopened, it reads what it cached.
    let reopened = Db::open(&path_a).unwrap().with_global_cache(cache());
    assert_eq!(
        reopened.get(&key("shared")).await.unwrap(),
        Some(item("shared", 1))
    );
    assert_eq!(reopened.cache_stats().hits, 1);
    std::fs::remove_dir_all(&dir).unwrap();
}
