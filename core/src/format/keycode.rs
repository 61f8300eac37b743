//! Order-preserving byte encodings of partitions, key paths and values: the byte order of
//! two encodings is the store's order of what they encode, so the engine's tables are plain
//! ordered byte maps and a query is a range scan.
//!
//! Every encoding is prefix-free (no encoding is a prefix of another), so concatenations
//! compare component by component, and inverting every byte of a value's encoding reverses
//! its order (descending composite index columns).
//!
//! Values follow the service's order across types (`walk::compare_values`): null;
//! integers and timestamps (by number); booleans; strings and byte strings (by bytes);
//! doubles (NaN last); geo points; keys. Two values have one encoding exactly when that
//! order says they are equal: an index holds a value as the service's indexes do, so an
//! integer and a timestamp of the same number are one index value (read back as the integer,
//! as the service's projections return it), a string and a byte string of the same bytes too
//! (read back as the string when the bytes are UTF-8).

use crate::model::codec::Malformed;
use crate::model::key::{IdOrName, KeyId, PartitionId, PathElement, RawKey};
use crate::model::name::KeyName;
use crate::model::scalar::{Blob, GeoPoint};
use crate::model::value::Value;
use crate::model::views::ValueView;

type Result<T> = std::result::Result<T, Malformed>;

const NULL: u8 = 0x10;
const NUMBER: u8 = 0x20;
const BOOLEAN: u8 = 0x30;
const BYTES: u8 = 0x40;
const DOUBLE: u8 = 0x50;
const GEO: u8 = 0x60;
const KEY: u8 = 0x70;

/// Path elements: each starts with `ELEMENT`; the path ends with `END`, so a parent sorts
/// before its children.
const ELEMENT: u8 = 0x01;
const END: u8 = 0x00;
const INCOMPLETE: u8 = 0x05;
const ID: u8 = 0x10;
const NAME: u8 = 0x20;

/// Bytes, escaped: `0x00` becomes `0x00 0xFF`, and `0x00 0x01` ends them.
pub fn bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    for &b in bytes {
        out.push(b);
        if b == 0 {
            out.push(0xFF);
        }
    }
    out.extend_from_slice(&[0, 1]);
}

fn u64_be(out: &mut Vec<u8>, n: u64) {
    out.extend_from_slice(&n.to_be_bytes());
}

/// Signed integers in offset binary: byte order is numeric order.
fn i64_ordered(out: &mut Vec<u8>, n: i64) {
    u64_be(out, n.cast_unsigned() ^ (1 << 63));
}

/// Doubles in numeric order, -0.0 as 0.0, every NaN last.
fn f64_ordered(out: &mut Vec<u8>, d: f64) {
    let d = if d == 0.0 { 0.0 } else { d };
    let bits = if d.is_nan() {
        u64::MAX
    } else {
        let bits = d.to_bits();
        if bits >> 63 == 1 {
            !bits
        } else {
            bits | (1 << 63)
        }
    };
    u64_be(out, bits);
}

pub fn partition(out: &mut Vec<u8>, partition: &PartitionId) {
    bytes(out, partition.project_id.as_bytes());
    bytes(out, partition.database_id.as_bytes());
    bytes(out, partition.namespace.as_bytes());
}

/// A key's path, in key order (a parent before its children, ids before names).
pub fn path(out: &mut Vec<u8>, elements: &[PathElement]) {
    for element in elements {
        out.push(ELEMENT);
        bytes(out, element.kind().as_bytes());
        match element.id_or_name() {
            None => out.push(INCOMPLETE),
            Some(IdOrName::Id(id)) => {
                out.push(ID);
                i64_ordered(out, id.get());
            }
            Some(IdOrName::Name(name)) => {
                out.push(NAME);
                bytes(out, name.as_str().as_bytes());
            }
        }
    }
    out.push(END);
}

/// A key: its partition, then its path.
pub fn key(out: &mut Vec<u8>, key: &RawKey) {
    partition(out, key.partition().unwrap_or(&PartitionId::default()));
    path(out, key.path());
}

/// Integers and timestamps: one rank, by number.
fn number(out: &mut Vec<u8>, n: i64) {
    out.push(NUMBER);
    i64_ordered(out, n);
}

