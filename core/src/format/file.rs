//! The layout of an embedded engine's store — a `Db::open` file, and the same tables in
//! memory: the table names, the meta table's keys, and the format marker a file starts with.
//! Keys and values of the index tables are `keycode.rs`'s order-preserving encoding; an
//! entity's value is the stored form (`model/stored.rs`).
//!
//! - `entities`: partition + key path → the entity's properties (its stored form), then its
//!   create and update times ([`with_times`]).
//! - `kinds`: partition + kind + key path → nothing: every entity of a kind, in key order.
//! - `properties`: partition + kind + property + value + key path → nothing: the built-in
//!   single-property index, one entry per distinct indexed value.
//! - `composite:{hash}`: one table per declared composite index ([`composite_table`]).
//! - `log`: sequence number (big-endian) → one commit's writes, not yet applied to the tables
//!   above (`backend/embedded/logged.rs`: its record's layout, and when it is applied).
//! - `meta`: [`FORMAT_KEY`] → [`FORMAT`]; [`IDS_KEY`] → the id allocator's counter;
//!   [`CLOCK_KEY`] → the time of the last commit;
//!   [`RESERVED_PREFIX`] + id → reserved ids; [`INDEX_PREFIX`] + table → a declared index.
//!
//! In a file, every value but the meta table's is sealed ([`seal`]): an entity's stored form
//! (and a logged commit) is followed by a CRC-32 of its key and form, an index entry's value
//! is a CRC-32 of its key,
//! so that damage to either is an error on read, never altered data.
//!
//! A file written by one version is read by the next: `tests/tests/formats.rs` pins every
//! table's bytes, and a change of layout must change [`FORMAT`] (and read the old one).

use crate::hash::fnv1a_128;

/// Every entity, by key.
pub const ENTITIES: &str = "entities";
/// Every entity of a kind, in key order.
pub const KINDS: &str = "kinds";
/// The built-in single-property index.
pub const PROPERTIES: &str = "properties";
/// The engine's own state.
pub const META: &str = "meta";
/// Commits written to the file but not yet to its tables, in order.
pub const LOG: &str = "log";

/// What a file of this engine holds under [`FORMAT_KEY`]; a file of another format is refused.
/// Format 2 seals every entity and index entry with a checksum ([`seal`]); format 3 keeps each
/// entity's create and update times after its stored form ([`with_times`]); format 4 may
/// hold commits in its [`LOG`] table that its other tables do not have yet (a binary that
/// reads only the tables must refuse it); format 5 may hold, in a stored form, what other
/// clients wrote beside a value (`model/annotations.rs`: meanings, an array's per-element
/// exclusion), which a binary of format 4 would read as corrupt.
pub const FORMAT: &[u8] = b"datastore-entity embedded 5";
/// The format before checksums, migrated when a file of it is opened.
pub const FORMAT_1: &[u8] = b"datastore-entity embedded 1";
/// The format before entities kept their times, migrated when a file of it is opened.
pub const FORMAT_2: &[u8] = b"datastore-entity embedded 2";
/// The format before the log, whose tables hold every commit; migrated by marking it.
pub const FORMAT_3: &[u8] = b"datastore-entity embedded 3";
/// The format before annotations, whose stored forms hold none; migrated by marking it.
pub const FORMAT_4: &[u8] = b"datastore-entity embedded 4";
/// The meta key of the format marker.
pub const FORMAT_KEY: &[u8] = b"format";
/// The meta key of the id allocator's counter.
pub const IDS_KEY: &[u8] = b"ids";
/// The meta key of the last commit's time (microseconds, big-endian).
pub const CLOCK_KEY: &[u8] = b"clock";
/// The meta key of the file's identity: 16 random bytes, written when the file is first
/// opened, naming its data where several engines share a cache (engines before it ignore it).
pub const IDENTITY_KEY: &[u8] = b"identity";
/// The meta keys of reserved ids (then the id, big-endian).
pub const RESERVED_PREFIX: &[u8] = b"reserved:";
/// The meta keys of declared composite indexes (then the index's table name).
pub const INDEX_PREFIX: &[u8] = b"index:";

/// How many bytes follow an entity's stored form in the entities table: its create time and
/// its update time, in microseconds since the epoch, little-endian.
pub const TIMES: usize = 16;

/// An entity's value in the entities table: its stored form `form`, then when it was created
/// and last written (microseconds).
pub fn with_times(mut form: Vec<u8>, created: i64, updated: i64) -> Vec<u8> {
    form.reserve_exact(TIMES);
    form.extend_from_slice(&created.to_le_bytes());
    form.extend_from_slice(&updated.to_le_bytes());
    form
}

