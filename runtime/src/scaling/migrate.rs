//! Moving entities to a new kind, a new key range or a new version of their type without the
//! hotspot a sudden switch makes (R-S5, from Google's "Ramping up traffic"): a deterministic
//! [`rollout`] chooses the users that move first, [`read_new_then_old`] reads both places at
//! once while the data moves, and a [`CopyJob`] copies what is left in an order scattered over
//! the key range, paced by a [`RampUp`], resumable after a crash.
//!
//! A migration, step by step:
//! 1. Write new entities to the new kind for the users `rollout(user_id, percent)` lets in,
//!    raising `percent` gradually (the ramp: 500 operations per second, +50 % every 5
//!    minutes); read them with [`read_new_then_old`].
//! 2. Run a [`CopyJob`] from the old kind to the new one (it never overwrites an entity
//!    already in the new kind, and can delete each source as it copies it).
//! 3. Once it is done, read the new kind only.
//!
//! ```
//! use datastore_entity::prelude::*;
//! use datastore_entity::migrate::{self, CopyJob, Found};
//!
//! #[derive(Entity)]
//! #[entity(kind = "Profile")]
//! struct Profile { #[key] user: KeyName, name: String }
//!
//! #[derive(Entity, Debug, PartialEq)]
//! #[entity(kind = "ProfileV2")]
//! struct ProfileV2 { #[key] user: KeyName, first: String, last: String }
//!
//! fn upgrade(p: Profile) -> ProfileV2 {
//!     let (first, last) = p.name.split_once(' ').unwrap_or((&p.name, ""));
//!     ProfileV2 { first: first.into(), last: last.into(), user: p.user }
//! }
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true).build().unwrap().block_on(async {
//! let db = Db::in_memory();
//! let ann = KeyName::scattered("ann")?;
//! db.put(&Profile { user: ann.clone(), name: "Ann Lee".into() }).await?;
//!
//! // While the data moves: both reads at once, the new one preferred.
//! let found = migrate::read_new_then_old(&db, &ProfileV2::key(ann.clone()), &Profile::key(ann.clone())).await?;
//! let profile = found.map(|f| f.into_new(upgrade));
//! assert_eq!(profile.unwrap().last, "Lee");
//!
//! // The copy job: scattered, ramped, resumable; the old entities deleted as they are copied.
//! let report = CopyJob::new(&db, |old: Profile| Ok(Some(upgrade(old))))
//!     .delete_source(true)
//!     .run()
//!     .await?;
//! assert_eq!(report.copied, 1);
//! assert_eq!(db.get(&ProfileV2::key(ann.clone())).await?.unwrap().first, "Ann");
//! assert!(db.get(&Profile::key(ann)).await?.is_none());
//!
//! assert_eq!(migrate::rollout("user-42", 100), true);
//! assert_eq!(migrate::rollout("user-42", 0), false);
//! # Ok::<(), Error>(())
//! # }).unwrap();
//! ```

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use futures_util::TryStreamExt as _;

use crate::db::Db;
use datastore_entity_core::error::Error;
use datastore_entity_core::hash::fnv1a_mixed;
use datastore_entity_core::model::entity::Entity;
use datastore_entity_core::model::key::{Key, RawKey};
use datastore_entity_core::model::schema::Schema;

use super::ramp::RampUp;

/// The rollout bucket of `id`, in `0..100`: the FNV-1a 64-bit hash of its UTF-8 bytes, mixed
/// by MurmurHash3's 64-bit finalizer (so ids that differ in one character land far apart),
/// modulo 100. Stable across processes, platforms and releases of this crate (a test pins
/// it), and easy to compute in any language.
pub fn bucket(id: &str) -> u8 {
    u8::try_from(fnv1a_mixed(id.as_bytes()) % 100).unwrap_or(0)
}

/// Whether `id` (a user id, say) is among the first `percent` % of ids to move: `bucket(id) <
/// percent`. Deterministic (the same answer in every process and release), uniform (about
/// `percent` % of any large set of ids), and monotone: an id in at `p` % is in at every
/// larger percentage, so raising the percentage only ever adds ids. `percent` ≥ 100 is
/// every id.
pub fn rollout(id: &str, percent: u8) -> bool {
    bucket(id) < percent
}

/// What [`read_new_then_old`] found: the entity in its new place, or only in its old one.
#[derive(Debug, Clone, PartialEq)]
pub enum Found<N, O> {
    /// The new entity.
    New(N),
    /// No new entity; the old one.
    Old(O),
}

impl<N, O> Found<N, O> {
    /// The new entity, converting the old one when that is what was found.
    pub fn into_new(self, convert: impl FnOnce(O) -> N) -> N {
        match self {
            Found::New(new) => new,
            Found::Old(old) => convert(old),
        }
    }
}

/// Reads the entity at `new` and at `old` **in parallel** (Google's "parallel reads": one
/// round trip, two reads billed) and returns the new one if it exists, else the old one,
/// else `None`. While a migration is under way, for the ids [`rollout`] has let in.
pub async fn read_new_then_old<N: Entity, O: Entity>(
    db: &Db,
    new: &Key<N>,
    old: &Key<O>,
) -> Result<Option<Found<N, O>>, Error> {
    let (new, old) = futures_util::future::try_join(db.get(new), db.get(old)).await?;
    Ok(new.map(Found::New).or(old.map(Found::Old)))
}

/// Where a [`CopyJob`] is: for each stripe of the old kind's key range, its bounds and the
/// last key processed, and the counts so far. Handed to the progress callback after every
/// batch; save its text form (`to_string()`, parsed back with `parse()`) and give it to
/// [`CopyJob::resume`] to go on after a crash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyState {
    stripes: Vec<Stripe>,
    /// The counts so far.
    pub report: CopyReport,
}

/// What a [`CopyJob`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CopyReport {
    /// Old entities written to the new place.
    pub copied: u64,
    /// Old entities whose new entity was already there (written by the application, or by
    /// an earlier run): left as it was.
    pub present: u64,
    /// Old entities the conversion returned `None` for.
    pub skipped: u64,
    /// Old entities deleted (with [`CopyJob::delete_source`]).
    pub deleted: u64,
}

