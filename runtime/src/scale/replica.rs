//! `#[replicated(n)]` (R-S2): each entity is written with `n` read replicas in one commit, and
//! read from one of them chosen at random, so reads of a hot entity spread over `n` keys.
//!
//! A replica holds its owner's key and the owner's properties as one embedded entity, both
//! excluded from indexes: replicas cost no index entries and never show up in queries.

use super::{OWNER, check_owner};
use crate::entity::Schema;
use crate::value::{Property, PropertyMap, Value};
use crate::{Error, RawKey};

/// The property that holds the owner's properties.
const ENTITY: &str = "entity";

/// The kind of `schema`'s replicas.
pub(crate) fn kind(schema: &Schema) -> &'static str {
    schema.replicas.as_ref().map_or("", |r| r.kind)
}

/// A replica of the entity `owner` holding `properties`.
pub(crate) fn encode(owner: &RawKey, properties: &PropertyMap) -> PropertyMap {
    PropertyMap::from([
        (
            OWNER.to_owned(),
            Property::excluded(Value::Key(owner.clone())),
        ),
        (
            ENTITY.to_owned(),
            Property::excluded(Value::Entity(properties.clone())),
        ),
    ])
}

/// The owner's properties from its replica `key`.
pub(crate) fn decode(
    owner: &RawKey,
    key: &RawKey,
    mut replica: PropertyMap,
) -> Result<PropertyMap, Error> {
    check_owner(owner, key, &replica)?;
    match replica.remove(ENTITY).map(|p| p.value) {
        Some(Value::Entity(properties)) => Ok(properties),
        other => Err(Error::Decode {
            kind: key.kind().to_owned(),
            property: ENTITY.to_owned(),
            expected: "the replicated entity".to_owned(),
            found: other.map_or("nothing", |v| v.type_name()).to_owned(),
        }),
    }
}
