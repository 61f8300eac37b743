//! Validated names: the runtime side of the naming rules (R-N1..R-N8).
//!
//! The rules themselves live in `datastore-entity-names`, which the derive uses too,
//! so a name the compiler accepts is exactly a name this module accepts.

use std::fmt;

pub use datastore_entity_names::is_reserved_name;
pub use datastore_entity_names::{MAX_NAME_BYTES, NameRole, NameViolation};

use crate::error::Error;
use crate::hash::scattered_name;

/// Checks `name` for `role`, as [`Error::InvalidName`].
pub fn validate(role: NameRole, name: &str) -> Result<(), Error> {
    datastore_entity_names::check(role, name).map_err(|v| Error::name(role, name, v))
}

/// Checks a name given as bytes: it must be UTF-8 (R-N1) and follow the rules of `role`.
///
/// ```
/// use datastore_entity::{validate_name_bytes, NameRole};
/// assert_eq!(validate_name_bytes(NameRole::Kind, b"Account").unwrap(), "Account");
/// assert!(validate_name_bytes(NameRole::Kind, b"Acc\xffount").is_err());
/// ```
pub fn validate_bytes(role: NameRole, bytes: &[u8]) -> Result<&str, Error> {
    datastore_entity_names::check_bytes(role, bytes)
        .map_err(|v| Error::name(role, String::from_utf8_lossy(bytes), v))
}

/// The custom name of a key: UTF-8, 1 to 1,500 bytes, no `/`, not `.` or `..`,
/// not `__.*__` (R-N2, R-N5, R-N6, R-N7).
///
/// Do not put sensitive data (emails, personal names) in key names: they appear in
/// logs, URLs and the console (R-N8). The crate itself only logs key names at `debug`.
///
/// ```
/// use datastore_entity::KeyName;
/// assert_eq!(KeyName::new("ann").unwrap().as_str(), "ann");
/// assert!(KeyName::new("a/b").is_err());
/// ```
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KeyName(String);

impl KeyName {
    /// Validates `name` as a key name.
    pub fn new(name: impl Into<String>) -> Result<KeyName, Error> {
        let name = name.into();
        validate(NameRole::KeyName, &name)?;
        Ok(KeyName(name))
    }

    /// Validates a key name given as bytes (R-N1 first).
    pub fn from_bytes(bytes: &[u8]) -> Result<KeyName, Error> {
        validate_bytes(NameRole::KeyName, bytes).map(|s| KeyName(s.to_owned()))
    }

    /// A key name for a natural, possibly sequential value (`Customer1`, an order number…),
    /// prefixed with a short stable hash so that consecutive values land far apart in the
    /// key space (R-K4). The same `natural` always gives the same name.
    ///
    /// ```
    /// use datastore_entity::KeyName;
    /// let a = KeyName::scattered("Customer1").unwrap();
    /// assert_eq!(a, KeyName::scattered("Customer1").unwrap());
    /// assert!(a.as_str().ends_with("-Customer1"));
    /// ```
    pub fn scattered(natural: impl AsRef<str>) -> Result<KeyName, Error> {
        let natural = natural.as_ref();
        KeyName::new(scattered_name(natural))
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The name, as an owned string.
    pub fn into_string(self) -> String {
        self.0
    }

    /// A name as another client stored it: reads are lenient, so it may break the rules for
    /// new names (a `/`, say); writes check it again (`RawKey::check_writable`).
    pub fn stored(name: String) -> KeyName {
        KeyName(name)
    }

    /// Wraps a name the caller has already validated.
    pub fn trusted(name: String) -> KeyName {
        debug_assert!(datastore_entity_names::check(NameRole::KeyName, &name).is_ok());
        KeyName(name)
    }
}

impl fmt::Debug for KeyName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl fmt::Display for KeyName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for KeyName {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for KeyName {
    type Error = Error;
    fn try_from(name: String) -> Result<Self, Error> {
        KeyName::new(name)
    }
}

impl TryFrom<&str> for KeyName {
    type Error = Error;
    fn try_from(name: &str) -> Result<Self, Error> {
        KeyName::new(name)
    }
}

impl std::str::FromStr for KeyName {
    type Err = Error;
    fn from_str(name: &str) -> Result<Self, Error> {
        KeyName::new(name)
    }
}