/// One key range of the old kind: `from` (inclusive) to `to` (exclusive), `None` for open;
/// `after` the last key processed.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stripe {
    from: Option<RawKey>,
    to: Option<RawKey>,
    after: Option<RawKey>,
    done: bool,
}

impl CopyState {
    /// Stripes processed to their end, and stripes in all.
    pub fn stripes_done(&self) -> (usize, usize) {
        (
            self.stripes.iter().filter(|s| s.done).count(),
            self.stripes.len(),
        )
    }

    /// Whether every stripe is done.
    pub fn is_done(&self) -> bool {
        self.stripes.iter().all(|s| s.done)
    }
}

const STATE_HEADER: &str = "datastore-entity copy v1";

/// One line per field: `datastore-entity copy v1`, the four counts, then for each stripe
/// `stripe`, `from KEY`, `to KEY`, `after KEY` (those present) and `done` when it is.
impl fmt::Display for CopyState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = &self.report;
        writeln!(f, "{STATE_HEADER}")?;
        writeln!(f, "copied {}", r.copied)?;
        writeln!(f, "present {}", r.present)?;
        writeln!(f, "skipped {}", r.skipped)?;
        writeln!(f, "deleted {}", r.deleted)?;
        for stripe in &self.stripes {
            writeln!(f, "stripe")?;
            for (label, key) in [
                ("from", &stripe.from),
                ("to", &stripe.to),
                ("after", &stripe.after),
            ] {
                if let Some(key) = key {
                    writeln!(f, "{label} {key}")?;
                }
            }
            if stripe.done {
                writeln!(f, "done")?;
            }
        }
        Ok(())
    }
}

impl FromStr for CopyState {
    type Err = Error;

