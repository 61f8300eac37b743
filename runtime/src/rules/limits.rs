//! The service's limits on one entity, checked before anything is sent (and by the embedded
//! engine itself): valid property names, indexed strings and byte strings of at most 1,500
//! bytes (R-I4), no array directly inside an array, and at most 1 MiB in all.

use crate::error::Error;
use crate::model::key::RawKey;
use crate::model::name::{NameRole, validate};
use crate::model::stored::{ValueView, Writer};
use crate::model::value::PropertyMap;

/// Longest indexed string or byte string, in bytes (R-I4).
pub const MAX_INDEXED_BYTES: usize = 1500;

/// The largest entity the service stores, in bytes (its key and properties, encoded).
pub const MAX_ENTITY_BYTES: usize = 1_048_572;

/// Every limit on one entity the service would check.
pub(crate) fn check_entity(key: &RawKey, entity: &PropertyMap) -> Result<(), Error> {
    let mut path = Vec::new();
    properties(key.kind(), &mut path, entity.view(), false, false)?;
    let mut w = Writer::default();
    w.key(key);
    let size = w.bytes.len()
        + match entity.stored_bytes() {
            Some(stored) => stored.len(),
            None => {
                w.properties(entity);
                w.bytes.len()
            }
        };
    // The crate's own encoding is within a few bytes of the service's for large entities;
    // the cloud backend checks the exact size of what it sends too.
    if size > MAX_ENTITY_BYTES {
        return Err(Error::EntityTooLarge {
            key: format!("{key:?}"),
            size,
            max: MAX_ENTITY_BYTES,
        });
    }
    Ok(())
}

/// The dotted path of the property being checked, built only for an error.
fn dotted(path: &[&str]) -> String {
    path.join(".")
}

fn properties<'a>(
    kind: &str,
    path: &mut Vec<&'a str>,
    map: impl Iterator<Item = (&'a str, bool, ValueView<'a>)>,
    excluded: bool,
    in_array: bool,
) -> Result<(), Error> {
    for (name, property_excluded, v) in map {
        if path.is_empty() {
            // A top-level `field.sub` is a flattened embedded entity (`#[property(flatten)]`,
            // NDB's legacy layout): each of its names follows the rules.
            for segment in name.split('.') {
                validate(NameRole::Property, segment)?;
            }
        } else {
            validate(NameRole::Property, name)?;
        }
        path.push(name);
        value(kind, path, v, excluded || property_excluded, in_array)?;
        path.pop();
    }
    Ok(())
}

fn value<'a>(
    kind: &str,
    path: &mut Vec<&'a str>,
    value: ValueView<'a>,
    excluded: bool,
    in_array: bool,
) -> Result<(), Error> {
    let too_large = |path: &[&str], len: usize| Error::IndexedValueTooLarge {
        kind: kind.to_owned(),
        property: dotted(path),
        len,
        max: MAX_INDEXED_BYTES,
    };
    match value {
        ValueView::String(s) if !excluded && s.len() > MAX_INDEXED_BYTES => {
            Err(too_large(path, s.len()))
        }
        ValueView::Blob(b) if !excluded && b.len() > MAX_INDEXED_BYTES => {
            Err(too_large(path, b.len()))
        }
        ValueView::Array(_) if in_array => Err(Error::InvalidValue {
            kind: kind.to_owned(),
            property: dotted(path),
            reason: "an array directly inside an array, which the service refuses; wrap each \
                     inner array in an embedded entity (a struct deriving `Entity` without `#[key]`)"
                .to_owned(),
        }),
        ValueView::Array(values) => values
            .iter()
            .try_for_each(|v| self::value(kind, path, v, excluded, true)),
        ValueView::Entity(inner) => properties(kind, path, inner.iter(), excluded, false),
        _ => Ok(()),
    }
}
