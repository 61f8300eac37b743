//! The embedded engine (in memory and in a file) against Google's Firestore emulator in
//! Datastore mode, on random sequences of operations (issue #26): puts, inserts, updates,
//! deletes, lookups, queries with random filter trees, orders, projections and cursors,
//! aggregations, and transactions that read and write, over entities whose values are drawn
//! at and past every limit (nesting, string and byte lengths, array sizes, names from every
//! class of Unicode, ids at the extremes) in two namespaces. Every answer is compared:
//! results in order, errors by kind (both refuse, or both accept). A divergence is shrunk by
//! proptest to a shortest sequence that still shows it.
//!
//! `DIFF_CASES` sequences of `DIFF_OPS` operations each (8 × 24 by default: the fixed seeds CI
//! runs), from seed `DIFF_SEED`. The long run of the note:
//!
//! ```sh
//! DIFF_CASES=4200 DIFF_OPS=24 cargo test -p datastore-entity-tests --test differential -- --nocapture
//! ```
//!
//! Where the emulator and the engine are meant to differ (the crate is deliberately stricter,
//! or the emulator is not today's service), the generator does not go: `runtime/docs/rules.md`
//! lists those differences with the reason.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use datastore_entity::backend::embedded::Embedded;
use datastore_entity::backend::{
    Aggregation, FilterNode, Mask, Mutation, PropertyFilter, PropertyOrder, QuerySpec, ResultShape,
    TransactionMode,
};
use datastore_entity::prelude::*;
use datastore_entity::{
    Direction, Error, MAX_NESTING, Operator, PartitionId, PathElement, Property, PropertyMap,
    RawKey, Value,
};
use datastore_entity_tests::harness::{self, Backend};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestRunner};

/// A number from the environment, decimal or `0x` hexadecimal.
fn env(name: &str, default: u64) -> u64 {
    let Ok(text) = std::env::var(name) else {
        return default;
    };
    let parsed = match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => text.parse(),
    };
    parsed.unwrap_or_else(|_| panic!("{name}={text} is not a number"))
}

// ---------------------------------------------------------------------------------------
// What the sequences are made of.

/// The kinds written: every entity is of one of them.
const KINDS: [&str; 2] = ["D", "Ω"];

/// Property names, from several classes of Unicode.
const NAMES: [&str; 6] = ["a", "b", "é", "日本", "e🦀", "x_y-z"];

/// A key: kind, id or name, an optional parent, a namespace (0 or 1).
#[derive(Debug, Clone, Copy)]
struct KeyPick {
    kind: usize,
    id: usize,
    parent: Option<usize>,
    namespace: usize,
}

const IDS: [i64; 4] = [1, 2, 9_007_199_254_740_993, i64::MAX];
const KEY_NAMES: [&str; 5] = ["k", "é", "日本語", "🦀", "a b"];

fn id_or_name(i: usize) -> datastore_entity::IdOrName {
    match i.checked_sub(IDS.len()) {
        None => KeyId::new(IDS[i]).unwrap().into(),
        Some(n) => KeyName::new(KEY_NAMES[n]).unwrap().into(),
    }
}

fn key_pick() -> impl Strategy<Value = KeyPick> {
    (
        0..KINDS.len(),
        0..IDS.len() + KEY_NAMES.len(),
        prop::option::weighted(0.25, 0..3_usize),
        prop::bool::weighted(0.2),
    )
        .prop_map(|(kind, id, parent, other)| KeyPick {
            kind,
            id,
            parent,
            namespace: usize::from(other),
        })
}