    fn from_str(text: &str) -> Result<CopyState, Error> {
        let bad = |reason: String| Error::Parse {
            what: "a copy job's state",
            text: text.chars().take(200).collect(),
            reason,
        };
        let mut lines = text.lines();
        if lines.next() != Some(STATE_HEADER) {
            return Err(bad(format!("it does not start with `{STATE_HEADER}`")));
        }
        let mut state = CopyState {
            stripes: Vec::new(),
            report: CopyReport::default(),
        };
        for line in lines.filter(|l| !l.is_empty()) {
            let (word, rest) = line.split_once(' ').unwrap_or((line, ""));
            let count = || {
                rest.parse::<u64>()
                    .map_err(|e| bad(format!("`{line}`: {e}")))
            };
            let key = || rest.parse::<RawKey>().map(Some);
            let stripe = state.stripes.last_mut();
            match (word, stripe) {
                ("copied", _) => state.report.copied = count()?,
                ("present", _) => state.report.present = count()?,
                ("skipped", _) => state.report.skipped = count()?,
                ("deleted", _) => state.report.deleted = count()?,
                ("stripe", _) => state.stripes.push(Stripe {
                    from: None,
                    to: None,
                    after: None,
                    done: false,
                }),
                ("from", Some(s)) => s.from = key()?,
                ("to", Some(s)) => s.to = key()?,
                ("after", Some(s)) => s.after = key()?,
                ("done", Some(s)) => s.done = true,
                _ => return Err(bad(format!("unexpected line `{line}`"))),
            }
        }
        if state.stripes.is_empty() {
            return Err(bad("it has no stripe".into()));
        }
        Ok(state)
    }
}

/// Where a [`CopyJob`] is, after each batch.
#[derive(Debug)]
pub struct CopyProgress<'s> {
    /// The state to save to resume from here.
    pub state: &'s CopyState,
    /// Time since the job started.
    pub elapsed: Duration,
    /// The operations per second the ramp allows now.
    pub rate: f64,
}

type Convert<'a, O, N> = Box<dyn Fn(O) -> Result<Option<N>, Error> + Send + Sync + 'a>;
type OnProgress<'a> = Box<dyn FnMut(&CopyProgress<'_>) + Send + 'a>;

/// Copies every entity of kind `O` to its converted `N` (R-S5): the old kind's key range is
/// cut into stripes (16 by default, at quantiles of a sample of its keys), and batches are
/// taken from the stripes in turn, so the writes land on as many key ranges at once rather
/// than marching along one; writes are paced by a [`RampUp`]. Each batch is one transaction:
/// the old entities are read, converted, and written where no new entity is yet (an entity
/// the application already wrote to the new place is never overwritten), and with
/// [`delete_source`](CopyJob::delete_source) the old ones are deleted in the same commit.
///
/// The new entities need complete keys (derived from the old ones), so that a second run
/// finds what the first wrote: after a crash, [`resume`](CopyJob::resume) from the last
/// [`CopyState`] the progress callback saw goes on where it was, and a batch done twice
/// writes nothing twice. An entity whose new key is its old key (a new version of its type,
/// same kind) is rewritten in place (properties neither type declares are kept), and never
/// deleted.
pub struct CopyJob<'a, O, N> {
    db: &'a Db,
    convert: Convert<'a, O, N>,
    stripes: usize,
    ramp: RampUp,
    delete_source: bool,
    batch: usize,
    resume: Option<CopyState>,
    progress: Option<OnProgress<'a>>,
}

impl<O, N> fmt::Debug for CopyJob<'_, O, N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CopyJob")
            .field("from", &std::any::type_name::<O>())
            .field("to", &std::any::type_name::<N>())
            .field("stripes", &self.stripes)
            .field("ramp", &self.ramp)
            .field("delete_source", &self.delete_source)
            .finish_non_exhaustive()
    }
}

/// The mutations one entity of `schema` costs when written (or deleted, with its companions).
fn mutations(schema: &Schema, delete: bool) -> usize {
    let replicas = schema.replicas.as_ref().map_or(0, |r| r.copies as usize);
    let shards: usize = if delete {
        schema.counters.iter().map(|c| c.shards as usize).sum()
    } else {
        0
    };
    1 + replicas + shards
}

