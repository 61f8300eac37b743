//! Transactions: `db.transaction(async |tx| { … })` and `db.read_only_transaction(…)`,
//! rolled back on failure and retried on contention with jittered exponential backoff (R-A2).

use std::future::Future;
use std::sync::{Arc, Mutex};

use crate::backend::{TransactionId, TransactionMode};
use datastore_entity_core::error::Error;
use datastore_entity_core::model::entity::Entity;
use datastore_entity_core::model::key::{Key, RawKey};
use datastore_entity_core::model::scalar::Timestamp;
use datastore_entity_core::model::value::PropertyMap;

use super::Db;
use super::query::Query;
use super::read;
use super::scope::{TxRef, lookup};
use super::write::{self, Op, Write};

impl Db {
    /// Runs `body` in a transaction and commits what it wrote.
    ///
    /// If the commit loses a race with another writer ([`Error::Aborted`]), or the backend is
    /// briefly unavailable, the transaction is rolled back and `body` runs again, after a
    /// jittered exponential backoff, up to [`RetryPolicy::max_attempts`](crate::RetryPolicy::max_attempts) attempts (R-A2).
    /// Any other error of `body` is returned unchanged, after a best-effort rollback (a failing
    /// rollback is logged, not raised).
    ///
    /// ```
    /// # use datastore_entity::prelude::*;
    /// #[derive(Entity, Clone)]
    /// struct Counter {
    ///     #[key]
    ///     name: KeyName,
    ///     count: i64,
    /// }
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let db = Db::in_memory();
    /// let key = db.put(&Counter { name: KeyName::new("visits")?, count: 0 }).await?;
    /// let count = db
    ///     .transaction(async |tx| {
    ///         let mut counter = tx.get(&key).await?.expect("created above");
    ///         counter.count += 1;
    ///         tx.put(&counter).await?;
    ///         Ok::<_, Error>(counter.count)
    ///     })
    ///     .await?;
    /// assert_eq!(count, 1);
    /// # Ok::<(), Error>(())
    /// # }).unwrap();
    /// ```
    ///
    /// The body may return its own error type, any `Er: From<Error>`: the crate's errors
    /// reach it through `?`, contention met inside the body is still retried (whatever the
    /// body made of the error), and the body's other errors come back unchanged:
    ///
    /// ```
    /// # use datastore_entity::prelude::*;
    /// # #[derive(Entity, Clone)]
    /// # struct Account { #[key] name: KeyName, balance: i64 }
    /// #[derive(Debug)]
    /// enum TransferError {
    ///     Insufficient { balance: i64 },
    ///     Store(Error),
    /// }
    ///
    /// impl From<Error> for TransferError {
    ///     fn from(e: Error) -> Self {
    ///         TransferError::Store(e)
    ///     }
    /// }
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let db = Db::in_memory();
    /// let key = db.put(&Account { name: KeyName::new("ann")?, balance: 5 }).await?;
    /// let refused = db
    ///     .transaction(async |tx| {
    ///         let mut account = tx.get(&key).await?.expect("created above");
    ///         if account.balance < 10 {
    ///             return Err(TransferError::Insufficient { balance: account.balance });
    ///         }
    ///         account.balance -= 10;
    ///         tx.put(&account).await?;
    ///         Ok(())
    ///     })
    ///     .await;
    /// assert!(matches!(refused, Err(TransferError::Insufficient { balance: 5 })));
    /// # Ok::<(), Error>(())
    /// # }).unwrap();
    /// ```
    pub async fn transaction<T, Er, F, Fut>(&self, mut body: F) -> Result<T, Er>
    where
        F: FnMut(Tx) -> Fut,
        Fut: Future<Output = Result<T, Er>>,
        Er: From<Error>,
    {
        self.retrying(Access::ReadWrite, &mut body).await
    }

