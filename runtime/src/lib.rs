//! Typed, compile-time checked entities for Google Cloud Datastore and Firestore in
//! Datastore mode, with an embedded engine that answers as the service does.
//!
//! `#[derive(Entity)]` turns a struct into an entity type: typed keys, typed property
//! descriptors for filters and orders, and the conversion to and from the stored form.
//! Google's best practices become checks: a dotted property name, a `/` in a kind, a filter
//! on a property excluded from indexes or a zero id does not compile, and what only shows at
//! run time (a key twice in one commit, an indexed string over 1,500 bytes) is refused before
//! anything is written. A [`Db`] is the handle every read and write goes through, the same
//! on the embedded engine ([`Db::in_memory`], [`Db::open`]) and on Google Cloud
//! (`Db::cloud`).
//!
//! ```
//! use datastore_entity::prelude::*;
//!
//! #[derive(Entity, Debug, Clone, PartialEq)]
//! pub struct Account {
//!     #[key]
//!     pub name: KeyName,
//!     pub email: String,
//!     #[exclude_from_index] // never queried: no index entries (R-I1)
//!     pub bio: String,
//! }
//!
//! #[tokio::main]
//! async fn main() -> Result<(), Error> {
//!     let db = Db::in_memory();
//!     let ann = Account {
//!         name: KeyName::new("ann")?,
//!         email: "ann@example.com".into(),
//!         bio: String::new(),
//!     };
//!     let key = db.put(&ann).await?;
//!     assert_eq!(db.get(&key).await?, Some(ann));
//!     let found = db
//!         .query::<Account>()
//!         .filter(Account::EMAIL.eq("ann@example.com")) // typed: `Account::BIO.eq(..)` does not compile
//!         .fetch()
//!         .await?;
//!     assert_eq!(found.items.len(), 1);
//!     Ok(())
//! }
//! ```
//!
//! # The guide
//!
//! One chapter per task ([`guide`]), every example compiled and run as a test:
//!
//! - [Modelling](guide::modelling): `#[derive(Entity)]`, properties, indexes, embedded
//!   entities, enums, the ecosystem's types.
//! - [Keys](guide::keys): names and ids, parents, allocated ids, namespaces, URL-safe keys.
//! - [Queries](guide::queries): filters, orders, cursors, `!=`/IN/NOT IN/OR, aggregations.
//! - [Reads and writes](guide::reads_and_writes): batches, transactions, transforms,
//!   versions, partial reads, vector search.
//! - [Existing data and schema changes](guide::existing_data): other programs' data, NDB,
//!   rolling deploys.
//! - [The embedded engine and files](guide::embedded): in memory, on a file, strict index
//!   mode, how it is checked against Google's emulators.
//! - [Google Cloud and production](guide::cloud): credentials, emulators, limits, deadlines,
//!   retries, tracing.
//! - [Scale](guide::scale): sharded counters, replicas, sharded indexes, diagnostics, ramp-up,
//!   migrations.
//! - [Caching](guide::caching): the context cache and the global cache in Redis.
//!
//! The rules, each with its id (`R-N3`) as errors print it: [`rules`]. The derive's
//! attributes: [`Entity`].
//!
//! Key names, kind names, property names and project ids are visible in logs, URLs and
//! the console: never put sensitive data in them (R-N8).

/// The guide: one chapter per task, every example compiled and run as a test.
#[doc = include_str!("guide/index.md")]
pub mod guide {
    include!("guide.rs");
}

// The layers, bottom up: watch.rs, backend/, cache/, db/, scaling/, index_files.rs, façade (over the layers of datastore-entity-core: DEVELOPERS.md, "Layout").
// `layers/` checks that every file uses only files below it in that table. This file is the
// façade: each public item has one path, here at the root (and the prelude), except the
// backend's vocabulary (`backend`) and the migrations (`migrate`).
pub mod backend;
mod cache;
mod db;
mod index_files;
/// The service's rules, as this crate enforces them: the catalogue (no items).
pub mod rules;
mod scaling;
mod watch;

/// What benchmarks time that users never call: an entity's stored form, a commit request and
/// a lookup answer in the service's messages. Not a public API.
#[doc(hidden)]
pub mod bench_hooks;