impl<'a, O: Entity, N: Entity> CopyJob<'a, O, N> {
    /// A job copying every `O` of `db`'s namespace to `convert(old)` (`Ok(None)` skips it).
    pub fn new(
        db: &'a Db,
        convert: impl Fn(O) -> Result<Option<N>, Error> + Send + Sync + 'a,
    ) -> Self {
        CopyJob {
            db,
            convert: Box::new(convert),
            stripes: 16,
            ramp: RampUp::new(),
            delete_source: false,
            batch: 100,
            resume: None,
            progress: None,
        }
    }

    /// Cuts the old kind's key range into `stripes` stripes (1 to 256).
    pub fn stripes(mut self, stripes: usize) -> Self {
        self.stripes = stripes.clamp(1, 256);
        self
    }

    /// Paces the writes to `ramp` (default: [`RampUp::new`]).
    pub fn ramp(mut self, ramp: RampUp) -> Self {
        self.ramp = ramp;
        self
    }

    /// Deletes each old entity in the commit that copies it.
    pub fn delete_source(mut self, delete: bool) -> Self {
        self.delete_source = delete;
        self
    }

    /// At most `entities` old entities per batch (default 100). A batch is one transaction:
    /// what it writes must fit the service's 10 MiB
    /// ([`MAX_COMMIT_BYTES`](crate::MAX_COMMIT_BYTES)), so take fewer large entities.
    pub fn batch_size(mut self, entities: usize) -> Self {
        self.batch = entities.max(1);
        self
    }

    /// Goes on from `state` (saved from a progress callback) instead of starting afresh.
    pub fn resume(mut self, state: CopyState) -> Self {
        self.resume = Some(state);
        self
    }