    /// Runs `body` in a read-only transaction: every read sees one consistent snapshot (the
    /// reads are checked together at the end; if something they saw changed meanwhile, `body`
    /// runs again, as [`Db::transaction`] retries contention). The handle has no writes.
    ///
    /// ```
    /// # use datastore_entity::prelude::*;
    /// # #[derive(Entity, Clone)]
    /// # struct Account { #[key] name: KeyName, balance: i64 }
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let db = Db::in_memory();
    /// let ann = db.put(&Account { name: KeyName::new("ann")?, balance: 5 }).await?;
    /// let bob = db.put(&Account { name: KeyName::new("bob")?, balance: 7 }).await?;
    /// // The two balances, as of one moment: no transfer can fall between the two reads.
    /// let total = db
    ///     .read_only_transaction(async |tx| {
    ///         let accounts = tx.get_many(&[ann.clone(), bob.clone()]).await?;
    ///         Ok::<_, Error>(accounts.iter().flatten().map(|a| a.balance).sum::<i64>())
    ///     })
    ///     .await?;
    /// assert_eq!(total, 12);
    /// # Ok::<(), Error>(())
    /// # }).unwrap();
    /// ```
    pub async fn read_only_transaction<T, Er, F, Fut>(&self, mut body: F) -> Result<T, Er>
    where
        F: FnMut(ReadTx) -> Fut,
        Fut: Future<Output = Result<T, Er>>,
        Er: From<Error>,
    {
        let access = Access::ReadOnly { read_time: None };
        self.retrying(access, &mut |tx| body(ReadTx { tx })).await
    }

    /// Runs `body` in a read-only transaction that reads the data as it was at `read_time`:
    /// a consistent snapshot of the past (an audit, a report that must match an earlier one, a
    /// look at what a bad write replaced).
    ///
    /// Google Cloud keeps past versions for one hour (seven days, at whole minutes, with
    /// point-in-time recovery enabled); an older `read_time`, or one in the future, is refused
    /// by the service. The embedded engine keeps an hour of versions as well, in memory
    /// ([`Embedded::keep_versions`](crate::backend::embedded::Embedded::keep_versions)); a
    /// `read_time` it keeps no version of is refused before the body runs.
    ///
    /// ```
    /// # use datastore_entity::prelude::*;
    /// # #[derive(Entity, Clone)]
    /// # struct Account { #[key] name: KeyName, balance: i64 }
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let db = Db::in_memory();
    /// db.put(&Account { name: KeyName::new("ann")?, balance: 5 }).await?;
    /// # tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    /// let before = Timestamp::now();
    /// # tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    /// db.put(&Account { name: KeyName::new("bob")?, balance: 7 }).await?;
    /// let then = db
    ///     .read_only_transaction_at(before, async |tx| {
    ///         Ok::<_, Error>(tx.query::<Account>().count().await?)
    ///     })
    ///     .await?;
    /// assert_eq!(then, 1);
    /// # Ok::<(), Error>(())
    /// # }).unwrap();
    /// ```
    pub async fn read_only_transaction_at<T, Er, F, Fut>(
        &self,
        read_time: Timestamp,
        mut body: F,
    ) -> Result<T, Er>
    where
        F: FnMut(ReadTx) -> Fut,
        Fut: Future<Output = Result<T, Er>>,
        Er: From<Error>,
    {
        let access = Access::ReadOnly {
            read_time: Some(read_time),
        };
        self.retrying(access, &mut |tx| body(ReadTx { tx })).await
    }

