//! The sink the derive writes every value into, [`ValueWriter`], with two forms behind it:
//! the embedded engine's stored form (`stored.rs`), and, with feature `cloud`, the service's
//! protocol buffers — so an entity bound for Google Cloud becomes the `pb::Entity` its commit
//! sends without passing through the stored form. Which one an entity is built in is its
//! [`Form`]. The wire form's conversions (values to it, owned values from it, the checks a
//! received map passes once) are `wire_map.rs`.

#[cfg(feature = "cloud")]
use std::collections::HashMap;
#[cfg(feature = "cloud")]
use std::sync::{Arc, OnceLock};

#[cfg(feature = "cloud")]
use gcloud_sdk::google::datastore::v1 as pb;

use crate::model::codec;
use crate::model::codec::ENTITY;
use crate::model::key::RawKey;
use crate::model::scalar::Timestamp;
use crate::model::stored::Writer;
use crate::model::value::{Facts, PropertyMap, Value};
#[cfg(feature = "cloud")]
use crate::model::value::{Measured, Repr, Wire};
#[cfg(feature = "cloud")]
use crate::model::views::ValueView;
#[cfg(feature = "cloud")]
use crate::model::wire::{Partitions, timestamp};
#[cfg(feature = "cloud")]
use crate::model::wire_map::{array, scalar, wire_entity, wire_value};

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
                    // Empty; each property the derive writes adds its size, and `put_next`
                    // keeps the names vouched for.
                    size: Measured::known(0),
                    facts: Facts::EMPTY,
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
    /// What was written so far.
    tally: Tally,
}

enum Target<'a> {
    Stored(&'a mut Writer),
    #[cfg(feature = "cloud")]
    Wire(WireWriter<'a>),
}

/// What a sink was given for one property: whether the writes make exactly the one value it
/// expects (each array followed by as many values as it announced), whether a key value may
/// be among them, whether every name in them is one the derive validated, and whether the
/// value is plain — scalars, or one array of scalars — with how many scalars and the
/// longest string or bytes among them (all the limits check would look at).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Tally {
    /// Values still expected.
    owed: usize,
    /// Whether a value came when none was expected, or an embedded entity does not read back.
    broken: bool,
    pub(crate) keys: bool,
    pub(crate) names: bool,
    /// Whether an array head was written.
    array: bool,
    pub(crate) plain: bool,
    pub(crate) scalars: usize,
    pub(crate) longest: usize,
}

impl Tally {
    const ONE_VALUE: Tally = Tally {
        owed: 1,
        broken: false,
        keys: false,
        names: true,
        array: false,
        plain: true,
        scalars: 0,
        longest: 0,
    };

    /// One value (or an array's or entity's head) was written.
    #[inline]
    fn token(&mut self) {
        match self.owed.checked_sub(1) {
            Some(owed) => self.owed = owed,
            None => self.broken = true,
        }
    }

    /// A scalar, `len` bytes long if it is a string or bytes.
    #[inline]
    fn scalar(&mut self, len: usize) {
        self.token();
        self.scalars += 1;
        self.longest = self.longest.max(len);
    }

