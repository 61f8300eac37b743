//! The context cache: what one handle (a request's, say) read or wrote, kept in memory for its
//! lifetime, as NDB's context cache. Exact for what goes through the handle: a write replaces
//! what it knew of its keys (a whole entity written is remembered, a deletion as "missing",
//! anything else — a partial write, a transform, a condition, a failed commit — forgotten).
//!
//! Reads and writes through clones of one handle may overlap: a write forgets its keys before
//! it is sent, and what it wrote is remembered only if no other write overlapped it; a read
//! remembers what it read only if no write was under way while it read. A write whose future
//! is dropped midway leaves its keys forgotten.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::backend::{Change, Mask, Mutation};
use datastore_entity_core::model::key::RawKey;
use datastore_entity_core::model::value::PropertyMap;

/// Each key read or written through a handle: its entity, or `None` where it is missing.
#[derive(Default)]
pub(crate) struct ContextCache {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    entries: HashMap<RawKey, Option<PropertyMap>>,
    /// Counts writes begun and ended: a read or a write that saw it change overlapped one.
    generation: u64,
    /// Writes under way.
    writing: usize,
}

/// What a commit leaves known of one key, if it succeeds.
pub(crate) enum Written {
    /// The entity is these properties (`None`: deleted).
    Known(RawKey, Option<PropertyMap>),
    /// Something changed that the change alone does not say.
    Forgotten(RawKey),
}

impl Written {
    fn key(&self) -> &RawKey {
        match self {
            Written::Known(key, _) | Written::Forgotten(key) => key,
        }
    }
}

/// A read begun: what it may remember depends on the writes since.
pub(crate) struct Reading {
    generation: Option<u64>,
}

/// A write under way; dropped, it ends (its keys stay forgotten if it was not recorded).
pub(crate) struct Writing<'c> {
    cache: &'c ContextCache,
    /// The generation it began at, if no other write was under way then.
    alone_since: Option<u64>,
    written: Vec<Written>,
}

impl ContextCache {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What is known of each key (`None` where nothing is, `Some(None)` where it is missing),
    /// and the read that fetches the others begun.
    pub(crate) fn get(&self, keys: &[RawKey]) -> (Vec<Option<Option<PropertyMap>>>, Reading) {
        let state = self.state();
        let known = keys.iter().map(|k| state.entries.get(k).cloned()).collect();
        let generation = (state.writing == 0).then_some(state.generation);
        (known, Reading { generation })
    }

    /// Remembers what a lookup read, unless a write was under way meanwhile (what it read may
    /// be older than what that write left).
    pub(crate) fn remember<'k>(
        &self,
        reading: Reading,
        read: impl IntoIterator<Item = (&'k RawKey, &'k Option<PropertyMap>)>,
    ) {
        let mut state = self.state();
        if reading.generation != Some(state.generation) || state.writing > 0 {
            return;
        }
        for (key, found) in read {
            state.entries.insert(key.clone(), found.clone());
        }
    }

    /// A write of `changes` begun: their keys forgotten until it ends.
    pub(crate) fn writing(&self, changes: &[Change]) -> Writing<'_> {
        let written = written(changes);
        let mut state = self.state();
        for write in &written {
            state.entries.remove(write.key());
        }
        let alone = state.writing == 0;
        state.writing += 1;
        state.generation += 1;
        Writing {
            cache: self,
            alone_since: alone.then_some(state.generation),
            written,
        }
    }

    /// Forgets everything.
    pub(crate) fn clear(&self) {
        self.state().entries.clear();
    }
}

impl Writing<'_> {
    /// The commit ended: what it wrote is known if it succeeded and no other write overlapped
    /// it (the database's order of overlapping writes is not known here).
    pub(crate) fn committed(mut self, succeeded: bool) {
        let mut state = self.cache.state();
        if succeeded && self.alone_since == Some(state.generation) {
            for write in std::mem::take(&mut self.written) {
                if let Written::Known(key, found) = write {
                    state.entries.insert(key, found);
                }
            }
        }
    }
}

impl Drop for Writing<'_> {
    fn drop(&mut self) {
        let mut state = self.cache.state();
        // Keys not recorded stay forgotten: another write or read may have filled them.
        for write in &self.written {
            state.entries.remove(write.key());
        }
        state.writing -= 1;
        state.generation += 1;
    }
}

/// What `changes` will leave known if they commit.
fn written(changes: &[Change]) -> Vec<Written> {
    changes
        .iter()
        .filter(|c| c.mutation.key().is_complete())
        .map(|change| {
            let key = change.mutation.key().clone();
            let plain = change.condition.is_none() && change.transforms.is_empty();
            match &change.mutation {
                Mutation::Delete(_) if plain => Written::Known(key, None),
                Mutation::Insert(_, properties, Mask::Whole)
                | Mutation::Update(_, properties, Mask::Whole)
                | Mutation::Upsert(_, properties, Mask::Whole)
                    if plain =>
                {
                    Written::Known(key, Some(properties.clone()))
                }
                _ => Written::Forgotten(key),
            }
        })
        .collect()
}
