//! Google's Datastore API answered by any [`Backend`]: the calls of the service's gRPC
//! interface (`google.datastore.v1.Datastore`) on its own messages, so that every client
//! written for the service — Google's, in any language, and this crate's cloud backend — can
//! use the embedded engine (or any backend) as it uses the service. The server
//! serves it over the network (`lib.rs`: gRPC; `rest.rs`: REST).
//!
//! Each request is checked as the service checks it and translated into the backend's calls;
//! GQL is read into a structured query first (`gql/`). What a backend cannot do (a conflict
//! resolved other than by failing, Query Explain on a backend that cannot explain) is refused
//! with `UNIMPLEMENTED`, never ignored.
//!
//! ```
//! use std::sync::Arc;
//! use datastore_entity::backend::embedded::Embedded;
//! use datastore_entity_server::serve::Service;
//! use gcloud_sdk::google::datastore::v1 as pb;
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let service = Service::new(Arc::new(Embedded::in_memory().strict_indexes(false)));
//! let key = pb::Key {
//!     partition_id: None,
//!     path: vec![pb::key::PathElement {
//!         kind: "Task".into(),
//!         id_type: Some(pb::key::path_element::IdType::Name("a".into())),
//!     }],
//! };
//! let found = service
//!     .lookup(pb::LookupRequest { project_id: "p".into(), keys: vec![key], ..Default::default() })
//!     .await
//!     .unwrap();
//! assert_eq!((found.found.len(), found.missing.len()), (0, 1));
//! # });
//! ```

mod gql;
mod request;
mod response;
mod transactions;

use std::sync::Arc;

use gcloud_sdk::google::datastore::v1 as pb;
use tonic::Status;

pub(crate) use self::request::status;
use self::request::{Read, Scope, invalid, path, transaction_mode};
use self::transactions::{Registry, Use};
use datastore_entity::backend::cloud::wire::timestamp;
use datastore_entity::backend::cloud::wire_map::wire_value;
use datastore_entity::backend::{
    Aggregation, Backend, FilterNode, QueryBatch, QueryResult, QuerySpec, ResultShape,
    TransactionId, TransactionMode,
};
use datastore_entity_core::error::Error;
use datastore_entity_core::model::key::{KEY_PROPERTY, PartitionId};
use datastore_entity_core::model::scalar::Timestamp;
use datastore_entity_core::model::value::Value;
use datastore_entity_core::model::views::ValueView;
use datastore_entity_core::query::explain::Explanation;
use datastore_entity_core::query::spec::Operator;
use datastore_entity_core::query_rule::QueryRule;
use datastore_entity_core::rules::filter::check_query;

/// The Datastore API over a backend. Cheap to clone: clones share the backend.
#[derive(Clone)]
pub struct Service {
    backend: Arc<dyn Backend>,
    /// The transactions issued to clients, each bound to its project and database.
    transactions: Arc<Registry>,
}

impl std::fmt::Debug for Service {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Service").finish_non_exhaustive()
    }
}

impl Service {
    /// The API answered by `backend`.
    pub fn new(backend: Arc<dyn Backend>) -> Service {
        Service {
            backend,
            transactions: Arc::default(),
        }
    }

