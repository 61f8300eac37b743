//! Mutations, query results, queries and aggregations in the service's protocol buffers (the
//! values and keys in them: `wire.rs`, `wire_map.rs`, `wire_form.rs`).

use std::sync::Arc;

use gcloud_sdk::google::datastore::v1 as pb;
use gcloud_sdk::prost_types;

use crate::backend::cloud::wire::{Partitions, checked_timestamp, timestamp};
use crate::backend::cloud::wire_form::{from_wire, into_wire};
use crate::backend::cloud::wire_map::wire_value;
use crate::backend::{
    Condition, Mask, Mutation, OnConflict, PropertyTransform, Stamp, TransformKind,
};
use datastore_entity_core::error::{Error, ServiceCode};
use datastore_entity_core::model::schema::{Direction, Schema};
use datastore_entity_core::model::value::Value;
use datastore_entity_core::model::views::ValueView;
use datastore_entity_core::query::spec::{
    Aggregation, Distance, FilterNode, FindNearest, Operator, PropertyOrder, QueryResult,
    QuerySpec, ResultShape,
};

/// A batch's results (an entity without a key is skipped).
pub(super) fn results(
    partitions: &Arc<Partitions>,
    found: Vec<pb::EntityResult>,
) -> Result<Vec<QueryResult>, Error> {
    let mut results = Vec::with_capacity(found.len());
    for result in found {
        let Some(entity) = result.entity else {
            continue;
        };
        let Some(key) = entity.key else { continue };
        results.push(QueryResult {
            key: partitions.raw_key(key)?,
            properties: from_wire(entity.properties, partitions)?,
            cursor: result.cursor,
            stamp: Some(stamp(
                result.version,
                result.create_time,
                result.update_time,
            )?),
        });
    }
    Ok(results)
}

/// An entity's version and times as the service reports them: a negative version or a time
/// outside the service's range is refused, never read as "no entity" or "no time".
pub(super) fn stamp(
    version: i64,
    create_time: Option<prost_types::Timestamp>,
    update_time: Option<prost_types::Timestamp>,
) -> Result<Stamp, Error> {
    let refused = |what: String| Error::InvalidValue {
        kind: String::new(),
        property: String::new(),
        reason: format!("the server sent {what}"),
    };
    let time = |t: Option<prost_types::Timestamp>| match t {
        None => Ok(None),
        Some(t) => checked_timestamp(&t).map(Some).ok_or_else(|| {
            refused(format!(
                "a time outside the service's range ({} s)",
                t.seconds
            ))
        }),
    };
    Ok(Stamp {
        version: u64::try_from(version)
            .map_err(|_| refused(format!("a negative version ({version})")))?,
        create_time: time(create_time)?,
        update_time: time(update_time)?,
    })
}

/// Sets `mutation`'s conflict detection to `condition`: the whole commit fails if it does not
/// hold (the strategy `FAIL`; the default strategy would skip the mutation and report it).
pub(super) fn condition(
    mutation: &mut pb::Mutation,
    condition: Option<Condition>,
    on_conflict: OnConflict,
) {
    use pb::mutation::{
        ConflictDetectionStrategy as Detect, ConflictResolutionStrategy as Resolve,
    };
    let Some(condition) = condition else { return };
    mutation.conflict_detection_strategy = Some(match condition {
        Condition::Version(version) => {
            Detect::BaseVersion(i64::try_from(version).unwrap_or(i64::MAX))
        }
        Condition::UpdateTime(time) => Detect::UpdateTime(timestamp(time)),
    });
    mutation.conflict_resolution_strategy = match on_conflict {
        OnConflict::Fail => Resolve::Fail,
        OnConflict::KeepStored => Resolve::ServerValue,
    } as i32;
}

/// An upsert (or insert) sent as an insert: written only if the entity does not exist.
pub(super) fn as_insert(mutation: &mut pb::Mutation) {
    use pb::mutation::Operation;
    mutation.operation = match mutation.operation.take() {
        Some(Operation::Upsert(entity)) => Some(Operation::Insert(entity)),
        other => other,
    };
}

