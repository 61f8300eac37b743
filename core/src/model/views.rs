//! Views of stored values where they lie, without building [`Value`]s: in stored bytes and in
//! decoded values, so that every check runs on either; and the walks that check stored bytes
//! and find a map's slots.

use crate::model::annotations::{AnnotationsView, head};
use crate::model::codec::{
    ARRAY, BLOB, BOOLEAN, DOUBLE, ENTITY, GEO, INTEGER, KEY, MAX_DEPTH, Malformed, NULL, Reader,
    STRING, TIMESTAMP, VECTOR, chunk, double_bits, len, text, u64,
};
use crate::model::key::RawKey;
use crate::model::scalar::{Blob, GeoPoint, Timestamp, Vector};
use crate::model::value::{Entries, PropertyMap, Slot, Stored, Value};

/// What a view of checked bytes reads, by construction: the maps' checks (`slots` for stored
/// bytes, a backend's on arrival for the maps it received) ran when they were built.
const CHECKED: &str = "a view of a map checked when it was built reads whole (a bug of \
                       datastore-entity if not: please report it)";

/// A stored value, borrowed where it lies: in stored bytes, or in a decoded [`Value`].
#[derive(Debug, Clone, Copy)]
pub enum ValueView<'a> {
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
pub enum VectorView<'a> {
    Decoded(&'a Vector),
    /// Eight bytes per value, little-endian bits.
    Encoded(&'a [u8]),
}

impl<'a> VectorView<'a> {
    /// The values, in order.
    pub fn values(self) -> VectorValues<'a> {
        match self {
            VectorView::Decoded(v) => VectorValues::Decoded(v.as_slice().iter()),
            VectorView::Encoded(bytes) => VectorValues::Encoded(bytes.chunks_exact(8)),
        }
    }

    /// The vector, owned.
    pub fn to_vector(self) -> Vector {
        Vector::new(self.values().collect()).expect(CHECKED)
    }
}

/// A vector's values where they lie, in order.
pub enum VectorValues<'a> {
    Decoded(std::slice::Iter<'a, f64>),
    Encoded(std::slice::ChunksExact<'a, u8>),
}

impl Iterator for VectorValues<'_> {
    type Item = f64;

    #[inline]
    fn next(&mut self) -> Option<f64> {
        match self {
            VectorValues::Decoded(values) => values.next().copied(),
            VectorValues::Encoded(chunks) => chunks.next().map(double_bits),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = match self {
            VectorValues::Decoded(values) => values.len(),
            VectorValues::Encoded(chunks) => chunks.len(),
        };
        (n, Some(n))
    }
}

impl ExactSizeIterator for VectorValues<'_> {}

/// A key value: decoded, or its stored bytes (partition, then path).
#[derive(Debug, Clone, Copy)]
pub enum KeyView<'a> {
    Decoded(&'a RawKey),
    Encoded(&'a [u8]),
}

/// An array value's elements.
#[derive(Debug, Clone, Copy)]
pub enum ArrayView<'a> {
    Values(&'a [Value]),
    /// `len` stored values, back to back.
    Encoded {
        bytes: &'a [u8],
        len: usize,
    },
}

/// An embedded entity's properties.
#[derive(Debug, Clone, Copy)]
pub enum MapView<'a> {
    Map(&'a PropertyMap),
    /// A stored property map (count first).
    Encoded(&'a [u8]),
}

impl<'a> ValueView<'a> {
    /// The view of a decoded value.
    pub fn of(value: &'a Value) -> ValueView<'a> {
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
    pub fn to_value(self) -> Result<Value, Malformed> {
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
        })
    }

    /// The value of a view of a map checked when it was built (stored bytes by [`slots`],
    /// a received message on arrival, a map the crate wrote itself), where reading cannot
    /// fail: a failure here is a bug of the crate, reported as one.
    pub fn checked_value(self) -> Value {
        self.to_value().expect(CHECKED)
    }
}

impl<'a> KeyView<'a> {
    pub fn to_key(self) -> Option<RawKey> {
        match self {
            KeyView::Decoded(k) => Some(k.clone()),
            KeyView::Encoded(bytes) => Reader::new(bytes).key().ok(),
        }
    }

    /// Whether the key names its partition.
    pub fn has_partition(self) -> bool {
        match self {
            KeyView::Decoded(k) => k.partition().is_some(),
            KeyView::Encoded(bytes) => bytes.first() == Some(&1),
        }
    }
}

impl<'a> ArrayView<'a> {
    /// How many elements.
    pub fn len(self) -> usize {
        match self {
            ArrayView::Values(values) => values.len(),
            ArrayView::Encoded { len, .. } => len,
        }
    }

    /// Whether there are none.
    pub fn is_empty(self) -> bool {
        self.len() == 0
    }

    /// The elements.
    pub fn iter(self) -> impl Iterator<Item = ValueView<'a>> {
        let (values, mut bytes, len) = match self {
            ArrayView::Values(values) => (values, &[][..], 0),
            ArrayView::Encoded { bytes, len } => (&[][..], bytes, len),
        };
        values
            .iter()
            .map(ValueView::of)
            .chain((0..len).map_while(move |_| {
                let (view, rest) = view(bytes, 0).ok()?;
                bytes = rest;
                Some(view)
            }))
    }
}

impl<'a> MapView<'a> {
    /// The properties: name, whether excluded, value.
    pub fn iter(self) -> Views<'a> {
        match self {
            MapView::Map(map) => map.view(),
            MapView::Encoded(bytes) => Views::Encoded(Properties::new(bytes)),
        }
    }
}

/// The properties of a map, viewed where they lie: name, whether excluded, value, in name
/// order.
pub enum Views<'a> {
    Entries(
        &'a Entries,
        std::collections::vec_deque::Iter<'a, crate::model::value::Entry>,
    ),
    Stored(&'a Stored, std::slice::Iter<'a, Slot>),
    /// A stored map's properties that are not excluded from indexes (the others not viewed).
    Indexed(&'a Stored, std::slice::Iter<'a, Slot>),
    Encoded(Properties<'a>),
}

/// One property viewed where it lies: its name, whether it is excluded, its value and its
/// annotations.
pub type Viewed<'a> = (&'a str, bool, ValueView<'a>, AnnotationsView<'a>);

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
        }
    }

    /// Exact for a map's properties (a map built from them, the wire form's for one, is
    /// allocated once).
    fn size_hint(&self) -> (usize, Option<usize>) {
        match self {
            Views::Entries(_, entries) => entries.size_hint(),
            Views::Stored(_, slots) => slots.size_hint(),
            Views::Indexed(_, slots) => (0, slots.size_hint().1),
            Views::Encoded(properties) => properties.size_hint(),
        }
    }
}

