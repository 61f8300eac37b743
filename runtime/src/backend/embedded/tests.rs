//! What the engine reads to answer: counted at its store. A count and a sum read index
//! entries only, never an entity; a page costs what it holds, not the kind, nor its depth.

use std::cell::Cell;
use std::sync::Arc;

use super::memory::Memory;
use super::store::{Batch, Range, Store};
use super::*;
use crate::backend::{Backend, FoundEntity, Mask, Mutation, StoredReads};
use datastore_entity_core::format::file::ENTITIES;
use datastore_entity_core::model::key::{IdOrName, KeyId, PartitionId, PathElement};
use datastore_entity_core::model::value::{Property, PropertyMap};
use datastore_entity_core::query::spec::{
    FilterNode, Operator, PropertyFilter, PropertyOrder, ResultShape,
};

/// A store in memory that counts what is read: entities, and index entries scanned.
struct Counting {
    inner: Memory,
    counts: Arc<Counts>,
}

#[derive(Default)]
struct Counts {
    entities: std::sync::atomic::AtomicUsize,
    index_entries: std::sync::atomic::AtomicUsize,
}

impl Counts {
    fn take(&self) -> (usize, usize) {
        use std::sync::atomic::Ordering::SeqCst;
        (
            self.entities.swap(0, SeqCst),
            self.index_entries.swap(0, SeqCst),
        )
    }
}

