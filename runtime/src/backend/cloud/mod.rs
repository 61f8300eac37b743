//! The Google Cloud backend: Firestore in Datastore mode (or Google's emulators) over gRPC,
//! with `gcloud-sdk`'s generated client and its Application Default Credentials.
//!
//! `connect.rs` makes the connection (TLS, credentials), `call.rs` each call (deadline,
//! retries, errors, tracing), `convert.rs` the protobuf messages. The service's limits are
//! handled here so users never meet them by surprise: lookups over 1,000 keys are split, and
//! `deferred` keys fetched again until none remain; query batches that are `NOT_FINISHED`
//! continue; an entity over 1 MiB is refused before anything is sent (commits over 500
//! mutations are refused above this layer, for every backend). Every call carries the routing
//! header with the project and database.

mod call;
mod connect;
mod convert;

use std::collections::HashMap;

use gcloud_sdk::google::datastore::v1 as pb;
use gcloud_sdk::prost::Message as _;

/// The builder of a handle on Google Cloud, where earlier releases had it.
pub use crate::db::cloud::CloudBuilder;

pub(crate) use self::connect::Settings;

use self::call::{About, Calls, Client, Sending};
use self::convert::Partitions;
use super::{Backend, BoxFuture, Mutation, TransactionId, TransactionMode};
use crate::error::Error;
use crate::model::key::{PartitionId, RawKey};
use crate::model::value::{PropertyMap, Value};
use crate::query::spec::{Aggregation, QueryBatch, QueryResult, QuerySpec};
use crate::rules::limits::MAX_ENTITY_BYTES;

/// The most keys the service looks up in one call.
const MAX_LOOKUP_KEYS: usize = 1_000;

/// The most keys `allocate_ids` / `reserve_ids` send in one call.
const MAX_ID_KEYS: usize = 500;

/// Google Cloud Firestore in Datastore mode (or an emulator of it), over gRPC.
pub struct Cloud {
    calls: Calls,
    partitions: Partitions,
}

impl std::fmt::Debug for Cloud {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cloud")
            .field("endpoint", &self.calls.endpoint)
            .field("project_id", &self.partitions.project_id)
            .field("database_id", &self.partitions.database_id)
            .field("timeout", &self.calls.timeout)
            .finish_non_exhaustive()
    }
}

/// Makes call `method` with `request` (see `call.rs`), on whichever client the backend has.
macro_rules! call {
    ($self:ident, $method:ident, $about:expr, $request:expr) => {
        $self
            .calls
            .run($about, $request, |client, request| async move {
                match client {
                    Client::Google(mut c) => c.$method(request).await,
                    Client::Plain(mut c) => c.$method(request).await,
                }
            })
            .await
    };
}

/// What a call on `keys` is about.
fn about_keys<'k>(rpc: &'static str, sending: Sending, keys: &'k [RawKey]) -> About<'k> {
    About {
        rpc,
        sending,
        namespace: keys.first().map_or("", RawKey::namespace),
        kind: keys.first().map_or("", RawKey::kind),
        count: keys.len(),
    }
}

