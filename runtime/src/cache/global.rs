//! The global cache as one handle uses it: lookups read through it, commits lock their keys
//! in it ([`ndb`](super::ndb) is the protocol, [`GlobalCache`] the Redis).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use gcloud_sdk::google::datastore::v1 as pb;

use super::ndb::{self, Cached};
use super::redis::{Bypass, GlobalCache};
use super::shared::{Counters, Policies};
use crate::backend::cloud::wire::Partitions;
use crate::backend::cloud::wire_form::{from_wire, into_wire};
use crate::backend::{Backend, Change};
use datastore_entity_core::error::Error;
use datastore_entity_core::model::key::RawKey;
use datastore_entity_core::model::value::PropertyMap;

/// The global cache as one handle uses it.
#[derive(Clone)]
pub(crate) struct GlobalLayer {
    cache: GlobalCache,
    /// The project and database its keys are in.
    partitions: Arc<Partitions>,
    /// Whether this handle reads through it (writes always lock).
    pub(crate) reads: bool,
}

impl GlobalLayer {
    /// `cache`, for keys of this project and database.
    pub(crate) fn new(cache: GlobalCache, project_id: &str, database_id: &str) -> GlobalLayer {
        GlobalLayer {
            cache,
            partitions: Arc::new(Partitions::new(project_id, database_id)),
            reads: true,
        }
    }
}

/// At most about this many bytes of entities offered to Redis in one call.
const FILL_BYTES: usize = 4 << 20;

/// `entities` in runs of at most `max` bytes (or one entity, if larger): a lookup of many
/// large entities is offered a few MiB per call, not as one request Redis takes too long to
/// read (or refuses).
fn chunks(entities: &[Vec<u8>], max: usize) -> Vec<std::ops::Range<usize>> {
    let mut ranges = Vec::new();
    let mut start = 0;
    while start < entities.len() {
        let mut end = start + 1;
        let mut bytes = entities[start].len();
        while end < entities.len() && bytes + entities[end].len() <= max {
            bytes += entities[end].len();
            end += 1;
        }
        ranges.push(start..end);
        start = end;
    }
    ranges
}

/// Cache keys, and the entity offered for each (empty: none).
type Offered = (Vec<Vec<u8>>, Vec<Vec<u8>>);

/// The keys a commit locked, and the writer's part of their locks.
pub(crate) struct Locked {
    keys: Vec<Vec<u8>>,
    token: Vec<u8>,
}

impl GlobalLayer {
    /// `keys` (none known to the context cache) read through the global cache: each cached
    /// entity from it, the others from the backend, offered to it under a reader's lock.
    pub(crate) async fn lookup(
        &self,
        inner: &dyn Backend,
        policies: &Policies,
        counters: &Counters,
        keys: &[RawKey],
    ) -> Result<Vec<Option<PropertyMap>>, Error> {
        // The cache key of each key of a kind read through the cache.
        let cached: Vec<Option<Vec<u8>>> = keys
            .iter()
            .map(|k| {
                let read = policies.of(k.kind()).global;
                read.then(|| ndb::cache_key(&self.partitions.key(k)))
            })
            .collect();
        let key_of = |i: usize| cached[i].clone().unwrap_or_default();
        let positions: Vec<usize> = (0..keys.len()).filter(|i| cached[*i].is_some()).collect();
        let mut found: Vec<Option<Option<PropertyMap>>> = vec![None; keys.len()];
        let mut unknown: Vec<usize> = Vec::new();
        if positions.is_empty() {
            // No kind read here is cached.
            return inner.lookup(keys, None).await;
        }
        let cache_keys: Vec<Vec<u8>> = positions.iter().map(|i| key_of(*i)).collect();
        let (mut hits, mut locked, mut bypassed) = (0, 0, 0);
        match self.cache.get(&cache_keys).await {
            Ok(values) => {
                for ((i, cache_key), value) in positions.iter().zip(&cache_keys).zip(values) {
                    match ndb::read(value.as_deref()) {
                        Some(Cached::Entity(entity)) => match self.entity(cache_key, entity) {
                            Some(properties) => {
                                found[*i] = Some(Some(properties));
                                hits += 1;
                            }
                            None => bypassed += 1,
                        },
                        Some(Cached::Locked) => locked += 1,
                        Some(Cached::Unknown) => unknown.push(*i),
                        None => bypassed += 1,
                    }
                }
            }
            Err(Bypass(reason)) => {
                bypassed += positions.len();
                tracing::warn!(%reason, "the global cache did not answer: read from the database");
            }
        }
        // A reader's lock on what the cache does not know, then the backend's answer offered.
        let lock = ndb::read_lock();
        let mut filling: Vec<usize> = Vec::new();
        if !unknown.is_empty() {
            let unknown_keys: Vec<Vec<u8>> = unknown.iter().map(|i| key_of(*i)).collect();
            match self.cache.read_lock(&unknown_keys, &lock).await {
                Ok(taken) => {
                    filling = unknown
                        .iter()
                        .zip(taken)
                        .filter(|(_, t)| *t)
                        .map(|(i, _)| *i)
                        .collect();
                    // Another reader's lock, taken since: it fills the cache.
                    locked += unknown.len() - filling.len();
                }
                Err(Bypass(reason)) => {
                    bypassed += unknown.len();
                    unknown.clear();
                    tracing::warn!(%reason, "the global cache did not answer: read from the database");
                }
            }
        }
        let misses = filling.len();
        let rest: Vec<usize> = (0..keys.len()).filter(|i| found[*i].is_none()).collect();
        let rest_keys: Vec<RawKey> = rest.iter().map(|i| keys[*i].clone()).collect();
        let read = match rest_keys.is_empty() {
            true => Ok(Vec::new()),
            false => inner.lookup(&rest_keys, None).await,
        };
        let read = match read {
            Ok(read) => read,
            Err(error) => {
                // Our locks go: nothing is offered.
                let none = vec![Vec::new(); filling.len()];
                let held: Vec<Vec<u8>> = filling.iter().map(|i| key_of(*i)).collect();
                let _ = self.cache.fill(&held, &lock, &none, None).await;
                return Err(error);
            }
        };
        for (i, properties) in rest.iter().zip(read) {
            found[*i] = Some(properties);
        }
        let filled: Vec<(usize, Vec<u8>)> = filling.iter().map(|i| (*i, key_of(*i))).collect();
        self.offer(policies, keys, &filled, &found, &lock).await;
        Counters::add(&counters.hits, hits);
        Counters::add(&counters.misses, misses);
        Counters::add(&counters.locked, locked);
        Counters::add(&counters.bypasses, bypassed);
        tracing::debug!(hits, misses, locked, bypassed, "global cache lookup");
        Ok(found.into_iter().map(Option::flatten).collect())
    }