/// A scalar a filter compares with, and most properties hold: few, so that filters match.
fn scalar() -> BoxedStrategy<Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Boolean),
        (-3..=3_i64).prop_map(Value::Integer),
        prop::sample::select(vec![i64::MIN, i64::MAX, 0]).prop_map(Value::Integer),
        prop::sample::select(vec![
            -1.5,
            0.0,
            2.5,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN
        ])
        .prop_map(Value::Double),
        prop::sample::select(vec!["", "x", "y", "é", "🦀", "日本"])
            .prop_map(|s| Value::String(s.to_owned())),
        prop::sample::select(vec![
            Timestamp::MIN,
            Timestamp::MAX,
            Timestamp::from_micros(0),
            Timestamp::from_micros(1_700_000_000_000_001),
        ])
        .prop_map(Value::Timestamp),
        prop::collection::vec(any::<u8>(), 0..4).prop_map(|b| Value::Blob(b.into())),
        (-90.0..=90.0_f64, -180.0..=180.0_f64)
            .prop_map(|(lat, lng)| Value::GeoPoint(GeoPoint::new(lat, lng).unwrap())),
    ]
    .boxed()
}

/// `levels` embedded entities, one in another (and an array in each, by turns when `arrays`).
fn nested(levels: usize, arrays: bool) -> Value {
    let mut value = Value::Integer(1);
    for level in 0..levels {
        value = match arrays && level % 2 == 1 {
            true => Value::Array(vec![value]),
            false => Value::Entity(PropertyMap::from([("n", Property::indexed(value))])),
        };
    }
    value
}

/// A property's value: mostly small, sometimes at or past a limit.
fn value() -> BoxedStrategy<(Value, bool)> {
    let ordinary = prop_oneof![
        6 => scalar(),
        2 => prop::collection::vec(scalar(), 0..4).prop_map(Value::Array),
        1 => prop::collection::vec((prop::sample::select(NAMES.to_vec()), scalar()), 1..3)
            .prop_map(|props| Value::Entity(
                props.into_iter().map(|(n, v)| (n, Property::indexed(v))).collect()
            )),
    ];
    let limits = prop_oneof![
        // Strings and byte strings at the indexed limit, and past it.
        prop::sample::select(vec![1_500_usize, 1_501]).prop_map(|n| Value::String("s".repeat(n))),
        prop::sample::select(vec![1_500_usize, 1_501]).prop_map(|n| Value::Blob(vec![7; n].into())),
        // Arrays at the indexed-values limit, and past it.
        prop::sample::select(vec![5_000_usize, 5_001])
            .prop_map(|n| Value::Array((0..n as i64).map(Value::Integer).collect())),
        // Nesting at the limit, past it, and far past it.
        (
            prop::sample::select(vec![MAX_NESTING, MAX_NESTING + 1, 70, 3_000]),
            any::<bool>()
        )
            .prop_map(|(levels, arrays)| nested(levels, arrays)),
        // Names past the limit are kept out: they are refused at compile time.
    ];
    let excluded_limits = prop_oneof![
        // Near the entity's size limit (1 MiB), and past it.
        prop::sample::select(vec![1_000_000_usize, 1_048_600])
            .prop_map(|n| Value::String("t".repeat(n))),
        Just(Value::Array((0..20_001).map(Value::Integer).collect())),
    ];
    prop_oneof![
        40 => (ordinary, prop::bool::weighted(0.2)),
        2 => (limits, Just(false)),
        1 => (excluded_limits, Just(true)),
    ]
    .boxed()
}

type Props = Vec<(usize, Value, bool)>;

fn props() -> impl Strategy<Value = Props> {
    prop::collection::vec(
        (0..NAMES.len(), value()).prop_map(|(n, (v, x))| {
            // Values at the limits go to properties no query reads (`a` and `b` are): a
            // projection of two arrays of 5,000 values each is 25 million rows.
            // (The Firestore emulator also fails, UNKNOWN, ordering by a property that
            // holds entities nested in arrays twenty deep.)
            let big = match &v {
                Value::Array(values) => {
                    values.len() > 100
                        || values
                            .iter()
                            .any(|v| matches!(v, Value::Array(_) | Value::Entity(_)))
                }
                Value::Entity(_) => true,
                Value::String(s) => s.len() > 100,
                Value::Blob(b) => b.len() > 100,
                _ => false,
            };
            let n = if big && n < 2 { n + 2 } else { n };
            (n, v, x)
        }),
        0..4,
    )
}

