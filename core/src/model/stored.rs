//! The stored form of values and property maps: the bytes the embedded engine keeps for every
//! entity (and the crate for cursors), written by [`Writer`] (the derive writes into it
//! through `sink.rs`), read back whole by `codec.rs`'s `Reader` or viewed where they lie
//! (`views.rs`) without building [`Value`]s: the derive reads each field straight out of it,
//! and the engine checks and indexes it where it lies. Here: the writer, `PropertyMap` over
//! stored bytes (checked, split into slots only when asked), and the handles `StoredAt` and
//! `ValueRef`.
//!
//! A property map is a count, then per property in name order its name, whether it is
//! excluded, and its value; a value is a tag byte and its payload (little-endian numbers,
//! length-prefixed strings). Decoding never panics: malformed bytes are `Malformed`, and
//! every decoded name, id and key is validated again. `tests/tests/formats.rs` pins the bytes.

use std::collections::VecDeque;
use std::sync::OnceLock;

use crate::model::annotations::{AnnotationsView, write_head};
use crate::model::codec::{
    ARRAY, BLOB, BOOLEAN, DOUBLE, ENTITY, GEO, INTEGER, KEY, Malformed, NULL, STRING, TIMESTAMP,
    VECTOR, len, text, u64,
};
use crate::model::key::{IdOrName, PartitionId, RawKey};
use crate::model::value::{
    DecodeError, Entries, Facts, MAX_NESTING, Property, PropertyMap, Repr, Slot, Stored, Value,
};
use crate::model::views::{ValueView, Views, check_map, checked_view, slots, view};

/// Appends encoded values to a byte buffer.
#[derive(Default)]
pub struct Writer {
    pub bytes: Vec<u8>,
}

impl Writer {
    #[inline]
    pub fn u8(&mut self, b: u8) {
        self.bytes.push(b);
    }

    #[inline]
    pub fn u64(&mut self, n: u64) {
        self.bytes.extend_from_slice(&n.to_le_bytes());
    }

    /// A tag and an eight-byte payload: an integer, a double or a timestamp.
    #[inline]
    pub fn tagged(&mut self, tag: u8, n: u64) {
        self.u8(tag);
        self.u64(n);
    }

    #[inline]
    pub fn len(&mut self, n: usize) {
        // Lengths beyond u32 cannot occur: entities are far smaller.
        self.bytes
            .extend_from_slice(&u32::try_from(n).unwrap_or(u32::MAX).to_le_bytes());
    }

    #[inline]
    pub fn bytes(&mut self, b: &[u8]) {
        self.len(b.len());
        self.bytes.extend_from_slice(b);
    }

