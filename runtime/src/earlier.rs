//! The paths of earlier releases, kept one release and deprecated: each item is at the crate
//! root now (`datastore_entity::Key`, not `datastore_entity::key::Key`). Types, constants
//! and functions warn where they are used through these paths; traits cannot (Rust has no
//! deprecated re-export), so their old paths compile silently until they go. Part of the
//! façade, with `lib.rs`.
#![allow(deprecated)]

/// Entities and their schemas, at the paths of earlier releases (deprecated: use the crate root).
#[doc(hidden)]
pub mod entity {
    pub use crate::Entity;
    pub use crate::KeyField;
    pub use crate::Projection;
    #[deprecated(since = "0.1.0", note = "use `datastore_entity::CounterSchema`")]
    pub type CounterSchema = crate::CounterSchema;
    #[deprecated(since = "0.1.0", note = "use `datastore_entity::IndexSchema`")]
    pub type IndexSchema = crate::IndexSchema;
    #[deprecated(since = "0.1.0", note = "use `datastore_entity::IndexedProperty`")]
    pub type IndexedProperty = crate::IndexedProperty;
    #[deprecated(since = "0.1.0", note = "use `datastore_entity::PropertySchema`")]
    pub type PropertySchema = crate::PropertySchema;
    #[deprecated(since = "0.1.0", note = "use `datastore_entity::ReplicaSchema`")]
    pub type ReplicaSchema = crate::ReplicaSchema;
    #[deprecated(since = "0.1.0", note = "use `datastore_entity::Schema`")]
    pub type Schema = crate::Schema;
    #[deprecated(since = "0.1.0", note = "use `datastore_entity::ShardedIndexSchema`")]
    pub type ShardedIndexSchema = crate::ShardedIndexSchema;
}

/// Keys, at the paths of earlier releases (deprecated: use the crate root).
#[doc(hidden)]
pub mod key {
    #[deprecated(since = "0.1.0", note = "use `datastore_entity::IdOrName`")]
    pub type IdOrName = crate::IdOrName;
    #[deprecated(since = "0.1.0", note = "use `datastore_entity::KEY_PROPERTY`")]
    pub const KEY_PROPERTY: &str = crate::KEY_PROPERTY;
    #[deprecated(since = "0.1.0", note = "use `datastore_entity::Key`")]
    pub type Key<E> = crate::Key<E>;
    #[deprecated(since = "0.1.0", note = "use `datastore_entity::KeyId`")]
    pub type KeyId = crate::KeyId;
    #[deprecated(since = "0.1.0", note = "use `datastore_entity::MAX_KEY_DEPTH`")]
    pub const MAX_KEY_DEPTH: usize = crate::MAX_KEY_DEPTH;
    #[deprecated(since = "0.1.0", note = "use `datastore_entity::PartitionId`")]
    pub type PartitionId = crate::PartitionId;
    #[deprecated(since = "0.1.0", note = "use `datastore_entity::PathElement`")]
    pub type PathElement = crate::PathElement;
    #[deprecated(since = "0.1.0", note = "use `datastore_entity::RawKey`")]
    pub type RawKey = crate::RawKey;
}

/// Validated names, at the paths of earlier releases (deprecated: use the crate root).
#[doc(hidden)]
pub mod name {
    #[deprecated(since = "0.1.0", note = "use `datastore_entity::KeyName`")]
    pub type KeyName = crate::KeyName;
    #[deprecated(since = "0.1.0", note = "use `datastore_entity::MAX_NAME_BYTES`")]
    pub const MAX_NAME_BYTES: usize = crate::MAX_NAME_BYTES;
    #[deprecated(since = "0.1.0", note = "use `datastore_entity::NameRole`")]
    pub type NameRole = crate::NameRole;
    #[deprecated(since = "0.1.0", note = "use `datastore_entity::NameViolation`")]
    pub type NameViolation = crate::NameViolation;
    /// Deprecated: [`crate::validate_name`].
    #[deprecated(since = "0.1.0", note = "use `datastore_entity::validate_name`")]
    pub fn validate(role: crate::NameRole, name: &str) -> Result<(), crate::Error> {
        crate::validate_name(role, name)
    }
    /// Deprecated: [`crate::validate_name_bytes`].
    #[deprecated(since = "0.1.0", note = "use `datastore_entity::validate_name_bytes`")]
    pub fn validate_bytes(role: crate::NameRole, bytes: &[u8]) -> Result<&str, crate::Error> {
        crate::validate_name_bytes(role, bytes)
    }
}

/// Typed property descriptors, at the paths of earlier releases (deprecated: use the crate root).
#[doc(hidden)]
pub mod property {
    #[deprecated(since = "0.1.0", note = "use `datastore_entity::Direction`")]
    pub type Direction = crate::Direction;
    pub use crate::AtMost10;
    pub use crate::AtMost30;
    #[deprecated(since = "0.1.0", note = "use `datastore_entity::Count`")]
    pub type Count<const N: usize> = crate::Count<N>;
    #[deprecated(since = "0.1.0", note = "use `datastore_entity::Excluded`")]
    pub type Excluded = crate::Excluded;
    #[deprecated(since = "0.1.0", note = "use `datastore_entity::Filter`")]
    pub type Filter<E> = crate::Filter<E>;
    #[deprecated(since = "0.1.0", note = "use `datastore_entity::Flattened`")]
    pub type Flattened<I> = crate::Flattened<I>;
    #[deprecated(since = "0.1.0", note = "use `datastore_entity::InArray`")]
    pub type InArray = crate::InArray;
    pub use crate::InValues;
    pub use crate::IndexMarker;
    #[deprecated(since = "0.1.0", note = "use `datastore_entity::Indexed`")]
    pub type Indexed = crate::Indexed;
    pub use crate::Nested;
    pub use crate::NotExcluded;
    pub use crate::NotFlattened;
    pub use crate::NotInArray;
    pub use crate::NotInValues;
    #[deprecated(since = "0.1.0", note = "use `datastore_entity::Order`")]
    pub type Order<E> = crate::Order<E>;
    #[deprecated(since = "0.1.0", note = "use `datastore_entity::PropertyPath`")]
    pub type PropertyPath<E, T, I> = crate::PropertyPath<E, T, I>;
    pub use crate::Queryable;
    #[deprecated(since = "0.1.0", note = "use `datastore_entity::Operator`")]
    pub type Operator = crate::Operator;
}