/// A filter on `a` or `b` (where the values are).
fn filter(depth: u32) -> BoxedStrategy<FilterNode> {
    let leaf = (
        prop::sample::select(vec!["a", "b"]),
        prop::sample::select(vec![
            Operator::Equal,
            Operator::LessThan,
            Operator::LessThanOrEqual,
            Operator::GreaterThan,
            Operator::GreaterThanOrEqual,
            Operator::NotEqual,
            Operator::In,
            Operator::NotIn,
        ]),
        prop::collection::vec(scalar(), 1..4),
    )
        .prop_map(|(property, op, mut values)| {
            let value = match op {
                Operator::In | Operator::NotIn => Value::Array(values),
                _ => values.swap_remove(0),
            };
            FilterNode::Property(PropertyFilter {
                property: property.to_owned(),
                op,
                value,
            })
        });
    if depth == 0 {
        return leaf.boxed();
    }
    prop_oneof![
        3 => leaf,
        1 => prop::collection::vec(filter(depth - 1), 2..3).prop_map(FilterNode::And),
        1 => prop::collection::vec(filter(depth - 1), 2..3).prop_map(FilterNode::Or),
    ]
    .boxed()
}

#[derive(Debug, Clone)]
struct QueryPick {
    kind: usize,
    namespace: usize,
    filter: Option<FilterNode>,
    orders: Vec<(&'static str, Direction)>,
    shape: ResultShape,
    limit: Option<usize>,
    /// Read page by page (of `limit`, or 2), each resuming from the last cursor.
    paged: bool,
    ancestor: Option<usize>,
}

/// Whether `node` has, in one AND, an equality (or `IN`) and a `!=` (or `NOT_IN`) on one
/// property: the Firestore emulator then gives one row per element that passes the `!=`,
/// the equality met by any element (`a = null AND a != ""` on `[null, -1.5]`: two rows);
/// the engine ties both to one element, as it does an equality and a range. Listed in
/// `runtime/docs/rules.md` (divergences).
fn equality_and_not_equal_on_one_property(node: &FilterNode) -> bool {
    match node {
        FilterNode::Property(_) => false,
        FilterNode::Or(nodes) => nodes.iter().any(equality_and_not_equal_on_one_property),
        FilterNode::And(nodes) => {
            let leaves: Vec<&PropertyFilter> = nodes
                .iter()
                .filter_map(|n| match n {
                    FilterNode::Property(f) => Some(f),
                    _ => None,
                })
                .collect();
            let tied = leaves.iter().any(|e| {
                matches!(e.op, Operator::Equal | Operator::In)
                    && leaves.iter().any(|n| {
                        matches!(n.op, Operator::NotEqual | Operator::NotIn)
                            && n.property == e.property
                    })
            });
            tied || nodes.iter().any(equality_and_not_equal_on_one_property)
        }
    }
}

/// Whether `aggregation` sums (or averages) `a` with a limit, over an `OR` whose branches fix
/// `a` by equality (or `IN`) in some branches and not in others: the Firestore emulator then
/// limits the index rows (one per array element in the branches that do not fix it), the
/// engine the entities. Listed in `runtime/docs/rules.md` (divergences).
fn partly_fixed_sum_with_a_limit(query: &QueryPick, aggregation: &Aggregation) -> bool {
    fn has_or(node: &FilterNode) -> bool {
        match node {
            FilterNode::Property(_) => false,
            FilterNode::Or(_) => true,
            FilterNode::And(nodes) => nodes.iter().any(has_or),
        }
    }
    let summed = matches!(aggregation, Aggregation::Sum(_) | Aggregation::Avg(_));
    let fixing = query.filter.as_ref().is_some_and(|f| {
        has_or(f)
            && f.leaves()
                .any(|l| l.property == "a" && matches!(l.op, Operator::Equal | Operator::In))
    });
    summed && query.limit.is_some() && fixing
}

fn query_pick() -> impl Strategy<Value = QueryPick> {
    (
        0..KINDS.len(),
        prop::bool::weighted(0.2),
        prop::option::weighted(
            0.7,
            filter(1).prop_filter("an emulator behaviour not modelled", |f| {
                !equality_and_not_equal_on_one_property(f)
            }),
        ),
        prop::collection::vec(
            (
                prop::sample::select(vec!["a", "b", "__key__"]),
                prop::sample::select(vec![Direction::Ascending, Direction::Descending]),
            ),
            0..3,
        ),
        prop_oneof![
            6 => Just(ResultShape::Full),
            2 => Just(ResultShape::KeysOnly),
            1 => Just(ResultShape::Projection(vec!["a".to_owned()])),
            1 => Just(ResultShape::Projection(vec!["a".to_owned(), "b".to_owned()])),
            1 => Just(ResultShape::Projection(vec!["b".to_owned()])),
        ],
        prop::option::weighted(0.5, 1..5_usize),
        any::<bool>(),
        prop::option::weighted(0.15, 0..3_usize),
    )
        .prop_map(
            |(kind, other, filter, orders, shape, limit, paged, ancestor)| QueryPick {
                kind,
                namespace: usize::from(other),
                filter,
                orders,
                shape,
                limit,
                paged,
                ancestor,
            },
        )
}

#[derive(Debug, Clone)]
enum Op {
    Put(Vec<(KeyPick, Props)>),
    Insert(KeyPick, Props),
    Update(KeyPick, Props),
    Delete(Vec<KeyPick>),
    Get(Vec<KeyPick>),
    Query(QueryPick),
    Aggregate(QueryPick, Aggregation),
    /// A transaction: reads these keys, then writes and deletes.
    Transaction {
        reads: Vec<KeyPick>,
        writes: Vec<(KeyPick, Props)>,
        deletes: Vec<KeyPick>,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => prop::collection::vec((key_pick(), props()), 1..4).prop_map(Op::Put),
        1 => (key_pick(), props()).prop_map(|(k, p)| Op::Insert(k, p)),
        1 => (key_pick(), props()).prop_map(|(k, p)| Op::Update(k, p)),
        1 => prop::collection::vec(key_pick(), 1..3).prop_map(Op::Delete),
        2 => prop::collection::vec(key_pick(), 1..4).prop_map(Op::Get),
        4 => query_pick().prop_map(Op::Query),
        2 => (
            query_pick(),
            prop_oneof![
                prop::option::of(1..4_u64).prop_map(|up_to| Aggregation::Count { up_to }),
                Just(Aggregation::Sum("a".to_owned())),
                Just(Aggregation::Avg("a".to_owned())),
            ]
        )
            .prop_filter("an emulator behaviour not modelled", |(q, a)| {
                !partly_fixed_sum_with_a_limit(q, a)
            })
            .prop_map(|(q, a)| Op::Aggregate(q, a)),
        1 => (
            prop::collection::vec(key_pick(), 0..3),
            prop::collection::vec((key_pick(), props()), 0..3),
            prop::collection::vec(key_pick(), 0..2),
        )
            .prop_map(|(reads, writes, deletes)| Op::Transaction { reads, writes, deletes }),
    ]
}

// ---------------------------------------------------------------------------------------
// Running a sequence on one backend, and what it answers.

/// A backend, in two namespaces of its own for one sequence.
struct Runner {
    name: &'static str,
    dbs: [Db; 2],
    /// Whether this is the emulator, which answers an aggregation of a query it refuses to
    /// run (two `!=`, a `NOT_IN` under an `OR`): there, its refusal to run the query is the
    /// answer, as production validates both alike.
    referee: bool,
}

impl Runner {
    fn partition(&self, namespace: usize) -> PartitionId {
        self.dbs[namespace].partition().clone()
    }