/// What a call about no entity is about.
fn about_nothing(rpc: &'static str) -> About<'static> {
    About {
        rpc,
        sending: Sending::Idempotent,
        namespace: "",
        kind: "",
        count: 0,
    }
}

/// A refused query as a query error (a bad cursor as a cursor error: the service says
/// "Invalid cursor", or, for bytes that are no cursor at all, "Error parsing protocol message").
fn query_error(kind: &str, has_cursor: bool, error: Error) -> Error {
    match error {
        Error::Service { code, message } if code == "INVALID_ARGUMENT" => {
            let lower = message.to_lowercase();
            if lower.contains("cursor") || (has_cursor && lower.contains("protocol message")) {
                Error::InvalidCursor { reason: message }
            } else {
                Error::InvalidQuery {
                    kind: kind.to_owned(),
                    reason: message,
                }
            }
        }
        other => other,
    }
}

impl Cloud {
    fn read_options(transaction: Option<&TransactionId>) -> Option<pb::ReadOptions> {
        transaction.map(|t| pb::ReadOptions {
            consistency_type: Some(pb::read_options::ConsistencyType::Transaction(t.0.clone())),
        })
    }

    async fn lookup_keys(
        &self,
        keys: &[RawKey],
        transaction: Option<&TransactionId>,
    ) -> Result<Vec<Option<PropertyMap>>, Error> {
        let mut found: HashMap<RawKey, PropertyMap> = HashMap::with_capacity(keys.len());
        for chunk in keys.chunks(MAX_LOOKUP_KEYS) {
            let mut pending: Vec<pb::Key> = chunk.iter().map(|k| self.partitions.key(k)).collect();
            // `deferred` keys were not looked up this time: ask again until none remain.
            while !pending.is_empty() {
                let response = call!(
                    self,
                    lookup,
                    about_keys("lookup", Sending::Idempotent, chunk),
                    pb::LookupRequest {
                        project_id: self.partitions.project_id.clone(),
                        database_id: self.partitions.database_id.clone(),
                        read_options: Self::read_options(transaction),
                        keys: std::mem::take(&mut pending),
                        ..pb::LookupRequest::default()
                    }
                )?;
                for result in response.found {
                    let Some(entity) = result.entity else {
                        continue;
                    };
                    let Some(key) = entity.key else { continue };
                    let key = self.partitions.raw_key(key)?;
                    found.insert(key, self.partitions.property_map(entity.properties)?);
                }
                pending = response.deferred;
            }
        }
        Ok(keys.iter().map(|k| found.get(k).cloned()).collect())
    }

    async fn commit_mutations(
        &self,
        mutations: Vec<Mutation>,
        transaction: Option<&TransactionId>,
    ) -> Result<Vec<RawKey>, Error> {
        use pb::mutation::Operation;
        let mut requested = Vec::with_capacity(mutations.len());
        let mut keys = Vec::with_capacity(mutations.len());
        for mutation in mutations {
            let operation = match &mutation {
                Mutation::Insert(k, p) | Mutation::Update(k, p) | Mutation::Upsert(k, p) => {
                    let entity = self.partitions.entity(k, p);
                    let size = entity.encoded_len();
                    if size > MAX_ENTITY_BYTES {
                        return Err(Error::EntityTooLarge {
                            key: format!("{k:?}"),
                            size,
                            max: MAX_ENTITY_BYTES,
                        });
                    }
                    match mutation {
                        Mutation::Insert(..) => Operation::Insert(entity),
                        Mutation::Update(..) => Operation::Update(entity),
                        _ => Operation::Upsert(entity),
                    }
                }
                Mutation::Delete(k) => Operation::Delete(self.partitions.key(k)),
            };
            keys.push(mutation.key().clone());
            requested.push(pb::Mutation {
                operation: Some(operation),
                ..pb::Mutation::default()
            });
        }
        let (mode, selector) = match transaction {
            Some(t) => (
                pb::commit_request::Mode::Transactional,
                Some(pb::commit_request::TransactionSelector::Transaction(
                    t.0.clone(),
                )),
            ),
            None => (pb::commit_request::Mode::NonTransactional, None),
        };
        let response = call!(
            self,
            commit,
            about_keys("commit", Sending::Once, &keys),
            pb::CommitRequest {
                project_id: self.partitions.project_id.clone(),
                database_id: self.partitions.database_id.clone(),
                mode: mode as i32,
                mutations: requested,
                transaction_selector: selector,
                ..pb::CommitRequest::default()
            }
        )?;
        // A result carries a key only where the service allocated an id.
        for (key, result) in keys.iter_mut().zip(response.mutation_results) {
            if let Some(allocated) = result.key {
                *key = self.partitions.raw_key(allocated)?;
            }
        }
        Ok(keys)
    }

    async fn query(
        &self,
        spec: &QuerySpec,
        transaction: Option<&TransactionId>,
    ) -> Result<QueryBatch, Error> {
        use pb::query_result_batch::MoreResultsType as More;
        // One result more than asked, to know whether the page is the last one.
        let wanted = spec.limit;
        let start = spec.start_cursor.clone();
        let mut results: Vec<QueryResult> = Vec::new();
        let mut spec = spec.clone();
        let end_cursor = loop {
            let ask = wanted.map(|w| w + 1 - results.len());
            let response = call!(
                self,
                run_query,
                About {
                    rpc: "run_query",
                    sending: Sending::Idempotent,
                    namespace: &spec.partition.namespace,
                    kind: &spec.kind,
                    count: 0,
                },
                pb::RunQueryRequest {
                    project_id: self.partitions.project_id.clone(),
                    database_id: self.partitions.database_id.clone(),
                    partition_id: Some(self.partitions.partition(&spec.partition)),
                    read_options: Self::read_options(transaction),
                    query_type: Some(pb::run_query_request::QueryType::Query(
                        self.partitions.query(&spec, ask),
                    )),
                    ..pb::RunQueryRequest::default()
                }
            )
            .map_err(|e| {
                let has_cursor = spec.start_cursor.is_some() || spec.end_cursor.is_some();
                query_error(&spec.kind, has_cursor, e)
            })?;
            let batch = response.batch.unwrap_or_default();
            for result in batch.entity_results {
                let Some(entity) = result.entity else {
                    continue;
                };
                let Some(key) = entity.key else { continue };
                results.push(QueryResult {
                    key: self.partitions.raw_key(key)?,
                    properties: self.partitions.property_map(entity.properties)?,
                    cursor: result.cursor,
                });
            }
            let more = More::try_from(batch.more_results).unwrap_or(More::NoMoreResults);
            let enough = wanted.is_some_and(|w| results.len() > w);
            if more == More::NotFinished && !enough {
                // The service stopped early: go on from where it stopped.
                spec.start_cursor = Some(batch.end_cursor);
                continue;
            }
            break batch.end_cursor;
        };
        match wanted {
            Some(w) if results.len() > w => {
                results.truncate(w);
                // A page of none (a limit of 0) ends where it started.
                let end_cursor = match results.last() {
                    Some(last) => last.cursor.clone(),
                    None => start.unwrap_or_default(),
                };
                Ok(QueryBatch {
                    results,
                    end_cursor,
                    more_results: true,
                })
            }
            // Fewer than asked: the query is finished (the legacy emulator says "more after
            // the limit" whenever a limit is set, which cannot be true here).
            _ => Ok(QueryBatch {
                results,
                end_cursor,
                more_results: false,
            }),
        }
    }
}

impl Backend for Cloud {
    fn lookup<'a>(
        &'a self,
        keys: &'a [RawKey],
        transaction: Option<&'a TransactionId>,
    ) -> BoxFuture<'a, Result<Vec<Option<PropertyMap>>, Error>> {
        Box::pin(self.lookup_keys(keys, transaction))
    }

    fn commit<'a>(
        &'a self,
        mutations: Vec<Mutation>,
        transaction: Option<&'a TransactionId>,
    ) -> BoxFuture<'a, Result<Vec<RawKey>, Error>> {
        Box::pin(self.commit_mutations(mutations, transaction))
    }

    fn run_query<'a>(
        &'a self,
        query: &'a QuerySpec,
        transaction: Option<&'a TransactionId>,
    ) -> BoxFuture<'a, Result<QueryBatch, Error>> {
        Box::pin(self.query(query, transaction))
    }

    fn run_aggregation<'a>(
        &'a self,
        query: &'a QuerySpec,
        aggregation: &'a Aggregation,
        transaction: Option<&'a TransactionId>,
    ) -> BoxFuture<'a, Result<Value, Error>> {
        Box::pin(async move {
            let response = call!(
                self,
                run_aggregation_query,
                About {
                    rpc: "run_aggregation_query",
                    sending: Sending::Idempotent,
                    namespace: &query.partition.namespace,
                    kind: &query.kind,
                    count: 0,
                },
                pb::RunAggregationQueryRequest {
                    project_id: self.partitions.project_id.clone(),
                    database_id: self.partitions.database_id.clone(),
                    partition_id: Some(self.partitions.partition(&query.partition)),
                    read_options: Self::read_options(transaction),
                    query_type: Some(
                        pb::run_aggregation_query_request::QueryType::AggregationQuery(
                            self.partitions.aggregation(query, aggregation),
                        )
                    ),
                    ..pb::RunAggregationQueryRequest::default()
                }
            )
            .map_err(|e| query_error(&query.kind, false, e))?;
            let value = response
                .batch
                .and_then(|b| b.aggregation_results.into_iter().next())
                .and_then(|mut r| r.aggregate_properties.remove(convert::AGGREGATE));
            match value {
                Some(value) => Ok(self.partitions.property(value)?.value),
                None => Err(Error::Service {
                    code: "INTERNAL".to_owned(),
                    message: "the aggregation query returned no result".to_owned(),
                }),
            }
        })
    }

    fn begin_transaction<'a>(
        &'a self,
        _partition: &'a PartitionId,
        mode: &'a TransactionMode,
    ) -> BoxFuture<'a, Result<TransactionId, Error>> {
        Box::pin(async move {
            let mode = match mode {
                TransactionMode::ReadWrite { previous } => {
                    pb::transaction_options::Mode::ReadWrite(pb::transaction_options::ReadWrite {
                        previous_transaction: previous
                            .as_ref()
                            .map(|p| p.0.clone())
                            .unwrap_or_default(),
                    })
                }
                TransactionMode::ReadOnly { read_time } => {
                    pb::transaction_options::Mode::ReadOnly(pb::transaction_options::ReadOnly {
                        read_time: read_time.map(convert::timestamp),
                    })
                }
            };
            let options = pb::TransactionOptions { mode: Some(mode) };
            let response = call!(
                self,
                begin_transaction,
                about_nothing("begin_transaction"),
                pb::BeginTransactionRequest {
                    project_id: self.partitions.project_id.clone(),
                    database_id: self.partitions.database_id.clone(),
                    transaction_options: Some(options),
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
}

#[cfg(test)]
mod tests {
    use super::call::status_error;
    use super::connect::url_encode;
    use super::*;
    use gcloud_sdk::tonic;

    #[test]
    fn service_statuses_keep_their_code_and_message() {
        let error = status_error(tonic::Status::failed_precondition(
            "no matching index found. recommended index is:\n- kind: Post\n  properties:\n  - name: a\n  - name: b",
        ));
        match error {
            Error::MissingIndex {
                index_yaml,
                message,
            } => {
                assert!(index_yaml.starts_with("- kind: Post"), "{index_yaml}");
                assert!(message.contains("no matching index"));
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            status_error(tonic::Status::aborted("too much contention")),
            Error::Aborted { .. }
        ));
        assert!(status_error(tonic::Status::unavailable("down")).is_retryable());
        match status_error(tonic::Status::deadline_exceeded("slow")) {
            Error::Service { code, message } => {
                assert_eq!(
                    (code.as_str(), message.as_str()),
                    ("DEADLINE_EXCEEDED", "slow")
                );
            }
            other => panic!("{other:?}"),
        }
        // A deadline is not retried: a commit that timed out may have been applied.
        assert!(!status_error(tonic::Status::deadline_exceeded("slow")).is_retryable());
        assert!(matches!(
            query_error(
                "K",
                true,
                status_error(tonic::Status::invalid_argument("Invalid cursor."))
            ),
            Error::InvalidCursor { .. }
        ));
    }

    #[test]
    fn the_routing_header_names_project_and_database() {
        assert_eq!(url_encode("my-project"), "my-project");
        assert_eq!(url_encode("a b&c=d/é"), "a%20b%26c%3Dd%2F%C3%A9");
    }
}
