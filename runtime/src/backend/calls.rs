//! The calls `Db` (and the server, and the tests) make over a backend's ten methods: methods of
//! `dyn Backend`, so that a backend implements only the service's calls and a wrapper only
//! what it changes. And the helpers an implementation uses to begin a transaction with a read
//! or a commit where its store cannot do both in one call.

use super::{
    Aggregation, Backend, BatchEnd, BoxFuture, Change, CommitAs, Committed, Found, FoundEntity,
    FoundStamped, Lookup, Mutation, QueryBatch, QuerySpec, Read, ReadAs, ReadFound, ReadResult,
    TransactionId, TransactionMode, after_begin, hand_over,
};
use datastore_entity_core::error::Error;
use datastore_entity_core::model::key::{PartitionId, RawKey};
use datastore_entity_core::model::value::Value;
use datastore_entity_core::query::explain::Explanation;

impl<'b> dyn Backend + 'b {
    /// Reads entities by key, each with its version and times: one slot per key, in the order
    /// of `keys` (R-A1).
    pub fn lookup_stamped<'a>(
        &'a self,
        keys: &'a [RawKey],
        transaction: Option<&'a TransactionId>,
    ) -> BoxFuture<'a, Result<FoundStamped, Error>> {
        let lookup = Lookup {
            keys,
            read: ReadAs::of(transaction),
            mask: None,
            stamps: true,
        };
        Box::pin(async move { Ok(self.lookup_as(lookup).await?.answer) })
    }

    /// Reads entities by key: one slot per key, in the order of `keys` (R-A1).
    pub fn lookup<'a>(
        &'a self,
        keys: &'a [RawKey],
        transaction: Option<&'a TransactionId>,
    ) -> BoxFuture<'a, Result<Found, Error>> {
        let lookup = Lookup {
            keys,
            read: ReadAs::of(transaction),
            mask: None,
            stamps: false,
        };
        Box::pin(async move {
            let found = self.lookup_as(lookup).await?.answer;
            Ok(found.into_iter().map(|f| f.map(|(p, _)| p)).collect())
        })
    }

    /// Reads only the properties at `paths` of entities by key (the service's property mask),
    /// outside any transaction: one slot per key, in the order of `keys`.
    pub fn lookup_masked<'a>(
        &'a self,
        keys: &'a [RawKey],
        paths: &'a [Vec<std::borrow::Cow<'static, str>>],
    ) -> BoxFuture<'a, Result<FoundStamped, Error>> {
        let lookup = Lookup {
            keys,
            read: ReadAs::Latest,
            mask: Some(paths),
            stamps: true,
        };
        Box::pin(async move { Ok(self.lookup_as(lookup).await?.answer) })
    }

    /// Looks `keys` up outside any transaction and hands each entity found to `read`, with
    /// its key's position: as stored where the backend can ([`super::StoredReads`]), else as
    /// maps. Not a public API.
    #[doc(hidden)]
    pub fn lookup_each<'a>(
        &'a self,
        keys: &'a [RawKey],
        read: &'a mut ReadFound<'_>,
    ) -> BoxFuture<'a, Result<(), Error>> {
        if let Some(stored) = self.capabilities().stored_reads {
            return stored.lookup_each(keys, read);
        }
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

    /// Applies all changes atomically, or none; with a transaction, ends it.
    pub fn commit_changes<'a>(
        &'a self,
        changes: Vec<Change>,
        transaction: Option<&'a TransactionId>,
    ) -> BoxFuture<'a, Result<Committed, Error>> {
        self.commit_as(changes, CommitAs::of(transaction))
    }

    /// Applies all mutations atomically, or none. Returns each mutation's complete key
    /// (allocated ids filled in). With a transaction, also ends it.
    pub fn commit<'a>(
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

    /// Commits the changes of a read-write transaction that read nothing.
    pub fn begin_with_commit<'a>(
        &'a self,
        changes: Vec<Change>,
        partition: &'a PartitionId,
        mode: &'a TransactionMode,
    ) -> BoxFuture<'a, Result<Committed, Error>> {
        self.commit_as(changes, CommitAs::SingleUse(partition, mode))
    }

    /// Runs a query and returns one batch.
    pub fn run_query<'a>(
        &'a self,
        query: &'a QuerySpec,
        transaction: Option<&'a TransactionId>,
    ) -> BoxFuture<'a, Result<QueryBatch, Error>> {
        Box::pin(async move { Ok(self.query_as(query, ReadAs::of(transaction)).await?.answer) })
    }

    /// Runs a query outside any transaction and hands each result to `read`, with its key:
    /// as stored where the backend can, else as maps. Returns where the batch ends. Not a
    /// public API.
    #[doc(hidden)]
    pub fn run_query_each<'a>(
        &'a self,
        query: &'a QuerySpec,
        read: &'a mut ReadResult<'_>,
    ) -> BoxFuture<'a, Result<BatchEnd, Error>> {
        if let Some(stored) = self.capabilities().stored_reads {
            return stored.run_query_each(query, read);
        }
        Box::pin(async move {
            let batch = self.run_query(query, None).await?;
            hand_over(batch, read)
        })
    }

    /// Runs an aggregation over a query's rows.
    pub fn run_aggregation<'a>(
        &'a self,
        query: &'a QuerySpec,
        aggregation: &'a Aggregation,
        transaction: Option<&'a TransactionId>,
    ) -> BoxFuture<'a, Result<Value, Error>> {
        let read = ReadAs::of(transaction);
        Box::pin(async move { Ok(self.aggregate_as(query, aggregation, read).await?.answer) })
    }

    /// Begins a transaction with its first lookup, and returns both.
    pub fn begin_with_lookup<'a>(
        &'a self,
        keys: &'a [RawKey],
        partition: &'a PartitionId,
        mode: &'a TransactionMode,
    ) -> BoxFuture<'a, Result<(TransactionId, Found), Error>> {
        let lookup = Lookup {
            keys,
            read: ReadAs::Begin(partition, mode),
            mask: None,
            stamps: false,
        };
        Box::pin(async move {
            let read = self.lookup_as(lookup).await?;
            let found = read.answer.into_iter().map(|f| f.map(|(p, _)| p)).collect();
            Ok((began(read.transaction)?, found))
        })
    }

    /// Begins a transaction with its first query, and returns both.
    pub fn begin_with_query<'a>(
        &'a self,
        query: &'a QuerySpec,
        mode: &'a TransactionMode,
    ) -> BoxFuture<'a, Result<(TransactionId, QueryBatch), Error>> {
        Box::pin(async move {
            let read = self
                .query_as(query, ReadAs::Begin(&query.partition, mode))
                .await?;
            Ok((began(read.transaction)?, read.answer))
        })
    }

    /// Begins a transaction with its first aggregation, and returns both.
    pub fn begin_with_aggregation<'a>(
        &'a self,
        query: &'a QuerySpec,
        aggregation: &'a Aggregation,
        mode: &'a TransactionMode,
    ) -> BoxFuture<'a, Result<(TransactionId, Value), Error>> {
        Box::pin(async move {
            let read = self
                .aggregate_as(query, aggregation, ReadAs::Begin(&query.partition, mode))
                .await?;
            Ok((began(read.transaction)?, read.answer))
        })
    }

    /// How a query is answered (Query Explain); [`Error::Unsupported`] where the backend
    /// cannot tell.
    pub fn explain<'a>(
        &'a self,
        query: &'a QuerySpec,
        analyze: bool,
        transaction: Option<&'a TransactionId>,
    ) -> BoxFuture<'a, Result<(Option<QueryBatch>, Explanation), Error>> {
        match self.capabilities().explain {
            Some(explain) => explain.explain(query, analyze, transaction),
            None => Box::pin(std::future::ready(Err(cannot_explain()))),
        }
    }

    /// How an aggregation is answered (Query Explain); [`Error::Unsupported`] where the
    /// backend cannot tell.
    pub fn explain_aggregation<'a>(
        &'a self,
        query: &'a QuerySpec,
        aggregation: &'a Aggregation,
        analyze: bool,
        transaction: Option<&'a TransactionId>,
    ) -> BoxFuture<'a, Result<(Option<Value>, Explanation), Error>> {
        match self.capabilities().explain {
            Some(explain) => explain.explain_aggregation(query, aggregation, analyze, transaction),
            None => Box::pin(std::future::ready(Err(cannot_explain()))),
        }
    }

    /// What names this backend's data in a shared cache ([`super::Capabilities::identity`]).
    pub fn cache_identity(&self) -> Option<String> {
        self.capabilities().identity.map(str::to_owned)
    }
}

