//! Metadata queries (issue #51): `__namespace__`, `__kind__` and `__property__`, through
//! `Backend` and the typed helpers (`Db::namespaces`, `Db::kinds`, `Db::properties`). The
//! legacy emulator referees them: the Firestore emulator refuses them (`runtime/docs/rules.md`).

use datastore_entity::backend::{
    FilterNode, Mask, Mutation, PropertyFilter, QuerySpec, ResultShape,
};
use datastore_entity::prelude::*;
use datastore_entity::{
    GeoPoint, Operator, PartitionId, PathElement, Property, PropertyInfo, PropertyMap, RawKey,
    Value,
};

use crate::harness::{Backend, Ctx};

#[macro_export]
macro_rules! metadata_tests {
    ($backend:expr) => {
        $crate::conformance!($backend;
            metadata_lists_kinds_namespaces_and_properties,
            metadata_takes_key_ranges_ancestors_limits_and_cursors,
        );
    };
}

/// A key of `kind` named `name` in `partition`.
fn key(partition: &PartitionId, kind: &str, name: &str) -> RawKey {
    let element = PathElement::new(kind, Some(KeyName::new(name).unwrap().into())).unwrap();
    RawKey::new(Some(partition.clone()), vec![element]).unwrap()
}

/// Writes `properties` at `kind`/`name` through the backend, as another client would.
async fn put(db: &Db, kind: &str, name: &str, properties: Vec<(&str, Value, bool)>) {
    let map: PropertyMap = properties
        .into_iter()
        .map(|(n, value, excluded)| {
            let property = match excluded {
                true => Property::excluded(value),
                false => Property::indexed(value),
            };
            (n, property)
        })
        .collect();
    let mutation = Mutation::Upsert(key(db.partition(), kind, name), map, Mask::Whole);
    db.backend().commit(vec![mutation], None).await.unwrap();
}

/// The handle of a namespace of this test's own.
fn tenant(t: &Ctx, suffix: &str) -> Db {
    let name = format!("{}.{suffix}", t.db.partition().namespace);
    t.db.namespace(&name).unwrap()
}

fn info(name: &str, representations: &[&str]) -> PropertyInfo {
    PropertyInfo {
        name: name.to_owned(),
        representations: representations.iter().map(|r| (*r).to_owned()).collect(),
    }
}

pub async fn metadata_lists_kinds_namespaces_and_properties(t: Ctx) {
    let (a, b) = (tenant(&t, "a"), tenant(&t, "b"));
    let at = Value::Timestamp(Timestamp::from_micros(1_700_000_000_000_000));
    let place = Value::GeoPoint(GeoPoint::new(1.0, 2.0).unwrap());
    let other = Value::Key(key(a.partition(), "Other", "o"));
    let inner: PropertyMap = [("x", Property::indexed(Value::Integer(1)))].into();
    put(
        &a,
        "Thing",
        "one",
        vec![
            ("i", Value::Integer(1), false),
            ("t", at, false),
            ("s", Value::String("s".into()), false),
            ("b", Value::Blob(vec![1, 2].into()), false),
            ("d", Value::Double(0.5), false),
            ("f", Value::Boolean(true), false),
            ("n", Value::Null, false),
            ("g", place, false),
            ("k", other, false),
            (
                "arr",
                Value::Array(vec![Value::Integer(1), Value::String("x".into())]),
                false,
            ),
            ("e", Value::Entity(inner), false),
            ("hidden", Value::String("h".into()), true),
            ("mixed", Value::Integer(3), false),
        ],
    )
    .await;
    put(
        &a,
        "Thing",
        "two",
        vec![("mixed", Value::String("m".into()), false)],
    )
    .await;
    put(&a, "Alpha", "a", vec![("z", Value::Integer(1), false)]).await;
    put(&b, "Beta", "b", vec![]).await;
    let kinds = a.kinds().await;
    if t.backend == Backend::Firestore {
        // The Firestore emulator answers no metadata query.
        assert!(kinds.is_err(), "{kinds:?}");
        return;
    }
    assert_eq!(kinds.unwrap(), ["Alpha", "Thing"]);
    assert_eq!(b.kinds().await.unwrap(), ["Beta"]);
    let mine = format!("{}.", t.db.partition().namespace);
    let namespaces: Vec<String> =
        t.db.namespaces()
            .await
            .unwrap()
            .into_iter()
            .filter(|n| n.starts_with(&mine))
            .collect();
    assert_eq!(
        namespaces,
        [
            a.partition().namespace.clone(),
            b.partition().namespace.clone()
        ]
    );
    let properties = a.properties("Thing").await.unwrap();
    assert_eq!(
        properties,
        [
            info("arr", &["INT64", "STRING"]),
            info("b", &["STRING"]),
            info("d", &["DOUBLE"]),
            info("e.x", &["INT64"]),
            info("f", &["BOOLEAN"]),
            info("g", &["POINT"]),
            info("i", &["INT64"]),
            info("k", &["REFERENCE"]),
            info("mixed", &["INT64", "STRING"]),
            info("n", &["NULL"]),
            info("s", &["STRING"]),
            info("t", &["INT64"]),
        ]
    );
    assert_eq!(b.properties("Beta").await.unwrap(), []);
    assert_eq!(a.properties("Nothing").await.unwrap(), []);
}

