//! The global cache (issue #31): `get` of one order the cache holds (a Redis hit) against the
//! same `get` as a lookup on Google's Firestore emulator and on the embedded engine, without a
//! cache; and what the locking protocol adds to a `put` (two Redis calls around the commit), on
//! each. One Redis and one emulator, started once on loopback ports and stopped at the end.
//!
//! `cargo bench -p datastore-entity-benches --bench cache` (needs Debian's redis-server and the
//! Firestore emulator).
#![allow(missing_docs)]

use std::sync::OnceLock;

use datastore_entity::GlobalCache;
use datastore_entity::prelude::*;
use datastore_entity_benches::{Order, order, runtime};
use datastore_entity_tests::harness::{Backend, Emulator};
use datastore_entity_tests::redis::Redis;
use divan::Bencher;

/// Where Redis and the emulator listen, set by `main` before any benchmark runs.
static PORTS: OnceLock<(u16, u16)> = OnceLock::new();

fn main() {
    let redis = Redis::start().unwrap_or_else(|r| panic!("this benchmark needs Redis: {r}"));
    let emulator = Emulator::start(Backend::Firestore)
        .unwrap_or_else(|r| panic!("this benchmark needs the Firestore emulator: {r}"));
    PORTS.set((redis.port, emulator.port)).expect("set once");
    divan::main();
    drop(emulator);
    drop(redis);
}

/// Handles on the emulator and the engine, with and without the global cache, order 1 stored
/// and cached.
struct Handles {
    runtime: tokio::runtime::Runtime,
    emulator: Db,
    emulator_cached: Db,
    engine: Db,
    engine_cached: Db,
}

fn handles() -> &'static Handles {
    static HANDLES: OnceLock<Handles> = OnceLock::new();
    HANDLES.get_or_init(|| {
        let (redis, emulator) = *PORTS.get().expect("main started them");
        let runtime = runtime();
        let cache = GlobalCache::redis(&format!("redis://127.0.0.1:{redis}/0")).expect("a URL");
        let (emulator, engine) = runtime.block_on(async {
            let emulator = Db::cloud_builder("bench")
                .endpoint(format!("http://127.0.0.1:{emulator}"))
                .build()
                .await
                .expect("the emulator answers");
            (emulator, Db::in_memory())
        });
        let handles = Handles {
            emulator_cached: emulator.with_global_cache(cache.clone()),
            engine_cached: engine
                .namespace("cached")
                .expect("a namespace")
                .with_global_cache(cache),
            emulator,
            engine,
            runtime,
        };
        handles.runtime.block_on(async {
            for db in [&handles.emulator, &handles.engine, &handles.engine_cached] {
                db.put(&order(1)).await.expect("stored");
            }
            for db in [&handles.emulator_cached, &handles.engine_cached] {
                db.get(&Order::key(KeyId::new(1).unwrap()))
                    .await
                    .expect("cached");
            }
        });
        handles
    })
}

fn get(bencher: Bencher, db: impl Fn(&Handles) -> &Db) {
    let handles = handles();
    let db = db(handles);
    let key = Order::key(KeyId::new(1).unwrap());
    bencher.bench_local(|| {
        let found = handles.runtime.block_on(db.get(&key)).expect("a get");
        assert!(found.is_some());
    });
}

fn put(bencher: Bencher, db: impl Fn(&Handles) -> &Db) {
    let handles = handles();
    let db = db(handles);
    let mut n = 0;
    bencher.bench_local(|| {
        n += 1;
        let mut written = order(2);
        written.items = n;
        handles.runtime.block_on(db.put(&written)).expect("a put");
    });
}

#[divan::bench(sample_count = 200)]
fn get_cached_on_the_emulator(bencher: Bencher) {
    get(bencher, |h| &h.emulator_cached);
}

#[divan::bench(sample_count = 200)]
fn get_from_the_emulator(bencher: Bencher) {
    get(bencher, |h| &h.emulator);
}

#[divan::bench(sample_count = 200)]
fn get_cached_on_the_engine(bencher: Bencher) {
    get(bencher, |h| &h.engine_cached);
}

#[divan::bench(sample_count = 200)]
fn get_from_the_engine(bencher: Bencher) {
    get(bencher, |h| &h.engine);
}

#[divan::bench(sample_count = 200)]
fn put_locked_on_the_emulator(bencher: Bencher) {
    put(bencher, |h| &h.emulator_cached);
}

#[divan::bench(sample_count = 200)]
fn put_on_the_emulator(bencher: Bencher) {
    put(bencher, |h| &h.emulator);
}

#[divan::bench(sample_count = 200)]
fn put_locked_on_the_engine(bencher: Bencher) {
    put(bencher, |h| &h.engine_cached);
}

#[divan::bench(sample_count = 200)]
fn put_on_the_engine(bencher: Bencher) {
    put(bencher, |h| &h.engine);
}
