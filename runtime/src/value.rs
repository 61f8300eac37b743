//! Values as the store holds them, and the conversions from and to Rust types.

use std::fmt;
use std::ops::Deref;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::entity::Schema;
pub use crate::stored::{StoredValue, StoredWriter};
use crate::{Entity, Error, Key, KeyId, KeyName, RawKey};

pub use crate::map::PropertyMap;

/// One stored property: its value and whether it is excluded from indexes (R-I1).
#[derive(Clone, Debug, PartialEq)]
pub struct Property {
    /// The value; an array holds one value per element.
    pub value: Value,
    /// Excluded properties (and everything inside them) cannot be filtered, ordered or projected on.
    pub excluded: bool,
}

impl Property {
    /// An indexed property.
    pub fn indexed(value: Value) -> Property {
        Property {
            value,
            excluded: false,
        }
    }

    /// A property excluded from indexes.
    pub fn excluded(value: Value) -> Property {
        Property {
            value,
            excluded: true,
        }
    }
}

/// A stored value: every type the service knows.
#[derive(Clone, Debug, PartialEq)]
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
        }
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
        Error::Decode {
            kind: kind.to_owned(),
            property: format!("{property}{}", self.path),
            expected: self.expected,
            found: self.found,
        }
    }
}

/// A Rust type that can be stored as a property value.
///
/// Implemented for the std types (`bool`, integers up to 64 bits, floats, `String`,
/// `Option`, `Vec`, `Box`), for [`Timestamp`], [`Blob`], [`GeoPoint`], [`Key`], [`RawKey`],
/// [`Value`], and by `#[derive(Entity)]` for structs without a `#[key]` (embedded entities).
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be stored as a property value",
    label = "not a property type",
    note = "use bool, an integer, f64, String, Timestamp, Blob, GeoPoint, Key<E>, an Option or Vec of those, \
            or a struct deriving `Entity` without `#[key]` (an embedded entity)"
)]
pub trait PropertyType: Sized {
    /// What an equality or range filter compares against: `Self`, or the element type of an array.
    type Operand: PropertyType;

    /// Whether stored values grow with time ([`Increasing`]: timestamps) or not ([`Steady`]).
    /// An indexed field of an increasing type must be acknowledged (R-I3).
    type Growth: Growth;

    /// The schema of an embedded entity type, `None` for plain values.
    const EMBEDDED: Option<&'static Schema> = None;

    /// The stored form.
    fn to_value(&self) -> Value;

    /// Reads the stored form back.
    fn from_value(value: Value) -> Result<Self, DecodeError>;

    /// Reads a value a projection returned: an *index value*, which the service gives in the
    /// index's type (a timestamp as its integer of microseconds, bytes as a string). Types
    /// whose index form differs accept it here; the others read it as a stored value.
    fn from_index_value(value: Value) -> Result<Self, DecodeError> {
        Self::from_value(value)
    }

    /// Writes the value in the embedded engine's stored form, without building a [`Value`].
    /// The default goes through [`to_value`](PropertyType::to_value). Not a public API.
    #[doc(hidden)]
    fn write_stored(&self, w: &mut StoredWriter<'_>) {
        w.value(&self.to_value());
    }

    /// Reads the value from the embedded engine's stored form. The default goes through
    /// [`from_value`](PropertyType::from_value). Not a public API.
    #[doc(hidden)]
    fn read_stored(value: StoredValue<'_>) -> Result<Self, DecodeError> {
        Self::from_value(value.to_value())
    }

    /// The value of a property the entity does not have (an error, except for `Option` and `Vec`).
    fn from_missing() -> Result<Self, DecodeError> {
        Err(DecodeError {
            path: String::new(),
            expected: std::any::type_name::<Self>().to_owned(),
            found: "no such property".to_owned(),
        })
    }
}

/// How the values of a property type behave over time: [`Steady`] or [`Increasing`].
pub trait Growth: sealed::Growth {}

/// Values that do not grow with time: indexing them creates no hotspot.
#[derive(Debug, Clone, Copy)]
pub enum Steady {}

/// Values that grow with time, such as timestamps: every new entity writes at the end of
/// the property's index, one hot tablet (R-I3).
#[derive(Debug, Clone, Copy)]
pub enum Increasing {}