/// A change's transforms as the service takes them.
pub(super) fn transforms(
    partitions: &Partitions,
    transforms: &[PropertyTransform],
) -> Vec<pb::PropertyTransform> {
    use pb::property_transform::{ServerValue, TransformType as T};
    let array = |values: &[Value]| pb::ArrayValue {
        values: values.iter().map(|v| partitions.value(v, false)).collect(),
    };
    transforms
        .iter()
        .map(|t| pb::PropertyTransform {
            property: t
                .path
                .iter()
                .map(|n| mask_name(n))
                .collect::<Vec<_>>()
                .join("."),
            transform_type: Some(match &t.kind {
                TransformKind::Increment(v) => T::Increment(partitions.value(v, false)),
                TransformKind::Maximum(v) => T::Maximum(partitions.value(v, false)),
                TransformKind::Minimum(v) => T::Minimum(partitions.value(v, false)),
                TransformKind::AppendMissing(values) => T::AppendMissingElements(array(values)),
                TransformKind::RemoveAll(values) => T::RemoveAllFromArray(array(values)),
                TransformKind::RequestTime => T::SetToServerValue(ServerValue::RequestTime as i32),
            }),
        })
        .collect()
}

/// The version a condition expects, as the service compares it (an update time is its
/// microseconds, as Firestore's versions are).
pub(super) fn expected_version(condition: Condition) -> u64 {
    match condition {
        Condition::Version(version) => version,
        Condition::UpdateTime(time) => u64::try_from(time.as_micros()).unwrap_or(0),
    }
}

/// Whether the service refused a commit because a condition did not hold: "the stored version
/// (…) does not match the required base version (…)" (both emulators), or the legacy
/// emulator's "Invalid base version, it is greater than the stored version".
pub(super) fn is_conflict(code: ServiceCode, message: &str) -> bool {
    match code {
        ServiceCode::FailedPrecondition => message.contains("base version"),
        ServiceCode::InvalidArgument => message.contains("Invalid base version"),
        _ => false,
    }
}

/// The stored version a conflict's message names, if it does.
pub(super) fn stored_version(message: &str) -> Option<u64> {
    let rest = message.split("stored version (").nth(1)?;
    rest.split(')').next()?.parse().ok()
}

