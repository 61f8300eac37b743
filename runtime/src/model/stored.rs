//! The stored form of values and property maps: the bytes the embedded engine keeps for every
//! entity (and the crate for cursors), written by [`Writer`] (the derive writes into it
//! through `sink.rs`), read back whole by [`Reader`] or viewed where they lie ([`ValueView`])
//! without building [`Value`]s: the derive reads each field straight out of it, and the
//! engine checks and indexes it where it lies. Views also see decoded values and, with
//! feature `cloud`, the service's wire form, so every check runs on any of the three.
//!
//! A property map is a count, then per property in name order its name, whether it is
//! excluded, and its value; a value is a tag byte and its payload (little-endian numbers,
//! length-prefixed strings). Decoding never panics: malformed bytes are [`Malformed`], and
//! every decoded name, id and key is validated again. `tests/tests/formats.rs` pins the bytes.

use std::collections::VecDeque;
use std::sync::OnceLock;

use crate::model::annotations::{AnnotationsView, head, write_head};
#[cfg(feature = "cloud")]
use crate::model::key::KEY_PROPERTY;
use crate::model::key::{IdOrName, KeyId, PartitionId, PathElement, RawKey};
use crate::model::name::KeyName;
use crate::model::scalar::{Blob, GeoPoint, Timestamp, Vector};
use crate::model::value::{
    DecodeError, Entries, Facts, MAX_NESTING, Property, PropertyMap, Repr, Slot, Stored, Value,
};
#[cfg(feature = "cloud")]
use crate::model::wire::{Partitions, from_timestamp};
#[cfg(feature = "cloud")]
use gcloud_sdk::google::datastore::v1 as pb;

pub(crate) const NULL: u8 = 0;
pub(crate) const BOOLEAN: u8 = 1;
pub(crate) const INTEGER: u8 = 2;
pub(crate) const DOUBLE: u8 = 3;
pub(crate) const TIMESTAMP: u8 = 4;
pub(crate) const STRING: u8 = 5;
pub(crate) const BLOB: u8 = 6;
pub(crate) const GEO: u8 = 7;
pub(crate) const KEY: u8 = 8;
pub(crate) const ARRAY: u8 = 9;
pub(crate) const ENTITY: u8 = 10;
/// A vector: its dimension, then each value's bits (eight bytes each).
pub(crate) const VECTOR: u8 = 11;
#[cfg(feature = "cloud")]
pub(crate) use crate::model::annotations::VECTOR_MEANING;

/// What a view of checked bytes reads, by construction: the maps' checks (`slots` for stored
/// bytes, `PropertyMap::from_wire` for received messages) ran when they were built.
const CHECKED: &str = "a view of a map checked when it was built reads whole (a bug of \
                       datastore-entity if not: please report it)";

/// Nesting deeper than this (arrays in entities in arrays…) is refused when reading. What a
/// [`Writer`] writes is far shallower: it stops one level past [`MAX_NESTING`] in each value
/// it is given, and the write is refused there (see [`Writer::value`]).
const MAX_DEPTH: usize = 128;

/// Bytes that are not what a [`Writer`] (or the engine's order-preserving encoding) wrote:
/// only ever from a corrupt store or an altered cursor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Malformed;

/// Appends encoded values to a byte buffer.
#[derive(Default)]
pub(crate) struct Writer {
    pub(crate) bytes: Vec<u8>,
}

impl Writer {
    #[inline]
    pub(crate) fn u8(&mut self, b: u8) {
        self.bytes.push(b);
    }

    #[inline]
    pub(crate) fn u64(&mut self, n: u64) {
        self.bytes.extend_from_slice(&n.to_le_bytes());
    }

    /// A tag and an eight-byte payload: an integer, a double or a timestamp.
    #[inline]
    pub(crate) fn tagged(&mut self, tag: u8, n: u64) {
        self.u8(tag);
        self.u64(n);
    }

    #[inline]
    pub(crate) fn len(&mut self, n: usize) {
        // Lengths beyond u32 cannot occur: entities are far smaller.
        self.bytes
            .extend_from_slice(&u32::try_from(n).unwrap_or(u32::MAX).to_le_bytes());
    }

    #[inline]
    pub(crate) fn bytes(&mut self, b: &[u8]) {
        self.len(b.len());
        self.bytes.extend_from_slice(b);
    }

    /// How many bytes [`Writer::key`] writes for `key`.
    pub(crate) fn key_len(key: &RawKey) -> usize {
        let partition = key.partition().map_or(1, |p| {
            13 + p.project_id.len() + p.database_id.len() + p.namespace.len()
        });
        let path: usize = key
            .path()
            .iter()
            .map(|e| {
                5 + e.kind().len()
                    + match e.id_or_name() {
                        None => 0,
                        Some(IdOrName::Id(_)) => 8,
                        Some(IdOrName::Name(name)) => 4 + name.as_str().len(),
                    }
            })
            .sum();
        partition + 4 + path
    }

    pub(crate) fn key(&mut self, key: &RawKey) {
        self.partition(key.partition());
        self.path(key);
    }

    pub(crate) fn partition(&mut self, partition: Option<&PartitionId>) {
        match partition {
            None => self.u8(0),
            Some(partition) => {
                self.u8(1);
                self.bytes(partition.project_id.as_bytes());
                self.bytes(partition.database_id.as_bytes());
                self.bytes(partition.namespace.as_bytes());
            }
        }
    }

    /// The key's path without its partition.
    pub(crate) fn path(&mut self, key: &RawKey) {
        self.len(key.path().len());
        for element in key.path() {
            self.bytes(element.kind().as_bytes());
            match element.id_or_name() {
                None => self.u8(0),
                Some(IdOrName::Id(id)) => {
                    self.u8(1);
                    self.u64(id.get().cast_unsigned());
                }
                Some(IdOrName::Name(name)) => {
                    self.u8(2);
                    self.bytes(name.as_str().as_bytes());
                }
            }
        }
    }

    /// Writes `value`. A value nested deeper than [`MAX_NESTING`] (which a caller can build,
    /// and which every write refuses) is written down to one level past the limit, where an
    /// empty array or entity stands for what it held: the limits check refuses it there,
    /// naming its path, and the writer never recurses deeper than that.
    pub(crate) fn value(&mut self, value: &Value) {
        self.value_at(value, 0);
    }

    fn value_at(&mut self, value: &Value, depth: usize) {
        match value {
            Value::Array(_) if depth >= MAX_NESTING => {
                self.u8(ARRAY);
                self.len(0);
            }
            Value::Entity(_) if depth >= MAX_NESTING => {
                self.u8(ENTITY);
                self.len(0);
            }
            Value::Null => self.u8(NULL),
            Value::Boolean(b) => {
                self.u8(BOOLEAN);
                self.u8(u8::from(*b));
            }
            Value::Integer(i) => {
                self.u8(INTEGER);
                self.u64(i.cast_unsigned());
            }
            Value::Double(d) => {
                self.u8(DOUBLE);
                self.u64(d.to_bits());
            }
            Value::Timestamp(t) => {
                self.u8(TIMESTAMP);
                self.u64(t.as_micros().cast_unsigned());
            }
            Value::String(s) => {
                self.u8(STRING);
                self.bytes(s.as_bytes());
            }
            Value::Blob(b) => {
                self.u8(BLOB);
                self.bytes(b);
            }
            Value::GeoPoint(g) => {
                self.u8(GEO);
                self.u64(g.latitude().to_bits());
                self.u64(g.longitude().to_bits());
            }
            Value::Key(k) => {
                self.u8(KEY);
                self.key(k);
            }
            Value::Array(values) => {
                self.u8(ARRAY);
                self.len(values.len());
                values.iter().for_each(|v| self.value_at(v, depth + 1));
            }
            Value::Entity(properties) => {
                self.u8(ENTITY);
                self.properties_at(properties, depth + 1);
            }
            Value::Vector(vector) => self.vector(vector.as_slice().iter().copied()),
        }
    }