/// An entities-table value split into the stored form and the create and update times;
/// `None` if it is too short to hold them.
#[inline]
pub fn split_times(value: &[u8]) -> Option<(&[u8], i64, i64)> {
    let (form, times) = value.split_at_checked(value.len().checked_sub(TIMES)?)?;
    let (created, updated) = times.split_at(TIMES / 2);
    Some((
        form,
        i64::from_le_bytes(created.try_into().ok()?),
        i64::from_le_bytes(updated.try_into().ok()?),
    ))
}

/// The table of a composite index, named by a hash of its definition (kind, ancestor,
/// columns and directions, in their order-preserving encoding).
pub fn composite_table(definition: &[u8]) -> String {
    format!("composite:{:032x}", fnv1a_128(definition))
}

/// The value a file stores for `value` under `key` in `table`: an entity's form (or a logged
/// commit) followed by a CRC-32 of its key and form; for an index entry (whose key is all its data), the CRC-32 of
/// the key. The meta table is not sealed.
pub fn seal(table: &str, key: &[u8], value: &[u8]) -> Vec<u8> {
    match Sealing::of(table) {
        Sealing::None => value.to_vec(),
        Sealing::Value => {
            let mut sealed = Vec::with_capacity(value.len() + 4);
            sealed.extend_from_slice(value);
            sealed.extend_from_slice(&checksum(key, value).to_le_bytes());
            sealed
        }
        Sealing::Key => checksum(key, &[]).to_le_bytes().to_vec(),
    }
}

/// How a table's values are sealed.
#[derive(Clone, Copy)]
enum Sealing {
    /// Not at all (the meta table).
    None,
    /// The value, then the checksum of its key and itself (entities, the log).
    Value,
    /// Only the checksum of the key (index entries, whose key is all their data).
    Key,
}

impl Sealing {
    fn of(table: &str) -> Sealing {
        match table {
            META => Sealing::None,
            ENTITIES | LOG => Sealing::Value,
            _ => Sealing::Key,
        }
    }
}

/// What [`seal`] sealed, checked: the value the engine wrote, or `None` if the key or the
/// value was damaged.
pub fn unseal<'v>(table: &str, key: &[u8], sealed: &'v [u8]) -> Option<&'v [u8]> {
    unseal_with(Sealing::of(table), sealed, |value| checksum(key, value))
}

/// [`unseal`] for the entries of one scan of `table`, in order, whose keys start with
/// `prefix` (the bounds' shared prefix). A key's checksum is computed only from where it
/// leaves the key read before it: the checksum's state after the bytes they share is kept.
pub struct Unsealer<'a> {
    sealing: Sealing,
    prefix: &'a [u8],
    /// The length of the keys the states below are for, and the state after that length and
    /// `prefix`.
    primed: Option<(usize, crc32fast::Hasher)>,
    /// The last key's tail (what follows `prefix`), and the state after its first `at` bytes.
    last: Vec<u8>,
    at: usize,
    shared: crc32fast::Hasher,
}

impl<'a> Unsealer<'a> {
    pub fn new(table: &'a str, prefix: &'a [u8]) -> Unsealer<'a> {
        Unsealer {
            sealing: Sealing::of(table),
            prefix,
            primed: None,
            last: Vec::new(),
            at: 0,
            shared: crc32fast::Hasher::new(),
        }
    }

    /// The prefix every key read starts with.
    pub fn prefix(&self) -> &'a [u8] {
        self.prefix
    }

    /// [`unseal`] of `sealed`, read under the key `prefix` + `tail`.
    pub fn unseal<'v>(&mut self, tail: &[u8], sealed: &'v [u8]) -> Option<&'v [u8]> {
        let len = self.prefix.len() + tail.len();
        let primed = match &self.primed {
            Some((primed_len, hasher)) if *primed_len == len => hasher,
            _ => {
                let hasher = primed(len, self.prefix);
                self.shared = hasher.clone();
                self.at = 0;
                &self.primed.insert((len, hasher)).1
            }
        };
        let common = common_prefix(&self.last, tail);
        if common < self.at {
            // The kept state is past where this key leaves the last one: start again.
            self.shared = primed.clone();
            self.shared.update(&tail[..common]);
        } else if common > self.at {
            self.shared.update(&tail[self.at..common]);
        }
        self.at = common;
        // The bytes both keys start with are in place already.
        self.last.truncate(common);
        self.last.extend_from_slice(&tail[common..]);
        let shared = &self.shared;
        unseal_with(self.sealing, sealed, |value| {
            finished(shared.clone(), &tail[common..], value)
        })
    }
}