    /// The backend that answers.
    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.backend
    }

    /// Runs `read` as `how` says: in a transaction given or begun, or in a read-only snapshot
    /// ended after it. Returns the id of a transaction it began, for the client.
    async fn reading<T>(
        &self,
        scope: &Scope,
        how: Read,
        partition: &PartitionId,
        read: impl AsyncFnOnce(Option<&TransactionId>) -> Result<T, Error>,
    ) -> Result<(Vec<u8>, T), Status> {
        let backend = &*self.backend;
        match how {
            Read::Now => Ok((Vec::new(), read(None).await.map_err(status)?)),
            Read::In(id) => {
                let inner = self
                    .transactions
                    .resolve(&scope.partitions, &id.0, Use::Read)?;
                Ok((Vec::new(), read(inner.as_ref()).await.map_err(status)?))
            }
            Read::Begin(mode) => {
                let id = self.begin(scope, partition, mode).await?;
                let inner = self
                    .transactions
                    .resolve(&scope.partitions, &id, Use::Read)?;
                match read(inner.as_ref()).await {
                    Ok(value) => Ok((id, value)),
                    Err(error) => {
                        if let Some(inner) = &inner {
                            let _ = backend.rollback(inner).await;
                        }
                        self.transactions.end(&id);
                        Err(status(error))
                    }
                }
            }
            Read::Snapshot(read_time) => {
                let mode = TransactionMode::ReadOnly { read_time };
                let id = backend
                    .begin_transaction(partition, &mode)
                    .await
                    .map_err(status)?;
                let value = read(Some(&id)).await;
                let _ = backend.rollback(&id).await;
                Ok((Vec::new(), value.map_err(status)?))
            }
        }
    }

    /// `Lookup`: entities by key, found and missing, in a transaction or not, through a
    /// property mask. At most 1,000 keys, as the service takes; an answer stops at about
    /// [`ANSWER_BYTES`] of entities and names the keys left as `deferred` (the clients ask
    /// for them again), so no lookup holds more than that much.
    pub async fn lookup(&self, request: pb::LookupRequest) -> Result<pb::LookupResponse, Status> {
        use gcloud_sdk::prost::Message;
        let scope = Scope::new(&request.project_id, &request.database_id)?;
        if request.keys.len() > MAX_LOOKUP_KEYS {
            return Err(invalid(format!(
                "cannot get more than {MAX_LOOKUP_KEYS} keys in a single call"
            )));
        }
        let keys = scope.complete_keys(request.keys)?;
        let paths = match request.property_mask {
            Some(mask) => Some(
                mask.paths
                    .iter()
                    .map(|p| path(p))
                    .collect::<Result<Vec<_>, _>>()?,
            ),
            None => None,
        };
        let partition = match keys.first().and_then(|k| k.partition()) {
            Some(p) => p.clone(),
            None => scope.partition(None)?,
        };
        let how = match scope.read(request.read_options)? {
            // Keys looked up a few at a time read one snapshot.
            Read::Now if keys.len() > FIRST_LOOKUP => Read::Snapshot(None),
            how => how,
        };
        let backend = &*self.backend;
        let (transaction, mut response) = self
            .reading(&scope, how, &partition, async |t| {
                let mut response = pb::LookupResponse::default();
                let (mut next, mut bytes, mut found) = (0, 0, 0);
                let mut take = FIRST_LOOKUP;
                while next < keys.len() {
                    let these = &keys[next..keys.len().min(next + take)];
                    let stamped = backend.lookup_stamped(these, t).await?;
                    for (key, slot) in these.iter().zip(stamped) {
                        let Some((properties, stamp)) = slot else {
                            response.missing.push(scope.missing(key));
                            continue;
                        };
                        let properties = match &paths {
                            Some(paths) => properties.selected(paths),
                            None => properties,
                        };
                        let result = scope.found(key, properties, &stamp);
                        bytes += result.encoded_len();
                        found += 1;
                        response.found.push(result);
                    }
                    next += these.len();
                    if bytes >= ANSWER_BYTES {
                        break;
                    }
                    // As many as the room left holds, at the size of those found so far.
                    let each = (bytes / found.max(1)).max(1);
                    take = ((ANSWER_BYTES - bytes) / each).clamp(1, MAX_LOOKUP_KEYS);
                }
                response.deferred = keys[next..]
                    .iter()
                    .map(|k| scope.partitions.key(k))
                    .collect();
                Ok(response)
            })
            .await?;
        response.transaction = transaction;
        response.read_time = Some(timestamp(Timestamp::now()));
        Ok(response)
    }

    /// `RunQuery`: one batch of a query's results (the client asks again from its end cursor
    /// while the batch says `NOT_FINISHED`).
    pub async fn run_query(
        &self,
        request: pb::RunQueryRequest,
    ) -> Result<pb::RunQueryResponse, Status> {
        use pb::run_query_request::QueryType;
        let scope = Scope::new(&request.project_id, &request.database_id)?;
        // GQL becomes a structured query, which the answer shows as the service's does.
        let (query, from_gql) = match request.query_type {
            Some(QueryType::Query(query)) => (query, None),
            Some(QueryType::GqlQuery(text)) => {
                let query = gql::query(&text, request.partition_id.as_ref())?;
                (query.clone(), Some(query))
            }
            None => return Err(invalid("A query is required.")),
        };
        let explain = request.explain_options.map(|o| o.analyze);
        let (mut spec, paging) = scope.query(request.partition_id, query)?;
        if let Some(mask) = request.property_mask {
            spec.property_mask = Some(
                mask.paths
                    .iter()
                    .map(|p| path(p))
                    .collect::<Result<Vec<_>, _>>()?,
            );
        }
        let mut paging = paging;
        paging.whole = spec.find_nearest.is_none() && !resumable(&spec);
        if spec.find_nearest.is_none() {
            // A batch it cannot resume is read whole, one result past the most a batch holds
            // so that a larger answer is refused rather than cut.
            let most = match paging.whole {
                true => response::WHOLE + 1,
                false => response_batch(),
            };
            let asked = paging.limit.map_or(most, |l| l.min(most));
            spec.limit = Some(paging.offset.saturating_add(asked));
        }
        let how = scope.read(request.read_options)?;
        let backend = &*self.backend;
        let partition = spec.partition.clone();
        let started = std::time::Instant::now();
        let (transaction, (answer, explained)) = self
            .reading(&scope, how, &partition, async |t| match explain {
                None if spec.shape == ResultShape::Full && spec.find_nearest.is_none() => {
                    Ok((in_pieces(backend, &spec, t).await?, None))
                }
                None => Ok((backend.run_query(&spec, t).await?, None)),
                Some(analyze) => {
                    let (answer, explained) = backend.explain(&spec, analyze, t).await?;
                    let answer = answer.unwrap_or(QueryBatch {
                        results: Vec::new(),
                        end_cursor: Vec::new(),
                        more_results: false,
                    });
                    Ok((answer, Some(explained)))
                }
            })
            .await?;
        let took = started.elapsed();
        let mut batch = scope.batch(&spec.shape, &paging, answer, spec.start_cursor.clone())?;
        batch.read_time = Some(timestamp(Timestamp::now()));
        let explain_metrics = explained.map(|explained| {
            let billed = match spec.shape {
                ResultShape::Full => batch.entity_results.len().max(1),
                // The service bills a keys-only or projection query as one read.
                _ => 1,
            };
            response::explain_metrics(&spec.kind, &[explained], billed, took)
        });
        Ok(pb::RunQueryResponse {
            batch: Some(batch),
            transaction,
            explain_metrics,
            query: from_gql,
        })
    }

    /// `RunAggregationQuery`: each aggregation of a query's rows, under its alias, from one
    /// snapshot.
    pub async fn run_aggregation_query(
        &self,
        request: pb::RunAggregationQueryRequest,
    ) -> Result<pb::RunAggregationQueryResponse, Status> {
        use pb::run_aggregation_query_request::QueryType;
        let scope = Scope::new(&request.project_id, &request.database_id)?;
        let (query, from_gql) = match request.query_type {
            Some(QueryType::AggregationQuery(query)) => (query, None),
            Some(QueryType::GqlQuery(text)) => {
                let query = gql::aggregation(&text, request.partition_id.as_ref())?;
                (query.clone(), Some(query))
            }
            None => return Err(invalid("An aggregation query is required.")),
        };
        let explain = request.explain_options.map(|o| o.analyze);
        let (spec, aggregations) = scope.aggregation(request.partition_id, query)?;
        let spec = shared_rows(spec, &aggregations);
        let how = match scope.read(request.read_options)? {
            // Several aggregations see one snapshot.
            Read::Now if aggregations.len() > 1 => Read::Snapshot(None),
            how => how,
        };
        let backend = &*self.backend;
        let started = std::time::Instant::now();
        let (transaction, (values, explained)) = self
            .reading(&scope, how, &spec.partition, async |t| {
                let mut values: Vec<(String, Value)> = Vec::with_capacity(aggregations.len());
                let mut explained: Vec<Explanation> = Vec::new();
                for (alias, aggregation) in &aggregations {
                    let Some(analyze) = explain else {
                        let value = backend.run_aggregation(&spec, aggregation, t).await?;
                        values.push((alias.clone(), value));
                        continue;
                    };
                    let (value, this) = backend
                        .explain_aggregation(&spec, aggregation, analyze, t)
                        .await?;
                    values.extend(value.map(|v| (alias.clone(), v)));
                    explained.push(this);
                }
                Ok((values, explained))
            })
            .await?;
        let took = started.elapsed();
        // The service answers every aggregation of a query from one scan of one index: that
        // of the first aggregation over a property where there is one (its rows are the
        // count's too), else the count's.
        let over_property = aggregations
            .iter()
            .position(|(_, a)| !matches!(a, Aggregation::Count { .. }))
            .unwrap_or(0);
        let explained: Vec<Explanation> =
            explained.into_iter().skip(over_property).take(1).collect();
        // One read per thousand index entries read, at least one: as the service bills.
        let explain_metrics = explain.map(|_| {
            let scanned: u64 = explained
                .iter()
                .filter_map(|e| e.stats.as_ref())
                .map(|s| s.index_entries_scanned)
                .sum();
            let billed = usize::try_from(scanned.div_ceil(1000).max(1)).unwrap_or(usize::MAX);
            response::explain_metrics(&spec.kind, &explained, billed, took)
        });
        let results = match values.is_empty() {
            // Explained, not run: no result.
            true => Vec::new(),
            false => vec![pb::AggregationResult {
                aggregate_properties: values
                    .into_iter()
                    .map(|(alias, value)| {
                        let wire = wire_value(ValueView::of(&value), false, &scope.partitions);
                        (alias, wire)
                    })
                    .collect(),
            }],
        };
        Ok(pb::RunAggregationQueryResponse {
            batch: Some(pb::AggregationResultBatch {
                aggregation_results: results,
                more_results: pb::query_result_batch::MoreResultsType::NoMoreResults as i32,
                read_time: Some(timestamp(Timestamp::now())),
            }),
            transaction,
            explain_metrics,
            query: from_gql,
        })
    }

    /// `BeginTransaction`.
    pub async fn begin_transaction(
        &self,
        request: pb::BeginTransactionRequest,
    ) -> Result<pb::BeginTransactionResponse, Status> {
        let scope = Scope::new(&request.project_id, &request.database_id)?;
        let mode = transaction_mode(request.transaction_options.unwrap_or_default())?;
        let partition = scope.partition(None)?;
        let transaction = self.begin(&scope, &partition, mode).await?;
        Ok(pb::BeginTransactionResponse { transaction })
    }

    /// Begins a transaction in the backend; the id its client is given, bound to `scope`.
    async fn begin(
        &self,
        scope: &Scope,
        partition: &PartitionId,
        mode: TransactionMode,
    ) -> Result<Vec<u8>, Status> {
        self.transactions.admit()?;
        // A retry names its previous attempt by the id its client was given.
        let mode = match mode {
            TransactionMode::ReadWrite { previous } => TransactionMode::ReadWrite {
                previous: previous
                    .and_then(|p| self.transactions.previous(&scope.partitions, &p.0)),
            },
            read_only => read_only,
        };
        let inner = self
            .backend
            .begin_transaction(partition, &mode)
            .await
            .map_err(status)?;
        match self.transactions.issue(&scope.partitions, inner.clone()) {
            Ok(id) => Ok(id),
            Err(refused) => {
                let _ = self.backend.rollback(&inner).await;
                Err(refused)
            }
        }
    }

    /// `Commit`: in a transaction, in a single-use one, or not; each mutation's result in
    /// order (an allocated key where one was incomplete), and the commit's time.
    pub async fn commit(&self, request: pb::CommitRequest) -> Result<pb::CommitResponse, Status> {
        use pb::commit_request::{Mode, TransactionSelector as Selector};
        let scope = Scope::new(&request.project_id, &request.database_id)?;
        let changes = request
            .mutations
            .into_iter()
            .map(|m| scope.change(m))
            .collect::<Result<Vec<_>, _>>()?;
        let incomplete: Vec<bool> = changes
            .iter()
            .map(|c| !c.mutation.key().is_complete())
            .collect();
        let transactional = match Mode::try_from(request.mode) {
            Ok(Mode::Transactional) => true,
            Ok(Mode::NonTransactional) => false,
            _ => request.transaction_selector.is_some(),
        };
        let backend = &*self.backend;
        let committed = match (transactional, request.transaction_selector) {
            (true, Some(Selector::Transaction(id))) => {
                let inner = self
                    .transactions
                    .resolve(&scope.partitions, &id, Use::Read)?;
                let committed = backend.commit_changes(changes, inner.as_ref()).await;
                // Committed or not, it has ended (a retry begins another): its locks go now.
                self.transactions.end(&id);
                if let (Err(_), Some(inner)) = (&committed, &inner) {
                    let _ = backend.rollback(inner).await;
                }
                committed
            }
            (true, Some(Selector::SingleUseTransaction(options))) => {
                let mode = transaction_mode(options)?;
                let partition = scope.partition(None)?;
                backend.begin_with_commit(changes, &partition, &mode).await
            }
            (true, None) => {
                return Err(invalid(
                    "A transactional commit needs a transaction or single_use options.",
                ));
            }
            (false, None) => backend.commit_changes(changes, None).await,
            (false, Some(_)) => {
                return Err(invalid(
                    "A non-transactional commit cannot have a transaction.",
                ));
            }
        }
        .map_err(status)?;
        let mutation_results = committed
            .results
            .into_iter()
            .zip(incomplete)
            .map(|(result, incomplete)| pb::MutationResult {
                key: incomplete.then(|| scope.partitions.key(&result.key)),
                version: i64::try_from(result.stamp.version).unwrap_or(i64::MAX),
                create_time: result.stamp.create_time.map(timestamp),
                update_time: result.stamp.update_time.map(timestamp),
                conflict_detected: result.conflict_detected,
                transform_results: result
                    .transform_results
                    .iter()
                    .map(|v| wire_value(ValueView::of(v), false, &scope.partitions))
                    .collect(),
            })
            .collect();
        Ok(pb::CommitResponse {
            mutation_results,
            index_updates: 0,
            commit_time: committed.commit_time.map(timestamp),
        })
    }

    /// `Rollback`: of a transaction of the request's project and database (one already ended
    /// included, as the service answers).
    pub async fn rollback(
        &self,
        request: pb::RollbackRequest,
    ) -> Result<pb::RollbackResponse, Status> {
        let scope = Scope::new(&request.project_id, &request.database_id)?;
        let inner =
            self.transactions
                .resolve(&scope.partitions, &request.transaction, Use::Rollback)?;
        if let Some(inner) = inner {
            self.transactions.end(&request.transaction);
            // Ended already in the backend (expired, or aborted): it is rolled back.
            match self.backend.rollback(&inner).await {
                Ok(()) | Err(Error::TransactionClosed) => {}
                Err(other) => return Err(status(other)),
            }
        }
        Ok(pb::RollbackResponse {})
    }

    /// `AllocateIds`: incomplete keys completed with ids never used.
    pub async fn allocate_ids(
        &self,
        request: pb::AllocateIdsRequest,
    ) -> Result<pb::AllocateIdsResponse, Status> {
        let scope = Scope::new(&request.project_id, &request.database_id)?;
        let keys = request
            .keys
            .into_iter()
            .map(|k| {
                let key = scope.key(k)?;
                match key.is_complete() {
                    false => Ok(key),
                    true => Err(invalid(format!(
                        "The key {key:?} is complete: only an incomplete key gets an id."
                    ))),
                }
            })
            .collect::<Result<Vec<_>, Status>>()?;
        let keys = self.backend.allocate_ids(keys).await.map_err(status)?;
        Ok(pb::AllocateIdsResponse {
            keys: keys.iter().map(|k| scope.partitions.key(k)).collect(),
        })
    }

    /// `ReserveIds`: the ids of complete keys, never to be allocated.
    pub async fn reserve_ids(
        &self,
        request: pb::ReserveIdsRequest,
    ) -> Result<pb::ReserveIdsResponse, Status> {
        let scope = Scope::new(&request.project_id, &request.database_id)?;
        let keys = scope.complete_keys(request.keys)?;
        self.backend.reserve_ids(keys).await.map_err(status)?;
        Ok(pb::ReserveIdsResponse {})
    }
}

