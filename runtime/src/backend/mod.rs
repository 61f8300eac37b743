//! The storage backends, behind one small trait that mirrors the service's own calls
//! (lookup, run query, run aggregation, commit, begin/rollback transaction, allocate/reserve
//! ids), and the capabilities only some have (Query Explain, stored reads).
//!
//! Everything typed (`Db`, queries, transactions) is built once above this trait, so the
//! embedded engine and the cloud client share all of it.

use std::future::Future;
use std::pin::Pin;

use datastore_entity_core::error::Error;
use datastore_entity_core::model::key::{PartitionId, RawKey};
use datastore_entity_core::model::scalar::Timestamp;
use datastore_entity_core::model::schema::Schema;
use datastore_entity_core::model::value::{PropertyMap, Value};
use datastore_entity_core::query::explain::Explanation;
/// The query vocabulary, where the backends' callers have always found it.
pub use datastore_entity_core::query::spec::{
    Aggregation, Distance, FilterNode, FindNearest, PropertyFilter, PropertyOrder, QueryBatch,
    QueryResult, QuerySpec, ResultShape, Stamp,
};
/// The write vocabulary, where the backends' callers have always found it.
pub use datastore_entity_core::query::write::{
    Change, ChangeResult, Committed, Condition, Mask, Mutation, OnConflict, PropertyTransform,
    TransformKind,
};

pub mod calls;
#[cfg(feature = "cloud")]
pub mod cloud;
pub mod embedded;
pub(crate) mod retry;

/// A boxed future, so the trait can be used as `dyn Backend`.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What a lookup finds: one slot per key, in the order of the keys.
pub type Found = Vec<Option<PropertyMap>>;

/// What a lookup finds with each entity's version and times: one slot per key, in order.
pub type FoundStamped = Vec<Option<(PropertyMap, Stamp)>>;

/// An entity a lookup found, as `lookup_each` hands it over: its properties in the
/// embedded engine's stored form (read straight into a typed entity, see
/// `Entity::from_stored`), or as a map. Not a public API.
#[doc(hidden)]
pub enum FoundEntity<'a> {
    /// The stored form's bytes.
    Stored(&'a [u8]),
    /// The properties.
    Map(PropertyMap),
}

/// What `lookup_each` hands each entity found to, with its key's position.
#[doc(hidden)]
pub type ReadFound<'r> = dyn FnMut(usize, FoundEntity<'_>) -> Result<(), Error> + Send + 'r;

/// What `run_query_each` hands each result to: its key, and its entity as found.
#[doc(hidden)]
pub type ReadResult<'r> = dyn FnMut(&RawKey, FoundEntity<'_>) -> Result<(), Error> + Send + 'r;

/// Where a batch that `run_query_each` handed over ends. Not a public API.
#[doc(hidden)]
pub struct BatchEnd {
    /// The position after the last result.
    pub end_cursor: Vec<u8>,
    /// Whether more results may follow `end_cursor`.
    pub more_results: bool,
}

/// A transaction handle issued by [`Backend::begin_transaction`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TransactionId(pub Vec<u8>);

/// What kind of transaction to begin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransactionMode {
    /// Reads and writes; on a retry, the previous attempt's handle (the service gives the
    /// retry priority over newer transactions).
    ReadWrite {
        /// The handle of the attempt this one retries.
        previous: Option<TransactionId>,
    },
    /// Reads only, from one consistent snapshot; a commit with mutations is refused.
    ReadOnly {
        /// Read the data as it was at this moment rather than now (a backend that keeps no
        /// version of that moment refuses it: the service past an hour, the embedded engine
        /// past its [`keep_versions`](crate::backend::embedded::Embedded::keep_versions)).
        read_time: Option<Timestamp>,
    },
}

