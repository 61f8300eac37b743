//! The store's values, keys, entities and queries in the service's protocol buffers, and back.

use gcloud_sdk::google::datastore::v1 as pb;
use gcloud_sdk::google::r#type::LatLng;
use gcloud_sdk::prost_types;

use gcloud_sdk::prost::Message as _;

use crate::backend::{Mask, Mutation};
use crate::error::Error;
use crate::model::key::{IdOrName, KeyId, PartitionId, PathElement, RawKey};
use crate::model::name::KeyName;
use crate::model::scalar::{Blob, GeoPoint, Timestamp};
use crate::model::schema::Direction;
use crate::model::stored::ValueView;
use crate::model::value::{Property, PropertyMap, Value};
use crate::query::spec::{
    Aggregation, FilterNode, Operator, PropertyOrder, QueryResult, QuerySpec, ResultShape,
};
use crate::rules::limits::{MAX_ENTITY_BYTES, check_nesting};

/// How the service's partitions map to ours: the database and project of the handle fill
/// in what a response leaves empty.
#[derive(Debug, Clone)]
pub(super) struct Partitions {
    pub(super) project_id: String,
    pub(super) database_id: String,
}

impl Partitions {
    /// One mutation, as the service receives it; an entity over 1 MiB encoded is refused.
    pub(super) fn mutation(&self, mutation: Mutation) -> Result<pb::Mutation, Error> {
        use pb::mutation::Operation;
        let (operation, mask) = match &mutation {
            Mutation::Insert(k, p, mask)
            | Mutation::Update(k, p, mask)
            | Mutation::Upsert(k, p, mask) => {
                check_nesting(k, p)?;
                let entity = self.entity(k, p);
                let size = entity.encoded_len();
                if size > MAX_ENTITY_BYTES {
                    return Err(Error::EntityTooLarge {
                        key: format!("{k:?}"),
                        size,
                        max: MAX_ENTITY_BYTES,
                    });
                }
                let operation = match mutation {
                    Mutation::Insert(..) => Operation::Insert(entity),
                    Mutation::Update(..) => Operation::Update(entity),
                    _ => Operation::Upsert(entity),
                };
                (operation, property_mask(mask))
            }
            Mutation::Delete(k) => (Operation::Delete(self.key(k)), None),
        };
        Ok(pb::Mutation {
            operation: Some(operation),
            property_mask: mask,
            ..pb::Mutation::default()
        })
    }

    pub(super) fn key(&self, key: &RawKey) -> pb::Key {
        let partition = key.partition();
        pb::Key {
            partition_id: Some(pb::PartitionId {
                project_id: partition
                    .map(|p| p.project_id.clone())
                    .filter(|p| !p.is_empty())
                    .unwrap_or_else(|| self.project_id.clone()),
                database_id: partition.map(|p| p.database_id.clone()).unwrap_or_default(),
                namespace_id: key.namespace().to_owned(),
            }),
            path: key
                .path()
                .iter()
                .map(|e| pb::key::PathElement {
                    kind: e.kind().to_owned(),
                    id_type: e.id_or_name().map(|id| match id {
                        IdOrName::Id(id) => pb::key::path_element::IdType::Id(id.get()),
                        IdOrName::Name(name) => {
                            pb::key::path_element::IdType::Name(name.as_str().to_owned())
                        }
                    }),
                })
                .collect(),
        }
    }

    pub(super) fn partition(&self, partition: &PartitionId) -> pb::PartitionId {
        pb::PartitionId {
            project_id: if partition.project_id.is_empty() {
                self.project_id.clone()
            } else {
                partition.project_id.clone()
            },
            database_id: partition.database_id.clone(),
            namespace_id: partition.namespace.clone(),
        }
    }