impl Store for Counting {
    fn get(&self, table: &str, key: &[u8], visit: &mut dyn FnMut(&[u8])) -> Result<bool, Error> {
        if table == ENTITIES {
            self.counts
                .entities
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        self.inner.get(table, key, visit)
    }

    fn scan(
        &self,
        table: &str,
        range: Range<'_>,
        reverse: bool,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), Error> {
        let seen = Cell::new(0);
        let result = self.inner.scan(table, range, reverse, &mut |k, v| {
            seen.set(seen.get() + 1);
            visit(k, v)
        });
        let counter = match table {
            ENTITIES => &self.counts.entities,
            _ => &self.counts.index_entries,
        };
        counter.fetch_add(seen.get(), std::sync::atomic::Ordering::SeqCst);
        result
    }

    fn apply(&mut self, batch: Batch) -> Result<(), Error> {
        self.inner.apply(batch)
    }
}

fn key(n: i64) -> RawKey {
    RawKey::new(
        Some(PartitionId::default()),
        vec![PathElement::new("Order", Some(IdOrName::Id(KeyId::new(n).unwrap()))).unwrap()],
    )
    .unwrap()
}

/// An engine holding `n` orders of 10 customers, and its read counts.
async fn orders(n: i64) -> (Embedded, Arc<Counts>) {
    let counts = Arc::new(Counts::default());
    let engine = Embedded::with_store(Box::new(Counting {
        inner: Memory::default(),
        counts: counts.clone(),
    }));
    write_orders(&engine, n).await;
    counts.take();
    (engine, counts)
}

/// Writes orders 1 to `n` of 10 customers into `engine`.
async fn write_orders(engine: &Embedded, n: i64) {
    for chunk in (1..=n).collect::<Vec<_>>().chunks(500) {
        let writes = chunk
            .iter()
            .map(|&i| {
                let properties = PropertyMap::from([
                    ("customer", Property::indexed(Value::Integer(i % 10))),
                    ("total", Property::indexed(Value::Integer(i))),
                ]);
                Mutation::Upsert(key(i), properties, Mask::Whole)
            })
            .collect();
        let calls: &dyn Backend = engine;
        calls.commit(writes, None).await.unwrap();
    }
}

fn customer(c: i64) -> QuerySpec {
    QuerySpec {
        kind: "Order".to_owned(),
        filters: vec![FilterNode::Property(PropertyFilter {
            property: "customer".to_owned(),
            op: Operator::Equal,
            value: Value::Integer(c),
        })],
        ..QuerySpec::default()
    }
}

#[tokio::test]
async fn a_count_and_a_sum_read_index_entries_and_no_entity() {
    let (engine, counts) = orders(1_000).await;
    let engine: &dyn Backend = &engine;
    let count = engine
        .run_aggregation(&customer(3), &Aggregation::Count { up_to: None }, None)
        .await
        .unwrap();
    assert_eq!(count, Value::Integer(100));
    let (entities, entries) = counts.take();
    assert_eq!(entities, 0, "a count reads no entity");
    assert!(entries <= 101, "{entries} index entries for 100 rows");
    let all = QuerySpec {
        kind: "Order".to_owned(),
        ..QuerySpec::default()
    };
    let sum = engine
        .run_aggregation(&all, &Aggregation::Sum("total".to_owned()), None)
        .await
        .unwrap();
    assert_eq!(sum, Value::Integer((1..=1_000).sum()));
    let (entities, entries) = counts.take();
    assert_eq!(entities, 0, "a sum reads no entity");
    assert!(entries <= 1_001, "{entries} index entries for 1,000 values");
}

#[tokio::test]
async fn a_page_costs_what_it_holds_whatever_the_kind_and_the_depth() {
    // A page of 10 ordered by `total`, 990 rows deep, on 1,000 and on 20,000 orders.
    let mut costs = Vec::new();
    for n in [1_000, 20_000] {
        let (engine, counts) = orders(n).await;
        let engine: &dyn Backend = &engine;
        let mut spec = QuerySpec {
            kind: "Order".to_owned(),
            orders: vec![PropertyOrder {
                property: "total".to_owned(),
                direction: datastore_entity_core::model::schema::Direction::Ascending,
            }],
            limit: Some(990),
            ..QuerySpec::default()
        };
        let deep = engine.run_query(&spec, None).await.unwrap();
        spec.start_cursor = deep.results.last().map(|r| r.cursor.clone());
        spec.limit = Some(10);
        counts.take();
        let page = engine.run_query(&spec, None).await.unwrap();
        assert_eq!(page.results.len(), 10);
        assert_eq!(page.results[0].key, key(991));
        costs.push(counts.take());
    }
    // The same few reads: ten entities, and as many index entries (one more where there
    // is a next one to know of).
    for (entities, entries) in &costs {
        assert_eq!(*entities, 10, "{costs:?}");
        assert!((10..=11).contains(entries), "{costs:?}");
    }
}

mod failed_writes;

/// What `run_query_each` handed over: each result's key, and its stored form (`None`: a map).
type Handed = Vec<(RawKey, Option<PropertyMap>)>;

async fn hand_over(engine: &Embedded, spec: &QuerySpec) -> (Handed, crate::backend::BatchEnd) {
    let mut handed = Vec::new();
    let mut read = |key: &RawKey, found: FoundEntity<'_>| {
        let stored = match found {
            FoundEntity::Stored(bytes) => Some(PropertyMap::from_stored(bytes.to_vec()).unwrap()),
            FoundEntity::Map(_) => None,
        };
        handed.push((key.clone(), stored));
        Ok(())
    };
    let end = engine.run_query_each(spec, &mut read).await.unwrap();
    (handed, end)
}

#[tokio::test]
async fn a_page_of_whole_entities_is_handed_over_as_stored_with_one_cursor_for_its_end() {
    let (engine, counts) = orders(100).await;
    let mut spec = QuerySpec {
        kind: "Order".to_owned(),
        orders: vec![PropertyOrder {
            property: "total".to_owned(),
            direction: datastore_entity_core::model::schema::Direction::Descending,
        }],
        limit: Some(4),
        ..QuerySpec::default()
    };
    let batch = (&engine as &dyn Backend)
        .run_query(&spec, None)
        .await
        .unwrap();
    counts.take();
    let (handed, end) = hand_over(&engine, &spec).await;
    // The same results, each entity's stored form read once, and the same end.
    assert_eq!(counts.take().0, 4, "one read of each entity");
    assert_eq!(handed.len(), 4);
    for ((key, stored), result) in handed.iter().zip(&batch.results) {
        assert_eq!(key, &result.key);
        assert_eq!(stored.as_ref(), Some(&result.properties));
    }
    assert_eq!(handed[0].0, key(100));
    assert_eq!(
        (end.end_cursor, end.more_results),
        (batch.end_cursor.clone(), batch.more_results)
    );
    // Resumed from its end, as from the batch's.
    spec.start_cursor = Some(batch.end_cursor);
    let (next, _) = hand_over(&engine, &spec).await;
    assert_eq!(next[0].0, key(96));
    // A projection, and a query through a property mask, are handed over as maps.
    spec.start_cursor = None;
    spec.shape = ResultShape::Projection(vec!["total".to_owned()]);
    assert!(
        hand_over(&engine, &spec)
            .await
            .0
            .iter()
            .all(|(_, s)| s.is_none())
    );
    spec.shape = ResultShape::Full;
    spec.property_mask = Some(vec![vec!["total".into()]]);
    let (masked, _) = hand_over(&engine, &spec).await;
    assert_eq!(masked.len(), 4);
    assert!(masked.iter().all(|(_, s)| s.is_none()));
}

