//! Values as the store holds them: [`Value`], [`Property`], the [`PropertyMap`] of an entity
//! (defined here, with `Value`, because each holds the other; its operations are in `map.rs`),
//! and the service's order of values.

use std::collections::VecDeque;
use std::sync::OnceLock;

use crate::error::Error;
use crate::model::key::RawKey;
use crate::model::scalar::{Blob, GeoPoint, Timestamp, Vector};

/// The most array and entity values nested in one another: a property holding an embedded
/// entity is one level, an array another ("At most 20 nested array/entity values are
/// supported", says the service).
pub const MAX_NESTING: usize = 20;

/// One stored property: its value, whether it is excluded from indexes (R-I1), and what other
/// clients wrote beside the value.
#[derive(Clone, Debug, PartialEq)]
pub struct Property {
    /// The value; an array holds one value per element.
    pub value: Value,
    /// Excluded properties (and everything inside them) cannot be filtered, ordered or projected
    /// on. For an array whose elements differ ([`Annotations::Elements`]): whether all are.
    pub excluded: bool,
    /// The service's `meaning` of the value and, in an array, each element's own meaning and
    /// exclusion: kept as another client wrote them, never read by the crate.
    pub annotations: Annotations,
}

impl Property {
    /// An indexed property.
    pub fn indexed(value: Value) -> Property {
        Property {
            value,
            excluded: false,
            annotations: Annotations::None,
        }
    }

    /// A property excluded from indexes.
    pub fn excluded(value: Value) -> Property {
        Property {
            value,
            excluded: true,
            annotations: Annotations::None,
        }
    }

    /// A value a projection query returned: an index value, with the service's meaning for
    /// one (18), which the service refuses to store, so that a projection is never written
    /// back as an entity.
    pub fn projected(value: Value) -> Property {
        Property {
            value,
            excluded: false,
            annotations: Annotations::Meaning(PROJECTED_MEANING),
        }
    }

    /// Whether element `i` of the property's array (or its value, for `0`) is excluded from
    /// indexes.
    pub fn element_excluded(&self, i: usize) -> bool {
        self.annotations.element_excluded(i, self.excluded)
    }
}

/// The service's meaning of an index value a projection returned.
pub const PROJECTED_MEANING: i32 = 18;

/// What another client wrote beside a property's value, which the service keeps and the
/// crate keeps as written (it gives its own values none): the service's `meaning` — python-ndb's
/// compressed blobs and texts are 22, the long texts of older clients 15, its users 20 — and, in
/// an array, each element's own meaning and exclusion from indexes, where the elements differ
/// (a transform appends indexed elements to an array whose elements are excluded).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Annotations {
    /// Nothing beside the value.
    #[default]
    None,
    /// The meaning of the value (one that is not an array).
    Meaning(i32),
    /// Each element of the array: its meaning (`0`: none) and whether it is excluded from
    /// indexes.
    Elements(Box<[(i32, bool)]>),
}

impl Annotations {
    /// The annotations of an array whose elements carry `elements` (meaning, excluded), and
    /// whether the property is excluded (all its elements are): none where the elements have
    /// no meaning and agree.
    pub fn of_elements(elements: Vec<(i32, bool)>) -> (Annotations, bool) {
        let all = elements.iter().all(|(_, excluded)| *excluded);
        let plain = elements
            .iter()
            .all(|(meaning, excluded)| *meaning == 0 && *excluded == all);
        match plain {
            true => (Annotations::None, all),
            false => (Annotations::Elements(elements.into()), all),
        }
    }

    /// Whether element `i` is excluded, for a property excluded or not (`excluded`).
    pub fn element_excluded(&self, i: usize, excluded: bool) -> bool {
        match self {
            Annotations::Elements(elements) => elements.get(i).map_or(excluded, |e| e.1),
            _ => excluded,
        }
    }

    /// The meaning of the value (not an array): `0` for none.
    pub fn meaning(&self) -> i32 {
        match self {
            Annotations::Meaning(meaning) => *meaning,
            _ => 0,
        }
    }

    /// Whether there are none.
    pub fn is_none(&self) -> bool {
        *self == Annotations::None
    }
}