impl Growth for Steady {}
impl Growth for Increasing {}

mod sealed {
    pub trait Growth {}
    impl Growth for super::Steady {}
    impl Growth for super::Increasing {}
    pub trait Shape {}
    impl Shape for super::Flat {}
    impl Shape for super::WholeEntity {}
}

/// Implemented by [`Steady`] only: what an indexed field's [`PropertyType::Growth`] must be
/// unless the field acknowledges the hotspot (R-I3).
#[diagnostic::on_unimplemented(
    message = "an indexed timestamp makes its index a write hotspot [R-I3]",
    label = "indexed, and increasing with time",
    note = "every new entity writes its timestamp at the end of the property's index, so all writes of the kind \
            land on one tablet; at high write rates that tablet limits the whole kind",
    note = "choose one: `#[exclude_from_index]` if the field is never queried; `#[ttl]` if it is an expiry time; \
            `#[sharded_index(n)]` to index it behind n shard prefixes and query it with the generated helper; \
            or `#[index(monotonic)]` to accept the hotspot (low write rates)"
)]
pub trait Indexable: Growth {}
impl Indexable for Steady {}

/// A property type as a projection query returns it (R-Q2): a plain value, or an array, whose
/// projection returns one row per element ([`Projected`](Projectable::Projected) is then the
/// element type). Embedded entities are not indexed as whole values: their
/// [`Shape`](Projectable::Shape) is [`WholeEntity`], which cannot be projected.
pub trait Projectable: PropertyType {
    /// What one projected row holds for this property.
    type Projected: PropertyType;
    /// [`Flat`] values can be projected, a [`WholeEntity`] cannot.
    type Shape: Shape;
}

/// Whether a property type can be projected: [`Flat`] or [`WholeEntity`].
pub trait Shape: sealed::Shape {}

/// A plain value (or an array of them): it has index entries, so it can be projected.
#[derive(Debug, Clone, Copy)]
pub enum Flat {}

/// An embedded entity: indexed only through its properties (`outer.inner`), so it cannot be
/// projected as a whole.
#[derive(Debug, Clone, Copy)]
pub enum WholeEntity {}

impl Shape for Flat {}
impl Shape for WholeEntity {}

/// Implemented by [`Flat`] only: what a projected field's [`Projectable::Shape`] must be.
#[diagnostic::on_unimplemented(
    message = "an embedded entity cannot be projected [R-Q2]",
    label = "an embedded entity",
    note = "an embedded entity has no index entries of its own, only its properties do (`outer.inner`); \
            a projection reads its values from the index, so list plain properties only"
)]
pub trait Projects: Shape {}
impl Projects for Flat {}

macro_rules! projectable {
    ($($t:ty),* $(,)?) => {$(
        impl Projectable for $t {
            type Projected = $t;
            type Shape = Flat;
        }
    )*};
}
projectable!(
    bool, i8, i16, i32, i64, u8, u16, u32, f32, f64, String, Blob, GeoPoint, RawKey, Timestamp,
    KeyId, KeyName, Value
);

impl<E: Entity> Projectable for Key<E> {
    type Projected = Key<E>;
    type Shape = Flat;
}

impl<T: Projectable> Projectable for Option<T> {
    type Projected = Option<T::Projected>;
    type Shape = T::Shape;
}

impl<T: Projectable> Projectable for Vec<T> {
    type Projected = T::Projected;
    type Shape = T::Shape;
}

impl<T: Projectable> Projectable for Box<T> {
    type Projected = T::Projected;
    type Shape = T::Shape;
}

macro_rules! integer_property {
    ($($t:ty),*) => {$(
        impl PropertyType for $t {
            type Operand = $t;
            type Growth = Steady;
            fn to_value(&self) -> Value {
                Value::Integer(i64::from(*self))
            }
            fn write_stored(&self, w: &mut StoredWriter<'_>) {
                w.integer(i64::from(*self));
            }
            fn from_value(value: Value) -> Result<Self, DecodeError> {
                match value {
                    Value::Integer(i) => <$t>::try_from(i).map_err(|_| DecodeError {
                        path: String::new(),
                        expected: concat!("an integer in the range of ", stringify!($t)).to_owned(),
                        found: format!("integer {i}"),
                    }),
                    other => Err(DecodeError::mismatch("integer", &other)),
                }
            }
        }
    )*};
}
integer_property!(i8, i16, i32, i64, u8, u16, u32);