    /// A key from the service. Reading is lenient about what other clients wrote: kinds,
    /// names and ids the rules forbid for new keys are kept as they are (a write of such a
    /// key is refused: `RawKey::check_writable`); the depth and the path's shape are checked.
    pub(super) fn raw_key(&self, key: pb::Key) -> Result<RawKey, Error> {
        let partition = key.partition_id.unwrap_or_default();
        let partition = PartitionId {
            project_id: if partition.project_id.is_empty() {
                self.project_id.clone()
            } else {
                partition.project_id
            },
            database_id: if partition.database_id.is_empty() {
                self.database_id.clone()
            } else {
                partition.database_id
            },
            namespace: partition.namespace_id,
        };
        let path = key
            .path
            .into_iter()
            .map(|e| {
                let id_or_name = match e.id_type {
                    Some(pb::key::path_element::IdType::Id(id)) => {
                        Some(IdOrName::Id(KeyId::stored(id)?))
                    }
                    Some(pb::key::path_element::IdType::Name(name)) => {
                        Some(IdOrName::Name(KeyName::stored(name)))
                    }
                    None => None,
                };
                Ok(PathElement::stored(e.kind, id_or_name))
            })
            .collect::<Result<Vec<_>, Error>>()?;
        RawKey::new(Some(partition), path)
    }

    /// A value as the service stores it. `excluded` applies to the value, or to each element
    /// of an array (the service refuses the flag on the array itself).
    pub(super) fn value(&self, value: &Value, excluded: bool) -> pb::Value {
        self.value_view(ValueView::of(value), excluded)
    }

    /// A value where it lies (the stored form the derive writes, or a decoded value) as the
    /// service stores it, in one pass: each string and byte string copied once.
    fn value_view(&self, value: ValueView<'_>, excluded: bool) -> pb::Value {
        use pb::value::ValueType as V;
        let value_type = match value {
            ValueView::Null => V::NullValue(prost_types::NullValue::NullValue as i32),
            ValueView::Boolean(b) => V::BooleanValue(b),
            ValueView::Integer(i) => V::IntegerValue(i),
            ValueView::Double(d) => V::DoubleValue(d),
            ValueView::Timestamp(t) => V::TimestampValue(timestamp(t)),
            ValueView::String(s) => V::StringValue(s.to_owned()),
            ValueView::Blob(b) => V::BlobValue(b.to_vec()),
            ValueView::GeoPoint(g) => V::GeoPointValue(LatLng {
                latitude: g.latitude(),
                longitude: g.longitude(),
            }),
            ValueView::Key(k) => match k.to_key() {
                Some(k) => V::KeyValue(self.key(&k)),
                None => V::NullValue(prost_types::NullValue::NullValue as i32),
            },
            ValueView::Array(values) => {
                return pb::Value {
                    value_type: Some(V::ArrayValue(pb::ArrayValue {
                        values: values
                            .iter()
                            .map(|v| self.value_view(v, excluded))
                            .collect(),
                    })),
                    ..pb::Value::default()
                };
            }
            // An excluded embedded entity excludes everything in it: the service would still
            // index its sub-properties (`outer.inner`) otherwise (R-I1).
            ValueView::Entity(properties) => V::EntityValue(pb::Entity {
                key: None,
                properties: self.properties_of(properties.iter(), excluded, 0),
            }),
        };
        pb::Value {
            value_type: Some(value_type),
            exclude_from_indexes: excluded,
            meaning: 0,
        }
    }