/// Strings and byte strings: one rank, by bytes.
fn escaped(out: &mut Vec<u8>, b: &[u8]) {
    out.push(BYTES);
    bytes(out, b);
}

/// A value, in the service's order; `None` for values that have no index entry of their
/// own (arrays and embedded entities).
pub fn value(out: &mut Vec<u8>, value: &Value) -> Option<()> {
    value_view(out, ValueView::of(value))
}

/// A value, viewed where it lies (stored or decoded), in the service's order.
pub fn value_view(out: &mut Vec<u8>, value: ValueView<'_>) -> Option<()> {
    match value {
        ValueView::Null => out.push(NULL),
        ValueView::Integer(n) => number(out, n),
        ValueView::Timestamp(t) => number(out, t.as_micros()),
        ValueView::Boolean(b) => out.extend_from_slice(&[BOOLEAN, u8::from(b)]),
        ValueView::String(s) => escaped(out, s.as_bytes()),
        ValueView::Blob(b) => escaped(out, b),
        ValueView::Double(d) => {
            out.push(DOUBLE);
            f64_ordered(out, d);
        }
        ValueView::GeoPoint(g) => {
            out.push(GEO);
            f64_ordered(out, g.latitude());
            f64_ordered(out, g.longitude());
        }
        ValueView::Key(k) => {
            out.push(KEY);
            key(out, &k.to_key()?);
        }
        ValueView::Array(_) | ValueView::Entity(_) | ValueView::Vector(_) => return None,
    }
    Some(())
}

/// `value` as an index holds it (and a projection returns it): a timestamp as its integer,
/// UTF-8 bytes as a string, -0.0 as 0.0; arrays and entities as they are.
pub fn index_value(value: &Value) -> Value {
    let mut out = Vec::new();
    match self::value(&mut out, value) {
        Some(()) => Reader::new(&out).value().unwrap_or_else(|_| value.clone()),
        None => value.clone(),
    }
}

/// The value's encoding with every byte inverted: the reverse order (descending columns).
pub fn inverted(out: &mut Vec<u8>, encoded: &[u8]) {
    out.extend(encoded.iter().map(|b| !b));
}

/// The keys of one partition read one after another from their encoded paths into one
/// [`RawKey`], which keeps its allocations from key to key ([`Reader::path_into`]): a page
/// of results of one kind decodes its keys without allocating.
pub struct Keys {
    key: RawKey,
    scratch: Vec<u8>,
}

impl Keys {
    pub fn in_partition(partition: PartitionId) -> Self {
        Keys {
            key: RawKey::unread(partition),
            scratch: Vec::new(),
        }
    }

    /// The key whose path `path` encodes (exactly: nothing may follow it), checked as
    /// [`RawKey::new`] checks.
    pub fn read(&mut self, path: &[u8]) -> Result<&RawKey> {
        let mut reader = Reader::new(path);
        reader.path_into(self.key.path_mut(), &mut self.scratch)?;
        if !reader.rest().is_empty() {
            return Err(Malformed);
        }
        self.key.check_shape().map_err(|_| Malformed)?;
        Ok(&self.key)
    }
}

