//! Past versions of the engine's tables, so that a transaction reads the store as it was when
//! it began (a snapshot) and a read-only transaction can read at a `read_time`: a multi-version
//! store kept as an undo log. Each commit is a version; for every entity a commit writes, the
//! history keeps its stored form before, tagged with that version. Reading at version `v` is
//! reading the store, except for the entities changed after `v`: their form before their first
//! change after `v` is the answer, and their index entries are recomputed from it (index
//! entries follow from entities, so they are not kept). Versions that no open transaction and
//! no read inside the retention window can ask for are collected.
//!
//! The history lives in memory, for every store: a file reopened keeps no past versions.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use std::ops::{Bound, RangeBounds};

use smallvec::SmallVec;

use datastore_entity_core::error::{Error, ServiceCode};
use datastore_entity_core::format::file::ENTITIES;
use datastore_entity_core::format::keycode;
use datastore_entity_core::hash::Map;
use datastore_entity_core::model::scalar::Timestamp;

use super::candidates::corrupt;
use super::index::{self, Composite, decode_entity};
use super::ranges::overlay;
use super::store::{Batch, Range, Store};

/// How long past versions are kept for `read_time` reads by default: the service's hour.
pub(crate) const DEFAULT_RETENTION: Duration = Duration::from_secs(3600);

/// The most memory past versions take by default (their entities' keys and stored forms):
/// past it, the oldest versions are collected before their hour is over, and the window
/// `read_time` may reach shrinks accordingly; a transaction whose snapshot needs more aborts.
pub(crate) const DEFAULT_MAX_BYTES: usize = 64 << 20;

/// What keeping one change costs besides its key and stored form (its records in the maps).
const CHANGE_OVERHEAD: usize = 64;

/// One entity's stored form before a change, and the version that changed it.
struct Before {
    version: u64,
    value: Option<Box<[u8]>>,
}

/// What a commit replaced: each entity written (its entities-table key) with its stored form
/// before (`None`: it did not exist), recorded once the commit is applied.
pub(crate) type Undo = Vec<(Vec<u8>, Option<Vec<u8>>)>;

/// Past versions of entities. Index entries are not kept: they follow from the entities, so a
/// read of an index at a past version recomputes the entries of the entities changed since.
pub(crate) struct History {
    /// The version the last recorded commit made (0: the store as opened).
    now: u64,
    /// Every version from `floor` on can be read.
    floor: u64,
    /// When the `floor` version was current from: reads at an earlier time are refused.
    floor_time: Timestamp,
    /// For each entity changed after `floor`: its stored forms before each change, oldest first.
    /// The key is held once, here and in `log` (a million changes kept by default).
    changed: Map<Arc<[u8]>, SmallVec<[Before; 1]>>,
    /// The changes kept, in version order (what to collect first, and what changed since).
    log: VecDeque<(u64, Arc<[u8]>)>,
    /// When each version after `floor` was committed, in order.
    times: VecDeque<(u64, Timestamp)>,
    /// When the last commit was applied: each commit's time is later (a file keeps it, so
    /// times and versions only grow, even if the system clock goes back between runs).
    clock: Timestamp,
    retention: Duration,
    /// The bytes the changes kept take, and the most they may.
    bytes: usize,
    max_bytes: usize,
}

impl History {
    pub(crate) fn new() -> History {
        History {
            now: 0,
            floor: 0,
            floor_time: Timestamp::now(),
            changed: Map::default(),
            log: VecDeque::new(),
            times: VecDeque::new(),
            clock: Timestamp::MIN,
            retention: DEFAULT_RETENTION,
            bytes: 0,
            max_bytes: DEFAULT_MAX_BYTES,
        }
    }

    /// Keeps versions for `retention` (0: only for open transactions).
    pub(crate) fn keep(&mut self, retention: Duration) {
        self.retention = retention;
    }

    /// Keeps versions in at most `max_bytes` of memory.
    pub(crate) fn keep_bytes(&mut self, max_bytes: usize) {
        self.max_bytes = max_bytes;
    }

    /// Whether the versions kept take more memory than they may (some transaction's snapshot
    /// needs them).
    pub(crate) fn over_budget(&self) -> bool {
        self.bytes > self.max_bytes
    }

    /// The current version.
    pub(crate) fn now(&self) -> u64 {
        self.now
    }

    /// Whether a commit must record what it replaces: someone may read the past.
    pub(crate) fn recording(&self, transactions_open: bool) -> bool {
        transactions_open || !self.retention.is_zero()
    }

    /// The time of the next commit: now, or just after the last commit if the clock says
    /// otherwise.
    pub(crate) fn next_time(&self) -> Timestamp {
        let after = Timestamp::from_micros(self.clock.as_micros().saturating_add(1));
        Timestamp::now().max(after)
    }

    /// Sets the time of the last commit (a file's, when it is opened).
    pub(crate) fn load_clock(&mut self, time: Timestamp) {
        self.clock = self.clock.max(time);
    }

