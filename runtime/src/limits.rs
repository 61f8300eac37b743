//! The service's limits on one entity, checked before anything is sent (and by the embedded
//! engine itself): valid property names, indexed strings and byte strings of at most 1,500
//! bytes (R-I4), no array directly inside an array, and at most 1 MiB in all.

use crate::codec::Writer;
use crate::name::{NameRole, validate};
use crate::value::{PropertyMap, Value};
use crate::{Error, RawKey};

/// Longest indexed string or byte string, in bytes (R-I4).
pub const MAX_INDEXED_BYTES: usize = 1500;

/// The largest entity the service stores, in bytes (its key and properties, encoded).
pub const MAX_ENTITY_BYTES: usize = 1_048_572;

/// Every limit on one entity the service would check.
pub(crate) fn check_entity(key: &RawKey, entity: &PropertyMap) -> Result<(), Error> {
    let kind = key.kind();
    properties(kind, "", entity, false, false)?;
    let mut w = Writer::default();
    w.key(key);
    w.properties(entity);
    // The crate's own encoding is within a few bytes of the service's for large entities;
    // the cloud backend checks the exact size of what it sends too.
    if w.bytes.len() > MAX_ENTITY_BYTES {
        return Err(Error::EntityTooLarge {
            key: format!("{key:?}"),
            size: w.bytes.len(),
            max: MAX_ENTITY_BYTES,
        });
    }
    Ok(())
}

fn properties(
    kind: &str,
    prefix: &str,
    map: &PropertyMap,
    excluded: bool,
    in_array: bool,
) -> Result<(), Error> {
    for (name, property) in map {
        validate(NameRole::Property, name)?;
        value(
            kind,
            &format!("{prefix}{name}"),
            &property.value,
            excluded || property.excluded,
            in_array,
        )?;
    }
    Ok(())
}

fn value(
    kind: &str,
    path: &str,
    value: &Value,
    excluded: bool,
    in_array: bool,
) -> Result<(), Error> {
    let too_large = |len: usize| Error::IndexedValueTooLarge {
        kind: kind.to_owned(),
        property: path.to_owned(),
        len,
        max: MAX_INDEXED_BYTES,
    };
    match value {
        Value::String(s) if !excluded && s.len() > MAX_INDEXED_BYTES => Err(too_large(s.len())),
        Value::Blob(b) if !excluded && b.len() > MAX_INDEXED_BYTES => Err(too_large(b.len())),
        Value::Array(_) if in_array => Err(Error::InvalidValue {
            kind: kind.to_owned(),
            property: path.to_owned(),
            reason: "an array directly inside an array, which the service refuses; wrap each \
                     inner array in an embedded entity (a struct deriving `Entity` without `#[key]`)"
                .to_owned(),
        }),
        Value::Array(values) => values
            .iter()
            .try_for_each(|v| self::value(kind, path, v, excluded, true)),
        Value::Entity(inner) => properties(kind, &format!("{path}."), inner, excluded, false),
        _ => Ok(()),
    }
}
