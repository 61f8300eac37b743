//! The wire form's values: a value where it lies written as the service stores it, a
//! property received from it read into an owned one, and a received value checked once on
//! arrival (what the crate cannot hold is refused there, never read as a null later). The
//! maps in the wire form, which the derive writes into and reads from, are `wire_form.rs`.

use std::collections::HashMap;

use gcloud_sdk::google::datastore::v1 as pb;
use gcloud_sdk::google::r#type::LatLng;

use crate::backend::cloud::wire::{Partitions, checked_timestamp, from_timestamp, timestamp};
use datastore_entity_core::error::Error;
use datastore_entity_core::model::annotations::{AnnotationsView, VECTOR_MEANING};
use datastore_entity_core::model::key::KEY_PROPERTY;
use datastore_entity_core::model::scalar::{Blob, GeoPoint, Vector};
use datastore_entity_core::model::value::{Annotations, Property, PropertyMap, Value};
use datastore_entity_core::model::views::{ValueView, Viewed};
use pb::value::ValueType as V;

/// What a view of a map checked when it was built reads, by construction.
const CHECKED: &str = "a view of a map checked when it was built reads whole (a bug of \
                       datastore-entity if not: please report it)";

pub fn scalar(value_type: V, excluded: bool) -> pb::Value {
    pb::Value {
        value_type: Some(value_type),
        exclude_from_indexes: excluded,
        meaning: 0,
    }
}

/// An array value: the service refuses the exclusion flag on the array itself (each element
/// carries it).
pub fn array(values: Vec<pb::Value>) -> pb::Value {
    pb::Value {
        value_type: Some(V::ArrayValue(pb::ArrayValue { values })),
        ..pb::Value::default()
    }
}

/// A value where it lies (stored bytes, a decoded value, the wire form) as the service
/// stores it, in one pass: each string and byte string copied once. `excluded` applies to
/// the value, each element of an array, and everything inside an embedded entity (the
/// service would still index its sub-properties, `outer.inner`, otherwise: R-I1). Like the
/// stored form's writer, it stops one level past [`MAX_NESTING`](crate::MAX_NESTING) with an
/// empty array or entity, which the limits check refuses there.
pub fn wire_value(value: ValueView<'_>, excluded: bool, partitions: &Partitions) -> pb::Value {
    wire_value_at(value, excluded, AnnotationsView::None, partitions, 0)
}

/// [`wire_value`] of a property's value, with what its annotations say: its meaning, and in
/// an array each element's meaning and exclusion.
fn wire_value_at(
    value: ValueView<'_>,
    excluded: bool,
    annotations: AnnotationsView<'_>,
    partitions: &Partitions,
    depth: usize,
) -> pb::Value {
    let too_deep = depth >= datastore_entity_core::model::value::MAX_NESTING;
    let value_type = match value {
        ValueView::Array(_) if too_deep => return array(Vec::new()),
        ValueView::Entity(_) if too_deep => V::EntityValue(pb::Entity::default()),
        ValueView::Null => V::NullValue(0),
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
        ValueView::Key(k) => V::KeyValue(partitions.key(&k.to_key().expect(CHECKED))),
        ValueView::Array(values) => {
            return array(
                values
                    .iter()
                    .enumerate()
                    .map(|(i, v)| {
                        let (meaning, excluded) = annotations.element(i, excluded);
                        let none = AnnotationsView::None;
                        let mut element = wire_value_at(v, excluded, none, partitions, depth + 1);
                        element.meaning = meaning;
                        element
                    })
                    .collect(),
            );
        }
        ValueView::Entity(properties) => V::EntityValue(wire_entity(wire_properties(
            properties.iter(),
            excluded,
            partitions,
            depth + 1,
        ))),
        ValueView::Vector(vector) => return wire_vector(vector.values(), excluded),
    };
    let mut value = scalar(value_type, excluded);
    value.meaning = annotations.meaning();
    value
}

/// A vector as the service stores it: an array of doubles with meaning 31, the exclusion
/// flag on the array itself (the service refuses an indexed vector).
fn wire_vector(values: impl Iterator<Item = f64>, excluded: bool) -> pb::Value {
    pb::Value {
        value_type: Some(V::ArrayValue(pb::ArrayValue {
            values: values.map(|d| scalar(V::DoubleValue(d), false)).collect(),
        })),
        exclude_from_indexes: excluded,
        meaning: VECTOR_MEANING,
    }
}

/// The vector a received array with meaning 31 holds (`None`: it is not one the crate can
/// hold, which arrival refuses).
fn received_vector(values: &[pb::Value]) -> Option<Vector> {
    let doubles = values.iter().map(|v| match v.value_type {
        Some(V::DoubleValue(d)) => Some(d),
        _ => None,
    });
    Vector::new(doubles.collect::<Option<Vec<f64>>>()?).ok()
}

/// An embedded entity as the service holds it: a key among its properties
/// ([`KEY_PROPERTY`]) is the entity's own key.
pub fn wire_entity(mut properties: HashMap<String, pb::Value>) -> pb::Entity {
    let key = match properties.remove(KEY_PROPERTY) {
        Some(pb::Value {
            value_type: Some(V::KeyValue(key)),
            ..
        }) => Some(key),
        Some(other) => {
            properties.insert(KEY_PROPERTY.to_owned(), other);
            None
        }
        None => None,
    };
    pb::Entity { key, properties }
}