    /// Attempts `body` until it commits, fails for good, or the retry policy runs out.
    async fn retrying<T, Er, F, Fut>(&self, access: Access, body: &mut F) -> Result<T, Er>
    where
        F: FnMut(Tx) -> Fut,
        Fut: Future<Output = Result<T, Er>>,
        Er: From<Error>,
    {
        let attempts = self.retry.max_attempts.max(1);
        let mut attempt = 0;
        let mut previous = None;
        loop {
            attempt += 1;
            let failed = match self.attempt(access, body, &mut previous).await {
                Ok(value) => return Ok(value),
                Err(failed) => failed,
            };
            let retryable = match &failed {
                Failed::Ours(error) => error.is_retryable(),
                Failed::Body { contended, .. } => *contended,
            };
            let error = match failed {
                Failed::Ours(error) if retryable && attempt < attempts => {
                    tracing::debug!(attempt, %error, "transaction will be retried");
                    None
                }
                Failed::Body { .. } if retryable && attempt < attempts => {
                    tracing::debug!(attempt, "contention inside the transaction; retrying");
                    None
                }
                Failed::Ours(error) => Some(Er::from(error)),
                Failed::Body { error, .. } => Some(error),
            };
            if let Some(error) = error {
                return Err(error);
            }
            tokio::time::sleep(self.retry.backoff(attempt)).await;
        }
    }

    /// One attempt; `previous` is the handle of the attempt it retries, and becomes its own.
    async fn attempt<T, Er, F, Fut>(
        &self,
        access: Access,
        body: &mut F,
        previous: &mut Option<TransactionId>,
    ) -> Result<T, Failed<Er>>
    where
        F: FnMut(Tx) -> Fut,
        Fut: Future<Output = Result<T, Er>>,
    {
        let mode = match access {
            Access::ReadOnly { read_time } => TransactionMode::ReadOnly { read_time },
            Access::ReadWrite => TransactionMode::ReadWrite {
                previous: previous.take(),
            },
        };
        // Begun by its first read (or its commit): a transaction costs no round trip of its
        // own where the backend can begin it with a call it makes anyway. A read of the past
        // begins at once, so a backend that keeps no such past refuses it before the body runs.
        let read_time = matches!(access, Access::ReadOnly { read_time: Some(_) });
        let handle = TxRef::new(mode, self.partition().clone());
        if read_time {
            let id = self
                .backend()
                .begin_transaction(handle.partition(), handle.mode())
                .await
                .map_err(Failed::Ours)?;
            handle.set_begun(id);
        }
        let tx = Tx {
            inner: Arc::new(TxInner {
                db: self.clone(),
                handle,
                read_only: matches!(access, Access::ReadOnly { .. }),
                state: Mutex::new(TxState::default()),
            }),
        };
        // Dropped before it ends (a timeout around the transaction, a cancelled task): rolled
        // back in the background, so it leaves no locks or versions pinned behind.
        let _abandoned = Abandon(tx.clone());
        let outcome = match body(tx.clone()).await {
            Ok(value) => tx.commit().await.map(|()| value).map_err(Failed::Ours),
            Err(error) => {
                tx.rollback().await;
                Err(Failed::Body {
                    error,
                    contended: tx.inner.handle.contended(),
                })
            }
        };
        *previous = tx.inner.handle.begun().cloned();
        outcome
    }
}

/// What a transaction may do.
#[derive(Debug, Clone, Copy)]
enum Access {
    ReadWrite,
    ReadOnly { read_time: Option<Timestamp> },
}

/// Why an attempt failed.
enum Failed<Er> {
    /// The crate's own call (begin, commit) failed: retried when the error is retryable.
    Ours(Error),
    /// The body returned an error; `contended` when a call inside it met contention.
    Body { error: Er, contended: bool },
}

/// The handle of a read-only transaction ([`Db::read_only_transaction`]): reads only, all
/// from one consistent snapshot. Cheap to clone.
#[derive(Clone, Debug)]
pub struct ReadTx {
    tx: Tx,
}

impl ReadTx {
    /// Reads one entity inside the transaction.
    pub async fn get<E: Entity>(&self, key: &Key<E>) -> Result<Option<E>, Error> {
        self.tx.get(key).await
    }

