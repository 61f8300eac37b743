//! The Datastore API's requests in the backends' vocabulary: keys, entities, read options,
//! queries, aggregations and mutations, each checked as the service checks it; and the
//! backends' errors as the statuses the service gives (with the messages Google's clients, and
//! this crate's cloud backend, recognise). What the
//! backends cannot do is refused with the status the service gives a request it cannot serve,
//! never ignored.

use std::borrow::Cow;
use std::sync::Arc;

use gcloud_sdk::google::datastore::v1 as pb;
use tonic::{Code, Status};

use datastore_entity::backend::cloud::wire::{Partitions, checked_timestamp};
use datastore_entity::backend::cloud::wire_form::from_wire;
use datastore_entity::backend::cloud::wire_map::property_from_wire;
use datastore_entity::backend::{
    Aggregation, Change, Condition, Distance, FilterNode, FindNearest, Mask, Mutation, OnConflict,
    PropertyFilter, PropertyOrder, PropertyTransform, QuerySpec, ResultShape, TransactionId,
    TransactionMode, TransformKind,
};
use datastore_entity_core::error::{Error, ServiceCode, cut};
use datastore_entity_core::model::key::{KEY_PROPERTY, PartitionId, RawKey};
use datastore_entity_core::model::name::is_reserved_name;
use datastore_entity_core::model::scalar::Timestamp;
use datastore_entity_core::model::schema::Direction;
use datastore_entity_core::model::value::{PropertyMap, Value};
use datastore_entity_core::query::spec::Operator;

/// An error as the service's status.
pub(crate) fn status(error: Error) -> Status {
    let message = bounded(error.to_string());
    match error {
        // A version the entity never had: the service's argument error.
        Error::Conflict {
            expected, stored, ..
        } if stored > 0 && expected > stored => {
            Status::invalid_argument("Invalid base version, it is greater than the stored version.")
        }
        Error::Conflict {
            key,
            expected,
            stored,
        } => Status::failed_precondition(format!(
            "the stored version ({stored}) does not match the required base version \
             ({expected}) of {key}"
        )),
        Error::AlreadyExists { key } => {
            Status::already_exists(format!("entity already exists: {key}"))
        }
        Error::NotFound { key } => Status::not_found(format!("no entity to update: {key}")),
        Error::Aborted { reason } => Status::aborted(reason),
        Error::TransactionClosed => Status::invalid_argument("Transaction is invalid or closed."),
        Error::MissingIndex { index_yaml, .. } => Status::failed_precondition(format!(
            "no matching index found. recommended index is:\n{index_yaml}"
        )),
        Error::Service { code, message } => Status::new(code_of(code), message),
        Error::Unavailable { reason } => Status::unavailable(reason),
        Error::Storage { .. } | Error::Internal { .. } => Status::internal(message),
        Error::Unsupported { .. } => Status::unimplemented(message),
        Error::Credentials { .. } => Status::unauthenticated(message),
        _ => Status::invalid_argument(message),
    }
}

fn code_of(code: ServiceCode) -> Code {
    match code {
        ServiceCode::Ok => Code::Ok,
        ServiceCode::Cancelled => Code::Cancelled,
        ServiceCode::Unknown => Code::Unknown,
        ServiceCode::InvalidArgument => Code::InvalidArgument,
        ServiceCode::DeadlineExceeded => Code::DeadlineExceeded,
        ServiceCode::NotFound => Code::NotFound,
        ServiceCode::AlreadyExists => Code::AlreadyExists,
        ServiceCode::PermissionDenied => Code::PermissionDenied,
        ServiceCode::ResourceExhausted => Code::ResourceExhausted,
        ServiceCode::FailedPrecondition => Code::FailedPrecondition,
        ServiceCode::Aborted => Code::Aborted,
        ServiceCode::OutOfRange => Code::OutOfRange,
        ServiceCode::Unimplemented => Code::Unimplemented,
        ServiceCode::Internal => Code::Internal,
        ServiceCode::Unavailable => Code::Unavailable,
        ServiceCode::DataLoss => Code::DataLoss,
        ServiceCode::Unauthenticated => Code::Unauthenticated,
        // The service's statuses are the seventeen above; a later one reads as unknown.
        _ => Code::Unknown,
    }
}

/// `INVALID_ARGUMENT`, as the service answers a request it cannot read.
pub(super) fn invalid(message: impl Into<String>) -> Status {
    Status::invalid_argument(bounded(message.into()))
}

