//! The sink the derive writes every value into, [`ValueWriter`], with two forms behind it:
//! the embedded engine's stored form (`stored.rs`), and, with feature `cloud`, the service's
//! protocol buffers — so an entity bound for Google Cloud becomes the `pb::Entity` its commit
//! sends without passing through the stored form. Which one an entity is built in is its
//! [`Form`]. Also the wire form's own conversions: values to it, owned values from it, and the
//! checks a map received from the service passes once.

#[cfg(feature = "cloud")]
use std::collections::HashMap;
#[cfg(feature = "cloud")]
use std::sync::{Arc, OnceLock};

#[cfg(feature = "cloud")]
use gcloud_sdk::google::datastore::v1 as pb;
#[cfg(feature = "cloud")]
use gcloud_sdk::google::r#type::LatLng;

#[cfg(feature = "cloud")]
use crate::error::Error;
use crate::model::key::RawKey;
use crate::model::scalar::Timestamp;
#[cfg(feature = "cloud")]
use crate::model::scalar::{Blob, GeoPoint};
use crate::model::stored::{ENTITY, Writer};
#[cfg(feature = "cloud")]
use crate::model::stored::{MapView, ValueView, wire_excluded};
#[cfg(feature = "cloud")]
use crate::model::value::{Entries, Property, Repr, Wire};
use crate::model::value::{PropertyMap, Value};
#[cfg(feature = "cloud")]
use crate::model::wire::{Partitions, checked_timestamp, from_timestamp, timestamp};

/// The form an entity's properties are built in: the stored form, or the wire form of one
/// Google Cloud database. Chosen by the `Db`; not a public API.
#[derive(Clone, Copy)]
#[doc(hidden)]
pub struct Form<'a>(FormRepr<'a>);

#[derive(Clone, Copy)]
enum FormRepr<'a> {
    Stored,
    #[cfg(feature = "cloud")]
    Wire {
        partitions: &'a Arc<Partitions>,
        excluded: bool,
    },
    #[cfg(not(feature = "cloud"))]
    #[allow(dead_code)]
    Never(std::marker::PhantomData<&'a ()>),
}

impl Form<'static> {
    /// The embedded engine's stored form.
    pub const STORED: Form<'static> = Form(FormRepr::Stored);
}

#[cfg(feature = "cloud")]
impl<'a> Form<'a> {
    /// The wire form, key values read and written against `partitions`.
    pub(crate) fn wire(partitions: &'a Arc<Partitions>) -> Form<'a> {
        Form(FormRepr::Wire {
            partitions,
            excluded: false,
        })
    }
}

impl PropertyMap {
    /// An empty map in `form`, with room for `properties` properties (and `bytes` bytes in
    /// the stored form), which the derive fills in name order. Not a public API.
    #[doc(hidden)]
    pub fn in_form(form: Form<'_>, properties: usize, bytes: usize) -> PropertyMap {
        match form.0 {
            #[cfg(feature = "cloud")]
            FormRepr::Wire {
                partitions,
                excluded,
            } => PropertyMap {
                repr: Repr::Wire(Wire {
                    properties: HashMap::with_capacity(properties),
                    partitions: Arc::clone(partitions),
                    excluded,
                    decoded: OnceLock::new(),
                    size: OnceLock::new(),
                }),
            },
            _ => PropertyMap::stored_with_capacity(properties, bytes),
        }
    }
}

/// Where the derive writes a value: the stored form's bytes, or a `pb::Value` being built.
/// Used by the generated code through [`PropertyType::write_value`](crate::PropertyType::write_value);
/// not a public API.
pub struct ValueWriter<'a> {
    target: Target<'a>,
}

