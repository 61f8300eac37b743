//! The embedded engine: the default backend, modelled on the service and laid out as it is.
//!
//! - Storage is a set of ordered key–value tables (`store`): one of entities, one listing
//!   each kind's keys, one built-in index of every indexed property value (serving both
//!   directions), and one per declared composite index (`index`), all over an
//!   order-preserving byte encoding of keys and values (`keycode`). Two stores hold them: in
//!   memory ([`Embedded::in_memory`]), or one `redb` file ([`Embedded::open`], ACID).
//! - Queries are planned like the service's (`plan`): a range of the kinds table, one
//!   property's index, equality filters merged (zigzag), or a declared composite index. In
//!   strict index mode (the default) a query the service would refuse without a composite
//!   index is [`Error::MissingIndex`], naming the index to declare.
//! - Every indexed property is queryable ascending and descending; excluded properties
//!   (and everything inside them) are invisible to filters, orders and projections;
//!   entities without a property are not returned by filters or orders on it; array
//!   properties match on any element, and give one result per matching element when
//!   ordered or projected; values of different types follow the service's order.
//! - Commits are atomic: every mutation is validated before the first is applied, and the
//!   entity with all its index entries is one store batch.
//! - Transactions read one snapshot (`history`): every read of a transaction sees the store
//!   as of one version, never a torn view, and a read-only transaction can read at a past
//!   `read_time` (versions are kept for an hour by default: [`Embedded::keep_versions`]).
//!   A read-write transaction's lookups lock the entities they read, as Firestore's do:
//!   another read-write transaction reading one waits for the commit (older transactions
//!   first; a wait that would close a circle aborts the youngest transaction in it, so
//!   nothing deadlocks), so read-modify-write loops queue instead of aborting each other. Commits stay
//!   serializable: one fails with [`Error::Aborted`] when an entity its transaction read was
//!   changed since its snapshot (by a write outside a transaction), or when one of its
//!   queries would now return other keys (a phantom). Blind writes (of entities it did not
//!   read) do not conflict, as in Google's emulators. A transaction idle for 60 s, or open
//!   for 270 s, is ended, as by the service.
//! - Allocated ids are scattered over `[2^52, 2^53)` (R-K1); reserved ids are never handed out
//!   (ids written without being reserved may be, as by the service: R-K3).

mod history;
mod index;
mod plan;
mod scan;
mod store;
#[cfg(test)]
mod tests;

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use self::history::{AsOf, History, Undo};
use self::index::{Composite, decode_entity, encode_entity};
use self::scan::Prepared;
use self::store::{Batch, Memory, Redb, Store};
use super::{Backend, BoxFuture, Mask, Mutation, TransactionId, TransactionMode};
use crate::error::{Error, ServiceCode};
use crate::format::file::{
    ENTITIES, FORMAT, FORMAT_KEY, IDS_KEY, INDEX_PREFIX, META, RESERVED_PREFIX,
};
use crate::format::keycode;
use crate::model::entity::Entity;
use crate::model::key::{IdOrName, KeyId, PartitionId, RawKey};
use crate::model::schema::Schema;
use crate::model::value::{PropertyMap, Value};
use crate::model::walk::compare_values;
use crate::query::explain::Explanation;
use crate::query::spec::{Aggregation, Operator, QueryBatch, QuerySpec, ResultShape};
use crate::rules::commit::{check_ancestors, check_mutations, invalid_key};
use crate::rules::limits::check_entity;

/// Deprecated path of [`crate::MAX_INDEXED_BYTES`].
#[doc(hidden)]
#[deprecated(since = "0.1.0", note = "use `datastore_entity::MAX_INDEXED_BYTES`")]
pub const MAX_INDEXED_BYTES: usize = crate::rules::limits::MAX_INDEXED_BYTES;

/// The embedded engine. Cheap to share behind an `Arc`; all calls are serialised by one lock.
///
/// ```
/// # use std::sync::Arc;
/// # use datastore_entity::Db;
/// # use datastore_entity::backend::embedded::Embedded;
/// // In memory, with strict index mode off (queries that need an undeclared composite index
/// // run, by evaluating every entity of the kind, instead of failing).
/// let db = Db::with_backend(Arc::new(Embedded::in_memory().strict_indexes(false)));
/// ```
pub struct Embedded {
    state: Mutex<State>,
    /// Woken whenever a transaction gives up its locks.
    released: tokio::sync::Notify,
}

impl Default for Embedded {
    fn default() -> Embedded {
        Embedded::in_memory()
    }
}

impl std::fmt::Debug for Embedded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.state();
        f.debug_struct("Embedded")
            .field("strict_indexes", &state.strict)
            .finish_non_exhaustive()
    }
}

/// How long a read in a read-write transaction waits for an entity another transaction has
/// locked before it gives up with [`Error::Aborted`].
const LOCK_WAIT: Duration = Duration::from_secs(20);

/// A transaction unused this long is ended by the engine, as by the service.
const IDLE: Duration = Duration::from_secs(60);

/// A transaction open this long is ended by the engine, as by the service.
const LIFETIME: Duration = Duration::from_secs(270);

/// Allocation counters are persisted this many at a time: a crash skips at most this many
/// ids, never hands one out twice.
const ID_BLOCK: u64 = 1024;

struct State {
    store: Box<dyn Store + Send>,
    strict: bool,
    /// How long a transaction may stay unused, and open, before it is ended.
    idle: Duration,
    lifetime: Duration,
    /// Declared composite indexes, by kind.
    composites: HashMap<String, Vec<Composite>>,
    /// The schemas already declared (by address): declaring again costs a set lookup.
    declared: HashSet<usize>,
    /// Past versions: what transactions and `read_time` reads read.
    history: History,
    /// The entities read-write transactions have read, with the transaction holding each.
    locks: HashMap<Vec<u8>, u64>,
    /// The transactions waiting for locks: their ages and the entities they wait for. A free
    /// entity goes to the oldest transaction waiting for it, so waiting is first come, first
    /// served, and a younger transaction never overtakes (and then gets wounded by) an older.
    waiting: HashMap<u64, (u64, Vec<Vec<u8>>)>,
    transactions: HashMap<u64, Transaction>,
    next_transaction: u64,
    ids: Ids,
}

