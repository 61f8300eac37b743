//! Reading is lenient about what other clients wrote; writing stays strict (issue #16).
//! Another client (the emulator's REST API, driven by hand: no rule of this crate applies)
//! leaves a negative id, a key name with `/`, and a key value with `/` in a property the
//! struct does not declare. Both of Google's emulators accept all three.

use datastore_entity::prelude::*;
use datastore_entity::{Error, RawKey};
use datastore_entity_tests::harness::{self, Backend};
use serde_json::json;

/// Read with a numeric id.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(kind = "Tally")]
struct ById {
    #[key]
    id: KeyId,
    count: i64,
}

/// Read with the key-valued property declared: a `RawKey` holds any key the service stores.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(kind = "Tally")]
struct WithRef {
    #[key]
    id: KeyId,
    count: i64,
    r#ref: RawKey,
}

/// Read with a `String` key, which holds any name the service stores.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(kind = "Tally")]
struct ByName {
    #[key]
    name: String,
    count: i64,
}

fn key(namespace: &str, element: serde_json::Value) -> serde_json::Value {
    json!({
        "partitionId": { "projectId": harness::PROJECT, "namespaceId": namespace },
        "path": [element],
    })
}

fn upsert(namespace: &str, element: serde_json::Value, count: i64) -> serde_json::Value {
    let reference = key(namespace, json!({ "kind": "Ref", "name": "x/y" }));
    json!({ "upsert": {
        "key": key(namespace, element),
        "properties": {
            "count": { "integerValue": count.to_string() },
            "ref": { "keyValue": reference },
        },
    }})
}

async fn lenient_reads_strict_writes(backend: Backend) {
    let Some(db) = harness::db(backend, "foreign").await else {
        return;
    };
    let namespace = db.partition().namespace.clone();
    harness::foreign_commit(
        backend,
        json!([
            upsert(&namespace, json!({ "kind": "Tally", "id": "-5" }), 1),
            upsert(&namespace, json!({ "kind": "Tally", "name": "a/b" }), 2),
            upsert(&namespace, json!({ "kind": "Tally", "id": "7" }), 3),
        ]),
    )
    .expect("the other client's write");

    // An undeclared property holding a key named `x/y` does not stop a read.
    let seven = db.get(&ById::key(KeyId::new(7).unwrap())).await;
    assert_eq!(
        seven.unwrap(),
        Some(ById {
            id: KeyId::new(7).unwrap(),
            count: 3
        })
    );

    // Declared, the property reads: a `RawKey` holds the key named `x/y` as stored.
    let with_ref = db
        .get(&WithRef::key(KeyId::new(7).unwrap()))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(with_ref.r#ref.name(), Some("x/y"));
    assert_eq!(with_ref.r#ref.kind(), "Ref");

    // One query over all three: what a field cannot hold is that entity's error, naming
    // its key; the others read.
    let by_id: Vec<_> = db.query::<ById>().stream().collect().await;
    let by_name: Vec<_> = db.query::<ByName>().stream().collect().await;
    assert_eq!(by_id.len(), 3, "{by_id:?}");
    let read: Vec<i64> = by_id.iter().flatten().map(|t| t.count).collect();
    assert_eq!(read, [3]);
    let failed: Vec<String> = by_id
        .iter()
        .filter_map(|r| match r {
            Err(Error::Decode { key, property, .. }) => {
                assert_eq!(property, "__key__");
                Some(key.as_deref().unwrap_or_default().to_owned())
            }
            Err(other) => panic!("{other:?}"),
            Ok(_) => None,
        })
        .collect();
    assert!(failed.iter().any(|k| k.contains("Tally:-5")), "{failed:?}");
    assert!(
        failed.iter().any(|k| k.contains("Tally:\"a/b\"")),
        "{failed:?}"
    );
    let names: Vec<&str> = by_name.iter().flatten().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["a/b"]);

    // Writing stays strict: the key `a/b` breaks R-N2, so the write is refused and nothing
    // is written.
    let mut slashed = by_name.into_iter().flatten().next().unwrap();
    slashed.count = 99;
    match db.put(&slashed).await {
        Err(Error::InvalidName { .. }) => {}
        other => panic!("a key name with `/` is refused for writes, found {other:?}"),
    }
    let after: Vec<_> = db.query::<ByName>().stream().collect().await;
    let counts: Vec<i64> = after.iter().flatten().map(|t| t.count).collect();
    assert_eq!(counts, [2], "nothing was written");

    // Keys read back hold what the other client wrote; one under the negative id is
    // refused as a parent of a new entity (R-K2), and nothing is written.
    let keys = db.query::<ById>().keys_only().fetch().await.unwrap().items;
    let negative = keys
        .iter()
        .find(|k| format!("{k:?}").contains("-5"))
        .unwrap();
    let child = Line {
        tally: negative.clone(),
        id: KeyId::new(1).unwrap(),
    };
    match db.put(&child).await {
        Err(Error::InvalidId { value }) => assert_eq!(value, -5),
        other => panic!("a negative id is refused for writes, found {other:?}"),
    }
    let lines = db.query::<Line>().keys_only().fetch().await.unwrap();
    assert!(lines.items.is_empty(), "nothing was written");
}

/// An entity under a `Tally`.
#[derive(Entity, Debug, Clone, PartialEq)]
struct Line {
    #[parent]
    tally: Key<ById>,
    #[key]
    id: KeyId,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn firestore_reads_other_clients_keys_and_writes_only_valid_ones() {
    lenient_reads_strict_writes(Backend::Firestore).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn datastore_reads_other_clients_keys_and_writes_only_valid_ones() {
    lenient_reads_strict_writes(Backend::Datastore).await;
}