macro_rules! simple_property {
    ($($t:ty => $variant:ident, $expected:literal);* $(;)?) => {$(
        impl PropertyType for $t {
            type Operand = $t;
            type Growth = Steady;
            fn to_value(&self) -> Value {
                Value::$variant(self.clone().into())
            }
            fn from_value(value: Value) -> Result<Self, DecodeError> {
                match value {
                    Value::$variant(v) => Ok(v.into()),
                    other => Err(DecodeError::mismatch($expected, &other)),
                }
            }
        }
    )*};
}
simple_property! {
    bool => Boolean, "boolean";
    f64 => Double, "double";
    GeoPoint => GeoPoint, "geo point";
    RawKey => Key, "key";
}

impl PropertyType for String {
    type Operand = String;
    type Growth = Steady;
    fn to_value(&self) -> Value {
        Value::String(self.clone())
    }
    fn from_value(value: Value) -> Result<Self, DecodeError> {
        match value {
            Value::String(s) => Ok(s),
            other => Err(DecodeError::mismatch("string", &other)),
        }
    }
    fn write_stored(&self, w: &mut StoredWriter<'_>) {
        w.string(self);
    }
    fn read_stored(value: StoredValue<'_>) -> Result<Self, DecodeError> {
        match value.as_str() {
            Some(s) => Ok(s.to_owned()),
            None => Self::from_value(value.to_value()),
        }
    }
}

impl PropertyType for Blob {
    type Operand = Blob;
    type Growth = Steady;
    fn to_value(&self) -> Value {
        Value::Blob(self.clone())
    }
    fn from_value(value: Value) -> Result<Self, DecodeError> {
        match value {
            Value::Blob(b) => Ok(b),
            other => Err(DecodeError::mismatch("blob", &other)),
        }
    }
    fn write_stored(&self, w: &mut StoredWriter<'_>) {
        w.blob(self);
    }
    fn read_stored(value: StoredValue<'_>) -> Result<Self, DecodeError> {
        match value.as_blob() {
            Some(b) => Ok(Blob::from(b)),
            None => Self::from_value(value.to_value()),
        }
    }
    fn from_index_value(value: Value) -> Result<Self, DecodeError> {
        match value {
            // The index keeps strings and byte strings alike.
            Value::String(s) => Ok(Blob::from(s.into_bytes())),
            other => Self::from_value(other),
        }
    }
}

impl PropertyType for f32 {
    type Operand = f32;
    type Growth = Steady;
    fn to_value(&self) -> Value {
        Value::Double(f64::from(*self))
    }
    fn from_value(value: Value) -> Result<Self, DecodeError> {
        match value {
            // Narrowing is the point of an f32 field; NaN and infinities survive it.
            #[allow(clippy::cast_possible_truncation)]
            Value::Double(d) => Ok(d as f32),
            other => Err(DecodeError::mismatch("double", &other)),
        }
    }
}

impl PropertyType for Timestamp {
    type Operand = Timestamp;
    type Growth = Increasing;
    fn to_value(&self) -> Value {
        Value::Timestamp(*self)
    }
    fn write_stored(&self, w: &mut StoredWriter<'_>) {
        w.timestamp(*self);
    }
    fn from_index_value(value: Value) -> Result<Self, DecodeError> {
        match value {
            Value::Integer(micros) => Ok(Timestamp::from_micros(micros)),
            other => Self::from_value(other),
        }
    }
    fn from_value(value: Value) -> Result<Self, DecodeError> {
        match value {
            Value::Timestamp(t) => Ok(t),
            other => Err(DecodeError::mismatch("timestamp", &other)),
        }
    }
}

impl PropertyType for KeyId {
    type Operand = KeyId;
    type Growth = Steady;
    fn to_value(&self) -> Value {
        Value::Integer(self.get())
    }
    fn from_value(value: Value) -> Result<Self, DecodeError> {
        match value {
            Value::Integer(i) => KeyId::new(i).map_err(|_| DecodeError {
                path: String::new(),
                expected: "a positive id".to_owned(),
                found: format!("integer {i}"),
            }),
            other => Err(DecodeError::mismatch("integer", &other)),
        }
    }
}

