//! [`PropertyType`]: the Rust types that can be stored as property values, and the markers
//! the derive's checks read off them (R-I3 growth, R-Q2 projection shape).

use crate::model::codec::{DOUBLE, INTEGER, TIMESTAMP};
use crate::model::key::{KeyId, RawKey};
use crate::model::name::KeyName;
use crate::model::scalar::{Blob, GeoPoint, Timestamp, Vector};
use crate::model::schema::Schema;
use crate::model::sink::ValueWriter;
use crate::model::stored::{StoredAt, ValueRef};
use crate::model::value::{DecodeError, Value};
use crate::model::views::ValueView;

/// A Rust type that can be stored as a property value.
///
/// Implemented for the std types (`bool`, integers up to 64 bits, floats, `String`,
/// `Option`, `Vec`, `Box`), for [`Timestamp`], [`Blob`], [`GeoPoint`], [`Key`](crate::model::key::Key), [`RawKey`],
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

    /// Whether the value is stored as an array (a `Vec`): a path into an embedded entity
    /// does not reach through one.
    const REPEATED: bool = false;

    /// The value, as the store holds it.
    fn to_value(&self) -> Value;

    /// Reads a value the store holds back.
    fn from_value(value: Value) -> Result<Self, DecodeError>;

    /// Reads a value a projection returned: an *index value*, which the service gives in the
    /// index's type (a timestamp as its integer of microseconds, bytes as a string). Types
    /// whose index form differs accept it here; the others read it as a stored value.
    fn from_index_value(value: Value) -> Result<Self, DecodeError> {
        Self::from_value(value)
    }

    /// Writes the value into the form the entity is built in — the embedded engine's stored
    /// form, or the service's wire form — without building a [`Value`]. The default goes
    /// through [`to_value`](PropertyType::to_value). Not a public API.
    #[doc(hidden)]
    fn write_value(&self, w: &mut ValueWriter<'_>) {
        w.value(&self.to_value());
    }

    /// Reads the value where it lies, in whichever form the entity was read in (the stored
    /// form, the wire form, or decoded). The default goes through
    /// [`from_value`](PropertyType::from_value). Not a public API.
    #[doc(hidden)]
    #[inline]
    fn read_value(value: ValueRef<'_>) -> Result<Self, DecodeError> {
        Self::from_value(value.to_value()?)
    }

    /// Reads the stored value at `at` in one pass, checking it as it reads it, when it is of
    /// this type's own kind and reads without a mistake (what the derive's one-pass read of
    /// the stored form tries first), and what follows it; `None` for anything else, which is
    /// then checked and read through [`PropertyType::read_value`] (the same value, the same
    /// mistakes). Not a public API.
    #[doc(hidden)]
    #[inline]
    fn read_stored(at: StoredAt<'_>) -> Option<(Self, StoredAt<'_>)> {
        let _ = at;
        None
    }

    /// The value of a property the entity does not have (an error, except for `Option` and `Vec`).
    fn from_missing() -> Result<Self, DecodeError> {
        Err(DecodeError {
            path: String::new(),
            expected: short_type_name(std::any::type_name::<Self>()),
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
            fn write_value(&self, w: &mut ValueWriter<'_>) {
                w.integer(i64::from(*self));
            }
            #[inline]
            fn read_stored(at: StoredAt<'_>) -> Option<(Self, StoredAt<'_>)> {
                let (n, rest) = at.word(INTEGER)?;
                Some((<$t>::try_from(n.cast_signed()).ok()?, rest))
            }
            #[inline]
            fn read_value(value: ValueRef<'_>) -> Result<Self, DecodeError> {
                if let ValueView::Integer(i) = value.0
                    && let Ok(n) = <$t>::try_from(i)
                {
                    return Ok(n);
                }
                Self::from_value(value.to_value()?)
            }
            #[inline]
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
            #[inline]
            fn from_value(value: Value) -> Result<Self, DecodeError> {
                match &value {
                    Value::$variant(v) => Ok(v.clone().into()),
                    other => Err(DecodeError::mismatch($expected, other)),
                }
            }
        }
    )*};
}
impl PropertyType for bool {
    type Operand = bool;
    type Growth = Steady;
    fn to_value(&self) -> Value {
        Value::Boolean(*self)
    }
    fn write_value(&self, w: &mut ValueWriter<'_>) {
        w.boolean(*self);
    }
    #[inline]
    fn read_stored(at: StoredAt<'_>) -> Option<(Self, StoredAt<'_>)> {
        at.boolean()
    }
    #[inline]
    fn read_value(value: ValueRef<'_>) -> Result<Self, DecodeError> {
        match value.0 {
            ValueView::Boolean(b) => Ok(b),
            _ => Self::from_value(value.to_value()?),
        }
    }
    #[inline]
    fn from_value(value: Value) -> Result<Self, DecodeError> {
        match value {
            Value::Boolean(b) => Ok(b),
            other => Err(DecodeError::mismatch("boolean", &other)),
        }
    }
}

