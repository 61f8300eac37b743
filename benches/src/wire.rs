//! The Google Cloud wire form of [`Order`](crate::Order), built and read field by field with
//! prost, as a user of the raw API would: the comparison of `benches/wire.rs`.

use std::collections::HashMap;

use datastore_entity::{KeyId, Timestamp};
use gcloud_sdk::google::datastore::v1 as pb;
use gcloud_sdk::prost_types;
use pb::value::ValueType as V;

use crate::{Order, order};

/// The project of the messages.
pub const PROJECT: &str = "bench-project";

/// Orders 1 to `n`.
pub fn orders(n: i64) -> Vec<Order> {
    (1..=n).map(order).collect()
}

/// The key of order `id`, built by hand.
pub fn key(id: i64) -> pb::Key {
    pb::Key {
        partition_id: Some(pb::PartitionId {
            project_id: PROJECT.to_owned(),
            ..pb::PartitionId::default()
        }),
        path: vec![pb::key::PathElement {
            kind: "Order".to_owned(),
            id_type: Some(pb::key::path_element::IdType::Id(id)),
        }],
    }
}

fn value(value_type: V, excluded: bool) -> pb::Value {
    pb::Value {
        value_type: Some(value_type),
        exclude_from_indexes: excluded,
        meaning: 0,
    }
}

fn string(s: &str, excluded: bool) -> pb::Value {
    value(V::StringValue(s.to_owned()), excluded)
}

/// One order as a user of the raw API would build it.
pub fn entity_by_hand(o: &Order) -> pb::Entity {
    let micros = o.created.as_micros();
    let mut properties = HashMap::with_capacity(11);
    properties.insert("customer".to_owned(), string(&o.customer, false));
    properties.insert("status".to_owned(), string(&o.status, false));
    properties.insert(
        "total_cents".to_owned(),
        value(V::IntegerValue(o.total_cents), false),
    );
    properties.insert("currency".to_owned(), string(&o.currency, true));
    properties.insert("items".to_owned(), value(V::IntegerValue(o.items), true));
    properties.insert(
        "discount".to_owned(),
        value(V::DoubleValue(o.discount), true),
    );
    properties.insert("paid".to_owned(), value(V::BooleanValue(o.paid), true));
    properties.insert(
        "created".to_owned(),
        value(
            V::TimestampValue(prost_types::Timestamp {
                seconds: micros.div_euclid(1_000_000),
                nanos: (micros.rem_euclid(1_000_000) * 1_000) as i32,
            }),
            true,
        ),
    );
    properties.insert("note".to_owned(), string(&o.note, true));
    let tags = o.tags.iter().map(|t| string(t, true)).collect();
    properties.insert(
        "tags".to_owned(),
        value(V::ArrayValue(pb::ArrayValue { values: tags }), false),
    );
    properties.insert(
        "shipping".to_owned(),
        match &o.shipping {
            Some(s) => string(s, true),
            None => value(V::NullValue(0), true),
        },
    );
    pb::Entity {
        key: Some(key(o.id.get())),
        properties,
    }
}

/// An order's stored properties, as declared.
const PROPERTIES: [&str; 11] = [
    "customer",
    "status",
    "total_cents",
    "currency",
    "items",
    "discount",
    "paid",
    "created",
    "note",
    "tags",
    "shipping",
];

/// The upserts of `orders`, outside a transaction.
pub fn commit_by_hand(orders: &[Order]) -> pb::CommitRequest {
    pb::CommitRequest {
        project_id: PROJECT.to_owned(),
        mode: pb::commit_request::Mode::NonTransactional as i32,
        mutations: orders
            .iter()
            .map(|o| {
                // Only the properties the struct knows: others' properties stay as stored.
                let paths = PROPERTIES.iter().map(|&p| p.to_owned()).collect();
                pb::Mutation {
                    operation: Some(pb::mutation::Operation::Upsert(entity_by_hand(o))),
                    property_mask: Some(pb::PropertyMask { paths }),
                    ..pb::Mutation::default()
                }
            })
            .collect(),
        ..pb::CommitRequest::default()
    }
}

fn text(properties: &mut HashMap<String, pb::Value>, name: &str) -> String {
    match properties.remove(name).and_then(|v| v.value_type) {
        Some(V::StringValue(s)) => s,
        other => panic!("{name}: {other:?}"),
    }
}

fn integer(properties: &HashMap<String, pb::Value>, name: &str) -> i64 {
    match properties.get(name).and_then(|v| v.value_type.as_ref()) {
        Some(V::IntegerValue(i)) => *i,
        other => panic!("{name}: {other:?}"),
    }
}

/// One order as a user of the raw API would read it.
pub fn order_by_hand(entity: pb::Entity) -> Order {
    let id = match entity
        .key
        .and_then(|k| k.path.into_iter().last())
        .and_then(|e| e.id_type)
    {
        Some(pb::key::path_element::IdType::Id(id)) => id,
        other => panic!("key: {other:?}"),
    };
    let mut p = entity.properties;
    let created = match p.get("created").and_then(|v| v.value_type.as_ref()) {
        Some(V::TimestampValue(t)) => t.seconds * 1_000_000 + i64::from(t.nanos) / 1_000,
        other => panic!("created: {other:?}"),
    };
    let discount = match p.get("discount").and_then(|v| v.value_type.as_ref()) {
        Some(V::DoubleValue(d)) => *d,
        other => panic!("discount: {other:?}"),
    };
    let paid = matches!(
        p.get("paid").and_then(|v| v.value_type.as_ref()),
        Some(V::BooleanValue(true))
    );
    let tags = match p.remove("tags").and_then(|v| v.value_type) {
        Some(V::ArrayValue(a)) => a
            .values
            .into_iter()
            .map(|v| match v.value_type {
                Some(V::StringValue(s)) => s,
                other => panic!("tag: {other:?}"),
            })
            .collect(),
        other => panic!("tags: {other:?}"),
    };
    let shipping = match p.remove("shipping").and_then(|v| v.value_type) {
        Some(V::StringValue(s)) => Some(s),
        _ => None,
    };
    Order {
        id: KeyId::new(id).expect("positive"),
        total_cents: integer(&p, "total_cents"),
        items: integer(&p, "items"),
        customer: text(&mut p, "customer"),
        status: text(&mut p, "status"),
        currency: text(&mut p, "currency"),
        discount,
        paid,
        created: Timestamp::from_micros(created),
        note: text(&mut p, "note"),
        tags,
        shipping,
    }
}

/// The lookup of orders 1 to `n`, outside a transaction.
pub fn lookup_by_hand(n: i64) -> pb::LookupRequest {
    pb::LookupRequest {
        project_id: PROJECT.to_owned(),
        keys: (1..=n).map(key).collect(),
        ..pb::LookupRequest::default()
    }
}

/// A lookup's answer holding orders 1 to `n`.
pub fn lookup_response(n: i64) -> pb::LookupResponse {
    pb::LookupResponse {
        found: orders(n)
            .iter()
            .map(|o| pb::EntityResult {
                entity: Some(entity_by_hand(o)),
                ..pb::EntityResult::default()
            })
            .collect(),
        ..pb::LookupResponse::default()
    }
}