impl PropertyType for KeyName {
    type Operand = KeyName;
    type Growth = Steady;
    fn to_value(&self) -> Value {
        Value::String(self.as_str().to_owned())
    }
    fn from_value(value: Value) -> Result<Self, DecodeError> {
        match value {
            Value::String(s) => KeyName::new(s).map_err(|e| DecodeError {
                path: String::new(),
                expected: "a valid key name".to_owned(),
                found: format!("{e}"),
            }),
            other => Err(DecodeError::mismatch("string", &other)),
        }
    }
}

impl<E: Entity> PropertyType for Key<E> {
    type Operand = Key<E>;
    type Growth = Steady;
    fn to_value(&self) -> Value {
        Value::Key(self.raw().clone())
    }
    fn write_stored(&self, w: &mut StoredWriter<'_>) {
        w.key(self.raw());
    }
    fn from_value(value: Value) -> Result<Self, DecodeError> {
        match value {
            Value::Key(raw) => {
                let found = format!("a key of kind `{}`", raw.kind());
                Key::from_raw(raw).map_err(|_| DecodeError {
                    path: String::new(),
                    expected: format!("a key of kind `{}`", E::KIND),
                    found,
                })
            }
            other => Err(DecodeError::mismatch(
                format!("a key of kind `{}`", E::KIND),
                &other,
            )),
        }
    }
}

impl PropertyType for Value {
    type Operand = Value;
    type Growth = Steady;
    fn to_value(&self) -> Value {
        self.clone()
    }
    fn from_value(value: Value) -> Result<Self, DecodeError> {
        Ok(value)
    }
    fn from_missing() -> Result<Self, DecodeError> {
        Ok(Value::Null)
    }
}

impl<T: PropertyType> PropertyType for Option<T> {
    type Operand = T::Operand;
    type Growth = T::Growth;
    const EMBEDDED: Option<&'static Schema> = T::EMBEDDED;
    fn to_value(&self) -> Value {
        match self {
            Some(v) => v.to_value(),
            None => Value::Null,
        }
    }
    fn from_value(value: Value) -> Result<Self, DecodeError> {
        match value {
            Value::Null => Ok(None),
            other => T::from_value(other).map(Some),
        }
    }
    fn write_stored(&self, w: &mut StoredWriter<'_>) {
        match self {
            Some(v) => v.write_stored(w),
            None => w.null(),
        }
    }
    fn read_stored(value: StoredValue<'_>) -> Result<Self, DecodeError> {
        match value.is_null() {
            true => Ok(None),
            false => T::read_stored(value).map(Some),
        }
    }
    fn from_index_value(value: Value) -> Result<Self, DecodeError> {
        match value {
            Value::Null => Ok(None),
            other => T::from_index_value(other).map(Some),
        }
    }
    fn from_missing() -> Result<Self, DecodeError> {
        Ok(None)
    }
}

impl<T: PropertyType> PropertyType for Vec<T> {
    type Operand = T::Operand;
    type Growth = T::Growth;
    const EMBEDDED: Option<&'static Schema> = T::EMBEDDED;
    fn to_value(&self) -> Value {
        Value::Array(self.iter().map(T::to_value).collect())
    }
    fn from_value(value: Value) -> Result<Self, DecodeError> {
        match value {
            Value::Array(values) => values
                .into_iter()
                .enumerate()
                .map(|(i, v)| T::from_value(v).map_err(|e| e.within(&format!("[{i}]"))))
                .collect(),
            other => Err(DecodeError::mismatch("array", &other)),
        }
    }
    fn write_stored(&self, w: &mut StoredWriter<'_>) {
        w.array(self.len());
        self.iter().for_each(|v| v.write_stored(w));
    }
    fn read_stored(value: StoredValue<'_>) -> Result<Self, DecodeError> {
        let (Some(elements), Some(len)) = (value.elements(), value.array_len()) else {
            return Self::from_value(value.to_value());
        };
        // Sized up front: collecting through `Result` would grow the vector step by step.
        let mut out = Vec::with_capacity(len.min(4096));
        for (i, v) in elements.enumerate() {
            out.push(T::read_stored(v).map_err(|e| e.within(&format!("[{i}]")))?);
        }
        Ok(out)
    }
    fn from_missing() -> Result<Self, DecodeError> {
        // The service drops empty arrays from some clients' writes: missing reads as empty.
        Ok(Vec::new())
    }
}