/// A stored value: every type the service knows.
///
/// A value can be built nested to any depth, but no write accepts one nested deeper than
/// [`MAX_NESTING`]. Cloning, comparing and dropping one walk it without recursion, and its
/// `Debug` stops past 64 levels (writing `…`), so even a value nested a hundred thousand
/// levels deep is handled without overflowing the stack. Because `Value` has a `Drop`, take
/// an owned value's contents with the `into_` methods (or `std::mem::take`), not by moving
/// out of it in a `match`.
pub enum Value {
    /// No value.
    Null,
    /// A boolean.
    Boolean(bool),
    /// A 64-bit signed integer.
    Integer(i64),
    /// A 64-bit float; NaN and the infinities are stored as they are.
    Double(f64),
    /// A point in time, in microseconds.
    Timestamp(Timestamp),
    /// A UTF-8 string (R-P1).
    String(String),
    /// Bytes (R-P1).
    Blob(Blob),
    /// A latitude/longitude pair.
    GeoPoint(GeoPoint),
    /// A reference to another entity.
    Key(RawKey),
    /// An array; it matches filters on any of its elements.
    Array(Vec<Value>),
    /// An embedded entity, indexed under `outer.inner` paths (R-P2).
    Entity(PropertyMap),
    /// A vector embedding (the service's array of doubles with meaning 31): never indexed,
    /// searched by `find_nearest`.
    Vector(Vector),
}

impl Value {
    /// The type's name, as used in error messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Boolean(_) => "boolean",
            Value::Integer(_) => "integer",
            Value::Double(_) => "double",
            Value::Timestamp(_) => "timestamp",
            Value::String(_) => "string",
            Value::Blob(_) => "blob",
            Value::GeoPoint(_) => "geo point",
            Value::Key(_) => "key",
            Value::Array(_) => "array",
            Value::Entity(_) => "embedded entity",
            Value::Vector(_) => "vector",
        }
    }
}

/// The properties of an entity (or of an embedded entity), by name, in name order.
///
/// Built for the conversions every read and write makes: the names live in one buffer and
/// the properties in one vector, so a map of any size costs two allocations (plus its
/// values' own), and looking a name up is a binary search over a few contiguous entries.
/// A map the embedded engine returns (or the derive builds) holds the engine's stored form,
/// decoded only when a `&Property` is asked for: the derive's conversions read and write
/// fields straight from and to it.
///
/// ```
/// # use datastore_entity::{Property, PropertyMap, Value};
/// let mut properties = PropertyMap::new();
/// properties.insert("title", Property::indexed(Value::String("Hello".into())));
/// properties.insert("body", Property::excluded(Value::String("…".into())));
/// assert_eq!(properties.len(), 2);
/// assert_eq!(properties["title"].value, Value::String("Hello".into()));
/// let names: Vec<&str> = properties.keys().collect();
/// assert_eq!(names, ["body", "title"]);
/// ```
#[derive(Clone, Default)]
pub struct PropertyMap {
    pub repr: Repr,
}

#[derive(Clone)]
pub enum Repr {
    Entries(Entries),
    Stored(Stored),
    /// Another form, which a backend defines (the Google Cloud path's protocol buffers).
    Foreign(Foreign),
}

impl Default for Repr {
    fn default() -> Repr {
        Repr::Entries(Entries::default())
    }
}

/// Decoded properties.
#[derive(Clone, Default)]
pub struct Entries {
    /// Every name, back to back (removed names stay until the map is dropped).
    pub names: String,
    /// Sorted by name; a deque, as the derive takes its fields out from the front.
    pub entries: VecDeque<Entry>,
}

#[derive(Clone)]
pub struct Entry {
    pub start: u32,
    pub len: u32,
    pub property: Property,
}

/// Properties in the embedded engine's stored form, decoded only if something asks for a
/// `&Property`: the derive reads its fields straight out of the bytes.
#[derive(Clone)]
pub struct Stored {
    pub bytes: Vec<u8>,
    /// Where each property is, in name order; the first `front` were taken out. Found when
    /// first needed for bytes the embedded engine wrote in this process (checked by
    /// construction), and by the check itself for others (see `PropertyMap::from_stored`).
    pub slots: OnceLock<Vec<Slot>>,
    pub front: usize,
    /// Whether `bytes` holds exactly the slots (none was taken out).
    pub exact: bool,
    pub decoded: OnceLock<Box<Entries>>,
    /// What is known of the bytes without reading them.
    pub facts: Facts,
}