    fn key(&self, pick: KeyPick) -> RawKey {
        let mut path = Vec::new();
        if let Some(parent) = pick.parent {
            path.push(PathElement::new("P", Some(id_or_name(parent))).unwrap());
        }
        path.push(PathElement::new(KINDS[pick.kind], Some(id_or_name(pick.id))).unwrap());
        RawKey::new(Some(self.partition(pick.namespace)), path).unwrap()
    }

    fn spec(&self, q: &QueryPick) -> QuerySpec {
        QuerySpec {
            partition: self.partition(q.namespace),
            kind: KINDS[q.kind].to_owned(),
            ancestor: q.ancestor.map(|parent| {
                RawKey::new(
                    Some(self.partition(q.namespace)),
                    vec![PathElement::new("P", Some(id_or_name(parent))).unwrap()],
                )
                .unwrap()
            }),
            filters: q.filter.clone().into_iter().collect(),
            orders: q
                .orders
                .iter()
                .map(|(property, direction)| PropertyOrder {
                    property: (*property).to_owned(),
                    direction: *direction,
                })
                .collect(),
            shape: q.shape.clone(),
            limit: q.limit,
            ..QuerySpec::default()
        }
    }

    async fn run(&self, op: &Op) -> Answer {
        let backend = self.dbs[0].backend();
        let entity = |props: &Props| -> PropertyMap {
            props
                .iter()
                .map(|(n, v, x)| {
                    (
                        NAMES[*n],
                        Property {
                            value: v.clone(),
                            excluded: *x,
                            annotations: datastore_entity::Annotations::None,
                        },
                    )
                })
                .collect()
        };
        let commit = |mutations: Vec<Mutation>| async move {
            match backend.commit(mutations, None).await {
                Ok(_) => Answer::Done,
                Err(e) => Answer::Refused(kind(&e)),
            }
        };
        match op {
            Op::Put(writes) => {
                let mutations = writes
                    .iter()
                    .map(|(k, p)| Mutation::Upsert(self.key(*k), entity(p), Mask::Whole))
                    .collect();
                commit(mutations).await
            }
            Op::Insert(k, p) => {
                commit(vec![Mutation::Insert(self.key(*k), entity(p), Mask::Whole)]).await
            }
            Op::Update(k, p) => {
                commit(vec![Mutation::Update(self.key(*k), entity(p), Mask::Whole)]).await
            }
            Op::Delete(keys) => {
                commit(
                    keys.iter()
                        .map(|k| Mutation::Delete(self.key(*k)))
                        .collect(),
                )
                .await
            }
            Op::Get(keys) => {
                let keys: Vec<RawKey> = keys.iter().map(|k| self.key(*k)).collect();
                match backend.lookup(&keys, None).await {
                    Ok(found) => {
                        Answer::Found(found.iter().map(|f| f.as_ref().map(norm_map)).collect())
                    }
                    Err(e) => Answer::Refused(kind(&e)),
                }
            }
            Op::Query(q) => self.query(q).await,
            Op::Aggregate(q, aggregation) => {
                let spec = self.spec(q);
                if self.referee
                    && let Err(e) = backend.run_query(&spec, None).await
                {
                    return Answer::Refused(kind(&e));
                }
                match backend.run_aggregation(&spec, aggregation, None).await {
                    Ok(value) => Answer::Value(norm(&value, false)),
                    Err(e) => Answer::Refused(kind(&e)),
                }
            }
            Op::Transaction {
                reads,
                writes,
                deletes,
            } => {
                let mode = TransactionMode::ReadWrite { previous: None };
                let id = match backend.begin_transaction(&self.partition(0), &mode).await {
                    Ok(id) => id,
                    Err(e) => return Answer::Refused(kind(&e)),
                };
                let keys: Vec<RawKey> = reads.iter().map(|k| self.key(*k)).collect();
                let found = match backend.lookup(&keys, Some(&id)).await {
                    Ok(found) => found,
                    Err(e) => {
                        let _ = backend.rollback(&id).await;
                        return Answer::Refused(kind(&e));
                    }
                };
                let mutations = writes
                    .iter()
                    .map(|(k, p)| Mutation::Upsert(self.key(*k), entity(p), Mask::Whole))
                    .chain(deletes.iter().map(|k| Mutation::Delete(self.key(*k))))
                    .collect();
                let read = found.iter().map(|f| f.as_ref().map(norm_map)).collect();
                match backend.commit(mutations, Some(&id)).await {
                    Ok(_) => Answer::Transaction(read, None),
                    Err(e) => {
                        // A commit refused before it was sent leaves the transaction open on
                        // the server, holding the locks its reads took: end it.
                        let _ = backend.rollback(&id).await;
                        Answer::Transaction(read, Some(kind(&e)))
                    }
                }
            }
        }
    }