#[derive(Default)]
struct Ids {
    /// The allocation counter.
    next: u64,
    /// The counter value the store holds: allocations up to it are safe after a crash.
    persisted: u64,
    /// Reserved ids: never allocated.
    reserved: HashSet<i64>,
}

struct Transaction {
    /// The version it reads, taken by its first read (or its `read_time`).
    snapshot: Option<u64>,
    /// The entities it read (their entities-table keys): a commit that changed one since the
    /// snapshot makes its own commit fail.
    reads: HashSet<Vec<u8>>,
    /// The queries it ran, with the keys they returned: at commit each must return the same
    /// keys again, or an entity was written into (or out of) a range it scanned (a phantom).
    queries: Vec<(QuerySpec, Vec<RawKey>)>,
    /// Begun read-only: its commit may not write.
    read_only: bool,
    /// Its priority for locks (smaller: older, the first attempt's when it is a retry).
    age: u64,
    /// The entities it locked.
    locks: Vec<Vec<u8>>,
    /// It was the youngest of a circle of waiting transactions: it can only abort.
    wounded: bool,
    begun: Instant,
    used: Instant,
}

/// Whether a read-write transaction's lookup may read.
enum Locking {
    /// It holds every lock it needs.
    Held,
    /// Another, older transaction holds one: wait for a release.
    Wait,
}

impl Embedded {
    /// An empty engine in memory.
    pub fn new() -> Embedded {
        Embedded::in_memory()
    }

    /// An empty engine in memory, in strict index mode.
    pub fn in_memory() -> Embedded {
        Embedded::with_store(Box::new(Memory::default()))
    }

    /// The engine persisted in the `redb` file at `path` (created if missing), in strict
    /// index mode. Every acknowledged write is on disk; the file is one process's at a time.
    pub fn open(path: impl AsRef<Path>) -> Result<Embedded, Error> {
        let store = Redb::open(path.as_ref())?;
        let mut state = State::new(Box::new(store));
        state.load(path.as_ref())?;
        Ok(Embedded {
            state: Mutex::new(state),
            released: tokio::sync::Notify::new(),
        })
    }

    fn with_store(store: Box<dyn Store + Send>) -> Embedded {
        Embedded {
            state: Mutex::new(State::new(store)),
            released: tokio::sync::Notify::new(),
        }
    }

    /// Strict index mode (on by default, as the service): a query that needs a composite
    /// index nobody declared is [`Error::MissingIndex`]. Off, such a query runs anyway, by
    /// evaluating every entity of its kind.
    pub fn strict_indexes(self, strict: bool) -> Embedded {
        self.state().strict = strict;
        self
    }

    /// How long a transaction may stay unused (`idle`, 60 s by default) and open (`lifetime`,
    /// 270 s), as the service allows: past either, the engine ends it, freeing the locks its
    /// reads took, and its commit is [`Error::TransactionClosed`].
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use datastore_entity::backend::embedded::Embedded;
    /// let engine = Embedded::in_memory()
    ///     .transaction_timeouts(Duration::from_secs(10), Duration::from_secs(60));
    /// ```
    pub fn transaction_timeouts(self, idle: Duration, lifetime: Duration) -> Embedded {
        {
            let mut state = self.state();
            state.idle = idle;
            state.lifetime = lifetime;
        }
        self
    }

    /// How long past versions are kept for read-only transactions at a `read_time`
    /// ([`Db::read_only_transaction_at`](crate::Db::read_only_transaction_at)): one hour by
    /// default, as the service keeps them, and at most about a million changed entries
    /// (index entries included; past that, the oldest versions go first and the window
    /// shrinks). `Duration::ZERO` keeps versions only while a transaction reads them. Past
    /// versions are kept in memory: a file reopened starts with none.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use datastore_entity::backend::embedded::Embedded;
    /// let engine = Embedded::in_memory().keep_versions(Duration::from_secs(60));
    /// ```
    pub fn keep_versions(self, retention: Duration) -> Embedded {
        self.state()
            .history
            .keep(retention, history::DEFAULT_MAX_CHANGES);
        self
    }

    /// Takes the locks a read-write transaction's lookup of `keys` needs (a read-only one
    /// takes none): waits while another transaction holds one (or an older one waits for a
    /// free one), up to [`LOCK_WAIT`]; a wait that would close a circle aborts the youngest
    /// transaction in it instead.
    async fn lock(&self, keys: &[RawKey], transaction: &TransactionId) -> Result<(), Error> {
        /// Withdraws the wait if the lookup is dropped while waiting (or gives up), so a
        /// cancelled transaction does not keep younger ones from the entities it waited for.
        struct Waiting<'e>(&'e Embedded, u64);
        impl Drop for Waiting<'_> {
            fn drop(&mut self) {
                if self.0.state().waiting.remove(&self.1).is_some() {
                    self.0.released.notify_waiters();
                }
            }
        }
        let _waiting = Waiting(self, transaction_number(transaction)?);
        let deadline = tokio::time::Instant::now() + LOCK_WAIT;
        loop {
            // Registered before looking, so a release in between is not missed.
            let released = self.released.notified();
            let (locking, wounded) = self.state().lock(keys, transaction)?;
            if wounded {
                self.released.notify_waiters();
            }
            if let Locking::Held = locking {
                return Ok(());
            }
            if tokio::time::timeout_at(deadline, released).await.is_err() {
                return Err(Error::Aborted {
                    reason: format!(
                        "waited {} s for entities another transaction has read and not yet \
                         committed",
                        LOCK_WAIT.as_secs()
                    ),
                });
            }
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // No code path panics while holding the lock, so a poisoned lock still holds
        // consistent state.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

fn ready<'a, T: Send + 'a>(value: T) -> BoxFuture<'a, T> {
    Box::pin(std::future::ready(value))
}

