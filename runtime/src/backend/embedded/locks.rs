//! The locks of read-write transactions: the entities each holds (read, not yet committed)
//! and the transactions waiting for one. A free entity goes to the oldest transaction
//! waiting for it (first come, first served: a younger transaction never overtakes, then gets
//! wounded by, an older one); a wait that would close a circle aborts its youngest
//! transaction (wound-wait), so nothing deadlocks.

use std::collections::{HashMap, HashSet};

use super::index;
use super::transactions::{Abort, Transactions};
use datastore_entity_core::error::Error;
use datastore_entity_core::model::key::RawKey;

/// Whether a read-write transaction's lookup may read.
pub(super) enum Locking {
    /// It holds every lock it needs.
    Held,
    /// Another, older transaction holds one: wait for a release.
    Wait,
}

/// Who holds each locked entity, and who waits.
#[derive(Default)]
pub(super) struct Locks {
    /// The entities read-write transactions have read (entities-table keys), with the
    /// transaction holding each.
    held: HashMap<Vec<u8>, u64>,
    /// The transactions waiting for locks: their ages and the entities they wait for.
    waiting: HashMap<u64, (u64, Vec<Vec<u8>>)>,
}

impl Locks {
    /// Takes the locks transaction `id`'s lookup of `keys` needs: returns whether it holds
    /// them now, and whether it wounded another transaction of a circle (whose locks are
    /// then free). A read-only transaction takes none.
    pub(super) fn lock(
        &mut self,
        transactions: &mut Transactions,
        id: u64,
        keys: &[RawKey],
    ) -> Result<(Locking, bool), Error> {
        let t = transactions.get(id)?;
        if t.read_only {
            return Ok((Locking::Held, false));
        }
        if let Some(aborted) = t.aborted {
            return Err(aborted.error());
        }
        let age = t.age;
        let wanted: Vec<Vec<u8>> = keys
            .iter()
            .filter(|k| k.is_complete())
            .map(index::entity_key)
            .collect();
        let blockers = self.blockers(id, age, &wanted);
        if !blockers.is_empty() {
            // Waiting is safe unless the wait closes a circle (a deadlock): then the youngest
            // transaction of the circle aborts, and the others go on.
            let mut wounded_any = false;
            if let Some(circle) = self.circle(id, &blockers) {
                let victim = circle
                    .iter()
                    .copied()
                    .max_by_key(|t| transactions.age(*t))
                    .unwrap_or(id);
                // Aborted, it holds nothing more: the others go on at once, whether or not
                // its client ever rolls it back.
                self.abort(transactions, victim, Abort::Deadlock);
                if victim == id {
                    return Err(Abort::Deadlock.error());
                }
                wounded_any = true;
            }
            self.waiting.insert(id, (age, wanted));
            return Ok((Locking::Wait, wounded_any));
        }
        self.waiting.remove(&id);
        let t = transactions.get_mut(id)?;
        for at in wanted {
            if self.held.insert(at.clone(), id) != Some(id) {
                t.locks.push(at);
            }
        }
        Ok((Locking::Held, false))
    }

    /// Aborts transaction `id`: it can only end (any use of it but a rollback is refused),
    /// and its locks and wait are released now.
    pub(super) fn abort(&mut self, transactions: &mut Transactions, id: u64, why: Abort) {
        if let Some(mut t) = transactions.remove(id) {
            t.aborted = Some(why);
            self.release(id, &mut t.locks);
            transactions.restore(id, t);
        }
        self.waiting.remove(&id);
    }

    /// Releases `locked` (transaction `id`'s), and its wait.
    pub(super) fn release(&mut self, id: u64, locked: &mut Vec<Vec<u8>>) {
        for at in locked.drain(..) {
            self.held.remove(&at);
        }
        self.waiting.remove(&id);
    }

    /// Withdraws transaction `id`'s wait; whether it was waiting.
    pub(super) fn withdraw(&mut self, id: u64) -> bool {
        self.waiting.remove(&id).is_some()
    }

    /// The transactions `id` (of age `age`) would wait for to lock `wanted`: the holders of
    /// those entities, and older transactions already waiting for a free one.
    fn blockers(&self, id: u64, age: u64, wanted: &[Vec<u8>]) -> Vec<u64> {
        let mut out = Vec::new();
        for at in wanted {
            match self.held.get(at) {
                Some(&holder) if holder != id => out.push(holder),
                Some(_) => {}
                None => out.extend(
                    self.waiting
                        .iter()
                        .filter(|(other, (theirs, keys))| {
                            **other != id && *theirs < age && keys.contains(at)
                        })
                        .map(|(other, _)| *other),
                ),
            }
        }
        out
    }

    /// A circle of waiting transactions that `id` waiting for `blockers` would close: the
    /// transactions on it (`id` included), if there is one.
    fn circle(&self, id: u64, blockers: &[u64]) -> Option<Vec<u64>> {
        let mut path = vec![id];
        let mut seen = HashSet::new();
        fn reach(
            locks: &Locks,
            target: u64,
            from: u64,
            path: &mut Vec<u64>,
            seen: &mut HashSet<u64>,
        ) -> bool {
            if from == target {
                return true;
            }
            if !seen.insert(from) {
                return false;
            }
            path.push(from);
            if let Some((age, keys)) = locks.waiting.get(&from)
                && locks
                    .blockers(from, *age, keys)
                    .into_iter()
                    .any(|next| reach(locks, target, next, path, seen))
            {
                return true;
            }
            path.pop();
            false
        }
        blockers
            .iter()
            .any(|&b| reach(self, id, b, &mut path, &mut seen))
            .then_some(path)
    }
}