    /// Calls `progress` after every batch, with the state to save.
    pub fn on_progress(mut self, progress: impl FnMut(&CopyProgress<'_>) + Send + 'a) -> Self {
        self.progress = Some(Box::new(progress));
        self
    }

    /// Runs the job to its end; what it did (counts of this run and the runs it resumes).
    pub async fn run(mut self) -> Result<CopyReport, Error> {
        let delete = self.delete_source;
        let per_entity = mutations(N::SCHEMA, false)
            + if delete {
                mutations(O::SCHEMA, true)
            } else {
                0
            };
        let batch = self.batch;
        let mut state = match self.resume.take() {
            Some(state) => state,
            None => self.plan().await?,
        };
        let limiter = self.ramp.limiter();
        let mut turn = 0;
        while !state.is_done() {
            // The next stripe not done, in turn.
            let count = state.stripes.len();
            let at = (0..count)
                .map(|i| (turn + i) % count)
                .find(|&i| !state.stripes[i].done)
                .unwrap_or(0);
            turn = at + 1;
            let keys = self.page(&state.stripes[at], batch).await?;
            let Some(last) = keys.last() else {
                state.stripes[at].done = true;
                continue;
            };
            let last = last.raw().clone();
            limiter
                .acquire(u32::try_from(keys.len() * per_entity).unwrap_or(u32::MAX))
                .await;
            let done = self.copy(&keys, delete).await?;
            let r = &mut state.report;
            r.copied += done.copied;
            r.present += done.present;
            r.skipped += done.skipped;
            r.deleted += done.deleted;
            let stripe = &mut state.stripes[at];
            stripe.after = Some(last);
            stripe.done = keys.len() < batch;
            if let Some(progress) = &mut self.progress {
                progress(&CopyProgress {
                    state: &state,
                    elapsed: limiter.elapsed(),
                    rate: limiter.rate(),
                });
            }
        }
        Ok(state.report)
    }

    /// The stripes of a new job: bounds at the quantiles of a uniform sample (reservoir) of
    /// the old kind's keys, read by one keys-only query.
    async fn plan(&self) -> Result<CopyState, Error> {
        let room = (self.stripes * 32).min(4096);
        let mut sample: Vec<Key<O>> = Vec::with_capacity(room);
        let mut seen = 0_usize;
        let mut keys = std::pin::pin!(self.db.query::<O>().keys_only().stream());
        while let Some(key) = keys.try_next().await? {
            seen += 1;
            if sample.len() < room {
                sample.push(key);
            } else if let Some(slot) = sample.get_mut(fastrand::usize(..seen)) {
                *slot = key;
            }
        }
        sample.sort();
        let mut bounds: Vec<RawKey> = (1..self.stripes)
            .filter_map(|i| sample.get(i * sample.len() / self.stripes))
            .map(|k| k.raw().clone())
            .collect();
        bounds.dedup();
        let starts = std::iter::once(None).chain(bounds.iter().cloned().map(Some));
        let ends = bounds
            .iter()
            .cloned()
            .map(Some)
            .chain(std::iter::once(None));
        Ok(CopyState {
            stripes: starts
                .zip(ends)
                .map(|(from, to)| Stripe {
                    from,
                    to,
                    after: None,
                    done: false,
                })
                .collect(),
            report: CopyReport::default(),
        })
    }

    /// The next keys of `stripe`, in key order: after the last processed (or from its start),
    /// before its end.
    async fn page(&self, stripe: &Stripe, batch: usize) -> Result<Vec<Key<O>>, Error> {
        let typed = |key: &RawKey| Key::<O>::from_raw(key.clone());
        let mut query = self.db.query::<O>().order(Key::<O>::PROPERTY.asc());
        query = match (&stripe.after, &stripe.from) {
            (Some(after), _) => query.filter(Key::<O>::PROPERTY.gt(typed(after)?)),
            (None, Some(from)) => query.filter(Key::<O>::PROPERTY.ge(typed(from)?)),
            (None, None) => query,
        };
        if let Some(to) = &stripe.to {
            query = query.filter(Key::<O>::PROPERTY.lt(typed(to)?));
        }
        Ok(query.keys_only().limit(batch).fetch().await?.items)
    }

    /// One batch, in one transaction.
    async fn copy(&self, keys: &[Key<O>], delete: bool) -> Result<CopyReport, Error> {
        let convert = &self.convert;
        self.db
            .transaction(async |tx| {
                let mut done = CopyReport::default();
                // Each old entity still there, with its conversion (`None`: skipped).
                let mut pairs = Vec::new();
                for (key, old) in keys.iter().zip(tx.get_many(keys).await?) {
                    if let Some(old) = old {
                        pairs.push((key, convert(old)?));
                    }
                }
                // Written in an order scattered by key, not the page's key order.
                pairs.sort_by_cached_key(|(key, _)| fnv1a_mixed(key.to_string().as_bytes()));
                let mut targets = Vec::new();
                for (old_key, new) in &pairs {
                    let Some(new) = new else { continue };
                    let key = new.entity_key()?;
                    if !key.is_complete() {
                        return Err(Error::InvalidKey {
                            key: format!("{key:?}"),
                            reason: "a copy job's new entities need complete keys (derived \
                                     from the old ones), so that a resumed job finds what it \
                                     wrote"
                                .into(),
                        });
                    }
                    targets.push((key.raw() == old_key.raw(), key));
                }
                let elsewhere: Vec<Key<N>> = targets
                    .iter()
                    .filter(|(same, _)| !same)
                    .map(|(_, key)| key.clone())
                    .collect();
                let mut there = tx.get_many(&elsewhere).await?.into_iter();
                let mut targets = targets.into_iter();
                for (old_key, new) in &pairs {
                    let Some(new) = new else {
                        done.skipped += 1;
                        continue;
                    };
                    // A new version of the type under the same key: rewritten in place.
                    let same = targets.next().is_some_and(|(same, _)| same);
                    if !same && there.next().flatten().is_some() {
                        done.present += 1;
                    } else {
                        tx.put(new).await?;
                        done.copied += 1;
                    }
                    if delete && !same {
                        tx.delete(*old_key).await?;
                        done.deleted += 1;
                    }
                }
                Ok::<_, Error>(done)
            })
            .await
    }
}