/// The most keys one lookup takes, as the service.
pub const MAX_LOOKUP_KEYS: usize = 1_000;

/// About the most bytes of entities one lookup answers (under gRPC's usual 4 MiB limit on
/// what a client receives): the keys past them are `deferred`.
pub const ANSWER_BYTES: usize = response::BATCH_BYTES;

/// The keys a lookup reads first (and the results a whole-entity query), before it knows how
/// large its entities are.
const FIRST_LOOKUP: usize = 4;

/// The results of a whole-entity query a batch holds, read a few at a time: as many as
/// about [`ANSWER_BYTES`] hold at the size of those read so far, so a page of large entities
/// never holds many more than it answers. (Outside a transaction each piece reads the latest
/// commit, as successive pages do.)
async fn in_pieces(
    backend: &dyn Backend,
    spec: &QuerySpec,
    transaction: Option<&TransactionId>,
) -> Result<QueryBatch, Error> {
    // A query the service does not resume from a cursor is answered whole, as the service
    // answers its batch: its pieces could not be resumed.
    if !resumable(spec) {
        return whole(backend, spec, transaction).await;
    }
    let wanted = spec.limit.unwrap_or(usize::MAX);
    let mut piece = QuerySpec {
        limit: Some(FIRST_LOOKUP.min(wanted)),
        ..spec.clone()
    };
    let mut taken = QueryBatch {
        results: Vec::new(),
        end_cursor: Vec::new(),
        more_results: false,
    };
    let mut bytes = 0;
    loop {
        let answer = backend.run_query(&piece, transaction).await?;
        let read = answer.results.len();
        bytes += answer.results.iter().map(result_bytes).sum::<usize>();
        taken.results.extend(answer.results);
        taken.end_cursor = answer.end_cursor;
        taken.more_results = answer.more_results;
        let left = wanted.saturating_sub(taken.results.len());
        if !taken.more_results || read == 0 || left == 0 || bytes >= ANSWER_BYTES {
            return Ok(taken);
        }
        let each = (bytes / taken.results.len()).max(1);
        piece.limit = Some(((ANSWER_BYTES - bytes) / each).clamp(1, left));
        piece.start_cursor = Some(taken.end_cursor.clone());
    }
}