/// Values and the conversions from and to Rust types, at the paths of earlier releases (deprecated: use the crate root).
#[doc(hidden)]
pub mod value {
    #[deprecated(since = "0.1.0", note = "use `datastore_entity::Flat`")]
    pub type Flat = crate::Flat;
    pub use crate::Growth;
    #[deprecated(since = "0.1.0", note = "use `datastore_entity::Increasing`")]
    pub type Increasing = crate::Increasing;
    pub use crate::Indexable;
    pub use crate::Projectable;
    pub use crate::Projects;
    pub use crate::PropertyType;
    pub use crate::Shape;
    #[deprecated(since = "0.1.0", note = "use `datastore_entity::Steady`")]
    pub type Steady = crate::Steady;
    #[deprecated(since = "0.1.0", note = "use `datastore_entity::WholeEntity`")]
    pub type WholeEntity = crate::WholeEntity;
    #[deprecated(since = "0.1.0", note = "use `datastore_entity::Blob`")]
    pub type Blob = crate::Blob;
    #[deprecated(since = "0.1.0", note = "use `datastore_entity::GeoPoint`")]
    pub type GeoPoint = crate::GeoPoint;
    #[deprecated(since = "0.1.0", note = "use `datastore_entity::Timestamp`")]
    pub type Timestamp = crate::Timestamp;
    #[deprecated(since = "0.1.0", note = "use `datastore_entity::DecodeError`")]
    pub type DecodeError = crate::DecodeError;
    #[deprecated(since = "0.1.0", note = "use `datastore_entity::Property`")]
    pub type Property = crate::Property;
    #[deprecated(since = "0.1.0", note = "use `datastore_entity::PropertyMap`")]
    pub type PropertyMap = crate::PropertyMap;
    #[deprecated(since = "0.1.0", note = "use `datastore_entity::Value`")]
    pub type Value = crate::Value;
    /// Deprecated (never a public API): the derive's writer, now `ValueWriter`.
    #[deprecated(
        since = "0.1.0",
        note = "not a public API: implement `PropertyType::to_value`"
    )]
    pub type StoredWriter<'a> = crate::__private::ValueWriter<'a>;
    /// Deprecated (never a public API): the derive's value view, now `ValueRef`.
    #[deprecated(
        since = "0.1.0",
        note = "not a public API: implement `PropertyType::from_value`"
    )]
    pub type StoredValue<'a> = crate::__private::ValueRef<'a>;
    /// Deprecated (never a public API): the form an entity is built in.
    #[deprecated(since = "0.1.0", note = "not a public API")]
    pub type Form<'a> = crate::__private::Form<'a>;
    /// Deprecated: [`crate::compare_values`].
    #[deprecated(since = "0.1.0", note = "use `datastore_entity::compare_values`")]
    pub fn compare_values(a: &crate::Value, b: &crate::Value) -> std::cmp::Ordering {
        crate::compare_values(a, b)
    }
}

/// The scale rules watched at run time, at the paths of earlier releases (deprecated: use the crate root).
#[doc(hidden)]
pub mod diagnostics {
    #[deprecated(since = "0.1.0", note = "use `datastore_entity::Diagnostics`")]
    pub type Diagnostics = crate::Diagnostics;
    #[deprecated(since = "0.1.0", note = "use `datastore_entity::Finding`")]
    pub type Finding = crate::Finding;
    #[deprecated(since = "0.1.0", note = "use `datastore_entity::Rule`")]
    pub type Rule = crate::Rule;
    #[deprecated(since = "0.1.0", note = "use `datastore_entity::Thresholds`")]
    pub type Thresholds = crate::Thresholds;
}

/// The scale helpers, at the paths of earlier releases (deprecated: use the crate root, and
/// `datastore_entity::migrate`).
#[doc(hidden)]
pub mod scale {

    /// Deprecated paths of the bulk writer.
    pub mod bulk {
        #[deprecated(since = "0.1.0", note = "use `datastore_entity::BulkWriter`")]
        pub type BulkWriter<'a> = crate::BulkWriter<'a>;
        #[deprecated(since = "0.1.0", note = "use `datastore_entity::Progress`")]
        pub type Progress = crate::Progress;
    }

    /// Deprecated paths of the ramp.
    pub mod ramp {
        #[deprecated(since = "0.1.0", note = "use `datastore_entity::RampUp`")]
        pub type RampUp = crate::RampUp;
        #[deprecated(since = "0.1.0", note = "use `datastore_entity::Limiter`")]
        pub type Limiter = crate::Limiter;
    }

    /// Deprecated paths of sharded indexes.
    pub mod sharded_index {
        pub use crate::ShardIndexable;
        #[deprecated(since = "0.1.0", note = "use `datastore_entity::ShardedQuery`")]
        pub type ShardedQuery<E, T> = crate::ShardedQuery<E, T>;
    }

    /// Deprecated path of the migrations (a module: Rust cannot warn on it).
    pub use crate::migrate;
}