impl<T: PropertyType> PropertyType for Box<T> {
    type Operand = T::Operand;
    type Growth = T::Growth;
    const EMBEDDED: Option<&'static Schema> = T::EMBEDDED;
    fn to_value(&self) -> Value {
        (**self).to_value()
    }
    fn from_value(value: Value) -> Result<Self, DecodeError> {
        T::from_value(value).map(Box::new)
    }
    fn write_stored(&self, w: &mut StoredWriter<'_>) {
        (**self).write_stored(w);
    }
    fn read_stored(value: StoredValue<'_>) -> Result<Self, DecodeError> {
        T::read_stored(value).map(Box::new)
    }
    fn from_index_value(value: Value) -> Result<Self, DecodeError> {
        T::from_index_value(value).map(Box::new)
    }
    fn from_missing() -> Result<Self, DecodeError> {
        T::from_missing().map(Box::new)
    }
}

/// A point in time with microsecond precision, as the service stores it.
///
/// ```
/// use datastore_entity::Timestamp;
/// let t = Timestamp::from_micros(1_700_000_000_000_000);
/// assert_eq!(t.as_micros(), 1_700_000_000_000_000);
/// assert_eq!(t.to_string(), "2023-11-14T22:13:20.000000Z");
/// ```
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default)]
pub struct Timestamp(i64);

impl Timestamp {
    /// Microseconds since the Unix epoch (negative before it).
    pub const fn from_micros(micros: i64) -> Timestamp {
        Timestamp(micros)
    }

    /// Microseconds since the Unix epoch.
    pub const fn as_micros(self) -> i64 {
        self.0
    }

    /// The current time, truncated to microseconds.
    pub fn now() -> Timestamp {
        SystemTime::now().into()
    }
}

impl From<SystemTime> for Timestamp {
    /// Times beyond ±292,000 years saturate.
    fn from(time: SystemTime) -> Timestamp {
        let micros = |d: Duration| i64::try_from(d.as_micros()).unwrap_or(i64::MAX);
        match time.duration_since(UNIX_EPOCH) {
            Ok(after) => Timestamp(micros(after)),
            Err(before) => Timestamp(-micros(before.duration())),
        }
    }
}

impl From<Timestamp> for SystemTime {
    fn from(t: Timestamp) -> SystemTime {
        let magnitude = Duration::from_micros(t.0.unsigned_abs());
        if t.0 >= 0 {
            UNIX_EPOCH + magnitude
        } else {
            UNIX_EPOCH - magnitude
        }
    }
}

impl fmt::Display for Timestamp {
    /// RFC 3339 in UTC, with microseconds.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let days = self.0.div_euclid(86_400_000_000);
        let micros_of_day = self.0.rem_euclid(86_400_000_000);
        // Howard Hinnant's civil-from-days.
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z.rem_euclid(146_097);
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = doy - (153 * mp + 2) / 5 + 1;
        let month = if mp < 10 { mp + 3 } else { mp - 9 };
        let year = yoe + era * 400 + i64::from(month <= 2);
        let secs = micros_of_day / 1_000_000;
        write!(
            f,
            "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:06}Z",
            secs / 3600,
            secs / 60 % 60,
            secs % 60,
            micros_of_day % 1_000_000
        )
    }
}

/// Bytes stored as a byte string, never as text (R-P1).
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default)]
pub struct Blob(Vec<u8>);

impl Blob {
    /// The bytes, by value.
    pub fn into_vec(self) -> Vec<u8> {
        self.0
    }
}

impl From<Vec<u8>> for Blob {
    fn from(bytes: Vec<u8>) -> Blob {
        Blob(bytes)
    }
}

impl From<&[u8]> for Blob {
    fn from(bytes: &[u8]) -> Blob {
        Blob(bytes.to_vec())
    }
}

