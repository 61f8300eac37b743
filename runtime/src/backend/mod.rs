//! The storage backends, behind one small trait that mirrors the service's own calls
//! (lookup, commit, run query, begin/rollback transaction, allocate/reserve ids).
//!
//! Everything typed (`Db`, queries, transactions) is built once above this trait, so the
//! embedded engine and the cloud client share all of it.

use std::future::Future;
use std::pin::Pin;

use crate::error::Error;
use crate::model::key::{PartitionId, RawKey};
use crate::model::scalar::Timestamp;
use crate::model::schema::Schema;
use crate::model::value::{PropertyMap, Value};
use crate::query::explain::Explanation;
/// The query vocabulary, where the backends' callers have always found it.
pub use crate::query::spec::{
    Aggregation, Distance, FilterNode, FindNearest, PropertyFilter, PropertyOrder, QueryBatch,
    QueryResult, QuerySpec, ResultShape, Stamp,
};
/// The write vocabulary, where the backends' callers have always found it.
pub use crate::query::write::{
    Change, ChangeResult, Committed, Condition, Mask, Mutation, OnConflict, PropertyTransform,
    TransformKind,
};

#[cfg(feature = "cloud")]
pub mod cloud;
pub mod embedded;
pub(crate) mod retry;
#[cfg(feature = "cloud")]
pub mod serve;

/// A boxed future, so the trait can be used as `dyn Backend`.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What a lookup finds: one slot per key, in the order of the keys.
pub type Found = Vec<Option<PropertyMap>>;

/// What a lookup finds with each entity's version and times: one slot per key, in order.
pub type FoundStamped = Vec<Option<(PropertyMap, Stamp)>>;

/// An entity a lookup found, as [`Backend::lookup_each`] hands it over: its properties in the
/// embedded engine's stored form (read straight into a typed entity, see
/// `Entity::from_stored`), or as a map. Not a public API.
#[doc(hidden)]
pub enum FoundEntity<'a> {
    /// The stored form's bytes.
    Stored(&'a [u8]),
    /// The properties.
    Map(PropertyMap),
}

/// What [`Backend::lookup_each`] hands each entity found to, with its key's position.
#[doc(hidden)]
pub type ReadFound<'r> = dyn FnMut(usize, FoundEntity<'_>) -> Result<(), Error> + Send + 'r;

/// What [`Backend::run_query_each`] hands each result to: its key, and its entity as found.
#[doc(hidden)]
pub type ReadResult<'r> = dyn FnMut(&RawKey, FoundEntity<'_>) -> Result<(), Error> + Send + 'r;

/// Where a batch that [`Backend::run_query_each`] handed over ends. Not a public API.
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