    /// How many bytes [`Writer::key`] writes for `key`.
    pub fn key_len(key: &RawKey) -> usize {
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

    pub fn key(&mut self, key: &RawKey) {
        self.partition(key.partition());
        self.path(key);
    }

    pub fn partition(&mut self, partition: Option<&PartitionId>) {
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
    pub fn path(&mut self, key: &RawKey) {
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
    pub fn value(&mut self, value: &Value) {
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
    pub fn vector(&mut self, values: impl ExactSizeIterator<Item = f64>) {
        self.u8(VECTOR);
        self.len(values.len());
        values.for_each(|v| self.u64(v.to_bits()));
    }

    pub fn properties(&mut self, properties: &PropertyMap) {
        self.properties_at(properties, 0);
    }

    /// Decoded properties, in name order.
    fn entries_at(&mut self, e: &Entries, depth: usize) {
        self.len(e.entries.len());
        for entry in &e.entries {
            self.bytes(e.name(entry).as_bytes());
            let annotations = AnnotationsView::of(&entry.property.annotations);
            write_head(&mut self.bytes, entry.property.excluded, annotations);
            self.value_at(&entry.property.value, depth);
        }
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
            Repr::Entries(e) => self.entries_at(e, depth),
            Repr::Foreign(f) => self.entries_at(f.entries(), depth),
        }
    }
}

/// The stored form of a property map, and views of it where it lies.
impl PropertyMap {
    /// A map over stored bytes, checked (names, lengths, UTF-8 of every string), not decoded.
    pub fn from_stored(bytes: Vec<u8>) -> Result<PropertyMap, Malformed> {
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
    pub fn from_written(bytes: Vec<u8>) -> PropertyMap {
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
    pub fn unreadable(&self) -> Option<String> {
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
    pub fn facts(&self) -> Facts {
        match &self.repr {
            Repr::Stored(s) => s.facts,
            Repr::Foreign(f) => f.facts,
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
    pub fn stored_bytes(&self) -> Option<&[u8]> {
        match &self.repr {
            Repr::Stored(s) if s.exact => Some(&s.bytes),
            _ => None,
        }
    }

    /// The stored form, without copying when the map is that already.
    pub fn into_stored_bytes(mut self) -> Vec<u8> {
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
    pub fn view_of(&self, name: &str) -> Option<(bool, ValueView<'_>, AnnotationsView<'_>)> {
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
            Repr::Foreign(f) => {
                let e = f.entries();
                e.find(name).ok().map(|i| {
                    let property = &e.entries[i].property;
                    (
                        property.excluded,
                        ValueView::of(&property.value),
                        AnnotationsView::of(&property.annotations),
                    )
                })
            }
        }
    }

    /// `f` of property `name` viewed (whether excluded, value, annotations): where it lies,
    /// or, in a backend's own form not decoded yet, that one property decoded (the rest of
    /// the map is not).
    pub fn with_view_of<R>(
        &self,
        name: &str,
        f: impl for<'v> FnOnce(bool, ValueView<'v>, AnnotationsView<'v>) -> R,
    ) -> Option<R> {
        if let Repr::Foreign(foreign) = &self.repr
            && foreign.decoded.get().is_none()
        {
            // Checked when the map was built: a property that does not decode is a bug,
            // viewed through the whole map's decoding, which reports it.
            if let Some(Ok(property)) = foreign.map.get(name) {
                return Some(f(
                    property.excluded,
                    ValueView::of(&property.value),
                    AnnotationsView::of(&property.annotations),
                ));
            }
        }
        self.view_of(name).map(|(excluded, v, a)| f(excluded, v, a))
    }

    /// The properties, viewed where they lie: name, whether excluded, value.
    pub fn view(&self) -> Views<'_> {
        match &self.repr {
            Repr::Entries(e) => Views::Entries(e, e.entries.iter()),
            Repr::Stored(s) => Views::Stored(s, s.live().iter()),
            Repr::Foreign(f) => {
                let e = f.entries();
                Views::Entries(e, e.entries.iter())
            }
        }
    }

    /// [`PropertyMap::view`] for callers that pass over excluded properties: those of a
    /// stored map are not even viewed (others are, and the caller skips them).
    pub fn view_indexed(&self) -> Views<'_> {
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
    pub fn slots(&self) -> &[Slot] {
        self.slots
            .get_or_init(|| slots(&self.bytes).expect(CHECKED_BYTES))
    }

    /// Every slot, to change.
    pub fn slots_mut(&mut self) -> &mut Vec<Slot> {
        self.slots();
        self.slots.get_mut().expect("just found")
    }

    /// The value of `slot`. The bytes were checked through when the map was made (by
    /// [`slots`], or written by a [`Writer`], which writes nothing it could not read back)
    /// and never change, so viewing them cannot fail: the `Null` below is never reached.
    pub fn view(&self, slot: &Slot) -> ValueView<'_> {
        view(self.range(slot.value), 0).map_or(ValueView::Null, |(v, _)| v)
    }

    /// The annotations of `slot` (checked with the map, as its value).
    pub fn annotations(&self, slot: &Slot) -> AnnotationsView<'_> {
        // Between the flag byte after the name and the value.
        let flag = slot.name.1 as usize;
        let bytes = self.bytes.get(flag + 1..slot.value.0 as usize);
        AnnotationsView::stored(bytes.unwrap_or_default())
    }

    /// Every property, decoded.
    pub fn decode(&self) -> Entries {
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

    pub fn entries(&self) -> &Entries {
        self.decoded.get_or_init(|| Box::new(self.decode()))
    }
}

/// A stored value's bytes, not checked yet, and what follows them: what a field's one-pass
/// read takes straight from the stored form when the value is of the field's own type
/// ([`PropertyType::read_stored`](crate::model::property_type::PropertyType::read_stored)), checking it as it
/// reads it. Not a public API.
#[derive(Debug, Clone, Copy)]
pub struct StoredAt<'a>(pub &'a [u8]);

impl<'a> StoredAt<'a> {
    /// What follows the tag when the value is a `tag`.
    #[inline(always)]
    pub fn tagged(self, tag: u8) -> Option<&'a [u8]> {
        match self.0.split_first() {
            Some((&found, rest)) if found == tag => Some(rest),
            _ => None,
        }
    }

    /// The 8 bytes of a value that is a `tag` (an integer, a double, a timestamp).
    #[inline(always)]
    pub fn word(self, tag: u8) -> Option<(u64, StoredAt<'a>)> {
        let (n, rest) = u64(self.tagged(tag)?).ok()?;
        Some((n, StoredAt(rest)))
    }

    /// A string value, checked to be UTF-8.
    #[inline(always)]
    pub fn string(self) -> Option<(&'a str, StoredAt<'a>)> {
        let (s, rest) = text(self.tagged(STRING)?).ok()?;
        Some((s, StoredAt(rest)))
    }

    /// A boolean value.
    #[inline(always)]
    pub fn boolean(self) -> Option<(bool, StoredAt<'a>)> {
        let (&b, rest) = self.tagged(BOOLEAN)?.split_first()?;
        Some((b != 0, StoredAt(rest)))
    }

    /// What follows a null value.
    #[inline(always)]
    pub fn null(self) -> Option<StoredAt<'a>> {
        self.tagged(NULL).map(StoredAt)
    }

    /// An array value's length, and its elements' bytes.
    #[inline(always)]
    pub fn array(self) -> Option<(usize, StoredAt<'a>)> {
        let (n, rest) = len(self.tagged(ARRAY)?).ok()?;
        Some((n, StoredAt(rest)))
    }
}

/// A value where it lies — in the stored form, the wire form, or decoded — read by the
/// derive's generated code through [`PropertyType::read_value`](crate::model::property_type::PropertyType::read_value);
/// not a public API.
#[derive(Debug, Clone, Copy)]
pub struct ValueRef<'a>(pub ValueView<'a>);

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
    use crate::model::codec::Reader;
    use crate::model::key::{KeyId, PathElement};
    use crate::model::name::KeyName;
    use crate::model::scalar::GeoPoint;
    use crate::model::views::{KeyView, MapView};

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
