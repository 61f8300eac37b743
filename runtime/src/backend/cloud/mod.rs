//! The Google Cloud backend: Firestore in Datastore mode (or Google's emulators) over gRPC,
//! with `gcloud-sdk`'s generated client and its Application Default Credentials.
//!
//! `connect.rs` makes the connection (TLS, credentials), `call.rs` each call (deadline,
//! retries, errors, tracing), `convert.rs` the protobuf messages. The service's limits are
//! handled here so users never meet them by surprise: lookups over 1,000 keys are split, and
//! `deferred` keys fetched again until none remain; query batches that are `NOT_FINISHED`
//! continue; a commit is checked by `rules::commit` before it is sent (an entity over 1 MiB,
//! over 10 MiB…). Every call carries the routing header with the project and database.

mod call;
pub(crate) mod connect;
mod convert;
#[doc(hidden)]
pub mod wire;
#[doc(hidden)]
pub mod wire_form;
#[doc(hidden)]
pub mod wire_map;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use gcloud_sdk::google::datastore::v1 as pb;

use self::call::{About, Calls, Client, Sending};
use super::{
    Change, ChangeResult, Committed, Condition, FoundStamped, Mutation, OnConflict, Stamp,
    TransactionId, TransactionMode,
};
use crate::backend::cloud::wire::{Partitions, from_timestamp};
use crate::backend::cloud::wire_form::from_wire;
use crate::backend::cloud::wire_map::value_from_wire;
use datastore_entity_core::error::{Error, ServiceCode};
use datastore_entity_core::model::key::{IdOrName, KeyId, PathElement, RawKey};
use datastore_entity_core::model::schema::IndexSchema;
use datastore_entity_core::model::value::{PropertyMap, Value};
use datastore_entity_core::query::spec::{Aggregation, QueryBatch, QueryResult, QuerySpec};
use datastore_entity_core::query_rule::QueryRule;
use datastore_entity_core::rules::commit::check_commit;

/// The most entity groups legacy Datastore took in one transaction.
const MAX_LEGACY_GROUPS: usize = 25;

/// How many entity groups (roots) `keys` write: a root key without its id is a new group.
fn entity_groups(keys: &[RawKey]) -> usize {
    let new_roots = keys
        .iter()
        .filter(|k| !k.is_complete() && k.path().len() == 1);
    let mut roots: Vec<&PathElement> = keys
        .iter()
        .filter(|k| k.is_complete() || k.path().len() > 1)
        .filter_map(|k| k.path().first())
        .collect();
    roots.sort_unstable();
    roots.dedup();
    roots.len() + new_roots.count()
}

/// The most keys the service looks up in one call.
const MAX_LOOKUP_KEYS: usize = 1_000;

/// The most keys `allocate_ids` / `reserve_ids` send in one call.
const MAX_ID_KEYS: usize = 500;

/// Google Cloud Firestore in Datastore mode (or an emulator of it), over gRPC.
pub struct Cloud {
    calls: Calls,
    partitions: Arc<Partitions>,
    /// Whether a transaction's first read begins it (one round trip less).
    begin_with_reads: bool,
    /// Whether an aggregation that is asked to begin a transaction does (the Firestore
    /// emulator's returns none: then transactions begin on their own before aggregations).
    aggregations_begin: AtomicBool,
    /// The composite indexes of each kind written, as the types that write it declare them
    /// (`Backend::declare`): what R-I5 counts before a commit is sent.
    indexes: std::sync::Mutex<HashMap<&'static str, Vec<&'static IndexSchema>>>,
    /// Whether the server refused a transaction over more than 25 entity groups, as legacy
    /// Datastore did (its emulator still does; Firestore in Datastore mode has no such
    /// limit): then a commit over more groups is sent non-transactionally.
    groups_limited: AtomicBool,
    /// Whether the server knows the service's newer surface (property transforms, property
    /// masks): learnt from the first answer that tells (Firestore in Datastore mode reports a
    /// read time with every lookup and a commit time with every commit; the legacy emulator
    /// neither, and drops transforms and masks it does not know — a transform-only update
    /// would then replace the entity with nothing).
    newer_surface: std::sync::OnceLock<bool>,
}