/// A composite index holds one entry per combination of its columns' distinct values (for
/// an ancestor index, per ancestor too), and none for an entity that lacks a column.
#[test]
fn a_composite_index_holds_every_combination_of_its_columns_values() {
    use datastore_entity_core::model::schema::Direction;
    let element = |kind, id| PathElement::new(kind, Some(IdOrName::Id(KeyId::new(id).unwrap())));
    let path = vec![
        element("Customer", 7).unwrap(),
        element("Order", 1).unwrap(),
    ];
    let key = RawKey::new(Some(PartitionId::default()), path).unwrap();
    let strings = ["x", "y", "z"].map(|s| Value::String(s.to_owned()));
    let properties = PropertyMap::from([
        (
            "a",
            Property::indexed(Value::Array(vec![
                Value::Integer(2),
                Value::Integer(1),
                Value::Integer(2),
            ])),
        ),
        ("b", Property::indexed(Value::Array(strings.to_vec()))),
    ]);
    let columns = |names: &[&str]| {
        let direction = [Direction::Ascending, Direction::Descending];
        names
            .iter()
            .zip(direction)
            .map(|(n, d)| (n.to_string(), d))
            .collect()
    };
    let in_index = |index: &index::Composite| -> Vec<_> {
        index::entries(&key, &properties, std::slice::from_ref(index))
            .into_iter()
            .filter(|(table, _)| *table == index.table)
            .map(|(_, entry)| entry)
            .collect()
    };
    let ancestor = index::Composite::new("Order", true, columns(&["a", "b"]));
    let entries = in_index(&ancestor);
    // 2 distinct values of `a` × 3 of `b` × 2 ancestors, all different.
    assert_eq!(entries.len(), 12);
    assert_eq!(
        entries
            .iter()
            .collect::<std::collections::BTreeSet<_>>()
            .len(),
        12
    );
    let plain = index::Composite::new("Order", false, columns(&["b", "a"]));
    assert_eq!(in_index(&plain).len(), 6);
    let missing = index::Composite::new("Order", false, columns(&["a", "c"]));
    assert!(in_index(&missing).is_empty());
}

/// `customer = c ORDER BY total DESC LIMIT 10`: a query the service serves from a composite
/// index.
fn customer_page(c: i64) -> QuerySpec {
    QuerySpec {
        orders: vec![PropertyOrder {
            property: "total".to_owned(),
            direction: datastore_entity_core::model::schema::Direction::Descending,
        }],
        limit: Some(10),
        ..customer(c)
    }
}

/// Queries of `engine` until the composite index they need is built (each backfills a slice):
/// how many it took.
async fn until_built(engine: &Embedded, query: &QuerySpec) -> usize {
    let calls: &dyn Backend = engine;
    for n in 1..=1_000 {
        calls.run_query(query, None).await.unwrap();
        if engine.state().building.is_empty() {
            return n;
        }
    }
    panic!("the index was not built after 1,000 queries");
}

/// Asserts that each of the 10 customers' first `limit` orders by total, descending, are the
/// same in `built` (which built the composite index) as in `walked` (which never did).
async fn same_pages(built: &Embedded, walked: &Embedded, limit: usize) {
    for c in 0..10 {
        let page = QuerySpec {
            limit: Some(limit),
            ..customer_page(c)
        };
        let ours: &dyn Backend = built;
        let theirs: &dyn Backend = walked;
        let built = ours.run_query(&page, None).await.unwrap();
        let walked = theirs.run_query(&page, None).await.unwrap();
        let keys = |b: &QueryBatch| b.results.iter().map(|r| r.key.clone()).collect::<Vec<_>>();
        assert_eq!(keys(&built), keys(&walked), "customer {c}");
    }
}

