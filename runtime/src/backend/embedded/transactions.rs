//! The engine's open transactions: each one's snapshot, reads, queries, age and locks, their
//! handles, and their expiry (idle 60 s or open 270 s, as the service).

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use crate::backend::TransactionId;
use datastore_entity_core::error::Error;
use datastore_entity_core::model::key::RawKey;
use datastore_entity_core::query::spec::QuerySpec;

/// A transaction unused this long is ended by the engine, as by the service.
const IDLE: Duration = Duration::from_secs(60);

/// The longest a read-write transaction's lookup waits for an entity another holds.
pub(super) const LOCK_WAIT: Duration = Duration::from_secs(20);

/// A transaction open this long is ended by the engine, as by the service.
const LIFETIME: Duration = Duration::from_secs(270);

/// One open transaction.
pub(super) struct Transaction {
    /// The version it reads, taken by its first read (or its `read_time`).
    pub(super) snapshot: Option<u64>,
    /// The entities it read (their entities-table keys): a commit that changed one since the
    /// snapshot makes its own commit fail.
    pub(super) reads: HashSet<Vec<u8>>,
    /// The queries it ran, with the keys they returned: at commit each must return the same
    /// keys again, or an entity was written into (or out of) a range it scanned (a phantom).
    pub(super) queries: Vec<(QuerySpec, Vec<RawKey>)>,
    /// Begun read-only: its commit may not write.
    pub(super) read_only: bool,
    /// Its priority for locks (smaller: older, the first attempt's when it is a retry).
    pub(super) age: u64,
    /// The entities it locked.
    pub(super) locks: Vec<Vec<u8>>,
    /// Why it was aborted, if it was: it can only end.
    pub(super) aborted: Option<Abort>,
    begun: Instant,
    used: Instant,
}

impl Transaction {
    /// Marks it used now (an idle transaction expires).
    pub(super) fn touch(&mut self) {
        self.used = Instant::now();
    }
}

/// The open transactions, by number, and how long each may live.
pub(super) struct Transactions {
    open: HashMap<u64, Transaction>,
    next: u64,
    /// How long a transaction may stay unused, and open, before it is ended.
    pub(super) idle: Duration,
    pub(super) lifetime: Duration,
}

impl Default for Transactions {
    fn default() -> Transactions {
        Transactions {
            open: HashMap::new(),
            next: 0,
            idle: IDLE,
            lifetime: LIFETIME,
        }
    }
}

impl Transactions {
    /// Begins a transaction reading `snapshot` (or the version of its first read); a retry
    /// (`previous`) keeps the age of the attempt it retries, so it wins locks against newer
    /// ones. Returns its handle.
    pub(super) fn begin(
        &mut self,
        snapshot: Option<u64>,
        read_only: bool,
        previous: Option<&TransactionId>,
    ) -> TransactionId {
        self.next += 1;
        let id = self.next;
        let age = previous.and_then(age_of).unwrap_or(id);
        let now = Instant::now();
        self.open.insert(
            id,
            Transaction {
                snapshot,
                reads: HashSet::new(),
                queries: Vec::new(),
                read_only,
                age,
                locks: Vec::new(),
                aborted: None,
                begun: now,
                used: now,
            },
        );
        TransactionId([id.to_le_bytes(), age.to_le_bytes()].concat())
    }

    /// The open transaction numbered `id`.
    pub(super) fn get(&self, id: u64) -> Result<&Transaction, Error> {
        self.open.get(&id).ok_or(Error::TransactionClosed)
    }

    /// The open transaction numbered `id`, to change.
    pub(super) fn get_mut(&mut self, id: u64) -> Result<&mut Transaction, Error> {
        self.open.get_mut(&id).ok_or(Error::TransactionClosed)
    }

    /// The age of transaction `id` (the youngest possible when it is gone).
    pub(super) fn age(&self, id: u64) -> u64 {
        self.open.get(&id).map_or(u64::MAX, |t| t.age)
    }

    /// Removes transaction `id` (its locks are the caller's to release).
    pub(super) fn remove(&mut self, id: u64) -> Option<Transaction> {
        self.open.remove(&id)
    }

    /// Puts back a transaction taken out with [`Transactions::remove`].
    pub(super) fn restore(&mut self, id: u64, transaction: Transaction) {
        self.open.insert(id, transaction);
    }

    /// The transactions left idle or open too long (a body that never finished and was
    /// never dropped), removed.
    pub(super) fn expire(&mut self) -> Vec<(u64, Transaction)> {
        let now = Instant::now();
        let expired: Vec<u64> = self
            .open
            .iter()
            .filter(|(_, t)| now - t.used > self.idle || now - t.begun > self.lifetime)
            .map(|(id, _)| *id)
            .collect();
        expired
            .into_iter()
            .filter_map(|id| Some((id, self.open.remove(&id)?)))
            .collect()
    }

    /// The oldest version an open transaction reads (an aborted one reads none).
    pub(super) fn oldest_snapshot(&self) -> Option<u64> {
        self.pinning().map(|(_, snapshot)| snapshot)
    }

    /// The transaction reading the oldest version, and that version.
    pub(super) fn pinning(&self) -> Option<(u64, u64)> {
        self.open
            .iter()
            .filter(|(_, t)| t.aborted.is_none())
            .filter_map(|(id, t)| Some((*id, t.snapshot?)))
            .min_by_key(|(_, snapshot)| *snapshot)
    }

    /// Whether no transaction is open.
    pub(super) fn is_empty(&self) -> bool {
        self.open.is_empty()
    }
}

/// A transaction handle is its number, then its age (see [`Transaction::age`]).
pub(super) fn number(transaction: &TransactionId) -> Result<u64, Error> {
    transaction
        .0
        .get(..8)
        .and_then(|n| <[u8; 8]>::try_from(n).ok())
        .map(u64::from_le_bytes)
        .ok_or(Error::TransactionClosed)
}

fn age_of(transaction: &TransactionId) -> Option<u64> {
    transaction
        .0
        .get(8..16)
        .and_then(|n| <[u8; 8]>::try_from(n).ok())
        .map(u64::from_le_bytes)
}

/// Why the engine aborted a transaction before its commit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Abort {
    /// It was the youngest of a circle of transactions waiting for each other.
    Deadlock,
    /// It waited for a lock longer than a lock wait may last.
    LockWait,
    /// The past versions its snapshot needs outgrew the memory they may take.
    History,
}

impl Abort {
    /// The error its next use answers.
    pub(super) fn error(self) -> Error {
        let reason = match self {
            Abort::Deadlock => "this transaction and others were each waiting for an entity \
                                another had read (a deadlock); this one, the youngest, gave way"
                .to_owned(),
            Abort::LockWait => format!(
                "waited {} s for entities another transaction has read and not yet committed",
                LOCK_WAIT.as_secs()
            ),
            Abort::History => "the writes since this transaction's snapshot outgrew the memory \
                               the engine keeps past versions in; retry it"
                .to_owned(),
        };
        Error::Aborted { reason }
    }
}