/// The longest message a status carries: past it, clients refuse the answer's metadata.
const MAX_MESSAGE: usize = 1_000;

/// `message`, cut to [`MAX_MESSAGE`] bytes where it quotes a long input in full.
fn bounded(message: String) -> String {
    if message.len() <= MAX_MESSAGE {
        return message;
    }
    let mut end = MAX_MESSAGE - 40;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &message[..end], message.len())
}

/// The project and database a request is addressed to: every key in it must be theirs.
pub(super) struct Scope {
    pub(super) partitions: Arc<Partitions>,
}

/// How a read reads.
pub(super) enum Read {
    /// The latest committed data.
    Now,
    /// In a transaction begun before.
    In(TransactionId),
    /// In a transaction this read begins (the service's `new_transaction`).
    Begin(TransactionMode),
    /// From one snapshot, of a moment or of now (a read-only transaction, ended after).
    Snapshot(Option<Timestamp>),
}

/// What a query asks for besides its spec: results to skip first, at most how many, and the
/// properties whose values each result must be the first of (`distinct_on`).
pub(super) struct Paging {
    pub(super) offset: usize,
    pub(super) limit: Option<usize>,
    pub(super) distinct: Vec<String>,
    /// The query cannot be resumed from a cursor (an order after the key, which orders
    /// nothing): its answer is one batch, as the service answers it.
    pub(super) whole: bool,
}

impl Scope {
    /// The scope of a request to `project_id`'s database `database_id`.
    pub(super) fn new(project_id: &str, database_id: &str) -> Result<Scope, Status> {
        if project_id.is_empty() {
            return Err(invalid("The project_id of the request is required."));
        }
        Ok(Scope {
            partitions: Arc::new(Partitions::new(project_id, database_id)),
        })
    }

    /// The partition a query names (its namespace), in this scope.
    pub(super) fn partition(&self, given: Option<pb::PartitionId>) -> Result<PartitionId, Status> {
        let given = given.unwrap_or_default();
        let partition = PartitionId {
            project_id: self.partitions.project_id.clone(),
            database_id: self.partitions.database_id.clone(),
            namespace: given.namespace_id,
        };
        self.check_partition(&given.project_id, &given.database_id)?;
        Ok(partition)
    }

    fn check_partition(&self, project_id: &str, database_id: &str) -> Result<(), Status> {
        if !project_id.is_empty() && project_id != self.partitions.project_id {
            return Err(invalid(format!(
                "mismatched partition: the key's project \"{project_id}\" is not the request's \
                 \"{}\"",
                self.partitions.project_id
            )));
        }
        if !database_id.is_empty() && database_id != self.partitions.database_id {
            return Err(invalid(format!(
                "mismatched partition: the key's database \"{database_id}\" is not the \
                 request's \"{}\"",
                self.partitions.database_id
            )));
        }
        Ok(())
    }

    /// A key of this scope.
    pub(super) fn key(&self, key: pb::Key) -> Result<RawKey, Status> {
        if let Some(p) = &key.partition_id {
            self.check_partition(&p.project_id, &p.database_id)?;
        }
        if key.path.is_empty() {
            return Err(invalid("A key must have at least one path element."));
        }
        self.partitions.raw_key(key).map_err(status)
    }

    /// Complete keys of this scope (a lookup's, a reservation's).
    pub(super) fn complete_keys(&self, keys: Vec<pb::Key>) -> Result<Vec<RawKey>, Status> {
        keys.into_iter()
            .map(|key| {
                let key = self.key(key)?;
                match key.is_complete() {
                    true => Ok(key),
                    false => Err(invalid(format!("The key {key:?} is incomplete."))),
                }
            })
            .collect()
    }

    /// An entity's key and properties.
    fn written(&self, entity: Option<pb::Entity>) -> Result<(RawKey, PropertyMap), Status> {
        let entity = entity.ok_or_else(|| invalid("A mutation needs an entity."))?;
        let key = entity
            .key
            .ok_or_else(|| invalid("An entity in a mutation needs a key."))?;
        let key = self.key(key)?;
        for (name, value) in &entity.properties {
            filled(name, value)?;
        }
        let properties = from_wire(entity.properties, &self.partitions).map_err(status)?;
        Ok((key, properties))
    }