impl Backend for Embedded {
    fn lookup<'a>(
        &'a self,
        keys: &'a [RawKey],
        transaction: Option<&'a TransactionId>,
    ) -> BoxFuture<'a, Result<Vec<Option<PropertyMap>>, Error>> {
        Box::pin(async move {
            if let Some(transaction) = transaction {
                self.lock(keys, transaction).await?;
            }
            self.state().lookup(keys, transaction)
        })
    }

    fn commit<'a>(
        &'a self,
        mutations: Vec<Mutation>,
        transaction: Option<&'a TransactionId>,
    ) -> BoxFuture<'a, Result<Vec<RawKey>, Error>> {
        let committed = self.state().commit(mutations, transaction);
        if transaction.is_some() {
            self.released.notify_waiters();
        }
        ready(committed)
    }

    fn run_query<'a>(
        &'a self,
        query: &'a QuerySpec,
        transaction: Option<&'a TransactionId>,
    ) -> BoxFuture<'a, Result<QueryBatch, Error>> {
        ready(self.state().run_query(query, transaction))
    }

    fn explain<'a>(
        &'a self,
        query: &'a QuerySpec,
        analyze: bool,
    ) -> BoxFuture<'a, Result<(Option<QueryBatch>, Explanation), Error>> {
        ready(self.state().explain(query, analyze))
    }

    fn run_aggregation<'a>(
        &'a self,
        query: &'a QuerySpec,
        aggregation: &'a Aggregation,
        transaction: Option<&'a TransactionId>,
    ) -> BoxFuture<'a, Result<Value, Error>> {
        ready(self.state().aggregate(query, aggregation, transaction))
    }

    fn begin_transaction<'a>(
        &'a self,
        _partition: &'a PartitionId,
        mode: &'a TransactionMode,
    ) -> BoxFuture<'a, Result<TransactionId, Error>> {
        let mut state = self.state();
        // A read at a past time reads that version; any other transaction reads the version
        // current at its first read.
        let snapshot = match mode {
            TransactionMode::ReadOnly {
                read_time: Some(time),
            } => match state.history.version_at(*time) {
                Ok(version) => Some(version),
                Err(e) => return ready(Err(e)),
            },
            _ => None,
        };
        state.next_transaction += 1;
        let id = state.next_transaction;
        // A retry keeps the age of the attempt it retries: it wins locks against newer ones.
        let age = match mode {
            TransactionMode::ReadWrite {
                previous: Some(previous),
            } => transaction_age(previous).unwrap_or(id),
            _ => id,
        };
        let now = Instant::now();
        state.transactions.insert(
            id,
            Transaction {
                snapshot,
                reads: HashSet::new(),
                queries: Vec::new(),
                read_only: matches!(mode, TransactionMode::ReadOnly { .. }),
                age,
                locks: Vec::new(),
                wounded: false,
                begun: now,
                used: now,
            },
        );
        if state.expire() {
            self.released.notify_waiters();
        }
        ready(Ok(TransactionId(
            [id.to_le_bytes(), age.to_le_bytes()].concat(),
        )))
    }

    fn rollback<'a>(&'a self, transaction: &'a TransactionId) -> BoxFuture<'a, Result<(), Error>> {
        // Rolling back a transaction that already ended is not an error (as in Firestore in
        // Datastore mode; the legacy emulator refused it).
        let result = {
            let mut state = self.state();
            transaction_number(transaction).map(|id| state.end_transaction(id).map(drop))
        };
        self.released.notify_waiters();
        ready(result.map(drop))
    }

    fn end_read_only<'a>(
        &'a self,
        transaction: &'a TransactionId,
    ) -> BoxFuture<'a, Result<(), Error>> {
        // It read one snapshot: nothing to check (a read-only transaction never aborts).
        let mut state = self.state();
        let result = transaction_number(transaction).map(|id| state.end_transaction(id).map(drop));
        ready(result.map(drop))
    }

    fn allocate_ids<'a>(&'a self, keys: Vec<RawKey>) -> BoxFuture<'a, Result<Vec<RawKey>, Error>> {
        ready(self.state().allocate_ids(keys))
    }

    fn reserve_ids<'a>(&'a self, keys: Vec<RawKey>) -> BoxFuture<'a, Result<(), Error>> {
        ready(self.state().reserve_ids(&keys))
    }

    fn declare<'a>(&'a self, schema: &'static Schema) -> BoxFuture<'a, Result<(), Error>> {
        ready(self.state().declare(schema))
    }
}

/// A running sum of numeric values, as the service sums them: integers exactly while they
/// fit in an `i64`, in a double once a double is added or the integer sum overflows.
#[derive(Default)]
struct Sum {
    integer: Option<i64>,
    double: Option<f64>,
    count: u64,
}

impl Sum {
    fn add(&mut self, value: &Value) {
        let as_double = match *value {
            Value::Integer(i) => {
                self.count += 1;
                match (self.double, self.integer.unwrap_or(0).checked_add(i)) {
                    (None, Some(total)) => {
                        self.integer = Some(total);
                        return;
                    }
                    _ => i as f64,
                }
            }
            Value::Double(d) => {
                self.count += 1;
                d
            }
            _ => return,
        };
        let carried = self.integer.take().map_or(0.0, |i| i as f64);
        self.double = Some(self.double.unwrap_or(0.0) + carried + as_double);
    }

    fn total(&self) -> Value {
        match self.double {
            Some(d) => Value::Double(d),
            None => Value::Integer(self.integer.unwrap_or(0)),
        }
    }

    fn mean(&self) -> Value {
        let total = match self.total() {
            Value::Integer(i) => i as f64,
            Value::Double(d) => d,
            _ => 0.0,
        };
        match self.count {
            0 => Value::Null,
            n => Value::Double(total / n as f64),
        }
    }
}

/// The engine's stored form of `entity`: the bytes a put writes for it (for benchmarks and
/// tools that measure or inspect the engine's storage).
///
/// ```
/// # use datastore_entity::prelude::*;
/// use datastore_entity::bench_hooks::{from_stored_form, stored_form};
///
/// #[derive(Entity, Debug, PartialEq)]
/// struct Note {
///     #[key]
///     id: KeyId,
///     text: String,
/// }
///
/// let note = Note { id: KeyId::new(1)?, text: "kept".into() };
/// let bytes = stored_form(&note)?;
/// assert_eq!(from_stored_form::<Note>(Note::key(KeyId::new(1)?).raw(), &bytes)?, note);
/// # Ok::<(), Error>(())
/// ```
pub(crate) fn stored_form<E: Entity>(entity: &E) -> Result<Vec<u8>, Error> {
    entity.to_properties().map(encode_entity)
}