    /// Reads many entities in one lookup inside the transaction.
    pub async fn get_many<E: Entity>(&self, keys: &[Key<E>]) -> Result<Vec<Option<E>>, Error> {
        self.tx.get_many(keys).await
    }

    /// A query inside the transaction (use `.ancestor(…)` for a strongly consistent one).
    pub fn query<E: Entity>(&self) -> Query<E> {
        self.tx.query()
    }
}

/// The handle a transaction's body works with: reads see a consistent snapshot and are
/// checked at commit; writes are buffered and committed together. Cheap to clone.
#[derive(Clone)]
pub struct Tx {
    inner: Arc<TxInner>,
}

/// Rolls back, in the background, a transaction whose future was dropped before it ended
/// (best effort: without a tokio runtime, a backend that answers at once, as the embedded
/// engine does, still gets it). A transaction whose first read was still beginning it has
/// no handle yet: the backend expires it (the service and the engine after 60 idle seconds).
struct Abandon(Tx);

impl Drop for Abandon {
    fn drop(&mut self) {
        {
            let mut state = self.0.state();
            if state.ended {
                return;
            }
            state.ended = true;
        }
        let Some(id) = self.0.inner.handle.begun().cloned() else {
            return;
        };
        let db = self.0.inner.db.clone();
        let rollback = async move {
            match db.backend().rollback(&id).await {
                Ok(()) => tracing::debug!("a dropped transaction was rolled back"),
                Err(error) => tracing::debug!(
                    %error,
                    "the rollback of a dropped transaction failed; the service will expire it"
                ),
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn(rollback)),
            Err(_) => drop(futures_util::FutureExt::now_or_never(rollback)),
        }
    }
}

struct TxInner {
    db: Db,
    handle: TxRef,
    read_only: bool,
    state: Mutex<TxState>,
}

#[derive(Default)]
struct TxState {
    writes: Vec<Write>,
    /// The first error of a buffered write, reported at commit.
    error: Option<Error>,
    ended: bool,
}

impl std::fmt::Debug for Tx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tx")
            .field("id", &self.inner.handle.begun())
            .finish()
    }
}

impl Tx {
    fn state(&self) -> std::sync::MutexGuard<'_, TxState> {
        self.inner
            .state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn check_open(&self) -> Result<(), Error> {
        if self.state().ended {
            Err(Error::TransactionClosed)
        } else {
            Ok(())
        }
    }

    /// Reads one entity inside the transaction.
    pub async fn get<E: Entity>(&self, key: &Key<E>) -> Result<Option<E>, Error> {
        let mut found = self.get_many(std::slice::from_ref(key)).await?;
        Ok(found.pop().flatten())
    }

    /// Reads many entities in one lookup inside the transaction.
    pub async fn get_many<E: Entity>(&self, keys: &[Key<E>]) -> Result<Vec<Option<E>>, Error> {
        self.check_open()?;
        let handle = &self.inner.handle;
        handle.note(read::load(&self.inner.db.scope, keys, Some(handle)).await)
    }

    /// Reads entities by their keys in the backend's partition, inside the transaction.
    pub(crate) async fn lookup_raw(
        &self,
        keys: &[RawKey],
    ) -> Result<Vec<Option<PropertyMap>>, Error> {
        self.check_open()?;
        lookup(&self.inner.db.scope, keys, Some(&self.inner.handle)).await
    }

    /// A query inside the transaction (use `.ancestor(…)` for a strongly consistent one).
    pub fn query<E: Entity>(&self) -> Query<E> {
        Query::new(self.inner.db.scope.clone(), Some(self.inner.handle.clone()))
    }

