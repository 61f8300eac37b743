//! What the derive's generated code reaches the runtime through: re-exports only (the runtime
//! half of the derive is `model/generated.rs`). Not a public API.

pub use crate::db::Db;
pub use crate::scaling::counter::{increment, total};
pub use crate::scaling::sharded_index::ShardedQuery;
pub use ::core::{
    convert::{From, Into},
    option::Option,
    result::Result,
    unreachable,
};
pub use datastore_entity_core::error::Error;
pub use datastore_entity_core::format::companion::companion_value;
pub use datastore_entity_core::model::entity::{
    Entity, KeyField, ParentShape, Projection, check_key_text,
};
pub use datastore_entity_core::model::generated::*;
pub use datastore_entity_core::model::in_order::InOrder;
pub use datastore_entity_core::model::key::{IdOrName, Key, KeyId, RawKey};
pub use datastore_entity_core::model::name::KeyName;
pub use datastore_entity_core::model::property_type::{
    Flat, Indexable, Projectable, Projects, PropertyType, ShardIndexable, Steady, WholeEntity,
};
pub use datastore_entity_core::model::scalar::{Blob, Timestamp, check_dimension};
pub use datastore_entity_core::model::schema::{
    CachePolicy, CounterSchema, Direction, IndexSchema, IndexedProperty, PropertySchema,
    ReplicaSchema, Schema, ShardedIndexSchema, VectorIndexSchema,
};
pub use datastore_entity_core::model::sink::{Form, ValueWriter};
pub use datastore_entity_core::model::stored::{StoredAt, ValueRef};
pub use datastore_entity_core::model::value::{
    DecodeError, ForeignForm, ForeignInOrder, ForeignMap, Piece, Property, PropertyMap, Value,
};
pub use datastore_entity_core::query::descriptor::{
    Excluded, Flattened, IndexMarker, Indexed, Nested, PropertyPath,
};