/// The one batch of a whole-entity query that cannot be resumed from a cursor: read again
/// with a larger limit while the results so far say more fit in about [`ANSWER_BYTES`], and
/// no further (one past them is enough for the batch to refuse the query, rather than cut it
/// where the client could not go on).
async fn whole(
    backend: &dyn Backend,
    spec: &QuerySpec,
    transaction: Option<&TransactionId>,
) -> Result<QueryBatch, Error> {
    let wanted = spec.limit.unwrap_or(usize::MAX);
    let mut read = QuerySpec {
        limit: Some(FIRST_LOOKUP.min(wanted)),
        ..spec.clone()
    };
    loop {
        let answer = backend.run_query(&read, transaction).await?;
        let limit = read.limit.unwrap_or(usize::MAX);
        let got = answer.results.len();
        if !answer.more_results || got < limit || limit >= wanted || got == 0 {
            return Ok(answer);
        }
        let bytes: usize = answer.results.iter().map(result_bytes).sum();
        let fit = ANSWER_BYTES / (bytes / got).max(1);
        let next = fit.saturating_add(1).min(wanted);
        if next <= limit {
            return Ok(answer);
        }
        read.limit = Some(next);
    }
}

/// About the bytes a result takes in a batch.
fn result_bytes(result: &QueryResult) -> usize {
    result.properties.encoded_size() + 64
}

