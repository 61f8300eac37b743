//! `Embedded` as a backend: the service's calls, Query Explain and the stored reads, each
//! answered under the engine's lock by its state (`mod.rs`).

use super::Embedded;
use super::exec::Answered;
use crate::backend::calls::{begin_then_commit, begin_then_read};
use crate::backend::{
    Backend, BatchEnd, BoxFuture, Capabilities, Change, CommitAs, Committed, Explain, FoundEntity,
    FoundStamped, Lookup, Read, ReadAs, ReadFound, ReadResult, StoredReads, TransactionId,
    TransactionMode, hand_over,
};
use datastore_entity_core::error::Error;
use datastore_entity_core::model::key::{PartitionId, RawKey};
use datastore_entity_core::model::schema::Schema;
use datastore_entity_core::model::value::Value;
use datastore_entity_core::query::explain::Explanation;
use datastore_entity_core::query::spec::{Aggregation, QueryBatch, QuerySpec};
fn ready<'a, T: Send + 'a>(value: T) -> BoxFuture<'a, T> {
    Box::pin(std::future::ready(value))
}

impl Backend for Embedded {
    fn lookup_as<'a>(
        &'a self,
        lookup: Lookup<'a>,
    ) -> BoxFuture<'a, Result<Read<FoundStamped>, Error>> {
        let Lookup {
            keys, read, mask, ..
        } = lookup;
        Box::pin(async move {
            let mut found = begin_then_read(self, read, async |t| {
                if let Some(transaction) = t {
                    self.lock(keys, transaction).await?;
                }
                self.state().lookup(keys, t)
            })
            .await?;
            if let Some(paths) = mask {
                for slot in found.answer.iter_mut().flatten() {
                    slot.0 = std::mem::take(&mut slot.0).selected(paths);
                }
            }
            Ok(found)
        })
    }

    fn query_as<'a>(
        &'a self,
        query: &'a QuerySpec,
        read: ReadAs<'a>,
    ) -> BoxFuture<'a, Result<Read<QueryBatch>, Error>> {
        if let ReadAs::Latest = read {
            match self.scan_in_slices(query) {
                Ok(None) => {}
                Ok(Some(batch)) => return ready(Ok(Read::of(batch))),
                Err(e) => return ready(Err(e)),
            }
        }
        Box::pin(begin_then_read(self, read, async |t| {
            self.state().run_query(query, t)
        }))
    }

    fn aggregate_as<'a>(
        &'a self,
        query: &'a QuerySpec,
        aggregation: &'a Aggregation,
        read: ReadAs<'a>,
    ) -> BoxFuture<'a, Result<Read<Value>, Error>> {
        if let ReadAs::Latest = read {
            match self.aggregate_in_slices(query, aggregation) {
                Ok(None) => {}
                Ok(Some(value)) => return ready(Ok(Read::of(value))),
                Err(e) => return ready(Err(e)),
            }
        }
        Box::pin(begin_then_read(self, read, async |t| {
            self.state().aggregate(query, aggregation, t, None)
        }))
    }

    fn commit_as<'a>(
        &'a self,
        changes: Vec<Change>,
        how: CommitAs<'a>,
    ) -> BoxFuture<'a, Result<Committed, Error>> {
        Box::pin(begin_then_commit(self, changes, how, async |changes, t| {
            // A received entity is read (its form on the wire decoded, once) before the
            // engine's lock is taken, not by the checks under it: the lock is held the less.
            for change in &changes {
                if let Some(properties) = change.mutation.properties() {
                    properties.view();
                }
            }
            let committed = self.state().commit(changes, t);
            // A transaction ended, or one aborted as its snapshot outgrew past versions'
            // memory: its locks are free.
            self.released.notify_waiters();
            committed
        }))
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
        let previous = match mode {
            TransactionMode::ReadWrite { previous } => previous.as_ref(),
            TransactionMode::ReadOnly { .. } => None,
        };
        let read_only = matches!(mode, TransactionMode::ReadOnly { .. });
        let handle = state.transactions.begin(snapshot, read_only, previous);
        if state.expire() {
            self.released.notify_waiters();
        }
        ready(Ok(handle))
    }

    fn rollback<'a>(&'a self, transaction: &'a TransactionId) -> BoxFuture<'a, Result<(), Error>> {
        // Rolling back a transaction that already ended is not an error (as in Firestore in
        // Datastore mode; the legacy emulator refused it).
        let result = {
            let mut state = self.state();
            super::transactions::number(transaction).map(|id| state.end_transaction(id).map(drop))
        };
        self.released.notify_waiters();
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

    fn capabilities(&self) -> Capabilities<'_> {
        Capabilities {
            explain: Some(self),
            stored_reads: Some(self),
            identity: Some(&self.identity),
        }
    }
}

impl Explain for Embedded {
    fn explain<'a>(
        &'a self,
        query: &'a QuerySpec,
        analyze: bool,
        transaction: Option<&'a TransactionId>,
    ) -> BoxFuture<'a, Result<(Option<QueryBatch>, Explanation), Error>> {
        ready(self.state().explain(query, analyze, transaction))
    }

    fn explain_aggregation<'a>(
        &'a self,
        query: &'a QuerySpec,
        aggregation: &'a Aggregation,
        analyze: bool,
        transaction: Option<&'a TransactionId>,
    ) -> BoxFuture<'a, Result<(Option<Value>, Explanation), Error>> {
        ready(
            self.state()
                .explain_aggregation(query, aggregation, analyze, transaction),
        )
    }
}

impl StoredReads for Embedded {
    fn lookup_each<'a>(
        &'a self,
        keys: &'a [RawKey],
        read: &'a mut ReadFound<'_>,
    ) -> BoxFuture<'a, Result<(), Error>> {
        // The stored forms are copied out under the lock into one buffer, and read after it
        // (no caller's code runs under the lock).
        let found = self.state().lookup_stored(keys);
        Box::pin(ready(found.and_then(|(bytes, found)| {
            found
                .into_iter()
                .try_for_each(|(i, range)| read(i, FoundEntity::Stored(&bytes[range])))
        })))
    }

    fn run_query_each<'a>(
        &'a self,
        query: &'a QuerySpec,
        read: &'a mut ReadResult<'_>,
    ) -> BoxFuture<'a, Result<BatchEnd, Error>> {
        // As `lookup_each`: the stored forms copied out under the lock, read after it.
        let answered = match self.scan_in_slices(query) {
            Ok(None) => self.state().run_query_stored(query),
            Ok(Some(batch)) => Ok(Answered::Batch(batch)),
            Err(e) => Err(e),
        };
        Box::pin(ready(answered.and_then(|answered| match answered {
            Answered::Batch(batch) => hand_over(batch, read),
            Answered::Stored(stored) => {
                stored.hand_over(read)?;
                Ok(BatchEnd {
                    end_cursor: stored.end_cursor,
                    more_results: stored.more_results,
                })
            }
        })))
    }
}