    /// Buffers a write of `entity` (create it, or set the properties its type declares and
    /// leave the others as stored, as [`Db::put`]), committed with the transaction, and
    /// returns the key it will be written under. An incomplete key (`Option<KeyId>` holding
    /// `None`) gets its id now, from the backend's allocator (one round trip), so the body can
    /// use the key before commit — in a child's key, or a property of another entity. An id
    /// allocated by an attempt that is then retried or rolled back is simply never used.
    ///
    /// An error here (a key in another namespace, a failed allocation) also fails the commit,
    /// so a write is never silently dropped.
    ///
    /// ```
    /// # use datastore_entity::prelude::*;
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// #[derive(Entity, Debug)]
    /// struct Order {
    ///     #[key]
    ///     id: Option<KeyId>,
    ///     total: i64,
    /// }
    ///
    /// #[derive(Entity, Debug)]
    /// struct OrderLine {
    ///     #[parent]
    ///     order: Key<Order>,
    ///     #[key]
    ///     line: u64,
    ///     item: String,
    /// }
    ///
    /// let db = Db::in_memory();
    /// let order = db
    ///     .transaction(async |tx| {
    ///         let order = tx.put(&Order { id: None, total: 12 }).await?;
    ///         let line = OrderLine { order: order.clone(), line: 1, item: "tea".into() };
    ///         tx.put(&line).await?;
    ///         Ok::<_, Error>(order)
    ///     })
    ///     .await?;
    /// assert!(order.is_complete());
    /// let lines = db.query::<OrderLine>().ancestor(&order).fetch().await?;
    /// assert_eq!(lines.items[0].item, "tea");
    /// # Ok::<(), Error>(())
    /// # }).unwrap();
    /// ```
    pub async fn put<E: Entity>(&self, entity: &E) -> Result<Key<E>, Error> {
        let result = self.prepare_put(entity, Op::Upsert).await;
        self.buffer_put(result)
    }

    /// Buffers the creation of `entity`, as [`Db::insert`]: the commit fails with
    /// [`Error::AlreadyExists`] (and writes nothing) if its key is taken by then.
    pub async fn insert<E: Entity>(&self, entity: &E) -> Result<Key<E>, Error> {
        let result = self.prepare_put(entity, Op::Insert).await;
        self.buffer_put(result)
    }

    /// Buffers an update of `entity`, as [`Db::update`]: the commit fails with
    /// [`Error::NotFound`] (and writes nothing) if it does not exist by then.
    pub async fn update<E: Entity>(&self, entity: &E) -> Result<(), Error> {
        let result = self.prepare_put(entity, Op::Update).await;
        self.buffer_put::<E>(result).map(drop)
    }

    /// Buffers writes of all `entities`, as [`Db::put_many`]; keys in input order. The same
    /// key twice fails the commit with [`Error::DuplicateKey`] (R-A4).
    pub async fn put_many<E: Entity>(&self, entities: &[E]) -> Result<Vec<Key<E>>, Error> {
        let mut keys = Vec::with_capacity(entities.len());
        for entity in entities {
            keys.push(self.put(entity).await?);
        }
        Ok(keys)
    }

    /// Buffers a write of `entity` as exactly the properties its type declares: stored
    /// properties it does not declare are removed (see [`Db::replace`]).
    pub async fn replace<E: Entity>(&self, entity: &E) -> Result<Key<E>, Error> {
        let result = self
            .prepare_put(entity, Op::Upsert)
            .await
            .map(Write::replacing);
        self.buffer_put(result)
    }

    fn buffer_put<E: Entity>(&self, result: Result<Write, Error>) -> Result<Key<E>, Error> {
        match result {
            Ok(write) => {
                let key = Key::from_raw(write.key.clone());
                self.buffer(Ok(write));
                key
            }
            Err(error) => {
                self.buffer(Err(error.clone()));
                Err(error)
            }
        }
    }

    /// The write of `entity`, its key made complete (an update's is left as it is: the
    /// commit refuses an incomplete one).
    async fn prepare_put<E: Entity>(&self, entity: &E, op: Op) -> Result<Write, Error> {
        self.check_open()?;
        let db = &self.inner.db;
        let mut write = Write::entity(&db.scope, entity, op)?;
        if !write.key.is_complete() && op != Op::Update {
            let handle = &self.inner.handle;
            let allocated =
                handle.note(db.backend().allocate_ids(vec![write.key.clone()]).await)?;
            write.key = allocated.into_iter().next().ok_or(Error::Internal {
                invariant: "the backend allocates an id for each incomplete key",
            })?;
        }
        Ok(write)
    }