    /// A value of a filter, a transform or a search.
    fn value(&self, value: Option<pb::Value>) -> Result<Value, Status> {
        let value = value.ok_or_else(|| invalid("A value is required."))?;
        property_from_wire(value, &self.partitions)
            .map(|p| p.value)
            .map_err(status)
    }

    /// How a lookup, a query or an aggregation reads.
    pub(super) fn read(&self, options: Option<pb::ReadOptions>) -> Result<Read, Status> {
        use pb::read_options::ConsistencyType as C;
        Ok(match options.and_then(|o| o.consistency_type) {
            // Strong and eventual alike: the backends read the latest commit.
            None | Some(C::ReadConsistency(_)) => Read::Now,
            Some(C::Transaction(id)) => Read::In(TransactionId(id)),
            Some(C::NewTransaction(options)) => Read::Begin(transaction_mode(options)?),
            Some(C::ReadTime(t)) => Read::Snapshot(Some(time(&t)?)),
        })
    }

    /// A query, and how many results to skip and return.
    pub(super) fn query(
        &self,
        partition: Option<pb::PartitionId>,
        query: pb::Query,
    ) -> Result<(QuerySpec, Paging), Status> {
        let partition = self.partition(partition)?;
        let kind = match query.kind.as_slice() {
            [kind] if !kind.name.is_empty() => kind.name.clone(),
            // A kindless query: every kind.
            [] => String::new(),
            [_] => return Err(invalid("The kind is the empty string.")),
            _ => return Err(invalid("A query can only have one kind.")),
        };
        let distinct: Vec<String> = query
            .distinct_on
            .into_iter()
            .map(|p| reference(Some(p)))
            .collect::<Result<_, _>>()?;
        let mut spec = QuerySpec {
            partition,
            kind,
            ..QuerySpec::default()
        };
        if let Some(filter) = query.filter {
            self.top_filter(filter, &mut spec)?;
        }
        spec.orders = query
            .order
            .into_iter()
            .map(|o| {
                let direction = match pb::property_order::Direction::try_from(o.direction) {
                    Ok(pb::property_order::Direction::Descending) => Direction::Descending,
                    _ => Direction::Ascending,
                };
                Ok(PropertyOrder {
                    property: reference(o.property)?,
                    direction,
                })
            })
            .collect::<Result<_, Status>>()?;
        let projected: Vec<String> = query
            .projection
            .into_iter()
            .map(|p| reference(p.property))
            .collect::<Result<_, Status>>()?;
        spec.shape = match projected.iter().all(|p| p == KEY_PROPERTY) {
            true if !projected.is_empty() => ResultShape::KeysOnly,
            true => ResultShape::Full,
            false => ResultShape::Projection(
                projected
                    .into_iter()
                    .filter(|p| p != KEY_PROPERTY)
                    .collect(),
            ),
        };
        spec.start_cursor = Some(query.start_cursor).filter(|c| !c.is_empty());
        spec.end_cursor = Some(query.end_cursor).filter(|c| !c.is_empty());
        let offset = usize::try_from(query.offset)
            .map_err(|_| invalid("The offset of a query cannot be negative."))?;
        let limit = query
            .limit
            .map(|l| {
                usize::try_from(l).map_err(|_| invalid("The limit of a query cannot be negative."))
            })
            .transpose()?;
        if let Some(nearest) = query.find_nearest {
            spec.find_nearest = Some(self.find_nearest(nearest)?);
        }
        // The distinct properties lead the order: given first, or implied.
        if !distinct.is_empty() {
            let leading = spec.orders.iter().take(distinct.len());
            if spec.orders.is_empty() {
                spec.orders = distinct
                    .iter()
                    .map(|p| PropertyOrder {
                        property: p.clone(),
                        direction: Direction::Ascending,
                    })
                    .collect();
            } else if leading.len() < distinct.len()
                || !leading.into_iter().all(|o| distinct.contains(&o.property))
            {
                return Err(invalid(
                    "The properties of distinct_on must be the first properties of the order.",
                ));
            }
        }
        spec.distinct_on = distinct.clone();
        Ok((
            spec,
            Paging {
                offset,
                limit,
                distinct,
                whole: false,
            },
        ))
    }

