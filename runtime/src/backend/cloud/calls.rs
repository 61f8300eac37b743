//! `Cloud` as a backend: the service's calls and Query Explain, each one or two RPCs.

use std::sync::atomic::Ordering;
use std::time::Duration;

use gcloud_sdk::google::datastore::v1 as pb;
use gcloud_sdk::prost_types;

use super::call::{Client, Sending};
use super::{
    Cloud, MAX_ID_KEYS, Reading, about_keys, about_nothing, about_query, began, convert,
    query_error, transaction_options,
};
use crate::backend::calls::begin_then_read;
use crate::backend::{
    Backend, BoxFuture, Capabilities, Change, CommitAs, Committed, Explain, FoundStamped, Lookup,
    Read, ReadAs, TransactionId, TransactionMode,
};
use datastore_entity_core::error::Error;
use datastore_entity_core::model::key::{PartitionId, RawKey};
use datastore_entity_core::model::schema::Schema;
use datastore_entity_core::model::value::Value;
use datastore_entity_core::query::explain::{ExecutionStats, Explanation};
use datastore_entity_core::query::spec::{Aggregation, QueryBatch, QuerySpec};

impl Cloud {
    /// Query Explain: the service's plan of `spec` and, with `analyze`, one batch of it and its
    /// execution statistics.
    async fn explain_query(
        &self,
        spec: &QuerySpec,
        analyze: bool,
        transaction: Option<&TransactionId>,
    ) -> Result<(Option<QueryBatch>, Explanation), Error> {
        use pb::query_result_batch::MoreResultsType as More;
        let read = Reading::of(transaction);
        let request = self.run_query_request(spec, spec.limit, read, Some(analyze));
        let response = call!(self, run_query, about_query("run_query", spec), request)
            .map_err(|e| query_error(&spec.kind, spec.start_cursor.is_some(), e))?;
        let explained = response.explain_metrics.is_some();
        let metrics = response.explain_metrics.unwrap_or_default();
        let indexes_used = metrics
            .plan_summary
            .map(|plan| plan.indexes_used)
            .unwrap_or_default()
            .iter()
            .map(|index| {
                let text = |name: &str| match index.fields.get(name).and_then(|v| v.kind.as_ref()) {
                    Some(prost_types::value::Kind::StringValue(s)) => s.clone(),
                    _ => String::new(),
                };
                format!("{} {}", spec.kind, text("properties"))
                    .trim()
                    .to_owned()
            })
            .collect();
        let plan = match explained {
            true => "the service's plan",
            // Google's emulators answer the query and ignore `explain_options`.
            false => "none: the service did not explain the query (Google's emulators do not)",
        };
        let mut explanation = Explanation {
            plan: plan.to_owned(),
            indexes_used,
            stats: None,
        };
        if !analyze {
            return Ok((None, explanation));
        }
        let batch = response.batch.unwrap_or_default();
        let results = convert::results(&self.partitions, batch.entity_results)?;
        let more = More::try_from(batch.more_results).unwrap_or(More::NoMoreResults);
        if let Some(stats) = metrics.execution_stats {
            let debug = |name: &str| {
                stats
                    .debug_stats
                    .as_ref()
                    .and_then(|d| d.fields.get(name))
                    .and_then(|v| match v.kind.as_ref() {
                        Some(prost_types::value::Kind::StringValue(s)) => s.parse().ok(),
                        Some(prost_types::value::Kind::NumberValue(n)) => Some(*n as u64),
                        _ => None,
                    })
                    .unwrap_or(0)
            };
            explanation.stats = Some(ExecutionStats {
                results_returned: stats.results_returned.max(0) as u64,
                index_entries_scanned: debug("index_entries_scanned"),
                entities_scanned: debug("documents_scanned"),
                read_operations: Some(stats.read_operations.max(0) as u64),
                execution_duration: stats
                    .execution_duration
                    .and_then(|d| Duration::try_from(d).ok()),
            });
        }
        let batch = QueryBatch {
            results,
            end_cursor: batch.end_cursor,
            more_results: more != More::NoMoreResults,
        };
        Ok((Some(batch), explanation))
    }
}