#[tokio::test]
async fn outside_strict_mode_a_query_builds_the_composite_index_it_needs_once() {
    let mut answers = Vec::new();
    let mut costs = Vec::new();
    for build in [true, false] {
        let (engine, counts) = orders(20_000).await;
        let engine = engine.strict_indexes(false).build_indexes(build);
        let calls: &dyn Backend = &engine;
        // The first query starts the build; each query backfills a slice of it (at least
        // 256 entities, at most 2,048) and is answered without it until it is whole.
        let first = calls.run_query(&customer_page(3), None).await.unwrap();
        if build {
            assert!(
                !engine.state().building.is_empty(),
                "20,000 entities take more than a slice"
            );
            let queries = until_built(&engine, &customer_page(3)).await;
            // 64 to 512 entities a slice (SLICE_ENTITIES, then SLICE_TIME).
            assert!((39..=313).contains(&queries), "{queries} slices");
        }
        counts.take();
        let again = calls.run_query(&customer_page(7), None).await.unwrap();
        let (entities, entries) = counts.take();
        costs.push(entities + entries);
        answers.push((first.results, again.results));
        let built = engine.state().composites.values().flatten().count();
        assert_eq!(
            built,
            usize::from(build),
            "indexes built (building: {build})"
        );
    }
    let keys = |results: &[datastore_entity_core::query::spec::QueryResult]| {
        results.iter().map(|r| r.key.clone()).collect::<Vec<_>>()
    };
    assert_eq!(
        keys(&answers[0].0),
        keys(&answers[1].0),
        "the same answer either way"
    );
    assert_eq!(keys(&answers[0].1), keys(&answers[1].1));
    assert_eq!(
        keys(&answers[0].1)[0],
        key(19_997),
        "the customer's highest total first"
    );
    // Built, a page of 10 reads about 10 entries and 10 entities; without, it walks the
    // totals from the highest, reading entities of other customers until the page fills.
    assert!(costs[0] <= 30, "with the index built: {} reads", costs[0]);
    assert!(
        costs[1] >= 5 * costs[0],
        "without: {} reads, with: {}",
        costs[1],
        costs[0]
    );
}

/// A client paging through a query while the index it needs is built: the cursor of a page
/// answered without the index resumes once the index is whole, with the pages an engine that
/// never built it gives.
#[tokio::test]
async fn a_cursor_made_before_the_index_was_built_resumes_after() {
    let mut pages = Vec::new();
    for build in [true, false] {
        let (engine, _) = orders(6_000).await;
        let engine = engine.strict_indexes(false).build_indexes(build);
        let calls: &dyn Backend = &engine;
        let first = calls.run_query(&customer_page(3), None).await.unwrap();
        if build {
            until_built(&engine, &customer_page(5)).await;
        }
        let next = QuerySpec {
            start_cursor: Some(first.end_cursor.clone()),
            ..customer_page(3)
        };
        if build {
            assert!(
                engine.state().answers().scans(&next).unwrap(),
                "the cursor resumes the plan that made it, in slices with the lock let go"
            );
        }
        let second = calls.run_query(&next, None).await.unwrap();
        let keys = |b: &QueryBatch| b.results.iter().map(|r| r.key.clone()).collect::<Vec<_>>();
        pages.push((keys(&first), keys(&second)));
    }
    assert_eq!(pages[0], pages[1]);
    assert_eq!(pages[0].1.len(), 10);
}