/// How a read reads.
#[derive(Debug, Clone, Copy)]
pub enum ReadAs<'a> {
    /// The latest committed data, outside any transaction.
    Latest,
    /// In a transaction begun before.
    In(&'a TransactionId),
    /// In a transaction this read begins, in this partition and mode, returned with the
    /// answer: one call where the service allows it (its `new_transaction` read option).
    Begin(&'a PartitionId, &'a TransactionMode),
}

impl<'a> ReadAs<'a> {
    /// The transaction read in, given or not yet begun: `Latest` or `In`.
    pub fn of(transaction: Option<&'a TransactionId>) -> ReadAs<'a> {
        transaction.map_or(ReadAs::Latest, ReadAs::In)
    }
}

/// How a commit commits.
#[derive(Debug, Clone, Copy)]
pub enum CommitAs<'a> {
    /// Outside any transaction.
    Alone,
    /// Ending a transaction begun before.
    In(&'a TransactionId),
    /// In a read-write transaction of its own that read nothing, in this partition and mode:
    /// one call where the service allows it (a single-use transaction).
    SingleUse(&'a PartitionId, &'a TransactionMode),
}

impl<'a> CommitAs<'a> {
    /// Ending `transaction` if given, else alone.
    pub fn of(transaction: Option<&'a TransactionId>) -> CommitAs<'a> {
        transaction.map_or(CommitAs::Alone, CommitAs::In)
    }
}

/// Entities to read by key.
#[derive(Debug, Clone, Copy)]
pub struct Lookup<'a> {
    /// The keys, complete: one slot of the answer each, in their order (R-A1).
    pub keys: &'a [RawKey],
    /// How it reads.
    pub read: ReadAs<'a>,
    /// Only the properties at these paths (the service's property mask); whole entities when
    /// `None`.
    pub mask: Option<&'a [Vec<std::borrow::Cow<'static, str>>]>,
    /// Each entity's version and times are wanted: a cache, which keeps none, reads through
    /// (without, a stamp may be `Stamp::default()`).
    pub stamps: bool,
}

/// A read's answer, and the transaction it began ([`ReadAs::Begin`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Read<T> {
    /// The transaction begun, for `ReadAs::Begin`.
    pub transaction: Option<TransactionId>,
    /// The answer.
    pub answer: T,
}

impl<T> Read<T> {
    /// `answer`, read in a transaction begun before or none.
    pub fn of(answer: T) -> Read<T> {
        Read {
            transaction: None,
            answer,
        }
    }
}