/// How many bytes `a` and `b` start with in common.
pub fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let words = a.as_chunks::<8>().0.iter().zip(b.as_chunks::<8>().0);
    let mut common = 0;
    for (x, y) in words {
        let differ = u64::from_le_bytes(*x) ^ u64::from_le_bytes(*y);
        if differ != 0 {
            return common + differ.trailing_zeros() as usize / 8;
        }
        common += 8;
    }
    // The last 8 bytes, overlapping the words compared (equal up to `common`).
    if common < n
        && let (Some(x), Some(y)) = (a.last_chunk::<8>(), b.last_chunk::<8>())
    {
        let differ = u64::from_le_bytes(*x) ^ u64::from_le_bytes(*y);
        return match differ {
            0 => n,
            _ => n - 8 + differ.trailing_zeros() as usize / 8,
        };
    }
    common
        + a[common..]
            .iter()
            .zip(&b[common..])
            .take_while(|(x, y)| x == y)
            .count()
}

/// [`unseal`], with `sum` the checksum of a key (known to the caller) and a value.
fn unseal_with(sealing: Sealing, sealed: &[u8], sum: impl FnOnce(&[u8]) -> u32) -> Option<&[u8]> {
    match sealing {
        Sealing::None => Some(sealed),
        Sealing::Value => {
            let (value, stored) = sealed.split_at_checked(sealed.len().checked_sub(4)?)?;
            (stored == sum(value).to_le_bytes()).then_some(value)
        }
        Sealing::Key => (sealed == sum(&[]).to_le_bytes()).then_some(&[][..]),
    }
}

/// The CRC-32 of a key's length (as a little-endian `u64`), the key, and a value.
fn checksum(key: &[u8], value: &[u8]) -> u32 {
    finished(primed(key.len(), &[]), key, value)
}

/// The checksum's state after a key's length `len` and the first bytes of the key, `head`.
fn primed(len: usize, head: &[u8]) -> crc32fast::Hasher {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&(len as u64).to_le_bytes());
    hasher.update(head);
    hasher
}

/// The checksum from a `primed` state: the rest of the key, then the value.
fn finished(mut primed: crc32fast::Hasher, rest: &[u8], value: &[u8]) -> u32 {
    primed.update(rest);
    // An index entry's value is empty: no call for it (a scan reads thousands).
    if !value.is_empty() {
        primed.update(value);
    }
    primed.finalize()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An [`Unsealer`] reading a scan's entries in order (keys of several lengths that share
    /// more or less of their bytes, some damaged) answers as [`unseal`] does for each one, and
    /// refuses an entry sealed under a key that does not start with the prefix.
    #[test]
    fn an_unsealer_answers_as_unseal_for_every_entry_of_a_scan() {
        let mut random = crate::hash::xorshift(0x9e37_79b9_7f4a_7c15_u64);
        let prefix = b"partition kind property value ";
        for table in [ENTITIES, "properties", META] {
            let mut keys: Vec<Vec<u8>> = (0..400)
                .map(|_| {
                    let mut key = prefix[..random(prefix.len() as u64) as usize].to_vec();
                    key.resize(prefix.len(), b'x');
                    let len = 8 + random(3) as usize * 9;
                    key.extend((0..len).map(|_| random(3) as u8));
                    key
                })
                .collect();
            keys.sort();
            let shared = &keys[0][..common_prefix(&keys[0], &keys[keys.len() - 1])];
            let mut unsealer = Unsealer::new(table, shared);
            for key in &keys {
                let value = vec![random(256) as u8; random(4) as usize];
                let mut sealed = seal(table, key, &value);
                if random(5) == 0 && !sealed.is_empty() {
                    let at = random(sealed.len() as u64) as usize;
                    sealed[at] ^= 1 << random(8);
                }
                let tail = &key[shared.len()..];
                if table != META && !shared.is_empty() && random(5) == 0 {
                    // A key out of the scan's order, that does not start with the prefix
                    // (its tail the same), fails its checksum: a scan reports it damaged.
                    let mut elsewhere = key.clone();
                    elsewhere[random(shared.len() as u64) as usize] ^= 1;
                    let sealed = seal(table, &elsewhere, &value);
                    assert_eq!(unsealer.unseal(tail, &sealed), None);
                }
                assert_eq!(unsealer.unseal(tail, &sealed), unseal(table, key, &sealed));
            }
        }
    }

    #[test]
    fn common_prefix_counts_the_bytes_two_slices_start_with() {
        let a = b"0123456789abcdefghij";
        for len in 0..=a.len() {
            for at in 0..len {
                let mut b = a[..len].to_vec();
                b[at] ^= 0x80;
                assert_eq!(common_prefix(a, &b), at);
                assert_eq!(common_prefix(&b, a), at);
            }
            assert_eq!(common_prefix(a, &a[..len]), len);
        }
    }
}