    async fn query(&self, q: &QueryPick) -> Answer {
        let backend = self.dbs[0].backend();
        let mut spec = self.spec(q);
        if !q.paged {
            return match backend.run_query(&spec, None).await {
                Ok(batch) => Answer::Rows(vec![rows(&batch.results)]),
                Err(e) => Answer::Refused(kind(&e)),
            };
        }
        // Page by page: each page resumes from the previous one's last result.
        spec.limit = Some(q.limit.unwrap_or(2));
        let mut pages = Vec::new();
        for _ in 0..8 {
            match backend.run_query(&spec, None).await {
                Ok(batch) => {
                    let last = batch.results.last().map(|r| r.cursor.clone());
                    pages.push(rows(&batch.results));
                    match last {
                        Some(cursor) => spec.start_cursor = Some(cursor),
                        None => break,
                    }
                }
                Err(e) => {
                    pages.push(vec![(format!("refused: {}", kind(&e)), BTreeMap::new())]);
                    break;
                }
            }
        }
        Answer::Rows(pages)
    }
}

/// The kind of an error, as both sides can say it: the service's status, whoever refuses.
fn kind(error: &Error) -> String {
    match error {
        Error::AlreadyExists { .. } => "ALREADY_EXISTS".to_owned(),
        Error::NotFound { .. } => "NOT_FOUND".to_owned(),
        Error::Aborted { .. } => "ABORTED".to_owned(),
        Error::MissingIndex { .. } => "FAILED_PRECONDITION".to_owned(),
        Error::Service { code, .. } => code.to_string(),
        Error::InvalidValue { .. }
        | Error::InvalidName { .. }
        | Error::InvalidKey { .. }
        | Error::IndexedValueTooLarge { .. }
        | Error::TooManyIndexedValues { .. }
        | Error::TooManyIndexEntries { .. }
        | Error::EntityTooLarge { .. }
        | Error::DuplicateKey { .. }
        | Error::CommitTooLarge { .. }
        | Error::InvalidQuery { .. }
        | Error::InvalidCursor { .. } => "INVALID_ARGUMENT".to_owned(),
        other => format!("{other:?}"),
    }
}

/// A value as compared: doubles by their bits (every NaN one), keys by their path, and
/// exclusion as the service reports it (everything inside an excluded value is).
#[derive(Debug, Clone, PartialEq)]
enum Norm {
    Null,
    Bool(bool),
    Int(i64),
    Double(u64),
    Time(i64),
    Str(String),
    Bytes(Vec<u8>),
    Geo(u64, u64),
    Key(String),
    Array(Vec<Norm>),
    Entity(BTreeMap<String, (Norm, bool)>),
    Vector(Vec<u64>),
}

fn norm(value: &Value, excluded: bool) -> Norm {
    let double = |d: f64| {
        if d.is_nan() {
            f64::NAN.to_bits()
        } else {
            d.to_bits()
        }
    };
    match value {
        Value::Null => Norm::Null,
        Value::Boolean(b) => Norm::Bool(*b),
        Value::Integer(i) => Norm::Int(*i),
        Value::Double(d) => Norm::Double(double(*d)),
        Value::Timestamp(t) => Norm::Time(t.as_micros()),
        Value::String(s) => Norm::Str(s.clone()),
        Value::Blob(b) => Norm::Bytes(b.to_vec()),
        Value::GeoPoint(g) => Norm::Geo(double(g.latitude()), double(g.longitude())),
        Value::Key(k) => Norm::Key(format!("{}", k)),
        Value::Vector(v) => Norm::Vector(v.as_slice().iter().map(|d| double(*d)).collect()),
        Value::Array(values) => Norm::Array(values.iter().map(|v| norm(v, excluded)).collect()),
        Value::Entity(map) => Norm::Entity(
            map.iter()
                .map(|(n, p)| {
                    let x = excluded || p.excluded;
                    (n.to_owned(), (norm(&p.value, x), x))
                })
                .collect(),
        ),
    }
}

/// A map as compared; an empty array's flag is not compared (the service keeps none).
fn norm_map(map: &PropertyMap) -> BTreeMap<String, (Norm, bool)> {
    map.iter()
        .map(|(n, p)| {
            let flag = match &p.value {
                Value::Array(values) if values.is_empty() => false,
                _ => p.excluded,
            };
            (n.to_owned(), (norm(&p.value, p.excluded), flag))
        })
        .collect()
}

type Row = (String, BTreeMap<String, (Norm, bool)>);

fn rows(results: &[datastore_entity::backend::QueryResult]) -> Vec<Row> {
    results
        .iter()
        .map(|r| (format!("{}", r.key), norm_map(&r.properties)))
        .collect()
}

#[derive(Debug, Clone, PartialEq)]
enum Answer {
    Done,
    Refused(String),
    Found(Vec<Option<BTreeMap<String, (Norm, bool)>>>),
    Rows(Vec<Vec<Row>>),
    Value(Norm),
    Transaction(Vec<Option<BTreeMap<String, (Norm, bool)>>>, Option<String>),
}

// ---------------------------------------------------------------------------------------
// The runners, and the property.

fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
    })
}