simple_property! {
    GeoPoint => GeoPoint, "geo point";
    Vector => Vector, "vector";
    RawKey => Key, "key";
}

impl PropertyType for String {
    type Operand = String;
    type Growth = Steady;
    fn to_value(&self) -> Value {
        Value::String(self.clone())
    }
    #[inline]
    fn from_value(mut value: Value) -> Result<Self, DecodeError> {
        match &mut value {
            Value::String(s) => Ok(std::mem::take(s)),
            other => Err(DecodeError::mismatch("string", other)),
        }
    }
    fn write_value(&self, w: &mut ValueWriter<'_>) {
        w.string(self);
    }
    #[inline]
    fn read_stored(at: StoredAt<'_>) -> Option<(Self, StoredAt<'_>)> {
        at.string().map(|(s, rest)| (s.to_owned(), rest))
    }
    #[inline]
    fn read_value(value: ValueRef<'_>) -> Result<Self, DecodeError> {
        match value.as_str() {
            Some(s) => Ok(s.to_owned()),
            None => Self::from_value(value.to_value()?),
        }
    }
}

impl PropertyType for Blob {
    type Operand = Blob;
    type Growth = Steady;
    fn to_value(&self) -> Value {
        Value::Blob(self.clone())
    }
    #[inline]
    fn from_value(mut value: Value) -> Result<Self, DecodeError> {
        match &mut value {
            Value::Blob(b) => Ok(std::mem::take(b)),
            other => Err(DecodeError::mismatch("blob", other)),
        }
    }
    fn write_value(&self, w: &mut ValueWriter<'_>) {
        w.blob(self);
    }
    #[inline]
    fn read_value(value: ValueRef<'_>) -> Result<Self, DecodeError> {
        match value.as_blob() {
            Some(b) => Ok(Blob::from(b)),
            None => Self::from_value(value.to_value()?),
        }
    }
    fn from_index_value(mut value: Value) -> Result<Self, DecodeError> {
        match &mut value {
            // The index keeps strings and byte strings alike.
            Value::String(s) => Ok(Blob::from(std::mem::take(s).into_bytes())),
            _ => Self::from_value(value),
        }
    }
}

impl PropertyType for f64 {
    type Operand = f64;
    type Growth = Steady;
    fn to_value(&self) -> Value {
        Value::Double(*self)
    }
    fn write_value(&self, w: &mut ValueWriter<'_>) {
        w.double(*self);
    }
    #[inline]
    fn read_stored(at: StoredAt<'_>) -> Option<(Self, StoredAt<'_>)> {
        at.word(DOUBLE).map(|(n, rest)| (f64::from_bits(n), rest))
    }
    #[inline]
    fn read_value(value: ValueRef<'_>) -> Result<Self, DecodeError> {
        match value.0 {
            ValueView::Double(d) => Ok(d),
            _ => Self::from_value(value.to_value()?),
        }
    }
    #[inline]
    fn from_value(value: Value) -> Result<Self, DecodeError> {
        match value {
            Value::Double(d) => Ok(d),
            // An integer where the struct now has a floating-point field reads as that number
            // (as NDB does): widening, exact up to 2^53.
            #[allow(clippy::cast_precision_loss)]
            Value::Integer(i) => Ok(i as f64),
            other => Err(DecodeError::mismatch("double", &other)),
        }
    }
}

