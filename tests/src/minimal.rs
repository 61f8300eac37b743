//! The smallest entities with keys: an `Account` named by a key name, and a `Post` under it
//! with a numeric id — for the tests of keys themselves (equality, text, URL-safe, serde),
//! where the kinds' names show in the expected strings.

use datastore_entity::prelude::*;

/// A root entity named by its key name: kind `Account`.
#[derive(Entity, Debug, Clone, PartialEq)]
pub struct Account {
    /// The key name.
    #[key]
    pub name: KeyName,
}

/// A child of an `Account` with a numeric id: kind `Post`.
#[derive(Entity, Debug, Clone, PartialEq)]
pub struct Post {
    /// The parent.
    #[parent]
    pub account: Key<Account>,
    /// The id.
    #[key]
    pub id: KeyId,
}

/// `Account:"ann"`.
pub fn ann() -> Key<Account> {
    Account::key(KeyName::new("ann").expect("a valid name"))
}
