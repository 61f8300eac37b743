//! What the derive's generated code reaches the runtime through: re-exports only (the runtime
//! half of the derive is `model/generated.rs`). Not a public API.

pub use crate::db::Db;
pub use crate::error::Error;
pub use crate::format::companion::companion_value;
pub use crate::model::entity::{Entity, KeyField, ParentShape, Projection, check_key_text};
pub use crate::model::generated::*;
pub use crate::model::in_order::InOrder;
pub use crate::model::key::{IdOrName, Key, KeyId, RawKey};
pub use crate::model::name::KeyName;
pub use crate::model::property_type::{
    Flat, Indexable, Projectable, Projects, PropertyType, ShardIndexable, Steady, WholeEntity,
};
pub use crate::model::scalar::{Blob, Timestamp, check_dimension};
pub use crate::model::schema::{
    CachePolicy, CounterSchema, Direction, IndexSchema, IndexedProperty, PropertySchema,
    ReplicaSchema, Schema, ShardedIndexSchema, VectorIndexSchema,
};
pub use crate::model::sink::{Form, ValueWriter};
pub use crate::model::stored::{StoredAt, ValueRef};
pub use crate::model::value::{
    DecodeError, ForeignForm, ForeignInOrder, ForeignMap, Piece, Property, PropertyMap, Value,
};
pub use crate::query::descriptor::{
    Excluded, Flattened, IndexMarker, Indexed, Nested, PropertyPath,
};
pub use crate::scaling::counter::{increment, total};
pub use crate::scaling::sharded_index::ShardedQuery;
pub use ::core::{
    convert::{From, Into},
    option::Option,
    result::Result,
    unreachable,
};
