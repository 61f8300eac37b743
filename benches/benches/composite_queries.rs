//! Queries the service serves from a composite index, on an engine where nobody declared one
//! (as on the server, which like the Firestore emulator needs none declared): the index built
//! on the query's first use (`Embedded::build_indexes(true)`) against the engine
//! walking the order's index and reading entities until the page fills (`build_indexes(false)`),
//! side by side, in memory and on a file. `customer = ? ORDER BY total DESC LIMIT 20` over
//! 30,000 orders of 200 customers. And what the build costs: the queries on a fresh engine
//! until the index is whole (each backfills a slice of the kind's entities and is answered
//! without the index), against one query walking the order.
//!
//! `cargo bench -p datastore-entity-benches --bench composite_queries`
#![allow(missing_docs)]

use std::sync::{Arc, OnceLock};

use datastore_entity::backend::embedded::Embedded;
use datastore_entity::backend::{
    Backend, FilterNode, Mask, Mutation, PropertyFilter, PropertyOrder, QuerySpec,
};
use datastore_entity::{
    Direction, IdOrName, KeyId, Operator, PartitionId, PathElement, Property, PropertyMap, RawKey,
    Value,
};
use datastore_entity_benches::runtime;
use divan::Bencher;

const ORDERS: i64 = 30_000;
const CUSTOMERS: i64 = 200;

fn main() {
    divan::main();
    let _ = std::fs::remove_dir_all(scratch());
}

fn scratch() -> std::path::PathBuf {
    std::env::temp_dir().join(format!("composite-queries-{}", std::process::id()))
}

fn key(n: i64) -> RawKey {
    let element = PathElement::new("Order", Some(IdOrName::Id(KeyId::new(n).unwrap()))).unwrap();
    RawKey::new(Some(PartitionId::default()), vec![element]).unwrap()
}

/// An engine holding the orders, strict index mode off, building indexes or not, queried
/// until the index is whole (when it is built).
fn engine(on_file: bool, build: bool) -> Arc<Embedded> {
    let engine = loaded(on_file, build);
    // The queries that build the index (a slice each), when it may, are not measured here.
    let calls: &dyn Backend = &*engine;
    let runtime = runtime();
    runtime.block_on(calls.run_query(&page(0), None)).unwrap();
    while build && engine.indexes().is_empty() {
        runtime.block_on(calls.run_query(&page(0), None)).unwrap();
    }
    engine
}

/// An engine holding the orders, strict index mode off, building indexes or not.
fn loaded(on_file: bool, build: bool) -> Arc<Embedded> {
    let engine = match on_file {
        true => {
            std::fs::create_dir_all(scratch()).unwrap();
            static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
            let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let path = scratch().join(format!("orders-{build}-{n}.redb"));
            Embedded::open(path).unwrap()
        }
        false => Embedded::in_memory(),
    };
    let engine = Arc::new(engine.strict_indexes(false).build_indexes(build));
    runtime().block_on(async {
        let calls: &dyn Backend = &*engine;
        for chunk in (1..=ORDERS).collect::<Vec<_>>().chunks(500) {
            let writes = chunk
                .iter()
                .map(|&i| {
                    let properties = PropertyMap::from([
                        ("customer", Property::indexed(Value::Integer(i % CUSTOMERS))),
                        (
                            "total",
                            Property::indexed(Value::Integer((i * 7_919) % 100_000)),
                        ),
                        ("note", Property::excluded(Value::String("x".repeat(200)))),
                    ]);
                    Mutation::Upsert(key(i), properties, Mask::Whole)
                })
                .collect();
            calls.commit(writes, None).await.unwrap();
        }
    });
    engine
}

/// `customer = c ORDER BY total DESC LIMIT 20`.
fn page(c: i64) -> QuerySpec {
    QuerySpec {
        kind: "Order".to_owned(),
        filters: vec![FilterNode::Property(PropertyFilter {
            property: "customer".to_owned(),
            op: Operator::Equal,
            value: Value::Integer(c),
        })],
        orders: vec![PropertyOrder {
            property: "total".to_owned(),
            direction: Direction::Descending,
        }],
        limit: Some(20),
        ..QuerySpec::default()
    }
}

fn run(bencher: Bencher, engine: &Embedded) {
    let runtime = runtime();
    let mut customer = (0..CUSTOMERS).cycle();
    bencher.bench_local(|| {
        let spec = page(customer.next().unwrap());
        let calls: &dyn Backend = engine;
        let batch = runtime.block_on(calls.run_query(&spec, None)).unwrap();
        assert_eq!(batch.results.len(), 20);
    });
}

macro_rules! engines {
    ($($name:ident: $file:expr, $build:expr;)*) => {
        $(
            #[divan::bench]
            fn $name(bencher: Bencher) {
                static ENGINE: OnceLock<Arc<Embedded>> = OnceLock::new();
                run(bencher, ENGINE.get_or_init(|| engine($file, $build)));
            }
        )*
    };
}

engines! {
    memory_index_built: false, true;
    memory_walking_the_order: false, false;
    file_index_built: true, true;
    file_walking_the_order: true, false;
}

/// A fresh engine of 30,000 orders queried until the index its query needs is whole (built
/// a slice per query, the queries answered without it until then): the time of those
/// queries, and how many there were. Compare with one query of `*_walking_the_order`.
fn until_whole(bencher: Bencher, on_file: bool) {
    let runtime = runtime();
    bencher
        .with_inputs(|| loaded(on_file, true))
        .bench_local_refs(|engine| {
            let calls: &dyn Backend = &**engine;
            let mut queries = 0;
            while engine.indexes().is_empty() {
                let batch = runtime.block_on(calls.run_query(&page(0), None)).unwrap();
                assert_eq!(batch.results.len(), 20);
                queries += 1;
            }
            eprintln!("\nthe index was whole after {queries} queries");
        });
}

#[divan::bench(sample_count = 3, sample_size = 1)]
fn memory_queries_until_the_index_is_whole(bencher: Bencher) {
    until_whole(bencher, false);
}

#[divan::bench(sample_count = 3, sample_size = 1)]
fn file_queries_until_the_index_is_whole(bencher: Bencher) {
    until_whole(bencher, true);
}