/// Writes between the slices of a build — new entities, changed, deleted, on both sides of
/// where the backfill has got — are in the index once it is whole: its answers are those of
/// an engine that never built it.
#[tokio::test]
async fn writes_during_a_build_are_in_the_index_built() {
    let (engine, _) = orders(6_000).await;
    let engine = engine.strict_indexes(false).build_indexes(true);
    let (walker, _) = orders(6_000).await;
    let walker = walker.strict_indexes(false).build_indexes(false);
    let calls: &dyn Backend = &engine;
    calls.run_query(&customer_page(3), None).await.unwrap();
    let mut round = 0;
    while !engine.state().building.is_empty() {
        round += 1;
        let n = i64::from(round);
        let writes = vec![
            // New, changed (early and late keys), deleted.
            Mutation::Upsert(
                key(10_000 + n),
                PropertyMap::from([
                    ("customer", Property::indexed(Value::Integer(3))),
                    ("total", Property::indexed(Value::Integer(50_000 + n))),
                ]),
                Mask::Whole,
            ),
            Mutation::Upsert(
                key(n * 7),
                PropertyMap::from([
                    ("customer", Property::indexed(Value::Integer(3))),
                    ("total", Property::indexed(Value::Integer(40_000 - n))),
                ]),
                Mask::Whole,
            ),
            Mutation::Upsert(
                key(6_000 - n * 11),
                PropertyMap::from([("customer", Property::indexed(Value::Integer(4)))]),
                Mask::Whole,
            ),
            Mutation::Delete(key(5_999 - n * 13)),
        ];
        for target in [&engine, &walker] {
            let calls: &dyn Backend = target;
            calls.commit(writes.clone(), None).await.unwrap();
        }
        calls.run_query(&customer_page(3), None).await.unwrap();
        assert!(round < 1_000, "the build ends");
    }
    assert!(round >= 2, "the build took several slices ({round})");
    same_pages(&engine, &walker, 700).await;
}

/// The build reads the kind's entities in every partition (projects, databases,
/// namespaces), and no entity of another kind.
#[tokio::test]
async fn an_index_built_on_first_use_holds_its_kind_in_every_partition_and_reads_nothing_else() {
    let (engine, counts) = orders(0).await;
    let engine = engine.strict_indexes(false).build_indexes(true);
    let calls: &dyn Backend = &engine;
    let partitions = [
        ("p", "", ""),
        ("p", "", "ns"),
        ("p", "db2", "ns"),
        ("q", "", ""),
    ]
    .map(|(project, database, namespace)| PartitionId {
        project_id: project.to_owned(),
        database_id: database.to_owned(),
        namespace: namespace.to_owned(),
    });
    let in_partition = |partition: &PartitionId, kind: &str, n: i64| {
        let element = PathElement::new(kind, Some(IdOrName::Id(KeyId::new(n).unwrap())));
        RawKey::new(Some(partition.clone()), vec![element.unwrap()]).unwrap()
    };
    for (p, partition) in partitions.iter().enumerate() {
        let writes = (1..=15)
            .flat_map(|i| {
                let properties = PropertyMap::from([
                    ("customer", Property::indexed(Value::Integer(i % 4))),
                    (
                        "total",
                        Property::indexed(Value::Integer(i * 10 + p as i64)),
                    ),
                ]);
                [
                    Mutation::Upsert(
                        in_partition(partition, "Order", i),
                        properties.clone(),
                        Mask::Whole,
                    ),
                    Mutation::Upsert(in_partition(partition, "Other", i), properties, Mask::Whole),
                ]
            })
            .collect();
        calls.commit(writes, None).await.unwrap();
    }
    counts.take();
    let query = |partition: &PartitionId| QuerySpec {
        partition: partition.clone(),
        ..customer_page(1)
    };
    calls.run_query(&query(&partitions[0]), None).await.unwrap();
    let (entities, _) = counts.take();
    assert_eq!(engine.state().composites.values().flatten().count(), 1);
    // 60 orders backfilled (fewer than a slice's least: whole at once), plus the page's 4;
    // none of the 60 others.
    assert_eq!(
        entities,
        4 * 15 + 4,
        "entities read by the build and the first page"
    );
    for (p, partition) in partitions.iter().enumerate() {
        let page = calls.run_query(&query(partition), None).await.unwrap();
        let (entities, entries) = counts.take();
        let totals: Vec<i64> = [13, 9, 5, 1].iter().map(|i| i * 10 + p as i64).collect();
        let read: Vec<i64> = page
            .results
            .iter()
            .map(|r| match r.properties.get("total").map(|p| &p.value) {
                Some(Value::Integer(total)) => *total,
                other => panic!("a total: {other:?}"),
            })
            .collect();
        assert_eq!(read, totals, "customer 1's highest totals in {partition:?}");
        assert!(
            entities + entries <= 30,
            "{entities} entities, {entries} entries read"
        );
    }
}

