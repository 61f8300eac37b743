//! Writes that fail (a full disk): as the store, the log and the engine meet them.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::super::full_disk::disk;
use super::super::logged::Logged;
use super::super::store::Redb;
use super::*;
use datastore_entity_core::format::file::ENTITIES;

fn put(n: u8) -> Batch {
    let mut batch = Batch::default();
    batch.put(ENTITIES, vec![n], vec![n; 1000]);
    batch
}

fn read(store: &Redb, n: u8) -> Result<Option<Vec<u8>>, Error> {
    let mut found = None;
    store.get(ENTITIES, &[n], &mut |v| found = Some(v.to_vec()))?;
    Ok(found)
}

/// Writes fail while the disk is full, reads go on, and once there is room again the
/// same handle writes (redb itself refuses every write after an I/O error until the
/// database is opened again); the failed batch is nowhere, the others are on disk.
#[test]
fn a_handle_writes_again_once_a_full_disk_has_room() {
    let path = std::env::temp_dir().join(format!("datastore-entity-full-{}", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let full = Arc::new(AtomicBool::new(false));
    let mut store =
        Redb::with_opener("test file".into(), disk(path.clone(), full.clone())).unwrap();
    store.apply(put(1)).unwrap();

    full.store(true, Ordering::SeqCst);
    let refused = store.apply(put(2));
    assert!(
        matches!(&refused, Err(Error::Storage { reason, .. }) if reason.contains("No space left")),
        "{refused:?}"
    );
    assert_eq!(read(&store, 1).unwrap(), Some(vec![1; 1000]));
    // Still full: opening the file again fails too (redb's recovery writes), and says so.
    for _ in 0..2 {
        let refused = store.apply(put(2));
        assert!(
            matches!(&refused, Err(Error::Storage { reason, .. }) if reason.contains("No space left")),
            "{refused:?}"
        );
    }

    full.store(false, Ordering::SeqCst);
    store.apply(put(3)).unwrap();
    assert_eq!(read(&store, 2).unwrap(), None);
    assert_eq!(read(&store, 3).unwrap(), Some(vec![3; 1000]));
    drop(store);

    let store = Redb::open(&path, None).unwrap();
    assert_eq!(read(&store, 1).unwrap(), Some(vec![1; 1000]));
    assert_eq!(read(&store, 2).unwrap(), None);
    assert_eq!(read(&store, 3).unwrap(), Some(vec![3; 1000]));
    drop(store);
    std::fs::remove_file(&path).unwrap();
}

/// Through the engine: a commit on a full disk is `Error::Storage`, and the same engine
/// commits again once there is room; entities and index entries are as if the failed
/// commit never happened.
#[tokio::test]
async fn the_engine_commits_again_once_a_full_disk_has_room() {
    use crate::backend::{Backend, Mask, Mutation, QuerySpec};
    use datastore_entity_core::model::key::{PartitionId, PathElement, RawKey};
    use datastore_entity_core::model::name::KeyName;
    use datastore_entity_core::model::value::{Property, PropertyMap, Value};
    use datastore_entity_core::query::spec::Operator;

    let path = std::env::temp_dir().join(format!(
        "datastore-entity-full-engine-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&path);
    let full = Arc::new(AtomicBool::new(false));
    let store = Redb::with_opener("test file".into(), disk(path.clone(), full.clone())).unwrap();
    // Each commit logged, then applied to the tables at once: a full disk meets both.
    let store = Logged::with_checkpoint(store, 1).unwrap();
    let engine = Embedded::with_store(Box::new(store));
    let calls: &dyn Backend = &engine;
    let partition = PartitionId::default();
    let key = |name: &str| {
        let element = PathElement::new("Note", Some(KeyName::new(name).unwrap().into()));
        RawKey::new(Some(partition.clone()), vec![element.unwrap()]).unwrap()
    };
    let upsert = |name: &str, n: i64| {
        let mut properties = PropertyMap::new();
        properties.insert("n", Property::indexed(Value::Integer(n)));
        vec![Mutation::Upsert(key(name), properties, Mask::Whole)]
    };
    calls.commit(upsert("a", 1), None).await.unwrap();
    full.store(true, Ordering::SeqCst);
    let refused = calls.commit(upsert("b", 2), None).await;
    assert!(matches!(refused, Err(Error::Storage { .. })), "{refused:?}");
    // Issue #50: the error keeps its cause, the OS's "storage full", as its source.
    let refused = refused.unwrap_err();
    let source = std::error::Error::source(&refused).expect("a storage error has a source");
    let chain: Vec<String> = std::iter::successors(Some(source), |e| e.source())
        .map(|e| e.to_string())
        .collect();
    assert!(
        chain.iter().any(|e| e.contains("No space left on device")),
        "the OS's error is the source or in its chain: {chain:?}"
    );
    let refused = calls.commit(upsert("a", 5), None).await;
    assert!(matches!(refused, Err(Error::Storage { .. })), "{refused:?}");
    full.store(false, Ordering::SeqCst);
    calls.commit(upsert("c", 3), None).await.unwrap();

    let found = calls
        .lookup(&[key("a"), key("b"), key("c")], None)
        .await
        .unwrap();
    let n = |found: &Option<PropertyMap>| found.as_ref().map(|p| p["n"].value.clone());
    assert_eq!(
        found.iter().map(n).collect::<Vec<_>>(),
        [Some(Value::Integer(1)), None, Some(Value::Integer(3))]
    );
    let query = QuerySpec {
        partition: partition.clone(),
        kind: "Note".into(),
        filters: vec![crate::backend::FilterNode::Property(
            crate::backend::PropertyFilter {
                property: "n".into(),
                op: Operator::GreaterThan,
                value: Value::Integer(0),
            },
        )],
        ..QuerySpec::default()
    };
    let names: Vec<_> = calls
        .run_query(&query, None)
        .await
        .unwrap()
        .results
        .iter()
        .map(|r| r.key.name().map(str::to_owned))
        .collect();
    assert_eq!(names, [Some("a".to_owned()), Some("c".to_owned())]);
    drop(engine);
    std::fs::remove_file(&path).unwrap();
}

/// A write that fails on a full disk in the middle of a build on a file: the file is opened
/// again at its last durable commit, without the slices written since, so the build starts
/// again, and the index, whole, answers as an engine that never built one (issue #51).
#[tokio::test]
async fn a_build_a_failed_write_interrupts_starts_again() {
    let path = std::env::temp_dir().join(format!("full-build-{}.redb", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let full = Arc::new(AtomicBool::new(false));
    let store = Redb::with_opener("test file".into(), disk(path.clone(), full.clone())).unwrap();
    let store = Logged::with_checkpoint(store, usize::MAX).unwrap();
    let engine = Embedded::with_store(Box::new(store))
        .strict_indexes(false)
        .build_indexes(true);
    write_orders(&engine, 3_000).await;
    let (walker, _) = orders(3_000).await;
    let walker = walker.strict_indexes(false);
    let calls: &dyn Backend = &engine;
    for _ in 0..2 {
        calls.run_query(&customer_page(3), None).await.unwrap();
    }
    assert!(!engine.state().building.is_empty(), "mid-build");
    full.store(true, Ordering::SeqCst);
    let order = PropertyMap::from([
        ("customer", Property::indexed(Value::Integer(3))),
        ("total", Property::indexed(Value::Integer(5))),
    ]);
    let refused = calls
        .commit(vec![Mutation::Upsert(key(3_001), order, Mask::Whole)], None)
        .await;
    assert!(matches!(refused, Err(Error::Storage { .. })), "{refused:?}");
    full.store(false, Ordering::SeqCst);
    until_built(&engine, &customer_page(3)).await;
    drop(engine);
    let engine = Embedded::open(&path).unwrap().strict_indexes(true);
    same_pages(&engine, &walker, 400).await;
    drop(engine);
    let _ = std::fs::remove_file(&path);
}