    /// A vector's values (checked by [`Vector::new`] or on arrival).
    pub(crate) fn vector(&mut self, values: impl ExactSizeIterator<Item = f64>) {
        self.u8(VECTOR);
        self.len(values.len());
        values.for_each(|v| self.u64(v.to_bits()));
    }

    pub(crate) fn properties(&mut self, properties: &PropertyMap) {
        self.properties_at(properties, 0);
    }

    fn properties_at(&mut self, properties: &PropertyMap, depth: usize) {
        match &properties.repr {
            Repr::Stored(s) if s.exact => self.bytes.extend_from_slice(&s.bytes),
            Repr::Stored(s) => {
                self.len(s.live().len());
                // Each property's bytes are contiguous: its name's length prefix to its value's end.
                for slot in s.live() {
                    let start = slot.name.0 as usize - 4;
                    self.bytes.extend_from_slice(
                        s.bytes
                            .get(start..slot.value.1 as usize)
                            .unwrap_or_default(),
                    );
                }
            }
            Repr::Entries(e) => {
                self.len(e.entries.len());
                for entry in &e.entries {
                    self.bytes(e.name(entry).as_bytes());
                    let annotations = AnnotationsView::of(&entry.property.annotations);
                    write_head(&mut self.bytes, entry.property.excluded, annotations);
                    self.value_at(&entry.property.value, depth);
                }
            }
            #[cfg(feature = "cloud")]
            Repr::Wire(_) => self.viewed_properties(properties.view(), depth),
        }
    }

    /// Viewed properties, in any order (the stored form keeps them in name order).
    #[cfg(feature = "cloud")]
    fn viewed_properties<'a>(
        &mut self,
        properties: impl Iterator<Item = Viewed<'a>>,
        depth: usize,
    ) {
        let mut properties: Vec<_> = properties.collect();
        properties.sort_unstable_by(|a, b| a.0.cmp(b.0));
        self.len(properties.len());
        for (name, excluded, value, annotations) in properties {
            self.bytes(name.as_bytes());
            write_head(&mut self.bytes, excluded, annotations);
            self.view_at(value, depth);
        }
    }

    /// A viewed value, stopping one level past the limit as [`Writer::value`] does.
    #[cfg(feature = "cloud")]
    fn view_at(&mut self, value: ValueView<'_>, depth: usize) {
        match value {
            ValueView::Array(_) if depth >= MAX_NESTING => {
                self.u8(ARRAY);
                self.len(0);
            }
            ValueView::Entity(_) if depth >= MAX_NESTING => {
                self.u8(ENTITY);
                self.len(0);
            }
            ValueView::Key(KeyView::Encoded(bytes)) => {
                self.u8(KEY);
                self.bytes.extend_from_slice(bytes);
            }
            ValueView::Key(k) => self.value(&Value::Key(k.checked_key())),
            ValueView::Array(values) => {
                self.u8(ARRAY);
                self.len(values.len());
                values.iter().for_each(|v| self.view_at(v, depth + 1));
            }
            ValueView::Entity(MapView::Map(map)) => {
                self.u8(ENTITY);
                self.properties_at(map, depth + 1);
            }
            ValueView::Entity(MapView::Encoded(bytes)) => {
                self.u8(ENTITY);
                self.bytes.extend_from_slice(bytes);
            }
            #[cfg(feature = "cloud")]
            ValueView::Entity(map @ MapView::Wire(..)) => {
                self.u8(ENTITY);
                self.viewed_properties(map.iter(), depth + 1);
            }
            ValueView::Null => self.u8(NULL),
            ValueView::Boolean(b) => self.value(&Value::Boolean(b)),
            ValueView::Integer(i) => self.value(&Value::Integer(i)),
            ValueView::Double(d) => self.value(&Value::Double(d)),
            ValueView::Timestamp(t) => self.value(&Value::Timestamp(t)),
            ValueView::GeoPoint(g) => self.value(&Value::GeoPoint(g)),
            ValueView::Vector(v) => self.vector(v.values()),
            ValueView::String(s) => {
                self.u8(STRING);
                self.bytes(s.as_bytes());
            }
            ValueView::Blob(b) => {
                self.u8(BLOB);
                self.bytes(b);
            }
        }
    }
}

