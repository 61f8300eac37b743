//! Contention on one counter (R-S1): 8 writers × 100 increments with a 1 ms round trip
//! injected into every backend call, on one plain entity (a transaction each) and on a
//! `#[sharded(20)]` field (a server-side increment of a random shard; a transaction only to
//! create a shard). Reports committed increments per second (divan's items/s), and after the runs the
//! transaction attempts and the increments lost (retries exhausted), which must be 0 for the
//! sharded field.
//!
//! `cargo bench -p datastore-entity-benches --bench counters`
#![allow(missing_docs)]

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use datastore_entity::prelude::*;
use datastore_entity_benches::runtime;
use datastore_entity_tests::Latency;
use divan::Bencher;
use divan::counter::ItemsCount;

const WRITERS: i64 = 8;
const EACH: i64 = 100;
const ROUND_TRIP: Duration = Duration::from_millis(1);

/// One plain counter entity.
#[derive(Entity, Debug, Clone, PartialEq)]
struct Plain {
    #[key]
    name: KeyName,
    #[exclude_from_index]
    views: i64,
}

/// The same counter, in 20 shards.
#[derive(Entity, Debug, Clone, PartialEq)]
struct Sharded {
    #[key]
    name: KeyName,
    #[sharded(20)]
    views: i64,
}

/// What the runs of one variant added up to.
struct Tally {
    runs: AtomicUsize,
    attempts: AtomicUsize,
    lost: AtomicUsize,
    micros: AtomicU64,
}

impl Tally {
    const fn new() -> Self {
        Tally {
            runs: AtomicUsize::new(0),
            attempts: AtomicUsize::new(0),
            lost: AtomicUsize::new(0),
            micros: AtomicU64::new(0),
        }
    }

    /// One run: the transactions it began, the counter's final value, how long it took.
    fn record(&self, begun: usize, total: i64, elapsed: Duration) {
        self.runs.fetch_add(1, Ordering::Relaxed);
        self.attempts.fetch_add(begun, Ordering::Relaxed);
        self.lost
            .fetch_add((WRITERS * EACH - total) as usize, Ordering::Relaxed);
        self.micros
            .fetch_add(elapsed.as_micros() as u64, Ordering::Relaxed);
    }
}

static PLAIN: Tally = Tally::new();
static SHARDED: Tally = Tally::new();

fn main() {
    divan::main();
    for (name, tally) in [("plain entity", &PLAIN), ("#[sharded(20)]", &SHARDED)] {
        let runs = tally.runs.load(Ordering::Relaxed).max(1) as f64;
        let lost = tally.lost.load(Ordering::Relaxed) as f64;
        let seconds = tally.micros.load(Ordering::Relaxed) as f64 / 1e6;
        println!(
            "{name:>16}: per run of {} increments, {:.0} transaction attempts, {:.1} increments \
             lost; {:.0} committed increments/s",
            WRITERS * EACH,
            tally.attempts.load(Ordering::Relaxed) as f64 / runs,
            lost / runs,
            ((WRITERS * EACH) as f64 * runs - lost) / seconds.max(f64::EPSILON),
        );
    }
}

/// A counter under contention: how it is created, incremented and read.
trait Counter: Entity + Sized {
    fn create(name: KeyName) -> Self;
    fn increment(db: Db, key: Key<Self>) -> impl Future<Output = ()> + Send;
    fn total(db: Db, key: Key<Self>) -> impl Future<Output = i64> + Send;
}

impl Counter for Plain {
    fn create(name: KeyName) -> Self {
        Plain { name, views: 0 }
    }

    async fn increment(db: Db, key: Key<Self>) {
        // An increment whose retries run out is lost: counted by the tally.
        let _ = db
            .transaction(async |tx| {
                let mut page = tx.get(&key).await?.expect("exists");
                page.views += 1;
                tx.put(&page).await?;
                Ok::<_, Error>(())
            })
            .await;
    }

    async fn total(db: Db, key: Key<Self>) -> i64 {
        db.get(&key).await.expect("get").expect("exists").views
    }
}

impl Counter for Sharded {
    fn create(name: KeyName) -> Self {
        Sharded { name, views: 0 }
    }

    async fn increment(db: Db, key: Key<Self>) {
        let _ = Sharded::increment_views(&db, &key, 1).await;
    }

    async fn total(db: Db, key: Key<Self>) -> i64 {
        Sharded::views_total(&db, &key).await.expect("total")
    }
}

/// One sample: a fresh engine behind the round trip, 8 writers × 100 increments.
fn contend<C: Counter>(bencher: Bencher, tally: &Tally, key: fn(KeyName) -> Key<C>) {
    let runtime = runtime();
    bencher
        .counter(ItemsCount::new((WRITERS * EACH) as usize))
        .bench_local(|| {
            runtime.block_on(async {
                let (backend, db) = Latency::new(ROUND_TRIP);
                let start = Instant::now();
                let name = KeyName::new("page").expect("valid");
                db.put(&C::create(name.clone())).await.expect("put");
                let key = key(name);
                let writers: Vec<_> = (0..WRITERS)
                    .map(|_| {
                        let (db, key) = (db.clone(), key.clone());
                        tokio::spawn(async move {
                            for _ in 0..EACH {
                                C::increment(db.clone(), key.clone()).await;
                            }
                        })
                    })
                    .collect();
                for w in writers {
                    w.await.expect("writer");
                }
                let total = C::total(db, key).await;
                tally.record(backend.transactions_begun(), total, start.elapsed());
            });
        });
}

#[divan::bench(sample_count = 5, sample_size = 1)]
fn plain_entity(bencher: Bencher) {
    contend::<Plain>(bencher, &PLAIN, Plain::key);
}

#[divan::bench(sample_count = 5, sample_size = 1)]
fn sharded_20(bencher: Bencher) {
    contend::<Sharded>(bencher, &SHARDED, Sharded::key);
}
