//! The runtime half of the derive: what its generated code calls (through `__private`, which
//! re-exports it). Not a public API.
//!
//! # One error per mistake
//!
//! Generated code uses each field's type in several places (writing, reading, the schema…).
//! If each use required `T: PropertyType`, a field of an unsupported type would be reported
//! once per use. Instead, the derive emits exactly one assertion per field
//! (`assert_indexed::<T>()`, `assert_key::<K>()`, …) at the field's type, and every other use
//! goes through a `Probe`: method resolution picks the real implementation when the bound
//! holds (a by-reference receiver matches `&Probe<T>` before `&&Probe<T>`), and otherwise a
//! fallback that type-checks for any `T`. The fallback never runs: the assertion makes the
//! crate fail to compile whenever it is chosen.

use std::marker::PhantomData;

use crate::error::Error;
use crate::model::entity::{Entity, KeyField};
use crate::model::key::{Key, KeyId, RawKey};
use crate::model::name::KeyName;
use crate::model::property_type::{Indexable, Projectable, Projects, PropertyType, ShardIndexable};
pub use crate::model::read_in_order::{
    ForeignInOrderReader, OnePass, ReadInOrder, foreign_in_order, map_in_order, stored_in_order,
};
use crate::model::scalar::{Blob, Timestamp};
use crate::model::schema::Schema;
use crate::model::value::{DecodeError, PropertyMap, Value};
use datastore_entity_names::{NameRole, check};

/// A stand-in for the field type `T`, whose methods dispatch to the real implementation when
/// `T` has the needed trait and to a never-run fallback otherwise (see the module docs).
pub struct Probe<T>(PhantomData<fn() -> T>);

impl<T> Probe<T> {
    /// The probe of `T`.
    pub const fn new() -> Self {
        Probe(PhantomData)
    }
}

impl<T> Default for Probe<T> {
    fn default() -> Self {
        Probe::new()
    }
}

/// Reads property `name` out of `properties` as a `T` (missing → `T::from_missing`).
pub fn take<T: PropertyType>(properties: &mut PropertyMap, name: &str) -> Result<T, DecodeError> {
    properties
        .take_as(name, T::read_value, T::from_value)
        .unwrap_or_else(T::from_missing)
}

/// Reads property `name` from `reader` (read in name order) as a `T`; an entity without it
/// gives `missing()` when there is a default, else `T::from_missing`.
pub fn read<T: PropertyType>(
    reader: &mut impl ReadInOrder,
    name: &str,
    missing: Option<fn() -> T>,
) -> Result<T, DecodeError> {
    reader.read_as(name, missing)
}

/// Reads property `name`, or (when the entity lacks it) the first of its former names
/// `aliases` it has; an entity with none of them gives `missing()` when there is a default.
pub fn take_with<T: PropertyType>(
    properties: &mut PropertyMap,
    name: &str,
    aliases: &[&str],
    missing: Option<fn() -> T>,
) -> Result<T, DecodeError> {
    std::iter::once(name)
        .chain(aliases.iter().copied())
        .find_map(|name| properties.take_as(name, T::read_value, T::from_value))
        .unwrap_or_else(|| missing.map_or_else(T::from_missing, |missing| Ok(missing())))
}

/// The value of an embedded entity (what the derive's `to_value` of an embedded struct
/// returns): its properties, built by `build` (see [`nested`]).
pub fn nested_entity(build: impl FnOnce() -> PropertyMap) -> Value {
    Value::Entity(nested(build))
}

/// The properties of an embedded entity, built by `build`. A value of a recursive type can
/// be nested deeper than the service allows (20 levels); past
/// [`MAX_NESTING`](crate::model::value::MAX_NESTING) `build` is not called and the entity is empty, so that
/// building stops where the stack is still shallow and the write is refused by the limits
/// check, naming the path.
pub fn nested(build: impl FnOnce() -> PropertyMap) -> PropertyMap {
    thread_local! {
        static DEPTH: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }
    struct Level;
    impl Drop for Level {
        fn drop(&mut self) {
            DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
        }
    }
    let depth = DEPTH.with(|d| {
        d.set(d.get() + 1);
        d.get()
    });
    let _level = Level;
    match depth > crate::model::value::MAX_NESTING {
        true => PropertyMap::new(),
        false => build(),
    }
}

