//! The query vocabulary the backends receive, untyped: property filters combined with AND and
//! OR, orders, the shape of results, the query itself ([`QuerySpec`]), aggregations, and the
//! batches that come back. The typed descriptors (`descriptor.rs`) and the `Db`'s queries
//! build it; every backend answers it.

use std::borrow::Cow;
use std::fmt;

use crate::model::key::{KEY_PROPERTY, PartitionId, RawKey};
use crate::model::scalar::{Timestamp, Vector};
use crate::model::schema::Direction;
use crate::model::value::{PropertyMap, Value};

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operator {
    /// `=`
    Equal,
    /// `<`
    LessThan,
    /// `<=`
    LessThanOrEqual,
    /// `>`
    GreaterThan,
    /// `>=`
    GreaterThanOrEqual,
    /// `!=`
    NotEqual,
    /// `IN`: the operand is an array of the accepted values.
    In,
    /// `NOT IN`: the operand is an array of the refused values.
    NotIn,
}

impl Operator {
    /// Whether this is an inequality: a range, `!=` or `NOT IN`. The service reads an
    /// inequality as ranges of its property's index, so its property is ordered.
    pub fn is_inequality(self) -> bool {
        !matches!(self, Operator::Equal | Operator::In)
    }

    /// Whether this is `<`, `<=`, `>` or `>=`.
    pub fn is_range(self) -> bool {
        matches!(
            self,
            Operator::LessThan
                | Operator::LessThanOrEqual
                | Operator::GreaterThan
                | Operator::GreaterThanOrEqual
        )
    }

    /// How the operator is written in queries (GQL).
    pub fn symbol(self) -> &'static str {
        match self {
            Operator::Equal => "=",
            Operator::LessThan => "<",
            Operator::LessThanOrEqual => "<=",
            Operator::GreaterThan => ">",
            Operator::GreaterThanOrEqual => ">=",
            Operator::NotEqual => "!=",
            Operator::In => "IN",
            Operator::NotIn => "NOT IN",
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
    pub fn leaves_mut(&mut self, visit: &mut dyn FnMut(&mut PropertyFilter)) {
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

/// The kind of a metadata query's namespaces (`Key(__namespace__, name)`; id 1 for the
/// default namespace).
pub const NAMESPACE_KIND: &str = "__namespace__";
/// The kind of a metadata query's kinds of one namespace (`Key(__kind__, name)`).
pub const KIND_KIND: &str = "__kind__";
/// The kind of a metadata query's indexed properties, children of their kind's `__kind__`
/// key.
pub const PROPERTY_KIND: &str = "__property__";
/// What a whole `__property__` result holds: the representations of the property's values
/// (`INT64`, `STRING`, …).
pub const REPRESENTATION: &str = "property_representation";

/// Whether `kind` is one of the metadata kinds, which describe what a database holds.
pub fn is_metadata(kind: &str) -> bool {
    [NAMESPACE_KIND, KIND_KIND, PROPERTY_KIND].contains(&kind)
}

/// A query, as the service receives it. There is no offset: positions are cursors (R-Q3).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct QuerySpec {
    /// The partition (namespace) queried.
    pub partition: PartitionId,
    /// The kind; empty: every kind (a kindless query, which takes only ancestor and `__key__`
    /// filters, and no order but the key ascending).
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
    /// Return only these properties of each entity (each path a name, then names inside
    /// embedded entities), indexed or not: the service's property mask. `None`: all of them.
    pub property_mask: Option<Vec<Vec<std::borrow::Cow<'static, str>>>>,
    /// Return the entities whose vector is nearest this one, nearest first (the filters
    /// choose among them; orders and `limit` do not apply).
    pub find_nearest: Option<FindNearest>,
    /// Only the first result of each combination of values of these properties (the
    /// service's `distinct_on`), which lead the orders; `limit` counts those results, and
    /// each one's cursor resumes after the last result with its values. Empty: every result.
    pub distinct_on: Vec<String>,
}

impl QuerySpec {
    /// The query as the service answers it: `__key__` among the projected properties adds
    /// nothing (every result holds its key), so it is dropped, and a projection of the key
    /// alone is a keys-only query; `__key__` among the `distinct_on` properties makes every
    /// result distinct.
    pub fn answered(&self) -> Cow<'_, QuerySpec> {
        if self.distinct_on.iter().any(|p| p == KEY_PROPERTY) {
            // Every result has a key of its own: each is distinct.
            let every = QuerySpec {
                distinct_on: Vec::new(),
                ..self.clone()
            };
            return Cow::Owned(every.answered().into_owned());
        }
        let ResultShape::Projection(names) = &self.shape else {
            return Cow::Borrowed(self);
        };
        if !names.iter().any(|n| n == KEY_PROPERTY) {
            return Cow::Borrowed(self);
        }
        let rest: Vec<String> = names
            .iter()
            .filter(|n| *n != KEY_PROPERTY)
            .cloned()
            .collect();
        let shape = match rest.is_empty() {
            true => ResultShape::KeysOnly,
            false => ResultShape::Projection(rest),
        };
        Cow::Owned(QuerySpec {
            shape,
            ..self.clone()
        })
    }

    /// Whether the query reads every kind (its kind is empty): only ancestor and `__key__`
    /// filters, ordered by the key ascending at most, as the service takes it.
    pub fn is_kindless(&self) -> bool {
        self.kind.is_empty()
    }
}

/// A nearest-neighbour search (the service's `FindNearest`).
#[derive(Debug, Clone, PartialEq)]
pub struct FindNearest {
    /// The vector property searched.
    pub property: String,
    /// The vector searched for: only entities whose vector has its dimension are returned.
    pub vector: Vector,
    /// How distance is measured.
    pub measure: Distance,
    /// At most this many results (1 to [`FindNearest::MAX_LIMIT`]).
    pub limit: usize,
    /// The property of each result that receives its distance, if any.
    pub distance_property: Option<String>,
    /// Only results at most this far (Euclidean, cosine) or at least this close (dot product).
    pub threshold: Option<f64>,
}

impl FindNearest {
    /// The most results the service returns for one search.
    pub const MAX_LIMIT: usize = 100;
}

/// How [`FindNearest`] measures the distance between two vectors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Distance {
    /// The straight-line distance: smaller is nearer.
    Euclidean,
    /// One minus the cosine of the angle between them: smaller is nearer.
    Cosine,
    /// The dot product: larger is nearer.
    DotProduct,
}