/// Whether the service resumes `spec` from a cursor: not past an order after the key, which
/// orders nothing (the results of one key come in no order a cursor could hold).
fn resumable(spec: &QuerySpec) -> bool {
    let resumed = QuerySpec {
        start_cursor: Some(Vec::new()),
        ..spec.clone()
    };
    !matches!(check_query(&resumed), Err(QueryRule::OrderAfterKey { .. }))
}

/// Results in one batch of a query's answer.
fn response_batch() -> usize {
    response::BATCH
}

/// The rows every aggregation of one request reads, as the service reads them from one index:
/// with several aggregations, those of a query's entities that hold every property summed or
/// averaged, one per combination of their values (a projection of them), unless a filter fixes
/// one by equality or the query is a projection already.
fn shared_rows(spec: QuerySpec, aggregations: &[(String, Aggregation)]) -> QuerySpec {
    if aggregations.len() < 2 || spec.shape != ResultShape::Full {
        return spec;
    }
    let mut properties: Vec<String> = Vec::new();
    for (_, aggregation) in aggregations {
        if let Aggregation::Sum(p) | Aggregation::Avg(p) = aggregation
            && !properties.contains(p)
        {
            properties.push(p.clone());
        }
    }
    let fixed = spec.filters.iter().flat_map(FilterNode::leaves).any(|f| {
        matches!(f.op, Operator::Equal | Operator::In) && properties.contains(&f.property)
    });
    match properties.is_empty() || fixed || properties.iter().any(|p| p == KEY_PROPERTY) {
        true => spec,
        false => QuerySpec {
            shape: ResultShape::Projection(properties),
            ..spec
        },
    }
}