/// Property values: writing, reading, and the embedded schema.
pub trait PropertyProbe<T> {
    /// Stores `value` under `name`.
    fn put(&self, properties: &mut PropertyMap, name: &'static str, value: &T, excluded: bool);
    /// Stores `value` under `name`, greater than every name put so far (see
    /// [`PropertyMap::put_next`]).
    fn put_next(&self, properties: &mut PropertyMap, name: &'static str, value: &T, excluded: bool);
    /// Reads property `name`.
    fn take(&self, properties: &mut PropertyMap, name: &str) -> Result<T, DecodeError>;
    /// Reads property `name`, a former name, or the default (see [`take_with`]).
    fn take_with(
        &self,
        properties: &mut PropertyMap,
        name: &str,
        aliases: &[&str],
        missing: Option<fn() -> T>,
    ) -> Result<T, DecodeError>;
    /// Reads property `name` of the entity `key` from a map read in name order, or the
    /// default (see [`read`]); a mistake names the entity and the property.
    fn read(
        &self,
        reader: &mut impl ReadInOrder,
        key: &RawKey,
        name: &str,
        missing: Option<fn() -> T>,
    ) -> Result<T, Error>;
    /// The schema of an embedded entity type.
    fn embedded(&self) -> Option<&'static Schema>;
    /// Whether the value is stored as an array.
    fn repeated(&self) -> bool;
}

impl<T: PropertyType> PropertyProbe<T> for Probe<T> {
    fn put(&self, properties: &mut PropertyMap, name: &'static str, value: &T, excluded: bool) {
        properties.put_with(name, excluded, |w| value.write_value(w));
    }
    #[inline]
    fn put_next(
        &self,
        properties: &mut PropertyMap,
        name: &'static str,
        value: &T,
        excluded: bool,
    ) {
        properties.put_next(name, excluded, |w| value.write_value(w));
    }
    fn take(&self, properties: &mut PropertyMap, name: &str) -> Result<T, DecodeError> {
        take(properties, name)
    }
    fn take_with(
        &self,
        properties: &mut PropertyMap,
        name: &str,
        aliases: &[&str],
        missing: Option<fn() -> T>,
    ) -> Result<T, DecodeError> {
        take_with(properties, name, aliases, missing)
    }
    #[inline]
    fn read(
        &self,
        reader: &mut impl ReadInOrder,
        key: &RawKey,
        name: &str,
        missing: Option<fn() -> T>,
    ) -> Result<T, Error> {
        read(reader, name, missing).map_err(|e| e.into_entity_error(key, name))
    }
    fn embedded(&self) -> Option<&'static Schema> {
        T::EMBEDDED
    }
    fn repeated(&self) -> bool {
        T::REPEATED
    }
}

/// Never runs: the field's assertion fails to compile when this is chosen.
pub trait PropertyFallback<T> {
    /// See [`PropertyProbe::put`].
    fn put(&self, _: &mut PropertyMap, _: &'static str, _: &T, _: bool) {
        unreachable!("the derive's assertion rejects this field type")
    }
    /// See [`PropertyProbe::put_next`].
    fn put_next(&self, _: &mut PropertyMap, _: &'static str, _: &T, _: bool) {
        unreachable!("the derive's assertion rejects this field type")
    }
    /// See [`PropertyProbe::take`].
    fn take(&self, _: &mut PropertyMap, _: &str) -> Result<T, DecodeError> {
        unreachable!("the derive's assertion rejects this field type")
    }
    /// See [`PropertyProbe::take_with`].
    fn take_with(
        &self,
        _: &mut PropertyMap,
        _: &str,
        _: &[&str],
        _: Option<fn() -> T>,
    ) -> Result<T, DecodeError> {
        unreachable!("the derive's assertion rejects this field type")
    }
    /// See [`PropertyProbe::read`].
    fn read(
        &self,
        _: &mut impl ReadInOrder,
        _: &RawKey,
        _: &str,
        _: Option<fn() -> T>,
    ) -> Result<T, Error> {
        unreachable!("the derive's assertion rejects this field type")
    }
    /// See [`PropertyProbe::embedded`].
    fn embedded(&self) -> Option<&'static Schema> {
        unreachable!("the derive's assertion rejects this field type")
    }
    /// See [`PropertyProbe::repeated`].
    fn repeated(&self) -> bool {
        unreachable!("the derive's assertion rejects this field type")
    }
}
impl<T> PropertyFallback<T> for &Probe<T> {}