/// `E` from its stored form under `key`: what a get converts back.
pub(crate) fn from_stored_form<E: Entity>(key: &RawKey, bytes: &[u8]) -> Result<E, Error> {
    let properties = decode_entity(bytes).ok_or_else(|| Error::Storage {
        reason: "a stored entity is malformed".to_owned(),
    })?;
    E::from_entity(key, properties)
}

/// A transaction handle is its number, then its age (see `Transaction::age`).
fn transaction_number(transaction: &TransactionId) -> Result<u64, Error> {
    transaction
        .0
        .get(..8)
        .and_then(|n| <[u8; 8]>::try_from(n).ok())
        .map(u64::from_le_bytes)
        .ok_or(Error::TransactionClosed)
}

fn transaction_age(transaction: &TransactionId) -> Option<u64> {
    transaction
        .0
        .get(8..16)
        .and_then(|n| <[u8; 8]>::try_from(n).ok())
        .map(u64::from_le_bytes)
}

fn wounded() -> Error {
    Error::Aborted {
        reason: "this transaction and others were each waiting for an entity another had \
                 read (a deadlock); this one, the youngest, gave way"
            .to_owned(),
    }
}

impl State {
    fn new(store: Box<dyn Store + Send>) -> State {
        State {
            store,
            strict: true,
            idle: IDLE,
            lifetime: LIFETIME,
            composites: HashMap::new(),
            declared: HashSet::new(),
            history: History::new(),
            locks: HashMap::new(),
            waiting: HashMap::new(),
            transactions: HashMap::new(),
            next_transaction: 0,
            ids: Ids::default(),
        }
    }

    /// Reads a file's own state: its format, id counter, reserved ids and declared indexes.
    fn load(&mut self, path: &Path) -> Result<(), Error> {
        let mut format = None;
        self.store
            .get(META, FORMAT_KEY, &mut |v| format = Some(v.to_vec()))?;
        match format {
            Some(f) if f == FORMAT => {}
            Some(_) => {
                return Err(Error::Storage {
                    reason: format!(
                        "{} was written by another version of this engine (or another program)",
                        path.display()
                    ),
                });
            }
            None => {
                let mut batch = Batch::default();
                batch.put(META, FORMAT_KEY.to_vec(), FORMAT.to_vec());
                self.store.apply(batch)?;
            }
        }
        let mut entries: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        self.store.scan(
            META,
            (std::ops::Bound::Unbounded, std::ops::Bound::Unbounded),
            false,
            &mut |k, v| {
                entries.push((k.to_vec(), v.to_vec()));
                true
            },
        )?;
        let corrupt = || Error::Storage {
            reason: format!("{}: the engine's own records are corrupt", path.display()),
        };
        for (k, v) in entries {
            if k == IDS_KEY {
                let counter = <[u8; 8]>::try_from(v.as_slice()).map_err(|_| corrupt())?;
                self.ids.next = u64::from_be_bytes(counter);
                self.ids.persisted = self.ids.next;
            } else if let Some(id) = k.strip_prefix(RESERVED_PREFIX) {
                let id = <[u8; 8]>::try_from(id).map_err(|_| corrupt())?;
                self.ids.reserved.insert(i64::from_be_bytes(id));
            } else if k.starts_with(INDEX_PREFIX) {
                let index = Composite::decode(&v).ok_or_else(corrupt)?;
                self.composites
                    .entry(index.kind.clone())
                    .or_default()
                    .push(index);
            }
        }
        Ok(())
    }

    /// Applies a batch; a failure leaves the id counter to be persisted again.
    fn apply(&mut self, batch: Batch) -> Result<(), Error> {
        if batch.is_empty() {
            return Ok(());
        }
        let applied = self.store.apply(batch);
        if applied.is_err() {
            self.ids.persisted = 0;
        }
        applied
    }

    fn composites(&self, kind: &str) -> &[Composite] {
        self.composites.get(kind).map_or(&[], Vec::as_slice)
    }

    fn load_entity(&self, at: &[u8]) -> Result<Option<PropertyMap>, Error> {
        plan::load(&*self.store, at)
    }