/// Reads what the functions above wrote.
pub struct Reader<'a> {
    bytes: &'a [u8],
    /// XORed into every byte read: `0xFF` reads a value written inverted, in place.
    flip: u8,
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes, flip: 0 }
    }

    /// What is left to read.
    pub fn rest(&self) -> &'a [u8] {
        self.bytes
    }

    fn byte(&mut self) -> Result<u8> {
        let (&b, rest) = self.bytes.split_first().ok_or(Malformed)?;
        self.bytes = rest;
        Ok(b ^ self.flip)
    }

    fn u64_be(&mut self) -> Result<u64> {
        if self.bytes.len() < 8 {
            return Err(Malformed);
        }
        let (head, rest) = self.bytes.split_at(8);
        self.bytes = rest;
        let mut buf = [0u8; 8];
        buf.copy_from_slice(head);
        Ok(u64::from_be_bytes(buf) ^ u64::from_ne_bytes([self.flip; 8]))
    }

    fn i64_ordered(&mut self) -> Result<i64> {
        Ok((self.u64_be()? ^ (1 << 63)).cast_signed())
    }

    fn f64_ordered(&mut self) -> Result<f64> {
        let bits = self.u64_be()?;
        if bits == u64::MAX {
            return Ok(f64::NAN);
        }
        Ok(f64::from_bits(if bits >> 63 == 1 {
            bits & !(1 << 63)
        } else {
            !bits
        }))
    }

    /// Escaped bytes.
    pub fn bytes(&mut self) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        self.escaped(|b| out.push(b))?;
        Ok(out)
    }

    /// Escaped bytes, each one unescaped handed to `each`.
    fn escaped(&mut self, mut each: impl FnMut(u8)) -> Result<()> {
        loop {
            match self.byte()? {
                0 => match self.byte()? {
                    0xFF => each(0),
                    1 => return Ok(()),
                    _ => return Err(Malformed),
                },
                b => each(b),
            }
        }
    }

    pub fn string(&mut self) -> Result<String> {
        String::from_utf8(self.bytes()?).map_err(|_| Malformed)
    }

    pub fn partition(&mut self) -> Result<PartitionId> {
        Ok(PartitionId {
            project_id: self.string()?,
            database_id: self.string()?,
            namespace: self.string()?,
        })
    }

    pub fn path(&mut self) -> Result<Vec<PathElement>> {
        let mut path = Vec::new();
        self.path_into(&mut path, &mut Vec::new())?;
        Ok(path)
    }

    /// A key path read into `path` in place: an element whose kind is unchanged keeps its
    /// kind's allocation (`scratch` holds each kind as it is read), so the keys of one kind
    /// read one after another allocate nothing but their names.
    pub fn path_into(&mut self, path: &mut Vec<PathElement>, scratch: &mut Vec<u8>) -> Result<()> {
        let mut read = 0;
        loop {
            match self.byte()? {
                END => {
                    path.truncate(read);
                    return Ok(());
                }
                ELEMENT => {
                    scratch.clear();
                    self.escaped(|b| scratch.push(b))?;
                    let kind = std::str::from_utf8(scratch).map_err(|_| Malformed)?;
                    let id_or_name = match self.byte()? {
                        INCOMPLETE => None,
                        ID => Some(IdOrName::Id(
                            KeyId::stored(self.i64_ordered()?).map_err(|_| Malformed)?,
                        )),
                        NAME => Some(IdOrName::Name(KeyName::stored(self.string()?))),
                        _ => return Err(Malformed),
                    };
                    // Any key the service accepts reads back (a `/`, a negative id): lenient, as the
                    // service's reads are.
                    match path.get_mut(read) {
                        Some(element) => element.reuse(kind, id_or_name),
                        None => path.push(PathElement::stored(kind.to_owned(), id_or_name)),
                    }
                    read += 1;
                }
                _ => return Err(Malformed),
            }
        }
    }

    pub fn key(&mut self) -> Result<RawKey> {
        let partition = self.partition()?;
        let path = self.path()?;
        RawKey::new(Some(partition), path).map_err(|_| Malformed)
    }

    pub fn value(&mut self) -> Result<Value> {
        Ok(match self.byte()? {
            NULL => Value::Null,
            NUMBER => Value::Integer(self.i64_ordered()?),
            BOOLEAN => Value::Boolean(self.byte()? != 0),
            BYTES => match String::from_utf8(self.bytes()?) {
                Ok(text) => Value::String(text),
                Err(bytes) => Value::Blob(Blob::from(bytes.into_bytes())),
            },
            DOUBLE => Value::Double(self.f64_ordered()?),
            GEO => {
                let lat = self.f64_ordered()?;
                let lng = self.f64_ordered()?;
                Value::GeoPoint(GeoPoint::new(lat, lng).map_err(|_| Malformed)?)
            }
            KEY => Value::Key(self.key()?),
            _ => return Err(Malformed),
        })
    }

    /// A value encoded inverted (a descending column), read in place.
    pub fn inverted_value(&mut self) -> Result<Value> {
        self.inverted(Reader::value)
    }

    /// Moves past a value, refusing what [`Reader::value`] refuses, without building it (a
    /// string's bytes are not copied); `inverted` for a descending column's.
    pub fn skip_value(&mut self, inverted: bool) -> Result<()> {
        if inverted {
            return self.inverted(|r| r.skip_value(false));
        }
        match self.bytes.first().map(|b| b ^ self.flip) {
            Some(NULL) => drop(self.byte()?),
            Some(NUMBER | DOUBLE) => {
                self.byte()?;
                self.u64_be()?;
            }
            Some(BOOLEAN) => {
                self.byte()?;
                self.byte()?;
            }
            Some(BYTES) => {
                self.byte()?;
                self.escaped(drop)?;
            }
            // A geo point or a key (rare in an index's columns), or no value: read whole, with
            // every check `value` makes.
            _ => drop(self.value()?),
        }
        Ok(())
    }

    /// `read` over the bytes ahead as written inverted; moves past what it read.
    fn inverted<T>(&mut self, read: impl FnOnce(&mut Reader<'a>) -> Result<T>) -> Result<T> {
        let mut flipped = Reader {
            bytes: self.bytes,
            flip: !self.flip,
        };
        let read = read(&mut flipped)?;
        self.bytes = flipped.bytes;
        Ok(read)
    }
}

