//! The one error type of the crate.

use datastore_entity_names::{NameRole, NameViolation};

/// Everything that can go wrong, each variant saying what, which value, and how to fix it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A kind, property, key name or namespace breaks a naming rule (R-N1..R-N7).
    #[error("the {} `{value}` {violation}{}", role.noun(), fix_hint(.role, .value))]
    InvalidName {
        /// What the name was for.
        role: NameRole,
        /// The rejected name (lossily decoded when it was not UTF-8).
        value: String,
        /// The rule it breaks.
        violation: NameViolation,
    },

    /// A numeric id outside `1..=i64::MAX` (R-K2).
    #[error(
        "the id {value} is not valid: numeric ids must be between 1 and {} [R-K2]; \
         leave the id empty (`Option<KeyId>` = None) to let the service allocate one",
        i64::MAX
    )]
    InvalidId {
        /// The rejected id.
        value: i128,
    },

    /// A geo point outside latitude `-90..=90` / longitude `-180..=180`.
    #[error(
        "the geo point ({lat}, {lng}) is out of range: latitude must be in -90..=90 and longitude in -180..=180"
    )]
    InvalidGeoPoint {
        /// The latitude given.
        lat: f64,
        /// The longitude given.
        lng: f64,
    },

    /// A key that cannot be used as given.
    #[error("invalid key {key}: {reason}")]
    InvalidKey {
        /// The key, in the `Kind:id/Kind:"name"` notation.
        key: String,
        /// What is wrong with it and how to fix it.
        reason: String,
    },

    /// A stored property could not be turned into the field's Rust type.
    #[error(
        "cannot load property `{property}` of kind `{kind}`: expected {expected}, found {found}; \
         the stored data and the struct disagree, fix the field's type or the data"
    )]
    Decode {
        /// The kind being loaded.
        kind: String,
        /// The property (dotted path for embedded entities, `[i]` for array elements).
        property: String,
        /// The type the field expects.
        expected: String,
        /// What the store holds.
        found: String,
    },
}

/// A `; use ... instead` suffix when the name can be fixed mechanically.
fn fix_hint(role: &NameRole, value: &str) -> String {
    match datastore_entity_names::suggest(*role, value) {
        Some(fixed) => format!("; use `{fixed}` instead"),
        None => String::new(),
    }
}

impl Error {
    /// Builds [`Error::InvalidName`].
    pub(crate) fn name(role: NameRole, value: impl Into<String>, violation: NameViolation) -> Self {
        Error::InvalidName {
            role,
            value: value.into(),
            violation,
        }
    }
}