fn file_db() -> &'static Db {
    static FILE: OnceLock<Db> = OnceLock::new();
    FILE.get_or_init(|| {
        let path = std::env::temp_dir().join(format!(
            "datastore-entity-differential-{}.redb",
            std::process::id()
        ));
        let _ = std::fs::remove_file(&path);
        let engine = Embedded::open(&path).unwrap().strict_indexes(false);
        std::fs::remove_file(&path).unwrap();
        Db::with_backend(Arc::new(engine))
    })
}

/// Fresh namespaces on each backend for one sequence; `None` when the emulator is missing
/// (outside CI).
async fn runners() -> Option<Vec<Runner>> {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let name = format!("diff{n}");
    let firestore = harness::db(Backend::Firestore, &name).await?;
    let memory = Db::with_backend(Arc::new(Embedded::in_memory().strict_indexes(false)));
    let both = |db: &Db| -> [Db; 2] {
        [
            db.namespace(&name).unwrap(),
            db.namespace(&format!("{name}-2")).unwrap(),
        ]
    };
    Some(vec![
        Runner {
            name: "Firestore emulator",
            dbs: both(&firestore),
            referee: true,
        },
        Runner {
            name: "engine in memory",
            dbs: both(&memory),
            referee: false,
        },
        Runner {
            name: "engine in a file",
            dbs: both(file_db()),
            referee: false,
        },
    ])
}

