//! What an adversary tried (issue #26), on every backend: values nested past the limit, the
//! indexed values the referee counts, counters with many shards or huge totals, keys other
//! clients made, and what the service says when a write finds the entity there or missing.

use datastore_entity::backend::{Mask, Mutation};
use datastore_entity::prelude::*;
use datastore_entity::{
    Error, MAX_INDEXED_VALUES, MAX_NESTING, PartitionId, PathElement, Property, PropertyMap,
    RawKey, Value,
};

use crate::harness::{Backend, Ctx, foreign_commit};

#[macro_export]
macro_rules! hostile_tests {
    ($backend:expr) => {
        $crate::conformance!($backend;
            hostile_values_nested_past_the_limit_are_refused_and_the_kind_stays_usable,
            hostile_indexed_values_are_counted_as_the_referee_counts_them,
        );
    };
}

/// An entity holding any value, indexed and not.
#[derive(Entity, Debug, Clone, PartialEq)]
pub struct Deep {
    #[key]
    pub name: KeyName,
    pub indexed: Value,
    #[exclude_from_index]
    pub excluded: Value,
}

fn deep(name: &str, indexed: Value, excluded: Value) -> Deep {
    Deep {
        name: KeyName::new(name).unwrap(),
        indexed,
        excluded,
    }
}

/// `levels` embedded entities, one in another, the innermost holding `x: 1`.
pub fn entities(levels: usize) -> Value {
    let mut value = Value::Integer(1);
    for level in 0..levels {
        let name = if level == 0 { "x" } else { "a" };
        value = Value::Entity(PropertyMap::from([(name, Property::indexed(value))]));
    }
    value
}

/// `levels` values nested: entities and arrays by turns (an array holds one entity), every
/// property excluded from indexes (as everything inside an excluded property reads back).
pub fn alternating(levels: usize) -> Value {
    let mut value = Value::Integer(1);
    for level in 0..levels {
        value = match level % 2 {
            0 => Value::Entity(PropertyMap::from([("a", Property::excluded(value))])),
            _ => Value::Array(vec![value]),
        };
    }
    value
}

/// Whether `error` is the refusal of a value nested too deep.
fn too_deep(error: &Error) -> bool {
    matches!(error, Error::InvalidValue { reason, .. } if reason.contains("nested"))
}

pub async fn hostile_values_nested_past_the_limit_are_refused_and_the_kind_stays_usable(t: Ctx) {
    // At the limit: stored, and read back as written.
    let at_limit = deep("at-limit", entities(MAX_NESTING), alternating(MAX_NESTING));
    let key = t.db.put(&at_limit).await.unwrap();
    assert_eq!(t.db.get(&key).await.unwrap(), Some(at_limit.clone()));
    // Past it, at the depths an adversary tried, by either property and either shape:
    // refused, nothing written, and the kind as readable and deletable as before.
    for levels in [MAX_NESTING + 1, 65, 100_000] {
        for (what, entity) in [
            ("indexed", deep("deep", entities(levels), Value::Null)),
            ("excluded", deep("deep", Value::Null, alternating(levels))),
        ] {
            let refused = t.db.put(&entity).await.unwrap_err();
            assert!(too_deep(&refused), "{levels} levels, {what}: {refused}");
            let refused =
                t.db.put_many(std::slice::from_ref(&entity))
                    .await
                    .unwrap_err();
            assert!(too_deep(&refused), "{levels} levels, {what}: {refused}");
            let in_transaction =
                t.db.transaction(|tx| {
                    let entity = entity.clone();
                    async move {
                        tx.put(&entity).await?;
                        Ok(())
                    }
                })
                .await
                .unwrap_err();
            assert!(
                too_deep(&in_transaction),
                "{levels}, {what}: {in_transaction}"
            );
            assert_eq!(
                t.db.get(&Deep::key(KeyName::new("deep").unwrap()))
                    .await
                    .unwrap(),
                None
            );
        }
    }
    let all = t.db.query::<Deep>().fetch().await.unwrap();
    assert_eq!(all.items, [at_limit]);
    t.db.delete(&key).await.unwrap();
    assert_eq!(t.db.get(&key).await.unwrap(), None);
}

/// The REST form of `value`, as another client sends it (`excluded` on each value; an
/// array's flag on its elements).
fn json(value: &Value, excluded: bool) -> serde_json::Value {
    use serde_json::json;
    let flagged = |mut v: serde_json::Value| {
        if excluded {
            v["excludeFromIndexes"] = json!(true);
        }
        v
    };
    match value {
        Value::Null => flagged(json!({ "nullValue": null })),
        Value::Integer(i) => flagged(json!({ "integerValue": i.to_string() })),
        Value::String(s) => flagged(json!({ "stringValue": s })),
        Value::Array(values) => json!({
            "arrayValue": { "values": values.iter().map(|v| json(v, excluded)).collect::<Vec<_>>() }
        }),
        Value::Entity(map) => flagged(json!({
            "entityValue": { "properties": properties_json(map, excluded) }
        })),
        other => panic!("not needed here: {other:?}"),
    }
}

