//! python-ndb's global cache protocol (`google-cloud-ndb` 2.7.1, `google/cloud/ndb/_cache.py`),
//! byte for byte, so that NDB and this crate share one Redis:
//!
//! - an entity key's cache key is `NDB30` followed by its `google.datastore.v1.Key` encoded
//!   (the project always, the database and the namespace when not the default);
//! - a cached entity is its `google.datastore.v1.Entity` encoded, as a lookup returns it; a
//!   missing entity is never cached;
//! - `0-` followed by a UUID is a reader's lock (taken before it looks the entity up, replaced
//!   by the entity if nothing changed meanwhile); `00` followed by one `.UUID` per writer is
//!   the writers' lock (taken before a commit, each writer's part removed after it); an empty
//!   value is "written recently": every lock and that value expire after 64 s.
//!
//! NDB runs each step as a `WATCH`/`MULTI`/`EXEC` transaction on its own connection; this crate
//! runs the same step as one Lua script, which Redis runs atomically: a step of one never
//! interleaves with a step of the other, and each compares the value it replaces, as NDB does.

use std::time::Duration;

use gcloud_sdk::google::datastore::v1 as pb;
use gcloud_sdk::prost::Message;

/// What every cache key starts with.
pub(crate) const PREFIX: &[u8] = b"NDB30";
/// What a reader's lock starts with.
const LOCKED_FOR_READ: &[u8] = b"0-";
/// What the writers' lock starts with.
const LOCKED_FOR_WRITE: &[u8] = b"00";
/// How long a lock, and the empty value a writer leaves, live (NDB's `_LOCK_TIME`).
pub(crate) const LOCK_TIME: Duration = Duration::from_secs(64);

/// The cache key of an entity key (NDB's `global_cache_key`).
pub(crate) fn cache_key(key: &pb::Key) -> Vec<u8> {
    let mut key = key.clone();
    if let Some(partition) = &mut key.partition_id
        && partition.database_id == "(default)"
    {
        // NDB writes the default database as no database.
        partition.database_id.clear();
    }
    [PREFIX, &key.encode_to_vec()].concat()
}

/// What a value read from the cache says about an entity.
#[derive(Debug, PartialEq)]
pub(crate) enum Cached {
    /// Nothing is known (no value, or the empty value a writer left): read the entity and
    /// offer it, under a reader's lock.
    Unknown,
    /// A reader or writers hold it: read the entity, offer nothing.
    Locked,
    /// The entity.
    Entity(pb::Entity),
}

/// What `value` (read under an entity's cache key) says; `None`: a value that is not an
/// entity, which is read around, never trusted.
pub(crate) fn read(value: Option<&[u8]>) -> Option<Cached> {
    match value {
        None | Some([]) => Some(Cached::Unknown),
        Some(v) if is_locked(v) => Some(Cached::Locked),
        Some(v) => pb::Entity::decode(v).ok().map(Cached::Entity),
    }
}

/// Whether a cached value is a lock (NDB's `is_locked_value`).
pub(crate) fn is_locked(value: &[u8]) -> bool {
    value.starts_with(LOCKED_FOR_READ) || value.starts_with(LOCKED_FOR_WRITE)
}

/// A cached entity, as NDB caches it.
pub(crate) fn entity_bytes(entity: &pb::Entity) -> Vec<u8> {
    entity.encode_to_vec()
}

/// A new reader's lock: `0-` and a UUID.
pub(crate) fn read_lock() -> Vec<u8> {
    [LOCKED_FOR_READ, uuid().as_bytes()].concat()
}

/// A new writer's part of the writers' lock: `.` and a UUID.
pub(crate) fn write_token() -> Vec<u8> {
    [b".".as_slice(), uuid().as_bytes()].concat()
}

/// A random (version 4) UUID as text, as Python's `str(uuid.uuid4())`. Tokens must differ
/// between processes: the random bits are mixed with the process id and the time, which a
/// process forked with its parent's random state does not share.
fn uuid() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mixed = (u64::from(std::process::id()) << 32) ^ nanos;
    let high = fastrand::u64(..) ^ mixed.rotate_left(17);
    let low = fastrand::u64(..) ^ mixed;
    let mut bytes: [u8; 16] = [high.to_le_bytes(), low.to_le_bytes()]
        .concat()
        .try_into()
        .expect("16 bytes");
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

/// Takes a reader's lock (`ARGV[1]`, for `ARGV[2]` seconds) on each key (`KEYS`) that holds no
/// value or the empty value; returns, per key, 1 if it did.
pub(crate) const READ_LOCK: &str = r"
local taken = {}
for i, key in ipairs(KEYS) do
  local value = redis.call('GET', key)
  if value == false or value == '' then
    redis.call('SET', key, ARGV[1], 'EX', ARGV[2])
    taken[i] = 1
  else
    taken[i] = 0
  end
end
return taken
";

/// Replaces each reader's lock `ARGV[1]` still on a key (`KEYS[i]`) with the entity
/// `ARGV[i + 2]`, for `ARGV[2]` seconds (0: for good); an empty entity releases the lock
/// instead (the entity does not exist: a missing entity is not cached — NDB leaves its reader's
/// lock to expire, which keeps other readers on the database meanwhile; both are safe). Returns
/// how many it replaced.
pub(crate) const FILL: &str = r"
local filled = 0
for i, key in ipairs(KEYS) do
  if redis.call('GET', key) == ARGV[1] then
    local entity = ARGV[i + 2]
    if entity == '' then
      redis.call('DEL', key)
    elseif tonumber(ARGV[2]) > 0 then
      redis.call('SET', key, entity, 'EX', ARGV[2])
      filled = filled + 1
    else
      redis.call('SET', key, entity)
      filled = filled + 1
    end
  end