impl From<Blob> for Vec<u8> {
    fn from(blob: Blob) -> Vec<u8> {
        blob.0
    }
}

impl Deref for Blob {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

/// A latitude/longitude pair in degrees, always within range.
///
/// ```
/// use datastore_entity::GeoPoint;
/// assert_eq!(GeoPoint::new(48.85, 2.35).unwrap().latitude(), 48.85);
/// assert!(GeoPoint::new(91.0, 0.0).is_err());
/// ```
#[derive(Clone, Copy, PartialEq, Debug)]
pub struct GeoPoint {
    lat: f64,
    lng: f64,
}

impl GeoPoint {
    /// Validates latitude in `-90..=90` and longitude in `-180..=180`.
    pub fn new(lat: f64, lng: f64) -> Result<GeoPoint, Error> {
        if (-90.0..=90.0).contains(&lat) && (-180.0..=180.0).contains(&lng) {
            Ok(GeoPoint { lat, lng })
        } else {
            Err(Error::InvalidGeoPoint { lat, lng })
        }
    }

    /// The latitude, in degrees.
    pub fn latitude(&self) -> f64 {
        self.lat
    }

    /// The longitude, in degrees.
    pub fn longitude(&self) -> f64 {
        self.lng
    }
}

/// The service's order of values, also across types, as Google's Datastore emulator orders
/// them: null; integers and timestamps (together, by number and microseconds); booleans;
/// strings and byte strings (together, by bytes); doubles (NaN last); geo points; keys;
/// then arrays and embedded entities (which the service does not index as whole values).
pub fn compare_values(a: &Value, b: &Value) -> std::cmp::Ordering {
    fn rank(v: &Value) -> u8 {
        match v {
            Value::Null => 0,
            Value::Integer(_) | Value::Timestamp(_) => 1,
            Value::Boolean(_) => 2,
            Value::String(_) | Value::Blob(_) => 3,
            Value::Double(_) => 4,
            Value::GeoPoint(_) => 5,
            Value::Key(_) => 6,
            Value::Array(_) => 7,
            Value::Entity(_) => 8,
        }
    }
    fn fixed_point(v: &Value) -> Option<i64> {
        match v {
            Value::Integer(i) => Some(*i),
            Value::Timestamp(t) => Some(t.as_micros()),
            _ => None,
        }
    }
    fn bytes(v: &Value) -> Option<&[u8]> {
        match v {
            Value::String(s) => Some(s.as_bytes()),
            Value::Blob(b) => Some(b),
            _ => None,
        }
    }
    if let (Some(x), Some(y)) = (fixed_point(a), fixed_point(b)) {
        return x.cmp(&y);
    }
    if let (Some(x), Some(y)) = (bytes(a), bytes(b)) {
        return x.cmp(y);
    }
    match (a, b) {
        (Value::Boolean(x), Value::Boolean(y)) => x.cmp(y),
        (Value::Double(x), Value::Double(y)) => compare_doubles(*x, *y),
        (Value::Key(x), Value::Key(y)) => x.cmp(y),
        (Value::GeoPoint(x), Value::GeoPoint(y)) => {
            compare_doubles(x.lat, y.lat).then_with(|| compare_doubles(x.lng, y.lng))
        }
        (Value::Array(x), Value::Array(y)) => x
            .iter()
            .zip(y)
            .map(|(a, b)| compare_values(a, b))
            .find(|o| o.is_ne())
            .unwrap_or_else(|| x.len().cmp(&y.len())),
        (Value::Entity(x), Value::Entity(y)) => x
            .iter()
            .zip(y)
            .map(|((an, av), (bn, bv))| {
                an.cmp(bn)
                    .then_with(|| compare_values(&av.value, &bv.value))
            })
            .find(|o| o.is_ne())
            .unwrap_or_else(|| x.len().cmp(&y.len())),
        _ => rank(a).cmp(&rank(b)),
    }
}

/// Doubles in numeric order with NaN last (and equal to itself); -0.0 equals 0.0.
fn compare_doubles(x: f64, y: f64) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    match (x.is_nan(), y.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        // Neither is NaN, so the partial order is total here.
        (false, false) => x.partial_cmp(&y).unwrap_or(Ordering::Equal),
    }
}