impl Cloud {
    /// A backend on the connection `settings` open.
    pub(crate) async fn connect(settings: connect::Settings) -> Result<Cloud, Error> {
        let connection = settings.connect().await?;
        Ok(Cloud {
            calls: connection.calls,
            partitions: connection.partitions,
            begin_with_reads: connection.begin_with_reads,
            aggregations_begin: AtomicBool::new(true),
            indexes: std::sync::Mutex::default(),
            groups_limited: AtomicBool::new(false),
            newer_surface: std::sync::OnceLock::new(),
        })
    }

    /// The key a refused commit's `ALREADY_EXISTS` (`exists`) or `NOT_FOUND` is about, named
    /// as the embedded engine names it: the one candidate, or the first of them found (or
    /// missing) by a lookup after the refusal; the service's message when none is.
    async fn named(&self, candidates: &[RawKey], exists: bool, message: String) -> String {
        if let [key] = candidates {
            return format!("{key:?}");
        }
        let found = match self.lookup_keys(candidates, Reading::Outside).await {
            Ok((_, found)) => found,
            Err(_) => return message,
        };
        candidates
            .iter()
            .zip(found)
            .find(|(_, found)| found.is_some() == exists)
            .map_or(message, |(key, _)| format!("{key:?}"))
    }

    /// The rules of a commit (`rules::commit`), checked before it is sent.
    fn check(&self, mutations: &[Mutation]) -> Result<(), Error> {
        let indexes = self.indexes.lock().unwrap_or_else(|e| e.into_inner());
        check_commit(mutations, |m| {
            indexes.get(m.key().kind()).cloned().unwrap_or_default()
        })
    }