/// Reads what a [`Writer`] wrote.
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
    depth: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes, depth: 0 }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], Malformed> {
        if self.bytes.len() < n {
            return Err(Malformed);
        }
        let (head, tail) = self.bytes.split_at(n);
        self.bytes = tail;
        Ok(head)
    }

    pub(crate) fn u8(&mut self) -> Result<u8, Malformed> {
        Ok(self.take(1)?[0])
    }

    pub(crate) fn u64(&mut self) -> Result<u64, Malformed> {
        let mut buf = [0u8; 8];
        buf.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(buf))
    }

    fn len(&mut self) -> Result<usize, Malformed> {
        let mut buf = [0u8; 4];
        buf.copy_from_slice(self.take(4)?);
        let n = u32::from_le_bytes(buf) as usize;
        // Every element takes at least one byte: a larger count is a lie, not a reason to allocate.
        if n > self.bytes.len() {
            return Err(Malformed);
        }
        Ok(n)
    }

    /// A length-prefixed byte string, as [`Writer::bytes`] wrote it.
    pub(crate) fn bytes(&mut self) -> Result<&'a [u8], Malformed> {
        let n = self.len()?;
        self.take(n)
    }

    fn string(&mut self) -> Result<String, Malformed> {
        let n = self.len()?;
        let bytes = self.take(n)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| Malformed)
    }

    pub(crate) fn key(&mut self) -> Result<RawKey, Malformed> {
        let partition = match self.u8()? {
            0 => None,
            1 => Some(PartitionId {
                project_id: self.string()?,
                database_id: self.string()?,
                namespace: self.string()?,
            }),
            _ => return Err(Malformed),
        };
        let n = self.len()?;
        let mut path = Vec::with_capacity(n);
        for _ in 0..n {
            let kind = self.string()?;
            let id_or_name = match self.u8()? {
                0 => None,
                1 => Some(IdOrName::Id(
                    KeyId::stored(self.u64()?.cast_signed()).map_err(|_| Malformed)?,
                )),
                2 => Some(IdOrName::Name(KeyName::stored(self.string()?))),
                _ => return Err(Malformed),
            };
            // Any key the service accepts reads back (a `/`, a negative id): lenient, as the
            // service's reads are.
            path.push(PathElement::stored(kind, id_or_name));
        }
        RawKey::new(partition, path).map_err(|_| Malformed)
    }

    pub(crate) fn value(&mut self) -> Result<Value, Malformed> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(Malformed);
        }
        let value = match self.u8()? {
            NULL => Value::Null,
            BOOLEAN => Value::Boolean(self.u8()? != 0),
            INTEGER => Value::Integer(self.u64()?.cast_signed()),
            DOUBLE => Value::Double(f64::from_bits(self.u64()?)),
            TIMESTAMP => {
                Value::Timestamp(Timestamp::checked(self.u64()?.cast_signed()).ok_or(Malformed)?)
            }
            STRING => Value::String(self.string()?),
            BLOB => {
                let n = self.len()?;
                Value::Blob(Blob::from(self.take(n)?))
            }
            GEO => {
                let lat = f64::from_bits(self.u64()?);
                let lng = f64::from_bits(self.u64()?);
                Value::GeoPoint(GeoPoint::new(lat, lng).map_err(|_| Malformed)?)
            }
            KEY => Value::Key(self.key()?),
            ARRAY => {
                let n = self.len()?;
                Value::Array(
                    (0..n)
                        .map(|_| self.value())
                        .collect::<Result<_, Malformed>>()?,
                )
            }
            ENTITY => Value::Entity(self.properties()?),
            VECTOR => {
                let n = self.len()?;
                let bytes = self.take(n.checked_mul(8).ok_or(Malformed)?)?;
                Value::Vector(vector_of(bytes)?)
            }
            _ => return Err(Malformed),
        };
        self.depth -= 1;
        Ok(value)
    }

    pub(crate) fn properties(&mut self) -> Result<PropertyMap, Malformed> {
        let n = self.len()?;
        let mut entries = Entries {
            names: String::with_capacity(16 * n.min(64)),
            entries: VecDeque::with_capacity(n.min(self.bytes.len())),
        };
        for _ in 0..n {
            let name = self.string()?;
            let (excluded, annotations, rest) = head(self.bytes).ok_or(Malformed)?;
            let annotations = AnnotationsView::stored(annotations).to_annotations();
            self.bytes = rest;
            let value = self.value()?;
            let property = Property {
                value,
                excluded,
                annotations,
            };
            entries.insert(&name, property);
        }
        Ok(PropertyMap {
            repr: Repr::Entries(entries),
        })
    }
}

