//! Caches in front of a backend, as NDB keeps them: a context cache per handle (what the
//! handle read and wrote, in memory) and a global cache in Redis shared with every process
//! (feature `redis`). Neither answers with an entity older than a write that went through a
//! handle using it (the context cache: through that handle; the global cache: through any
//! process on the same Redis that locks its writes, NDB's included).
//!
//! [`Caching`] wraps a backend: a lookup outside a transaction is answered by the context
//! cache, then the global cache, then the backend (and fills both); a commit locks its keys in
//! the global cache first and releases them after, so that no reader fills the cache with a
//! value the commit replaces; transactions never read from either; queries never do.

mod context;
#[cfg(feature = "redis")]
mod global;
#[cfg(feature = "redis")]
mod ndb;
#[cfg(feature = "redis")]
pub(crate) mod redis;
mod shared;

use std::sync::Arc;

pub(crate) use self::context::ContextCache;
#[cfg(feature = "redis")]
use self::global::GlobalLayer;
#[cfg(feature = "redis")]
use self::redis::GlobalCache;
pub use self::shared::CacheStats;
use self::shared::{Counters, Policies};
use crate::backend::{
    Backend, BatchEnd, BoxFuture, Capabilities, Change, CommitAs, Committed, FoundStamped, Lookup,
    QuerySpec, Read, ReadAs, ReadFound, ReadResult, Stamp, StoredReads, TransactionId, Wrapper,
};
use datastore_entity_core::error::Error;
use datastore_entity_core::model::key::RawKey;
use datastore_entity_core::model::schema::Schema;
use datastore_entity_core::model::value::PropertyMap;

/// A backend with caches in front of it. Cheap to clone: clones share the caches.
#[derive(Clone)]
pub(crate) struct Caching {
    inner: Arc<dyn Backend>,
    context: Option<Arc<ContextCache>>,
    #[cfg(feature = "redis")]
    global: Option<GlobalLayer>,
    /// Each declared kind's policy.
    policies: Arc<Policies>,
    counters: Arc<Counters>,
}

impl Caching {
    /// `inner` with no cache yet.
    pub(crate) fn new(inner: Arc<dyn Backend>) -> Caching {
        Caching {
            inner,
            context: None,
            #[cfg(feature = "redis")]
            global: None,
            policies: Arc::default(),
            counters: Arc::default(),
        }
    }

    /// The same, with a new, empty context cache.
    pub(crate) fn with_context(mut self) -> Caching {
        self.context = Some(Arc::default());
        self
    }

    /// The same, with `cache` as its global cache, for keys of `partition`'s project and
    /// database. Keys that name no project (the embedded engine's) are cached under the
    /// backend's own identity, so that engines sharing a Redis never read each other's
    /// entities; a backend with neither reads around the cache (its writes still lock).
    #[cfg(feature = "redis")]
    pub(crate) fn with_global(
        mut self,
        cache: GlobalCache,
        partition: &datastore_entity_core::model::key::PartitionId,
    ) -> Caching {
        let identity = match partition.project_id.is_empty() {
            true => self.inner.cache_identity(),
            false => Some(partition.project_id.clone()),
        };
        let reads = identity.is_some();
        if !reads {
            tracing::warn!(
                "the global cache is read around: the backend's keys name no project and it \
                 names no identity of its own, so its entities could be mistaken for another's"
            );
        }
        let mut layer = GlobalLayer::new(
            cache,
            identity.as_deref().unwrap_or_default(),
            &partition.database_id,
        );
        layer.reads = reads;
        self.global = Some(layer);
        self
    }

    /// The same, reading around the global cache (writes still lock their keys).
    #[cfg_attr(not(feature = "redis"), allow(unused_mut))]
    pub(crate) fn without_global_reads(mut self) -> Caching {
        #[cfg(feature = "redis")]
        if let Some(global) = &mut self.global {
            global.reads = false;
        }
        self
    }

    /// What the caches answered.
    pub(crate) fn stats(&self) -> CacheStats {
        self.counters.stats()
    }

    /// Forgets what the context cache holds.
    pub(crate) fn clear_context(&self) {
        if let Some(context) = &self.context {
            context.clear();
        }
    }

    /// Looks `keys` up outside a transaction: the context cache, the global cache, then the
    /// backend, filling both.
    async fn lookup_cached(&self, keys: &[RawKey]) -> Result<Vec<Option<PropertyMap>>, Error> {
        let (known, reading) = match &self.context {
            Some(context) => {
                let (known, reading) = context.get(keys);
                (known, Some(reading))
            }
            None => (vec![None; keys.len()], None),
        };
        let unknown: Vec<RawKey> = keys
            .iter()
            .zip(&known)
            .filter(|(_, k)| k.is_none())
            .map(|(key, _)| key.clone())
            .collect();
        Counters::add(&self.counters.context_hits, keys.len() - unknown.len());
        let read = match unknown.is_empty() {
            true => Vec::new(),
            false => self.lookup_global(&unknown).await?,
        };
        if let (Some(context), Some(reading)) = (&self.context, reading) {
            context.remember(reading, unknown.iter().zip(&read));
        }
        Ok(merge(known, read.into_iter()))
    }