/// A storage backend: the service's calls, untyped — ten methods, four of them the reads and
/// the commit, each saying how it reads or commits. What only some backends can do is a
/// capability ([`Backend::capabilities`]): Query Explain, the engine's stored forms. The
/// calls `Db` makes over these (`lookup`, `commit_changes`, `begin_with_query`, …) are methods
/// of `dyn Backend` (`backend/calls.rs`), so a wrapper or a test double implements only what
/// it changes.
pub trait Backend: Send + Sync + 'static {
    /// Reads entities by key, each with its version and times: one slot per key, in order.
    fn lookup_as<'a>(
        &'a self,
        lookup: Lookup<'a>,
    ) -> BoxFuture<'a, Result<Read<FoundStamped>, Error>>;

    /// Runs a query and returns one batch.
    fn query_as<'a>(
        &'a self,
        query: &'a QuerySpec,
        read: ReadAs<'a>,
    ) -> BoxFuture<'a, Result<Read<QueryBatch>, Error>>;

    /// Runs an aggregation over a query's rows: an integer (count, sum of integers), a double
    /// (sum with doubles, average) or null (average of nothing).
    fn aggregate_as<'a>(
        &'a self,
        query: &'a QuerySpec,
        aggregation: &'a Aggregation,
        read: ReadAs<'a>,
    ) -> BoxFuture<'a, Result<Read<Value>, Error>>;

    /// Applies all changes atomically, or none: each change carries its mutation with its
    /// condition, transforms and mask, checked once by the commit's checker; a change whose
    /// condition does not hold fails the commit with [`Error::Conflict`]. Returns each
    /// change's result (its complete key, allocated ids filled in, its new version). A commit
    /// in a transaction ends it.
    fn commit_as<'a>(
        &'a self,
        changes: Vec<Change>,
        how: CommitAs<'a>,
    ) -> BoxFuture<'a, Result<Committed, Error>>;

    /// Starts a transaction.
    fn begin_transaction<'a>(
        &'a self,
        partition: &'a PartitionId,
        mode: &'a TransactionMode,
    ) -> BoxFuture<'a, Result<TransactionId, Error>>;

    /// Abandons a transaction (ends a read-only one).
    fn rollback<'a>(&'a self, transaction: &'a TransactionId) -> BoxFuture<'a, Result<(), Error>>;

    /// Completes incomplete keys with scattered, never-used ids (R-K1).
    fn allocate_ids<'a>(&'a self, keys: Vec<RawKey>) -> BoxFuture<'a, Result<Vec<RawKey>, Error>>;

    /// Marks the ids of complete keys as used, so they are never allocated (R-K3).
    fn reserve_ids<'a>(&'a self, keys: Vec<RawKey>) -> BoxFuture<'a, Result<(), Error>>;

    /// Declares an entity kind's composite indexes (`#[entity(index(...))]`, R-I2), before
    /// its first query. The embedded engine builds them (and its strict index mode accepts
    /// the queries they serve); the service's indexes come from `index.yaml`, so the default
    /// does nothing. A wrapper around another backend forwards it.
    fn declare<'a>(&'a self, schema: &'static Schema) -> BoxFuture<'a, Result<(), Error>> {
        let _ = schema;
        Box::pin(std::future::ready(Ok(())))
    }

    /// What this backend can do besides the service's calls, and what names its data in a
    /// shared cache. None by default; a wrapper forwards its inner backend's.
    fn capabilities(&self) -> Capabilities<'_> {
        Capabilities::default()
    }
}