/// A stored value, borrowed where it lies: in stored bytes, or in a decoded [`Value`].
#[derive(Debug, Clone, Copy)]
pub(crate) enum ValueView<'a> {
    Null,
    Boolean(bool),
    Integer(i64),
    Double(f64),
    Timestamp(Timestamp),
    String(&'a str),
    Blob(&'a [u8]),
    GeoPoint(GeoPoint),
    Key(KeyView<'a>),
    Array(ArrayView<'a>),
    Entity(MapView<'a>),
    Vector(VectorView<'a>),
}

/// A vector's values, where they lie (checked: 1 to 2,048 finite doubles).
#[derive(Debug, Clone, Copy)]
pub(crate) enum VectorView<'a> {
    Decoded(&'a Vector),
    /// Eight bytes per value, little-endian bits.
    Encoded(&'a [u8]),
    #[cfg(feature = "cloud")]
    Wire(&'a [pb::Value]),
}

impl<'a> VectorView<'a> {
    /// The values, in order.
    pub(crate) fn values(self) -> VectorValues<'a> {
        match self {
            VectorView::Decoded(v) => VectorValues::Decoded(v.as_slice().iter()),
            VectorView::Encoded(bytes) => VectorValues::Encoded(bytes.chunks_exact(8)),
            #[cfg(feature = "cloud")]
            VectorView::Wire(values) => VectorValues::Wire(values.iter()),
        }
    }

    /// The vector, owned.
    pub(crate) fn to_vector(self) -> Vector {
        Vector::new(self.values().collect()).expect(CHECKED)
    }
}

/// A vector's values where they lie, in order.
pub(crate) enum VectorValues<'a> {
    Decoded(std::slice::Iter<'a, f64>),
    Encoded(std::slice::ChunksExact<'a, u8>),
    #[cfg(feature = "cloud")]
    Wire(std::slice::Iter<'a, pb::Value>),
}

impl Iterator for VectorValues<'_> {
    type Item = f64;

    #[inline]
    fn next(&mut self) -> Option<f64> {
        match self {
            VectorValues::Decoded(values) => values.next().copied(),
            VectorValues::Encoded(chunks) => chunks.next().map(double_bits),
            #[cfg(feature = "cloud")]
            VectorValues::Wire(values) => values.next().map(|v| match v.value_type {
                Some(pb::value::ValueType::DoubleValue(d)) => d,
                // Checked on arrival: every element of a received vector is a double.
                _ => f64::NAN,
            }),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = match self {
            VectorValues::Decoded(values) => values.len(),
            VectorValues::Encoded(chunks) => chunks.len(),
            #[cfg(feature = "cloud")]
            VectorValues::Wire(values) => values.len(),
        };
        (n, Some(n))
    }
}

impl ExactSizeIterator for VectorValues<'_> {}

/// A double from its eight stored bytes.
fn double_bits(bytes: &[u8]) -> f64 {
    f64::from_bits(u64::from_le_bytes(bytes.try_into().unwrap_or_default()))
}

/// A vector's stored values (eight bytes each), checked.
fn vector_of(bytes: &[u8]) -> Result<Vector, Malformed> {
    Vector::new(bytes.chunks_exact(8).map(double_bits).collect()).map_err(|_| Malformed)
}

/// A key value: decoded, or its stored bytes (partition, then path).
#[derive(Debug, Clone, Copy)]
pub(crate) enum KeyView<'a> {
    Decoded(&'a RawKey),
    Encoded(&'a [u8]),
    #[cfg(feature = "cloud")]
    Wire(&'a pb::Key, &'a Partitions),
}

/// An array value's elements.
#[derive(Debug, Clone, Copy)]
pub(crate) enum ArrayView<'a> {
    Values(&'a [Value]),
    /// `len` stored values, back to back.
    Encoded {
        bytes: &'a [u8],
        len: usize,
    },
    #[cfg(feature = "cloud")]
    Wire(&'a [pb::Value], &'a Partitions),
}

/// An embedded entity's properties.
#[derive(Debug, Clone, Copy)]
pub(crate) enum MapView<'a> {
    Map(&'a PropertyMap),
    /// A stored property map (count first).
    Encoded(&'a [u8]),
    /// An entity value received: its properties, and its own key as [`KEY_PROPERTY`].
    #[cfg(feature = "cloud")]
    Wire(&'a pb::Entity, &'a Partitions),
}

impl<'a> ValueView<'a> {
    /// The view of a decoded value.
    pub(crate) fn of(value: &'a Value) -> ValueView<'a> {
        match value {
            Value::Null => ValueView::Null,
            Value::Boolean(b) => ValueView::Boolean(*b),
            Value::Integer(i) => ValueView::Integer(*i),
            Value::Double(d) => ValueView::Double(*d),
            Value::Timestamp(t) => ValueView::Timestamp(*t),
            Value::String(s) => ValueView::String(s),
            Value::Blob(b) => ValueView::Blob(b),
            Value::GeoPoint(g) => ValueView::GeoPoint(*g),
            Value::Key(k) => ValueView::Key(KeyView::Decoded(k)),
            Value::Array(values) => ValueView::Array(ArrayView::Values(values)),
            Value::Entity(map) => ValueView::Entity(MapView::Map(map)),
            Value::Vector(v) => ValueView::Vector(VectorView::Decoded(v)),
        }
    }

    /// The value, decoded; [`Malformed`] when a key or an embedded entity in it cannot be
    /// read (never a null or an empty map in its place).
    pub(crate) fn to_value(self) -> Result<Value, Malformed> {
        Ok(match self {
            ValueView::Null => Value::Null,
            ValueView::Boolean(b) => Value::Boolean(b),
            ValueView::Integer(i) => Value::Integer(i),
            ValueView::Double(d) => Value::Double(d),
            ValueView::Timestamp(t) => Value::Timestamp(t),
            ValueView::String(s) => Value::String(s.to_owned()),
            ValueView::Blob(b) => Value::Blob(Blob::from(b)),
            ValueView::GeoPoint(g) => Value::GeoPoint(g),
            ValueView::Vector(v) => Value::Vector(v.to_vector()),
            ValueView::Key(k) => Value::Key(k.to_key().ok_or(Malformed)?),
            ValueView::Array(a) => Value::Array(
                a.iter()
                    .map(ValueView::to_value)
                    .collect::<Result<_, _>>()?,
            ),
            ValueView::Entity(MapView::Map(map)) => Value::Entity(map.clone()),
            ValueView::Entity(MapView::Encoded(bytes)) => {
                Value::Entity(PropertyMap::from_stored(bytes.to_vec()).map_err(|_| Malformed)?)
            }
            #[cfg(feature = "cloud")]
            ValueView::Entity(map @ MapView::Wire(..)) => Value::Entity(
                map.iter()
                    .map(|(name, excluded, v, annotations)| {
                        let property = Property {
                            value: v.to_value()?,
                            excluded,
                            annotations: annotations.to_annotations(),
                        };
                        Ok((name, property))
                    })
                    .collect::<Result<_, Malformed>>()?,
            ),
        })
    }

    /// The value of a view of a map checked when it was built (stored bytes by [`slots`],
    /// a received message on arrival, a map the crate wrote itself), where reading cannot
    /// fail: a failure here is a bug of the crate, reported as one.
    pub(crate) fn checked_value(self) -> Value {
        self.to_value().expect(CHECKED)
    }

    /// The view of a value in the service's wire form. Every wire map the crate holds was
    /// checked when it was built (`PropertyMap::from_wire` on arrival; the sink writes only
    /// valid values), so a geo point here is in range: one that is not is a bug of the crate,
    /// reported as one, never read as a null.
    #[cfg(feature = "cloud")]
    pub(crate) fn wire(value: &'a pb::Value, partitions: &'a Partitions) -> ValueView<'a> {
        use pb::value::ValueType as V;
        match &value.value_type {
            None | Some(V::NullValue(_)) => ValueView::Null,
            Some(V::BooleanValue(b)) => ValueView::Boolean(*b),
            Some(V::IntegerValue(i)) => ValueView::Integer(*i),
            Some(V::DoubleValue(d)) => ValueView::Double(*d),
            Some(V::TimestampValue(t)) => ValueView::Timestamp(from_timestamp(t)),
            Some(V::StringValue(s)) => ValueView::String(s),
            Some(V::BlobValue(b)) => ValueView::Blob(b),
            Some(V::GeoPointValue(g)) => {
                ValueView::GeoPoint(GeoPoint::new(g.latitude, g.longitude).expect(CHECKED))
            }
            Some(V::KeyValue(k)) => ValueView::Key(KeyView::Wire(k, partitions)),
            Some(V::ArrayValue(a)) if value.meaning == VECTOR_MEANING => {
                ValueView::Vector(VectorView::Wire(&a.values))
            }
            Some(V::ArrayValue(a)) => ValueView::Array(ArrayView::Wire(&a.values, partitions)),
            Some(V::EntityValue(e)) => ValueView::Entity(MapView::Wire(e, partitions)),
        }
    }
}

/// Whether a value in the wire form is excluded from indexes: an array's flag is on its
/// elements (a vector's on itself), and an array is excluded when every element is (its
/// annotations say which are where they differ).
#[cfg(feature = "cloud")]
pub(crate) fn wire_excluded(value: &pb::Value) -> bool {
    match &value.value_type {
        Some(pb::value::ValueType::ArrayValue(a)) if value.meaning != VECTOR_MEANING => {
            !a.values.is_empty() && a.values.iter().all(|v| v.exclude_from_indexes)
        }
        _ => value.exclude_from_indexes,
    }
}

impl<'a> KeyView<'a> {
    /// The key, decoded (`None` only for corrupt bytes, which the store's check refused).
    /// The key of a map checked when it was built (see [`ValueView::checked_value`]).
    #[cfg(feature = "cloud")]
    pub(crate) fn checked_key(self) -> RawKey {
        self.to_key().expect(CHECKED)
    }

    pub(crate) fn to_key(self) -> Option<RawKey> {
        match self {
            KeyView::Decoded(k) => Some(k.clone()),
            KeyView::Encoded(bytes) => Reader::new(bytes).key().ok(),
            #[cfg(feature = "cloud")]
            KeyView::Wire(k, partitions) => partitions.raw_key(k.clone()).ok(),
        }
    }

    /// Whether the key names its partition.
    pub(crate) fn has_partition(self) -> bool {
        match self {
            KeyView::Decoded(k) => k.partition().is_some(),
            KeyView::Encoded(bytes) => bytes.first() == Some(&1),
            #[cfg(feature = "cloud")]
            KeyView::Wire(..) => true,
        }
    }
}

impl<'a> ArrayView<'a> {
    pub(crate) fn len(self) -> usize {
        match self {
            ArrayView::Values(values) => values.len(),
            ArrayView::Encoded { len, .. } => len,
            #[cfg(feature = "cloud")]
            ArrayView::Wire(values, _) => values.len(),
        }
    }

    /// The elements.
    pub(crate) fn iter(self) -> impl Iterator<Item = ValueView<'a>> {
        let (values, mut bytes, len) = match self {
            ArrayView::Values(values) => (values, &[][..], 0),
            ArrayView::Encoded { bytes, len } => (&[][..], bytes, len),
            #[cfg(feature = "cloud")]
            ArrayView::Wire(..) => (&[][..], &[][..], 0),
        };
        #[cfg(feature = "cloud")]
        let wire = match self {
            ArrayView::Wire(values, partitions) => Some((values, partitions)),
            _ => None,
        }
        .into_iter()
        .flat_map(|(values, p)| values.iter().map(move |v| ValueView::wire(v, p)));
        #[cfg(not(feature = "cloud"))]
        let wire = std::iter::empty();
        values
            .iter()
            .map(ValueView::of)
            .chain((0..len).map_while(move |_| {
                let (view, rest) = view(bytes, 0).ok()?;
                bytes = rest;
                Some(view)
            }))
            .chain(wire)
    }
}

impl<'a> MapView<'a> {
    /// The properties: name, whether excluded, value.
    pub(crate) fn iter(self) -> Views<'a> {
        match self {
            MapView::Map(map) => map.view(),
            MapView::Encoded(bytes) => Views::Encoded(Properties::new(bytes)),
            #[cfg(feature = "cloud")]
            MapView::Wire(entity, partitions) => {
                Views::Wire(partitions, entity.key.as_ref(), entity.properties.iter())
            }
        }
    }
}

/// The properties of a map, viewed where they lie: name, whether excluded, value (in name
/// order, except in the wire form, which has none).
pub(crate) enum Views<'a> {
    Entries(
        &'a Entries,
        std::collections::vec_deque::Iter<'a, crate::model::value::Entry>,
    ),
    Stored(&'a Stored, std::slice::Iter<'a, Slot>),
    /// A stored map's properties that are not excluded from indexes (the others not viewed).
    Indexed(&'a Stored, std::slice::Iter<'a, Slot>),
    Encoded(Properties<'a>),
    /// A received entity value's key (as [`KEY_PROPERTY`], excluded, first), then its
    /// properties.
    #[cfg(feature = "cloud")]
    Wire(
        &'a Partitions,
        Option<&'a pb::Key>,
        std::collections::hash_map::Iter<'a, String, pb::Value>,
    ),
}

/// One property viewed where it lies: its name, whether it is excluded, its value and its
/// annotations.
pub(crate) type Viewed<'a> = (&'a str, bool, ValueView<'a>, AnnotationsView<'a>);

impl<'a> Iterator for Views<'a> {
    type Item = Viewed<'a>;

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Views::Entries(e, entries) => entries.next().map(|entry| {
                (
                    e.name(entry),
                    entry.property.excluded,
                    ValueView::of(&entry.property.value),
                    AnnotationsView::of(&entry.property.annotations),
                )
            }),
            Views::Stored(s, slots) => slots.next().map(|slot| {
                (
                    s.name(slot),
                    slot.excluded,
                    s.view(slot),
                    s.annotations(slot),
                )
            }),
            Views::Indexed(s, slots) => slots
                .find(|slot| !slot.excluded)
                .map(|slot| (s.name(slot), false, s.view(slot), s.annotations(slot))),
            Views::Encoded(properties) => properties.next(),
            #[cfg(feature = "cloud")]
            Views::Wire(partitions, key, properties) => match key.take() {
                Some(key) => Some((
                    KEY_PROPERTY,
                    true,
                    ValueView::Key(KeyView::Wire(key, partitions)),
                    AnnotationsView::None,
                )),
                None => properties.next().map(|(name, v)| {
                    (
                        name.as_str(),
                        wire_excluded(v),
                        ValueView::wire(v, partitions),
                        AnnotationsView::Wire(v),
                    )
                }),
            },
        }
    }
}

/// Whether `value` holds a key without a partition (which a `Db` gives its own).
pub(crate) fn lacks_partition(value: ValueView<'_>) -> bool {
    match value {
        ValueView::Key(k) => !k.has_partition(),
        ValueView::Array(values) => values.iter().any(lacks_partition),
        ValueView::Entity(map) => map.iter().any(|(_, _, v, _)| lacks_partition(v)),
        _ => false,
    }
}

/// Reads a little-endian u32 length at the start of `bytes`.
#[inline]
pub(crate) fn len(bytes: &[u8]) -> Result<(usize, &[u8]), Malformed> {
    let (head, rest) = bytes.split_first_chunk::<4>().ok_or(Malformed)?;
    Ok((u32::from_le_bytes(*head) as usize, rest))
}

#[inline]
pub(crate) fn u64(bytes: &[u8]) -> Result<(u64, &[u8]), Malformed> {
    let (head, rest) = bytes.split_first_chunk::<8>().ok_or(Malformed)?;
    Ok((u64::from_le_bytes(*head), rest))
}

/// Length-prefixed bytes.
#[inline]
pub(crate) fn chunk(bytes: &[u8]) -> Result<(&[u8], &[u8]), Malformed> {
    let (n, rest) = len(bytes)?;
    if rest.len() < n {
        return Err(Malformed);
    }
    Ok(rest.split_at(n))
}

#[inline]
pub(crate) fn text(bytes: &[u8]) -> Result<(&str, &[u8]), Malformed> {
    let (b, rest) = chunk(bytes)?;
    Ok((std::str::from_utf8(b).map_err(|_| Malformed)?, rest))
}

/// Skips a stored key (partition, then path); returns what follows.
fn skip_key(bytes: &[u8]) -> Result<&[u8], Malformed> {
    let (&flag, mut rest) = bytes.split_first().ok_or(Malformed)?;
    if flag == 1 {
        for _ in 0..3 {
            rest = text(rest)?.1;
        }
    } else if flag != 0 {
        return Err(Malformed);
    }
    let (n, mut rest) = len(rest)?;
    for _ in 0..n {
        rest = text(rest)?.1;
        let (&kind, after) = rest.split_first().ok_or(Malformed)?;
        rest = match kind {
            0 => after,
            1 => u64(after)?.1,
            2 => text(after)?.1,
            _ => return Err(Malformed),
        };
    }
    Ok(rest)
}

/// The stored value at the start of `bytes`, and what follows it. Strings are checked to be
/// UTF-8; nested arrays and entities are checked through (`depth` deep so far).
#[inline]
pub(crate) fn view(bytes: &[u8], depth: usize) -> Result<(ValueView<'_>, &[u8]), Malformed> {
    view_in(bytes, depth, false)
}

/// The stored value at the start of `bytes` and what follows it, checked through as [`view`]
/// checks, and every key inside it decoded too (what a map over bytes nothing checked yet
/// needs: [`slots`], and the derive's reads in name order).
#[inline(always)]
pub(crate) fn checked_view(bytes: &[u8]) -> Result<(ValueView<'_>, &[u8]), Malformed> {
    view_in(bytes, 0, true)
}

/// [`view`], and with `keys`, [`checked_view`]. The scalars, most of what entities hold, are
/// read where this is called (no value passed back through memory: `perf` put a fifth of a
/// one-pass read on that); the rest in [`compound_view`].
#[inline(always)]
fn view_in(bytes: &[u8], depth: usize, keys: bool) -> Result<(ValueView<'_>, &[u8]), Malformed> {
    if depth > MAX_DEPTH {
        return Err(Malformed);
    }
    let (&tag, rest) = bytes.split_first().ok_or(Malformed)?;
    Ok(match tag {
        NULL => (ValueView::Null, rest),
        BOOLEAN => {
            let (&b, rest) = rest.split_first().ok_or(Malformed)?;
            (ValueView::Boolean(b != 0), rest)
        }
        INTEGER => {
            let (n, rest) = u64(rest)?;
            (ValueView::Integer(n.cast_signed()), rest)
        }
        DOUBLE => {
            let (n, rest) = u64(rest)?;
            (ValueView::Double(f64::from_bits(n)), rest)
        }
        TIMESTAMP => {
            let (n, rest) = u64(rest)?;
            (
                ValueView::Timestamp(Timestamp::checked(n.cast_signed()).ok_or(Malformed)?),
                rest,
            )
        }
        STRING => {
            let (s, rest) = text(rest)?;
            (ValueView::String(s), rest)
        }
        BLOB => {
            let (b, rest) = chunk(rest)?;
            (ValueView::Blob(b), rest)
        }
        _ => return compound_view(tag, rest, depth, keys),
    })
}

/// A stored value that is not a scalar [`view_in`] reads: a geo point, a key, an array, an
/// entity or a vector (`tag` read, `rest` after it).
#[inline(never)]
fn compound_view(
    tag: u8,
    rest: &[u8],
    depth: usize,
    keys: bool,
) -> Result<(ValueView<'_>, &[u8]), Malformed> {
    Ok(match tag {
        GEO => {
            let (lat, rest) = u64(rest)?;
            let (lng, rest) = u64(rest)?;
            let point =
                GeoPoint::new(f64::from_bits(lat), f64::from_bits(lng)).map_err(|_| Malformed)?;
            (ValueView::GeoPoint(point), rest)
        }
        KEY => {
            let after = skip_key(rest)?;
            if keys {
                Reader::new(rest).key()?;
            }
            let key = &rest[..rest.len() - after.len()];
            (ValueView::Key(KeyView::Encoded(key)), after)
        }
        ARRAY => {
            let (n, elements) = len(rest)?;
            let mut after = elements;
            for _ in 0..n {
                after = view_in(after, depth + 1, keys)?.1;
            }
            let bytes = &elements[..elements.len() - after.len()];
            (
                ValueView::Array(ArrayView::Encoded { bytes, len: n }),
                after,
            )
        }
        ENTITY => {
            let after = skip_properties(rest, depth + 1, keys)?;
            let bytes = &rest[..rest.len() - after.len()];
            (ValueView::Entity(MapView::Encoded(bytes)), after)
        }
        VECTOR => {
            let (n, rest) = len(rest)?;
            let size = n
                .checked_mul(8)
                .filter(|&s| s <= rest.len())
                .ok_or(Malformed)?;
            let (bytes, rest) = rest.split_at(size);
            let finite = bytes.chunks_exact(8).all(|b| double_bits(b).is_finite());
            if !(1..=Vector::MAX_DIMENSION).contains(&n) || !finite {
                return Err(Malformed);
            }
            (ValueView::Vector(VectorView::Encoded(bytes)), rest)
        }
        _ => return Err(Malformed),
    })
}

/// The value a [`Writer`] just wrote into `bytes`, decoded: checked bytes by construction
/// (the writer never goes past [`MAX_DEPTH`] and writes only valid keys and UTF-8).
pub(crate) fn written_value(bytes: &[u8]) -> Value {
    view(bytes, 0).expect(CHECKED).0.checked_value()
}

/// The property `name` of the stored property map `bytes`, viewed where it lies, and checked
/// (as are the properties before it, names in order): what reads one property of many
/// entities without decoding them.
pub(crate) fn find_property<'a>(
    bytes: &'a [u8],
    name: &str,
) -> Result<Option<(bool, ValueView<'a>)>, Malformed> {
    let (n, mut rest) = len(bytes)?;
    for _ in 0..n {
        let (found, after) = text(rest)?;
        let (excluded, _, after) = head(after).ok_or(Malformed)?;
        let (view, after) = view_in(after, 0, false)?;
        match found.cmp(name) {
            std::cmp::Ordering::Equal => return Ok(Some((excluded, view))),
            // Names are in order: it is not there.
            std::cmp::Ordering::Greater => return Ok(None),
            std::cmp::Ordering::Less => rest = after,
        }
    }
    Ok(None)
}

/// Checks a stored property map at the start of `bytes` as [`slots`] checks one (names
/// strictly increasing too: an embedded entity that passes decodes); returns what follows it.
fn skip_properties(bytes: &[u8], depth: usize, keys: bool) -> Result<&[u8], Malformed> {
    let (n, mut rest) = len(bytes)?;
    let mut last: Option<&str> = None;
    for _ in 0..n {
        let (name, after) = text(rest)?;
        if last.is_some_and(|last| last >= name) {
            return Err(Malformed);
        }
        last = Some(name);
        let (_, annotations, after) = head(after).ok_or(Malformed)?;
        let (value, after) = view_in(after, depth, keys)?;
        check_annotations(annotations, value)?;
        rest = after;
    }
    Ok(rest)
}

/// Annotations of an array's elements are as many as its elements: what the views of a
/// checked map rely on.
fn check_annotations(annotations: &[u8], value: ValueView<'_>) -> Result<(), Malformed> {
    match (annotations.split_first(), value) {
        (None, _) | (Some((&1, _)), _) => Ok(()),
        (Some((_, payload)), ValueView::Array(array)) => {
            let (n, _) = len(payload)?;
            match n == array.len() {
                true => Ok(()),
                false => Err(Malformed),
            }
        }
        _ => Err(Malformed),
    }
}

/// The properties of a stored map, checked through (names in order, structure, depth, the
/// UTF-8 of every string, geo points, keys): where each lies. Every view of checked bytes succeeds, which is
/// what lets the views of a [`Stored`] map never fail.
pub(crate) fn slots(bytes: &[u8]) -> Result<Vec<Slot>, Malformed> {
    let mut slots = Vec::with_capacity(len(bytes)?.0.min(bytes.len()));
    walk(bytes, |slot| slots.push(slot))?;
    Ok(slots)
}

/// Checks a stored map through as [`slots`] does, building nothing: what a map over bytes
/// from elsewhere needs before its slots are found (when first asked for).
pub(crate) fn check_map(bytes: &[u8]) -> Result<(), Malformed> {
    walk(bytes, drop)
}

/// Walks a stored map's properties, checking each, and hands `each` where it lies.
fn walk(bytes: &[u8], mut each: impl FnMut(Slot)) -> Result<(), Malformed> {
    let (n, mut rest) = len(bytes)?;
    if n > rest.len() {
        return Err(Malformed);
    }
    let at = |rest: &[u8]| u32::try_from(bytes.len() - rest.len()).map_err(|_| Malformed);
    let mut last: Option<&str> = None;
    for _ in 0..n {
        let (name, after) = text(rest)?;
        // Names are stored strictly increasing (lookups by name rely on it).
        if last.is_some_and(|last| last >= name) {
            return Err(Malformed);
        }
        last = Some(name);
        let name_end = at(after)?;
        let name_start = name_end - u32::try_from(name.len()).map_err(|_| Malformed)?;
        let (excluded, annotations, after) = head(after).ok_or(Malformed)?;
        let value_start = at(after)?;
        let (value, after) = checked_view(after)?;
        check_annotations(annotations, value)?;
        rest = after;
        each(Slot {
            name: (name_start, name_end),
            value: (value_start, at(rest)?),
            excluded,
        });
    }
    if !rest.is_empty() {
        return Err(Malformed);
    }
    Ok(())
}

/// The properties of stored map bytes, in order.
pub(crate) struct Properties<'a> {
    rest: &'a [u8],
    left: usize,
}

impl<'a> Properties<'a> {
    fn new(bytes: &'a [u8]) -> Properties<'a> {
        match len(bytes) {
            Ok((left, rest)) => Properties { rest, left },
            Err(_) => Properties { rest: &[], left: 0 },
        }
    }
}

impl<'a> Iterator for Properties<'a> {
    type Item = Viewed<'a>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let (name, rest) = text(self.rest).ok()?;
        let (excluded, annotations, rest) = head(rest)?;
        let (value, rest) = view(rest, 0).ok()?;
        self.rest = rest;
        Some((name, excluded, value, AnnotationsView::stored(annotations)))
    }
}

/// The stored form of a property map, and views of it where it lies.
impl PropertyMap {
    /// A map over stored bytes, checked (names, lengths, UTF-8 of every string), not decoded.
    pub(crate) fn from_stored(bytes: Vec<u8>) -> Result<PropertyMap, Malformed> {
        // Checked now; split into properties only when something asks (the derive reads a
        // map it has not split in one pass, `in_order.rs`).
        check_map(&bytes)?;
        Ok(PropertyMap::over_stored(
            bytes,
            OnceLock::new(),
            Facts::CHECKED,
        ))
    }

    /// A map over stored bytes this process's [`Writer`] wrote (the embedded engine's memory
    /// store keeps nothing else): not checked again, and not even split into properties until
    /// something asks — the derive reads such a map in one pass (`in_order.rs`).
    pub(crate) fn from_written(bytes: Vec<u8>) -> PropertyMap {
        PropertyMap::over_stored(bytes, OnceLock::new(), Facts::CHECKED)
    }

    fn over_stored(bytes: Vec<u8>, slots: OnceLock<Vec<Slot>>, facts: Facts) -> PropertyMap {
        PropertyMap {
            repr: Repr::Stored(Stored {
                bytes,
                slots,
                front: 0,
                exact: true,
                decoded: OnceLock::new(),
                facts,
            }),
        }
    }

    /// When the map is stored bytes that do not read back (a `write_value` that wrote fewer
    /// or more values than an array it announced), the property they fail at (empty when no
    /// single one can be named); `None` for every map that reads back, as every other form
    /// does by construction.
    pub(crate) fn unreadable(&self) -> Option<String> {
        let Repr::Stored(s) = &self.repr else {
            return None;
        };
        if s.facts.readable || slots(&s.bytes).is_ok() {
            return None;
        }
        let named = s.slots.get().and_then(|slots| {
            slots.iter().find(|slot| {
                checked_view(s.range(slot.value))
                    .ok()
                    .is_none_or(|(_, rest)| !rest.is_empty())
            })
        });
        Some(named.map_or_else(String::new, |slot| s.name(slot).to_owned()))
    }

    /// What is known of the map without reading it: a stored map's facts; a decoded or wire
    /// map reads back (it is written whole) and may hold keys.
    pub(crate) fn facts(&self) -> Facts {
        match &self.repr {
            Repr::Stored(s) => s.facts,
            #[cfg(feature = "cloud")]
            Repr::Wire(w) => w.facts,
            Repr::Entries(_) => Facts::CHECKED,
        }
    }

    /// The stored form, when the map is exactly that and nothing read it yet: what the
    /// derive reads in one pass. Not a public API.
    #[doc(hidden)]
    pub fn unread_stored(&self) -> Option<&[u8]> {
        match &self.repr {
            Repr::Stored(s) if s.exact && s.decoded.get().is_none() => Some(&s.bytes),
            _ => None,
        }
    }

    /// The stored form, when the map is exactly that already.
    pub(crate) fn stored_bytes(&self) -> Option<&[u8]> {
        match &self.repr {
            Repr::Stored(s) if s.exact => Some(&s.bytes),
            _ => None,
        }
    }

    /// The stored form, without copying when the map is that already.
    pub(crate) fn into_stored_bytes(mut self) -> Vec<u8> {
        match &mut self.repr {
            Repr::Stored(s) if s.exact => std::mem::take(&mut s.bytes),
            _ => {
                let mut w = Writer::default();
                w.properties(&self);
                w.bytes
            }
        }
    }

    /// Property `name`, viewed where it lies: whether excluded, value, annotations.
    pub(crate) fn view_of(&self, name: &str) -> Option<(bool, ValueView<'_>, AnnotationsView<'_>)> {
        match &self.repr {
            Repr::Entries(e) => e.find(name).ok().map(|i| {
                let property = &e.entries[i].property;
                (
                    property.excluded,
                    ValueView::of(&property.value),
                    AnnotationsView::of(&property.annotations),
                )
            }),
            Repr::Stored(s) => s.find(name).ok().map(|i| {
                let slot = &s.slots()[i];
                (slot.excluded, s.view(slot), s.annotations(slot))
            }),
            #[cfg(feature = "cloud")]
            Repr::Wire(w) => w.properties.get(name).map(|v| {
                (
                    wire_excluded(v),
                    ValueView::wire(v, &w.partitions),
                    AnnotationsView::Wire(v),
                )
            }),
        }
    }

    /// The properties, viewed where they lie: name, whether excluded, value.
    pub(crate) fn view(&self) -> Views<'_> {
        match &self.repr {
            Repr::Entries(e) => Views::Entries(e, e.entries.iter()),
            Repr::Stored(s) => Views::Stored(s, s.live().iter()),
            #[cfg(feature = "cloud")]
            Repr::Wire(w) => Views::Wire(&w.partitions, None, w.properties.iter()),
        }
    }

    /// [`PropertyMap::view`] for callers that pass over excluded properties: those of a
    /// stored map are not even viewed (others are, and the caller skips them).
    pub(crate) fn view_indexed(&self) -> Views<'_> {
        match &self.repr {
            Repr::Stored(s) => Views::Indexed(s, s.live().iter()),
            _ => self.view(),
        }
    }
}

/// Why the slots of a map's bytes are found: the bytes were checked, or written by this
/// process's writer (which writes nothing it could not read back).
const CHECKED_BYTES: &str = "a stored map's bytes are checked or written by this process";

impl Stored {
    /// Every slot, taken out or not.
    pub(crate) fn slots(&self) -> &[Slot] {
        self.slots
            .get_or_init(|| slots(&self.bytes).expect(CHECKED_BYTES))
    }

    /// Every slot, to change.
    pub(crate) fn slots_mut(&mut self) -> &mut Vec<Slot> {
        self.slots();
        self.slots.get_mut().expect("just found")
    }

    /// The value of `slot`. The bytes were checked through when the map was made (by
    /// [`slots`], or written by a [`Writer`], which writes nothing it could not read back)
    /// and never change, so viewing them cannot fail: the `Null` below is never reached.
    pub(crate) fn view(&self, slot: &Slot) -> ValueView<'_> {
        view(self.range(slot.value), 0).map_or(ValueView::Null, |(v, _)| v)
    }

    /// The annotations of `slot` (checked with the map, as its value).
    pub(crate) fn annotations(&self, slot: &Slot) -> AnnotationsView<'_> {
        // Between the flag byte after the name and the value.
        let flag = slot.name.1 as usize;
        let bytes = self.bytes.get(flag + 1..slot.value.0 as usize);
        AnnotationsView::stored(bytes.unwrap_or_default())
    }

    /// Every property, decoded.
    pub(crate) fn decode(&self) -> Entries {
        let mut entries = Entries {
            names: String::with_capacity(
                self.live()
                    .iter()
                    .map(|s| (s.name.1 - s.name.0) as usize)
                    .sum(),
            ),
            entries: VecDeque::with_capacity(self.live().len()),
        };
        for slot in self.live() {
            let property = Property {
                value: self.view(slot).checked_value(),
                excluded: slot.excluded,
                annotations: self.annotations(slot).to_annotations(),
            };
            entries.insert(self.name(slot), property);
        }
        entries
    }

    pub(crate) fn entries(&self) -> &Entries {
        self.decoded.get_or_init(|| Box::new(self.decode()))
    }
}

