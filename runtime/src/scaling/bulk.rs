//! [`BulkWriter`] (R-S4): many entities written (or deleted) at the pace of a [`RampUp`], in
//! commits of at most 500 mutations and 10 MiB, in scattered key order, contention retried, progress
//! reported.

use std::time::Duration;

use crate::backend::retry::RetryPolicy;
use crate::db::Db;
use crate::db::write::{Op, Write, commit, runs};
use datastore_entity_core::error::Error;
use datastore_entity_core::hash::fnv1a_mixed;
use datastore_entity_core::model::entity::Entity;
use datastore_entity_core::model::key::{Key, RawKey};

use super::ramp::{Limiter, RampUp};

/// The mutations of one commit by default: the ramp's first second (R-S4: 500 writes a second
/// to a new kind), so the first commit is not held back.
const BATCH: usize = 500;

/// Where a [`BulkWriter`] is, handed to its progress callback after every commit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Progress {
    /// Entities written (or deleted) so far in this call.
    pub done: usize,
    /// Entities this call writes (or deletes) in all.
    pub total: usize,
    /// Time since the writer's first commit.
    pub elapsed: Duration,
    /// The operations per second the ramp allows now.
    pub rate: f64,
    /// Commits sent again after contention or an outage, so far in this call.
    pub retries: u32,
}

/// A progress callback.
type OnProgress<'a> = Box<dyn FnMut(&Progress) + Send + 'a>;

/// Writes or deletes many entities without the hotspots Google's pages warn about (R-S4,
/// R-K4): commits of at most 500 mutations (replicas counted; `batch_size` changes it) and
/// under the service's 10 MiB, paced by a
/// [`RampUp`] (500 writes per second, +50 % every 5 minutes), in an order scattered over the
/// key range (a hash of each key) so consecutive commits do not land on one key range; a
/// commit that meets contention or an outage is sent again after a backoff. Entities are
/// written as [`Db::put`] writes them (upserts: properties the type does not declare are
/// kept), so writing the same entities again is always safe.
///
/// The pace belongs to the writer: keep one writer per kind for the whole load (its ramp goes
/// on across calls); two writers to one kind each take the full rate.
///
/// ```
/// use datastore_entity::prelude::*;
/// use datastore_entity::{BulkWriter, RampUp};
///
/// #[derive(Entity)]
/// struct Reading {
///     #[key]
///     id: KeyName,
///     celsius: f64,
/// }
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true).build().unwrap().block_on(async {
/// let db = Db::in_memory();
/// let readings: Vec<Reading> = (0..1_200)
///     .map(|i| Ok(Reading { id: KeyName::scattered(format!("r{i}"))?, celsius: 20.5 }))
///     .collect::<Result<_, Error>>()?;
/// let mut writer = BulkWriter::new(&db)
///     .ramp(RampUp::new())
///     .on_progress(|p| println!("{}/{} at {:.0}/s", p.done, p.total, p.rate));
/// let keys = writer.put_all(&readings).await?;
/// assert_eq!(keys.len(), 1_200);
/// # Ok::<(), Error>(())
/// # }).unwrap();
/// ```
pub struct BulkWriter<'a> {
    db: &'a Db,
    ramp: RampUp,
    limiter: Option<Limiter>,
    retry: RetryPolicy,
    batch: usize,
    progress: Option<OnProgress<'a>>,
}

impl std::fmt::Debug for BulkWriter<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BulkWriter")
            .field("ramp", &self.ramp)
            .field("retry", &self.retry)
            .field("batch", &self.batch)
            .finish_non_exhaustive()
    }
}

