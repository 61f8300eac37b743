//! The storage backends, behind one small trait that mirrors the service's own calls
//! (lookup, commit, run query, begin/rollback transaction, allocate/reserve ids).
//!
//! Everything typed (`Db`, queries, transactions) is built once above this trait, so the
//! embedded engine and the cloud client share all of it.

use std::fmt;
use std::future::Future;
use std::pin::Pin;

use crate::entity::Schema;
use crate::property::{Direction, Operator};
use crate::value::{PropertyMap, Timestamp, Value};
use crate::{Error, PartitionId, RawKey};

#[cfg(feature = "cloud")]
pub mod cloud;
pub mod embedded;

/// A boxed future, so the trait can be used as `dyn Backend`.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

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
        /// past versions refuses it with [`Error::Unsupported`]).
        read_time: Option<Timestamp>,
    },
}

/// One write of a commit.
#[derive(Debug, Clone, PartialEq)]
pub enum Mutation {
    /// Create; fails with [`Error::AlreadyExists`] if the key exists. An incomplete key gets an id.
    Insert(RawKey, PropertyMap),
    /// Replace; fails with [`Error::NotFound`] if the key does not exist.
    Update(RawKey, PropertyMap),
    /// Create or replace. An incomplete key gets an id.
    Upsert(RawKey, PropertyMap),
    /// Remove (removing a missing key is not an error).
    Delete(RawKey),
}

impl Mutation {
    /// The key the mutation writes.
    pub fn key(&self) -> &RawKey {
        match self {
            Mutation::Insert(k, _) | Mutation::Update(k, _) | Mutation::Upsert(k, _) => k,
            Mutation::Delete(k) => k,
        }
    }
}

/// A property filter of a query.
#[derive(Debug, Clone, PartialEq)]
pub struct PropertyFilter {
    /// The property (dotted path inside embedded entities).
    pub property: String,
    /// The comparison.
    pub op: Operator,
    /// The operand.
    pub value: Value,
}

/// A query's filter: property filters combined with AND and OR, nested.
#[derive(Debug, Clone, PartialEq)]
pub enum FilterNode {
    /// One property filter.
    Property(PropertyFilter),
    /// Every filter holds.
    And(Vec<FilterNode>),
    /// At least one filter holds.
    Or(Vec<FilterNode>),
}

impl FilterNode {
    /// Every property filter of the tree, depth first.
    pub fn leaves(&self) -> Box<dyn Iterator<Item = &PropertyFilter> + '_> {
        match self {
            FilterNode::Property(f) => Box::new(std::iter::once(f)),
            FilterNode::And(nodes) | FilterNode::Or(nodes) => {
                Box::new(nodes.iter().flat_map(FilterNode::leaves))
            }
        }
    }

    /// Every property filter of the tree, mutably.
    pub(crate) fn leaves_mut(&mut self, visit: &mut dyn FnMut(&mut PropertyFilter)) {
        match self {
            FilterNode::Property(f) => visit(f),
            FilterNode::And(nodes) | FilterNode::Or(nodes) => {
                nodes.iter_mut().for_each(|n| n.leaves_mut(visit))
            }
        }
    }
}

impl From<PropertyFilter> for FilterNode {
    fn from(filter: PropertyFilter) -> FilterNode {
        FilterNode::Property(filter)
    }
}

impl fmt::Display for FilterNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (nodes, op) = match self {
            FilterNode::Property(p) => {
                return write!(f, "{} {} {:?}", p.property, p.op.symbol(), p.value);
            }
            FilterNode::And(nodes) => (nodes, " AND "),
            FilterNode::Or(nodes) => (nodes, " OR "),
        };
        f.write_str("(")?;
        for (i, node) in nodes.iter().enumerate() {
            if i > 0 {
                f.write_str(op)?;
            }
            write!(f, "{node}")?;
        }
        f.write_str(")")
    }
}

/// A sort order of a query.
#[derive(Debug, Clone, PartialEq)]
pub struct PropertyOrder {
    /// The property (dotted path inside embedded entities).
    pub property: String,
    /// The direction.
    pub direction: Direction,
}

/// What to return for each result.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum ResultShape {
    /// Keys and all properties.
    #[default]
    Full,
    /// Keys only (R-Q1).
    KeysOnly,
    /// Keys and these indexed properties only (R-Q2).
    Projection(Vec<String>),
}

/// A query, as the service receives it. There is no offset: positions are cursors (R-Q3).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct QuerySpec {
    /// The partition (namespace) queried.
    pub partition: PartitionId,
    /// The kind.
    pub kind: String,
    /// Only entities under this key (strongly consistent, R-E1).
    pub ancestor: Option<RawKey>,
    /// Filters, combined with AND (each may combine others with AND and OR).
    pub filters: Vec<FilterNode>,
    /// Sort orders, most significant first.
    pub orders: Vec<PropertyOrder>,
    /// What each result holds.
    pub shape: ResultShape,
    /// At most this many results.
    pub limit: Option<usize>,
    /// Start after this position.
    pub start_cursor: Option<Vec<u8>>,
    /// Stop at this position.
    pub end_cursor: Option<Vec<u8>>,
}

/// What an aggregation query computes over the rows of its query.
#[derive(Debug, Clone, PartialEq)]
pub enum Aggregation {
    /// How many rows, counting at most `up_to` when given.
    Count {
        /// Stop counting here.
        up_to: Option<u64>,
    },
    /// The sum of a property's numeric values: an integer, or a double when any value is a
    /// double (or an integer sum overflows); non-numeric values are ignored.
    Sum(String),
    /// The mean of a property's numeric values, null when there are none.
    Avg(String),
}

/// One query result.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryResult {
    /// The entity's key.
    pub key: RawKey,
    /// Its properties (empty for keys-only; the projected ones for a projection).
    pub properties: PropertyMap,
    /// The position just after this result: a query resumed from it starts with the next one.
    pub cursor: Vec<u8>,
}

/// One batch of query results.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryBatch {
    /// The results, in order.
    pub results: Vec<QueryResult>,
    /// The position after the last result.
    pub end_cursor: Vec<u8>,
    /// Whether more results may follow `end_cursor`.
    pub more_results: bool,
}

/// A storage backend: the service's calls, untyped.
pub trait Backend: Send + Sync + 'static {
    /// Reads entities by key: one slot per key, in the order of `keys` (R-A1).
    fn lookup<'a>(
        &'a self,
        keys: &'a [RawKey],
        transaction: Option<&'a TransactionId>,
    ) -> BoxFuture<'a, Result<Vec<Option<PropertyMap>>, Error>>;

    /// Applies all mutations atomically, or none. Returns each mutation's complete key
    /// (allocated ids filled in). With a transaction, also ends it.
    fn commit<'a>(
        &'a self,
        mutations: Vec<Mutation>,
        transaction: Option<&'a TransactionId>,
    ) -> BoxFuture<'a, Result<Vec<RawKey>, Error>>;

    /// Runs a query and returns one batch.
    fn run_query<'a>(
        &'a self,
        query: &'a QuerySpec,
        transaction: Option<&'a TransactionId>,
    ) -> BoxFuture<'a, Result<QueryBatch, Error>>;

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
}