    #[cfg(not(feature = "redis"))]
    async fn lookup_global(&self, keys: &[RawKey]) -> Result<Vec<Option<PropertyMap>>, Error> {
        self.inner.lookup(keys, None).await
    }

    #[cfg(feature = "redis")]
    async fn lookup_global(&self, keys: &[RawKey]) -> Result<Vec<Option<PropertyMap>>, Error> {
        match &self.global {
            Some(global) if global.reads => {
                let inner = &*self.inner;
                global
                    .lookup(inner, &self.policies, &self.counters, keys)
                    .await
            }
            _ => self.inner.lookup(keys, None).await,
        }
    }

    /// Commits `changes` (in `transaction`, if given) through `commit`, the global cache's
    /// locks held around it, and what it wrote forgotten by the context cache meanwhile, known
    /// to it after.
    async fn committing<T>(
        &self,
        changes: Vec<Change>,
        transaction: Option<&TransactionId>,
        commit: impl AsyncFnOnce(Vec<Change>) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let writing = self.context.as_ref().map(|c| c.writing(&changes));
        #[cfg(feature = "redis")]
        let locked = match &self.global {
            Some(global) => match global.lock(&self.policies, &changes).await {
                Ok(locked) => Some(locked),
                Err(error) => {
                    // Nothing was sent: the transaction would hold its locks until it expires.
                    if let Some(id) = transaction {
                        let _ = self.inner.rollback(id).await;
                    }
                    return Err(error);
                }
            },
            None => None,
        };
        #[cfg(not(feature = "redis"))]
        let _ = transaction;
        let result = commit(changes).await;
        if let Some(writing) = writing {
            writing.committed(result.is_ok());
        }
        #[cfg(feature = "redis")]
        if let (Some(global), Some(locked)) = (&self.global, locked) {
            global.unlock(locked).await;
        }
        result
    }
}

/// `known` with each unknown slot filled from `read`, in order.
fn merge(
    known: Vec<Option<Option<PropertyMap>>>,
    read: impl Iterator<Item = Option<PropertyMap>>,
) -> Vec<Option<PropertyMap>> {
    let mut read = read;
    known
        .into_iter()
        .map(|k| k.unwrap_or_else(|| read.next().flatten()))
        .collect()
}

impl Wrapper for Caching {
    fn inner(&self) -> &dyn Backend {
        &*self.inner
    }

    fn lookup_as<'a>(
        &'a self,
        lookup: Lookup<'a>,
    ) -> BoxFuture<'a, Result<Read<FoundStamped>, Error>> {
        match lookup {
            // Outside a transaction, whole entities without their versions: through the
            // caches. A transaction reads its own snapshot, never a cache (as NDB), and
            // versions and times are not cached.
            Lookup {
                keys,
                read: ReadAs::Latest,
                mask: None,
                stamps: false,
            } => Box::pin(async move {
                let found = self.lookup_cached(keys).await?;
                let found = found.into_iter().map(|f| f.map(|p| (p, Stamp::default())));
                Ok(Read::of(found.collect()))
            }),
            lookup => self.inner.lookup_as(lookup),
        }
    }

    fn commit_as<'a>(
        &'a self,
        changes: Vec<Change>,
        how: CommitAs<'a>,
    ) -> BoxFuture<'a, Result<Committed, Error>> {
        let transaction = match how {
            CommitAs::In(transaction) => Some(transaction),
            CommitAs::Alone | CommitAs::SingleUse(..) => None,
        };
        Box::pin(self.committing(changes, transaction, async move |changes| {
            self.inner.commit_as(changes, how).await
        }))
    }

    fn declare<'a>(&'a self, schema: &'static Schema) -> BoxFuture<'a, Result<(), Error>> {
        self.policies.declare(schema.kind, schema.cache);
        self.inner.declare(schema)
    }

    fn capabilities(&self) -> Capabilities<'_> {
        Capabilities {
            stored_reads: Some(self),
            ..self.inner.capabilities()
        }
    }
}

impl StoredReads for Caching {
    fn lookup_each<'a>(
        &'a self,
        keys: &'a [RawKey],
        read: &'a mut ReadFound<'_>,
    ) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move {
            let found = self.lookup_cached(keys).await?;
            for (i, properties) in found.into_iter().enumerate() {
                if let Some(properties) = properties {
                    read(i, crate::backend::FoundEntity::Map(properties))?;
                }
            }
            Ok(())
        })
    }

    fn run_query_each<'a>(
        &'a self,
        query: &'a QuerySpec,
        read: &'a mut ReadResult<'_>,
    ) -> BoxFuture<'a, Result<BatchEnd, Error>> {
        // Queries are not cached: answered by the store behind the cache.
        self.inner.run_query_each(query, read)
    }
}