fn cannot_explain() -> Error {
    Error::Unsupported {
        reason: "this backend cannot explain queries".to_owned(),
    }
}

/// The transaction a read with [`ReadAs::Begin`] began.
fn began(transaction: Option<TransactionId>) -> Result<TransactionId, Error> {
    transaction.ok_or(Error::Internal {
        invariant: "a read that begins a transaction returns it",
    })
}

/// Runs `read` as `how` says, for a backend that begins a transaction and reads in two calls:
/// in the transaction given, or in one begun first (rolled back if the read fails, returned
/// with the answer if it succeeds), or outside any.
pub async fn begin_then_read<B: Backend + ?Sized, T>(
    backend: &B,
    how: ReadAs<'_>,
    read: impl AsyncFnOnce(Option<&TransactionId>) -> Result<T, Error>,
) -> Result<Read<T>, Error> {
    match how {
        ReadAs::Latest => Ok(Read::of(read(None).await?)),
        ReadAs::In(transaction) => Ok(Read::of(read(Some(transaction)).await?)),
        ReadAs::Begin(partition, mode) => {
            let id = backend.begin_transaction(partition, mode).await?;
            let answer = read(Some(&id)).await;
            let (id, answer) = after_begin(backend, id, answer).await?;
            Ok(Read {
                transaction: Some(id),
                answer,
            })
        }
    }
}

/// Commits as `how` says, for a backend that begins a transaction and commits in two calls:
/// a single-use transaction is begun first, then committed.
pub async fn begin_then_commit<B: Backend + ?Sized>(
    backend: &B,
    changes: Vec<Change>,
    how: CommitAs<'_>,
    commit: impl AsyncFnOnce(Vec<Change>, Option<&TransactionId>) -> Result<Committed, Error>,
) -> Result<Committed, Error> {
    match how {
        CommitAs::Alone => commit(changes, None).await,
        CommitAs::In(transaction) => commit(changes, Some(transaction)).await,
        CommitAs::SingleUse(partition, mode) => {
            let id = backend.begin_transaction(partition, mode).await?;
            commit(changes, Some(&id)).await
        }
    }
}
