//! The [`Entity`] trait that `#[derive(Entity)]` implements, and the schema it describes.

use crate::key::{IdOrName, RawKey};
use crate::value::{DecodeError, PropertyMap};
use crate::{Error, Key, KeyId, KeyName};

/// A struct stored as an entity of its own kind. Implement it with `#[derive(Entity)]`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an entity that can be stored on its own",
    label = "not a storable entity",
    note = "derive `Entity` and give the struct a `#[key]` field (KeyName, String, KeyId, u64 or Option<KeyId>); \
            a derived struct without `#[key]` is an embedded entity, stored only inside another entity"
)]
pub trait Entity: Sized + Send + Sync + 'static {
    /// The kind, checked at compile time (R-N1, R-N2, R-N5, R-N7).
    const KIND: &'static str;

    /// The kind's schema: properties, exclusions, TTL.
    const SCHEMA: &'static Schema;

    /// This entity's key, built from its `#[parent]` and `#[key]` fields; incomplete when
    /// the key field is an `Option<KeyId>` holding `None`.
    fn entity_key(&self) -> Result<Key<Self>, Error>;

    /// The stored properties (never the key or parent fields).
    fn to_properties(&self) -> PropertyMap;

    /// Rebuilds the entity from its key and properties; key and parent fields come from the key.
    fn from_entity(key: &RawKey, properties: PropertyMap) -> Result<Self, Error>;
}

/// A kind (or embedded entity type) as declared in Rust: what indexes, tools and the `Db`
/// need to know about it.
#[derive(Debug)]
pub struct Schema {
    /// The kind, or the struct name of an embedded entity.
    pub kind: &'static str,
    /// Whether this is an embedded entity (no `#[key]`).
    pub embedded: bool,
    /// The stored properties, in declaration order (a `#[sharded_index]` field's companion
    /// property included; `#[sharded]` counters, which live in their own entities, not).
    pub properties: &'static [PropertySchema],
    /// The composite indexes declared with `#[entity(index(...), ancestor_index(...))]` (R-I2).
    pub indexes: &'static [IndexSchema],
    /// The `#[sharded(n)]` counters (R-S1).
    pub counters: &'static [CounterSchema],
    /// The `#[sharded_index(n)]` fields (R-S3).
    pub sharded_indexes: &'static [ShardedIndexSchema],
    /// The read replicas of `#[replicated(n)]` (R-S2).
    pub replicas: Option<ReplicaSchema>,
}

impl Schema {
    /// The stored property with that name.
    pub fn property(&self, name: &str) -> Option<&PropertySchema> {
        self.properties.iter().find(|p| p.name == name)
    }

    /// The TTL property, if one is declared with `#[ttl]`.
    pub fn ttl(&self) -> Option<&PropertySchema> {
        self.properties.iter().find(|p| p.ttl)
    }

    /// The counter of the Rust field `field`.
    pub fn counter(&self, field: &str) -> Option<&CounterSchema> {
        self.counters.iter().find(|c| c.field == field)
    }
}

/// One stored property of a [`Schema`].
pub struct PropertySchema {
    /// The stored name (after `rename` / `rename_all`).
    pub name: &'static str,
    /// The Rust field name.
    pub field: &'static str,
    /// Excluded from indexes (`#[exclude_from_index]`, `#[ttl]`, or the plain value of a
    /// `#[sharded_index]` field).
    pub excluded: bool,
    /// The TTL property (`#[ttl]`).
    pub ttl: bool,
    embedded: fn() -> Option<&'static Schema>,
}

impl PropertySchema {
    /// Describes a property; `embedded` returns the schema of an embedded entity type. Used by
    /// the derive.
    #[doc(hidden)]
    pub const fn new(
        name: &'static str,
        field: &'static str,
        excluded: bool,
        ttl: bool,
        embedded: fn() -> Option<&'static Schema>,
    ) -> PropertySchema {
        PropertySchema {
            name,
            field,
            excluded,
            ttl,
            embedded,
        }
    }

    /// The schema of an embedded entity, whose properties are indexed as `name.inner` (R-P2).
    pub fn embedded(&self) -> Option<&'static Schema> {
        (self.embedded)()
    }
}

impl std::fmt::Debug for PropertySchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PropertySchema")
            .field("name", &self.name)
            .field("field", &self.field)
            .field("excluded", &self.excluded)
            .field("ttl", &self.ttl)
            .field("embedded", &self.embedded().map(|s| s.kind))
            .finish()
    }
}

/// A composite index declared on a kind (R-I2).
#[derive(Debug, PartialEq, Eq)]
pub struct IndexSchema {
    /// Whether the index serves ancestor queries (`ancestor_index(...)`, `ancestor: yes`).
    pub ancestor: bool,
    /// The indexed properties, most significant first.
    pub properties: &'static [IndexedProperty],
}

/// One property of a composite index.
#[derive(Debug, PartialEq, Eq)]
pub struct IndexedProperty {
    /// The stored name.
    pub name: &'static str,
    /// The index's direction on it (`-name` in the declaration: descending).
    pub direction: crate::Direction,
}