static OPS: AtomicUsize = AtomicUsize::new(0);

/// `text` with every run of one character longer than 16 written `c×n` (the values at the
/// limits are long), and without the pretty-printer's line breaks.
fn compact(text: &str) -> String {
    let text: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut out = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        let mut n = 1;
        while chars.peek() == Some(&c) {
            chars.next();
            n += 1;
        }
        match n > 16 {
            true => out.push_str(&format!("{c}×{n}")),
            false => (0..n).for_each(|_| out.push(c)),
        }
    }
    out
}

fn check(ops: &[Op]) -> Result<(), TestCaseError> {
    runtime().block_on(async {
        let Some(runners) = runners().await else {
            return Ok(());
        };
        for (i, op) in ops.iter().enumerate() {
            let mut answers = Vec::new();
            for runner in &runners {
                answers.push(runner.run(op).await);
            }
            OPS.fetch_add(1, Ordering::Relaxed);
            let referee = &answers[0];
            for (runner, answer) in runners.iter().zip(&answers).skip(1) {
                if answer != referee {
                    return Err(TestCaseError::fail(compact(&format!(
                        "operation {i} ({op:?}):\n  {}: {referee:?}\n  {}: {answer:?}",
                        runners[0].name, runner.name
                    ))));
                }
            }
        }
        Ok(())
    })
}

