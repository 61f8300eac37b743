//! Typed, compile-time checked entities for Google Cloud Datastore and Firestore in
//! Datastore mode.
//!
//! `#[derive(Entity)]` turns a struct into an entity type whose names, keys and indexes
//! follow Google's best practices, checked by the compiler (see the README's rules table).
//!
//! ```
//! use datastore_entity::prelude::*;
//!
//! #[derive(Entity, Debug, Clone, PartialEq)]
//! #[entity(kind = "Account")]
//! pub struct Account {
//!     #[key]
//!     pub name: KeyName,
//!     pub email: String,
//!     #[exclude_from_index]
//!     pub bio: String,
//! }
//!
//! let key = Account::key(KeyName::new("ann").unwrap());
//! assert_eq!(key.name(), Some("ann"));
//! assert_eq!(Account::EMAIL.name(), "email");
//! assert!(Account::SCHEMA.property("bio").unwrap().excluded);
//! ```
//!
//! Key names, kind names, property names and project ids are visible in logs, URLs and
//! the console: never put sensitive data in them (R-N8).

// The layers, bottom up: error.rs, hash.rs, model/, query/, format/, rules/, diagnostics.rs, backend/, db/, scale/, index_files.rs, façade (DEVELOPERS.md, "Layout").
// `layers/` checks that every file uses only files below it in that table.
pub mod backend;
mod db;
pub mod diagnostics;
mod error;
mod format;
mod hash;
mod index_files;
mod model;
/// The query and write vocabulary the backends receive, and the typed descriptors that build
/// queries (`query/`); typed queries themselves are the `Db`'s (`db/query.rs`), re-exported
/// here where earlier releases had them.
pub mod query {
    pub(crate) mod descriptor;
    pub(crate) mod explain;
    pub(crate) mod spec;
    pub(crate) mod write;

    pub use crate::db::query::{Cursor, KeysOnlyQuery, Numeric, Page, ProjectionQuery, Query};
}
pub mod rules;
pub mod scale;

pub use backend::retry::RetryPolicy;
#[doc = include_str!("derive_entity.md")]
pub use datastore_entity_derive::Entity;
#[doc = include_str!("derive_property_value.md")]
pub use datastore_entity_derive::PropertyValue;
#[cfg(feature = "cloud")]
pub use db::cloud::CloudBuilder;
pub use db::query::{Cursor, KeysOnlyQuery, Numeric, Page, ProjectionQuery, Query, SumError};
pub use db::txn::{ReadTx, Tx};
pub use db::{Db, ParentKey};
pub use diagnostics::{Diagnostics, Finding, Rule, Thresholds};
pub use error::{Error, ServiceCode};
pub use futures_core::Stream;
pub use index_files::{firestore_indexes_json, index_yaml};
pub use model::entity::{Entity, KeyField, Projection};
pub use model::key::{IdOrName, Key, KeyId, PartitionId, PathElement, RawKey};
pub use model::name::KeyName;
pub use model::property_type::{Growth, Increasing, Indexable, Projectable, PropertyType, Steady};
pub use model::scalar::{Blob, GeoPoint, Timestamp};
pub use model::schema::{
    CounterSchema, Direction, IndexSchema, IndexedProperty, PropertySchema, ReplicaSchema, Schema,
    ShardedIndexSchema,
};
pub use model::value::MAX_NESTING;
pub use model::value::{DecodeError, Property, PropertyMap, Value};
pub use query::descriptor::{
    AtMost10, AtMost30, Count, Excluded, Filter, Flattened, InArray, InValues, IndexMarker,
    Indexed, Nested, NotExcluded, NotFlattened, NotInArray, NotInValues, Order, PropertyPath,
    Queryable,
};
pub use query::explain::{ExecutionStats, Explanation};
pub use query::spec::Operator;
pub use rules::commit::MAX_MUTATIONS;
pub use rules::filter::{MAX_DISJUNCTIONS, MAX_IN_VALUES, MAX_NOT_IN_VALUES};
pub use rules::index_entries::{MAX_INDEX_ENTRIES, MAX_INDEXED_VALUES};
pub use rules::limits::{MAX_ENTITY_BYTES, MAX_INDEXED_BYTES};
pub use scale::bulk::{BulkWriter, Progress};
pub use scale::migrate;
pub use scale::ramp::{Limiter, RampUp};
pub use scale::sharded_index::{ShardIndexable, ShardedQuery};

/// Entities and their schemas (the paths of earlier releases).
pub mod entity {
    pub use crate::model::entity::{Entity, KeyField, Projection};
    pub use crate::model::schema::{
        CounterSchema, IndexSchema, IndexedProperty, PropertySchema, ReplicaSchema, Schema,
        ShardedIndexSchema,
    };
}

/// Keys: validated ids, untyped [`RawKey`]s and typed [`Key<E>`]s (the paths of earlier
/// releases).
pub mod key {
    pub use crate::model::key::{
        IdOrName, KEY_PROPERTY, Key, KeyId, MAX_KEY_DEPTH, PartitionId, PathElement, RawKey,
    };
}

/// Validated names: the runtime side of the naming rules (R-N1..R-N8).
pub mod name {
    pub use crate::model::name::{
        KeyName, MAX_NAME_BYTES, NameRole, NameViolation, validate, validate_bytes,
    };
}

/// Typed property descriptors and the filters and orders built from them (the paths of
/// earlier releases).
pub mod property {
    pub use crate::model::schema::Direction;
    pub use crate::query::descriptor::{
        AtMost10, AtMost30, Count, Excluded, Filter, Flattened, InArray, InValues, IndexMarker,
        Indexed, Nested, NotExcluded, NotFlattened, NotInArray, NotInValues, Order, PropertyPath,
        Queryable,
    };
    pub use crate::query::spec::Operator;
}

/// Values as the store holds them, and the conversions from and to Rust types (the paths of
/// earlier releases).
pub mod value {
    pub use crate::model::property_type::{
        Flat, Growth, Increasing, Indexable, Projectable, Projects, PropertyType, Shape, Steady,
        WholeEntity,
    };
    pub use crate::model::scalar::{Blob, GeoPoint, Timestamp};
    pub use crate::model::sink::{Form, StoredWriter};
    pub use crate::model::stored::StoredValue;
    pub use crate::model::value::{DecodeError, Property, PropertyMap, Value};
    pub use crate::model::walk::compare_values;
}

/// `use datastore_entity::prelude::*;` brings what entity declarations and queries need.
pub mod prelude {
    pub use crate::{
        Blob, Cursor, Db, Entity, Error, GeoPoint, Key, KeyId, KeyName, Page, Projection,
        PropertyType, PropertyValue, RawKey, ReadTx, Timestamp, Tx,
    };
    /// What `stream()` users need: `next`, `try_next`, `try_collect`, …
    pub use futures_util::{StreamExt as _, TryStreamExt as _};
}

/// What the derive's generated code reaches the runtime through. Not a public API.
#[doc(hidden)]
#[path = "private.rs"]
pub mod __private;