/// The representation the service's `__property__` metadata names for the values whose
/// encoding starts with `tag`: integers and timestamps are `INT64`, strings and blobs
/// `STRING`, keys `REFERENCE`, geographical points `POINT`.
pub fn representation(tag: u8) -> Option<&'static str> {
    Some(match tag {
        NULL => "NULL",
        NUMBER => "INT64",
        BOOLEAN => "BOOLEAN",
        BYTES => "STRING",
        DOUBLE => "DOUBLE",
        GEO => "POINT",
        KEY => "REFERENCE",
        _ => return None,
    })
}

/// The smallest byte string greater than every string that starts with `prefix`.
pub fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xFF {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::scalar::Timestamp;
    use crate::model::walk::compare_values;
    use proptest::prelude::*;

    fn encode(v: &Value) -> Vec<u8> {
        let mut out = Vec::new();
        value(&mut out, v).expect("an indexable value");
        out
    }

    fn key_of(path: Vec<(String, Option<IdOrName>)>) -> RawKey {
        let elements = path
            .into_iter()
            .map(|(kind, id)| PathElement::new(kind, id).unwrap())
            .collect();
        RawKey::new(Some(PartitionId::default()), elements).unwrap()
    }

    fn arb_key() -> impl Strategy<Value = RawKey> {
        let element = (
            prop::sample::select(vec!["A", "B", "Ab", "a\0b"]),
            prop_oneof![
                (1i64..5).prop_map(|i| IdOrName::Id(KeyId::new(i).unwrap())),
                prop::sample::select(vec!["x", "y", "x\0", "xy"])
                    .prop_map(|n| IdOrName::Name(KeyName::new(n).unwrap())),
            ],
        );
        prop::collection::vec(element, 1..4).prop_map(|els| {
            key_of(
                els.into_iter()
                    .map(|(k, id)| (k.to_owned(), Some(id)))
                    .collect(),
            )
        })
    }

    fn arb_value() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Boolean),
            prop_oneof![any::<i64>(), -3i64..3].prop_map(Value::Integer),
            prop_oneof![any::<i64>(), -3i64..3]
                .prop_map(|m| Value::Timestamp(Timestamp::from_micros(m))),
            prop_oneof![
                any::<f64>(),
                Just(0.0),
                Just(-0.0),
                Just(f64::NAN),
                Just(f64::INFINITY),
                Just(f64::NEG_INFINITY)
            ]
            .prop_map(Value::Double),
            "[a\\x00\\xff-]{0,4}".prop_map(Value::String),
            prop::collection::vec(
                prop_oneof![Just(0u8), Just(1u8), Just(0xFFu8), any::<u8>()],
                0..4
            )
            .prop_map(|b| Value::Blob(Blob::from(b))),
            (-90.0f64..90.0, -180.0f64..180.0)
                .prop_map(|(a, b)| Value::GeoPoint(GeoPoint::new(a, b).unwrap())),
            arb_key().prop_map(Value::Key),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(5_000))]

        #[test]
        fn value_encodings_sort_like_values(a in arb_value(), b in arb_value()) {
            let (ea, eb) = (encode(&a), encode(&b));
            // One encoding exactly for the values the service's order holds equal.
            prop_assert_eq!(ea.cmp(&eb), compare_values(&a, &b), "{:?} vs {:?}", a, b);
            let mut inv_a = Vec::new();
            inverted(&mut inv_a, &ea);
            let mut inv_b = Vec::new();
            inverted(&mut inv_b, &eb);
            prop_assert_eq!(inv_a.cmp(&inv_b), ea.cmp(&eb).reverse());
            // And it reads back.
            let back = Reader::new(&ea).value().unwrap();
            prop_assert_eq!(encode(&back), ea.clone());
            let back = Reader::new(&inv_a).inverted_value().unwrap();
            prop_assert_eq!(encode(&back), ea);
        }

        /// Passing over a value, plain or inverted, ends where reading it ends, followed by
        /// anything; cut short or with a bad escape, both refuse it.
        #[test]
        fn skipping_a_value_ends_where_reading_it_ends(
            v in arb_value(),
            tail in prop::collection::vec(any::<u8>(), 0..4),
            cut in any::<prop::sample::Index>(),
        ) {
            let plain = encode(&v);
            let mut flipped = Vec::new();
            inverted(&mut flipped, &plain);
            for (encoded, inverted) in [(plain, false), (flipped, true)] {
                let whole = [encoded.as_slice(), &tail].concat();
                let mut read = Reader::new(&whole);
                match inverted {
                    true => read.inverted_value().map(drop).unwrap(),
                    false => read.value().map(drop).unwrap(),
                }
                let mut skipped = Reader::new(&whole);
                skipped.skip_value(inverted).unwrap();
                prop_assert_eq!(skipped.rest(), read.rest());
                prop_assert_eq!(skipped.rest(), tail.as_slice());
                let short = &encoded[..cut.index(encoded.len())];
                let value = match inverted {
                    true => Reader::new(short).inverted_value().map(drop),
                    false => Reader::new(short).value().map(drop),
                };
                prop_assert_eq!(Reader::new(short).skip_value(inverted).is_ok(), value.is_ok());
            }
        }

        #[test]
        fn key_encodings_sort_like_keys(a in arb_key(), b in arb_key()) {
            let mut ea = Vec::new();
            key(&mut ea, &a);
            let mut eb = Vec::new();
            key(&mut eb, &b);
            prop_assert_eq!(ea.cmp(&eb), a.cmp(&b));
            prop_assert_eq!(Reader::new(&ea).key().unwrap(), a);
        }

        /// Keys read one after another into one [`Keys`] (kinds kept, depths changing) are
        /// each the key a fresh read gives.
        #[test]
        fn keys_read_in_place_are_the_keys_read_fresh(keys in prop::collection::vec(arb_key(), 1..8)) {
            let mut reused = Keys::in_partition(PartitionId::default());
            for k in keys {
                let mut encoded = Vec::new();
                path(&mut encoded, k.path());
                prop_assert_eq!(reused.read(&encoded).unwrap(), &k);
            }
        }
    }

    #[test]
    fn keys_read_in_place_refuse_what_is_not_one_whole_key() {
        let mut keys = Keys::in_partition(PartitionId::default());
        let good = key_of(vec![(
            "A".into(),
            Some(IdOrName::Id(KeyId::new(1).unwrap())),
        )]);
        let mut encoded = Vec::new();
        path(&mut encoded, good.path());
        let incomplete_parent = {
            let mut out = Vec::new();
            let parent = PathElement::new("A", None).unwrap();
            let child = PathElement::new("B", Some(IdOrName::Id(KeyId::new(2).unwrap()))).unwrap();
            path(&mut out, &[parent, child]);
            out
        };
        for bad in [
            vec![END],                             // no element
            [encoded.as_slice(), &[0]].concat(),   // something after the path
            encoded[..encoded.len() - 1].to_vec(), // cut short
            incomplete_parent,                     // an ancestor without id or name
        ] {
            assert_eq!(keys.read(&bad).map(drop), Err(Malformed), "{bad:?}");
            // A refusal leaves nothing behind: the next key reads whole.
            assert_eq!(keys.read(&encoded).unwrap(), &good);
        }
    }

    #[test]
    fn prefix_end_is_the_first_string_past_the_prefix() {
        assert_eq!(prefix_end(b"ab"), Some(b"ac".to_vec()));
        assert_eq!(prefix_end(&[1, 0xFF]), Some(vec![2]));
        assert_eq!(prefix_end(&[0xFF, 0xFF]), None);
    }
}
