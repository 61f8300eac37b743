//! The hashes that name stored data (scattered key names, companion entities, composite index
//! tables) and check cursors: FNV-1a, tiny and stable across releases and platforms. Changing
//! either function re-keys data already written (and moves users between rollout
//! buckets): `tests/tests/formats.rs` and `tests/tests/scale_helpers.rs` pin them.

/// A hash map keyed by what the engine holds in memory (store keys, table and kind names):
/// foldhash, hashbrown's default hasher, seeded per process like std's but several times
/// cheaper than its SipHash on keys of a few dozen bytes.
pub type Map<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// A hash set, hashed as [`Map`].
pub type Set<T> = std::collections::HashSet<T, foldhash::fast::RandomState>;

/// FNV-1a, 64 bits: checksums, fingerprints, scattered key-name prefixes.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// FNV-1a, 64 bits, then MurmurHash3's 64-bit finalizer, so that inputs differing in one
/// character (`item0015`, `item0016`) land far apart in every bit: rollout buckets, scattered
/// write orders.
pub fn fnv1a_mixed(bytes: &[u8]) -> u64 {
    let mut h = fnv1a(bytes);
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// FNV-1a, 128 bits: for names that must not collide by accident.
pub fn fnv1a_128(bytes: &[u8]) -> u128 {
    bytes
        .iter()
        .fold(0x6c62_272e_07bb_0142_62b8_2175_6295_c58d_u128, |h, b| {
            (h ^ u128::from(*b)).wrapping_mul(0x0000_0000_0100_0000_0000_0000_0000_013b)
        })
}

/// The scattered key name of a natural one (R-K4, `KeyName::scattered`): six hex digits of its
/// hash, a `-`, then the natural name, so consecutive natural names land far apart.
pub fn scattered_name(natural: &str) -> String {
    format!("{:06x}-{natural}", fnv1a(natural.as_bytes()) >> 40)
}

/// For tests (this crate's and the engine's): numbers below `n` from a xorshift generator
/// started at `seed` (not zero): the same sequence on every run, so a failure is reproduced
/// as it was.
pub fn xorshift(mut seed: u64) -> impl FnMut(u64) -> u64 {
    move |n| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    }
}