/// A stored value's bytes, not checked yet, and what follows them: what a field's one-pass
/// read takes straight from the stored form when the value is of the field's own type
/// ([`PropertyType::read_stored`](crate::PropertyType::read_stored)), checking it as it
/// reads it. Not a public API.
#[derive(Debug, Clone, Copy)]
pub struct StoredAt<'a>(pub(crate) &'a [u8]);

impl<'a> StoredAt<'a> {
    /// What follows the tag when the value is a `tag`.
    #[inline(always)]
    pub(crate) fn tagged(self, tag: u8) -> Option<&'a [u8]> {
        match self.0.split_first() {
            Some((&found, rest)) if found == tag => Some(rest),
            _ => None,
        }
    }

    /// The 8 bytes of a value that is a `tag` (an integer, a double, a timestamp).
    #[inline(always)]
    pub(crate) fn word(self, tag: u8) -> Option<(u64, StoredAt<'a>)> {
        let (n, rest) = u64(self.tagged(tag)?).ok()?;
        Some((n, StoredAt(rest)))
    }

    /// A string value, checked to be UTF-8.
    #[inline(always)]
    pub(crate) fn string(self) -> Option<(&'a str, StoredAt<'a>)> {
        let (s, rest) = text(self.tagged(STRING)?).ok()?;
        Some((s, StoredAt(rest)))
    }

    /// A boolean value.
    #[inline(always)]
    pub(crate) fn boolean(self) -> Option<(bool, StoredAt<'a>)> {
        let (&b, rest) = self.tagged(BOOLEAN)?.split_first()?;
        Some((b != 0, StoredAt(rest)))
    }

    /// What follows a null value.
    #[inline(always)]
    pub(crate) fn null(self) -> Option<StoredAt<'a>> {
        self.tagged(NULL).map(StoredAt)
    }

    /// An array value's length, and its elements' bytes.
    #[inline(always)]
    pub(crate) fn array(self) -> Option<(usize, StoredAt<'a>)> {
        let (n, rest) = len(self.tagged(ARRAY)?).ok()?;
        Some((n, StoredAt(rest)))
    }
}