/// What is known of a stored map's bytes without reading them: vouched for by the sink that
/// wrote them (`sink.rs`), or by the checks they passed.
#[derive(Clone, Copy, Debug)]
pub struct Facts {
    /// Whether the bytes read back (every array holds as many values as it announced).
    pub readable: bool,
    /// Whether a key value may be among the values (at any depth).
    pub keys: bool,
    /// Whether every property name, at every depth, is one the derive validated when it
    /// compiled (`rules::names` need not run again).
    pub names: bool,
    /// When every property is plain (scalars, or one array of scalars: no key, entity or
    /// `Value` written whole), how many values are indexed: all the limits check counts.
    pub indexed: Option<u32>,
    /// The longest indexed string or bytes among plain properties (saturating).
    pub longest: u32,
}

impl Facts {
    /// Bytes that were checked (a file's, on read), or that passed the embedded engine's
    /// commit (the memory store's): they read back; what they hold is not known.
    pub const CHECKED: Facts = Facts {
        readable: true,
        keys: true,
        names: false,
        indexed: None,
        longest: 0,
    };

    /// An empty map the derive fills: it reads back, holds no key, has no name.
    pub const EMPTY: Facts = Facts {
        readable: true,
        keys: false,
        names: true,
        indexed: Some(0),
        longest: 0,
    };
}

/// Properties held in a form the model does not define — the Google Cloud path's protocol
/// buffers, as a `LookupResponse` holds them or as the derive writes them for a commit —,
/// reached only through [`ForeignMap`] and decoded only if something asks for a `&Property`:
/// the derive reads its fields straight out of them, and the backend sends them as they are.
pub struct Foreign {
    pub map: Box<dyn ForeignMap>,
    pub decoded: OnceLock<Box<Entries>>,
    /// What is known of the values without reading them (see [`Facts`]).
    pub facts: Facts,
}

impl Clone for Foreign {
    fn clone(&self) -> Foreign {
        Foreign {
            map: self.map.clone_map(),
            decoded: self.decoded.clone(),
            facts: self.facts,
        }
    }
}

impl Foreign {
    /// Every property, decoded, in name order (decoded once).
    pub fn entries(&self) -> &Entries {
        self.decoded.get_or_init(|| Box::new(self.decode()))
    }

    /// Every property, decoded, in name order.
    pub fn decode(&self) -> Entries {
        // Checked when it was built: a map that does not decode is a bug of the crate.
        let mut properties = self.map.decode().unwrap_or_else(|e| {
            panic!("a map checked when it was built decodes ({e}): a bug of datastore-entity")
        });
        properties.sort_unstable_by(|a, b| a.0.cmp(b.0));
        let mut entries = Entries::default();
        for (name, property) in properties {
            entries.insert(name, property);
        }
        entries
    }
}

