//! The sink the derive writes every value into, [`ValueWriter`], with two kinds of form
//! behind it: the embedded engine's stored form (`stored.rs`), and a backend's own form (a
//! [`ForeignMap`]: the Google Cloud path's protocol buffers), so that an entity bound for
//! Google Cloud becomes the `pb::Entity` its commit sends without passing through the stored
//! form. Which one an entity is built in is its [`Form`].

use crate::model::codec;
use crate::model::codec::ENTITY;
use crate::model::key::RawKey;
use crate::model::scalar::Timestamp;
use crate::model::stored::Writer;
use crate::model::value::{
    Facts, Foreign, ForeignForm, ForeignMap, Piece, PropertyMap, Repr, Value,
};

/// The form an entity's properties are built in: the stored form, or a backend's own (that of
/// one Google Cloud database). Chosen by the `Db`; not a public API.
#[derive(Clone, Copy)]
#[doc(hidden)]
pub struct Form<'a>(FormRepr<'a>);

#[derive(Clone, Copy)]
enum FormRepr<'a> {
    Stored,
    Foreign {
        form: &'a dyn ForeignForm,
        excluded: bool,
    },
}

impl Form<'static> {
    /// The embedded engine's stored form.
    pub const STORED: Form<'static> = Form(FormRepr::Stored);
}