    /// A cached entity's properties, if it is the entity of `cache_key` and converts.
    fn entity(&self, cache_key: &[u8], entity: pb::Entity) -> Option<PropertyMap> {
        let key = entity.key.as_ref()?;
        if ndb::cache_key(key) != cache_key {
            return None;
        }
        from_wire(entity.properties, &self.partitions).ok()
    }

    /// Offers what the backend read of the keys at `filling` (with their cache keys; their
    /// reader's lock `lock` held) to the cache: each entity found, for its kind's time; a
    /// missing one releases the lock (a missing entity is not cached).
    async fn offer(
        &self,
        policies: &Policies,
        keys: &[RawKey],
        filling: &[(usize, Vec<u8>)],
        found: &[Option<Option<PropertyMap>>],
        lock: &[u8],
    ) {
        // One call per expiry (one, unless kinds of several expiries are read together).
        let mut by_expiry: HashMap<Option<u32>, Offered> = HashMap::new();
        for (i, cache_key) in filling {
            let key = &keys[*i];
            let entity = match &found[*i] {
                Some(Some(properties)) => ndb::entity_bytes(&pb::Entity {
                    key: Some(self.partitions.key(key)),
                    properties: into_wire(properties.clone(), &self.partitions, false),
                }),
                _ => Vec::new(),
            };
            let group = by_expiry
                .entry(policies.of(key.kind()).global_timeout)
                .or_default();
            group.0.push(cache_key.clone());
            group.1.push(entity);
        }
        for (expiry, (cache_keys, entities)) in by_expiry {
            let expires = expiry.map(|s| Duration::from_secs(u64::from(s)));
            for range in chunks(&entities, FILL_BYTES) {
                let (keys, offered) = (&cache_keys[range.clone()], &entities[range]);
                if let Err(Bypass(reason)) = self.cache.fill(keys, lock, offered, expires).await {
                    tracing::warn!(%reason, "the global cache did not take what was read");
                }
            }
        }
    }

    /// Locks, for a commit, the keys of `changes` whose kinds are cached: a writer's part
    /// added to each. Redis not answering fails the commit, unwritten: a write the cache did
    /// not see could leave it stale.
    pub(crate) async fn lock(
        &self,
        policies: &Policies,
        changes: &[Change],
    ) -> Result<Locked, Error> {
        let mut keys: Vec<Vec<u8>> = changes
            .iter()
            .map(|c| c.mutation.key())
            .filter(|k| k.is_complete() && policies.of(k.kind()).global)
            .map(|k| ndb::cache_key(&self.partitions.key(k)))
            .collect();
        // A key written twice (which the commit then refuses) is locked once.
        keys.sort_unstable();
        keys.dedup();
        let token = ndb::write_token();
        if let Err(Bypass(reason)) = self.cache.write_lock(&keys, &token).await {
            // The script may have run, its answer lost: release what it may have locked.
            let _ = self.cache.write_unlock(&keys, &token).await;
            return Err(Error::Unavailable {
                reason: format!(
                    "the global cache in Redis could not lock the keys this write changes \
                     ({reason}); nothing was written, so that no reader keeps an entity the \
                     write replaces: write again when Redis answers, or from a handle without \
                     the global cache if no process reads these kinds through it"
                ),
            });
        }
        Ok(Locked { keys, token })
    }

    /// Releases a commit's locks, whatever its outcome: the keys are left "written recently",
    /// and the next reader reads them from the database. A lock Redis did not release expires.
    pub(crate) async fn unlock(&self, locked: Locked) {
        if let Err(Bypass(reason)) = self.cache.write_unlock(&locked.keys, &locked.token).await {
            tracing::warn!(%reason, "the global cache did not release a write's locks: they expire");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::chunks;

    #[test]
    fn entities_are_offered_a_few_mib_at_a_time() {
        let sized =
            |sizes: &[usize]| -> Vec<Vec<u8>> { sizes.iter().map(|n| vec![0; *n]).collect() };
        assert_eq!(chunks(&sized(&[]), 10), []);
        assert_eq!(chunks(&sized(&[3, 3, 3, 3]), 10), [0..3, 3..4]);
        assert_eq!(chunks(&sized(&[12, 1, 12]), 10), [0..1, 1..2, 2..3]);
        assert_eq!(chunks(&sized(&[900; 12]), 4_000), [0..4, 4..8, 8..12]);
    }
}