/// A field that can hold bytes marked `#[blob]` (R-P1).
#[diagnostic::on_unimplemented(
    message = "`#[blob]` needs a `Vec<u8>` or `Option<Vec<u8>>` field, not `{Self}`",
    label = "not bytes",
    note = "use `#[blob]` only on byte vectors, or use the `Blob` type without `#[blob]`"
)]
pub trait BlobField: Sized {
    /// The stored form.
    fn to_blob(&self) -> Value;
    /// Reads the stored form back.
    fn from_blob(value: Option<Value>) -> Result<Self, DecodeError>;
}

impl BlobField for Vec<u8> {
    fn to_blob(&self) -> Value {
        Value::Blob(Blob::from(self.clone()))
    }
    fn from_blob(value: Option<Value>) -> Result<Self, DecodeError> {
        match value {
            // A projection returns bytes as the index holds them: a string, read back as bytes.
            Some(value) => Blob::from_index_value(value).map(Blob::into_vec),
            None => Blob::from_missing().map(Blob::into_vec),
        }
    }
}

impl BlobField for Option<Vec<u8>> {
    fn to_blob(&self) -> Value {
        self.as_ref().map_or(Value::Null, BlobField::to_blob)
    }
    fn from_blob(value: Option<Value>) -> Result<Self, DecodeError> {
        match value {
            None | Some(Value::Null) => Ok(None),
            value => Vec::<u8>::from_blob(value).map(Some),
        }
    }
}

/// Reads a `#[blob]` field.
pub fn take_blob<T: BlobField>(properties: &mut PropertyMap, name: &str) -> Result<T, DecodeError> {
    T::from_blob(properties.remove(name).map(|p| p.value))
}

/// Reads a `#[blob]` field under its name, a former name, or its default (as [`take_with`]).
pub fn take_blob_with<T: BlobField>(
    properties: &mut PropertyMap,
    name: &str,
    aliases: &[&str],
    missing: Option<fn() -> T>,
) -> Result<T, DecodeError> {
    take_value_with(properties, name, aliases, missing, T::from_blob)
}

/// The value under `name` or the first former name present, read by `read` (which gets
/// `None` when there is none and no default to use instead).
fn take_value_with<T>(
    properties: &mut PropertyMap,
    name: &str,
    aliases: &[&str],
    missing: Option<fn() -> T>,
    read: fn(Option<Value>) -> Result<T, DecodeError>,
) -> Result<T, DecodeError> {
    let found = std::iter::once(name)
        .chain(aliases.iter().copied())
        .find_map(|name| properties.remove(name));
    match (found, missing) {
        (None, Some(missing)) => Ok(missing()),
        (found, _) => read(found.map(|p| p.value)),
    }
}