pub use backend::retry::RetryPolicy;
pub use cache::CacheStats;
#[cfg(feature = "redis")]
pub use cache::redis::GlobalCache;
pub use datastore_entity_core::error::{Error, ServiceCode, StorageSource};
pub use datastore_entity_core::model::entity::{Entity, KeyField, Projection};
pub use datastore_entity_core::model::key::{
    IdOrName, KEY_PROPERTY, Key, KeyId, MAX_KEY_DEPTH, PartitionId, PathElement, RawKey,
};
pub use datastore_entity_core::model::name::{
    KeyName, MAX_NAME_BYTES, NameRole, NameViolation, validate as validate_name,
    validate_bytes as validate_name_bytes,
};
pub use datastore_entity_core::model::property_type::{
    Flat, Growth, Increasing, Indexable, Projectable, Projects, PropertyType, Shape, Steady,
    WholeEntity,
};
pub use datastore_entity_core::model::scalar::{Blob, GeoPoint, Timestamp, Vector, VectorField};
pub use datastore_entity_core::model::schema::{
    CachePolicy, CounterSchema, Direction, IndexSchema, IndexedProperty, PropertySchema,
    ReplicaSchema, Schema, ShardedIndexSchema, VectorIndexSchema,
};
pub use datastore_entity_core::model::value::MAX_NESTING;
pub use datastore_entity_core::model::value::{
    Annotations, DecodeError, Property, PropertyMap, Value,
};
pub use datastore_entity_core::model::walk::compare_values;
pub use datastore_entity_core::query::descriptor::{
    AtMost10, AtMost30, Count, Excluded, Filter, Flattened, InArray, InValues, IndexMarker,
    Indexed, Nested, NotExcluded, NotFlattened, NotInArray, NotInValues, Order, PropertyPath,
    Queryable,
};
pub use datastore_entity_core::query::explain::{ExecutionStats, Explanation};
pub use datastore_entity_core::query::results::{Cursor, Numeric, Page, SumError};
pub use datastore_entity_core::query::spec::{Distance, Operator};
pub use datastore_entity_core::query::transform::{Arithmetic, ArrayOf, ServerTime, Transform};
pub use datastore_entity_core::query_rule::QueryRule;
pub use datastore_entity_core::rules::commit::MAX_COMMIT_BYTES;
pub use datastore_entity_core::rules::filter::{
    MAX_DISJUNCTIONS, MAX_IN_VALUES, MAX_NOT_IN_VALUES,
};
pub use datastore_entity_core::rules::index_entries::{MAX_INDEX_ENTRIES, MAX_INDEXED_VALUES};
pub use datastore_entity_core::rules::limits::{
    MAX_ENTITY_BYTES, MAX_INDEXED_BYTES, MAX_LINK_BYTES,
};
#[doc = include_str!("derive_entity.md")]
pub use datastore_entity_derive::Entity;
#[doc = include_str!("derive_property_value.md")]
pub use datastore_entity_derive::PropertyValue;
#[cfg(feature = "cloud")]
pub use db::cloud::CloudBuilder;
pub use db::metadata::PropertyInfo;
pub use db::query::{KeysOnlyQuery, ProjectionQuery, Query};
pub use db::txn::{ReadTx, Tx};
pub use db::versioned::{Versioned, Written};
pub use db::{Db, ParentKey};
pub use futures_core::Stream;
pub use index_files::{firestore_indexes_json, index_yaml};
pub use scaling::bulk::{BulkWriter, Progress};
pub use scaling::migrate;
pub use scaling::ramp::{Limiter, RampUp};
pub use scaling::sharded_index::{ShardIndexable, ShardedQuery};
pub use watch::{Diagnostics, Finding, Rule, Thresholds};

/// `use datastore_entity::prelude::*;` brings what entity declarations and queries need.
pub mod prelude {
    pub use crate::{
        Blob, Cursor, Db, Entity, Error, GeoPoint, Key, KeyId, KeyName, Page, Projection,
        PropertyType, PropertyValue, RawKey, ReadTx, Timestamp, Tx,
    };
    /// What `stream()` users need: `next`, `try_next`, `try_collect`, …
    pub use futures_util::{StreamExt as _, TryStreamExt as _};
}

/// A key id checked at compile time: `key_id!(42)`; zero or a negative literal does not build (R-K2).
///
/// ```
/// assert_eq!(datastore_entity::key_id!(42).get(), 42);
/// ```
///
/// ```compile_fail
/// let id = datastore_entity::key_id!(0);
/// ```
#[macro_export]
macro_rules! key_id {
    ($id:expr) => {{
        const __ID: $crate::KeyId = $crate::__private::const_key_id($id);
        __ID
    }};
}

/// A key name checked at compile time: `key_name!("ann")`.
///
/// A literal that breaks a rule (R-N2, R-N5, R-N6, R-N7) fails constant evaluation,
/// so the program does not build.
///
/// ```
/// let name = datastore_entity::key_name!("ann");
/// assert_eq!(name.as_str(), "ann");
/// ```
///
/// ```compile_fail
/// let name = datastore_entity::key_name!("a/b");
/// ```
#[macro_export]
macro_rules! key_name {
    ($name:literal) => {{
        const _: () = $crate::__private::assert_key_name($name);
        $crate::__private::trusted_key_name($name)
    }};
}

/// What the derive's generated code reaches the runtime through. Not a public API.
#[doc(hidden)]
#[path = "private.rs"]
pub mod __private;