impl<'a> Form<'a> {
    /// A backend's own form. Not a public API.
    #[doc(hidden)]
    pub fn foreign(form: &'a dyn ForeignForm) -> Form<'a> {
        Form(FormRepr::Foreign {
            form,
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
            FormRepr::Foreign { form, excluded } => {
                PropertyMap::foreign_with(form.new_map(excluded, properties), Facts::EMPTY)
            }
            FormRepr::Stored => PropertyMap::stored_with_capacity(properties, bytes),
        }
    }

    /// A map in a backend's own form, checked when it was built (received from the service
    /// and checked on arrival). Not a public API.
    #[doc(hidden)]
    pub fn foreign(map: Box<dyn ForeignMap>) -> PropertyMap {
        PropertyMap::foreign_with(map, Facts::CHECKED)
    }

    fn foreign_with(map: Box<dyn ForeignMap>, facts: Facts) -> PropertyMap {
        PropertyMap {
            repr: Repr::Foreign(Foreign {
                map,
                decoded: std::sync::OnceLock::new(),
                facts,
            }),
        }
    }

    /// The map in a backend's own form, when it holds one and nothing decoded it. Not a
    /// public API.
    #[doc(hidden)]
    pub fn foreign_map(&mut self) -> Option<&mut dyn ForeignMap> {
        match &mut self.repr {
            Repr::Foreign(f) if f.decoded.get().is_none() => Some(&mut *f.map),
            _ => None,
        }
    }
}

/// Where the derive writes a value: the stored form's bytes, or a `pb::Value` being built.
/// Used by the generated code through [`PropertyType::write_value`](crate::model::property_type::PropertyType::write_value);
/// not a public API.
pub struct ValueWriter<'a> {
    target: Target<'a>,
    /// What was written so far.
    tally: Tally,
}

enum Target<'a> {
    Stored(&'a mut Writer),
    Foreign(&'a mut dyn ForeignMap),
}

/// What a sink was given for one property: whether the writes make exactly the one value it
/// expects (each array followed by as many values as it announced), whether a key value may
/// be among them, whether every name in them is one the derive validated, and whether the
/// value is plain — scalars, or one array of scalars — with how many scalars and the
/// longest string or bytes among them (all the limits check would look at).
#[derive(Clone, Copy, Debug)]
pub struct Tally {
    /// Values still expected.
    owed: usize,
    /// Whether a value came when none was expected, or an embedded entity does not read back.
    broken: bool,
    pub keys: bool,
    pub names: bool,
    /// Whether an array head was written.
    array: bool,
    pub plain: bool,
    pub scalars: usize,
    pub longest: usize,
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
    pub fn balanced(self) -> bool {
        self.owed == 0 && !self.broken
    }
}

impl Facts {
    /// Takes in what the sink saw of one more property (`excluded` from indexes or not, its
    /// name validated by the derive or not).
    #[inline]
    pub fn absorb(&mut self, tally: Tally, excluded: bool, name_checked: bool) {
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
    pub fn stored(w: &'a mut Writer) -> ValueWriter<'a> {
        ValueWriter {
            target: Target::Stored(w),
            tally: Tally::ONE_VALUE,
        }
    }

    /// What the sink was given.
    #[inline]
    pub fn tally(&self) -> Tally {
        self.tally
    }

    /// A sink writing into the value `map` began.
    pub fn foreign(map: &'a mut dyn ForeignMap) -> ValueWriter<'a> {
        ValueWriter {
            target: Target::Foreign(map),
            tally: Tally::ONE_VALUE,
        }
    }

    /// A null.
    #[inline]
    pub fn null(&mut self) {
        self.tally.scalar(0);
        match &mut self.target {
            Target::Stored(w) => w.u8(codec::NULL),
            Target::Foreign(m) => m.write(Piece::Null),
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
            Target::Foreign(m) => m.write(Piece::Boolean(b)),
        }
    }

    /// An integer.
    #[inline]
    pub fn integer(&mut self, i: i64) {
        self.tally.scalar(0);
        match &mut self.target {
            Target::Stored(w) => w.tagged(codec::INTEGER, i.cast_unsigned()),
            Target::Foreign(m) => m.write(Piece::Integer(i)),
        }
    }

    /// A double.
    #[inline]
    pub fn double(&mut self, d: f64) {
        self.tally.scalar(0);
        match &mut self.target {
            Target::Stored(w) => w.tagged(codec::DOUBLE, d.to_bits()),
            Target::Foreign(m) => m.write(Piece::Double(d)),
        }
    }

    /// A timestamp.
    #[inline]
    pub fn timestamp(&mut self, t: Timestamp) {
        self.tally.scalar(0);
        match &mut self.target {
            Target::Stored(w) => w.tagged(codec::TIMESTAMP, t.as_micros().cast_unsigned()),
            Target::Foreign(m) => m.write(Piece::Timestamp(t)),
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
            Target::Foreign(m) => m.write(Piece::String(s)),
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
            Target::Foreign(m) => m.write(Piece::Blob(b)),
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
            Target::Foreign(m) => m.write(Piece::Key(key)),
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
            Target::Foreign(m) => m.write(Piece::Array(len)),
        }
    }

    /// An embedded entity, its properties built by `build` in the sink's form.
    pub fn entity(&mut self, build: impl FnOnce(Form<'_>) -> PropertyMap) {
        self.tally.token();
        self.tally.plain = false;
        let form = match &self.target {
            Target::Stored(_) => Form::STORED,
            Target::Foreign(m) => Form(FormRepr::Foreign {
                form: m.form(),
                excluded: m.excluded(),
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
            Target::Foreign(m) => m.write(Piece::Entity(properties)),
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
            Target::Foreign(m) => m.write(Piece::Value(value)),
        }
    }
}

impl PropertyMap {
    /// The size of the properties encoded: exact in a backend's own form (what the service
    /// counts, measured by it), the stored form's size otherwise (within a few bytes of it for
    /// large entities).
    pub fn encoded_size(&self) -> usize {
        match &self.repr {
            Repr::Foreign(f) => f.map.encoded_len(),
            _ => self.stored_size(),
        }
    }
}

impl PropertyMap {
    /// The size of an entity at `key` with these properties, as it is sent or stored: exact
    /// in the wire form (`pb::Entity`'s encoded length, what the service measures), the
    /// stored form's otherwise (within a few bytes of it for large entities).
    pub fn entity_size(&self, key: &RawKey) -> usize {
        if let Repr::Foreign(f) = &self.repr {
            return f.map.entity_len(key);
        }
        Writer::key_len(key) + self.encoded_size()
    }

    pub fn stored_size(&self) -> usize {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::key::{IdOrName, KeyId, PathElement};
    use crate::model::value::Property;

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
}