/// `#[blob]` fields.
pub trait BlobProbe<T> {
    /// Stores the bytes under `name`.
    fn put_blob(&self, properties: &mut PropertyMap, name: &'static str, value: &T, excluded: bool);
    /// Reads the bytes of property `name`.
    fn take_blob(&self, properties: &mut PropertyMap, name: &str) -> Result<T, DecodeError>;
    /// Reads the bytes under `name`, a former name, or the default (see [`take_blob_with`]).
    fn take_blob_with(
        &self,
        properties: &mut PropertyMap,
        name: &str,
        aliases: &[&str],
        missing: Option<fn() -> T>,
    ) -> Result<T, DecodeError>;
}

impl<T: BlobField> BlobProbe<T> for Probe<T> {
    fn put_blob(
        &self,
        properties: &mut PropertyMap,
        name: &'static str,
        value: &T,
        excluded: bool,
    ) {
        let blob = value.to_blob();
        properties.put_with(name, excluded, |w| w.value(&blob));
    }
    fn take_blob(&self, properties: &mut PropertyMap, name: &str) -> Result<T, DecodeError> {
        take_blob(properties, name)
    }
    fn take_blob_with(
        &self,
        properties: &mut PropertyMap,
        name: &str,
        aliases: &[&str],
        missing: Option<fn() -> T>,
    ) -> Result<T, DecodeError> {
        take_blob_with(properties, name, aliases, missing)
    }
}

/// Never runs: the field's assertion fails to compile when this is chosen.
pub trait BlobFallback<T> {
    /// See [`BlobProbe::put_blob`].
    fn put_blob(&self, _: &mut PropertyMap, _: &'static str, _: &T, _: bool) {
        unreachable!("the derive's assertion rejects this field type")
    }
    /// See [`BlobProbe::take_blob`].
    fn take_blob(&self, _: &mut PropertyMap, _: &str) -> Result<T, DecodeError> {
        unreachable!("the derive's assertion rejects this field type")
    }
    /// See [`BlobProbe::take_blob_with`].
    fn take_blob_with(
        &self,
        _: &mut PropertyMap,
        _: &str,
        _: &[&str],
        _: Option<fn() -> T>,
    ) -> Result<T, DecodeError> {
        unreachable!("the derive's assertion rejects this field type")
    }
}
impl<T> BlobFallback<T> for &Probe<T> {}

/// A `#[property(json)]` field: any `Serialize + DeserializeOwned` type (feature `serde`),
/// stored as NDB's JsonProperty stores it.
#[diagnostic::on_unimplemented(
    message = "`#[property(json)]` needs a type that implements serde's `Serialize` and `DeserializeOwned`, with the `serde` feature of datastore-entity, not `{Self}`",
    label = "not a JSON type",
    note = "enable the feature `serde` of datastore-entity (`features = [\"serde\"]` in its \
            dependency line) and derive `serde::Serialize` and `serde::Deserialize` on the type"
)]
pub trait JsonField: Sized {
    /// The stored form: the JSON text as bytes, ASCII only (other characters escaped as
    /// `\uXXXX`), excluded from indexes; JSON `null` as a null value. The error says why
    /// `Serialize` refused.
    fn to_json(&self) -> Result<Value, Box<dyn std::error::Error + Send + Sync>>;
    /// Reads the stored form back: JSON text as bytes or a string (a projection gives a
    /// string); a null value, or no property at all (`None`), as JSON `null`.
    fn from_json(value: Option<Value>) -> Result<Self, DecodeError>;
}

/// Reads a `#[property(json)]` field under its name, a former name, or its default (as
/// [`take_with`]).
pub fn take_json_with<T: JsonField>(
    properties: &mut PropertyMap,
    name: &str,
    aliases: &[&str],
    missing: Option<fn() -> T>,
) -> Result<T, DecodeError> {
    take_value_with(properties, name, aliases, missing, T::from_json)
}

