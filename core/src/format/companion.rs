//! The companion entities of the scale helpers, as they are stored — in the embedded engine
//! and in Google Cloud alike (R-S1, R-S2, R-S3):
//!
//! - a companion's key is a root key of its own kind (`Post.likes.shard`, `SiteConfig.replica`,
//!   named by the derive) whose name is scattered (R-K4) and spells its owner's path, so the
//!   companions of two owners never collide: [`companion_key`];
//! - each stores its owner's key under [`OWNER`], checked when it is read;
//! - a counter shard holds its part of the total under [`COUNT`]; a replica holds the owner's
//!   properties as one embedded entity under [`ENTITY`];
//! - a `#[sharded_index(n)]` field's companion property holds `"{shard}:{value}:{tiebreak}"`
//!   ([`companion_value`]).
//!
//! Every byte here names data already written: changing one orphans it (counters read as zero,
//! replicas fall back to their owner, sharded indexes skip old entities). `tests/tests/formats.rs`
//! pins them.

use base64::Engine as _;

use crate::error::Error;
use crate::hash::{fnv1a, fnv1a_128};
use crate::model::key::{IdOrName, RawKey};
use crate::model::name::KeyName;
use crate::model::schema::ShardedIndexSchema;
use crate::model::stored::Writer;
use crate::model::value::{Property, PropertyMap, Value};

/// The property of a companion entity that holds its owner's key.
pub const OWNER: &str = "owner";

/// The property of a counter shard that holds its part of the total.
pub const COUNT: &str = "count";

/// The property of a replica that holds the owner's properties.
pub const ENTITY: &str = "entity";

/// The name of companion `slot` of `owner`: a scattered prefix, then the owner's path.
fn companion_name(owner: &RawKey, slot: u32) -> KeyName {
    let mut path = Writer::default();
    path.path(owner);
    let spelled = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&path.bytes);
    // Key names hold at most 1,500 bytes: a very deep or long-named owner is spelled by a
    // 128-bit hash instead (and the stored owner key still guards against a collision).
    let natural = if spelled.len() <= 1_400 {
        format!("{spelled}.{slot}")
    } else {
        format!("h{:032x}.{slot}", fnv1a_128(&path.bytes))
    };
    // The natural name is base64url, digits, `.` and `h`: always a valid key name.
    KeyName::scattered(natural).unwrap_or_else(|_| KeyName::trusted(format!("{slot}")))
}

/// The key of companion `slot` of `owner`, of kind `kind`, in the owner's partition.
pub fn companion_key(owner: &RawKey, kind: &'static str, slot: u32) -> RawKey {
    RawKey::child(
        None,
        kind,
        Some(IdOrName::Name(companion_name(owner, slot))),
    )
    .with_partition(owner.partition().cloned().unwrap_or_default())
}

/// Checks that a companion read for `owner` really belongs to it.
pub fn check_owner(owner: &RawKey, key: &RawKey, properties: &PropertyMap) -> Result<(), Error> {
    match properties.get(OWNER).map(|p| &p.value) {
        Some(Value::Key(stored)) if stored.path() == owner.path() => Ok(()),
        other => Err(Error::Decode {
            key: Some(format!("{key:?}").into()),
            kind: key.kind().to_owned(),
            property: OWNER.to_owned(),
            expected: format!("the owner key {owner:?}"),
            found: match other {
                Some(Value::Key(stored)) => format!("{stored:?}"),
                Some(value) => value.type_name().to_owned(),
                None => "no owner".to_owned(),
            },
        }),
    }
}

/// A counter shard of `owner` holding `count`.
pub fn shard(owner: &RawKey, count: i64) -> PropertyMap {
    PropertyMap::from([
        (COUNT, Property::excluded(Value::Integer(count))),
        (OWNER, Property::excluded(Value::Key(owner.clone()))),
    ])
}

/// The part of the total a counter shard holds.
pub fn shard_count(key: &RawKey, properties: &PropertyMap) -> Result<i64, Error> {
    match properties.get(COUNT).map(|p| &p.value) {
        Some(Value::Integer(count)) => Ok(*count),
        other => Err(Error::Decode {
            key: Some(format!("{key:?}").into()),
            kind: key.kind().to_owned(),
            property: COUNT.to_owned(),
            expected: "integer".to_owned(),
            found: other.map_or("nothing", Value::type_name).to_owned(),
        }),
    }
}

/// A replica of the entity `owner` holding `properties`. Both properties are excluded from
/// indexes: replicas cost no index entries and never show up in queries.
pub fn replica(owner: &RawKey, properties: &PropertyMap) -> PropertyMap {
    PropertyMap::from([
        (OWNER, Property::excluded(Value::Key(owner.clone()))),
        (
            ENTITY,
            Property::excluded(Value::Entity(properties.clone())),
        ),
    ])
}

/// The owner's properties from its replica `key`.
pub fn from_replica(
    owner: &RawKey,
    key: &RawKey,
    mut replica: PropertyMap,
) -> Result<PropertyMap, Error> {
    check_owner(owner, key, &replica)?;
    match replica.remove(ENTITY).map(|p| p.value) {
        Some(value) if matches!(value, Value::Entity(_)) => {
            Ok(value.into_entity().unwrap_or_default())
        }
        other => Err(Error::Decode {
            key: Some(format!("{key:?}").into()),
            kind: key.kind().to_owned(),
            property: ENTITY.to_owned(),
            expected: "the replicated entity".to_owned(),
            found: other.map_or("nothing", |v| v.type_name()).to_owned(),
        }),
    }
}

/// A signed integer in offset binary, as 16 hex digits: byte order is numeric order.
pub fn sortable(n: i64) -> String {
    format!("{:016x}", n.cast_unsigned() ^ (1 << 63))
}

/// How many digits shard numbers of an index of `shards` shards take.
pub fn width(shards: u32) -> usize {
    shards.saturating_sub(1).max(1).to_string().len()
}

/// The companion value of `value` for the entity `key` (random tiebreak while incomplete):
/// `"{shard}:{value}:{tiebreak}"`, the shard with a fixed number of digits, the value as 16 hex
/// digits whose byte order is numeric order, and 16 hex digits of a hash of the entity's key
/// path, from which the shard is also taken.
pub fn companion_value(index: &ShardedIndexSchema, key: Option<&RawKey>, value: i64) -> Value {
    let shards = index.shards.max(1);
    let tiebreak = match key.filter(|k| k.is_complete()) {
        Some(key) => {
            let mut w = Writer::default();
            w.path(key);
            fnv1a(&w.bytes)
        }
        None => fastrand::u64(..),
    };
    let shard = tiebreak % u64::from(shards);
    Value::String(format!(
        "{shard:0w$}:{}:{tiebreak:016x}",
        sortable(value),
        w = width(shards)
    ))
}