/// A backend around another (a cache, a test double): it implements what it changes, and
/// every other call goes to the backend it wraps, [`Wrapper::inner`]. Every `Wrapper` is a
/// [`Backend`]; each method here is the `Backend` method of the same name.
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use datastore_entity::backend::embedded::Embedded;
/// use datastore_entity::backend::{Backend, BoxFuture, Change, CommitAs, Committed, Wrapper};
/// use datastore_entity::Error;
///
/// /// Counts commits; everything else is the engine's.
/// struct Counted {
///     engine: Embedded,
///     commits: AtomicUsize,
/// }
///
/// impl Wrapper for Counted {
///     fn inner(&self) -> &dyn Backend {
///         &self.engine
///     }
///
///     fn commit_as<'a>(
///         &'a self,
///         changes: Vec<Change>,
///         how: CommitAs<'a>,
///     ) -> BoxFuture<'a, Result<Committed, Error>> {
///         self.commits.fetch_add(1, Ordering::Relaxed);
///         self.engine.commit_as(changes, how)
///     }
/// }
///
/// let counted = Counted { engine: Embedded::in_memory(), commits: AtomicUsize::new(0) };
/// let backend: &dyn Backend = &counted;
/// assert!(backend.capabilities().explain.is_some(), "the engine's Explain, forwarded");
/// ```
pub trait Wrapper: Send + Sync + 'static {
    /// The backend wrapped: every call this wrapper does not implement goes there.
    fn inner(&self) -> &dyn Backend;

    /// [`Backend::lookup_as`].
    fn lookup_as<'a>(
        &'a self,
        lookup: Lookup<'a>,
    ) -> BoxFuture<'a, Result<Read<FoundStamped>, Error>> {
        self.inner().lookup_as(lookup)
    }

    /// [`Backend::query_as`].
    fn query_as<'a>(
        &'a self,
        query: &'a QuerySpec,
        read: ReadAs<'a>,
    ) -> BoxFuture<'a, Result<Read<QueryBatch>, Error>> {
        self.inner().query_as(query, read)
    }

    /// [`Backend::aggregate_as`].
    fn aggregate_as<'a>(
        &'a self,
        query: &'a QuerySpec,
        aggregation: &'a Aggregation,
        read: ReadAs<'a>,
    ) -> BoxFuture<'a, Result<Read<Value>, Error>> {
        self.inner().aggregate_as(query, aggregation, read)
    }

    /// [`Backend::commit_as`].
    fn commit_as<'a>(
        &'a self,
        changes: Vec<Change>,
        how: CommitAs<'a>,
    ) -> BoxFuture<'a, Result<Committed, Error>> {
        self.inner().commit_as(changes, how)
    }

    /// [`Backend::begin_transaction`].
    fn begin_transaction<'a>(
        &'a self,
        partition: &'a PartitionId,
        mode: &'a TransactionMode,
    ) -> BoxFuture<'a, Result<TransactionId, Error>> {
        self.inner().begin_transaction(partition, mode)
    }

    /// [`Backend::rollback`].
    fn rollback<'a>(&'a self, transaction: &'a TransactionId) -> BoxFuture<'a, Result<(), Error>> {
        self.inner().rollback(transaction)
    }

    /// [`Backend::allocate_ids`].
    fn allocate_ids<'a>(&'a self, keys: Vec<RawKey>) -> BoxFuture<'a, Result<Vec<RawKey>, Error>> {
        self.inner().allocate_ids(keys)
    }

    /// [`Backend::reserve_ids`].
    fn reserve_ids<'a>(&'a self, keys: Vec<RawKey>) -> BoxFuture<'a, Result<(), Error>> {
        self.inner().reserve_ids(keys)
    }

    /// [`Backend::declare`].
    fn declare<'a>(&'a self, schema: &'static Schema) -> BoxFuture<'a, Result<(), Error>> {
        self.inner().declare(schema)
    }

    /// [`Backend::capabilities`]: the wrapped backend's, unless the wrapper changes them.
    fn capabilities(&self) -> Capabilities<'_> {
        self.inner().capabilities()
    }
}

impl<W: Wrapper> Backend for W {
    fn lookup_as<'a>(
        &'a self,
        lookup: Lookup<'a>,
    ) -> BoxFuture<'a, Result<Read<FoundStamped>, Error>> {
        Wrapper::lookup_as(self, lookup)
    }

    fn query_as<'a>(
        &'a self,
        query: &'a QuerySpec,
        read: ReadAs<'a>,
    ) -> BoxFuture<'a, Result<Read<QueryBatch>, Error>> {
        Wrapper::query_as(self, query, read)
    }

    fn aggregate_as<'a>(
        &'a self,
        query: &'a QuerySpec,
        aggregation: &'a Aggregation,
        read: ReadAs<'a>,
    ) -> BoxFuture<'a, Result<Read<Value>, Error>> {
        Wrapper::aggregate_as(self, query, aggregation, read)
    }

    fn commit_as<'a>(
        &'a self,
        changes: Vec<Change>,
        how: CommitAs<'a>,
    ) -> BoxFuture<'a, Result<Committed, Error>> {
        Wrapper::commit_as(self, changes, how)
    }

    fn begin_transaction<'a>(
        &'a self,
        partition: &'a PartitionId,
        mode: &'a TransactionMode,
    ) -> BoxFuture<'a, Result<TransactionId, Error>> {
        Wrapper::begin_transaction(self, partition, mode)
    }

    fn rollback<'a>(&'a self, transaction: &'a TransactionId) -> BoxFuture<'a, Result<(), Error>> {
        Wrapper::rollback(self, transaction)
    }

    fn allocate_ids<'a>(&'a self, keys: Vec<RawKey>) -> BoxFuture<'a, Result<Vec<RawKey>, Error>> {
        Wrapper::allocate_ids(self, keys)
    }

    fn reserve_ids<'a>(&'a self, keys: Vec<RawKey>) -> BoxFuture<'a, Result<(), Error>> {
        Wrapper::reserve_ids(self, keys)
    }

    fn declare<'a>(&'a self, schema: &'static Schema) -> BoxFuture<'a, Result<(), Error>> {
        Wrapper::declare(self, schema)
    }

    fn capabilities(&self) -> Capabilities<'_> {
        Wrapper::capabilities(self)
    }
}