/// `#[property(json)]` fields, probed (see the module docs).
pub trait JsonProbe<T> {
    /// Stores `value` as JSON text under `name`, excluded from indexes; an entity of `kind`
    /// whose value `Serialize` refuses is an `Error::InvalidValue`.
    fn put_json(
        &self,
        properties: &mut PropertyMap,
        kind: &str,
        name: &'static str,
        value: &T,
    ) -> Result<(), Error>;
    /// Reads the field (see [`take_json_with`]).
    fn take_json_with(
        &self,
        properties: &mut PropertyMap,
        name: &str,
        aliases: &[&str],
        missing: Option<fn() -> T>,
    ) -> Result<T, DecodeError>;
}

impl<T: JsonField> JsonProbe<T> for Probe<T> {
    fn put_json(
        &self,
        properties: &mut PropertyMap,
        kind: &str,
        name: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        let json = value.to_json().map_err(|reason| Error::InvalidValue {
            kind: kind.to_owned(),
            property: name.to_owned(),
            reason: format!("it cannot be written as JSON: {reason}"),
        })?;
        properties.put_with(name, true, |w| w.value(&json));
        Ok(())
    }
    fn take_json_with(
        &self,
        properties: &mut PropertyMap,
        name: &str,
        aliases: &[&str],
        missing: Option<fn() -> T>,
    ) -> Result<T, DecodeError> {
        take_json_with(properties, name, aliases, missing)
    }
}

/// Never runs: the field's assertion fails to compile when this is chosen.
pub trait JsonFallback<T> {
    /// See [`JsonProbe::put_json`].
    fn put_json(&self, _: &mut PropertyMap, _: &str, _: &'static str, _: &T) -> Result<(), Error> {
        unreachable!("the derive's assertion rejects this field type")
    }
    /// See [`JsonProbe::take_json_with`].
    fn take_json_with(
        &self,
        _: &mut PropertyMap,
        _: &str,
        _: &[&str],
        _: Option<fn() -> T>,
    ) -> Result<T, DecodeError> {
        unreachable!("the derive's assertion rejects this field type")
    }
}
impl<T> JsonFallback<T> for &Probe<T> {}

/// The assertion of a `#[property(json)]` field.
pub fn assert_json<T: JsonField>() {}

/// The `#[key]` field.
pub trait KeyProbe<K> {
    /// The field's value from a stored key.
    fn key_field(&self, key: &RawKey) -> Result<K, DecodeError>;
    /// The entity's key from its fields.
    fn entity_key<E: Entity>(&self, parent: Option<&RawKey>, key: &K) -> Result<Key<E>, Error>;
}

impl<K: KeyField> KeyProbe<K> for Probe<K> {
    fn key_field(&self, key: &RawKey) -> Result<K, DecodeError> {
        K::from_id_or_name(key.id_or_name())
    }
    fn entity_key<E: Entity>(&self, parent: Option<&RawKey>, key: &K) -> Result<Key<E>, Error> {
        Ok(Key::new(parent, key.to_id_or_name()?))
    }
}

/// Never runs: the key field's assertion fails to compile when this is chosen.
pub trait KeyFallback<K> {
    /// See [`KeyProbe::key_field`].
    fn key_field(&self, _: &RawKey) -> Result<K, DecodeError> {
        unreachable!("the derive's assertion rejects this key type")
    }
    /// See [`KeyProbe::entity_key`].
    fn entity_key<E: Entity>(&self, _: Option<&RawKey>, _: &K) -> Result<Key<E>, Error> {
        unreachable!("the derive's assertion rejects this key type")
    }
}
impl<K> KeyFallback<K> for &Probe<K> {}

/// `#[sharded_index]` fields.
pub trait ShardIndexProbe<T> {
    /// The value in sort order, `None` for no companion.
    fn sort_value(&self, value: &T) -> Option<i64>;
}

impl<T: ShardIndexable> ShardIndexProbe<T> for Probe<T> {
    fn sort_value(&self, value: &T) -> Option<i64> {
        value.sort_value()
    }
}

/// Never runs: the field's assertion fails to compile when this is chosen.
pub trait ShardIndexFallback<T> {
    /// See [`ShardIndexProbe::sort_value`].
    fn sort_value(&self, _: &T) -> Option<i64> {
        unreachable!("the derive's assertion rejects this field type")
    }
}
impl<T> ShardIndexFallback<T> for &Probe<T> {}