end
return filled
";

/// Adds the writer's part `ARGV[1]` to the writers' lock on each key (`KEYS`), which replaces
/// any other value, for `ARGV[2]` seconds.
pub(crate) const WRITE_LOCK: &str = r"
for _, key in ipairs(KEYS) do
  local value = redis.call('GET', key)
  if value and string.sub(value, 1, 2) == '00' then
    value = value .. ARGV[1]
  else
    value = '00' .. ARGV[1]
  end
  redis.call('SET', key, value, 'EX', ARGV[2])
end
return #KEYS
";

/// Removes the writer's part `ARGV[1]` (every occurrence, as NDB's `bytes.replace`) from the
/// writers' lock on each key (`KEYS`); the last
/// writer leaves the empty value ("written recently"), for `ARGV[2]` seconds, as does a key
/// whose lock expired and was replaced meanwhile.
pub(crate) const WRITE_UNLOCK: &str = r"
for _, key in ipairs(KEYS) do
  local old = redis.call('GET', key)
  if old then
    local value = old
    local at = string.find(value, ARGV[1], 1, true)
    while at do
      value = string.sub(value, 1, at - 1) .. string.sub(value, at + string.len(ARGV[1]))
      at = string.find(value, ARGV[1], 1, true)
    end
    if value == '00' or string.sub(value, 1, 2) ~= '00' then
      value = ''
    end
    if value ~= old then
      redis.call('SET', key, value, 'EX', ARGV[2])
    end
  end
end
return #KEYS
";

#[cfg(test)]
mod tests {
    use super::*;

    fn key(id_type: pb::key::path_element::IdType, namespace: &str, database: &str) -> pb::Key {
        pb::Key {
            partition_id: Some(pb::PartitionId {
                project_id: "p".into(),
                database_id: database.into(),
                namespace_id: namespace.into(),
            }),
            path: vec![pb::key::PathElement {
                kind: "Task".into(),
                id_type: Some(id_type),
            }],
        }
    }

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The keys python-ndb 2.7.1 computes (`_cache.global_cache_key(key._key)`, run in the
    /// tests' virtualenv) for the same entity keys.
    #[test]
    fn cache_keys_are_ndbs() {
        use pb::key::path_element::IdType::{Id, Name};
        let cases = [
            (
                key(Name("a".into()), "", ""),
                "4e444233300a0312017012090a045461736b1a0161",
            ),
            (
                key(Id(7), "", ""),
                "4e444233300a0312017012080a045461736b1007",
            ),
            (
                key(Name("a".into()), "ns", ""),
                "4e444233300a0712017022026e7312090a045461736b1a0161",
            ),
            (
                key(Name("a".into()), "", "db1"),
                "4e444233300a081201701a0364623112090a045461736b1a0161",
            ),
            (
                key(Name("a".into()), "", "(default)"),
                "4e444233300a0312017012090a045461736b1a0161",
            ),
            (
                key(Id(i64::MAX), "", ""),
                "4e444233300a0312017012100a045461736b10ffffffffffffffff7f",
            ),
        ];
        for (key, expected) in cases {
            assert_eq!(hex(&cache_key(&key)), expected, "{key:?}");
        }
    }

    #[test]
    fn values_are_read_as_ndb_reads_them() {
        assert_eq!(read(None), Some(Cached::Unknown));
        assert_eq!(read(Some(b"")), Some(Cached::Unknown));
        assert_eq!(read(Some(&read_lock())), Some(Cached::Locked));
        let writers = [b"00".as_slice(), &write_token(), &write_token()].concat();
        assert_eq!(read(Some(&writers)), Some(Cached::Locked));
        // NDB's Task(key=Key('Task', 'a'), title="hello", n=5), as it caches it.
        let ndb = "0a100a0312017012090a045461736b1a01611a110a057469746c6512088a010568656c6c6f\
                   1a070a016e12021005";
        let bytes: Vec<u8> = (0..ndb.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&ndb[i..i + 2], 16).unwrap())
            .collect();
        let Some(Cached::Entity(entity)) = read(Some(&bytes)) else {
            panic!("an entity");
        };
        assert_eq!(entity.properties.len(), 2);
        assert_eq!(pb::Entity::decode(&*entity_bytes(&entity)).unwrap(), entity);
        // Bytes that are no entity are not trusted.
        assert_eq!(read(Some(b"\xff\xff\xff")), None);
    }

    #[test]
    fn locks_are_shaped_as_ndbs() {
        let lock = read_lock();
        assert_eq!(lock.len(), 38);
        assert!(lock.starts_with(b"0-"));
        let token = write_token();
        assert_eq!(token.len(), 37);
        assert_eq!(token[0], b'.');
        let text = std::str::from_utf8(&token[1..]).unwrap();
        let groups: Vec<usize> = text.split('-').map(str::len).collect();
        assert_eq!(groups, [8, 4, 4, 4, 12]);
        assert_eq!(&text[14..15], "4", "a version 4 UUID");
        assert_ne!(write_token(), token);
    }
}