/// A property map in a backend's own form: what the model asks of it. The backend that
/// defines the form implements it (the Google Cloud path, over `pb::Value`s), so the model
/// knows no form but its own. Not a public API.
#[doc(hidden)]
pub trait ForeignMap: Send + Sync + 'static {
    /// The map, to be downcast by the backend that made it.
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any;
    /// A copy.
    fn clone_map(&self) -> Box<dyn ForeignMap>;
    /// How many properties there are.
    fn len(&self) -> usize;
    /// Whether there are none.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Whether there is a property named `name`.
    fn contains(&self, name: &str) -> bool;
    /// Every property, decoded, in any order. The map was checked when it was built: what
    /// does not decode is a bug, reported by `Err`.
    fn decode(&self) -> Result<Vec<(&str, Property)>, Error>;
    /// Property `name`, decoded (the rest of the map is not).
    fn get(&self, name: &str) -> Option<Result<Property, Error>>;
    /// Takes property `name` out, decoded (its strings moved, not copied).
    fn take(&mut self, name: &str) -> Option<Result<Value, Error>>;
    /// Hands `read` the properties the derive reads, in its fields' order: the type reads
    /// `count` properties, and `slot` gives a name's place among them in name order (`None`:
    /// one the type does not know, passed over). The reader lives on the map's side of the
    /// call, so reading an entity allocates nothing for it.
    fn read_in_order(
        &mut self,
        count: usize,
        slot: fn(&str) -> Option<usize>,
        read: &mut dyn FnMut(&mut dyn ForeignInOrder),
    );
    /// Whether every value written into the map is excluded from indexes (the properties of
    /// an excluded embedded entity).
    fn excluded(&self) -> bool;
    /// The form, to build embedded entities in.
    fn form(&self) -> &dyn ForeignForm;
    /// Starts a value, excluded from indexes or not; the next [`ForeignMap::write`]s make it.
    fn begin(&mut self, excluded: bool);
    /// One piece of the value begun: arrays are announced by their length and filled by the
    /// writes that follow.
    fn write(&mut self, piece: Piece<'_>);
    /// The value begun, set as property `name` (null if nothing was written).
    fn finish(&mut self, name: &str);
    /// The properties' size, encoded as the form sends them.
    fn encoded_len(&self) -> usize;
    /// The size of an entity at `key` with these properties, encoded as the form sends it.
    fn entity_len(&self, key: &RawKey) -> usize;
}

/// A backend's form: how an empty map in it is made. Not a public API.
#[doc(hidden)]
pub trait ForeignForm: Send + Sync {
    /// An empty map, its values all excluded when `excluded`, with room for `properties`.
    fn new_map(&self, excluded: bool, properties: usize) -> Box<dyn ForeignMap>;
}

/// A foreign map's properties in the derive's fields' order (see
/// [`ForeignMap::read_in_order`]).
/// Not a public API.
#[doc(hidden)]
pub trait ForeignInOrder {
    /// The next field's property, decoded (`None`: missing).
    fn next_value(&mut self) -> Option<Result<Value, Error>>;
}