    /// Records a commit applied at `time` (from [`next_time`](History::next_time)) as the
    /// next version. Without anyone to read the past, the version passes and nothing is kept.
    pub(crate) fn commit(&mut self, undo: Undo, recording: bool, time: Timestamp) {
        self.now += 1;
        self.clock = self.clock.max(time);
        let version = self.now;
        if !recording {
            // Nobody reads the past (no transaction is open, no retention): none is kept.
            self.changed.clear();
            self.log.clear();
            self.times.clear();
            self.bytes = 0;
            self.floor = version;
            self.floor_time = time;
            return;
        }
        self.times.push_back((version, time));
        for (key, value) in undo {
            let key = match self.changed.get_key_value(key.as_slice()) {
                Some((held, _)) => held.clone(),
                None => Arc::from(key),
            };
            // A stored form read from the store is a copy of its length: boxed in place.
            let value = value.map(Vec::into_boxed_slice);
            self.bytes += cost(&key, value.as_deref());
            let befores = self.changed.entry(key.clone()).or_default();
            befores.push(Before { version, value });
            self.log.push_back((version, key));
        }
    }

    /// Whether the entity at `key` changed after `version`.
    pub(crate) fn changed_after(&self, key: &[u8], version: u64) -> bool {
        self.changed
            .get(key)
            .and_then(|befores| befores.last())
            .is_some_and(|last| last.version > version)
    }

    /// The entities changed after `version`, each once, newest change first.
    fn changed_since(&self, version: u64) -> Vec<&[u8]> {
        let mut seen = std::collections::HashSet::new();
        self.log
            .iter()
            .rev()
            .take_while(|(v, _)| *v > version)
            .filter(|(_, key)| seen.insert(&**key))
            .map(|(_, key)| &**key)
            .collect()
    }

    /// The version to read for a read at `time`: the last committed at or before it.
    pub(crate) fn version_at(&self, time: Timestamp) -> Result<u64, Error> {
        // As the service (the Firestore emulator) answers a read in the future.
        if time > Timestamp::now() {
            return Err(Error::Service {
                code: ServiceCode::InvalidArgument,
                message: format!("The requested 'read_time' cannot be in the future ({time})."),
            });
        }
        if time < self.floor_time {
            return Err(Error::Service {
                code: ServiceCode::FailedPrecondition,
                message: format!(
                    "read_time {time} is older than the embedded engine keeps versions (from \
                     {}: the engine's opening, the retention window of {} s, or the most \
                     changes it keeps, whichever is latest)",
                    self.floor_time,
                    self.retention.as_secs()
                ),
            });
        }
        let after = self.times.partition_point(|(_, t)| *t <= time);
        Ok(match after {
            0 => self.floor,
            n => self.times[n - 1].0,
        })
    }

    /// Collects the versions nobody can read any more: those older than `oldest_open` (the
    /// oldest snapshot an open transaction reads), than the retention window, and, past
    /// the memory they may take, the oldest, unless a transaction reads them.
    pub(crate) fn collect(&mut self, oldest_open: Option<u64>) {
        let expired = Timestamp::now() - self.retention;
        let pinned = oldest_open.unwrap_or(u64::MAX);
        loop {
            let Some(&(version, time)) = self.times.front() else {
                if oldest_open.is_none() {
                    self.floor = self.now;
                    if self.retention.is_zero() {
                        self.floor_time = Timestamp::now();
                    }
                }
                return;
            };
            // Reading at `version - 1` needs this version's changes: keep them while a
            // transaction reads before it, inside the window, and within the bound.
            let needed_by_transaction = version > pinned;
            let in_window = time > expired && self.bytes <= self.max_bytes;
            if needed_by_transaction || in_window {
                return;
            }
            while let Some((v, _)) = self.log.front()
                && *v == version
            {
                let Some((_, key)) = self.log.pop_front() else {
                    break;
                };
                if let Some(befores) = self.changed.get_mut(&*key) {
                    let before = befores.remove(0);
                    self.bytes -= cost(&key, before.value.as_deref());
                    if befores.is_empty() {
                        self.changed.remove(&*key);
                    }
                }
            }
            self.times.pop_front();
            self.floor = version;
            self.floor_time = time;
        }
    }

    /// The stored form of the entity at `key` at `version`, if it changed since: `Some(None)`
    /// when it did not exist then.
    fn before(&self, key: &[u8], version: u64) -> Option<Option<&[u8]>> {
        let befores = self.changed.get(key)?;
        let i = befores.partition_point(|b| b.version <= version);
        befores.get(i).map(|b| b.value.as_deref())
    }
}

/// The memory keeping one change takes.
fn cost(key: &[u8], value: Option<&[u8]>) -> usize {
    key.len() + value.map_or(0, <[u8]>::len) + CHANGE_OVERHEAD
}

/// The store as it was at a past version: reads only. Entities come from the history; an
/// index's entries are the store's, except those of the entities changed since, which are
/// recomputed from their current and past stored forms.
pub(crate) struct AsOf<'s> {
    pub(crate) store: &'s dyn Store,
    pub(crate) history: &'s History,
    pub(crate) version: u64,
    pub(crate) composites: &'s Map<String, Vec<Composite>>,
}

