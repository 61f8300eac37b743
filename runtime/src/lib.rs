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

pub mod backend;
mod codec;
mod db;
pub mod entity;
mod error;
mod filter;
mod index_config;
pub mod key;
mod limits;
mod map;
pub mod name;
pub mod property;
pub mod query;
pub mod scale;
mod stored;
mod txn;
pub mod value;

#[cfg(feature = "cloud")]
pub use backend::cloud::CloudBuilder;
#[doc = include_str!("derive_entity.md")]
pub use datastore_entity_derive::Entity;
#[doc = include_str!("derive_property_value.md")]
pub use datastore_entity_derive::PropertyValue;
pub use db::{Db, ParentKey};
pub use entity::{
    CounterSchema, Entity, IndexSchema, IndexedProperty, KeyField, Projection, PropertySchema,
    ReplicaSchema, Schema, ShardedIndexSchema,
};
pub use error::Error;
pub use filter::{MAX_DISJUNCTIONS, MAX_IN_VALUES, MAX_NOT_IN_VALUES};
pub use futures_core::Stream;
pub use index_config::{MAX_INDEX_ENTRIES, firestore_indexes_json, index_yaml};
pub use key::{IdOrName, Key, KeyId, PartitionId, PathElement, RawKey};
pub use limits::{MAX_ENTITY_BYTES, MAX_INDEXED_BYTES};
pub use name::KeyName;
pub use property::{
    AtMost10, AtMost30, Count, Direction, Excluded, Filter, InValues, IndexMarker, Indexed,
    NotInValues, Operator, Order, PropertyPath, Queryable,
};
pub use query::{Cursor, KeysOnlyQuery, Numeric, Page, ProjectionQuery, Query};
pub use scale::MAX_MUTATIONS;
pub use scale::sharded_index::{ShardIndexable, ShardedQuery};
pub use txn::{ReadTx, RetryPolicy, Tx};
pub use value::{
    Blob, DecodeError, GeoPoint, Growth, Increasing, Indexable, Projectable, Property, PropertyMap,
    PropertyType, Steady, Timestamp, Value,
};

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