#[test]
fn the_engine_answers_as_the_firestore_emulator_on_random_operations() {
    let cases = env("DIFF_CASES", 8) as u32;
    let ops = env("DIFF_OPS", 24) as usize;
    let seed = env("DIFF_SEED", 0x26_d1ff);
    let config = Config {
        cases,
        rng_seed: RngSeed::Fixed(seed),
        failure_persistence: None,
        max_shrink_iters: 400,
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    let started = std::time::Instant::now();
    let result = runner.run(&prop::collection::vec(op(), 1..=ops), |ops| check(&ops));
    eprintln!(
        "{} operations in {cases} sequences on each backend, in {:.1} s (seed {seed:#x})",
        OPS.load(Ordering::Relaxed),
        started.elapsed().as_secs_f64()
    );
    if let Err(e) = result {
        panic!("{}", compact(&e.to_string()));
    }
}

/// The divergences long runs found, as the sequences they shrank to: each stays fixed.
#[test]
fn the_divergences_long_runs_found_stay_fixed() {
    let key = KeyPick {
        kind: 0,
        id: 0,
        parent: None,
        namespace: 0,
    };
    let at = |micros: i64| Value::Timestamp(Timestamp::from_micros(micros));
    let on_a = |op: Operator, value: Value| {
        FilterNode::Property(PropertyFilter {
            property: "a".to_owned(),
            op,
            value,
        })
    };
    let sum_of_a = |filter: FilterNode| {
        let query = QueryPick {
            kind: 0,
            namespace: 0,
            filter: Some(filter),
            orders: Vec::new(),
            shape: ResultShape::Full,
            limit: None,
            paged: false,
            ancestor: None,
        };
        Op::Aggregate(query, Aggregation::Sum("a".to_owned()))
    };
    let put_a = |value: Value| Op::Put(vec![(key, vec![(0, value, false)])]);
    let sequences = [
        // Seed 0x26262: a sum of `a` where `a = t` (a timestamp) adds t's microseconds, as
        // the Firestore emulator reads the value from its index.
        vec![
            put_a(at(1_700_000_000_000_000)),
            sum_of_a(on_a(Operator::Equal, at(1_700_000_000_000_000))),
        ],
        // Seed 0x26262 again: a timestamp a range filter on booleans matches (Datastore
        // orders timestamps before booleans) is summed as its microseconds too, beside an
        // IN that fixes nothing it holds.
        vec![
            put_a(Value::Timestamp(Timestamp::MIN)),
            sum_of_a(FilterNode::Or(vec![
                on_a(Operator::LessThan, Value::Boolean(false)),
                on_a(Operator::In, Value::Array(vec![Value::Null])),
            ])),
        ],
        // Seed 0x5eed: one entity's rows (its array's elements) come in the last order's
        // direction, an order after the key included (`__key__` then `b` descending: the
        // highest element first, so an average of one row of `[false, b"", 0]` is null).
        vec![
            Op::Put(vec![(
                key,
                vec![
                    (
                        0,
                        Value::Array(vec![
                            Value::Boolean(false),
                            Value::Blob(Vec::new().into()),
                            Value::Integer(0),
                        ]),
                        false,
                    ),
                    (1, Value::Null, false),
                ],
            )]),
            Op::Aggregate(
                QueryPick {
                    kind: 0,
                    namespace: 0,
                    filter: None,
                    orders: vec![
                        ("__key__", Direction::Ascending),
                        ("b", Direction::Descending),
                    ],
                    shape: ResultShape::Full,
                    limit: Some(1),
                    paged: false,
                    ancestor: None,
                },
                Aggregation::Avg("a".to_owned()),
            ),
        ],
    ];
    for ops in sequences {
        if let Err(e) = check(&ops) {
            panic!("{}", compact(&e.to_string()));
        }
    }
}