    /// Whether what was written reads back as one value.
    pub(crate) fn balanced(self) -> bool {
        self.owed == 0 && !self.broken
    }
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

impl Facts {
    /// Takes in what the sink saw of one more property (`excluded` from indexes or not, its
    /// name validated by the derive or not).
    #[inline]
    pub(crate) fn absorb(&mut self, tally: Tally, excluded: bool, name_checked: bool) {
        let balanced = tally.balanced();
        self.readable &= balanced;
        self.keys |= tally.keys;
        self.names &= name_checked & tally.names;
        let saturated = |n: usize| n.min(u32::MAX as usize) as u32;
        self.indexed = match (self.indexed, tally.plain & balanced, excluded) {
            (Some(n), true, true) => Some(n),
            (Some(n), true, false) => Some(n.saturating_add(saturated(tally.scalars))),
            _ => None,
        };
        if !excluded {
            self.longest = self.longest.max(saturated(tally.longest));
        }
    }
}

impl<'a> ValueWriter<'a> {
    /// A sink writing into stored bytes.
    pub(crate) fn stored(w: &'a mut Writer) -> ValueWriter<'a> {
        ValueWriter {
            target: Target::Stored(w),
            tally: Tally::ONE_VALUE,
        }
    }

    /// What the sink was given.
    #[inline]
    pub(crate) fn tally(&self) -> Tally {
        self.tally
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
            tally: Tally::ONE_VALUE,
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
    #[inline]
    pub fn null(&mut self) {
        self.tally.scalar(0);
        match &mut self.target {
            Target::Stored(w) => w.u8(codec::NULL),
            #[cfg(feature = "cloud")]
            Target::Wire(w) => w.push(V::NullValue(0)),
        }
    }

    /// A boolean.
    #[inline]
    pub fn boolean(&mut self, b: bool) {
        self.tally.scalar(0);
        match &mut self.target {
            Target::Stored(w) => {
                w.u8(codec::BOOLEAN);
                w.u8(u8::from(b));
            }
            #[cfg(feature = "cloud")]
            Target::Wire(w) => w.push(V::BooleanValue(b)),
        }
    }

    /// An integer.
    #[inline]
    pub fn integer(&mut self, i: i64) {
        self.tally.scalar(0);
        match &mut self.target {
            Target::Stored(w) => w.tagged(codec::INTEGER, i.cast_unsigned()),
            #[cfg(feature = "cloud")]
            Target::Wire(w) => w.push(V::IntegerValue(i)),
        }
    }

    /// A double.
    #[inline]
    pub fn double(&mut self, d: f64) {
        self.tally.scalar(0);
        match &mut self.target {
            Target::Stored(w) => w.tagged(codec::DOUBLE, d.to_bits()),
            #[cfg(feature = "cloud")]
            Target::Wire(w) => w.push(V::DoubleValue(d)),
        }
    }

    /// A timestamp.
    #[inline]
    pub fn timestamp(&mut self, t: Timestamp) {
        self.tally.scalar(0);
        match &mut self.target {
            Target::Stored(w) => w.tagged(codec::TIMESTAMP, t.as_micros().cast_unsigned()),
            #[cfg(feature = "cloud")]
            Target::Wire(w) => w.push(V::TimestampValue(timestamp(t))),
        }
    }

    /// A string.
    #[inline]
    pub fn string(&mut self, s: &str) {
        self.tally.scalar(s.len());
        match &mut self.target {
            Target::Stored(w) => {
                w.u8(codec::STRING);
                w.bytes(s.as_bytes());
            }
            #[cfg(feature = "cloud")]
            Target::Wire(w) => w.push(V::StringValue(s.to_owned())),
        }
    }

    /// Bytes.
    #[inline]
    pub fn blob(&mut self, b: &[u8]) {
        self.tally.scalar(b.len());
        match &mut self.target {
            Target::Stored(w) => {
                w.u8(codec::BLOB);
                w.bytes(b);
            }
            #[cfg(feature = "cloud")]
            Target::Wire(w) => w.push(V::BlobValue(b.to_vec())),
        }
    }

    /// A key.
    pub fn key(&mut self, key: &RawKey) {
        self.tally.token();
        self.tally.keys = true;
        self.tally.plain = false;
        match &mut self.target {
            Target::Stored(w) => {
                w.u8(codec::KEY);
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
    #[inline]
    pub fn array(&mut self, len: usize) {
        // Plain only as the property's value (not inside another array): the first value
        // written (a key, an entity or a `Value` before it made the property not plain).
        self.tally.plain &= !self.tally.array && self.tally.scalars == 0;
        self.tally.array = true;
        self.tally.token();
        self.tally.owed += len;
        match &mut self.target {
            Target::Stored(w) => {
                w.u8(codec::ARRAY);
                w.len(len);
            }
            #[cfg(feature = "cloud")]
            Target::Wire(w) => w.array(len),
        }
    }

    /// An embedded entity, its properties built by `build` in the sink's form.
    pub fn entity(&mut self, build: impl FnOnce(Form<'_>) -> PropertyMap) {
        self.tally.token();
        self.tally.plain = false;
        let form = match &self.target {
            Target::Stored(_) => Form::STORED,
            #[cfg(feature = "cloud")]
            Target::Wire(w) => Form(FormRepr::Wire {
                partitions: w.partitions,
                excluded: w.excluded,
            }),
        };
        let properties = build(form);
        let facts = properties.facts();
        self.tally.broken |= !facts.readable;
        self.tally.keys |= facts.keys;
        self.tally.names &= facts.names;
        match &mut self.target {
            Target::Stored(w) => {
                w.u8(ENTITY);
                w.properties(&properties);
            }
            #[cfg(feature = "cloud")]
            Target::Wire(w) => {
                let properties = properties.into_wire(w.partitions, w.excluded);
                w.push(V::EntityValue(wire_entity(properties)));
            }
        }
    }

    /// Any value: written whole, it reads back. Only a scalar is surely no key and holds no
    /// names; it is not counted as plain.
    pub fn value(&mut self, value: &Value) {
        self.tally.token();
        self.tally.plain = false;
        let scalar = !matches!(value, Value::Key(_) | Value::Array(_) | Value::Entity(_));
        self.tally.keys |= !scalar;
        self.tally.names &= scalar;
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

    pub(crate) fn stored_size(&self) -> usize {
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

#[cfg(all(test, feature = "cloud"))]
mod tests {
    use super::*;
    use crate::model::key::{IdOrName, KeyId, PartitionId, PathElement};
    use crate::model::scalar::{Blob, GeoPoint};
    use crate::model::value::Property;
    use gcloud_sdk::google::r#type::LatLng;

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

    /// What a stored map built by the sink vouches for — it reads back, holds no key, has
    /// only names the derive validated — is only what the sink saw: each is withdrawn by the
    /// first write that could break it, at any depth.
    #[test]
    fn the_sink_vouches_only_for_what_it_saw() {
        let facts = |put: &dyn Fn(&mut PropertyMap)| {
            let mut m = PropertyMap::in_form(Form::STORED, 4, 64);
            m.put_next("a", false, |w| w.integer(1));
            put(&mut m);
            let f = m.facts();
            (f.readable, f.keys, f.names)
        };
        let key = RawKey::new(
            None,
            vec![PathElement::new("K", Some(IdOrName::Id(KeyId::new(1).unwrap()))).unwrap()],
        )
        .unwrap();
        let derived = |form: Form<'_>| {
            let mut inner = PropertyMap::in_form(form, 1, 16);
            inner.put_next("x", false, |w| w.string("s"));
            inner
        };
        // (readable, keys, names)
        assert_eq!(facts(&|_| {}), (true, false, true));
        assert_eq!(
            facts(&|m| m.put_next("b", true, |w| {
                w.array(2);
                w.double(0.5);
                w.entity(derived);
            })),
            (true, false, true)
        );
        assert_eq!(
            facts(&|m| m.put_next("b", false, |w| w.key(&key))),
            (true, true, true)
        );
        assert_eq!(
            facts(&|m| m.put_next("b", false, |w| w.entity(|form| {
                let mut inner = derived(form);
                inner.put_next("y", false, |w| w.key(&key));
                inner
            }))),
            (true, true, true)
        );
        // Names the sink did not see validated: `put_with`'s, a `Value`'s, a hand-built map's.
        assert_eq!(
            facts(&|m| m.put_with("b", false, |w| w.null())),
            (true, false, false)
        );
        assert_eq!(
            facts(&|m| m.put_next("b", false, |w| w.value(&Value::Array(vec![])))),
            (true, true, false)
        );
        assert_eq!(
            facts(&|m| m.put_next("b", false, |w| w.entity(|_| {
                let mut inner = PropertyMap::new();
                inner.insert("y", Property::indexed(Value::Integer(1)));
                inner
            }))),
            (true, true, false)
        );
        assert_eq!(
            facts(&|m| m.put_next("b", false, |w| w.value(&Value::Integer(3)))),
            (true, false, true)
        );
        // Plain properties: how many values are indexed, and the longest indexed string.
        let plain = |put: &dyn Fn(&mut PropertyMap)| {
            let mut m = PropertyMap::in_form(Form::STORED, 4, 64);
            m.put_next("a", false, |w| w.integer(1));
            m.put_next("b", true, |w| w.string(&"x".repeat(2000)));
            put(&mut m);
            let f = m.facts();
            (f.indexed, f.longest)
        };
        assert_eq!(plain(&|_| {}), (Some(1), 0));
        assert_eq!(
            plain(&|m| m.put_next("c", false, |w| {
                w.array(3);
                w.string("abc");
                w.null();
                w.blob(&[0; 7]);
            })),
            (Some(4), 7)
        );
        assert_eq!(
            plain(&|m| m.put_next("c", true, |w| {
                w.array(1);
                w.string("abc");
            })),
            (Some(1), 0)
        );
        // Not plain: a key, an entity, a `Value`, an array inside an array.
        for put in [
            &(|m: &mut PropertyMap| m.put_next("c", false, |w| w.key(&key)))
                as &dyn Fn(&mut PropertyMap),
            &|m| m.put_next("c", false, |w| w.entity(derived)),
            &|m| m.put_next("c", false, |w| w.value(&Value::Integer(1))),
            &|m| {
                m.put_next("c", false, |w| {
                    w.array(1);
                    w.array(0);
                })
            },
        ] {
            assert_eq!(plain(put).0, None);
        }

        // Values that do not make the one value announced: fewer, more, or a broken entity.
        for (announced, written) in [(2, 1), (1, 2), (0, 1)] {
            let (readable, _, _) = facts(&|m| {
                m.put_next("b", true, |w| {
                    w.array(announced);
                    (0..written).for_each(|_| w.boolean(true));
                })
            });
            assert!(!readable, "{announced} announced, {written} written");
        }
        let (readable, _, _) = facts(&|m| {
            m.put_next("b", true, |w| {
                w.entity(|form| {
                    let mut inner = PropertyMap::in_form(form, 1, 16);
                    inner.put_next("x", false, |w| w.array(1));
                    inner
                })
            })
        });
        assert!(!readable);
    }

    /// A wire map the derive writes adds up its encoded size as it goes, to exactly what prost
    /// measures for the finished map, and knows whether its names were all validated by the
    /// derive; a property written twice makes it measure again.
    #[test]
    fn a_wire_map_sums_its_size_as_it_is_written() {
        let partitions = Arc::new(Partitions::new("p", ""));
        let measured = |m: &PropertyMap| match &m.repr {
            Repr::Wire(w) => (
                w.size.get(),
                gcloud_sdk::prost::encoding::hash_map::encoded_len(
                    gcloud_sdk::prost::encoding::string::encoded_len,
                    gcloud_sdk::prost::encoding::message::encoded_len,
                    2,
                    &w.properties,
                ),
            ),
            _ => panic!("a wire map"),
        };
        let m = written(Form::wire(&partitions));
        let (summed, size) = measured(&m);
        assert_eq!(summed, Some(size));
        assert!(!m.facts().names, "put_with's names are not vouched for");

        let mut m = PropertyMap::in_form(Form::wire(&partitions), 4, 0);
        m.put_next("a", false, |w| w.string(&"x".repeat(300)));
        m.put_next("b", true, |w| {
            w.array(2);
            w.null();
            w.entity(|form| {
                let mut inner = PropertyMap::in_form(form, 1, 0);
                inner.put_next("c", false, |w| w.integer(0));
                inner
            });
        });
        let (summed, size) = measured(&m);
        assert_eq!(summed, Some(size));
        assert!(m.facts().names);
        m.put_next("b", false, |w| {
            w.value(&Value::Array(vec![Value::Integer(1)]))
        });
        assert_eq!(measured(&m).0, None, "replaced: measured again when asked");
        assert_eq!(m.encoded_size(), measured(&m).1);
        assert!(!m.facts().names, "a `Value` may hold any names");
    }
}