/// Viewed properties as the service's map (all excluded when `excluded`).
pub fn wire_properties<'a>(
    properties: impl Iterator<Item = Viewed<'a>>,
    excluded: bool,
    partitions: &Partitions,
    depth: usize,
) -> HashMap<String, pb::Value> {
    properties
        .map(|(name, own, value, annotations)| {
            let value = wire_value_at(value, own || excluded, annotations, partitions, depth);
            (name.to_owned(), value)
        })
        .collect()
}

/// A value from the service, owned: strings and byte strings are moved, not copied.
pub fn property_from_wire(value: pb::Value, partitions: &Partitions) -> Result<Property, Error> {
    let (annotations, excluded) = match &value.value_type {
        // The flags live on the elements of an array, and their meanings.
        Some(V::ArrayValue(a)) if value.meaning != VECTOR_MEANING => Annotations::of_elements(
            a.values
                .iter()
                .map(|v| (v.meaning, v.exclude_from_indexes))
                .collect(),
        ),
        // A vector's meaning (31) is its type.
        Some(V::ArrayValue(_)) => (Annotations::None, value.exclude_from_indexes),
        _ => match value.meaning {
            0 => (Annotations::None, value.exclude_from_indexes),
            meaning => (Annotations::Meaning(meaning), value.exclude_from_indexes),
        },
    };
    Ok(Property {
        value: value_from_wire(value, partitions)?,
        excluded,
        annotations,
    })
}

/// A value from the service, owned, without its flags and meanings (what a field, an
/// array's element or a transform's result reads): strings and byte strings are moved, not
/// copied.
pub fn value_from_wire(value: pb::Value, partitions: &Partitions) -> Result<Value, Error> {
    Ok(match value.value_type {
        None | Some(V::NullValue(_)) => Value::Null,
        Some(V::BooleanValue(b)) => Value::Boolean(b),
        Some(V::IntegerValue(i)) => Value::Integer(i),
        Some(V::DoubleValue(d)) => Value::Double(d),
        Some(V::TimestampValue(t)) => Value::Timestamp(from_timestamp(&t)),
        Some(V::StringValue(s)) => Value::String(s),
        Some(V::BlobValue(b)) => Value::Blob(Blob::from(b)),
        Some(V::GeoPointValue(g)) => Value::GeoPoint(GeoPoint::new(g.latitude, g.longitude)?),
        Some(V::KeyValue(k)) => Value::Key(partitions.raw_key(k)?),
        Some(V::EntityValue(e)) => {
            let mut properties = from_wire_properties(e.properties, partitions)?;
            if let Some(key) = e.key {
                let key = Value::Key(partitions.raw_key(key)?);
                properties.insert(KEY_PROPERTY, Property::excluded(key));
            }
            Value::Entity(properties)
        }
        Some(V::ArrayValue(a)) if value.meaning == VECTOR_MEANING => {
            Value::Vector(received_vector(&a.values).ok_or_else(not_a_vector)?)
        }
        Some(V::ArrayValue(a)) => Value::Array(
            a.values
                .into_iter()
                .map(|v| value_from_wire(v, partitions))
                .collect::<Result<Vec<_>, _>>()?,
        ),
    })
}

fn not_a_vector() -> Error {
    Error::InvalidValue {
        kind: String::new(),
        property: String::new(),
        reason: "the server sent a vector (an array with meaning 31) that is not 1 to 2,048 \
                 finite doubles"
            .to_owned(),
    }
}

/// Properties from the service, decoded.
pub fn from_wire_properties(
    properties: HashMap<String, pb::Value>,
    partitions: &Partitions,
) -> Result<PropertyMap, Error> {
    // Sorted once, then appended in name order: no search, no shifting.
    let mut converted = properties
        .into_iter()
        .map(|(name, value)| Ok((name, property_from_wire(value, partitions)?)))
        .collect::<Result<Vec<_>, Error>>()?;
    converted.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    let name_bytes = converted.iter().map(|(name, _)| name.len()).sum();
    let mut map = PropertyMap::with_capacity(converted.len(), name_bytes);
    map.extend(converted);
    Ok(map)
}

/// Whether a value from the service converts: what [`property_from_wire`] could refuse (a geo point
/// out of range, a key the crate cannot hold, a timestamp outside the service's range),
/// found without converting anything else.
pub fn check_wire(value: &pb::Value, partitions: &Partitions) -> Result<(), Error> {
    match &value.value_type {
        Some(V::GeoPointValue(g)) => GeoPoint::new(g.latitude, g.longitude).map(drop),
        Some(V::TimestampValue(t)) => match checked_timestamp(t) {
            Some(_) => Ok(()),
            None => Err(Error::InvalidValue {
                kind: String::new(),
                property: String::new(),
                reason: format!(
                    "the server sent a timestamp outside the range the service stores \
                     ({} s, {} ns)",
                    t.seconds, t.nanos
                ),
            }),
        },
        Some(V::KeyValue(k)) => partitions.raw_key(k.clone()).map(drop),
        Some(V::ArrayValue(a)) if value.meaning == VECTOR_MEANING => received_vector(&a.values)
            .map(drop)
            .ok_or_else(not_a_vector),
        Some(V::ArrayValue(a)) => a.values.iter().try_for_each(|v| check_wire(v, partitions)),
        Some(V::EntityValue(e)) => {
            if let Some(key) = &e.key {
                partitions.raw_key(key.clone())?;
            }
            e.properties
                .values()
                .try_for_each(|v| check_wire(v, partitions))
        }
        _ => Ok(()),
    }
}