fn properties_json(map: &PropertyMap, excluded: bool) -> serde_json::Value {
    map.iter()
        .map(|(name, p)| (name.to_owned(), json(&p.value, excluded || p.excluded)))
        .collect::<serde_json::Map<_, _>>()
        .into()
}

/// An entity's properties, as a case builds them.
type Properties = Vec<(String, Property)>;

fn integers(n: usize) -> Value {
    Value::Array((0..n as i64).map(Value::Integer).collect())
}

fn little_entities(n: usize, properties: usize) -> Value {
    Value::Array(
        (0..n)
            .map(|i| {
                Value::Entity(
                    (0..properties)
                        .map(|p| (format!("p{p}"), Property::indexed(Value::Integer(i as i64))))
                        .collect(),
                )
            })
            .collect(),
    )
}

fn wide_entity(properties: usize) -> Value {
    Value::Entity(
        (0..properties)
            .map(|p| (format!("p{p}"), Property::indexed(Value::Null)))
            .collect(),
    )
}

pub async fn hostile_indexed_values_are_counted_as_the_referee_counts_them(t: Ctx) {
    // R-I5 as Firestore in Datastore mode counts it ("Too many indexed properties"): at most
    // 5,000 indexed values in an entity, and in each embedded entity value on its own; every
    // array element counts (duplicates, nulls and entities too), an empty array nothing.
    let n = MAX_INDEXED_VALUES;
    let one = |name: &str, value: Value| vec![(name.to_owned(), Property::indexed(value))];
    let cases: Vec<(&str, Properties, bool)> = vec![
        ("5,000 values", one("a", integers(n)), true),
        ("5,001 values", one("a", integers(n + 1)), false),
        (
            "5,001 copies of one value",
            one("a", Value::Array(vec![Value::Integer(7); n + 1])),
            false,
        ),
        ("5,001 entities", one("a", little_entities(n + 1, 1)), false),
        (
            "2,000 entities of 3 values",
            one("a", little_entities(2_000, 3)),
            true,
        ),
        (
            "an entity of 5,001 values",
            one("e", wide_entity(n + 1)),
            false,
        ),
        ("an entity of 5,000 values", one("e", wide_entity(n)), true),
        (
            "4,999 values and 2 more properties",
            [
                one("a", integers(n - 1)),
                one("b", Value::Null),
                one("c", Value::Null),
            ]
            .concat(),
            false,
        ),
        (
            "4,999 values, an empty array and 1 more property",
            [
                one("a", integers(n - 1)),
                one("b", Value::Array(Vec::new())),
                one("c", Value::Null),
            ]
            .concat(),
            true,
        ),
        (
            "5,001 excluded values",
            vec![("a".to_owned(), Property::excluded(integers(n + 1)))],
            true,
        ),
    ];
    let partition = t.db.partition().clone();
    for (i, (what, properties, accepted)) in cases.into_iter().enumerate() {
        let properties: PropertyMap = properties.into_iter().collect();
        let key = row_key(&partition, &format!("case-{i}"));
        // This crate's answer, on every backend, past the typed API.
        let ours =
            t.db.backend()
                .commit(
                    vec![Mutation::Upsert(
                        key.clone(),
                        properties.clone(),
                        Mask::Whole,
                    )],
                    None,
                )
                .await;
        match &ours {
            Ok(_) => assert!(accepted, "{what}: accepted, but the referee refuses it"),
            Err(Error::TooManyIndexedValues { max, .. }) => {
                assert!(!accepted, "{what}: refused, but the referee accepts it");
                assert_eq!(*max, MAX_INDEXED_VALUES);
            }
            Err(other) => panic!("{what}: {other}"),
        }
        let found =
            t.db.backend()
                .lookup(std::slice::from_ref(&key), None)
                .await
                .unwrap();
        assert_eq!(
            found[0].is_some(),
            accepted,
            "{what}: nothing written when refused"
        );
        // The emulators' own answer to another client sending it.
        if t.backend.is_emulator() {
            let theirs = foreign_commit(
                t.backend,
                serde_json::json!([{ "upsert": {
                    "key": {
                        "partitionId": { "projectId": crate::harness::PROJECT, "namespaceId": partition.namespace },
                        "path": [{ "kind": "Counted", "name": format!("foreign-{i}") }],
                    },
                    "properties": properties_json(&properties, false),
                }}]),
            );
            match t.backend {
                Backend::Firestore => assert_eq!(
                    theirs.is_ok(),
                    accepted,
                    "{what}: the Firestore emulator says {theirs:?}"
                ),
                // The legacy emulator enforces no such limit: it takes them all.
                _ => assert!(theirs.is_ok(), "{what}: {theirs:?}"),
            }
        }
    }
}

fn row_key(partition: &PartitionId, name: &str) -> RawKey {
    RawKey::new(
        Some(partition.clone()),
        vec![PathElement::new("Counted", Some(KeyName::new(name).unwrap().into())).unwrap()],
    )
    .unwrap()
}