    /// The project and database entities are written for (in the wire form).
    pub(crate) fn partitions(&self) -> &Partitions {
        &self.partitions
    }
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

/// What a query's call is about.
fn about_query<'q>(rpc: &'static str, query: &'q QuerySpec) -> About<'q> {
    About {
        rpc,
        sending: Sending::Idempotent,
        namespace: &query.partition.namespace,
        kind: &query.kind,
        count: 0,
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
        Error::Service {
            code: ServiceCode::InvalidArgument,
            message,
        } => {
            let lower = message.to_lowercase();
            if lower.contains("cursor") || (has_cursor && lower.contains("protocol message")) {
                Error::InvalidCursor { reason: message }
            } else {
                Error::InvalidQuery {
                    kind: kind.to_owned(),
                    rule: QueryRule::ByService { message },
                }
            }
        }
        other => other,
    }
}

/// Where a read reads.
#[derive(Debug, Clone, Copy)]
enum Reading<'a> {
    /// Outside any transaction.
    Outside,
    /// In this transaction.
    In(&'a TransactionId),
    /// In a new transaction of this mode, which the read begins (`new_transaction`).
    Begin(&'a TransactionMode),
}

impl<'a> Reading<'a> {
    fn of(transaction: Option<&'a TransactionId>) -> Reading<'a> {
        transaction.map_or(Reading::Outside, Reading::In)
    }

    fn begins(self) -> bool {
        matches!(self, Reading::Begin(_))
    }

    /// The read once the transaction it began, if any, is `begun`.
    fn after(self, begun: Option<&'a TransactionId>) -> Reading<'a> {
        match (self, begun) {
            (Reading::Begin(_), Some(id)) => Reading::In(id),
            (read, _) => read,
        }
    }
}

/// The transaction a read that was to begin one began.
fn began(begun: Option<TransactionId>) -> Result<TransactionId, Error> {
    begun
        .filter(|id| !id.0.is_empty())
        .ok_or_else(|| Error::Service {
            code: ServiceCode::Internal,
            message: "a read asked to begin a transaction, and the service began none".to_owned(),
        })
}

/// The service's options of a transaction of `mode`.
fn transaction_options(mode: &TransactionMode) -> pb::TransactionOptions {
    let mode = match mode {
        TransactionMode::ReadWrite { previous } => {
            pb::transaction_options::Mode::ReadWrite(pb::transaction_options::ReadWrite {
                previous_transaction: previous.as_ref().map(|p| p.0.clone()).unwrap_or_default(),
            })
        }
        TransactionMode::ReadOnly { read_time } => {
            pb::transaction_options::Mode::ReadOnly(pb::transaction_options::ReadOnly {
                read_time: read_time.map(crate::backend::cloud::wire::timestamp),
            })
        }
    };
    pb::TransactionOptions { mode: Some(mode) }
}

impl Cloud {
    fn read_options(read: &Reading<'_>) -> Option<pb::ReadOptions> {
        use pb::read_options::ConsistencyType;
        let consistency = match read {
            Reading::Outside => return None,
            Reading::In(t) => ConsistencyType::Transaction(t.0.clone()),
            Reading::Begin(mode) => ConsistencyType::NewTransaction(transaction_options(mode)),
        };
        Some(pb::ReadOptions {
            consistency_type: Some(consistency),
        })
    }

    /// Looks `keys` up; a read that begins a transaction returns it.
    async fn lookup_keys(
        &self,
        keys: &[RawKey],
        read: Reading<'_>,
    ) -> Result<(Option<TransactionId>, FoundStamped), Error> {
        self.lookup_paths(keys, read, None).await
    }

    /// Looks `keys` up, only the properties at `paths` if given (the service's property mask).
    async fn lookup_paths(
        &self,
        keys: &[RawKey],
        read: Reading<'_>,
        paths: Option<&[Vec<std::borrow::Cow<'static, str>>]>,
    ) -> Result<(Option<TransactionId>, FoundStamped), Error> {
        let property_mask = paths.and_then(convert::read_mask);
        let mut begun: Option<TransactionId> = None;
        let mut found: HashMap<RawKey, (PropertyMap, Stamp)> = HashMap::with_capacity(keys.len());
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
                        // The rest of a lookup that began a transaction (other chunks,
                        // deferred keys) reads in it.
                        read_options: Self::read_options(&read.after(begun.as_ref())),
                        keys: std::mem::take(&mut pending),
                        property_mask: property_mask.clone(),
                        ..pb::LookupRequest::default()
                    }
                )?;
                if begun.is_none() && read.begins() {
                    begun = Some(TransactionId(response.transaction));
                }
                if matches!(read, Reading::Outside) {
                    // Firestore reports the time it read at outside a transaction.
                    let _ = self.newer_surface.set(response.read_time.is_some());
                }
                for result in response.found {
                    let Some(entity) = result.entity else {
                        continue;
                    };
                    let Some(key) = entity.key else { continue };
                    let key = self.partitions.raw_key(key)?;
                    let properties = from_wire(entity.properties, &self.partitions)?;
                    let stamp =
                        convert::stamp(result.version, result.create_time, result.update_time)?;
                    found.insert(key, (properties, stamp));
                }
                pending = response.deferred;
            }
        }
        Ok((begun, keys.iter().map(|k| found.get(k).cloned()).collect()))
    }

    /// Commits `changes` outside a transaction, in `transaction`, or (with `single_use`) in
    /// a transaction of that mode the commit itself begins and ends.
    async fn commit_mutations(
        &self,
        changes: Vec<Change>,
        transaction: Option<&TransactionId>,
        single_use: Option<&TransactionMode>,
    ) -> Result<Committed, Error> {
        let mut mutations = Vec::with_capacity(changes.len());
        let mut conditions = Vec::with_capacity(changes.len());
        let mut transforms = Vec::with_capacity(changes.len());
        for change in changes {
            mutations.push(change.mutation);
            conditions.push((change.condition, change.on_conflict));
            transforms.push(change.transforms);
        }
        self.check(&mutations)?;
        if transforms.iter().any(|t| !t.is_empty()) && !self.knows_transforms(&mutations).await? {
            return Err(Error::Unsupported {
                reason: "the server does not know property transforms (the legacy Datastore \
                         emulator: it would drop them, and a transform-only update would \
                         replace the entity with nothing); nothing was sent"
                    .to_owned(),
            });
        }
        let keys: Vec<RawKey> = mutations.iter().map(|m| m.key().clone()).collect();
        let inserted: Vec<RawKey> = mutations
            .iter()
            .filter(|m| matches!(m, Mutation::Insert(..)) && m.key().is_complete())
            .map(|m| m.key().clone())
            .collect();
        // A write that fails unless the entity does not exist (version 0) is sent as an
        // insert: the service's base version of an entity deleted is the delete's (the
        // Firestore emulator refuses version 0 there forever), where "does not exist" is
        // what version 0 means (the legacy emulator, which referees base versions).
        let create_only: Vec<bool> = mutations
            .iter()
            .zip(&conditions)
            .map(|(m, c)| {
                matches!(m, Mutation::Upsert(..) | Mutation::Insert(..))
                    && *c == (Some(Condition::Version(0)), OnConflict::Fail)
            })
            .collect();
        let updated: Vec<RawKey> = mutations
            .iter()
            .filter(|m| matches!(m, Mutation::Update(..)))
            .map(|m| m.key().clone())
            .collect();
        let mut requested = self.partitions.mutations(mutations);
        for (((mutation, &(condition, on_conflict)), transforms), &create) in requested
            .iter_mut()
            .zip(&conditions)
            .zip(&transforms)
            .zip(&create_only)
        {
            match create {
                true => convert::as_insert(mutation),
                false => convert::condition(mutation, condition, on_conflict),
            }
            mutation.property_transforms = convert::transforms(&self.partitions, transforms);
        }
        let conditions: Vec<Option<Condition>> = conditions.into_iter().map(|(c, _)| c).collect();
        use pb::commit_request::{Mode, TransactionSelector};
        // A commit of several mutations outside a transaction is made in a transaction of
        // its own: the service applies a non-transactional commit's mutations "not
        // necessarily all or none" (both emulators apply those before the one refused), and a
        // backend's commit is all or none.
        let own = TransactionMode::ReadWrite { previous: None };
        let many_groups =
            keys.len() > MAX_LEGACY_GROUPS && entity_groups(&keys) > MAX_LEGACY_GROUPS;
        let own_transaction = transaction.is_none()
            && single_use.is_none()
            && keys.len() > 1
            && !(many_groups && self.groups_limited.load(Ordering::Relaxed));
        let single_use = match own_transaction {
            true => Some(&own),
            false => single_use,
        };
        let sending = match (transaction, single_use) {
            (None, Some(_)) => Sending::Atomic,
            _ => Sending::Once,
        };
        let (mode, selector) = match (transaction, single_use) {
            (Some(t), _) => (
                Mode::Transactional,
                Some(TransactionSelector::Transaction(t.0.clone())),
            ),
            (None, Some(mode)) => (
                Mode::Transactional,
                Some(TransactionSelector::SingleUseTransaction(
                    transaction_options(mode),
                )),
            ),
            (None, None) => (Mode::NonTransactional, None),
        };
        let request = pb::CommitRequest {
            project_id: self.partitions.project_id.clone(),
            database_id: self.partitions.database_id.clone(),
            mode: mode as i32,
            mutations: requested,
            transaction_selector: selector,
            ..pb::CommitRequest::default()
        };
        // Kept to be sent again without the transaction, should the server limit one to 25
        // entity groups (only for commits over more, until the server has said so).
        let fallback = (own_transaction && many_groups).then(|| pb::CommitRequest {
            mode: Mode::NonTransactional as i32,
            transaction_selector: None,
            ..request.clone()
        });
        let mut response = call!(self, commit, about_keys("commit", sending, &keys), request);
        if let (Some(fallback), Err(Error::Service { code, message })) = (fallback, &response)
            && *code == ServiceCode::InvalidArgument
            && message.contains("entity groups")
        {
            tracing::debug!(
                "the server limits a transaction to 25 entity groups (legacy Datastore): \
                 commits over more are sent non-transactionally"
            );
            self.groups_limited.store(true, Ordering::Relaxed);
            response = call!(
                self,
                commit,
                about_keys("commit", Sending::Once, &keys),
                fallback
            );
        }
        let response = match response {
            Err(Error::Service { code, message }) if convert::is_conflict(code, &message) => {
                return Err(self.conflict(&keys, &conditions, message).await);
            }
            Err(Error::AlreadyExists { .. }) if create_only.contains(&true) => {
                let message = "an entity written only if it did not exist exists".to_owned();
                return Err(self.conflict(&keys, &conditions, message).await);
            }
            Err(Error::AlreadyExists { key }) => {
                return Err(Error::AlreadyExists {
                    key: self.named(&inserted, true, key).await,
                });
            }
            Err(Error::NotFound { key }) => {
                return Err(Error::NotFound {
                    key: self.named(&updated, false, key).await,
                });
            }
            other => other?,
        };
        let _ = self.newer_surface.set(response.commit_time.is_some());
        if response.mutation_results.len() != keys.len() {
            return Err(Error::Service {
                code: ServiceCode::Internal,
                message: format!(
                    "the service answered {} results for {} mutations",
                    response.mutation_results.len(),
                    keys.len()
                ),
            });
        }
        // A result carries a key only where the service allocated an id.
        let mut results = Vec::with_capacity(keys.len());
        for ((key, result), sent) in keys
            .into_iter()
            .zip(response.mutation_results)
            .zip(&transforms)
        {
            let key = match result.key {
                Some(allocated) => self.partitions.raw_key(allocated)?,
                None => key,
            };
            if result.transform_results.len() != sent.len() {
                // A server that does not know the field dropped it (the legacy emulator).
                return Err(Error::Unsupported {
                    reason: format!(
                        "the server applied the commit without its property transforms (it \
                         answered {} results for {}): it does not know them, as the legacy \
                         Datastore emulator; the rest of the commit was applied",
                        result.transform_results.len(),
                        sent.len()
                    ),
                });
            }
            let transform_results = result
                .transform_results
                .into_iter()
                .map(|v| value_from_wire(v, &self.partitions))
                .collect::<Result<_, Error>>()?;
            let stamp = convert::stamp(result.version, result.create_time, result.update_time)?;
            results.push(ChangeResult {
                key,
                stamp,
                transform_results,
                conflict_detected: result.conflict_detected,
            });
        }
        Ok(Committed {
            results,
            commit_time: response.commit_time.as_ref().map(from_timestamp),
        })
    }

    /// Whether the server knows property transforms: what its answers said so far, or, before
    /// any, what a lookup of the first key written says (one call, once per backend).
    async fn knows_transforms(&self, mutations: &[Mutation]) -> Result<bool, Error> {
        if let Some(known) = self.newer_surface.get() {
            return Ok(*known);
        }
        // A lookup needs a complete key: an incomplete one (an id to allocate) is probed with
        // the id 1 of its kind (reading it, there or not, changes nothing).
        let probe: Vec<RawKey> = mutations
            .iter()
            .take(1)
            .map(|m| match m.key().is_complete() {
                true => Ok(m.key().clone()),
                false => Ok(m.key().clone().completed(IdOrName::Id(KeyId::new(1)?))),
            })
            .collect::<Result<_, Error>>()?;
        self.lookup_keys(&probe, Reading::Outside).await?;
        Ok(self.newer_surface.get().copied().unwrap_or(false))
    }

    /// The conflict the service reported for a commit with `conditions`: the first
    /// conditioned entity found at another version (looked up again), else what the
    /// service's `message` says.
    async fn conflict(
        &self,
        keys: &[RawKey],
        conditions: &[Option<Condition>],
        message: String,
    ) -> Error {
        let conditioned: Vec<(&RawKey, u64)> = keys
            .iter()
            .zip(conditions)
            .filter_map(|(key, c)| c.map(|c| (key, convert::expected_version(c))))
            .collect();
        let looked_up: Vec<RawKey> = conditioned.iter().map(|(k, _)| (*k).clone()).collect();
        if let Ok((_, found)) = self.lookup_keys(&looked_up, Reading::Outside).await {
            let stored = found
                .iter()
                .map(|f| f.as_ref().map_or(0, |(_, s)| s.version));
            if let Some(((key, expected), stored)) = conditioned
                .iter()
                .zip(stored)
                .find(|((_, expected), stored)| expected != stored)
            {
                return Error::Conflict {
                    key: format!("{key:?}"),
                    expected: *expected,
                    stored,
                };
            }
        }
        let stored = convert::stored_version(&message).unwrap_or(0);
        match conditioned.first() {
            Some((key, expected)) => Error::Conflict {
                key: format!("{key:?}"),
                expected: *expected,
                stored,
            },
            None => Error::Conflict {
                key: message,
                expected: 0,
                stored,
            },
        }
    }

    /// Runs `spec`; a read that begins a transaction returns it.
    async fn query(
        &self,
        spec: &QuerySpec,
        read: Reading<'_>,
    ) -> Result<(Option<TransactionId>, QueryBatch), Error> {
        let mut begun: Option<TransactionId> = None;
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
                about_query("run_query", &spec),
                self.run_query_request(&spec, ask, read.after(begun.as_ref()), None)
            )
            .map_err(|e| {
                let has_cursor = spec.start_cursor.is_some() || spec.end_cursor.is_some();
                query_error(&spec.kind, has_cursor, e)
            })?;
            if begun.is_none() && read.begins() {
                begun = Some(TransactionId(response.transaction));
            }
            let batch = response.batch.unwrap_or_default();
            results.extend(convert::results(&self.partitions, batch.entity_results)?);
            let more = More::try_from(batch.more_results).unwrap_or(More::NoMoreResults);
            let enough = wanted.is_some_and(|w| results.len() > w);
            if more == More::NotFinished && !enough {
                // The service stopped early: go on from where it stopped.
                spec.start_cursor = Some(batch.end_cursor);
                continue;
            }
            break batch.end_cursor;
        };
        let batch = match wanted {
            Some(w) if results.len() > w => {
                results.truncate(w);
                // A page of none (a limit of 0) ends where it started.
                let end_cursor = match results.last() {
                    Some(last) => last.cursor.clone(),
                    None => start.unwrap_or_default(),
                };
                QueryBatch {
                    results,
                    end_cursor,
                    more_results: true,
                }
            }
            // Fewer than asked: the query is finished (the legacy emulator says "more after
            // the limit" whenever a limit is set, which cannot be true here).
            _ => QueryBatch {
                results,
                end_cursor,
                more_results: false,
            },
        };
        Ok((begun, batch))
    }

    /// Runs `aggregation` over `query`'s rows; a read that begins a transaction returns it.
    async fn aggregate(
        &self,
        query: &QuerySpec,
        aggregation: &Aggregation,
        read: Reading<'_>,
    ) -> Result<(Option<TransactionId>, Value), Error> {
        let response = call!(
            self,
            run_aggregation_query,
            about_query("run_aggregation_query", query),
            pb::RunAggregationQueryRequest {
                project_id: self.partitions.project_id.clone(),
                database_id: self.partitions.database_id.clone(),
                partition_id: Some(self.partitions.partition(&query.partition)),
                read_options: Self::read_options(&read),
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
        let begun = read.begins().then_some(TransactionId(response.transaction));
        match value {
            Some(value) => Ok((begun, value_from_wire(value, &self.partitions)?)),
            None => Err(Error::Service {
                code: ServiceCode::Internal,
                message: "the aggregation query returned no result".to_owned(),
            }),
        }
    }

    /// The request of one batch of `spec` (at most `limit` results), read as `read`, with the
    /// service's Query Explain when `explain` is set (`Some(analyze)`).
    fn run_query_request(
        &self,
        spec: &QuerySpec,
        limit: Option<usize>,
        read: Reading<'_>,
        explain: Option<bool>,
    ) -> pb::RunQueryRequest {
        pb::RunQueryRequest {
            project_id: self.partitions.project_id.clone(),
            database_id: self.partitions.database_id.clone(),
            partition_id: Some(self.partitions.partition(&spec.partition)),
            read_options: Self::read_options(&read),
            query_type: Some(pb::run_query_request::QueryType::Query(
                self.partitions.query(spec, limit),
            )),
            explain_options: explain.map(|analyze| pb::ExplainOptions { analyze }),
            property_mask: spec.property_mask.as_deref().and_then(convert::read_mask),
            ..pb::RunQueryRequest::default()
        }
    }
}

// After `call!`, which they use (a macro is seen by the modules declared after it).
mod calls;
pub(crate) mod hooks;
#[cfg(test)]
mod tests;
