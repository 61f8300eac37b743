//! Queries and values the service refuses, sent as they are (through `Backend`, past the
//! typed API's own checks): each emulator's answer and the embedded engine's agree. The
//! typed API refuses the same ones before sending (`check_query`), so a user meets one error
//! whatever the backend.

use datastore_entity::backend::{
    FilterNode, Mask, Mutation, PropertyFilter, PropertyOrder, QuerySpec, ResultShape,
};
use datastore_entity::prelude::*;
use datastore_entity::{
    Direction, Error, Operator, PartitionId, PathElement, Property, PropertyMap, RawKey, Value,
};

use super::row;
use crate::harness::{Backend, Ctx};

#[macro_export]
macro_rules! refusals_tests {
    ($backend:expr) => {
        $crate::conformance!($backend;
            refuse_key_filters_on_other_namespaces_incomplete_keys_and_non_keys,
            refuse_a_property_projected_or_ordered_twice,
            refuse_an_incomplete_key_as_a_stored_value,
        );
    };
}

/// A query of `Row` in the test's namespace, with `filter`.
fn spec(t: &Ctx, filter: Option<PropertyFilter>) -> QuerySpec {
    QuerySpec {
        partition: t.db.partition().clone(),
        kind: "Row".to_owned(),
        filters: filter.into_iter().map(FilterNode::Property).collect(),
        ..QuerySpec::default()
    }
}

fn on(property: &str, op: Operator, value: Value) -> Option<PropertyFilter> {
    Some(PropertyFilter {
        property: property.to_owned(),
        op,
        value,
    })
}

/// A `Row` key in `partition`, complete with `id` or incomplete.
fn row_key(partition: &PartitionId, id: Option<i64>) -> RawKey {
    let id = id.map(|id| KeyId::new(id).unwrap().into());
    RawKey::new(
        Some(partition.clone()),
        vec![PathElement::new("Row", id).unwrap()],
    )
    .unwrap()
}

/// Runs `query` as it is; it must be refused, and the reason is returned.
async fn refused(t: &Ctx, query: &QuerySpec, what: &str) -> String {
    let answer = t.db.backend().run_query(query, None).await;
    match answer {
        Err(Error::InvalidQuery { rule, .. }) => rule.to_string(),
        Err(Error::Service { message, .. }) if t.backend.is_emulator() => message,
        other => panic!("{:?}: {what}: expected a refusal, got {other:?}", t.backend),
    }
}

pub async fn refuse_key_filters_on_other_namespaces_incomplete_keys_and_non_keys(t: Ctx) {
    t.db.put_many(&[row(1, 1, "g"), row(2, 2, "g")])
        .await
        .unwrap();
    let here = t.db.partition().clone();
    let elsewhere = PartitionId {
        namespace: format!("{}-other", here.namespace),
        ..here.clone()
    };
    let key = |partition: &PartitionId, id| Value::Key(row_key(partition, id));
    let cases = [
        (
            "a key of another namespace",
            on("__key__", Operator::GreaterThan, key(&elsewhere, Some(1))),
        ),
        (
            "a key of another namespace in IN",
            on(
                "__key__",
                Operator::In,
                Value::Array(vec![key(&elsewhere, Some(1))]),
            ),
        ),
        (
            "an incomplete key",
            on("__key__", Operator::GreaterThan, key(&here, None)),
        ),
        (
            "an incomplete key on a property",
            on("group", Operator::Equal, key(&here, None)),
        ),
        ("null", on("__key__", Operator::GreaterThan, Value::Null)),
        (
            "an integer",
            on("__key__", Operator::Equal, Value::Integer(1)),
        ),
        (
            "an integer in IN",
            on(
                "__key__",
                Operator::In,
                Value::Array(vec![Value::Integer(1)]),
            ),
        ),
    ];
    for (what, filter) in cases {
        let reason = refused(&t, &spec(&t, filter), what).await;
        assert!(!reason.is_empty(), "{what}");
    }
    // What the service accepts: a key of another kind (matching nothing here), and a key
    // of another namespace as a value compared with a property.
    let other_kind = RawKey::new(
        Some(here.clone()),
        vec![PathElement::new("Zebra", Some(KeyId::new(1).unwrap().into())).unwrap()],
    )
    .unwrap();
    let found =
        t.db.backend()
            .run_query(
                &spec(
                    &t,
                    on("__key__", Operator::GreaterThan, Value::Key(other_kind)),
                ),
                None,
            )
            .await
            .unwrap();
    assert_eq!(found.results.len(), 0);
    let found =
        t.db.backend()
            .run_query(
                &spec(&t, on("group", Operator::Equal, key(&elsewhere, Some(1)))),
                None,
            )
            .await
            .unwrap();
    assert_eq!(found.results.len(), 0);
}

pub async fn refuse_a_property_projected_or_ordered_twice(t: Ctx) {
    t.db.put(&row(1, 1, "g")).await.unwrap();
    let mut projected = spec(&t, None);
    projected.shape = ResultShape::Projection(vec!["rank".into(), "rank".into()]);
    refused(&t, &projected, "a property projected twice").await;
    let order = |property: &str, direction| PropertyOrder {
        property: property.to_owned(),
        direction,
    };
    for property in ["rank", "__key__"] {
        let mut ordered = spec(&t, None);
        ordered.orders = vec![
            order(property, Direction::Ascending),
            order(property, Direction::Descending),
        ];
        let answer = t.db.backend().run_query(&ordered, None).await;
        if t.backend == Backend::Datastore {
            // The legacy emulator takes the first order.
            assert_eq!(
                answer.unwrap().results.len(),
                1,
                "the legacy emulator's answer"
            );
            continue;
        }
        refused(&t, &ordered, "a property ordered twice").await;
    }
}

pub async fn refuse_an_incomplete_key_as_a_stored_value(t: Ctx) {
    let here = t.db.partition().clone();
    for nested in [false, true] {
        let incomplete = Value::Key(row_key(&here, None));
        let value = match nested {
            false => incomplete,
            true => Value::Array(vec![incomplete]),
        };
        let mut properties = PropertyMap::new();
        properties.insert("owner", Property::indexed(value));
        let target = row_key(&here, Some(7));
        let answer =
            t.db.backend()
                .commit(
                    vec![Mutation::Upsert(target.clone(), properties, Mask::Whole)],
                    None,
                )
                .await;
        match &answer {
            Err(Error::InvalidValue { property, .. }) => assert_eq!(property, "owner"),
            Err(Error::Service { .. }) if t.backend.is_emulator() => {}
            other => panic!("{:?}: expected a refusal, got {other:?}", t.backend),
        }
        let stored = t.db.backend().lookup(&[target], None).await.unwrap();
        assert_eq!(stored, [None], "nothing was written");
    }
}