    /// The top-level filter: an AND's members (an ancestor among them) or one filter.
    fn top_filter(&self, filter: pb::Filter, spec: &mut QuerySpec) -> Result<(), Status> {
        use pb::filter::FilterType;
        let members = match filter.filter_type {
            Some(FilterType::CompositeFilter(c))
                if c.op == pb::composite_filter::Operator::And as i32 =>
            {
                c.filters
            }
            other => vec![pb::Filter { filter_type: other }],
        };
        for member in members {
            match &member.filter_type {
                Some(FilterType::PropertyFilter(p))
                    if p.op == pb::property_filter::Operator::HasAncestor as i32 =>
                {
                    let Value::Key(ancestor) = &self.value(p.value.clone())? else {
                        return Err(invalid("An ancestor filter takes a key."));
                    };
                    if spec.ancestor.replace(ancestor.clone()).is_some() {
                        return Err(invalid("A query can have only one ancestor filter."));
                    }
                }
                _ => spec.filters.push(self.filter(member)?),
            }
        }
        Ok(())
    }

    fn filter(&self, filter: pb::Filter) -> Result<FilterNode, Status> {
        use pb::composite_filter::Operator as Composite;
        use pb::filter::FilterType;
        use pb::property_filter::Operator as Op;
        match filter.filter_type {
            None => Err(invalid("A filter is empty.")),
            Some(FilterType::CompositeFilter(c)) => {
                let nodes = c
                    .filters
                    .into_iter()
                    .map(|f| self.filter(f))
                    .collect::<Result<Vec<_>, _>>()?;
                if nodes.is_empty() {
                    return Err(invalid("A composite filter needs at least one filter."));
                }
                match Composite::try_from(c.op) {
                    Ok(Composite::And) => Ok(FilterNode::And(nodes)),
                    Ok(Composite::Or) => Ok(FilterNode::Or(nodes)),
                    _ => Err(invalid("A composite filter's operator is unspecified.")),
                }
            }
            Some(FilterType::PropertyFilter(p)) => {
                let op = match Op::try_from(p.op) {
                    Ok(Op::Equal) => Operator::Equal,
                    Ok(Op::LessThan) => Operator::LessThan,
                    Ok(Op::LessThanOrEqual) => Operator::LessThanOrEqual,
                    Ok(Op::GreaterThan) => Operator::GreaterThan,
                    Ok(Op::GreaterThanOrEqual) => Operator::GreaterThanOrEqual,
                    Ok(Op::NotEqual) => Operator::NotEqual,
                    Ok(Op::In) => Operator::In,
                    Ok(Op::NotIn) => Operator::NotIn,
                    Ok(Op::HasAncestor) => {
                        return Err(invalid(
                            "An ancestor filter can only be at the top level, or in its AND.",
                        ));
                    }
                    _ => return Err(invalid("A property filter's operator is unspecified.")),
                };
                Ok(FilterNode::Property(PropertyFilter {
                    property: reference(p.property)?,
                    op,
                    value: self.value(p.value)?,
                }))
            }
        }
    }

    fn find_nearest(&self, nearest: pb::FindNearest) -> Result<FindNearest, Status> {
        use pb::find_nearest::DistanceMeasure as M;
        let Value::Vector(vector) = &self.value(nearest.query_vector)? else {
            return Err(invalid(
                "The query vector of find_nearest is an array of doubles with meaning 31.",
            ));
        };
        let measure = match M::try_from(nearest.distance_measure) {
            Ok(M::Euclidean) => Distance::Euclidean,
            Ok(M::Cosine) => Distance::Cosine,
            Ok(M::DotProduct) => Distance::DotProduct,
            _ => return Err(invalid("find_nearest needs a distance measure.")),
        };
        let limit = nearest
            .limit
            .and_then(|l| usize::try_from(l).ok())
            .ok_or_else(|| invalid("find_nearest needs a positive limit."))?;
        Ok(FindNearest {
            property: reference(nearest.vector_property)?,
            vector: vector.clone(),
            measure,
            limit,
            distance_property: Some(nearest.distance_result_property).filter(|p| !p.is_empty()),
            threshold: nearest.distance_threshold,
        })
    }

