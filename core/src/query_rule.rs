//! The rules of the service (and of this crate's query builder) a query can break: what
//! [`Error::InvalidQuery`](crate::error::Error::InvalidQuery) carries, to match on.

/// A rule of the service (or of this crate's query builder) a query breaks: what
/// [`Error::InvalidQuery`](crate::error::Error::InvalidQuery) carries, to match on.
///
/// ```
/// use datastore_entity::{Error, QueryRule};
/// # fn refused(e: Error) -> bool {
/// matches!(e, Error::InvalidQuery { rule: QueryRule::OrderedTwice { .. }, .. })
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum QueryRule {
    /// Two not-equal filters (`ne`, `not_in`): the service takes one per query.
    #[error(
        "it holds two not-equal filters (`{first}`, `{second}`); the service takes one `ne` or \
         `not_in` per query: filter the other in code"
    )]
    OneNotEqual {
        /// The first filter (property and operator).
        first: String,
        /// The second.
        second: String,
    },
    /// A NOT IN filter combined with IN or OR.
    #[error(
        "`{property} NOT IN ..` is combined with `is_in` or `or`, which the service refuses: \
         run one query per branch instead"
    )]
    NotInWithInOrOr {
        /// The NOT IN filter's property.
        property: String,
    },
    /// More branches in the filter's disjunctive normal form than the service takes.
    #[error(
        "its filter has {branches} branches once put in disjunctive normal form (each `is_in` \
         value counts as one), more than the service's limit of {max}"
    )]
    TooManyBranches {
        /// The branches.
        branches: usize,
        /// The most the service takes.
        max: usize,
    },
    /// An AND or OR that combines no filter.
    #[error("{combinator} filter combines no filters")]
    EmptyCombination {
        /// `"an AND"` or `"an OR"`.
        combinator: &'static str,
    },
    /// A comparison with an array or an embedded entity.
    #[error(
        "the filter on `{property}` compares with an array or an embedded entity; filter on \
         one element (it matches an array holding it), with `is_in` on several, or on an \
         embedded property (`.dot(...)`, R-P2)"
    )]
    ArrayOperand {
        /// The filtered property.
        property: String,
    },
    /// An IN or NOT IN filter without a list of values.
    #[error("the {operator} filter on `{property}` has no list of values")]
    NoValueList {
        /// `` `is_in` `` or `` `not_in` ``.
        operator: &'static str,
        /// The filtered property.
        property: String,
    },
    /// An IN or NOT IN filter with too few or too many values.
    #[error(
        "the {operator} filter on `{property}` has {count} values; the service takes 1 to {max}"
    )]
    ValueCount {
        /// `` `is_in` `` or `` `not_in` ``.
        operator: &'static str,
        /// The filtered property.
        property: String,
        /// The values given.
        count: usize,
        /// The most the service takes.
        max: usize,
    },
    /// An IN or NOT IN list holding an array or an embedded entity.
    #[error(
        "the {operator} filter on `{property}` lists an array or an embedded entity, which are \
         not indexed as values"
    )]
    ListedArray {
        /// `` `is_in` `` or `` `not_in` ``.
        operator: &'static str,
        /// The filtered property.
        property: String,
    },
    /// A filter comparing with an incomplete key.
    #[error(
        "the filter on `{property}` compares with an incomplete key (of kind `{kind}`, without \
         an id or a name), which matches nothing stored; the service refuses it"
    )]
    IncompleteKeyOperand {
        /// The filtered property.
        property: String,
        /// The key's kind.
        kind: String,
    },
    /// A filter on `__key__` comparing with a key of another namespace or database.
    #[error(
        "the filter on `__key__` compares with a key of {key}, but the query runs in {query}; a \
         query reads one namespace: run it from a handle of that namespace (`db.namespace(..)`)"
    )]
    KeyOfAnotherPartition {
        /// The key's partition.
        key: String,
        /// The query's.
        query: String,
    },
    /// A filter on `__key__` comparing with a value that is not a key.
    #[error("the filter on `__key__` compares with a {type_name}; keys compare with keys only")]
    KeyComparedWith {
        /// The operand's type.
        type_name: &'static str,
    },
    /// A property ordered twice.
    #[error(
        "it orders by `{property}` twice; the service refuses a property ordered more than once"
    )]
    OrderedTwice {
        /// The property.
        property: String,
    },
    /// A property projected twice.
    #[error(
        "it projects `{property}` twice; the service refuses a property projected more than once"
    )]
    ProjectedTwice {
        /// The property.
        property: String,
    },
    /// A projection of no property.
    #[error("a projection needs at least one property")]
    EmptyProjection,
    /// A property both projected and filtered by equality.
    #[error(
        "`{property}` is both projected and filtered by equality; its value is already known, \
         remove it from the projection"
    )]
    ProjectedAndFixed {
        /// The property.
        property: String,
    },
    /// An order after the key, in a query resumed from a cursor.
    #[error(
        "it orders by `{property}` after `__key__` (an inequality filter or a projection orders \
         by its property where no order names it), and resumes from a cursor; the service \
         refuses it: order by `{property}` before the key, or not by the key"
    )]
    OrderAfterKey {
        /// The property ordered after the key.
        property: String,
    },
    /// A query without a kind filtering on a property.
    #[error(
        "it has no kind and filters on `{property}`; a query without a kind filters on \
         `__key__` and its ancestor only: name the kind"
    )]
    KindlessFilter {
        /// The property.
        property: String,
    },
    /// A query without a kind ordered otherwise than by the key ascending.
    #[error(
        "it has no kind and orders by `{property}` {direction}; a query without a kind is \
         ordered by `__key__` ascending only: name the kind"
    )]
    KindlessOrder {
        /// The property.
        property: String,
        /// `"ascending"` or `"descending"`.
        direction: &'static str,
    },
    /// An ancestor key that is incomplete.
    #[error("the ancestor key is incomplete")]
    IncompleteAncestor,
    /// An ancestor key of another namespace.
    #[error("the ancestor key is in another namespace")]
    AncestorOfAnotherNamespace,
    /// A nearest-neighbour search's limit outside what the service returns.
    #[error("a nearest-neighbour search returns 1 to {max} results, not {limit}")]
    NearestLimit {
        /// The limit given.
        limit: usize,
        /// The most the service returns.
        max: usize,
    },
    /// A nearest-neighbour search's threshold that is not a finite number.
    #[error(
        "a nearest-neighbour search's distance threshold is a finite number, not {threshold}; \
         the service refuses it"
    )]
    NearestThreshold {
        /// The threshold given.
        threshold: f64,
    },
    /// A nearest-neighbour search with orders, a projection or a limit of the query's own.
    #[error(
        "a nearest-neighbour search is ordered by distance and limited by its own `limit`: no \
         `order`, no projection, no query `limit`"
    )]
    NearestAlone,
    /// A nearest-neighbour option without `find_nearest`.
    #[error("`{option}` needs `find_nearest` first")]
    NeedsFindNearest {
        /// The option.
        option: &'static str,
    },
    /// A query vector of another dimension than the property's vector index.
    #[error(
        "the query vector has {given} dimensions, where the `#[vector_index({declared})]` of \
         `{property}` declares {declared}: it could find nothing"
    )]
    VectorDimension {
        /// The property searched.
        property: String,
        /// The query vector's dimension.
        given: usize,
        /// The index's.
        declared: u64,
    },
    /// A sum or an average of `__key__`.
    #[error(
        "a sum or an average of `__key__`: keys are not numbers, and the service refuses it \
         (\"Aggregations are not supported for the property: __key__\")"
    )]
    SumOfKey,
    /// A sum or an average over keys or a projection without the property.
    #[error(
        "a sum or an average runs over a query's entities, not its keys or a projection; the \
         service refuses it"
    )]
    SumOverKeys,
    /// `distinct_on` properties that do not lead the order.
    #[error(
        "the properties of `distinct_on` must be the first properties of the order, as the \
         service requires"
    )]
    DistinctNotLeading,
    /// A `distinct_on` property fixed by an equality or IN filter.
    #[error("Cannot use group by on a property with an equality filter.")]
    DistinctFixed,
    /// `resume_after` on a query ordered by more than one property (then the key).
    #[error(
        "`resume_after`: the query is ordered by {orders} properties; it resumes a query \
         ordered by one property (then the key) [R-Q4]"
    )]
    ResumeOrders {
        /// The orders the query has.
        orders: usize,
    },
    /// `resume_after` from an entity without one value of the ordered property.
    #[error(
        "`resume_after`: the last entity holds no single value of `{property}`, the property \
         the query is ordered by [R-Q4]"
    )]
    ResumeValue {
        /// The ordered property.
        property: String,
    },
    /// A metadata query (`__kind__`, `__namespace__`, `__property__`) filtering otherwise
    /// than on `__key__` with `=`, `<`, `<=`, `>` or `>=` combined by AND.
    #[error(
        "a metadata query filters on `__key__` only (`=`, `<`, `<=`, `>`, `>=`, combined by \
         AND), not on `{property}` this way"
    )]
    MetadataFilter {
        /// The property filtered on.
        property: String,
    },
    /// A metadata query ordered otherwise than by the key ascending.
    #[error("a metadata query is ordered by `__key__` ascending only, not by `{property}`")]
    MetadataOrder {
        /// The property ordered by.
        property: String,
    },
    /// A metadata query asking for a projection, distinct results or a nearest-neighbour
    /// search.
    #[error("a metadata query answers keys or whole results only (no projection, no distinct)")]
    MetadataShape,
    /// A refusal by Google Cloud (or an emulator) of a query this crate sent: its message.
    #[error("{message}")]
    ByService {
        /// The service's message.
        message: String,
    },
}