impl Distance {
    /// The distance between `a` and `b` (of one dimension).
    pub fn between(self, a: &[f64], b: &[f64]) -> f64 {
        self.between_values(a.iter().copied(), b)
    }

    /// The distance between the values `a` (read where they lie) and `b`, in one pass.
    pub fn between_values(self, a: impl Iterator<Item = f64>, b: &[f64]) -> f64 {
        let pairs = a.zip(b);
        match self {
            Distance::Euclidean => pairs.map(|(x, y)| (x - y) * (x - y)).sum::<f64>().sqrt(),
            Distance::DotProduct => pairs.map(|(x, y)| x * y).sum(),
            Distance::Cosine => {
                let (mut dot, mut aa, mut bb) = (0.0, 0.0, 0.0);
                for (x, y) in pairs {
                    dot += x * y;
                    aa += x * x;
                    bb += y * y;
                }
                1.0 - dot / (aa.sqrt() * bb.sqrt())
            }
        }
    }

    /// Whether a distance of `d` is nearer than `e`.
    pub fn nearer(self, d: f64, e: f64) -> bool {
        match self {
            Distance::DotProduct => d > e,
            Distance::Euclidean | Distance::Cosine => d < e,
        }
    }

    /// Whether a distance of `d` is within `threshold`.
    pub fn within(self, d: f64, threshold: f64) -> bool {
        match self {
            Distance::DotProduct => d >= threshold,
            Distance::Euclidean | Distance::Cosine => d <= threshold,
        }
    }
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
    /// The entity's version and times, where the backend reports them (the embedded engine:
    /// for whole entities, not keys or projections).
    pub stamp: Option<Stamp>,
}

/// An entity's version and times, as the service reports them with every entity it reads and
/// every write it applies.
///
/// The version changes with every write of the entity and only grows; `0` is the version of
/// an entity that does not exist (a write conditioned on version `0` creates one). Firestore
/// in Datastore mode and the embedded engine use the update time in microseconds as the
/// version; the legacy Datastore emulator counts commits, and reports no times.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Stamp {
    /// The version.
    pub version: u64,
    /// When the entity was created (`None` after a delete, and where the backend does not say).
    pub create_time: Option<Timestamp>,
    /// When the entity was last written (`None` after a delete, and where the backend does
    /// not say).
    pub update_time: Option<Timestamp>,
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