/// A storage backend: the service's calls, untyped.
pub trait Backend: Send + Sync + 'static {
    /// Reads entities by key, each with its version and times: one slot per key, in the order
    /// of `keys` (R-A1).
    fn lookup_stamped<'a>(
        &'a self,
        keys: &'a [RawKey],
        transaction: Option<&'a TransactionId>,
    ) -> BoxFuture<'a, Result<FoundStamped, Error>>;

    /// Reads only the properties at `paths` of entities by key (the service's property mask),
    /// outside any transaction: one slot per key, in the order of `keys`. The default looks
    /// them up whole and keeps what the mask names; a backend that sends the mask overrides it.
    fn lookup_masked<'a>(
        &'a self,
        keys: &'a [RawKey],
        paths: &'a [Vec<std::borrow::Cow<'static, str>>],
    ) -> BoxFuture<'a, Result<FoundStamped, Error>> {
        Box::pin(async move {
            let found = self.lookup_stamped(keys, None).await?;
            Ok(found
                .into_iter()
                .map(|f| f.map(|(p, stamp)| (p.selected(paths), stamp)))
                .collect())
        })
    }

    /// Reads entities by key: one slot per key, in the order of `keys` (R-A1).
    fn lookup<'a>(
        &'a self,
        keys: &'a [RawKey],
        transaction: Option<&'a TransactionId>,
    ) -> BoxFuture<'a, Result<Vec<Option<PropertyMap>>, Error>> {
        Box::pin(async move {
            let found = self.lookup_stamped(keys, transaction).await?;
            Ok(found.into_iter().map(|f| f.map(|(p, _)| p)).collect())
        })
    }

    /// Looks `keys` up outside any transaction and hands each entity found to `read`, with
    /// its key's position, as it lies: the embedded engine gives its stored bytes, which the
    /// derive reads in one pass without building a map. The default looks up and gives the
    /// maps. Not a public API.
    #[doc(hidden)]
    fn lookup_each<'a>(
        &'a self,
        keys: &'a [RawKey],
        read: &'a mut ReadFound<'_>,
    ) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move {
            let found = self.lookup(keys, None).await?;
            for (i, properties) in found.into_iter().enumerate() {
                if let Some(properties) = properties {
                    read(i, FoundEntity::Map(properties))?;
                }
            }
            Ok(())
        })
    }

    /// Applies all changes atomically, or none: a change whose condition does not hold fails
    /// the commit with [`Error::Conflict`]. Returns each change's result (its complete key,
    /// allocated ids filled in, and the entity's new version). With a transaction, also ends
    /// it.
    fn commit_changes<'a>(
        &'a self,
        changes: Vec<Change>,
        transaction: Option<&'a TransactionId>,
    ) -> BoxFuture<'a, Result<Committed, Error>>;

    /// Applies all mutations atomically, or none. Returns each mutation's complete key
    /// (allocated ids filled in). With a transaction, also ends it.
    fn commit<'a>(
        &'a self,
        mutations: Vec<Mutation>,
        transaction: Option<&'a TransactionId>,
    ) -> BoxFuture<'a, Result<Vec<RawKey>, Error>> {
        let changes = mutations.into_iter().map(Change::from).collect();
        Box::pin(async move {
            let committed = self.commit_changes(changes, transaction).await?;
            Ok(committed.results.into_iter().map(|r| r.key).collect())
        })
    }

    /// Runs a query and returns one batch.
    fn run_query<'a>(
        &'a self,
        query: &'a QuerySpec,
        transaction: Option<&'a TransactionId>,
    ) -> BoxFuture<'a, Result<QueryBatch, Error>>;

    /// Runs a query outside any transaction and hands each result to `read`, with its key, as
    /// it lies: the embedded engine gives a whole entity's stored bytes, which the derive reads
    /// in one pass, and no cursor per result. Returns where the batch ends. The default runs
    /// the query and gives the maps. Not a public API.
    #[doc(hidden)]
    fn run_query_each<'a>(
        &'a self,
        query: &'a QuerySpec,
        read: &'a mut ReadResult<'_>,
    ) -> BoxFuture<'a, Result<BatchEnd, Error>> {
        Box::pin(async move {
            let batch = self.run_query(query, None).await?;
            hand_over(batch, read)
        })
    }

    /// Runs an aggregation over a query's rows: an integer (count, sum of integers), a double
    /// (sum with doubles, average) or null (average of nothing).
    fn run_aggregation<'a>(
        &'a self,
        query: &'a QuerySpec,
        aggregation: &'a Aggregation,
        transaction: Option<&'a TransactionId>,
    ) -> BoxFuture<'a, Result<Value, Error>>;

    /// Starts a transaction.
    fn begin_transaction<'a>(
        &'a self,
        partition: &'a PartitionId,
        mode: &'a TransactionMode,
    ) -> BoxFuture<'a, Result<TransactionId, Error>>;

    /// Abandons a transaction.
    fn rollback<'a>(&'a self, transaction: &'a TransactionId) -> BoxFuture<'a, Result<(), Error>>;

    /// Ends a read-only transaction whose body succeeded. The service reads a read-only
    /// transaction from one snapshot and refuses to commit it: a rollback ends it (the
    /// default). An engine that checks reads at the end instead (optimistic) reports
    /// [`Error::Aborted`] when something they saw changed meanwhile, and the body runs again.
    fn end_read_only<'a>(
        &'a self,
        transaction: &'a TransactionId,
    ) -> BoxFuture<'a, Result<(), Error>> {
        self.rollback(transaction)
    }

    /// Begins a transaction with its first lookup, and returns both: one call where the
    /// service allows it (its `new_transaction` read option), else begin, then look up (the
    /// default, right for a backend in the same process).
    fn begin_with_lookup<'a>(
        &'a self,
        keys: &'a [RawKey],
        partition: &'a PartitionId,
        mode: &'a TransactionMode,
    ) -> BoxFuture<'a, Result<(TransactionId, Found), Error>> {
        Box::pin(async move {
            let id = self.begin_transaction(partition, mode).await?;
            let found = self.lookup(keys, Some(&id)).await;
            after_begin(self, id, found).await
        })
    }

    /// Begins a transaction with its first query: see [`begin_with_lookup`](Backend::begin_with_lookup).
    fn begin_with_query<'a>(
        &'a self,
        query: &'a QuerySpec,
        mode: &'a TransactionMode,
    ) -> BoxFuture<'a, Result<(TransactionId, QueryBatch), Error>> {
        Box::pin(async move {
            let id = self.begin_transaction(&query.partition, mode).await?;
            let batch = self.run_query(query, Some(&id)).await;
            after_begin(self, id, batch).await
        })
    }

    /// Begins a transaction with its first aggregation: see
    /// [`begin_with_lookup`](Backend::begin_with_lookup).
    fn begin_with_aggregation<'a>(
        &'a self,
        query: &'a QuerySpec,
        aggregation: &'a Aggregation,
        mode: &'a TransactionMode,
    ) -> BoxFuture<'a, Result<(TransactionId, Value), Error>> {
        Box::pin(async move {
            let id = self.begin_transaction(&query.partition, mode).await?;
            let value = self.run_aggregation(query, aggregation, Some(&id)).await;
            after_begin(self, id, value).await
        })
    }

    /// Commits the changes of a read-write transaction that read nothing: one call where the
    /// service allows it (a single-use transaction), else begin, then commit (the default).
    fn begin_with_commit<'a>(
        &'a self,
        changes: Vec<Change>,
        partition: &'a PartitionId,
        mode: &'a TransactionMode,
    ) -> BoxFuture<'a, Result<Committed, Error>> {
        Box::pin(async move {
            let id = self.begin_transaction(partition, mode).await?;
            self.commit_changes(changes, Some(&id)).await
        })
    }

    /// How a query is answered (Query Explain), and with `analyze` its answer (one batch, read
    /// in `transaction` if given) and what it read. A backend that cannot tell refuses with
    /// [`Error::Unsupported`] (the default).
    fn explain<'a>(
        &'a self,
        query: &'a QuerySpec,
        analyze: bool,
        transaction: Option<&'a TransactionId>,
    ) -> BoxFuture<'a, Result<(Option<QueryBatch>, Explanation), Error>> {
        let _ = (query, analyze, transaction);
        Box::pin(std::future::ready(Err(Error::Unsupported {
            reason: "this backend cannot explain queries".to_owned(),
        })))
    }

    /// How an aggregation over a query's rows is answered, and with `analyze` its value (read
    /// in `transaction` if given) and what it read. A backend that cannot tell refuses with
    /// [`Error::Unsupported`] (the default).
    fn explain_aggregation<'a>(
        &'a self,
        query: &'a QuerySpec,
        aggregation: &'a Aggregation,
        analyze: bool,
        transaction: Option<&'a TransactionId>,
    ) -> BoxFuture<'a, Result<(Option<Value>, Explanation), Error>> {
        let _ = (query, aggregation, analyze, transaction);
        Box::pin(std::future::ready(Err(Error::Unsupported {
            reason: "this backend cannot explain aggregations".to_owned(),
        })))
    }

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

    /// What names this backend's data in a cache shared with other backends, where its keys'
    /// project does not: the embedded engine's keys name no project, so each engine names its
    /// own (`embedded-` and 32 hex digits; a file keeps its across opens). `None` (the
    /// default): the keys' project names it. A wrapper around another backend forwards it.
    fn cache_identity(&self) -> Option<String> {
        None
    }
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