    /// Buffers a delete of one entity (with its replicas and counter shards), committed with
    /// the transaction, as [`Db::delete`]. An error here (a key in another namespace, a
    /// transaction already ended) also fails the commit.
    pub async fn delete<E: Entity>(&self, key: &Key<E>) -> Result<(), Error> {
        self.check_open()?;
        let write = Write::delete(&self.inner.db.scope, key);
        let result = write.as_ref().map(drop).map_err(Error::clone);
        self.buffer(write);
        result
    }

    /// Buffers deletes of many entities, as [`Db::delete_many`]; the same key twice fails
    /// the commit with [`Error::DuplicateKey`] (R-A4).
    pub async fn delete_many<E: Entity>(&self, keys: &[Key<E>]) -> Result<(), Error> {
        for key in keys {
            self.delete(key).await?;
        }
        Ok(())
    }

    /// Buffers a write prepared by the crate (counter shards).
    pub(crate) fn write(&self, write: Write) {
        self.buffer(Ok(write));
    }

    /// Buffers a write prepared elsewhere in the crate (transforms), or records the error
    /// that refused it (the commit fails with it); the error is returned too.
    pub(crate) fn buffer_write(&self, write: Result<Write, Error>) -> Result<(), Error> {
        self.check_open()?;
        let refused = write.as_ref().err().cloned();
        self.buffer(write);
        refused.map_or(Ok(()), Err)
    }

    /// The handle's scope: its backend and partition.
    pub(crate) fn scope(&self) -> &super::scope::Scope {
        &self.inner.db.scope
    }

    fn buffer(&self, write: Result<Write, Error>) {
        let mut state = self.state();
        match write {
            Ok(w) => state.writes.push(w),
            Err(e) => {
                state.error.get_or_insert(e);
            }
        }
    }

    async fn commit(&self) -> Result<(), Error> {
        let (writes, error) = {
            let mut state = self.state();
            if state.ended {
                return Err(Error::TransactionClosed);
            }
            (std::mem::take(&mut state.writes), state.error.take())
        };
        let backend = self.inner.db.backend();
        let handle = &self.inner.handle;
        if self.inner.read_only {
            self.state().ended = true;
            return match handle.begun() {
                Some(id) => backend.rollback(id).await,
                // It read nothing: there is nothing to end.
                None => Ok(()),
            };
        }
        let prepared = match error {
            Some(error) => Err(error),
            None => write::prepare(&self.inner.db.scope, writes, handle.begun()).await,
        };
        let changes = match prepared {
            Ok((changes, ..)) => changes,
            Err(error) => {
                // Refused before anything was sent: the transaction is still open there.
                self.rollback().await;
                return Err(error);
            }
        };
        self.state().ended = true;
        match handle.begun() {
            Some(id) => backend.commit_changes(changes, Some(id)).await.map(drop),
            None if changes.is_empty() => Ok(()),
            // It read nothing: its commit begins it.
            None => backend
                .begin_with_commit(changes, handle.partition(), handle.mode())
                .await
                .map(drop),
        }
    }

    /// Best effort (R-A2): a failing rollback is logged, not raised.
    async fn rollback(&self) {
        {
            let mut state = self.state();
            if state.ended {
                return;
            }
            state.ended = true;
        }
        let Some(id) = self.inner.handle.begun() else {
            // It never began: there is nothing to roll back.
            return;
        };
        if let Err(error) = self.inner.db.backend().rollback(id).await {
            tracing::warn!(%error, "transaction rollback failed; the service will expire it");
        }
    }
}