pub async fn metadata_takes_key_ranges_ancestors_limits_and_cursors(t: Ctx) {
    if t.backend == Backend::Firestore {
        return;
    }
    let a = tenant(&t, "a");
    for kind in ["K1", "K2", "K3", "K4"] {
        put(
            &a,
            kind,
            "x",
            vec![
                ("p", Value::Integer(1), false),
                ("q", Value::Integer(2), false),
            ],
        )
        .await;
    }
    let backend = a.backend();
    let names = |batch: &datastore_entity::backend::QueryBatch| -> Vec<String> {
        batch
            .results
            .iter()
            .map(|r| {
                r.key
                    .path()
                    .iter()
                    .map(|e| format!("{e:?}"))
                    .collect::<Vec<_>>()
                    .join("/")
            })
            .collect()
    };
    let kinds = QuerySpec {
        partition: a.partition().clone(),
        kind: "__kind__".to_owned(),
        shape: ResultShape::KeysOnly,
        ..QuerySpec::default()
    };
    let all = backend.run_query(&kinds, None).await.unwrap();
    assert_eq!(
        names(&all),
        [
            "__kind__:\"K1\"",
            "__kind__:\"K2\"",
            "__kind__:\"K3\"",
            "__kind__:\"K4\""
        ]
    );
    // From the second kind's key on, before the fourth's.
    let (k2, k4) = (all.results[1].key.clone(), all.results[3].key.clone());
    let ranged = QuerySpec {
        filters: vec![
            FilterNode::Property(PropertyFilter {
                property: "__key__".into(),
                op: Operator::GreaterThanOrEqual,
                value: Value::Key(k2.clone()),
            }),
            FilterNode::Property(PropertyFilter {
                property: "__key__".into(),
                op: Operator::LessThan,
                value: Value::Key(k4),
            }),
        ],
        ..kinds.clone()
    };
    assert_eq!(
        names(&backend.run_query(&ranged, None).await.unwrap()),
        ["__kind__:\"K2\"", "__kind__:\"K3\""]
    );
    // Page by page, one kind at a time.
    let mut paged = Vec::new();
    let mut page = QuerySpec {
        limit: Some(1),
        ..kinds.clone()
    };
    for _ in 0..10 {
        let batch = backend.run_query(&page, None).await.unwrap();
        if batch.results.is_empty() {
            break;
        }
        paged.extend(names(&batch));
        page.start_cursor = Some(batch.end_cursor);
    }
    assert_eq!(paged, names(&all));
    // A kind's properties: the `__property__` children of its `__kind__` key.
    let properties = QuerySpec {
        kind: "__property__".to_owned(),
        ancestor: Some(k2),
        ..kinds.clone()
    };
    assert_eq!(
        names(&backend.run_query(&properties, None).await.unwrap()),
        [
            "__kind__:\"K2\"/__property__:\"p\"",
            "__kind__:\"K2\"/__property__:\"q\""
        ]
    );
    // Every kind's properties, in key order.
    let every = QuerySpec {
        kind: "__property__".to_owned(),
        ..kinds.clone()
    };
    assert_eq!(
        backend.run_query(&every, None).await.unwrap().results.len(),
        8
    );
}