/// Whether `value` holds a key without a partition (which a `Db` gives its own).
pub fn lacks_partition(value: ValueView<'_>) -> bool {
    match value {
        ValueView::Key(k) => !k.has_partition(),
        ValueView::Array(values) => values.iter().any(lacks_partition),
        ValueView::Entity(map) => map.iter().any(|(_, _, v, _)| lacks_partition(v)),
        _ => false,
    }
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
pub fn view(bytes: &[u8], depth: usize) -> Result<(ValueView<'_>, &[u8]), Malformed> {
    view_in(bytes, depth, false)
}

/// The stored value at the start of `bytes` and what follows it, checked through as [`view`]
/// checks, and every key inside it decoded too (what a map over bytes nothing checked yet
/// needs: [`slots`], and the derive's reads in name order).
#[inline(always)]
pub fn checked_view(bytes: &[u8]) -> Result<(ValueView<'_>, &[u8]), Malformed> {
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

/// The value a [`Writer`](crate::model::stored::Writer) just wrote into `bytes`, decoded: checked bytes by construction
/// (the writer never goes past [`MAX_DEPTH`] and writes only valid keys and UTF-8).
pub fn written_value(bytes: &[u8]) -> Value {
    view(bytes, 0).expect(CHECKED).0.checked_value()
}

/// The property `name` of the stored property map `bytes`, viewed where it lies, and checked
/// (as are the properties before it, names in order): what reads one property of many
/// entities without decoding them.
pub fn find_property<'a>(
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
pub fn slots(bytes: &[u8]) -> Result<Vec<Slot>, Malformed> {
    let mut slots = Vec::with_capacity(len(bytes)?.0.min(bytes.len()));
    walk(bytes, |slot| slots.push(slot))?;
    Ok(slots)
}

/// Checks a stored map through as [`slots`] does, building nothing: what a map over bytes
/// from elsewhere needs before its slots are found (when first asked for).
pub fn check_map(bytes: &[u8]) -> Result<(), Malformed> {
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
pub struct Properties<'a> {
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

    /// At most the count the map starts with (fewer where its bytes end first).
    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.left))
    }
}
