//! A handle's caches: a context cache per handle (a request's), a global cache in Redis for
//! every process (feature `redis`), and what they answered.

use crate::cache::{CacheStats, Caching};

use super::Db;

impl Db {
    /// The same store, with a context cache of its own: an entity this handle (or a clone of
    /// it) read or wrote is read again from memory, as NDB's context cache does. Make one per
    /// request: it never sees what other handles or processes write.
    ///
    /// It stays exact for what goes through it: a whole entity written (`replace`) is
    /// remembered, a deletion as "missing", any other write (which sets only the properties its
    /// type declares), a transform, a condition or a failed commit forgets the keys it wrote.
    /// Transactions never read from it (they read their own snapshot), and queries never do;
    /// a read with versions (`get_versioned`) or of some properties (`get_partial`) goes to the
    /// database.
    ///
    /// ```
    /// # use datastore_entity::prelude::*;
    /// # #[derive(Entity, Debug, Clone, PartialEq)]
    /// # struct Task { #[key] id: KeyName, title: String }
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let db = Db::in_memory();
    /// let request = db.with_context_cache();
    /// let key = Task::key(KeyName::new("a")?);
    /// request.get(&key).await?;                  // read from the database: missing
    /// request.get(&key).await?;                  // from memory
    /// assert_eq!(request.cache_stats().context_hits, 1);
    /// # Ok::<(), datastore_entity::Error>(()) }).unwrap();
    /// ```
    pub fn with_context_cache(&self) -> Db {
        let mut db = self.clone();
        db.scope = self.scope.caching(Caching::with_context);
        db
    }

    /// The same store, with `cache` (a global cache in Redis) in front of it, shared by every
    /// process that uses the same Redis — python-ndb's `RedisCache` included, byte for byte.
    ///
    /// A lookup outside a transaction reads Redis first, and fills it from the database under
    /// a reader's lock; a commit locks its keys in Redis before it is sent and releases them
    /// after, so that no reader keeps an entity a commit replaces; a writer killed in between
    /// leaves a lock that expires ([`GlobalCache::lock_time`](crate::GlobalCache::lock_time)).
    /// Transactions and queries never read from it. Every kind is cached unless it says
    /// `#[entity(global_cache = false)]` (NDB's default policy);
    /// `#[entity(global_cache_timeout = 600)]` bounds how long an entity stays.
    ///
    /// Redis down or slow never fails a read: each Redis call waits at most the cache's
    /// [`timeout`](crate::GlobalCache::timeout), then the read goes to the database and
    /// [`cache_stats`](Db::cache_stats) counts the bypass; after a call times out, reads go
    /// around Redis at once for a second. A write whose keys Redis cannot lock fails with
    /// [`Error::Unavailable`](crate::Error::Unavailable), unwritten.
    ///
    /// Every process that writes a cached kind must lock its writes: a handle without the
    /// global cache (or a kind it opts out) writes without locking, and a reader elsewhere may
    /// then keep the entity that write replaced (until the kind's `global_cache_timeout`, if
    /// any).
    #[cfg(feature = "redis")]
    pub fn with_global_cache(&self, cache: crate::GlobalCache) -> Db {
        let mut db = self.clone();
        let partition = self.scope.partition.clone();
        db.scope = self
            .scope
            .caching(|caching| caching.with_global(cache, &partition));
        db
    }

    /// The same store, reading around the global cache (its writes still lock their keys in
    /// it). A context cache it has still answers what the handle read or wrote.
    pub fn without_global_cache(&self) -> Db {
        match &self.scope.caching {
            Some(_) => {
                let mut db = self.clone();
                db.scope = self.scope.caching(Caching::without_global_reads);
                db
            }
            None => self.clone(),
        }
    }

    /// What this handle's caches answered since it was made (shared by its clones and by the
    /// handles made from it); zeros without a cache.
    pub fn cache_stats(&self) -> CacheStats {
        self.scope
            .caching
            .as_ref()
            .map(Caching::stats)
            .unwrap_or_default()
    }

    /// Forgets what the context cache holds (nothing without one).
    pub fn clear_context_cache(&self) {
        if let Some(caching) = &self.scope.caching {
            caching.clear_context();
        }
    }
}
