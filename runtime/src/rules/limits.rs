//! The service's limits on one entity, checked before anything is sent (and by the embedded
//! engine itself): valid property names, indexed strings and byte strings of at most 1,500
//! bytes (R-I4), no array directly inside an array, no incomplete key as a value, and at
//! most 1 MiB in all.

use crate::error::Error;
use crate::model::key::RawKey;
use crate::model::name::{NameRole, validate};
use crate::model::stored::{ValueView, Writer};
use crate::model::value::{MAX_NESTING, PropertyMap};

/// Longest indexed string or byte string, in bytes (R-I4).
pub const MAX_INDEXED_BYTES: usize = 1500;

/// The largest entity the service stores, in bytes (its key and properties, encoded).
pub const MAX_ENTITY_BYTES: usize = 1_048_572;

/// Every limit on one entity the service would check.
pub(crate) fn check_entity(key: &RawKey, entity: &PropertyMap) -> Result<(), Error> {
    let mut path = Vec::new();
    properties(key.kind(), &mut path, entity.view(), false, false, 0)?;
    let size = Writer::key_len(key) + entity.encoded_size();
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

/// Only the nesting limit ([`MAX_NESTING`]): for callers of a backend's commit that did not
/// go through [`check_entity`], before anything recursive meets the value.
#[cfg(feature = "cloud")]
pub(crate) fn check_nesting(key: &RawKey, entity: &PropertyMap) -> Result<(), Error> {
    /// Whether `value` (at `path`, `depth` levels deep) nests too deep; `path` then leads to it.
    fn too_deep_at<'a>(path: &mut Vec<&'a str>, value: ValueView<'a>, depth: usize) -> bool {
        match value {
            ValueView::Array(values) => {
                depth >= MAX_NESTING || values.iter().any(|v| too_deep_at(path, v, depth + 1))
            }
            ValueView::Entity(inner) => {
                depth >= MAX_NESTING
                    || inner.iter().any(|(name, _, v)| {
                        path.push(name);
                        let deep = too_deep_at(path, v, depth + 1);
                        if !deep {
                            path.pop();
                        }
                        deep
                    })
            }
            _ => false,
        }
    }
    let mut path = Vec::new();
    for (name, _, value) in entity.view() {
        path.push(name);
        if too_deep_at(&mut path, value, 0) {
            return Err(too_deep(key.kind(), &path));
        }
        path.pop();
    }
    Ok(())
}

fn too_deep(kind: &str, path: &[&str]) -> Error {
    Error::InvalidValue {
        kind: kind.to_owned(),
        property: dotted(path),
        reason: format!(
            "more than {MAX_NESTING} array and embedded entity values nested in one another, \
             which the service refuses"
        ),
    }
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
    depth: usize,
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
        value(
            kind,
            path,
            v,
            excluded || property_excluded,
            in_array,
            depth,
        )?;
        path.pop();
    }
    Ok(())
}

/// Checks `value`, found `depth` array and entity values deep (so recursion stops at
/// [`MAX_NESTING`] levels, whatever the value holds).
fn value<'a>(
    kind: &str,
    path: &mut Vec<&'a str>,
    value: ValueView<'a>,
    excluded: bool,
    in_array: bool,
    depth: usize,
) -> Result<(), Error> {
    let too_large = |path: &[&str], len: usize| Error::IndexedValueTooLarge {
        kind: kind.to_owned(),
        property: dotted(path),
        len,
        max: MAX_INDEXED_BYTES,
    };
    if matches!(value, ValueView::Array(_) | ValueView::Entity(_)) && depth >= MAX_NESTING {
        return Err(too_deep(kind, path));
    }
    match value {
        ValueView::String(s) if !excluded && s.len() > MAX_INDEXED_BYTES => {
            Err(too_large(path, s.len()))
        }
        ValueView::Blob(b) if !excluded && b.len() > MAX_INDEXED_BYTES => {
            Err(too_large(path, b.len()))
        }
        ValueView::Key(key) if !key.to_key().is_some_and(|k| k.is_complete()) => {
            Err(Error::InvalidValue {
                kind: kind.to_owned(),
                property: dotted(path),
                reason: "an incomplete key (without an id or a name), which the service \
                         refuses as a value: store the key the write returned"
                    .to_owned(),
            })
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
            .try_for_each(|v| self::value(kind, path, v, excluded, true, depth + 1)),
        ValueView::Entity(inner) => properties(kind, path, inner.iter(), excluded, false, depth + 1),
        _ => Ok(()),
    }
}