/// A build on a file over many slices, interrupted (the handle dropped, as when the process
/// stops), is made again from its start: what its slices wrote without waiting for the disk
/// is cleared first, and the index, whole, answers as an engine that never built one —
/// after the file is opened again, in strict mode, too.
#[tokio::test]
async fn a_build_on_a_file_interrupted_is_made_again_from_its_start() {
    let path = std::env::temp_dir().join(format!("interrupted-{}.redb", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let (walker, _) = orders(3_000).await;
    let walker = walker.strict_indexes(false);
    let open = |build: bool| {
        Embedded::open(&path)
            .unwrap()
            .strict_indexes(!build)
            .build_indexes(build)
    };
    {
        let engine = open(true);
        write_orders(&engine, 3_000).await;
        let calls: &dyn Backend = &engine;
        for _ in 0..2 {
            calls.run_query(&customer_page(3), None).await.unwrap();
        }
        assert!(!engine.state().building.is_empty(), "stopped mid-build");
    }
    {
        // Orders moved to another customer while nothing builds the index: the entries the
        // slices wrote for them are stale.
        let engine = open(false);
        let moved = (1..=40)
            .map(|i| {
                let properties = PropertyMap::from([
                    ("customer", Property::indexed(Value::Integer(4))),
                    ("total", Property::indexed(Value::Integer(10_000 + i))),
                ]);
                Mutation::Upsert(key(i * 10 + 3), properties, Mask::Whole)
            })
            .collect::<Vec<_>>();
        for target in [&engine, &walker] {
            let calls: &dyn Backend = target;
            calls.commit(moved.clone(), None).await.unwrap();
        }
    }
    {
        let engine = open(true);
        assert_eq!(
            engine.state().composites.values().flatten().count(),
            0,
            "an unfinished build leaves no record"
        );
        until_built(&engine, &customer_page(3)).await;
    }
    let engine = open(false);
    assert_eq!(engine.state().composites.values().flatten().count(), 1);
    same_pages(&engine, &walker, 400).await;
    drop(engine);
    let _ = std::fs::remove_file(&path);
}

#[tokio::test]
async fn an_index_built_on_first_use_is_kept_in_a_file() {
    let path = std::env::temp_dir().join(format!("built-index-{}.redb", std::process::id()));
    let _ = std::fs::remove_file(&path);
    {
        let engine = Embedded::open(&path)
            .unwrap()
            .strict_indexes(false)
            .build_indexes(true);
        let calls: &dyn Backend = &engine;
        let writes = (1..=50)
            .map(|i| {
                let properties = PropertyMap::from([
                    ("customer", Property::indexed(Value::Integer(i % 5))),
                    ("total", Property::indexed(Value::Integer(i))),
                ]);
                Mutation::Upsert(key(i), properties, Mask::Whole)
            })
            .collect();
        calls.commit(writes, None).await.unwrap();
        calls.run_query(&customer_page(2), None).await.unwrap();
        assert_eq!(engine.state().composites.values().flatten().count(), 1);
    }
    let engine = Embedded::open(&path).unwrap().strict_indexes(true);
    assert_eq!(
        engine.state().composites.values().flatten().count(),
        1,
        "the built index is recorded with the declared ones"
    );
    // Kept, it serves the query in strict mode too, and holds what was written since.
    let calls: &dyn Backend = &engine;
    let later = PropertyMap::from([
        ("customer", Property::indexed(Value::Integer(2))),
        ("total", Property::indexed(Value::Integer(1_000))),
    ]);
    calls
        .commit(vec![Mutation::Upsert(key(51), later, Mask::Whole)], None)
        .await
        .unwrap();
    let page = calls.run_query(&customer_page(2), None).await.unwrap();
    assert_eq!(page.results[0].key, key(51));
    assert_eq!(page.results[1].key, key(47));
    drop(engine);
    let _ = std::fs::remove_file(&path);
}
