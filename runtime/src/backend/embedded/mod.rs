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

mod aggregate;
mod analyze;
mod answer;
mod bounds;
mod building;
mod calls;
mod candidates;
mod commit;
mod exec;
mod explain;
#[cfg(test)]
mod full_disk;
mod history;
mod ids;
mod index;
mod kept;
mod locks;
mod logged;
mod memory;
mod merge;
mod metadata;
mod open;
mod packed;
mod plan;
mod ranges;
mod reads;
mod records;
mod scan;
mod store;
#[cfg(test)]
mod tests;
mod transactions;

use std::path::Path;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use self::answer::Answers;
use self::history::{AsOf, History};
use self::ids::Ids;
use self::index::Composite;
use self::locks::{Locking, Locks};
use self::memory::Memory;
use self::store::{Batch, Store};
use self::transactions::{Abort, LOCK_WAIT, Transaction, Transactions};
use super::{Change, Committed, TransactionId};
use datastore_entity_core::error::{Error, ServiceCode};
use datastore_entity_core::format::keycode;
use datastore_entity_core::hash::Map;
use datastore_entity_core::model::key::RawKey;
use datastore_entity_core::model::schema::{Direction, Schema};
use datastore_entity_core::model::value::Value;
use datastore_entity_core::query::spec::{Aggregation, QueryBatch, QuerySpec};
use datastore_entity_core::rules::commit::check_mutations;

/// The read-only transaction a scan in slices reads the snapshot of: ended however the scan
/// ends.
struct Pinned<'e>(&'e Embedded, u64);

impl Drop for Pinned<'_> {
    fn drop(&mut self) {
        self.0.state().end_transaction(self.1);
    }
}

/// The entities a scan copies under the lock at a time (see `Embedded::scan_in_slices`).
const SCAN_SLICE: usize = 256;

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
    /// What names this engine's data in a shared cache (`embedded-` and its identity in 32
    /// hex digits), made once: it is asked for on every read handed over as stored.
    identity: Box<str>,
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

/// A composite index the engine keeps ([`Embedded::indexes`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexDefinition {
    /// Its id: derived from the definition, the same in every process.
    pub id: String,
    /// The kind it indexes.
    pub kind: String,
    /// Whether it serves ancestor queries (`ancestor: yes`).
    pub ancestor: bool,
    /// The indexed properties, most significant first, with their directions.
    pub properties: Vec<(String, Direction)>,
}

struct State {
    store: Box<dyn Store + Send>,
    strict: bool,
    /// Outside strict index mode, build the composite index a query needs on its first use.
    build_indexes: bool,
    /// Declared composite indexes, by kind.
    composites: Map<String, Vec<Composite>>,
    /// Composite indexes being built, a slice per query ([`building`]): every write keeps
    /// them, no query reads them yet.
    building: Vec<building::Building>,
    /// The store's [`Store::failed_writes`] when the builds last looked.
    failures_seen: u64,
    /// The schemas declared, by address (declaring again costs a lookup); their vector
    /// indexes are what strict mode checks a nearest-neighbour search against.
    declared: Map<usize, &'static Schema>,
    /// Past versions: what transactions and `read_time` reads read.
    history: History,
    /// The open transactions.
    transactions: Transactions,
    /// The entities read-write transactions hold, and who waits for them.
    locks: Locks,
    ids: Ids,
    /// What names this engine's data where several engines share a cache (their keys name no
    /// project): random for an engine in memory, a file's own (its `identity` record).
    identity: u128,
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

    /// An empty engine in memory, in strict index mode, holding its data compressed: for a
    /// million small entities, a tenth of [`in_memory`](Embedded::in_memory)'s memory
    /// (`BENCHMARKS.md`). Reads cost more: one by key decompresses a block of about 8 KiB.
    /// For a server holding millions of entities (`datastore-entity-server` without
    /// `--data`); the last few thousand writes of each table are held as `in_memory` holds
    /// them.
    pub fn in_memory_compressed() -> Embedded {
        Embedded::with_store(Box::new(packed::Packed::default()))
    }

    /// The engine persisted in the `redb` file at `path` (created if missing), in strict
    /// index mode. Every acknowledged write is on disk; the file is one process's at a time.
    pub fn open(path: impl AsRef<Path>) -> Result<Embedded, Error> {
        Embedded::open_with_cache(path, None)
    }

    fn with_store(store: Box<dyn Store + Send>) -> Embedded {
        Embedded::of(State::new(store))
    }

    /// The engine over `state`, fully loaded.
    fn of(state: State) -> Embedded {
        Embedded {
            identity: format!("embedded-{:032x}", state.identity).into(),
            state: Mutex::new(state),
            released: tokio::sync::Notify::new(),
        }
    }