    /// An aggregation query's query and aggregations, each with its alias.
    pub(super) fn aggregation(
        &self,
        partition: Option<pb::PartitionId>,
        query: pb::AggregationQuery,
    ) -> Result<(QuerySpec, Vec<(String, Aggregation)>), Status> {
        use pb::aggregation_query::aggregation::Operator as Op;
        let Some(pb::aggregation_query::QueryType::NestedQuery(nested)) = query.query_type else {
            return Err(invalid("An aggregation query needs a nested query."));
        };
        let (mut spec, paging) = self.query(partition, nested)?;
        if paging.offset > 0 || !paging.distinct.is_empty() {
            return Err(Status::unimplemented(
                "An offset or distinct_on in an aggregation's query is not served by this server.",
            ));
        }
        spec.limit = paging.limit;
        if query.aggregations.is_empty() {
            return Err(invalid(
                "An aggregation query needs at least one aggregation.",
            ));
        }
        if query.aggregations.len() > MAX_AGGREGATIONS {
            return Err(invalid(format!(
                "An aggregation query takes at most {MAX_AGGREGATIONS} aggregations, not {}.",
                query.aggregations.len()
            )));
        }
        let mut aggregations = Vec::with_capacity(query.aggregations.len());
        // The unnamed ones are named `property_1`, `property_2`… in their order.
        let mut unnamed = 0;
        for aggregation in query.aggregations {
            let alias = match aggregation.alias.is_empty() {
                true => {
                    unnamed += 1;
                    format!("property_{unnamed}")
                }
                false => aggregation.alias,
            };
            if is_reserved_name(&alias) {
                return Err(invalid(format!(
                    "The property.name \"{}\" is reserved.",
                    cut(&alias)
                )));
            }
            if aggregations.iter().any(|(a, _)| *a == alias) {
                return Err(invalid(format!(
                    "Aggregation aliases contain duplicate alias: {}.",
                    cut(&alias)
                )));
            }
            let operator = match aggregation.operator {
                Some(Op::Count(count)) => Aggregation::Count {
                    up_to: count
                        .up_to
                        .map(|n| {
                            // Zero counts nothing, as the service answers it.
                            u64::try_from(n).map_err(|_| {
                                invalid(
                                    "The `up_to` value in a COUNT aggregation must be greater than or equal to zero.",
                                )
                            })
                        })
                        .transpose()?,
                },
                Some(Op::Sum(sum)) => Aggregation::Sum(reference(sum.property)?),
                Some(Op::Avg(avg)) => Aggregation::Avg(reference(avg.property)?),
                None => return Err(invalid("An aggregation needs an operator.")),
            };
            aggregations.push((alias, operator));
        }
        Ok((spec, aggregations))
    }

    /// A mutation as a change.
    pub(super) fn change(&self, mutation: pb::Mutation) -> Result<Change, Status> {
        use pb::mutation::{ConflictDetectionStrategy as Detect, Operation};
        let mask = match mutation.property_mask {
            Some(mask) => Mask::Paths(
                mask.paths
                    .iter()
                    .map(|p| path(p))
                    .collect::<Result<_, _>>()?,
            ),
            None => Mask::Whole,
        };
        let written = match mutation.operation {
            None => return Err(invalid("A mutation needs an operation.")),
            Some(Operation::Insert(e)) => {
                let (key, properties) = self.written(Some(e))?;
                Mutation::Insert(key, properties, mask)
            }
            Some(Operation::Update(e)) => {
                let (key, properties) = self.written(Some(e))?;
                Mutation::Update(key, properties, mask)
            }
            Some(Operation::Upsert(e)) => {
                let (key, properties) = self.written(Some(e))?;
                Mutation::Upsert(key, properties, mask)
            }
            Some(Operation::Delete(key)) => Mutation::Delete(self.key(key)?),
        };
        // A condition that does not hold fails the commit (FAIL), or skips its change, the
        // stored entity kept (SERVER_VALUE, the service's default).
        let on_conflict = match pb::mutation::ConflictResolutionStrategy::try_from(
            mutation.conflict_resolution_strategy,
        ) {
            Ok(pb::mutation::ConflictResolutionStrategy::Fail) => OnConflict::Fail,
            _ => OnConflict::KeepStored,
        };
        let condition = match mutation.conflict_detection_strategy {
            None => None,
            Some(Detect::BaseVersion(v)) => {
                Some(Condition::Version(u64::try_from(v).map_err(|_| {
                    invalid("A base version cannot be negative.")
                })?))
            }
            Some(Detect::UpdateTime(t)) => Some(Condition::UpdateTime(time(&t)?)),
        };
        let transforms = mutation
            .property_transforms
            .into_iter()
            .map(|t| self.transform(t))
            .collect::<Result<_, _>>()?;
        Ok(Change {
            mutation: written,
            condition,
            on_conflict,
            transforms,
        })
    }