impl Partitions {
    /// A commit's mutations, as the service receives them (checked already:
    /// `rules::commit`). The property mask of an entity type is named once per batch, not
    /// once per entity.
    pub(super) fn mutations(&self, mutations: Vec<Mutation>) -> Vec<pb::Mutation> {
        let mut declared: Option<(&'static Schema, Option<pb::PropertyMask>)> = None;
        mutations
            .into_iter()
            .map(|m| {
                let mask = match m.mask() {
                    Some(Mask::Declared(schema)) => match &declared {
                        Some((named, mask)) if std::ptr::eq(*named, *schema) => mask.clone(),
                        _ => {
                            let mask = property_mask(&Mask::Declared(schema));
                            declared = Some((schema, mask.clone()));
                            mask
                        }
                    },
                    Some(mask) => property_mask(mask),
                    None => None,
                };
                self.mutation(m, mask)
            })
            .collect()
    }

    /// One mutation, with its property mask. Properties the derive wrote in the wire form
    /// are sent as they are.
    fn mutation(
        &self,
        mutation: Mutation,
        property_mask: Option<pb::PropertyMask>,
    ) -> pb::Mutation {
        use pb::mutation::Operation;
        let (operation, key, properties): (fn(pb::Entity) -> Operation, _, _) = match mutation {
            Mutation::Insert(k, p, _) => (Operation::Insert, k, p),
            Mutation::Update(k, p, _) => (Operation::Update, k, p),
            Mutation::Upsert(k, p, _) => (Operation::Upsert, k, p),
            Mutation::Delete(k) => {
                return pb::Mutation {
                    operation: Some(Operation::Delete(self.key(&k))),
                    ..pb::Mutation::default()
                };
            }
        };
        let entity = pb::Entity {
            key: Some(self.key(&key)),
            properties: into_wire(properties, self, false),
        };
        pb::Mutation {
            operation: Some(operation(entity)),
            property_mask,
            ..pb::Mutation::default()
        }
    }

    /// A value as the service stores it (`excluded`: see [`wire_value`]).
    pub(super) fn value(&self, value: &Value, excluded: bool) -> pb::Value {
        wire_value(ValueView::of(value), excluded, self)
    }

    /// A query as the service takes it. There is no offset (R-Q3).
    pub(super) fn query(&self, spec: &QuerySpec, limit: Option<usize>) -> pb::Query {
        let mut filters: Vec<pb::Filter> = spec.filters.iter().map(|f| self.filter(f)).collect();
        // An AND inside the top-level AND is the same AND.
        let filters_inner = std::mem::take(&mut filters);
        for filter in filters_inner {
            match filter.filter_type {
                Some(pb::filter::FilterType::CompositeFilter(c))
                    if c.op == pb::composite_filter::Operator::And as i32 =>
                {
                    filters.extend(c.filters)
                }
                other => filters.push(pb::Filter { filter_type: other }),
            }
        }
        if let Some(ancestor) = &spec.ancestor {
            filters.push(property_filter(
                "__key__",
                pb::property_filter::Operator::HasAncestor,
                self.value(&Value::Key(ancestor.clone()), false),
            ));
        }
        let filter = match filters.len() {
            0 => None,
            1 => filters.pop(),
            _ => Some(pb::Filter {
                filter_type: Some(pb::filter::FilterType::CompositeFilter(
                    pb::CompositeFilter {
                        op: pb::composite_filter::Operator::And as i32,
                        filters,
                    },
                )),
            }),
        };
        let projection = match &spec.shape {
            ResultShape::Full => Vec::new(),
            ResultShape::KeysOnly => vec![projection("__key__")],
            ResultShape::Projection(names) => names.iter().map(|n| projection(n)).collect(),
        };
        pb::Query {
            projection,
            // A query without a kind names none.
            kind: (!spec.is_kindless())
                .then(|| pb::KindExpression {
                    name: spec.kind.clone(),
                })
                .into_iter()
                .collect(),
            filter,
            order: spec.orders.iter().map(order).collect(),
            start_cursor: spec.start_cursor.clone().unwrap_or_default(),
            end_cursor: spec.end_cursor.clone().unwrap_or_default(),
            limit: limit.map(|l| i32::try_from(l).unwrap_or(i32::MAX)),
            find_nearest: spec.find_nearest.as_ref().map(|n| self.find_nearest(n)),
            distinct_on: spec
                .distinct_on
                .iter()
                .map(|name| pb::PropertyReference { name: name.clone() })
                .collect(),
            ..pb::Query::default()
        }
    }

    /// A nearest-neighbour search as the service takes it.
    fn find_nearest(&self, nearest: &FindNearest) -> pb::FindNearest {
        use pb::find_nearest::DistanceMeasure as M;
        pb::FindNearest {
            vector_property: Some(pb::PropertyReference {
                name: nearest.property.clone(),
            }),
            // As every vector value: meaning 31, excluded from indexes on the array itself.
            query_vector: Some(self.value(&Value::Vector(nearest.vector.clone()), true)),
            distance_measure: match nearest.measure {
                Distance::Euclidean => M::Euclidean,
                Distance::Cosine => M::Cosine,
                Distance::DotProduct => M::DotProduct,
            } as i32,
            limit: Some(i32::try_from(nearest.limit).unwrap_or(i32::MAX)),
            distance_result_property: nearest.distance_property.clone().unwrap_or_default(),
            distance_threshold: nearest.threshold,
        }
    }

    fn filter(&self, node: &FilterNode) -> pb::Filter {
        use pb::property_filter::Operator as Op;
        let (op, nodes) = match node {
            FilterNode::Property(filter) => {
                let op = match filter.op {
                    Operator::Equal => Op::Equal,
                    Operator::LessThan => Op::LessThan,
                    Operator::LessThanOrEqual => Op::LessThanOrEqual,
                    Operator::GreaterThan => Op::GreaterThan,
                    Operator::GreaterThanOrEqual => Op::GreaterThanOrEqual,
                    Operator::NotEqual => Op::NotEqual,
                    Operator::In => Op::In,
                    Operator::NotIn => Op::NotIn,
                };
                return property_filter(&filter.property, op, self.value(&filter.value, false));
            }
            FilterNode::And(nodes) => (pb::composite_filter::Operator::And, nodes),
            FilterNode::Or(nodes) => (pb::composite_filter::Operator::Or, nodes),
        };
        pb::Filter {
            filter_type: Some(pb::filter::FilterType::CompositeFilter(
                pb::CompositeFilter {
                    op: op as i32,
                    filters: nodes.iter().map(|n| self.filter(n)).collect(),
                },
            )),
        }
    }

    /// An aggregation query as the service takes it.
    pub(super) fn aggregation(
        &self,
        spec: &QuerySpec,
        aggregation: &Aggregation,
    ) -> pb::AggregationQuery {
        use pb::aggregation_query::aggregation::{Avg, Count, Operator as Op, Sum};
        let reference = |name: &String| Some(pb::PropertyReference { name: name.clone() });
        let operator = match aggregation {
            Aggregation::Count { up_to } => Op::Count(Count {
                up_to: up_to.map(|n| i64::try_from(n).unwrap_or(i64::MAX)),
            }),
            Aggregation::Sum(p) => Op::Sum(Sum {
                property: reference(p),
            }),
            Aggregation::Avg(p) => Op::Avg(Avg {
                property: reference(p),
            }),
        };
        let mut query = self.query(spec, spec.limit);
        query.start_cursor.clear();
        query.end_cursor.clear();
        pb::AggregationQuery {
            aggregations: vec![pb::aggregation_query::Aggregation {
                alias: AGGREGATE.to_owned(),
                operator: Some(operator),
            }],
            query_type: Some(pb::aggregation_query::QueryType::NestedQuery(query)),
        }
    }
}

/// The alias of an aggregation's result.
pub(super) const AGGREGATE: &str = "result";

fn property_filter(
    property: &str,
    op: pb::property_filter::Operator,
    value: pb::Value,
) -> pb::Filter {
    pb::Filter {
        filter_type: Some(pb::filter::FilterType::PropertyFilter(pb::PropertyFilter {
            property: Some(pb::PropertyReference {
                name: property.to_owned(),
            }),
            op: op as i32,
            value: Some(value),
        })),
    }
}

fn projection(name: &str) -> pb::Projection {
    pb::Projection {
        property: Some(pb::PropertyReference {
            name: name.to_owned(),
        }),
    }
}

fn order(order: &PropertyOrder) -> pb::PropertyOrder {
    pb::PropertyOrder {
        property: Some(pb::PropertyReference {
            name: order.property.clone(),
        }),
        direction: match order.direction {
            Direction::Ascending => pb::property_order::Direction::Ascending,
            Direction::Descending => pb::property_order::Direction::Descending,
        } as i32,
    }
}

/// The service's form of a mask: each path's names joined by `.`, a name that is not a plain
/// identifier (`[a-zA-Z_][a-zA-Z_0-9]*`: a `.` of a flattened `field.sub`, a `-`, a non-ASCII
/// letter) quoted in backticks, its own backticks and backslashes escaped by a backslash.
fn property_mask(mask: &Mask) -> Option<pb::PropertyMask> {
    let paths = match mask {
        Mask::Whole => return None,
        Mask::Declared(schema) => Mask::declared_names(schema)
            .map(|name| mask_name(&name))
            .collect(),
        Mask::Paths(paths) => paths
            .iter()
            .map(|path| match path.as_slice() {
                [name] => mask_name(name),
                _ => path
                    .iter()
                    .map(|name| mask_name(name))
                    .collect::<Vec<_>>()
                    .join("."),
            })
            .collect(),
    };
    Some(pb::PropertyMask { paths })
}

/// A read's property mask as the service takes it (names escaped as a write's are).
pub(super) fn read_mask(paths: &[Vec<std::borrow::Cow<'static, str>>]) -> Option<pb::PropertyMask> {
    property_mask(&Mask::Paths(paths.to_vec()))
}

fn mask_name(name: &str) -> String {
    let mut bytes = name.bytes();
    let plain = bytes
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == b'_')
        && bytes.all(|c| c.is_ascii_alphanumeric() || c == b'_');
    if plain {
        return name.to_owned();
    }
    let mut quoted = String::with_capacity(name.len() + 2);
    quoted.push('`');
    for c in name.chars() {
        if c == '`' || c == '\\' {
            quoted.push('\\');
        }
        quoted.push(c);
    }
    quoted.push('`');
    quoted
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::cloud::wire_map::property_from_wire;
    use datastore_entity_core::model::key::{IdOrName, KeyId, PartitionId, PathElement, RawKey};
    use datastore_entity_core::model::scalar::{Blob, GeoPoint, Timestamp};
    use datastore_entity_core::model::value::{Property, PropertyMap};

    fn partitions() -> Partitions {
        Partitions::new("p", "")
    }

    #[test]
    fn values_survive_the_protocol_both_ways() {
        let p = partitions();
        let key = p
            .raw_key(
                p.key(
                    &RawKey::new(
                        Some(PartitionId {
                            project_id: "p".into(),
                            database_id: String::new(),
                            namespace: "ns".into(),
                        }),
                        vec![
                            PathElement::new("K", Some(IdOrName::Id(KeyId::new(7).unwrap())))
                                .unwrap(),
                        ],
                    )
                    .unwrap(),
                ),
            )
            .unwrap();
        let mut inner = PropertyMap::new();
        inner.insert("x", Property::excluded(Value::Integer(1)));
        for value in [
            Value::Null,
            Value::Boolean(true),
            Value::Integer(-5),
            Value::Double(0.25),
            Value::Timestamp(Timestamp::from_micros(-1_500_001)),
            Value::String("é".into()),
            Value::Blob(Blob::from(vec![0, 255])),
            Value::GeoPoint(GeoPoint::new(1.5, -2.5).unwrap()),
            Value::Key(key),
            Value::Array(vec![Value::Integer(1), Value::String("a".into())]),
            Value::Entity(inner),
        ] {
            for excluded in [false, true] {
                let back = property_from_wire(p.value(&value, excluded), &p).unwrap();
                assert_eq!(back.value, value);
                let flagged = !matches!(&value, Value::Array(v) if v.is_empty());
                assert_eq!(back.excluded, excluded && flagged, "{value:?}");
            }
        }
        // A projection returns index values (meaning 18): a timestamp as an integer, which
        // `PropertyType::from_index_value` reads back as a timestamp.
        let projected = pb::Value {
            meaning: 18,
            exclude_from_indexes: false,
            value_type: Some(pb::value::ValueType::IntegerValue(42)),
        };
        assert_eq!(
            property_from_wire(projected, &p).unwrap().value,
            Value::Integer(42)
        );
    }

    /// Issue #29: no emulator answers a nearest-neighbour search (the Firestore emulator takes
    /// it and ignores it), so the message is checked against the service's reference: the
    /// vector as an array of doubles with meaning 31 (excluded from indexes on the array), the
    /// measure, the limit, the distance property and the threshold.
    #[test]
    fn a_nearest_search_is_sent_as_the_service_documents_it() {
        use datastore_entity_core::model::scalar::Vector;
        let nearest = FindNearest {
            property: "emb".into(),
            vector: Vector::new(vec![0.5, -1.0]).unwrap(),
            measure: Distance::DotProduct,
            limit: 7,
            distance_property: Some("d".into()),
            threshold: Some(0.25),
        };
        let sent = partitions().find_nearest(&nearest);
        assert_eq!(sent.vector_property.unwrap().name, "emb");
        assert_eq!(
            sent.distance_measure,
            pb::find_nearest::DistanceMeasure::DotProduct as i32
        );
        assert_eq!(sent.limit, Some(7));
        assert_eq!(sent.distance_result_property, "d");
        assert_eq!(sent.distance_threshold, Some(0.25));
        let vector = sent.query_vector.unwrap();
        assert_eq!(vector.meaning, 31);
        assert!(vector.exclude_from_indexes);
        let Some(pb::value::ValueType::ArrayValue(array)) = vector.value_type else {
            panic!("{vector:?}")
        };
        let doubles: Vec<Option<pb::value::ValueType>> =
            array.values.into_iter().map(|v| v.value_type).collect();
        assert_eq!(
            doubles,
            [
                Some(pb::value::ValueType::DoubleValue(0.5)),
                Some(pb::value::ValueType::DoubleValue(-1.0))
            ]
        );
    }
}