/// The assertion of a property stored as is (excluded, or acknowledged with `#[index(monotonic)]`).
pub fn assert_property<T: PropertyType>() {}

/// The assertion of an indexed property: a property type that does not grow with time (R-I3).
pub fn assert_indexed<T: PropertyType>()
where
    T::Growth: Indexable,
{
}

/// A field listed in a projection (R-Q2), probed: its projection struct declares the row's
/// type `D` (spelled by the derive from the field's type), which must be what `T` projects
/// as, and `T` must not be an embedded entity. A field type that is no property type at all
/// is reported by the field's own assertion, once; the fallback then says nothing more.
pub trait ProjectionProbe<T> {
    /// The assertion.
    fn projects_as<D>(&self)
    where
        T: Projectable<Projected = D>,
        T::Shape: Projects,
    {
    }
    /// Reads projected property `name` (an index value) as a `D`.
    fn take_projected<D: PropertyType>(
        &self,
        properties: &mut PropertyMap,
        name: &str,
    ) -> Result<D, DecodeError> {
        match properties.remove(name) {
            Some(property) => D::from_index_value(property.value),
            None => D::from_missing(),
        }
    }
}

impl<T: PropertyType> ProjectionProbe<T> for Probe<T> {}

/// Never runs: the field's assertion fails to compile when this is chosen.
pub trait ProjectionFallback<T> {
    /// See [`ProjectionProbe::projects_as`].
    fn projects_as<D>(&self) {}
    /// See [`ProjectionProbe::take_projected`].
    fn take_projected<D>(&self, _: &mut PropertyMap, _: &str) -> Result<D, DecodeError> {
        unreachable!("the derive's assertion rejects this field type")
    }
}
impl<T> ProjectionFallback<T> for &Probe<T> {}

/// The assertion of a `#[blob]` field (R-P1).
pub fn assert_blob<T: BlobField>() {}

/// The assertion of a `#[ttl]` field.
pub fn assert_ttl<T: TtlField>() {}

/// The assertion of the `#[key]` field.
pub fn assert_key<K: KeyField>() {}

/// The assertion of a `#[sharded(n)]` field (R-S1).
pub fn assert_counter<T: CounterField>() {}

/// The assertion of a `#[sharded_index(n)]` field (R-S3).
pub fn assert_sharded_index<T: ShardIndexable>() {}

/// The types a `#[ttl]` field may have: the service expires the entity at that time.
#[diagnostic::on_unimplemented(
    message = "`#[ttl]` needs a `Timestamp` or `Option<Timestamp>` field, not `{Self}`",
    label = "not a timestamp",
    note = "the service deletes the entity after the time in its TTL property"
)]
pub trait TtlField: PropertyType {}
impl TtlField for Timestamp {}
impl TtlField for Option<Timestamp> {}

/// The types a `#[sharded(n)]` counter may have: integers, summed over the shards.
#[diagnostic::on_unimplemented(
    message = "`#[sharded]` needs an integer field, not `{Self}`",
    label = "not an integer counter",
    note = "a sharded counter is the sum of integers kept in its shards; use i64 (or a smaller integer type)"
)]
pub trait CounterField: PropertyType {}
macro_rules! counter_field {
    ($($t:ty),*) => {$( impl CounterField for $t {} )*};
}
counter_field!(i8, i16, i32, i64, u8, u16, u32);

/// Panics during constant evaluation when `name` is not a valid key name.
pub const fn assert_key_name(name: &str) {
    if let Err(violation) = check(NameRole::KeyName, name) {
        panic!("{}", violation.as_str());
    }
}

/// A key name checked by [`assert_key_name`].
pub fn trusted_key_name(name: &str) -> KeyName {
    KeyName::trusted(name.to_owned())
}