    /// The store as of `version` (the current one if `None`).
    fn view(&self, version: Option<u64>) -> AsOf<'_> {
        AsOf {
            store: &*self.store,
            history: &self.history,
            version: version.unwrap_or(self.history.now()),
            composites: &self.composites,
        }
    }

    /// The version `transaction` reads (taken now if this is its first read); `None` outside a
    /// transaction (the current one).
    ///
    /// A read-write transaction's lookup (which holds its locks by now) moves the snapshot
    /// forward to the current version while nothing it read has changed since and it ran no
    /// query: its reads so far are the same at either version, so it still reads one
    /// consistent state, and an entity it had to wait for is read as its holder left it
    /// instead of as it was before (which would only make the commit abort).
    fn read_version(
        &mut self,
        transaction: Option<&TransactionId>,
        lookup: bool,
    ) -> Result<Option<u64>, Error> {
        let now = self.history.now();
        let Some(t) = transaction else {
            return Ok(None);
        };
        let history = &self.history;
        let t = self
            .transactions
            .get_mut(&transaction_number(t)?)
            .ok_or(Error::TransactionClosed)?;
        if t.wounded {
            return Err(wounded());
        }
        t.used = Instant::now();
        let snapshot = match t.snapshot {
            Some(snapshot)
                if lookup
                    && !t.read_only
                    && snapshot < now
                    && t.queries.is_empty()
                    && !t.reads.iter().any(|at| history.changed_after(at, snapshot)) =>
            {
                now
            }
            Some(snapshot) => snapshot,
            None => now,
        };
        t.snapshot = Some(snapshot);
        Ok(Some(snapshot))
    }

    fn transaction(
        &mut self,
        transaction: Option<&TransactionId>,
    ) -> Result<Option<&mut Transaction>, Error> {
        match transaction {
            None => Ok(None),
            Some(t) => {
                let id = transaction_number(t)?;
                self.transactions
                    .get_mut(&id)
                    .map(Some)
                    .ok_or(Error::TransactionClosed)
            }
        }
    }

    /// Ends a transaction: its locks are released, the versions only it read collected.
    fn end_transaction(&mut self, id: u64) -> Option<Transaction> {
        let mut ended = self.transactions.remove(&id);
        if let Some(t) = &mut ended {
            self.release(id, t);
        }
        self.collect();
        ended
    }

    fn release(&mut self, id: u64, t: &mut Transaction) {
        for at in t.locks.drain(..) {
            self.locks.remove(&at);
        }
        self.waiting.remove(&id);
    }

    /// Ends the transactions left idle or open too long (a body that never finished and was
    /// never dropped); returns whether any held locks.
    fn expire(&mut self) -> bool {
        let now = Instant::now();
        let expired: Vec<u64> = self
            .transactions
            .iter()
            .filter(|(_, t)| now - t.used > self.idle || now - t.begun > self.lifetime)
            .map(|(id, _)| *id)
            .collect();
        let mut released = false;
        for id in expired {
            tracing::debug!(transaction = id, "an idle transaction expired");
            let mut ended = self.transactions.remove(&id);
            if let Some(t) = &mut ended {
                released |= !t.locks.is_empty();
                self.release(id, t);
            }
        }
        self.collect();
        released
    }

    /// See [`Embedded::lock`]: returns whether `transaction` holds its locks now, and whether
    /// it aborted another transaction of a circle (whose locks are then free).
    fn lock(
        &mut self,
        keys: &[RawKey],
        transaction: &TransactionId,
    ) -> Result<(Locking, bool), Error> {
        let id = transaction_number(transaction)?;
        let t = self.transactions.get(&id).ok_or(Error::TransactionClosed)?;
        if t.read_only {
            return Ok((Locking::Held, false));
        }
        if t.wounded {
            return Err(wounded());
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
                let age_of = |t: &u64| self.transactions.get(t).map_or(u64::MAX, |t| t.age);
                let victim = circle.iter().copied().max_by_key(age_of).unwrap_or(id);
                if victim == id {
                    self.waiting.remove(&id);
                    return Err(wounded());
                }
                if let Some(mut v) = self.transactions.remove(&victim) {
                    v.wounded = true;
                    self.release(victim, &mut v);
                    self.transactions.insert(victim, v);
                    wounded_any = true;
                }
            }
            self.waiting.insert(id, (age, wanted));
            return Ok((Locking::Wait, wounded_any));
        }
        self.waiting.remove(&id);
        let t = self
            .transactions
            .get_mut(&id)
            .ok_or(Error::TransactionClosed)?;
        for at in wanted {
            if self.locks.insert(at.clone(), id) != Some(id) {
                t.locks.push(at);
            }
        }
        Ok((Locking::Held, false))
    }

    /// The transactions `id` (of age `age`) would wait for to lock `wanted`: the holders of
    /// those entities, and older transactions already waiting for a free one.
    fn blockers(&self, id: u64, age: u64, wanted: &[Vec<u8>]) -> Vec<u64> {
        let mut out = Vec::new();
        for at in wanted {
            match self.locks.get(at) {
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
            state: &State,
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
            if let Some((age, keys)) = state.waiting.get(&from)
                && state
                    .blockers(from, *age, keys)
                    .into_iter()
                    .any(|next| reach(state, target, next, path, seen))
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

    /// Collects the past versions no open transaction reads (and outside the retention).
    fn collect(&mut self) {
        let oldest = self.transactions.values().filter_map(|t| t.snapshot).min();
        self.history.collect(oldest);
    }

    fn record_reads(
        &mut self,
        transaction: Option<&TransactionId>,
        entities: Vec<Vec<u8>>,
    ) -> Result<(), Error> {
        if let Some(t) = self.transaction(transaction)? {
            t.reads.extend(entities);
        }
        Ok(())
    }

    fn lookup(
        &mut self,
        keys: &[RawKey],
        transaction: Option<&TransactionId>,
    ) -> Result<Vec<Option<PropertyMap>>, Error> {
        if let Some(k) = keys.iter().find(|k| !k.is_complete()) {
            return Err(invalid_key(k, "a lookup needs complete keys"));
        }
        keys.iter().try_for_each(check_ancestors)?;
        let at: Vec<Vec<u8>> = keys.iter().map(index::entity_key).collect();
        let version = self.read_version(transaction, true)?;
        let view = self.view(version);
        let found = at
            .iter()
            .map(|at| plan::load(&view, at))
            .collect::<Result<_, _>>()?;
        self.record_reads(transaction, at)?;
        Ok(found)
    }

    fn allocate_id(&mut self, batch: &mut Batch) -> KeyId {
        loop {
            self.ids.next += 1;
            if self.ids.next > self.ids.persisted {
                self.ids.persisted = self.ids.next + ID_BLOCK;
                batch.put(
                    META,
                    IDS_KEY.to_vec(),
                    self.ids.persisted.to_be_bytes().to_vec(),
                );
            }
            // Bit-reverse a counter into the low 52 bits: consecutive allocations differ in
            // the highest of them, so ids are never adjacent and spread over the whole range.
            let scattered = (1_i64 << 52) | (self.ids.next.reverse_bits() >> 12).cast_signed();
            if !self.ids.reserved.contains(&scattered)
                && let Ok(id) = KeyId::new(scattered)
            {
                return id;
            }
        }
    }

    fn allocate_ids(&mut self, keys: Vec<RawKey>) -> Result<Vec<RawKey>, Error> {
        if let Some(k) = keys.iter().find(|k| k.is_complete()) {
            return Err(invalid_key(k, "allocate_ids takes incomplete keys"));
        }
        let mut batch = Batch::default();
        let keys = keys
            .into_iter()
            .map(|k| k.completed(IdOrName::Id(self.allocate_id(&mut batch))))
            .collect();
        self.apply(batch)?;
        Ok(keys)
    }

    fn reserve_ids(&mut self, keys: &[RawKey]) -> Result<(), Error> {
        if let Some(k) = keys.iter().find(|k| !k.is_complete()) {
            return Err(invalid_key(k, "reserve_ids takes complete keys"));
        }
        // Named keys have no id to reserve: accepted and ignored, as by the service.
        let ids: Vec<i64> = keys.iter().filter_map(|k| k.id()).map(KeyId::get).collect();
        let mut batch = Batch::default();
        for id in &ids {
            batch.put(
                META,
                [RESERVED_PREFIX, &id.to_be_bytes()].concat(),
                Vec::new(),
            );
        }
        self.apply(batch)?;
        self.ids.reserved.extend(ids);
        Ok(())
    }

    /// Declares `schema`'s composite indexes: new ones are built from the stored entities
    /// (and, in a file, recorded), so queries can use them at once.
    fn declare(&mut self, schema: &'static Schema) -> Result<(), Error> {
        let address = std::ptr::from_ref(schema).addr();
        if self.declared.contains(&address) {
            return Ok(());
        }
        let known = self.composites(schema.kind);
        let mut new: Vec<Composite> = Vec::new();
        for index in schema.indexes {
            let index = Composite::from_schema(schema.kind, index);
            if !known.contains(&index) && !new.contains(&index) {
                new.push(index);
            }
        }
        if !new.is_empty() {
            let mut batch = Batch::default();
            for index in &new {
                batch.put(
                    META,
                    [INDEX_PREFIX, index.table.as_bytes()].concat(),
                    index.encode(),
                );
            }
            self.backfill(schema.kind, &new, &mut batch)?;
            self.apply(batch)?;
            self.composites
                .entry(schema.kind.to_owned())
                .or_default()
                .extend(new);
        }
        self.declared.insert(address);
        Ok(())
    }

    /// The entries of `indexes` (all of kind `kind`) for the entities already stored.
    fn backfill(&self, kind: &str, indexes: &[Composite], batch: &mut Batch) -> Result<(), Error> {
        let mut keys = Vec::new();
        self.store.scan(
            ENTITIES,
            (std::ops::Bound::Unbounded, std::ops::Bound::Unbounded),
            false,
            &mut |k, _| {
                keys.push(k.to_vec());
                true
            },
        )?;
        let tables: HashSet<&str> = indexes.iter().map(|i| i.table.as_str()).collect();
        for at in keys {
            let key = keycode::Reader::new(&at)
                .key()
                .map_err(|_| plan::corrupt())?;
            if key.kind() != kind {
                continue;
            }
            let properties = self.load_entity(&at)?.ok_or_else(plan::corrupt)?;
            for (table, entry) in index::entries(&key, &properties, indexes) {
                if tables.contains(table.as_ref()) {
                    batch.put(table, entry, Vec::new());
                }
            }
        }
        Ok(())
    }

    fn commit(
        &mut self,
        mutations: Vec<Mutation>,
        transaction: Option<&TransactionId>,
    ) -> Result<Vec<RawKey>, Error> {
        // A transaction ends with its commit, whatever the outcome.
        let ended = match transaction {
            Some(t) => {
                let id = transaction_number(t)?;
                let mut ended = self.transactions.remove(&id);
                if let Some(t) = &mut ended {
                    self.release(id, t);
                }
                Some(ended.ok_or(Error::TransactionClosed)?)
            }
            None => None,
        };
        let checked = match &ended {
            Some(t) if t.wounded => Err(wounded()),
            Some(t) if t.read_only && !mutations.is_empty() => Err(Error::Service {
                code: ServiceCode::InvalidArgument,
                message: "a read-only transaction cannot write".to_owned(),
            }),
            Some(t) => self.check_conflicts(t),
            None => Ok(()),
        }
        .and_then(|()| self.validate(&mutations));
        if ended.is_some() {
            self.collect();
        }
        checked?;
        let recording = self.history.recording(!self.transactions.is_empty());
        let written = self.write(mutations, recording);
        if written.is_err() {
            // Ids allocated for a batch never applied: persist the counter again next time.
            self.ids.persisted = 0;
        }
        let (batch, undo, keys) = written?;
        self.apply(batch)?;
        self.history.commit(undo, recording);
        self.collect();
        Ok(keys)
    }

    /// The batch that applies `mutations` (their own rules checked): every entity as the
    /// commit leaves it checked, then the inserts and updates against what exists (as the
    /// service orders its refusals), ids allocated, the index entries that change. Returns
    /// the batch, what it replaces (when `recording`: for the history) and the keys.
    fn write(
        &mut self,
        mutations: Vec<Mutation>,
        recording: bool,
    ) -> Result<(Batch, Undo, Vec<RawKey>), Error> {
        let mut batch = Batch::default();
        let mut keys = Vec::with_capacity(mutations.len());
        let mut undo = Undo::new();
        // First every entity as the commit leaves it, checked (`rules::commit`, once each):
        // the service refuses an invalid argument before it looks at what exists.
        let mut staged = Vec::with_capacity(mutations.len());
        for mutation in mutations {
            let insert = matches!(mutation, Mutation::Insert(..));
            let update = matches!(mutation, Mutation::Update(..));
            let (key, properties) = match mutation {
                Mutation::Insert(k, p, m) | Mutation::Upsert(k, p, m) if !k.is_complete() => {
                    let id = self.allocate_id(&mut batch);
                    (k.completed(IdOrName::Id(id)), Some((p, m)))
                }
                Mutation::Insert(k, p, m)
                | Mutation::Update(k, p, m)
                | Mutation::Upsert(k, p, m) => (k, Some((p, m))),
                Mutation::Delete(k) => (k, None),
            };
            let at = index::entity_key(&key);
            let mut before = None;
            self.store
                .get(ENTITIES, &at, &mut |v| before = Some(v.to_vec()))?;
            let stored = match &before {
                Some(bytes) => Some(decode_entity(bytes).ok_or_else(plan::corrupt)?),
                None => None,
            };
            let composites = self.composites(key.kind());
            let old = match &stored {
                Some(old) => index::entries(&key, old, composites),
                None => Vec::new(),
            };
            // What the mask leaves out stays as stored, as the service does.
            let properties = match properties {
                Some((written, Mask::Whole)) => Some(written),
                Some((written, mask)) => Some(mask.merge(stored, written)),
                None => None,
            };
            if let Some(entity) = &properties {
                check_entity(&key, entity, composites)?;
            }
            staged.push((key, at, before, old, properties, insert, update));
        }
        // Then what exists: an insert of an entity that does, an update of one that does not.
        for (key, _, before, _, _, insert, update) in &staged {
            match (before.is_some(), insert, update) {
                (true, true, _) => {
                    return Err(Error::AlreadyExists {
                        key: format!("{key:?}"),
                    });
                }
                (false, _, true) => {
                    return Err(Error::NotFound {
                        key: format!("{key:?}"),
                    });
                }
                _ => {}
            }
        }
        for (key, at, before, mut old, properties, _, _) in staged {
            tracing::debug!(key = ?key, "commit");
            let composites = self.composites(key.kind());
            let mut new = match &properties {
                Some(p) => index::entries(&key, p, composites),
                None => Vec::new(),
            };
            // Only what changed: entries of the old version that the new one has not are
            // deleted, entries of the new one that the old one had not are written.
            if !old.is_empty() {
                old.sort_unstable();
                new.sort_unstable();
                let (mut o, mut n) = (old.into_iter().peekable(), new.into_iter().peekable());
                loop {
                    let order = match (o.peek(), n.peek()) {
                        (None, None) => break,
                        (Some(_), None) => std::cmp::Ordering::Less,
                        (None, Some(_)) => std::cmp::Ordering::Greater,
                        (Some(a), Some(b)) => a.cmp(b),
                    };
                    match order {
                        std::cmp::Ordering::Less => {
                            if let Some((table, entry)) = o.next() {
                                batch.delete(table, entry);
                            }
                        }
                        std::cmp::Ordering::Greater => {
                            if let Some((table, entry)) = n.next() {
                                batch.put(table, entry, Vec::new());
                            }
                        }
                        std::cmp::Ordering::Equal => {
                            o.next();
                            n.next();
                        }
                    }
                }
            } else {
                for (table, entry) in new {
                    batch.put(table, entry, Vec::new());
                }
            }
            if recording {
                undo.push((at.clone(), before));
            }
            match properties {
                Some(p) => batch.put(ENTITIES, at, encode_entity(p)),
                None => batch.delete(ENTITIES, at),
            }
            keys.push(key);
        }
        Ok((batch, undo, keys))
    }

    /// Optimistic concurrency: nothing the transaction read may have changed since. Blind
    /// writes do not conflict (Google's emulator commits them).
    fn check_conflicts(&self, t: &Transaction) -> Result<(), Error> {
        let Some(snapshot) = t.snapshot else {
            return Ok(());
        };
        if let Some(at) = t
            .reads
            .iter()
            .find(|at| self.history.changed_after(at, snapshot))
        {
            let key = match keycode::Reader::new(at).key() {
                Ok(key) => format!("{key:?}"),
                Err(_) => "an entity".to_owned(),
            };
            return Err(Error::Aborted {
                reason: format!(
                    "{key} was changed by another commit after this transaction read it"
                ),
            });
        }
        for (query, keys) in &t.queries {
            let now = self.evaluate(query)?;
            if !now.results.iter().map(|r| &r.key).eq(keys.iter()) {
                return Err(Error::Aborted {
                    reason: format!(
                        "another commit wrote an entity of kind `{}` into a range this \
                         transaction's query scanned",
                        query.kind
                    ),
                });
            }
        }
        Ok(())
    }

    /// The checks of a commit that do not need its entities (`rules::commit`), before
    /// anything is written. Each entity is checked as it will be stored, then whether what
    /// the commit inserts is new and what it updates exists, in [`State::write`].
    fn validate(&self, mutations: &[Mutation]) -> Result<(), Error> {
        check_mutations(mutations)
    }

    fn run_query(
        &mut self,
        query: &QuerySpec,
        transaction: Option<&TransactionId>,
    ) -> Result<QueryBatch, Error> {
        let version = self.read_version(transaction, false)?;
        let batch = self.evaluate_in(&self.view(version), query)?;
        if transaction.is_some() {
            let at = batch
                .results
                .iter()
                .map(|r| index::entity_key(&r.key))
                .collect();
            self.record_reads(transaction, at)?;
            if let Some(t) = self.transaction(transaction)? {
                let keys = batch.results.iter().map(|r| r.key.clone()).collect();
                t.queries.push((query.clone(), keys));
            }
        }
        Ok(batch)
    }

    /// An aggregation over the rows of `query`, read from the indexes: a count reads keys
    /// only, a sum or an average the property's index values (a projection), so no entity is
    /// loaded unless the property is also filtered by equality.
    fn aggregate(
        &mut self,
        query: &QuerySpec,
        aggregation: &Aggregation,
        transaction: Option<&TransactionId>,
    ) -> Result<Value, Error> {
        // The query is refused as a query would be (the service validates both alike).
        Prepared::new(query)?;
        // As the Firestore emulator answers: a count runs over any query's rows, a sum or an
        // average over its entities only.
        let allowed = match (aggregation, &query.shape) {
            (Aggregation::Count { .. }, _) | (_, ResultShape::Full) => true,
            (Aggregation::Sum(p) | Aggregation::Avg(p), ResultShape::Projection(names)) => {
                names.contains(p)
            }
            _ => false,
        };
        if !allowed {
            return Err(Error::InvalidQuery {
                kind: query.kind.clone(),
                reason: "a sum or an average runs over a query's entities, not its keys \
                         or a projection; the service refuses it"
                    .to_owned(),
            });
        }
        let mut rows = query.clone();
        rows.start_cursor = None;
        rows.end_cursor = None;
        let property = match aggregation {
            Aggregation::Count { up_to } => {
                // A count of a projection counts its rows (one per entity holding the
                // projected properties indexed, per array element); otherwise keys do.
                let projection = matches!(rows.shape, ResultShape::Projection(_));
                if !projection {
                    rows.shape = ResultShape::KeysOnly;
                }
                if let Some(up_to) = up_to {
                    let up_to = usize::try_from(*up_to).unwrap_or(usize::MAX);
                    rows.limit = Some(rows.limit.map_or(up_to, |l| l.min(up_to)));
                }
                // Outside a transaction (which records the rows it read), count index entries.
                let counted = match transaction {
                    None if !projection => self.count(&rows)?,
                    _ => None,
                };
                let counted = match counted {
                    Some(counted) => counted,
                    None => self.run_query(&rows, transaction)?.results.len(),
                };
                return Ok(Value::Integer(i64::try_from(counted).unwrap_or(i64::MAX)));
            }
            Aggregation::Sum(p) | Aggregation::Avg(p) => p,
        };
        let fixed = query
            .filters
            .iter()
            .flat_map(|f| f.leaves())
            .any(|f| &f.property == property && matches!(f.op, Operator::Equal | Operator::In));
        rows.shape = match (&query.shape, fixed) {
            // A projection's rows: one per combination of its properties' values, only of
            // entities that hold them all (the property summed among them).
            (ResultShape::Projection(_), _) => query.shape.clone(),
            (_, true) => ResultShape::Full,
            (_, false) => ResultShape::Projection(vec![property.clone()]),
        };
        let batch = self.run_query(&rows, transaction)?;
        // Where an equality (or IN) filter fixes the property, each of an entity's distinct
        // values is a row of the index holding the value the filter fixed, as in Firestore
        // in Datastore mode: the first operand (IN values in their listed order) the entity
        // holds.
        let operands: Vec<Value> = match fixed {
            true => query
                .filters
                .iter()
                .flat_map(|f| f.leaves())
                .filter(|f| &f.property == property)
                .flat_map(|f| match (&f.op, &f.value) {
                    (Operator::Equal, value) => std::slice::from_ref(value),
                    (Operator::In, Value::Array(listed)) => listed.as_slice(),
                    _ => &[],
                })
                .cloned()
                .collect(),
            false => Vec::new(),
        };
        let mut sum = Sum::default();
        for row in &batch.results {
            match fixed {
                true => {
                    let mut values = Vec::new();
                    scan::visit_indexed(&row.properties, property, &mut |v| values.push(v));
                    values.sort_by(|a, b| compare_values(a, b));
                    values.dedup_by(|a, b| compare_values(a, b).is_eq());
                    let fixed_to = operands
                        .iter()
                        .find(|o| values.iter().any(|v| compare_values(v, o).is_eq()));
                    // Each value is read as the index holds it: a timestamp as its integer
                    // of microseconds, which the Firestore emulator sums (as it does in a
                    // projection's rows).
                    let indexed = |value: &Value| match value {
                        Value::Timestamp(t) => Value::Integer(t.as_micros()),
                        other => other.clone(),
                    };
                    for value in &values {
                        sum.add(&indexed(fixed_to.unwrap_or(value)));
                    }
                }
                // A projection's row holds the one index value under the property's whole
                // (dotted) name.
                false => {
                    if let Some(p) = row.properties.get(property) {
                        sum.add(&p.value);
                    }
                }
            }
        }
        Ok(match aggregation {
            Aggregation::Avg(_) => sum.mean(),
            _ => sum.total(),
        })
    }

    /// How many results a one-branch query has, counted from its plan's index entries when
    /// the plan allows it ([`plan::count`]).
    fn count(&self, query: &QuerySpec) -> Result<Option<usize>, Error> {
        let prepared = Prepared::new(query)?;
        if prepared.branch_count() != 1 {
            return Ok(None);
        }
        let access = plan::choose(&prepared, self.composites(&query.kind), self.strict)?;
        let limit = query.limit.unwrap_or(usize::MAX);
        plan::count(&*self.store, &prepared, &access, limit)
    }

    /// The answer to a query, recording nothing.
    fn evaluate(&self, query: &QuerySpec) -> Result<QueryBatch, Error> {
        self.evaluate_in(&*self.store, query)
    }

    /// Answers `query` from `store` (the engine's, or a view of it that counts what is read).
    fn evaluate_in(&self, store: &dyn Store, query: &QuerySpec) -> Result<QueryBatch, Error> {
        let prepared = Prepared::new(query)?;
        if prepared.branch_count() == 1 {
            let access = plan::choose(&prepared, self.composites(&query.kind), self.strict)?;
            return plan::run(store, &prepared, &access);
        }
        let plans = self.plans(&prepared)?;
        match plans
            .iter()
            .any(|(_, access)| *access == plan::Access::Scan)
        {
            // A branch no index serves: every entity of the kind is evaluated, once.
            true => plan::run(store, &prepared, &plan::Access::Scan),
            false => plan::merged(store, &prepared, &plans),
        }
    }

    /// Each branch of `prepared`'s filter with the plan that answers it.
    fn plans<'q>(
        &self,
        prepared: &Prepared<'q>,
    ) -> Result<Vec<(Prepared<'q>, plan::Access)>, Error> {
        let composites = self.composites(&prepared.query.kind);
        (0..prepared.branch_count())
            .map(|i| {
                let branch = prepared.branch(i);
                let access = plan::choose(&branch, composites, self.strict)?;
                Ok((branch, access))
            })
            .collect()
    }

    /// How `query` is answered (the plan of each branch of its filter), and, with `analyze`,
    /// its answer and what it read.
    fn explain(
        &self,
        query: &QuerySpec,
        analyze: bool,
    ) -> Result<(Option<QueryBatch>, Explanation), Error> {
        let prepared = Prepared::new(query)?;
        let mut explanation = plan::explain(&prepared, &self.plans(&prepared)?);
        if !analyze {
            return Ok((None, explanation));
        }
        let counting = store::Counting::new(&*self.store);
        let batch = self.evaluate_in(&counting, query)?;
        explanation.stats = Some(counting.stats(batch.results.len()));
        Ok((Some(batch), explanation))
    }
}
