//! The context cache: what one handle (a request's, say) read or wrote, kept in memory for its
//! lifetime, as NDB's context cache. Exact for what goes through the handle: a write replaces
//! what it knew of its keys (a whole entity written is remembered, a deletion as "missing",
//! anything else — a partial write, a transform, a condition, a failed commit — forgotten).

use std::collections::HashMap;
use std::sync::Mutex;

use crate::backend::{Change, Mask, Mutation};
use crate::model::key::RawKey;
use crate::model::value::PropertyMap;

/// Each key read or written through a handle: its entity, or `None` where it is missing.
#[derive(Default)]
pub(crate) struct ContextCache {
    entries: Mutex<HashMap<RawKey, Option<PropertyMap>>>,
}

/// What a commit leaves known of one key, if it succeeds.
pub(crate) enum Written {
    /// The entity is these properties (`None`: deleted).
    Known(RawKey, Option<PropertyMap>),
    /// Something changed that the change alone does not say.
    Forgotten(RawKey),
}

impl ContextCache {
    fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<RawKey, Option<PropertyMap>>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What is known of each key: `None` where nothing is, `Some(None)` where it is missing.
    pub(crate) fn get(&self, keys: &[RawKey]) -> Vec<Option<Option<PropertyMap>>> {
        let entries = self.entries();
        keys.iter().map(|k| entries.get(k).cloned()).collect()
    }

    /// Remembers what a lookup read.
    pub(crate) fn remember<'k>(
        &self,
        read: impl IntoIterator<Item = (&'k RawKey, &'k Option<PropertyMap>)>,
    ) {
        let mut entries = self.entries();
        for (key, found) in read {
            entries.insert(key.clone(), found.clone());
        }
    }

    /// What `changes` will leave known if they commit.
    pub(crate) fn written(changes: &[Change]) -> Vec<Written> {
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

    /// After a commit: what it wrote is known if it succeeded, forgotten otherwise (its
    /// outcome may be unknown).
    pub(crate) fn committed(&self, written: Vec<Written>, succeeded: bool) {
        let mut entries = self.entries();
        for write in written {
            match write {
                Written::Known(key, found) if succeeded => {
                    entries.insert(key, found);
                }
                Written::Known(key, _) | Written::Forgotten(key) => {
                    entries.remove(&key);
                }
            }
        }
    }

    /// Forgets everything.
    pub(crate) fn clear(&self) {
        self.entries().clear();
    }
}