impl PropertyType for f32 {
    type Operand = f32;
    type Growth = Steady;
    fn to_value(&self) -> Value {
        Value::Double(f64::from(*self))
    }
    #[inline]
    fn from_value(value: Value) -> Result<Self, DecodeError> {
        match value {
            // Narrowing is the point of an f32 field; NaN and infinities survive it.
            #[allow(clippy::cast_possible_truncation)]
            Value::Double(d) => Ok(d as f32),
            // An integer stored where the field is now a float reads as that number.
            #[allow(clippy::cast_precision_loss)]
            Value::Integer(i) => Ok(i as f32),
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
    fn write_value(&self, w: &mut ValueWriter<'_>) {
        w.timestamp(*self);
    }
    #[inline]
    fn read_stored(at: StoredAt<'_>) -> Option<(Self, StoredAt<'_>)> {
        let (n, rest) = at.word(TIMESTAMP)?;
        Some((Timestamp::checked(n.cast_signed())?, rest))
    }
    #[inline]
    fn read_value(value: ValueRef<'_>) -> Result<Self, DecodeError> {
        match value.0 {
            ValueView::Timestamp(t) => Ok(t),
            _ => Self::from_value(value.to_value()?),
        }
    }
    fn from_index_value(value: Value) -> Result<Self, DecodeError> {
        match value {
            Value::Integer(micros) => Ok(Timestamp::from_micros(micros)),
            other => Self::from_value(other),
        }
    }
    #[inline]
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
    #[inline]
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
    #[inline]
    fn from_value(mut value: Value) -> Result<Self, DecodeError> {
        match &mut value {
            Value::String(s) => KeyName::new(std::mem::take(s)).map_err(|e| DecodeError {
                path: String::new(),
                expected: "a valid key name".to_owned(),
                found: format!("{e}"),
            }),
            other => Err(DecodeError::mismatch("string", other)),
        }
    }
}
impl PropertyType for Value {
    type Operand = Value;
    type Growth = Steady;
    fn to_value(&self) -> Value {
        self.clone()
    }
    fn write_value(&self, w: &mut ValueWriter<'_>) {
        w.value(self);
    }
    #[inline]
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
    const REPEATED: bool = T::REPEATED;
    fn to_value(&self) -> Value {
        match self {
            Some(v) => v.to_value(),
            None => Value::Null,
        }
    }
    #[inline]
    fn from_value(value: Value) -> Result<Self, DecodeError> {
        match value {
            Value::Null => Ok(None),
            other => T::from_value(other).map(Some),
        }
    }
    fn write_value(&self, w: &mut ValueWriter<'_>) {
        match self {
            Some(v) => v.write_value(w),
            None => w.null(),
        }
    }
    #[inline]
    fn read_stored(at: StoredAt<'_>) -> Option<(Self, StoredAt<'_>)> {
        match at.null() {
            Some(rest) => Some((None, rest)),
            None => T::read_stored(at).map(|(v, rest)| (Some(v), rest)),
        }
    }
    #[inline]
    fn read_value(value: ValueRef<'_>) -> Result<Self, DecodeError> {
        match value.is_null() {
            true => Ok(None),
            false => T::read_value(value).map(Some),
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
    const REPEATED: bool = true;
    fn to_value(&self) -> Value {
        Value::Array(self.iter().map(T::to_value).collect())
    }
    #[inline]
    fn from_value(mut value: Value) -> Result<Self, DecodeError> {
        match &mut value {
            Value::Array(values) => std::mem::take(values)
                .into_iter()
                .enumerate()
                .map(|(i, v)| T::from_value(v).map_err(|e| e.within(&format!("[{i}]"))))
                .collect(),
            other => Err(DecodeError::mismatch("array", other)),
        }
    }
    fn write_value(&self, w: &mut ValueWriter<'_>) {
        w.array(self.len());
        self.iter().for_each(|v| v.write_value(w));
    }
    /// An array of values of `T`'s own kind, each read as it is checked (arrays of arrays
    /// are left to the general read, which checks their depth).
    fn read_stored(at: StoredAt<'_>) -> Option<(Self, StoredAt<'_>)> {
        if T::REPEATED {
            return None;
        }
        let (len, mut rest) = at.array()?;
        let mut out = Vec::with_capacity(len.min(4096));
        for _ in 0..len {
            let (v, after) = T::read_stored(rest)?;
            out.push(v);
            rest = after;
        }
        Some((out, rest))
    }
    #[inline]
    fn read_value(value: ValueRef<'_>) -> Result<Self, DecodeError> {
        let (Some(elements), Some(len)) = (value.elements(), value.array_len()) else {
            return Self::from_value(value.to_value()?);
        };
        // Sized up front: collecting through `Result` would grow the vector step by step.
        let mut out = Vec::with_capacity(len.min(4096));
        for (i, v) in elements.enumerate() {
            out.push(T::read_value(v).map_err(|e| e.within(&format!("[{i}]")))?);
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
    const REPEATED: bool = T::REPEATED;
    fn to_value(&self) -> Value {
        (**self).to_value()
    }
    #[inline]
    fn from_value(value: Value) -> Result<Self, DecodeError> {
        T::from_value(value).map(Box::new)
    }
    fn write_value(&self, w: &mut ValueWriter<'_>) {
        (**self).write_value(w);
    }
    #[inline]
    fn read_value(value: ValueRef<'_>) -> Result<Self, DecodeError> {
        T::read_value(value).map(Box::new)
    }
    fn from_index_value(value: Value) -> Result<Self, DecodeError> {
        T::from_index_value(value).map(Box::new)
    }
    fn from_missing() -> Result<Self, DecodeError> {
        T::from_missing().map(Box::new)
    }
}

/// A type whose values a `#[sharded_index(n)]` field can hold: timestamps and integers.
#[diagnostic::on_unimplemented(
    message = "`#[sharded_index]` needs a timestamp or an integer field, not `{Self}`",
    label = "cannot be sharded-indexed",
    note = "the companion property holds the value as fixed-width text whose order is the value's order"
)]
pub trait ShardIndexable: PropertyType {
    /// The value as an integer in the value's order (microseconds for a timestamp); `None`
    /// leaves the entity out of the sharded index (an `Option` holding `None`).
    fn sort_value(&self) -> Option<i64>;
}

macro_rules! integer_sort_value {
    ($($t:ty),*) => {$(
        impl ShardIndexable for $t {
            fn sort_value(&self) -> Option<i64> {
                Some(i64::from(*self))
            }
        }
    )*};
}
integer_sort_value!(i8, i16, i32, i64, u8, u16, u32);

impl ShardIndexable for Timestamp {
    fn sort_value(&self) -> Option<i64> {
        Some(self.as_micros())
    }
}

impl<T: ShardIndexable> ShardIndexable for Option<T> {
    fn sort_value(&self) -> Option<i64> {
        self.as_ref().and_then(T::sort_value)
    }
}

/// A type's name as a struct spells it: every path cut to its last segment
/// (`core::option::Option<alloc::string::String>` is `Option<String>`).
pub fn short_type_name(full: &str) -> String {
    let mut out = String::with_capacity(full.len());
    let mut segment = String::new();
    let mut chars = full.chars().peekable();
    while let Some(c) = chars.next() {
        if c == ':' && chars.peek() == Some(&':') {
            chars.next();
            segment.clear();
        } else if c.is_alphanumeric() || c == '_' {
            segment.push(c);
        } else {
            out.push_str(&segment);
            segment.clear();
            out.push(c);
        }
    }
    out.push_str(&segment);
    out
}

#[cfg(test)]
mod tests {
    use super::short_type_name;

    #[test]
    fn type_names_are_spelled_as_in_a_struct() {
        assert_eq!(short_type_name("alloc::string::String"), "String");
        assert_eq!(
            short_type_name("core::option::Option<alloc::vec::Vec<my::Address>>"),
            "Option<Vec<Address>>"
        );
        assert_eq!(short_type_name("(i64, [u8; 4])"), "(i64, [u8; 4])");
    }
}