/// One piece of a value written into a [`ForeignMap`]. Not a public API.
#[doc(hidden)]
#[derive(Debug)]
pub enum Piece<'a> {
    /// A null.
    Null,
    /// A boolean.
    Boolean(bool),
    /// An integer.
    Integer(i64),
    /// A double.
    Double(f64),
    /// A timestamp.
    Timestamp(Timestamp),
    /// A string.
    String(&'a str),
    /// Bytes.
    Blob(&'a [u8]),
    /// A key.
    Key(&'a RawKey),
    /// An array of this many values, which the next pieces are.
    Array(usize),
    /// An embedded entity, built in the map's form (or any other).
    Entity(PropertyMap),
    /// Any value, whole.
    Value(&'a Value),
}

/// Where one property lies in stored bytes: its name, its value, whether it is excluded.
#[derive(Debug, Clone, Copy)]
pub struct Slot {
    pub name: (u32, u32),
    pub value: (u32, u32),
    pub excluded: bool,
}

impl Entries {
    pub fn name(&self, entry: &Entry) -> &str {
        let start = entry.start as usize;
        self.names
            .get(start..start + entry.len as usize)
            .unwrap_or_default()
    }

    pub fn find(&self, name: &str) -> Result<usize, usize> {
        self.entries.binary_search_by(|e| self.name(e).cmp(name))
    }

    pub fn insert(&mut self, name: &str, property: Property) -> Option<Property> {
        // Properties usually arrive in name order: appending needs no search.
        let position = match self.entries.back() {
            Some(last) if self.name(last) < name => Err(self.entries.len()),
            None => Err(0),
            Some(_) => self.find(name),
        };
        match position {
            Ok(i) => Some(std::mem::replace(&mut self.entries[i].property, property)),
            Err(i) => {
                let start = self.names.len();
                self.names.push_str(name);
                let entry = Entry {
                    start: u32::try_from(start).unwrap_or(u32::MAX),
                    len: u32::try_from(name.len()).unwrap_or(u32::MAX),
                    property,
                };
                self.entries.insert(i, entry);
                None
            }
        }
    }
}

impl Stored {
    pub fn name(&self, slot: &Slot) -> &str {
        std::str::from_utf8(self.range(slot.name)).unwrap_or_default()
    }

    pub fn range(&self, (start, end): (u32, u32)) -> &[u8] {
        self.bytes
            .get(start as usize..end as usize)
            .unwrap_or_default()
    }

    /// The slots not taken out.
    pub fn live(&self) -> &[Slot] {
        self.slots().get(self.front..).unwrap_or_default()
    }

    /// `name`'s place among all the slots (live ones only).
    pub fn find(&self, name: &str) -> Result<usize, usize> {
        self.live()
            .binary_search_by(|s| self.range(s.name).cmp(name.as_bytes()))
            .map(|i| i + self.front)
            .map_err(|i| i + self.front)
    }
}

/// A value that did not have the shape a field expects, found while loading.
///
/// The derive turns it into [`Error::Decode`], adding the kind.
#[derive(Debug, Clone, PartialEq)]
pub struct DecodeError {
    /// Where inside the property (`.inner`, `[2]`), innermost last; empty for the property itself.
    pub path: String,
    /// What the field expects.
    pub expected: String,
    /// What was stored.
    pub found: String,
}

impl DecodeError {
    /// The stored value is not what the field expects.
    pub fn new(expected: impl Into<String>, found: impl Into<String>) -> DecodeError {
        DecodeError {
            path: String::new(),
            expected: expected.into(),
            found: found.into(),
        }
    }

    /// The stored value is not of the expected type.
    pub fn mismatch(expected: impl Into<String>, found: &Value) -> DecodeError {
        DecodeError {
            path: String::new(),
            expected: expected.into(),
            found: found.type_name().to_owned(),
        }
    }

    /// Prefixes the path with an outer step (`.name` or `[i]`).
    pub fn within(mut self, step: &str) -> DecodeError {
        self.path.insert_str(0, step);
        self
    }

    /// The error of loading property `property` of kind `kind`.
    pub fn into_error(self, kind: &str, property: &str) -> Error {
        self.error_at(None, kind, property)
    }

    /// The error of loading property `property` of the entity at `key` (named in the error).
    pub fn into_entity_error(self, key: &RawKey, property: &str) -> Error {
        self.error_at(Some(format!("{key:?}").into()), key.kind(), property)
    }

    fn error_at(self, key: Option<Box<str>>, kind: &str, property: &str) -> Error {
        Error::Decode {
            key,
            kind: kind.to_owned(),
            property: format!("{property}{}", self.path),
            expected: self.expected,
            found: self.found,
        }
    }
}

/// A null.
impl Default for Value {
    fn default() -> Value {
        Value::Null
    }
}

impl Value {
    /// The string, if this is one.
    pub fn into_string(mut self) -> Option<String> {
        match &mut self {
            Value::String(s) => Some(std::mem::take(s)),
            _ => None,
        }
    }

    /// The bytes, if this is a byte string.
    pub fn into_blob(mut self) -> Option<Blob> {
        match &mut self {
            Value::Blob(b) => Some(std::mem::take(b)),
            _ => None,
        }
    }

    /// The key, if this is one.
    pub fn into_key(self) -> Option<RawKey> {
        match &self {
            Value::Key(k) => Some(k.clone()),
            _ => None,
        }
    }

    /// The elements, if this is an array.
    pub fn into_array(mut self) -> Option<Vec<Value>> {
        match &mut self {
            Value::Array(values) => Some(std::mem::take(values)),
            _ => None,
        }
    }

    /// The properties, if this is an embedded entity.
    pub fn into_entity(mut self) -> Option<PropertyMap> {
        match &mut self {
            Value::Entity(map) => Some(std::mem::take(map)),
            _ => None,
        }
    }
}

/// A `Value` holds a `PropertyMap` inline, and every conversion moves values: their size is
/// speed. Measured: a map of 160 bytes (a decoded form held inline, and the facts) made the
/// wire decode benchmark 25% slower than one of 112.
#[cfg(all(test, target_pointer_width = "64"))]
#[test]
fn a_value_stays_small() {
    assert!(std::mem::size_of::<PropertyMap>() <= 112);
    assert!(std::mem::size_of::<Value>() <= 112);
}