enum Target<'a> {
    Stored(&'a mut Writer),
    #[cfg(feature = "cloud")]
    Wire(WireWriter<'a>),
}

/// A `pb::Value` built from the derive's calls: arrays are announced by their length and
/// filled by the writes that follow.
#[cfg(feature = "cloud")]
pub(crate) struct WireWriter<'a> {
    partitions: &'a Arc<Partitions>,
    /// Whether the values are excluded from indexes (each element of an array is).
    excluded: bool,
    /// The arrays being filled, innermost last, with how many elements each still lacks.
    open: Vec<(Vec<pb::Value>, usize)>,
    done: Option<pb::Value>,
}

impl<'a> ValueWriter<'a> {
    /// A sink writing into stored bytes.
    pub(crate) fn stored(w: &'a mut Writer) -> ValueWriter<'a> {
        ValueWriter {
            target: Target::Stored(w),
        }
    }

    /// A sink building one wire value, excluded from indexes or not.
    #[cfg(feature = "cloud")]
    pub(crate) fn wire(partitions: &'a Arc<Partitions>, excluded: bool) -> ValueWriter<'a> {
        ValueWriter {
            target: Target::Wire(WireWriter {
                partitions,
                excluded,
                open: Vec::new(),
                done: None,
            }),
        }
    }

    /// The wire value written (null if nothing was).
    #[cfg(feature = "cloud")]
    pub(crate) fn into_wire(self) -> pb::Value {
        match self.target {
            Target::Wire(w) => w.done.unwrap_or_else(|| scalar(V::NullValue(0), false)),
            Target::Stored(_) => scalar(V::NullValue(0), false),
        }
    }

    /// A null.
    pub fn null(&mut self) {
        match &mut self.target {
            Target::Stored(w) => w.value(&Value::Null),
            #[cfg(feature = "cloud")]
            Target::Wire(w) => w.push(V::NullValue(0)),
        }
    }

    /// A boolean.
    pub fn boolean(&mut self, b: bool) {
        match &mut self.target {
            Target::Stored(w) => w.value(&Value::Boolean(b)),
            #[cfg(feature = "cloud")]
            Target::Wire(w) => w.push(V::BooleanValue(b)),
        }
    }

    /// An integer.
    pub fn integer(&mut self, i: i64) {
        match &mut self.target {
            Target::Stored(w) => w.value(&Value::Integer(i)),
            #[cfg(feature = "cloud")]
            Target::Wire(w) => w.push(V::IntegerValue(i)),
        }
    }

    /// A double.
    pub fn double(&mut self, d: f64) {
        match &mut self.target {
            Target::Stored(w) => w.value(&Value::Double(d)),
            #[cfg(feature = "cloud")]
            Target::Wire(w) => w.push(V::DoubleValue(d)),
        }
    }

    /// A timestamp.
    pub fn timestamp(&mut self, t: Timestamp) {
        match &mut self.target {
            Target::Stored(w) => w.value(&Value::Timestamp(t)),
            #[cfg(feature = "cloud")]
            Target::Wire(w) => w.push(V::TimestampValue(timestamp(t))),
        }
    }

    /// A string.
    pub fn string(&mut self, s: &str) {
        match &mut self.target {
            Target::Stored(w) => w.view(crate::model::stored::ValueView::String(s)),
            #[cfg(feature = "cloud")]
            Target::Wire(w) => w.push(V::StringValue(s.to_owned())),
        }
    }

    /// Bytes.
    pub fn blob(&mut self, b: &[u8]) {
        match &mut self.target {
            Target::Stored(w) => w.view(crate::model::stored::ValueView::Blob(b)),
            #[cfg(feature = "cloud")]
            Target::Wire(w) => w.push(V::BlobValue(b.to_vec())),
        }
    }

    /// A key.
    pub fn key(&mut self, key: &RawKey) {
        match &mut self.target {
            Target::Stored(w) => {
                w.u8(crate::model::stored::KEY);
                w.key(key);
            }
            #[cfg(feature = "cloud")]
            Target::Wire(w) => {
                let key = w.partitions.key(key);
                w.push(V::KeyValue(key));
            }
        }
    }

    /// An array of `len` values, which the next `len` writes are.
    pub fn array(&mut self, len: usize) {
        match &mut self.target {
            Target::Stored(w) => {
                w.u8(crate::model::stored::ARRAY);
                w.len(len);
            }
            #[cfg(feature = "cloud")]
            Target::Wire(w) => w.array(len),
        }
    }

    /// An embedded entity, its properties built by `build` in the sink's form.
    pub fn entity(&mut self, build: impl FnOnce(Form<'_>) -> PropertyMap) {
        match &mut self.target {
            Target::Stored(w) => {
                let properties = build(Form::STORED);
                w.u8(ENTITY);
                w.properties(&properties);
            }
            #[cfg(feature = "cloud")]
            Target::Wire(w) => {
                let form = Form(FormRepr::Wire {
                    partitions: w.partitions,
                    excluded: w.excluded,
                });
                let properties = build(form).into_wire(w.partitions, w.excluded);
                w.push(V::EntityValue(pb::Entity {
                    key: None,
                    properties,
                }));
            }
        }
    }

    /// Any value.
    pub fn value(&mut self, value: &Value) {
        match &mut self.target {
            Target::Stored(w) => w.value(value),
            #[cfg(feature = "cloud")]
            Target::Wire(w) => {
                let value = wire_value(ValueView::of(value), w.excluded, w.partitions);
                w.push_value(value);
            }
        }
    }
}

#[cfg(feature = "cloud")]
use pb::value::ValueType as V;

#[cfg(feature = "cloud")]
fn scalar(value_type: V, excluded: bool) -> pb::Value {
    pb::Value {
        value_type: Some(value_type),
        exclude_from_indexes: excluded,
        meaning: 0,
    }
}

#[cfg(feature = "cloud")]
impl WireWriter<'_> {
    fn push(&mut self, value_type: V) {
        let value = scalar(value_type, self.excluded);
        self.push_value(value);
    }

    /// Adds a finished value to the innermost open array, closing the arrays it fills.
    fn push_value(&mut self, mut value: pb::Value) {
        loop {
            let Some((elements, missing)) = self.open.last_mut() else {
                self.done = Some(value);
                return;
            };
            elements.push(value);
            *missing -= 1;
            if *missing > 0 {
                return;
            }
            let (values, _) = self.open.pop().unwrap_or_default();
            value = array(values);
        }
    }

    fn array(&mut self, len: usize) {
        match len {
            0 => self.push_value(array(Vec::new())),
            _ => self.open.push((Vec::with_capacity(len), len)),
        }
    }
}

/// An array value: the service refuses the exclusion flag on the array itself (each element
/// carries it).
#[cfg(feature = "cloud")]
fn array(values: Vec<pb::Value>) -> pb::Value {
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
#[cfg(feature = "cloud")]
pub(crate) fn wire_value(
    value: ValueView<'_>,
    excluded: bool,
    partitions: &Partitions,
) -> pb::Value {
    wire_value_at(value, excluded, partitions, 0)
}

#[cfg(feature = "cloud")]
fn wire_value_at(
    value: ValueView<'_>,
    excluded: bool,
    partitions: &Partitions,
    depth: usize,
) -> pb::Value {
    let too_deep = depth >= crate::model::value::MAX_NESTING;
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
        ValueView::Key(k) => V::KeyValue(partitions.key(&k.checked_key())),
        ValueView::Array(values) => {
            return array(
                values
                    .iter()
                    .map(|v| wire_value_at(v, excluded, partitions, depth + 1))
                    .collect(),
            );
        }
        ValueView::Entity(properties) => V::EntityValue(pb::Entity {
            key: None,
            properties: wire_properties(properties.iter(), excluded, partitions, depth + 1),
        }),
    };
    scalar(value_type, excluded)
}

/// Viewed properties as the service's map (all excluded when `excluded`).
#[cfg(feature = "cloud")]
fn wire_properties<'a>(
    properties: impl Iterator<Item = (&'a str, bool, ValueView<'a>)>,
    excluded: bool,
    partitions: &Partitions,
    depth: usize,
) -> HashMap<String, pb::Value> {
    properties
        .map(|(name, own, value)| {
            (
                name.to_owned(),
                wire_value_at(value, own || excluded, partitions, depth),
            )
        })
        .collect()
}

/// A value from the service, owned: strings and byte strings are moved, not copied.
#[cfg(feature = "cloud")]
pub(crate) fn property_from_wire(
    value: pb::Value,
    partitions: &Partitions,
) -> Result<Property, Error> {
    let excluded = value.exclude_from_indexes;
    let converted = match value.value_type {
        None | Some(V::NullValue(_)) => Value::Null,
        Some(V::BooleanValue(b)) => Value::Boolean(b),
        Some(V::IntegerValue(i)) => Value::Integer(i),
        Some(V::DoubleValue(d)) => Value::Double(d),
        Some(V::TimestampValue(t)) => Value::Timestamp(from_timestamp(&t)),
        Some(V::StringValue(s)) => Value::String(s),
        Some(V::BlobValue(b)) => Value::Blob(Blob::from(b)),
        Some(V::GeoPointValue(g)) => Value::GeoPoint(GeoPoint::new(g.latitude, g.longitude)?),
        Some(V::KeyValue(k)) => Value::Key(partitions.raw_key(k)?),
        Some(V::EntityValue(e)) => Value::Entity(from_wire_properties(e.properties, partitions)?),
        Some(V::ArrayValue(a)) => {
            let elements = a
                .values
                .into_iter()
                .map(|v| property_from_wire(v, partitions))
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

/// Properties from the service, decoded.
#[cfg(feature = "cloud")]
fn from_wire_properties(
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
#[cfg(feature = "cloud")]
fn check_wire(value: &pb::Value, partitions: &Partitions) -> Result<(), Error> {
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
        Some(V::ArrayValue(a)) => a.values.iter().try_for_each(|v| check_wire(v, partitions)),
        Some(V::EntityValue(e)) => e
            .properties
            .values()
            .try_for_each(|v| check_wire(v, partitions)),
        _ => Ok(()),
    }
}

#[cfg(feature = "cloud")]
impl PropertyMap {
    /// The properties of an entity the service returned, as they are: checked once (what
    /// converting them could refuse), converted only as they are read.
    pub(crate) fn from_wire(
        properties: HashMap<String, pb::Value>,
        partitions: &Arc<Partitions>,
    ) -> Result<PropertyMap, Error> {
        properties
            .values()
            .try_for_each(|v| check_wire(v, partitions))?;
        Ok(PropertyMap {
            repr: Repr::Wire(Wire {
                properties,
                partitions: Arc::clone(partitions),
                excluded: false,
                decoded: OnceLock::new(),
                size: OnceLock::new(),
            }),
        })
    }

    /// The properties in the wire form: as they are when the map holds that form, otherwise
    /// converted (all excluded when `excluded`).
    pub(crate) fn into_wire(
        mut self,
        partitions: &Partitions,
        excluded: bool,
    ) -> HashMap<String, pb::Value> {
        if let Repr::Wire(w) = &mut self.repr
            && (w.excluded || !excluded)
        {
            return std::mem::take(&mut w.properties);
        }
        wire_properties(MapView::Map(&self).iter(), excluded, partitions, 0)
    }

    /// The size of the properties encoded: exact in the wire form (what the service counts,
    /// as `pb::Entity` field 2; measured once), the stored form's size otherwise (within a
    /// few bytes of it for large entities).
    pub(crate) fn encoded_size(&self) -> usize {
        match &self.repr {
            Repr::Wire(w) => *w.size.get_or_init(|| {
                gcloud_sdk::prost::encoding::hash_map::encoded_len(
                    gcloud_sdk::prost::encoding::string::encoded_len,
                    gcloud_sdk::prost::encoding::message::encoded_len,
                    2,
                    &w.properties,
                )
            }),
            _ => self.stored_size(),
        }
    }
}

#[cfg(not(feature = "cloud"))]
impl PropertyMap {
    /// The size of the properties in the stored form.
    pub(crate) fn encoded_size(&self) -> usize {
        self.stored_size()
    }
}

impl PropertyMap {
    /// The size of an entity at `key` with these properties, as it is sent or stored: exact
    /// in the wire form (`pb::Entity`'s encoded length, what the service measures), the
    /// stored form's otherwise (within a few bytes of it for large entities).
    pub(crate) fn entity_size(&self, key: &RawKey) -> usize {
        #[cfg(feature = "cloud")]
        if let Repr::Wire(w) = &self.repr {
            let key = w.partitions.key(key);
            return gcloud_sdk::prost::encoding::message::encoded_len(1, &key)
                + self.encoded_size();
        }
        Writer::key_len(key) + self.encoded_size()
    }

    fn stored_size(&self) -> usize {
        match self.stored_bytes() {
            Some(stored) => stored.len(),
            None => {
                let mut w = Writer::default();
                w.properties(self);
                w.bytes.len()
            }
        }
    }
}

/// Writes `write`'s value into wire property `name` of `map` (excluded when `excluded` or
/// when the map's values all are).
#[cfg(feature = "cloud")]
pub(crate) fn put_wire(
    map: &mut Wire,
    name: &str,
    excluded: bool,
    write: impl FnOnce(&mut ValueWriter<'_>),
) {
    map.decoded = OnceLock::new();
    map.size = OnceLock::new();
    let mut sink = ValueWriter::wire(&map.partitions, excluded || map.excluded);
    write(&mut sink);
    let value = sink.into_wire();
    map.properties.insert(name.to_owned(), value);
}

/// Every property of a wire map, decoded, in name order.
#[cfg(feature = "cloud")]
pub(crate) fn decode_wire(map: &Wire) -> Entries {
    let mut properties: Vec<(&str, Property)> = map
        .properties
        .iter()
        .map(|(name, v)| {
            let property = Property {
                value: ValueView::wire(v, &map.partitions).checked_value(),
                excluded: wire_excluded(v),
            };
            (name.as_str(), property)
        })
        .collect();
    properties.sort_unstable_by(|a, b| a.0.cmp(b.0));
    let mut entries = Entries::default();
    for (name, property) in properties {
        entries.insert(name, property);
    }
    entries
}

#[cfg(all(test, feature = "cloud"))]
mod tests {
    use super::*;
    use crate::model::key::{IdOrName, KeyId, PartitionId, PathElement};

    /// What the derive writes for an entity with every kind of field, into `form`.
    fn written(form: Form<'_>) -> PropertyMap {
        let reference = RawKey::new(
            None,
            vec![PathElement::new("Other", Some(IdOrName::Id(KeyId::new(9).unwrap()))).unwrap()],
        )
        .unwrap();
        let mut m = PropertyMap::in_form(form, 8, 256);
        m.put_with("a_tags", false, |w| {
            w.array(2);
            w.string("x");
            w.string("é");
        });
        m.put_with("b_empty", true, |w| w.array(0));
        m.put_with("c_inner", true, |w| {
            w.entity(|form| {
                let mut inner = PropertyMap::in_form(form, 2, 64);
                inner.put_with("n", false, |w| w.integer(-3));
                inner.put_with("when", false, |w| {
                    w.timestamp(Timestamp::from_micros(-1_500_001))
                });
                inner
            })
        });
        m.put_with("d_key", false, |w| w.key(&reference));
        m.put_with("e_nested", false, |w| {
            w.value(&Value::Array(vec![
                Value::Null,
                Value::Double(0.5),
                Value::Blob(Blob::from(vec![0, 255])),
                Value::GeoPoint(GeoPoint::new(1.5, -2.5).unwrap()),
            ]))
        });
        m.put_with("f_none", false, |w| w.null());
        m.put_with("g_flag", false, |w| w.boolean(true));
        m
    }

    /// The two forms of the sink are one: an entity written straight into the wire form is the
    /// message the stored form converts to (the cloud backend's conversion of any map), with
    /// exclusion carried into excluded embedded entities and key values in the handle's
    /// partition.
    #[test]
    fn the_wire_form_is_what_the_stored_form_converts_to() {
        let handle = PartitionId {
            project_id: "p".into(),
            database_id: "db".into(),
            namespace: "ns".into(),
        };
        let partitions = Arc::new(Partitions::new("p", "db").writing_into(&handle));
        let wire = written(Form::wire(&partitions));
        assert!(matches!(wire.repr, Repr::Wire(_)));
        let stored = written(Form::STORED);
        assert!(stored.stored_bytes().is_some());
        assert_eq!(wire.len(), 7);
        // Read back, the values are the written ones (exclusion is the wire's: carried by
        // the values inside an excluded entity, and by no element of an empty array).
        let values = |m: &PropertyMap| m.values().map(|p| p.value.clone()).collect::<Vec<_>>();
        let mut expected = values(&stored);
        expected[2] = Value::Entity(PropertyMap::from([
            ("n", Property::excluded(Value::Integer(-3))),
            (
                "when",
                Property::excluded(Value::Timestamp(Timestamp::from_micros(-1_500_001))),
            ),
        ]));
        if let Value::Key(k) = &mut expected[3] {
            *k = k.clone().with_partition(handle.clone());
        }
        assert_eq!(values(&wire), expected);
        let size = wire.encoded_size();
        let sent = wire.into_wire(&partitions, false);
        assert_eq!(sent, stored.into_wire(&partitions, false));
        assert_eq!(
            size,
            gcloud_sdk::prost::encoding::hash_map::encoded_len(
                gcloud_sdk::prost::encoding::string::encoded_len,
                gcloud_sdk::prost::encoding::message::encoded_len,
                2,
                &sent,
            )
        );
        let inner = match &sent["c_inner"].value_type {
            Some(V::EntityValue(e)) => e,
            other => panic!("{other:?}"),
        };
        assert!(inner.properties.values().all(|v| v.exclude_from_indexes));
        match &sent["d_key"].value_type {
            Some(V::KeyValue(k)) => {
                let partition = k.partition_id.as_ref().unwrap();
                assert_eq!(partition.namespace_id, "ns");
                assert_eq!(partition.database_id, "db");
            }
            other => panic!("{other:?}"),
        }
        // The flag lives on an array's elements, never on the array.
        assert!(!sent["a_tags"].exclude_from_indexes);
        assert!(!sent["b_empty"].exclude_from_indexes);
    }

    /// A map received from the service is read lazily, and what it cannot hold is refused
    /// when it arrives, not turned into a null later.
    #[test]
    fn a_received_map_is_checked_once_and_read_where_it_lies() {
        let partitions = Arc::new(Partitions::new("p", ""));
        let mut properties = HashMap::new();
        properties.insert("s".to_owned(), scalar(V::StringValue("hi".into()), true));
        let map = PropertyMap::from_wire(properties.clone(), &partitions).unwrap();
        assert_eq!(map["s"], Property::excluded(Value::String("hi".into())));
        let mut map = PropertyMap::from_wire(properties.clone(), &partitions).unwrap();
        let taken = map.take_as(
            "s",
            |_| unreachable!(),
            |mut value| match &mut value {
                Value::String(s) => Ok(std::mem::take(s)),
                other => Err(crate::model::value::DecodeError::mismatch("string", other)),
            },
        );
        assert_eq!(taken.unwrap().unwrap(), "hi");
        assert!(map.is_empty() && matches!(map.repr, Repr::Wire(_)));
        properties.insert(
            "g".to_owned(),
            scalar(
                V::GeoPointValue(LatLng {
                    latitude: 91.0,
                    longitude: 0.0,
                }),
                false,
            ),
        );
        assert!(PropertyMap::from_wire(properties, &partitions).is_err());
    }
}
