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
pub mod key;
pub mod name;
pub mod property;
pub mod query;
mod txn;
pub mod value;

pub use datastore_entity_derive::Entity;
pub use db::{Db, ParentKey};
pub use entity::{Entity, KeyField, PropertySchema, Schema};
pub use error::Error;
pub use futures_core::Stream;
pub use key::{IdOrName, Key, KeyId, PartitionId, PathElement, RawKey};
pub use name::KeyName;
pub use property::{
    Direction, Excluded, Filter, IndexMarker, Indexed, Operator, Order, PropertyPath, Queryable,
};
pub use query::{Cursor, KeysOnlyQuery, Page, Query};
pub use txn::{RetryPolicy, Tx};
pub use value::{
    Blob, DecodeError, GeoPoint, Property, PropertyMap, PropertyType, Timestamp, Value,
};

/// `use datastore_entity::prelude::*;` brings what entity declarations and queries need.
pub mod prelude {
    pub use crate::{
        Blob, Cursor, Db, Entity, Error, GeoPoint, Key, KeyId, KeyName, Page, PropertyType, RawKey,
        Timestamp, Tx,
    };
}

/// What the derive's generated code reaches the runtime through. Not a public API.
#[doc(hidden)]
pub mod __private {
    pub use crate::entity::{Entity, KeyField, PropertySchema, Schema};
    pub use crate::key::{IdOrName, Key, RawKey};
    pub use crate::property::{Excluded, Indexed, PropertyPath};
    pub use crate::value::{DecodeError, Property, PropertyMap, PropertyType, Value};
    pub use crate::{Blob, Error, KeyId, KeyName, Timestamp};
    pub use ::core::{convert::Into, option::Option, result::Result};

    use datastore_entity_names::{NameRole, check};

    /// Reads property `name` out of `properties` as a `T` (missing → `T::from_missing`).
    pub fn take<T: PropertyType>(
        properties: &mut PropertyMap,
        name: &str,
    ) -> Result<T, DecodeError> {
        match properties.remove(name) {
            Some(property) => T::from_value(property.value),
            None => T::from_missing(),
        }
    }

    /// Stores `value` under `name`.
    pub fn put<T: PropertyType>(
        properties: &mut PropertyMap,
        name: &str,
        value: &T,
        excluded: bool,
    ) {
        properties.insert(
            name.to_owned(),
            Property {
                value: value.to_value(),
                excluded,
            },
        );
    }

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
                Some(value) => Blob::from_value(value).map(Blob::into_vec),
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

    /// Stores a `#[blob]` field.
    pub fn put_blob<T: BlobField>(
        properties: &mut PropertyMap,
        name: &str,
        value: &T,
        excluded: bool,
    ) {
        properties.insert(
            name.to_owned(),
            Property {
                value: value.to_blob(),
                excluded,
            },
        );
    }

    /// Reads a `#[blob]` field.
    pub fn take_blob<T: BlobField>(
        properties: &mut PropertyMap,
        name: &str,
    ) -> Result<T, DecodeError> {
        T::from_blob(properties.remove(name).map(|p| p.value))
    }

    /// The types a `#[ttl]` field may have: the service expires the entity at that time.
    #[diagnostic::on_unimplemented(
        message = "`#[ttl]` needs a `Timestamp` or `Option<Timestamp>` field, not `{Self}`",
        label = "not a timestamp",
        note = "the service deletes the entity after the time in its TTL property"
    )]
    pub trait TtlField {
        /// Always true; reading it proves the field's type.
        const TTL: bool = true;
    }
    impl TtlField for Timestamp {}
    impl TtlField for Option<Timestamp> {}

    /// The key field's value from a stored key.
    pub fn key_field<K: KeyField>(key: &RawKey) -> Result<K, DecodeError> {
        K::from_id_or_name(key.id_or_name())
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

    /// A key built from the entity's fields.
    pub fn entity_key<E: Entity, K: KeyField>(
        parent: Option<&RawKey>,
        key: &K,
    ) -> Result<Key<E>, Error> {
        Ok(Key::new(parent, key.to_id_or_name()?))
    }

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
}