/// A `#[sharded(n)]` counter (R-S1): its value lives in `shards` entities of kind `kind`, root
/// entities with scattered names derived from the owner's key.
#[derive(Debug, PartialEq, Eq)]
pub struct CounterSchema {
    /// The Rust field name.
    pub field: &'static str,
    /// The property name the field would have (the shards' kind is derived from it).
    pub name: &'static str,
    /// The number of shards.
    pub shards: u32,
    /// The kind of the shard entities: `{Kind}.{name}.shard`.
    pub kind: &'static str,
}

/// `#[replicated(n)]` (R-S2): `copies` read replicas of each entity, of kind `kind`, root
/// entities with scattered names derived from the entity's key.
#[derive(Debug, PartialEq, Eq)]
pub struct ReplicaSchema {
    /// The number of replicas (besides the entity itself).
    pub copies: u32,
    /// The kind of the replicas: `{Kind}.replica`.
    pub kind: &'static str,
}

/// A `#[sharded_index(n)]` field (R-S3): the plain value is stored excluded from indexes, and
/// `companion` holds it behind a fixed-width shard prefix.
#[derive(Debug, PartialEq, Eq)]
pub struct ShardedIndexSchema {
    /// The Rust field name.
    pub field: &'static str,
    /// The stored name of the plain (excluded) value.
    pub name: &'static str,
    /// The stored name of the indexed companion property.
    pub companion: &'static str,
    /// The number of shards.
    pub shards: u32,
}

/// A struct generated by `#[entity(projection(Name: a, b))]`: the rows of a projection query
/// (R-Q2), which reads only those properties from the index.
pub trait Projection: Sized + Send + 'static {
    /// The entity type projected.
    type Entity: Entity;

    /// The stored names of the projected properties.
    const PROPERTIES: &'static [&'static str];

    /// Builds one row from the projected properties.
    fn from_properties(properties: PropertyMap) -> Result<Self, Error>;
}

/// A type that can be the `#[key]` field of an entity.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a `#[key]` field",
    label = "unsupported key type",
    note = "a key field is a `KeyName` or `String` (a custom name), a `KeyId` or `u64` (a numeric id), \
            or an `Option<KeyId>` (None: the id is allocated on put)"
)]
pub trait KeyField: Sized {
    /// What the generated key builder takes: [`KeyName`] or [`KeyId`].
    type Builder: Into<IdOrName>;

    /// The key's id or name; `None` for an incomplete key (allocated on put).
    fn to_id_or_name(&self) -> Result<Option<IdOrName>, Error>;

    /// The field's value from a stored key.
    fn from_id_or_name(id_or_name: Option<&IdOrName>) -> Result<Self, DecodeError>;
}

fn key_mismatch(expected: &str, found: Option<&IdOrName>) -> DecodeError {
    DecodeError {
        path: String::new(),
        expected: expected.to_owned(),
        found: match found {
            Some(IdOrName::Id(id)) => format!("the id {id}"),
            Some(IdOrName::Name(_)) => "a key name".to_owned(),
            None => "an incomplete key".to_owned(),
        },
    }
}

impl KeyField for KeyName {
    type Builder = KeyName;
    fn to_id_or_name(&self) -> Result<Option<IdOrName>, Error> {
        Ok(Some(IdOrName::Name(self.clone())))
    }
    fn from_id_or_name(id_or_name: Option<&IdOrName>) -> Result<Self, DecodeError> {
        match id_or_name {
            Some(IdOrName::Name(name)) => Ok(name.clone()),
            other => Err(key_mismatch("a key name", other)),
        }
    }
}

impl KeyField for String {
    type Builder = KeyName;
    fn to_id_or_name(&self) -> Result<Option<IdOrName>, Error> {
        KeyName::new(self.as_str()).map(|n| Some(IdOrName::Name(n)))
    }
    fn from_id_or_name(id_or_name: Option<&IdOrName>) -> Result<Self, DecodeError> {
        KeyName::from_id_or_name(id_or_name).map(KeyName::into_string)
    }
}

impl KeyField for KeyId {
    type Builder = KeyId;
    fn to_id_or_name(&self) -> Result<Option<IdOrName>, Error> {
        Ok(Some(IdOrName::Id(*self)))
    }
    fn from_id_or_name(id_or_name: Option<&IdOrName>) -> Result<Self, DecodeError> {
        match id_or_name {
            Some(IdOrName::Id(id)) => Ok(*id),
            other => Err(key_mismatch("a numeric id", other)),
        }
    }
}

impl KeyField for u64 {
    type Builder = KeyId;
    fn to_id_or_name(&self) -> Result<Option<IdOrName>, Error> {
        KeyId::from_u64(*self).map(|id| Some(IdOrName::Id(id)))
    }
    fn from_id_or_name(id_or_name: Option<&IdOrName>) -> Result<Self, DecodeError> {
        // Ids are positive, so the conversion is lossless.
        KeyId::from_id_or_name(id_or_name).map(|id| id.get().unsigned_abs())
    }
}

impl KeyField for Option<KeyId> {
    type Builder = KeyId;
    fn to_id_or_name(&self) -> Result<Option<IdOrName>, Error> {
        Ok(self.map(IdOrName::Id))
    }
    fn from_id_or_name(id_or_name: Option<&IdOrName>) -> Result<Self, DecodeError> {
        KeyId::from_id_or_name(id_or_name).map(Some)
    }
}