impl AsOf<'_> {
    fn current(&self) -> bool {
        self.version >= self.history.now
    }

    /// The entries of `table` in `range` that differ at this version from the store's, in key
    /// order: `None` for an entry the store has and the version had not.
    fn overrides(&self, table: &str, range: Range<'_>) -> Result<Undo, Error> {
        let mut out = std::collections::BTreeMap::new();
        for at in self.history.changed_since(self.version) {
            if table == ENTITIES {
                if RangeBounds::<[u8]>::contains(&range, at) {
                    let before = self.history.before(at, self.version).flatten();
                    out.insert(at.to_vec(), before.map(<[u8]>::to_vec));
                }
                continue;
            }
            let key = keycode::Reader::new(at).key().map_err(|_| corrupt())?;
            let composites = self
                .composites
                .get(key.kind())
                .map_or(&[][..], Vec::as_slice);
            // The entries of a stored form: present at this version (`then`) or hidden.
            let mut entries = |bytes: &[u8], then: bool| -> Result<(), Error> {
                let (properties, _) =
                    decode_entity(bytes.to_vec(), self.store.written_here()).ok_or_else(corrupt)?;
                for (t, entry) in index::entries(&key, &properties, composites) {
                    if t == table && RangeBounds::<[u8]>::contains(&range, entry.as_slice()) {
                        out.insert(entry.into_vec(), then.then(Vec::new));
                    }
                }
                Ok(())
            };
            let mut now = None;
            self.store
                .get(ENTITIES, at, &mut |bytes| now = Some(bytes.to_vec()))?;
            if let Some(now) = now {
                entries(&now, false)?;
            }
            if let Some(Some(then)) = self.history.before(at, self.version) {
                entries(then, true)?;
            }
        }
        Ok(out.into_iter().collect())
    }
}

impl Store for AsOf<'_> {
    fn written_here(&self) -> bool {
        // The past versions came from the store.
        self.store.written_here()
    }

    fn get(&self, table: &str, key: &[u8], visit: &mut dyn FnMut(&[u8])) -> Result<bool, Error> {
        if table == ENTITIES
            && !self.current()
            && let Some(value) = self.history.before(key, self.version)
        {
            return Ok(value.map(visit).is_some());
        }
        if table != ENTITIES && !self.current() {
            let range = (Bound::Included(key), Bound::Included(key));
            if let Some((_, value)) = self.overrides(table, range)?.into_iter().next() {
                return Ok(value.as_deref().map(visit).is_some());
            }
        }
        self.store.get(table, key, visit)
    }

    fn scan(
        &self,
        table: &str,
        range: Range<'_>,
        reverse: bool,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), Error> {
        let overrides = match self.current() {
            true => Vec::new(),
            false => self.overrides(table, range)?,
        };
        if overrides.is_empty() {
            return self.store.scan(table, range, reverse, visit);
        }
        // The store's entries and the overrides, merged in scan order; an override replaces
        // (or, when absent then, hides) the store's entry of the same key.
        let overrides = overrides.iter().map(|(k, v)| (k.as_slice(), v.as_deref()));
        overlay(overrides, reverse, visit, |visit| {
            self.store.scan(table, range, reverse, visit)
        })
    }

    fn apply(&mut self, _: Batch) -> Result<(), Error> {
        Err(Error::storage(
            "a past version of the store is read only".to_owned(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::embedded::memory::Memory;

    #[test]
    fn versions_are_kept_while_needed_and_collected_after() {
        let mut history = History::new();
        let entity = |n: u8| vec![n];
        let commit = |history: &mut History, undo| {
            let time = history.next_time();
            history.commit(undo, true, time);
        };
        commit(&mut history, vec![(entity(1), None), (entity(2), None)]);
        let v1 = history.now();
        commit(&mut history, vec![(entity(1), Some(vec![10]))]);
        commit(
            &mut history,
            vec![(entity(1), Some(vec![11])), (entity(2), Some(vec![20]))],
        );
        assert_eq!(history.before(&entity(1), 0), Some(None));
        assert_eq!(history.before(&entity(1), v1), Some(Some(&[10][..])));
        assert_eq!(history.before(&entity(1), v1 + 1), Some(Some(&[11][..])));
        assert_eq!(history.before(&entity(1), history.now()), None);
        assert!(history.changed_after(&entity(2), v1 + 1));
        assert!(!history.changed_after(&entity(2), history.now()));
        assert_eq!(history.changed_since(v1), vec![&[2][..], &[1][..]]);
        // Without retention, only what a transaction at v1 reads is kept.
        history.keep(Duration::ZERO);
        history.collect(Some(v1));
        assert_eq!(history.log.len(), 3);
        assert_eq!(history.before(&entity(1), v1), Some(Some(&[10][..])));
        history.collect(None);
        assert!(history.log.is_empty() && history.changed.is_empty());
        let store = Memory::default();
        let composites = Map::default();
        let at = AsOf {
            store: &store,
            history: &history,
            version: 0,
            composites: &composites,
        };
        assert!(!at.get(ENTITIES, &entity(1), &mut |_| {}).unwrap());
    }
}