impl<'a> BulkWriter<'a> {
    /// A writer to `db`: Google's ramp ([`RampUp::new`]), commits of up to 500 mutations (and
    /// 10 MiB, the service's limit), and at least 8 attempts per commit (the `Db`'s retry
    /// policy's backoff).
    pub fn new(db: &'a Db) -> BulkWriter<'a> {
        BulkWriter {
            db,
            ramp: RampUp::new(),
            limiter: None,
            retry: RetryPolicy {
                max_attempts: db.retry.max_attempts.max(8),
                ..db.retry
            },
            batch: BATCH,
            progress: None,
        }
    }

    /// Paces the writes to `ramp`. Its clock starts at the writer's first commit and goes on
    /// across calls, so one writer keeps ramping up through several `put_all`s.
    pub fn ramp(mut self, ramp: RampUp) -> Self {
        self.ramp = ramp;
        self.limiter = None;
        self
    }

    /// How each commit is retried after contention or an outage.
    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// At most `mutations` mutations per commit (at least 1; replicas count). A commit also
    /// stops short of the service's 10 MiB ([`MAX_COMMIT_BYTES`](crate::MAX_COMMIT_BYTES)).
    pub fn batch_size(mut self, mutations: usize) -> Self {
        self.batch = mutations.max(1);
        self
    }

    /// Calls `progress` after every commit.
    pub fn on_progress(mut self, progress: impl FnMut(&Progress) + Send + 'a) -> Self {
        self.progress = Some(Box::new(progress));
        self
    }

    /// Writes `entities` (upserts, as [`Db::put`]); their complete keys come back in input
    /// order. Every entity is checked before the first commit (an invalid one is an error
    /// and nothing is written). **Not atomic**: a commit that still fails after its retries
    /// is [`Error::PartiallyWritten`] with how many entities the earlier commits wrote (in
    /// the writer's scattered order, not a prefix of the slice) — writing the same entities
    /// again is safe.
    pub async fn put_all<E: Entity>(&mut self, entities: &[E]) -> Result<Vec<Key<E>>, Error> {
        let writes = entities
            .iter()
            .map(|e| Write::entity(&self.db.scope, e, Op::Upsert))
            .collect::<Result<Vec<_>, _>>()?;
        let keys = self.run(writes).await?;
        keys.into_iter().map(Key::from_raw).collect()
    }

    /// Deletes the entities of `keys` (with their companions, as [`Db::delete`]), paced and
    /// retried as [`put_all`](BulkWriter::put_all) writes. Deleting again is safe.
    pub async fn delete_all<E: Entity>(&mut self, keys: &[Key<E>]) -> Result<(), Error> {
        let writes = keys
            .iter()
            .map(|k| Write::delete(&self.db.scope, k))
            .collect::<Result<Vec<_>, _>>()?;
        self.run(writes).await.map(drop)
    }

    /// Commits `writes` in batches; the complete key of each, in input order.
    async fn run(&mut self, writes: Vec<Write>) -> Result<Vec<RawKey>, Error> {
        let total = writes.len();
        let mut order: Vec<usize> = (0..total).collect();
        // Complete keys by a hash of the key (incomplete ones get their ids from the service,
        // which scatters them): consecutive commits land all over the key range.
        order.sort_by_cached_key(|&i| {
            let key = &writes[i].key;
            key.is_complete()
                .then(|| fnv1a_mixed(format!("{key:?}").as_bytes()))
        });
        let limiter = self.limiter.get_or_insert_with(|| self.ramp.limiter());
        let mut keys: Vec<Option<RawKey>> = vec![None; total];
        let (mut done, mut retries) = (0, 0);
        for run in runs(order.iter().map(|&i| &writes[i]), self.batch) {
            let run = &order[run];
            let mutations: usize = run.iter().map(|&i| writes[i].mutations()).sum();
            let batch: Vec<Write> = run.iter().map(|&i| writes[i].clone()).collect();
            limiter
                .acquire(u32::try_from(mutations).unwrap_or(u32::MAX))
                .await;
            let mut attempt = 1;
            let written = loop {
                match commit(&self.db.scope, batch.clone(), None).await {
                    Ok(written) => break written,
                    Err(error) if attempt < self.retry.max_attempts && resendable(&error) => {
                        tracing::debug!(%error, attempt, "bulk write: commit sent again");
                        tokio::time::sleep(self.retry.backoff(attempt)).await;
                        (attempt, retries) = (attempt + 1, retries + 1);
                    }
                    Err(error) if done == 0 => return Err(error),
                    Err(error) => {
                        return Err(Error::PartiallyWritten {
                            written: done,
                            source: Box::new(error),
                        });
                    }
                }
            };
            for (&i, key) in run.iter().zip(written) {
                keys[i] = Some(key);
            }
            done += run.len();
            if let Some(progress) = &mut self.progress {
                progress(&Progress {
                    done,
                    total,
                    elapsed: limiter.elapsed(),
                    rate: limiter.rate(),
                    retries,
                });
            }
        }
        keys.into_iter()
            .map(|k| {
                k.ok_or(Error::Internal {
                    invariant: "the backend returns a key for each write",
                })
            })
            .collect()
    }
}

/// Whether a failed commit of upserts and deletes can be sent again: contention, an outage,
/// or an answer lost on the way (sending an upsert or a delete twice writes the same).
fn resendable(error: &Error) -> bool {
    error.is_retryable() || matches!(error, Error::CommitOutcomeUnknown { .. })
}