    /// Viewed properties as the service's map (all excluded when `excluded`).
    fn properties_of<'a>(
        &self,
        properties: impl Iterator<Item = (&'a str, bool, ValueView<'a>)>,
        excluded: bool,
        capacity: usize,
    ) -> std::collections::HashMap<String, pb::Value> {
        let mut map = std::collections::HashMap::with_capacity(capacity);
        for (name, own, value) in properties {
            map.insert(name.to_owned(), self.value_view(value, own || excluded));
        }
        map
    }

    pub(super) fn properties(
        &self,
        properties: &PropertyMap,
    ) -> std::collections::HashMap<String, pb::Value> {
        self.properties_of(properties.view(), false, properties.len())
    }

    pub(super) fn entity(&self, key: &RawKey, properties: &PropertyMap) -> pb::Entity {
        pb::Entity {
            key: Some(self.key(key)),
            properties: self.properties(properties),
        }
    }

    /// A value from the service.
    pub(super) fn property(&self, value: pb::Value) -> Result<Property, Error> {
        use pb::value::ValueType as V;
        let excluded = value.exclude_from_indexes;
        let converted = match value.value_type {
            None | Some(V::NullValue(_)) => Value::Null,
            Some(V::BooleanValue(b)) => Value::Boolean(b),
            Some(V::IntegerValue(i)) => Value::Integer(i),
            Some(V::DoubleValue(d)) => Value::Double(d),
            Some(V::TimestampValue(t)) => Value::Timestamp(Timestamp::from_micros(
                t.seconds
                    .saturating_mul(1_000_000)
                    .saturating_add(i64::from(t.nanos / 1_000)),
            )),
            Some(V::StringValue(s)) => Value::String(s),
            Some(V::BlobValue(b)) => Value::Blob(Blob::from(b)),
            Some(V::GeoPointValue(g)) => Value::GeoPoint(GeoPoint::new(g.latitude, g.longitude)?),
            Some(V::KeyValue(k)) => Value::Key(self.raw_key(k)?),
            Some(V::EntityValue(e)) => Value::Entity(self.property_map(e.properties)?),
            Some(V::ArrayValue(a)) => {
                let elements = a
                    .values
                    .into_iter()
                    .map(|v| self.property(v))
                    .collect::<Result<Vec<_>, _>>()?;
                // The flag lives on the elements of an array.
                let excluded = elements.first().is_some_and(|p| p.excluded);
                return Ok(Property {
                    value: Value::Array(elements.into_iter().map(|p| p.value).collect()),
                    excluded,
                });
            }
        };
        Ok(Property {
            value: converted,
            excluded,
        })
    }

    pub(super) fn property_map(
        &self,
        properties: std::collections::HashMap<String, pb::Value>,
    ) -> Result<PropertyMap, Error> {
        // Sorted once, then appended in name order: no search, no shifting.
        let mut converted = properties
            .into_iter()
            .map(|(name, value)| Ok((name, self.property(value)?)))
            .collect::<Result<Vec<_>, Error>>()?;
        converted.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let name_bytes = converted.iter().map(|(name, _)| name.len()).sum();
        let mut map = PropertyMap::with_capacity(converted.len(), name_bytes);
        map.extend(converted);
        Ok(map)
    }

    /// A batch's results (an entity without a key is skipped).
    pub(super) fn results(&self, found: Vec<pb::EntityResult>) -> Result<Vec<QueryResult>, Error> {
        let mut results = Vec::with_capacity(found.len());
        for result in found {
            let Some(entity) = result.entity else {
                continue;
            };
            let Some(key) = entity.key else { continue };
            results.push(QueryResult {
                key: self.raw_key(key)?,
                properties: self.property_map(entity.properties)?,
                cursor: result.cursor,
            });
        }
        Ok(results)
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
            kind: vec![pb::KindExpression {
                name: spec.kind.clone(),
            }],
            filter,
            order: spec.orders.iter().map(order).collect(),
            start_cursor: spec.start_cursor.clone().unwrap_or_default(),
            end_cursor: spec.end_cursor.clone().unwrap_or_default(),
            limit: limit.map(|l| i32::try_from(l).unwrap_or(i32::MAX)),
            ..pb::Query::default()
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

pub(super) fn timestamp(t: Timestamp) -> prost_types::Timestamp {
    let micros = t.as_micros();
    prost_types::Timestamp {
        seconds: micros.div_euclid(1_000_000),
        nanos: i32::try_from(micros.rem_euclid(1_000_000) * 1_000).unwrap_or(0),
    }
}

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
    match mask {
        Mask::Whole => None,
        Mask::Paths(paths) => Some(pb::PropertyMask {
            paths: paths
                .iter()
                .map(|path| {
                    path.iter()
                        .map(|name| mask_name(name))
                        .collect::<Vec<_>>()
                        .join(".")
                })
                .collect(),
        }),
    }
}

fn mask_name(name: &str) -> String {
    let mut chars = name.chars();
    let plain = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
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

    fn partitions() -> Partitions {
        Partitions {
            project_id: "p".into(),
            database_id: String::new(),
        }
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
                let back = p.property(p.value(&value, excluded)).unwrap();
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
        assert_eq!(p.property(projected).unwrap().value, Value::Integer(42));
    }
}