/// A value where it lies — in the stored form, the wire form, or decoded — read by the
/// derive's generated code through [`PropertyType::read_value`](crate::PropertyType::read_value);
/// not a public API.
#[derive(Debug, Clone, Copy)]
pub struct ValueRef<'a>(pub(crate) ValueView<'a>);

impl<'a> ValueRef<'a> {
    /// The value, decoded; an error when part of it cannot be read.
    #[inline]
    pub fn to_value(self) -> Result<Value, DecodeError> {
        // Scalars first, inline: what most fields read, without the general decoder's call.
        match self.0 {
            ValueView::Null => return Ok(Value::Null),
            ValueView::Boolean(b) => return Ok(Value::Boolean(b)),
            ValueView::Integer(i) => return Ok(Value::Integer(i)),
            ValueView::Double(d) => return Ok(Value::Double(d)),
            ValueView::Timestamp(t) => return Ok(Value::Timestamp(t)),
            _ => {}
        }
        self.0.to_value().map_err(|Malformed| DecodeError {
            path: String::new(),
            expected: "a value".to_owned(),
            found: "a key or an embedded entity that cannot be read".to_owned(),
        })
    }

    /// The string, if it is one.
    pub fn as_str(self) -> Option<&'a str> {
        match self.0 {
            ValueView::String(s) => Some(s),
            _ => None,
        }
    }

    /// The bytes, if it is a byte string.
    pub fn as_blob(self) -> Option<&'a [u8]> {
        match self.0 {
            ValueView::Blob(b) => Some(b),
            _ => None,
        }
    }

    /// Whether it is null.
    pub fn is_null(self) -> bool {
        matches!(self.0, ValueView::Null)
    }

    /// The elements, if it is an array.
    pub fn elements(self) -> Option<impl Iterator<Item = ValueRef<'a>>> {
        match self.0 {
            ValueView::Array(a) => Some(a.iter().map(ValueRef)),
            _ => None,
        }
    }

    /// How many elements, if it is an array.
    pub fn array_len(self) -> Option<usize> {
        match self.0 {
            ValueView::Array(a) => Some(a.len()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What cannot be read is an error, never a null or an empty map in its place: a key and
    /// an embedded entity over bytes no check passed (views are only ever built over checked
    /// bytes; this builds them by hand).
    #[test]
    fn what_cannot_be_read_is_an_error_not_a_null_or_an_empty_map() {
        let key = ValueView::Key(KeyView::Encoded(&[0xff, 0x01]));
        assert!(key.to_value().is_err());
        let map = ValueView::Entity(MapView::Encoded(&[0x05, b'x']));
        assert!(map.to_value().is_err());
        let reference = ValueRef(map).to_value().unwrap_err();
        assert!(reference.found.contains("cannot be read"), "{reference:?}");
    }

    #[test]
    fn values_round_trip_and_garbage_is_an_error() {
        let mut inner = PropertyMap::new();
        inner.insert("a", Property::excluded(Value::Double(f64::NAN)));
        let key = RawKey::new(
            Some(PartitionId::default()),
            vec![PathElement::new("K", Some(IdOrName::Id(KeyId::new(3).unwrap()))).unwrap()],
        )
        .unwrap();
        let named = RawKey::new(
            None,
            vec![
                PathElement::new("Parent", Some(IdOrName::Name(KeyName::new("é").unwrap())))
                    .unwrap(),
                PathElement::new("K", None).unwrap(),
            ],
        )
        .unwrap();
        for k in [&key, &named] {
            let mut w = Writer::default();
            w.key(k);
            assert_eq!(w.bytes.len(), Writer::key_len(k), "{k:?}");
        }
        let value = Value::Array(vec![
            Value::Null,
            Value::String("é".into()),
            Value::Key(key),
            Value::Entity(inner),
            Value::GeoPoint(GeoPoint::new(1.0, 2.0).unwrap()),
        ]);
        let mut w = Writer::default();
        w.value(&value);
        let back = Reader::new(&w.bytes).value().unwrap();
        // NaN != NaN, so compare the encodings.
        let mut w2 = Writer::default();
        w2.value(&back);
        assert_eq!(w.bytes, w2.bytes);
        for cut in 0..w.bytes.len() {
            assert!(Reader::new(&w.bytes[..cut]).value().is_err());
        }
        let deep = [9u8, 1, 0, 0, 0].repeat(1000);
        assert!(Reader::new(&deep).value().is_err());
    }
}
