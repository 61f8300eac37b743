//! A test suite's workload through the same `Db` API, start-up included: the embedded engine
//! (`Db::in_memory()`) against Google's Datastore emulator (started by the harness the
//! conformance suite uses, on a free loopback port, killed after each run).
//!
//! Workload: start, 1,000 puts, 1,000 gets, 100 queries.
//!
//! `cargo bench -p datastore-entity-benches --bench engine_vs_emulator`
#![allow(missing_docs)]

use datastore_entity::prelude::*;
use datastore_entity_benches::{Order, order, runtime};
use datastore_entity_tests::harness::{Backend, Emulator, PROJECT};
use divan::Bencher;

fn main() {
    divan::main();
}

/// 1,000 puts, 1,000 gets, 100 queries (an equality filter, a page of 10).
async fn workload(db: &Db) {
    let mut keys = Vec::with_capacity(1_000);
    for i in 1..=1_000 {
        keys.push(db.put(&order(i)).await.expect("put"));
    }
    for key in &keys {
        assert!(db.get(key).await.expect("get").is_some());
    }
    for i in 0..100 {
        let status = ["new", "paid", "shipped"][i % 3];
        let page = db
            .query::<Order>()
            .filter(Order::STATUS.eq(status))
            .limit(10)
            .fetch()
            .await
            .expect("query");
        assert_eq!(page.items.len(), 10);
    }
}

#[divan::bench(sample_count = 10, sample_size = 1)]
fn engine(bencher: Bencher) {
    let runtime = runtime();
    bencher.bench_local(|| {
        runtime.block_on(async {
            let db = Db::in_memory();
            workload(&db).await;
        });
    });
}

#[divan::bench(sample_count = 3, sample_size = 1)]
fn emulator(bencher: Bencher) {
    let runtime = runtime();
    bencher.bench_local(|| {
        runtime.block_on(async {
            let emulator = Emulator::start(Backend::Datastore).unwrap_or_else(|reason| {
                panic!("this benchmark needs Google's Datastore emulator: {reason}")
            });
            let db = Db::cloud_builder(PROJECT)
                .endpoint(format!("http://127.0.0.1:{}", emulator.port))
                .build()
                .await
                .expect("the emulator answers");
            workload(&db).await;
            drop(emulator);
        });
    });
}
