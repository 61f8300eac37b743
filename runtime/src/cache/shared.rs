//! What a handle's caches share with its clones: the counts of what they answered, and each
//! declared kind's policy.

use std::collections::HashMap;
use std::sync::RwLock;
use std::sync::atomic::{AtomicU64, Ordering};

use datastore_entity_core::model::schema::CachePolicy;

/// What a handle's caches answered (`Db::cache_stats`), counted since the handle was made and
/// shared by its clones. Each read of a key counts once, where it was answered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CacheStats {
    /// Keys read from the context cache.
    pub context_hits: u64,
    /// Keys read from the global cache.
    pub hits: u64,
    /// Keys the global cache did not hold: read from the database, and offered to the cache.
    pub misses: u64,
    /// Keys a writer (or another reader) held locked in the global cache: read from the
    /// database, and not cached (NDB's readers do the same).
    pub locked: u64,
    /// Keys read around the global cache because it did not answer in time, or held a value
    /// that is no entity of that key.
    pub bypasses: u64,
}

/// The counters behind [`CacheStats`].
#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) context_hits: AtomicU64,
    pub(crate) hits: AtomicU64,
    pub(crate) misses: AtomicU64,
    pub(crate) locked: AtomicU64,
    pub(crate) bypasses: AtomicU64,
}

impl Counters {
    pub(crate) fn stats(&self) -> CacheStats {
        let read = |c: &AtomicU64| c.load(Ordering::Relaxed);
        CacheStats {
            context_hits: read(&self.context_hits),
            hits: read(&self.hits),
            misses: read(&self.misses),
            locked: read(&self.locked),
            bypasses: read(&self.bypasses),
        }
    }

    pub(crate) fn add(counter: &AtomicU64, n: usize) {
        counter.fetch_add(n as u64, Ordering::Relaxed);
    }
}

/// Each declared kind's policy; a kind never declared is cached (NDB's default).
#[derive(Default)]
pub(crate) struct Policies {
    kinds: RwLock<HashMap<&'static str, CachePolicy>>,
}

impl Policies {
    /// `kind`'s policy.
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    pub(crate) fn of(&self, kind: &str) -> CachePolicy {
        let kinds = self.kinds.read().unwrap_or_else(|e| e.into_inner());
        kinds.get(kind).copied().unwrap_or_default()
    }

    /// Learns `kind`'s policy.
    pub(crate) fn declare(&self, kind: &'static str, policy: CachePolicy) {
        let mut kinds = self.kinds.write().unwrap_or_else(|e| e.into_inner());
        kinds.insert(kind, policy);
    }
}