/// What a backend can do besides the service's calls ([`Backend::capabilities`]).
#[derive(Default)]
pub struct Capabilities<'a> {
    /// Query Explain: how queries and aggregations are answered.
    pub explain: Option<&'a dyn Explain>,
    /// Reads handed over as stored, without a map each (the embedded engine's). Not a public
    /// API.
    #[doc(hidden)]
    pub stored_reads: Option<&'a dyn StoredReads>,
    /// What names this backend's data in a cache shared with other backends, where its keys'
    /// project does not: the embedded engine's keys name no project, so each engine names its
    /// own (`embedded-` and 32 hex digits; a file keeps its across opens). `None`: the keys'
    /// project names it.
    pub identity: Option<&'a str>,
}

/// Query Explain: how a query or an aggregation is answered, and, analyzed, its answer and
/// what it read.
pub trait Explain: Send + Sync {
    /// How `query` is answered, and with `analyze` its answer (one batch, read in
    /// `transaction` if given) and what it read.
    fn explain<'a>(
        &'a self,
        query: &'a QuerySpec,
        analyze: bool,
        transaction: Option<&'a TransactionId>,
    ) -> BoxFuture<'a, Result<(Option<QueryBatch>, Explanation), Error>>;

    /// How an aggregation over a query's rows is answered, and with `analyze` its value (read
    /// in `transaction` if given) and what it read.
    fn explain_aggregation<'a>(
        &'a self,
        query: &'a QuerySpec,
        aggregation: &'a Aggregation,
        analyze: bool,
        transaction: Option<&'a TransactionId>,
    ) -> BoxFuture<'a, Result<(Option<Value>, Explanation), Error>>;
}

/// Reads outside any transaction that hand each entity over as it lies: the embedded engine
/// gives its stored bytes, which the derive reads in one pass without building a map. Not a
/// public API.
#[doc(hidden)]
pub trait StoredReads: Send + Sync {
    /// Looks `keys` up and hands each entity found to `read`, with its key's position.
    fn lookup_each<'a>(
        &'a self,
        keys: &'a [RawKey],
        read: &'a mut ReadFound<'_>,
    ) -> BoxFuture<'a, Result<(), Error>>;

    /// Runs `query` and hands each result to `read`, with its key; returns where the batch
    /// ends.
    fn run_query_each<'a>(
        &'a self,
        query: &'a QuerySpec,
        read: &'a mut ReadResult<'_>,
    ) -> BoxFuture<'a, Result<BatchEnd, Error>>;
}

/// The transaction `id` begun for a read, with the read's answer; if the read failed, the
/// transaction is rolled back (best effort: nobody else knows its handle).
pub(crate) async fn after_begin<B: Backend + ?Sized, T>(
    backend: &B,
    id: TransactionId,
    read: Result<T, Error>,
) -> Result<(TransactionId, T), Error> {
    match read {
        Ok(value) => Ok((id, value)),
        Err(error) => {
            if let Err(rollback) = backend.rollback(&id).await {
                tracing::debug!(%rollback, "rollback of a transaction whose first read failed");
            }
            Err(error)
        }
    }
}

/// Hands each result of `batch` to `read`, as a map, and returns where the batch ends.
pub(crate) fn hand_over(batch: QueryBatch, read: &mut ReadResult<'_>) -> Result<BatchEnd, Error> {
    for result in batch.results {
        read(&result.key, FoundEntity::Map(result.properties))?;
    }
    Ok(BatchEnd {
        end_cursor: batch.end_cursor,
        more_results: batch.more_results,
    })
}