/// A key id, panicking during constant evaluation when it is zero or negative (R-K2).
pub const fn const_key_id(id: i64) -> KeyId {
    if id <= 0 {
        panic!("R-K2: numeric ids must be between 1 and i64::MAX");
    }
    KeyId::positive(id)
}

/// The parent field's value from a stored key.
pub fn parent_field<P: Entity>(key: &RawKey) -> Result<Key<P>, DecodeError> {
    let found = |what: String| DecodeError {
        path: String::new(),
        expected: format!("a parent key of kind `{}`", P::KIND),
        found: what,
    };
    match key.parent() {
        Some(parent) => {
            let kind = parent.kind().to_owned();
            Key::from_raw(parent).map_err(|_| found(format!("a parent of kind `{kind}`")))
        }
        None => Err(found("a root key with no parent".to_owned())),
    }
}

/// An embedded entity type: a struct deriving `Entity` without `#[key]` (the derive
/// implements this), which `#[property(flatten)]` can store as dotted properties.
#[diagnostic::on_unimplemented(
    message = "`#[property(flatten)]` needs an embedded entity, or an `Option` or a `Vec` of one, not `{Self}`",
    label = "not an embedded entity",
    note = "an embedded entity is a struct that derives `Entity` without a `#[key]`; flatten stores \
            its properties as top-level `field.sub` properties, as NDB's legacy StructuredProperty \
            and Go's `flatten` do"
)]
pub trait EmbeddedEntity: PropertyType {}

/// A `#[property(flatten)]` field: an embedded entity written as top-level `name.sub`
/// properties (a `Vec` of them as one array per sub-property), the layout NDB's legacy
/// StructuredProperty and Go's `flatten` write.
#[diagnostic::on_unimplemented(
    message = "`#[property(flatten)]` needs an embedded entity, or an `Option` or a `Vec` of one, not `{Self}`",
    label = "not an embedded entity",
    note = "an embedded entity is a struct that derives `Entity` without a `#[key]`"
)]
pub trait Flatten: Sized {
    /// Writes `self` as the `name.sub` properties.
    fn flatten(&self, properties: &mut PropertyMap, name: &str, excluded: bool);
    /// Reads the `name.sub` properties back (an entity with none of them: `None`, an empty
    /// `Vec`, or the embedded struct's own answer to missing properties).
    fn unflatten(properties: &mut PropertyMap, name: &str) -> Result<Self, DecodeError>;
}

/// The `name.sub` properties of `properties`, taken out, by `sub`.
fn take_flattened(properties: &mut PropertyMap, name: &str) -> PropertyMap {
    let prefix = format!("{name}.");
    let names: Vec<String> = properties
        .keys()
        .filter(|n| n.starts_with(&prefix))
        .map(str::to_owned)
        .collect();
    let mut inner = PropertyMap::new();
    for full in names {
        if let Some(property) = properties.remove(&full) {
            inner.insert(&full[prefix.len()..], property);
        }
    }
    inner
}

/// The sub-properties of one embedded entity value (an embedded entity type's value is
/// always an entity: the derive writes its `to_value`).
fn sub_properties<T: PropertyType>(value: &T) -> PropertyMap {
    value
        .to_value()
        .into_entity()
        .unwrap_or_else(|| unreachable!("an embedded entity type's value is an entity"))
}

impl<T: EmbeddedEntity> Flatten for T {
    fn flatten(&self, properties: &mut PropertyMap, name: &str, excluded: bool) {
        for (sub, property) in sub_properties(self).iter() {
            let excluded = excluded || property.excluded;
            properties.put_with(&format!("{name}.{sub}"), excluded, |w| {
                w.value(&property.value);
            });
        }
    }
    fn unflatten(properties: &mut PropertyMap, name: &str) -> Result<Self, DecodeError> {
        T::from_value(Value::Entity(take_flattened(properties, name)))
    }
}