impl Backend for Cloud {
    fn lookup_as<'a>(
        &'a self,
        lookup: Lookup<'a>,
    ) -> BoxFuture<'a, Result<Read<FoundStamped>, Error>> {
        let Lookup {
            keys, read, mask, ..
        } = lookup;
        Box::pin(async move {
            let (partition, mode) = match read {
                ReadAs::Latest => {
                    let (_, found) = self.lookup_paths(keys, Reading::Outside, mask).await?;
                    return Ok(Read::of(found));
                }
                ReadAs::In(t) => {
                    let (_, found) = self.lookup_paths(keys, Reading::In(t), mask).await?;
                    return Ok(Read::of(found));
                }
                ReadAs::Begin(partition, mode) => (partition, mode),
            };
            if !self.begin_with_reads {
                return begin_then_read(self, read, async |t| {
                    Ok(self.lookup_paths(keys, Reading::of(t), mask).await?.1)
                })
                .await;
            }
            let (id, found) = match self.lookup_paths(keys, Reading::Begin(mode), mask).await? {
                (Some(id), found) => (began(Some(id))?, found),
                // No key, no call: begin on its own.
                (None, found) => (self.begin_transaction(partition, mode).await?, found),
            };
            Ok(Read {
                transaction: Some(id),
                answer: found,
            })
        })
    }

    fn query_as<'a>(
        &'a self,
        query: &'a QuerySpec,
        read: ReadAs<'a>,
    ) -> BoxFuture<'a, Result<Read<QueryBatch>, Error>> {
        Box::pin(async move {
            let mode = match read {
                ReadAs::Latest => {
                    return Ok(Read::of(self.query(query, Reading::Outside).await?.1));
                }
                ReadAs::In(t) => return Ok(Read::of(self.query(query, Reading::In(t)).await?.1)),
                ReadAs::Begin(_, mode) => mode,
            };
            if !self.begin_with_reads {
                return begin_then_read(self, read, async |t| {
                    Ok(self.query(query, Reading::of(t)).await?.1)
                })
                .await;
            }
            let (begun, batch) = self.query(query, Reading::Begin(mode)).await?;
            Ok(Read {
                transaction: Some(began(begun)?),
                answer: batch,
            })
        })
    }

    fn aggregate_as<'a>(
        &'a self,
        query: &'a QuerySpec,
        aggregation: &'a Aggregation,
        read: ReadAs<'a>,
    ) -> BoxFuture<'a, Result<Read<Value>, Error>> {
        Box::pin(async move {
            let mode = match read {
                ReadAs::Latest => {
                    let (_, value) = self.aggregate(query, aggregation, Reading::Outside).await?;
                    return Ok(Read::of(value));
                }
                ReadAs::In(t) => {
                    let (_, value) = self.aggregate(query, aggregation, Reading::In(t)).await?;
                    return Ok(Read::of(value));
                }
                ReadAs::Begin(_, mode) => mode,
            };
            if self.begin_with_reads && self.aggregations_begin.load(Ordering::Relaxed) {
                match self
                    .aggregate(query, aggregation, Reading::Begin(mode))
                    .await?
                {
                    (Some(id), value) if !id.0.is_empty() => {
                        return Ok(Read {
                            transaction: Some(id),
                            answer: value,
                        });
                    }
                    // Answered outside any transaction: from now on, begin first.
                    _ => self.aggregations_begin.store(false, Ordering::Relaxed),
                }
            }
            begin_then_read(self, read, async |t| {
                Ok(self.aggregate(query, aggregation, Reading::of(t)).await?.1)
            })
            .await
        })
    }

    fn commit_as<'a>(
        &'a self,
        changes: Vec<Change>,
        how: CommitAs<'a>,
    ) -> BoxFuture<'a, Result<Committed, Error>> {
        Box::pin(match how {
            CommitAs::Alone => self.commit_mutations(changes, None, None),
            CommitAs::In(t) => self.commit_mutations(changes, Some(t), None),
            // A single-use transaction: one call.
            CommitAs::SingleUse(_, mode) => self.commit_mutations(changes, None, Some(mode)),
        })
    }

    fn begin_transaction<'a>(
        &'a self,
        _partition: &'a PartitionId,
        mode: &'a TransactionMode,
    ) -> BoxFuture<'a, Result<TransactionId, Error>> {
        Box::pin(async move {
            let response = call!(
                self,
                begin_transaction,
                about_nothing("begin_transaction"),
                pb::BeginTransactionRequest {
                    project_id: self.partitions.project_id.clone(),
                    database_id: self.partitions.database_id.clone(),
                    transaction_options: Some(transaction_options(mode)),
                    ..pb::BeginTransactionRequest::default()
                }
            )?;
            Ok(TransactionId(response.transaction))
        })
    }

    fn rollback<'a>(&'a self, transaction: &'a TransactionId) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move {
            call!(
                self,
                rollback,
                about_nothing("rollback"),
                pb::RollbackRequest {
                    project_id: self.partitions.project_id.clone(),
                    database_id: self.partitions.database_id.clone(),
                    transaction: transaction.0.clone(),
                    ..pb::RollbackRequest::default()
                }
            )
            .map(drop)
        })
    }

    fn allocate_ids<'a>(&'a self, keys: Vec<RawKey>) -> BoxFuture<'a, Result<Vec<RawKey>, Error>> {
        Box::pin(async move {
            let mut allocated = Vec::with_capacity(keys.len());
            for chunk in keys.chunks(MAX_ID_KEYS) {
                let response = call!(
                    self,
                    allocate_ids,
                    about_keys("allocate_ids", Sending::Idempotent, chunk),
                    pb::AllocateIdsRequest {
                        project_id: self.partitions.project_id.clone(),
                        database_id: self.partitions.database_id.clone(),
                        keys: chunk.iter().map(|k| self.partitions.key(k)).collect(),
                        ..pb::AllocateIdsRequest::default()
                    }
                )?;
                for key in response.keys {
                    allocated.push(self.partitions.raw_key(key)?);
                }
            }
            Ok(allocated)
        })
    }

    fn reserve_ids<'a>(&'a self, keys: Vec<RawKey>) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move {
            for chunk in keys.chunks(MAX_ID_KEYS) {
                call!(
                    self,
                    reserve_ids,
                    about_keys("reserve_ids", Sending::Idempotent, chunk),
                    pb::ReserveIdsRequest {
                        project_id: self.partitions.project_id.clone(),
                        database_id: self.partitions.database_id.clone(),
                        keys: chunk.iter().map(|k| self.partitions.key(k)).collect(),
                        ..pb::ReserveIdsRequest::default()
                    }
                )?;
            }
            Ok(())
        })
    }

    /// Records `schema`'s composite indexes, which R-I5 counts before a commit is sent (the
    /// service's indexes themselves come from `index.yaml`).
    fn declare<'a>(&'a self, schema: &'static Schema) -> BoxFuture<'a, Result<(), Error>> {
        let mut indexes = self.indexes.lock().unwrap_or_else(|e| e.into_inner());
        let known = indexes.entry(schema.kind).or_default();
        for index in schema.indexes {
            if !known.contains(&index) {
                known.push(index);
            }
        }
        Box::pin(std::future::ready(Ok(())))
    }

    fn capabilities(&self) -> Capabilities<'_> {
        Capabilities {
            explain: Some(self),
            ..Capabilities::default()
        }
    }
}

impl Explain for Cloud {
    fn explain<'a>(
        &'a self,
        query: &'a QuerySpec,
        analyze: bool,
        transaction: Option<&'a TransactionId>,
    ) -> BoxFuture<'a, Result<(Option<QueryBatch>, Explanation), Error>> {
        Box::pin(self.explain_query(query, analyze, transaction))
    }

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
}