    /// Strict index mode (on by default, as the service): a query that needs a composite
    /// index nobody declared is [`Error::MissingIndex`]. Off, such a query runs anyway: it
    /// evaluates the entities of its kind, or, with [`Embedded::build_indexes`], builds the
    /// index it needs on its first use.
    pub fn strict_indexes(self, strict: bool) -> Embedded {
        self.state().strict = strict;
        self
    }

    /// Outside strict index mode, whether a query that needs a composite index nobody
    /// declared builds it on its first use (off by default): the index the service would read
    /// ([`Error::MissingIndex`] names it in strict mode) is built from the stored entities of
    /// its kind a slice per query (each query that arrives while it is unfinished backfills
    /// one, and is answered without it), kept by every write from its start, then planned
    /// with, and in a file recorded, as a declared one is, so the queries after it cost what
    /// they return. Off, such a query evaluates entities until its page fills.
    ///
    /// ```
    /// # use datastore_entity::backend::embedded::Embedded;
    /// let engine = Embedded::in_memory().strict_indexes(false).build_indexes(true);
    /// ```
    pub fn build_indexes(self, build: bool) -> Embedded {
        self.state().build_indexes = build;
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
            state.transactions.idle = idle;
            state.transactions.lifetime = lifetime;
        }
        self
    }

    /// How long past versions are kept for read-only transactions at a `read_time`
    /// ([`Db::read_only_transaction_at`](crate::Db::read_only_transaction_at)): one hour by
    /// default, as the service keeps them, in at most the memory
    /// [`keep_versions_bytes`](Embedded::keep_versions_bytes) gives them. `Duration::ZERO`
    /// keeps versions only while a transaction reads them. Past versions are kept in memory:
    /// a file reopened starts with none.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use datastore_entity::backend::embedded::Embedded;
    /// let engine = Embedded::in_memory().keep_versions(Duration::from_secs(60));
    /// ```
    pub fn keep_versions(self, retention: Duration) -> Embedded {
        self.state().history.keep(retention);
        self
    }

    /// The most memory past versions take (the entities' keys and stored forms before each
    /// change, and about 64 bytes a change): 64 MiB by default. Past it, the oldest versions
    /// are collected before their retention is over (a `read_time` before them is refused
    /// with `FAILED_PRECONDITION`), and a transaction whose snapshot needs more aborts
    /// (`Error::Aborted`: a retry reads the store as it is), so writes never grow memory
    /// without bound.
    ///
    /// ```
    /// # use datastore_entity::backend::embedded::Embedded;
    /// let engine = Embedded::in_memory().keep_versions_bytes(16 << 20);
    /// ```
    pub fn keep_versions_bytes(self, max_bytes: usize) -> Embedded {
        {
            let mut state = self.state();
            state.history.keep_bytes(max_bytes);
            state.collect();
        }
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
                if self.0.state().locks.withdraw(self.1) {
                    self.0.released.notify_waiters();
                }
            }
        }
        let id = transactions::number(transaction)?;
        let _waiting = Waiting(self, id);
        let deadline = tokio::time::Instant::now() + LOCK_WAIT;
        loop {
            // Registered before looking, so a release in between is not missed.
            let released = self.released.notified();
            let (locking, wounded) = {
                let mut state = self.state();
                let State {
                    locks,
                    transactions,
                    ..
                } = &mut *state;
                locks.lock(transactions, id, keys)
            }
            .inspect_err(|_| {
                // Aborted itself, its locks are released.
                self.released.notify_waiters();
            })?;
            if wounded {
                self.released.notify_waiters();
            }
            if let Locking::Held = locking {
                return Ok(());
            }
            if tokio::time::timeout_at(deadline, released).await.is_err() {
                // It aborts, and holds nothing more.
                {
                    let mut state = self.state();
                    let State {
                        locks,
                        transactions,
                        ..
                    } = &mut *state;
                    locks.abort(transactions, id, Abort::LockWait);
                }
                self.released.notify_waiters();
                return Err(Abort::LockWait.error());
            }
        }
    }

    /// Answers `query` outside any transaction when no index serves it (every entity of its
    /// kind is read): the entities are copied a slice at a time from one snapshot, the lock
    /// let go between slices, and evaluated after, so no other call waits on a long scan.
    /// `None`: an index serves the query (a page reads what it returns, under the lock).
    fn scan_in_slices(&self, query: &QuerySpec) -> Result<Option<QueryBatch>, Error> {
        // The slice of an index's build, then the scan: long work.
        let begun = long(|| -> Result<_, Error> {
            let mut state = self.state();
            state.build_needed(query)?;
            if !state.answers().scans(query)? {
                return Ok(None);
            }
            let version = state.history.now();
            let handle = state.transactions.begin(Some(version), true, None);
            let id = transactions::number(&handle)?;
            Ok(Some((
                Pinned(self, id),
                version,
                state.store.written_here(),
            )))
        })?;
        let Some((pinned, version, written_here)) = begun else {
            return Ok(None);
        };
        long(|| self.scan_pinned(query, &pinned, version, written_here)).map(Some)
    }

    /// An aggregation outside any transaction whose rows no index serves: its rows read as
    /// [`scan_in_slices`](Embedded::scan_in_slices) reads them, then counted or folded.
    /// `None`: an index serves them (the aggregation reads them under the lock).
    fn aggregate_in_slices(
        &self,
        query: &QuerySpec,
        aggregation: &Aggregation,
    ) -> Result<Option<Value>, Error> {
        let plan = aggregate::Plan::new(query, aggregation)?;
        let Some(rows) = self.scan_in_slices(plan.rows())? else {
            return Ok(None);
        };
        Ok(Some(match plan {
            aggregate::Plan::Count { .. } => {
                Value::Integer(i64::try_from(rows.results.len()).unwrap_or(i64::MAX))
            }
            aggregate::Plan::Fold(fold) => fold.over(&rows),
        }))
    }

    /// The slices of [`scan_in_slices`](Embedded::scan_in_slices), read at `version`, which
    /// `pinned` keeps; then evaluated.
    fn scan_pinned(
        &self,
        query: &QuerySpec,
        pinned: &Pinned<'_>,
        version: u64,
        written_here: bool,
    ) -> Result<QueryBatch, Error> {
        let answered = query.answered();
        let prepared = scan::Prepared::new(&answered)?;
        let (mut candidates, mut stamps) = (Vec::new(), Vec::new());
        let mut after: Option<Vec<u8>> = None;
        loop {
            let (slice, more) = {
                let mut state = self.state();
                let pin = state.transactions.get_mut(pinned.1)?;
                pin.touch();
                // Writes since outgrew past versions' memory: the snapshot is gone.
                if let Some(aborted) = pin.aborted {
                    return Err(aborted.error());
                }
                let view = state.view(Some(version));
                candidates::candidate_slice(&view, &prepared, after.as_deref(), SCAN_SLICE)?
            };
            after = slice.last().map(|(path, _)| path.clone());
            let (decoded, stamped) = candidates::decode_candidates(&prepared, slice, written_here)?;
            candidates.extend(decoded);
            stamps.extend(stamped);
            if !more {
                break;
            }
        }
        let mut batch = candidates::scanned(&prepared, &candidates, stamps)?;
        if let Some(paths) = query.property_mask.as_deref() {
            for result in &mut batch.results {
                result.properties = result.properties.selected(paths);
            }
        }
        Ok(batch)
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // No code path panics while holding the lock, so a poisoned lock still holds
        // consistent state.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Runs `work`, which is long: on a runtime of several threads, this one's other tasks go to
/// another thread meanwhile (a server's other clients are not held up).
fn long<T>(work: impl FnOnce() -> T) -> T {
    let multi_thread = tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
    match multi_thread {
        true => tokio::task::block_in_place(work),
        false => work(),
    }
}

impl State {
    fn new(store: Box<dyn Store + Send>) -> State {
        State {
            store,
            strict: true,
            build_indexes: false,
            composites: Map::default(),
            building: Vec::new(),
            failures_seen: 0,
            declared: Map::default(),
            history: History::new(),
            transactions: Transactions::default(),
            locks: Locks::default(),
            ids: Ids::default(),
            identity: fastrand::u128(..),
        }
    }

    /// Reads a file's own records: its format, id counter, reserved ids, declared indexes and
    /// identity.
    fn load(&mut self, path: &Path) -> Result<(), Error> {
        self.identity = records::load(
            &mut *self.store,
            path,
            &mut self.ids,
            &mut self.history,
            &mut self.composites,
        )?;
        Ok(())
    }

    /// Applies a batch; a failure leaves the id counter to be persisted again.
    fn apply(&mut self, batch: Batch) -> Result<(), Error> {
        if batch.is_empty() {
            return Ok(());
        }
        let applied = self.store.apply(batch);
        if applied.is_err() {
            self.ids.forget_persisted();
        }
        applied
    }

    fn composites(&self, kind: &str) -> &[Composite] {
        index::of_kind(&self.composites, kind)
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
        let t = self.transactions.get_mut(transactions::number(t)?)?;
        if let Some(aborted) = t.aborted {
            return Err(aborted.error());
        }
        t.touch();
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
            Some(t) => self
                .transactions
                .get_mut(transactions::number(t)?)
                .map(Some),
        }
    }

    /// Ends a transaction: its locks are released, the versions only it read collected.
    fn end_transaction(&mut self, id: u64) -> Option<Transaction> {
        let mut ended = self.transactions.remove(id);
        if let Some(t) = &mut ended {
            self.locks.release(id, &mut t.locks);
        }
        self.collect();
        ended
    }

    /// Ends the transactions left idle or open too long (a body that never finished and was
    /// never dropped); returns whether any held locks.
    fn expire(&mut self) -> bool {
        let mut released = false;
        for (id, mut t) in self.transactions.expire() {
            tracing::debug!(transaction = id, "an idle transaction expired");
            released |= !t.locks.is_empty();
            self.locks.release(id, &mut t.locks);
        }
        self.collect();
        released
    }

    /// Collects the past versions no open transaction reads (and outside the retention);
    /// while those a transaction reads take more memory than versions may, aborts it, the
    /// oldest snapshot first, so its versions go too.
    fn collect(&mut self) {
        self.history.collect(self.transactions.oldest_snapshot());
        while self.history.over_budget()
            && let Some((id, _)) = self.transactions.pinning()
        {
            tracing::debug!(
                transaction = id,
                "a transaction's snapshot outgrew past versions' memory"
            );
            self.locks.abort(&mut self.transactions, id, Abort::History);
            self.history.collect(self.transactions.oldest_snapshot());
        }
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

    fn allocate_ids(&mut self, keys: Vec<RawKey>) -> Result<Vec<RawKey>, Error> {
        let mut batch = Batch::default();
        let keys = self.ids.allocate(keys, &mut batch)?;
        self.apply(batch)?;
        Ok(keys)
    }

    fn reserve_ids(&mut self, keys: &[RawKey]) -> Result<(), Error> {
        let mut batch = Batch::default();
        let ids = Ids::to_reserve(keys, &mut batch)?;
        self.apply(batch)?;
        self.ids.reserve(ids);
        Ok(())
    }

    /// Declares `schema`'s composite indexes: new ones are built from the stored entities
    /// (and, in a file, recorded), so queries can use them at once.
    fn declare(&mut self, schema: &'static Schema) -> Result<(), Error> {
        let address = std::ptr::from_ref(schema).addr();
        if self.declared.contains_key(&address) {
            return Ok(());
        }
        let new = records::new_indexes(self.composites(schema.kind), schema);
        if !new.is_empty() {
            let batch = records::declaration(&*self.store, schema.kind, &new)?;
            self.apply(batch)?;
            // Backfilled whole: a build of the same index has nothing left to do.
            self.building.retain(|b| !new.contains(&b.index));
            self.composites
                .entry(schema.kind.to_owned())
                .or_default()
                .extend(new);
        }
        self.declared.insert(address, schema);
        Ok(())
    }

    fn commit(
        &mut self,
        changes: Vec<Change>,
        transaction: Option<&TransactionId>,
    ) -> Result<Committed, Error> {
        // A transaction ends with its commit, whatever the outcome.
        let ended = match transaction {
            Some(t) => {
                let id = transactions::number(t)?;
                let mut ended = self.transactions.remove(id);
                if let Some(t) = &mut ended {
                    self.locks.release(id, &mut t.locks);
                }
                Some(ended.ok_or(Error::TransactionClosed)?)
            }
            None => None,
        };
        let checked = match &ended {
            Some(Transaction {
                aborted: Some(aborted),
                ..
            }) => Err(aborted.error()),
            Some(t) if t.read_only && !changes.is_empty() => Err(Error::Service {
                code: ServiceCode::InvalidArgument,
                message: "a read-only transaction cannot write".to_owned(),
            }),
            // A read-only transaction read one snapshot: its commit only ends it.
            Some(t) if !t.read_only => self.check_conflicts(t),
            _ => Ok(()),
        }
        // Every mutation's own rules before anything is written; each entity is checked as it
        // will be stored, then what exists, in `commit::write`.
        .and_then(|()| check_mutations(changes.iter().map(|c| &c.mutation)));
        if ended.is_some() {
            self.collect();
        }
        checked?;
        let recording = self.history.recording(!self.transactions.is_empty());
        let time = self.history.next_time();
        let written = commit::write(
            &*self.store,
            &building::kept_by_writes(&self.composites, &self.building),
            &mut self.ids,
            changes,
            time,
            recording,
        );
        if written.is_err() {
            // Ids allocated for a batch never applied: persist the counter again next time.
            self.ids.forget_persisted();
        }
        let (mut batch, undo, results) = written?;
        if !results.is_empty() {
            records::clock(&mut batch, time);
        }
        self.apply(batch)?;
        self.history.commit(undo, recording, time);
        self.collect();
        Ok(Committed {
            results,
            commit_time: Some(time),
        })
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
            let now = self.answers().answer(&*self.store, query)?;
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

    /// What answers queries, with the declared indexes and the index mode.
    fn answers(&self) -> Answers<'_> {
        Answers::of(&self.composites, &self.declared, self.strict)
    }
}