    fn transform(&self, transform: pb::PropertyTransform) -> Result<PropertyTransform, Status> {
        use pb::property_transform::{ServerValue, TransformType as T};
        let values = |array: pb::ArrayValue| {
            array
                .values
                .into_iter()
                .map(|v| self.value(Some(v)))
                .collect::<Result<Vec<_>, _>>()
        };
        let kind = match transform.transform_type {
            None => return Err(invalid("A property transform needs a transform.")),
            Some(T::SetToServerValue(v)) if v == ServerValue::RequestTime as i32 => {
                TransformKind::RequestTime
            }
            Some(T::SetToServerValue(_)) => {
                return Err(invalid("A server value transform needs a server value."));
            }
            Some(T::Increment(v)) => TransformKind::Increment(self.value(Some(v))?),
            Some(T::Maximum(v)) => TransformKind::Maximum(self.value(Some(v))?),
            Some(T::Minimum(v)) => TransformKind::Minimum(self.value(Some(v))?),
            Some(T::AppendMissingElements(a)) => TransformKind::AppendMissing(values(a)?),
            Some(T::RemoveAllFromArray(a)) => TransformKind::RemoveAll(values(a)?),
        };
        Ok(PropertyTransform {
            path: path(&transform.property)?,
            kind,
        })
    }
}

/// Refuses a value that holds nothing (no type set), at any depth, as the service does; and an
/// entity value with a key, which the engine would lose.
fn filled(name: &str, value: &pb::Value) -> Result<(), Status> {
    use pb::value::ValueType as V;
    match &value.value_type {
        None => Err(invalid(format!(
            "The value \"{name}\" does not contain a value."
        ))),
        Some(V::ArrayValue(array)) => array.values.iter().try_for_each(|v| filled(name, v)),
        Some(V::EntityValue(entity)) => entity
            .properties
            .iter()
            .try_for_each(|(inner, v)| filled(&format!("{name}.{inner}"), v)),
        Some(_) => Ok(()),
    }
}

/// The most aggregations one aggregation query takes (Firestore in Datastore mode).
const MAX_AGGREGATIONS: usize = 5;

/// A transaction's options as a mode.
pub(super) fn transaction_mode(options: pb::TransactionOptions) -> Result<TransactionMode, Status> {
    use pb::transaction_options::Mode;
    Ok(match options.mode {
        None => TransactionMode::ReadWrite { previous: None },
        Some(Mode::ReadWrite(rw)) => TransactionMode::ReadWrite {
            previous: Some(TransactionId(rw.previous_transaction)).filter(|t| !t.0.is_empty()),
        },
        Some(Mode::ReadOnly(ro)) => TransactionMode::ReadOnly {
            read_time: ro.read_time.as_ref().map(time).transpose()?,
        },
    })
}

/// A time the service accepts.
fn time(t: &gcloud_sdk::prost_types::Timestamp) -> Result<Timestamp, Status> {
    checked_timestamp(t).ok_or_else(|| invalid("A timestamp is out of the service's range."))
}

/// A property reference's name.
fn reference(reference: Option<pb::PropertyReference>) -> Result<String, Status> {
    match reference {
        Some(r) if !r.name.is_empty() => Ok(r.name),
        _ => Err(invalid("A property reference needs a property name.")),
    }
}

/// A property path as the service writes it: names joined by `.`, a name in backticks when it
/// is not a plain identifier (a backslash escapes the next character inside them).
pub(super) fn path(text: &str) -> Result<Vec<Cow<'static, str>>, Status> {
    let refuse = || invalid(format!("The property path \"{text}\" is malformed."));
    let mut names = Vec::new();
    let mut chars = text.chars().peekable();
    loop {
        let mut name = String::new();
        if chars.peek() == Some(&'`') {
            chars.next();
            loop {
                match chars.next().ok_or_else(refuse)? {
                    '`' => break,
                    '\\' => name.push(chars.next().ok_or_else(refuse)?),
                    c => name.push(c),
                }
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c == '.' {
                    break;
                }
                name.push(c);
                chars.next();
            }
        }
        if name.is_empty() {
            return Err(refuse());
        }
        names.push(Cow::Owned(name));
        match chars.next() {
            None => return Ok(names),
            Some('.') => continue,
            Some(_) => return Err(refuse()),
        }
    }
}
