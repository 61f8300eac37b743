//! Composite indexes built on a query's first use ([`Embedded::build_indexes`]), a slice at a
//! time: from its start every write keeps the index (as a declared one), no query reads it,
//! and each query that arrives while it is unfinished backfills one slice of the kind's
//! entities — at most [`SLICE_TIME`] once [`SLICE_ENTITIES`] are done — under the engine's
//! lock, which it then lets go. The entities backfilled are read as they are now; one written
//! since the build began is already kept by its write. Done, the index is recorded (a file's
//! `INDEX_PREFIX` record) and planned with.
//!
//! A slice's entries reach a file without waiting for its disk (`Store::apply_derived`): the
//! slice that finishes the build writes the index's record durably, and with it everything
//! written before. A file's build interrupted (the process stopped) left entries no write has
//! kept since, and no record: the same index built again first deletes whatever its table
//! holds. So does every running build after a write fails (`Store::failed_writes`): the file
//! is then opened again at its last durable commit, without the slices written since.
//!
//! [`Embedded::build_indexes`]: super::Embedded::build_indexes

use std::ops::Bound;
use std::time::{Duration, Instant};

use super::bounds::Bounds;
use super::candidates;
use super::index::{self, Composite};
use super::metadata;
use super::store::{Batch, Store};
use datastore_entity_core::error::Error;
use datastore_entity_core::format::file::{INDEX_PREFIX, KINDS, META};
use datastore_entity_core::format::keycode;
use datastore_entity_core::hash::Map;

/// The entities (or leftover entries) a slice always gets through, however slow the machine.
pub(super) const SLICE_ENTITIES: usize = 64;

/// How long a slice goes on past [`SLICE_ENTITIES`]; it also stops at 8 times as many.
pub(super) const SLICE_TIME: Duration = Duration::from_millis(5);

/// Where a build is.
#[derive(Debug)]
enum Phase {
    /// Deleting what an interrupted build left in the table, after this entry.
    Clearing(Option<Vec<u8>>),
    /// Backfilling the kind's entities, after this entry of the kinds table.
    Filling(Option<Vec<u8>>),
}

/// A composite index being built.
#[derive(Debug)]
pub(super) struct Building {
    pub(super) index: Composite,
    phase: Phase,
}

impl Building {
    pub(super) fn new(index: Composite) -> Building {
        Building {
            index,
            phase: Phase::Clearing(None),
        }
    }

    /// Back to the start: the slices written so far may be gone.
    pub(super) fn restart(&mut self) {
        self.phase = Phase::Clearing(None);
    }
}

/// What one slice left: the batch to apply, and whether the index is whole.
pub(super) struct Slice {
    pub(super) batch: Batch,
    pub(super) done: bool,
}

/// Whether a slice started at `started` with `done` items may go on.
fn room(started: Instant, done: usize) -> bool {
    done < SLICE_ENTITIES || (done < 8 * SLICE_ENTITIES && started.elapsed() < SLICE_TIME)
}

/// One slice of `build` over `store`.
pub(super) fn slice(store: &dyn Store, build: &mut Building) -> Result<Slice, Error> {
    let started = Instant::now();
    let mut batch = Batch::default();
    let mut done = 0;
    if let Phase::Clearing(after) = &build.phase {
        let mut leftovers = Vec::new();
        let start = after.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
        store.scan(
            &build.index.table,
            (start, Bound::Unbounded),
            false,
            &mut |k, _| {
                leftovers.push(k.to_vec());
                room(started, leftovers.len())
            },
        )?;
        done = leftovers.len();
        let cleared = !room(started, done);
        build.phase = match (cleared, leftovers.last()) {
            (true, Some(last)) => Phase::Clearing(Some(last.clone())),
            _ => Phase::Filling(None),
        };
        for k in leftovers {
            batch.delete(build.index.table.clone(), k);
        }
        if cleared {
            return Ok(Slice { batch, done: false });
        }
    }
    let Phase::Filling(after) = &mut build.phase else {
        return Ok(Slice { batch, done: false });
    };
    let kind = build.index.kind.clone();
    let mut finished = true;
    let mut fill = |partition: &_| -> Result<(), Error> {
        if !finished {
            return Ok(());
        }
        let prefix = index::kind_prefix(partition, &kind);
        // A partition before the one the last slice stopped in is whole already.
        if let (Some(a), Some(end)) = (after.as_deref(), keycode::prefix_end(&prefix))
            && a >= end.as_slice()
        {
            return Ok(());
        }
        let bounds = Bounds::prefix(prefix.clone());
        let (start, end) = bounds.range();
        let start = match after.as_deref() {
            Some(a) if a >= prefix.as_slice() => Bound::Excluded(a),
            _ => start,
        };
        // Listed up to the most a slice takes, then backfilled one by one while the slice
        // has room: its time is the entities' reading, not their listing.
        let mut keys = Vec::new();
        store.scan(KINDS, (start, end), false, &mut |k, _| {
            keys.push(k.to_vec());
            done + keys.len() < 8 * SLICE_ENTITIES
        })?;
        let mut at = Vec::with_capacity(64);
        keycode::partition(&mut at, partition);
        let head = at.len();
        let mut filled = 0;
        for k in &keys {
            if !room(started, done + filled) {
                break;
            }
            filled += 1;
            at.truncate(head);
            at.extend_from_slice(&k[prefix.len()..]);
            let key = keycode::Reader::new(&at)
                .key()
                .map_err(|_| candidates::corrupt())?;
            // Deleted since it was listed in this slice: nothing to keep.
            let Some((properties, _)) = candidates::load(store, &at)? else {
                continue;
            };
            for (table, entry) in
                index::entries(&key, &properties, std::slice::from_ref(&build.index))
            {
                if table.as_ref() == build.index.table.as_str() {
                    batch.put(table, entry, Vec::new());
                }
            }
        }
        // Every key listed filled: the partition is whole, or the slice's listing stopped
        // where the next one goes on.
        let whole = filled == keys.len() && done + filled < 8 * SLICE_ENTITIES;
        done += filled;
        if let Some(last) = keys[..filled].last() {
            *after = Some(last.clone());
        }
        finished = whole && room(started, done);
        Ok(())
    };
    metadata::partitions(store, &mut fill)?;
    if finished {
        batch.put(
            META,
            [INDEX_PREFIX, build.index.table.as_bytes()].concat(),
            build.index.encode(),
        );
    }
    Ok(Slice {
        batch,
        done: finished,
    })
}

/// The composite indexes writes keep: the declared ones and those being built.
pub(super) fn kept_by_writes<'c>(
    composites: &'c Map<String, Vec<Composite>>,
    building: &[Building],
) -> std::borrow::Cow<'c, Map<String, Vec<Composite>>> {
    if building.is_empty() {
        return std::borrow::Cow::Borrowed(composites);
    }
    let mut kept = composites.clone();
    for build in building {
        kept.entry(build.index.kind.clone())
            .or_default()
            .push(build.index.clone());
    }
    std::borrow::Cow::Owned(kept)
}