impl<T: EmbeddedEntity> Flatten for Option<T> {
    fn flatten(&self, properties: &mut PropertyMap, name: &str, excluded: bool) {
        if let Some(value) = self {
            value.flatten(properties, name, excluded);
        }
    }
    fn unflatten(properties: &mut PropertyMap, name: &str) -> Result<Self, DecodeError> {
        let inner = take_flattened(properties, name);
        if inner.is_empty() || inner.values().all(|p| p.value == Value::Null) {
            return Ok(None);
        }
        T::from_value(Value::Entity(inner)).map(Some)
    }
}

impl<T: EmbeddedEntity> Flatten for Vec<T> {
    fn flatten(&self, properties: &mut PropertyMap, name: &str, excluded: bool) {
        let elements: Vec<PropertyMap> = self.iter().map(sub_properties).collect();
        let Some(first) = elements.first() else {
            return;
        };
        // One array per sub-property, an element's missing sub-property a null in its slot.
        for sub in first.keys() {
            let values: Vec<Value> = elements
                .iter()
                .map(|e| e.get(sub).map_or(Value::Null, |p| p.value.clone()))
                .collect();
            let sub_excluded = excluded || first.get(sub).is_some_and(|p| p.excluded);
            properties.put_with(&format!("{name}.{sub}"), sub_excluded, |w| {
                w.value(&Value::Array(values));
            });
        }
    }
    fn unflatten(properties: &mut PropertyMap, name: &str) -> Result<Self, DecodeError> {
        let columns: Vec<(String, bool, Vec<Value>)> = take_flattened(properties, name)
            .iter()
            .map(|(sub, property)| {
                let values = match &property.value {
                    Value::Array(values) => values.clone(),
                    single => vec![single.clone()],
                };
                (sub.to_owned(), property.excluded, values)
            })
            .collect();
        let count = columns.iter().map(|(_, _, v)| v.len()).max().unwrap_or(0);
        (0..count)
            .map(|i| {
                let mut element = PropertyMap::new();
                for (sub, excluded, values) in &columns {
                    if let Some(value) = values.get(i) {
                        let property = match excluded {
                            true => crate::model::value::Property::excluded(value.clone()),
                            false => crate::model::value::Property::indexed(value.clone()),
                        };
                        element.insert(sub, property);
                    }
                }
                T::from_value(Value::Entity(element)).map_err(|e| e.within(&format!("[{i}]")))
            })
            .collect()
    }
}

/// `#[property(flatten)]` fields, probed (see the module docs).
pub trait FlattenProbe<T> {
    /// Writes the field as `name.sub` properties.
    fn put_flat(&self, properties: &mut PropertyMap, name: &str, value: &T, excluded: bool);
    /// Reads the field from its `name.sub` properties.
    fn take_flat(&self, properties: &mut PropertyMap, name: &str) -> Result<T, DecodeError>;
}

impl<T: Flatten> FlattenProbe<T> for Probe<T> {
    fn put_flat(&self, properties: &mut PropertyMap, name: &str, value: &T, excluded: bool) {
        value.flatten(properties, name, excluded);
    }
    fn take_flat(&self, properties: &mut PropertyMap, name: &str) -> Result<T, DecodeError> {
        T::unflatten(properties, name)
    }
}

/// Never runs: the field's assertion fails to compile when this is chosen.
pub trait FlattenFallback<T> {
    /// See [`FlattenProbe::put_flat`].
    fn put_flat(&self, _: &mut PropertyMap, _: &str, _: &T, _: bool) {
        unreachable!("the derive's assertion rejects this field type")
    }
    /// See [`FlattenProbe::take_flat`].
    fn take_flat(&self, _: &mut PropertyMap, _: &str) -> Result<T, DecodeError> {
        unreachable!("the derive's assertion rejects this field type")
    }
}
impl<T> FlattenFallback<T> for &Probe<T> {}

/// The assertion of a `#[property(flatten)]` field.
pub fn assert_flatten<T: Flatten>() {}
