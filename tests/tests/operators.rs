//! Today's query surface at the typed API: every refusal of the service's rules is a clear
//! error before anything is sent, and random filter trees (AND/OR of every operator over
//! mixed-type, array, null and missing values) give exactly what a plain reference model
//! says, on the embedded engine (index plans merged, and its scan). The answers on Google's
//! emulators are conformance tests (`tests/src/conformance/operators.rs`).

use std::cmp::Ordering;
use std::sync::Arc;

use datastore_entity::backend::embedded::Embedded;
use datastore_entity::backend::{Backend, Mask, Mutation};
use datastore_entity::compare_values;
use datastore_entity::prelude::*;
use datastore_entity::{Error, Filter, Property, PropertyMap, QueryRule, Value};
use datastore_entity_tests::{Call, Instrumented, Post};
use proptest::prelude::*;

/// A refused query: `InvalidQuery` breaking `rule` (matched by its variant and fields), and
/// no call reached the backend.
async fn refused<T: std::fmt::Debug>(
    backend: &Instrumented,
    run: impl std::future::Future<Output = Result<T, Error>>,
    rule: QueryRule,
) {
    let before = backend.calls().len();
    let result = run.await;
    let Err(Error::InvalidQuery { rule: broken, .. }) = &result else {
        panic!("expected InvalidQuery, got {result:?}");
    };
    assert_eq!(broken, &rule, "{broken}");
    let sent: Vec<Call> = backend.calls()[before..]
        .iter()
        .copied()
        .filter(|c| matches!(c, Call::RunQuery | Call::RunAggregation))
        .collect();
    assert!(sent.is_empty(), "sent {sent:?}");
}

fn not_in_with(property: &str) -> QueryRule {
    QueryRule::NotInWithInOrOr {
        property: property.into(),
    }
}

fn count(operator: &'static str, count: usize, max: usize) -> QueryRule {
    QueryRule::ValueCount {
        operator,
        property: "author".into(),
        count,
        max,
    }
}

fn too_many_branches(branches: usize) -> QueryRule {
    QueryRule::TooManyBranches { branches, max: 30 }
}

#[tokio::test]
async fn the_services_rules_are_checked_before_anything_is_sent() {
    let (backend, db) = Instrumented::db();
    let q = || db.query::<Post>();
    // One `ne` or `not_in` per query.
    let two_ne = q()
        .filter(Post::AUTHOR.ne("ann"))
        .filter(Post::TITLE.ne("x"));
    refused(
        &backend,
        two_ne.fetch(),
        QueryRule::OneNotEqual {
            first: "author != ..".into(),
            second: "title != ..".into(),
        },
    )
    .await;
    let ne_not_in = q()
        .filter(Post::AUTHOR.ne("ann"))
        .filter(Post::TITLE.not_in(["x"]));
    refused(
        &backend,
        ne_not_in.count(),
        QueryRule::OneNotEqual {
            first: "author != ..".into(),
            second: "title NOT IN ..".into(),
        },
    )
    .await;
    // NOT IN does not mix with IN or OR.
    let with_in = q()
        .filter(Post::AUTHOR.not_in(["ann"]))
        .filter(Post::TITLE.is_in(["x", "y"]));
    refused(&backend, with_in.fetch(), not_in_with("author")).await;
    let with_or = q().filter(Post::AUTHOR.not_in(["ann"]).or(Post::TITLE.eq("x")));
    refused(&backend, with_or.keys_only().fetch(), not_in_with("author")).await;
    // Value counts given at run time (array literals are checked when compiling).
    let many: Vec<String> = (0..31).map(|i| format!("a{i}")).collect();
    let over = q().filter(Post::AUTHOR.is_in(many));
    refused(&backend, over.fetch(), count("`is_in`", 31, 30)).await;
    let none = q().filter(Post::AUTHOR.is_in(Vec::<String>::new()));
    refused(&backend, none.fetch(), count("`is_in`", 0, 30)).await;
    let none = q().filter(Post::AUTHOR.not_in(Vec::<String>::new()));
    refused(&backend, none.fetch(), count("`not_in`", 0, 10)).await;
    let eleven: Vec<String> = (0..11).map(|i| format!("a{i}")).collect();
    let over = q().filter(Post::AUTHOR.not_in(eleven));
    refused(&backend, over.fetch(), count("`not_in`", 11, 10)).await;
    // At most 30 branches in disjunctive normal form: 6 × 6 IN values are 36.
    let six = |p: &str| -> Vec<String> { (0..6).map(|i| format!("{p}{i}")).collect() };
    let product = q()
        .filter(Post::AUTHOR.is_in(six("a")))
        .filter(Post::TITLE.is_in(six("t")));
    refused(&backend, product.fetch(), too_many_branches(36)).await;
    let ors = (1..31).fold(Post::AUTHOR.eq("a0"), |f, i| {
        f.or(Post::AUTHOR.eq(format!("a{i}")))
    });
    refused(&backend, q().filter(ors).count(), too_many_branches(31)).await;
    // Aggregations too.
    let bad = q().filter(Post::AUTHOR.ne("a")).filter(Post::TITLE.ne("b"));
    let two = QueryRule::OneNotEqual {
        first: "author != ..".into(),
        second: "title != ..".into(),
    };
    refused(&backend, bad.count_up_to(5), two).await;
    // 30 branches are accepted.
    let thirty = q()
        .filter(Post::AUTHOR.is_in(six("a")))
        .filter(Post::TITLE.is_in(["t0", "t1", "t2", "t3", "t4"]));
    assert!(thirty.fetch().await.unwrap().items.is_empty());
    assert_eq!(backend.count(Call::RunQuery), 1);
}

#[tokio::test]
async fn an_integer_sum_that_leaves_i64_is_an_error_not_a_wrapped_number() {
    #[derive(Entity, Debug)]
    struct Big {
        #[key]
        id: KeyId,
        n: i64,
    }
    let db = Db::in_memory();
    for id in 1..=2 {
        db.put(&Big {
            id: KeyId::new(id).unwrap(),
            n: i64::MAX / 2 + 1,
        })
        .await
        .unwrap();
    }
    // The service sums into a double once the integers overflow; the typed sum says so.
    let error = db.query::<Big>().sum(Big::N).await.unwrap_err();
    assert!(
        matches!(&error, Error::InvalidValue { reason, .. } if reason.contains("overflowed")),
        "{error:?}"
    );
    let avg = db.query::<Big>().avg(Big::N).await.unwrap();
    assert_eq!(avg, Some((i64::MAX / 2 + 1) as f64));
}

#[tokio::test]
async fn count_agrees_with_the_rows_on_every_plan_in_and_out_of_transactions() {
    // COUNT reads index entries only (one range, or a leapfrog of equality indexes); each
    // count here must equal the number of rows the same query returns.
    use datastore_entity_tests::{account, account_key};
    let db = Db::in_memory();
    for owner in ["count-ann", "count-bob"] {
        db.put(&account(owner)).await.unwrap();
        let posts: Vec<Post> = (0..30)
            .map(|i| Post {
                account: account_key(owner),
                id: Some(KeyId::new(i + 1).unwrap()),
                title: format!("t{i:02}"),
                author: ["a", "b", "c"][i as usize % 3].into(),
                published: Timestamp::from_micros(i * 7 % 30),
                tags: (0..i % 4).map(|t| format!("x{t}")).collect(),
                body: String::new(),
                location: None,
            })
            .collect();
        db.put_many(&posts).await.unwrap();
    }
    let ann = account_key("count-ann");
    let queries = [
        db.query::<Post>(),
        db.query::<Post>().filter(Post::AUTHOR.eq("a")),
        db.query::<Post>()
            .filter(Post::AUTHOR.eq("a"))
            .filter(Post::TAGS.eq("x1")),
        db.query::<Post>()
            .ancestor(&ann)
            .filter(Post::AUTHOR.eq("b")),
        db.query::<Post>().ancestor(&ann),
        db.query::<Post>().filter(Post::TITLE.gt("t10")),
        db.query::<Post>()
            .filter(Post::AUTHOR.eq("c"))
            .filter(Post::PUBLISHED.lt(Timestamp::from_micros(12))),
        db.query::<Post>().filter(Post::TAGS.ge("x1")),
        db.query::<Post>().filter(Post::AUTHOR.eq("a")).limit(5),
        db.query::<Post>()
            .filter(Post::TAGS.eq("x0"))
            .order(Post::TITLE.asc()),
        db.query::<Post>().filter(Post::AUTHOR.is_in(["a", "c"])),
        db.query::<Post>().filter(Post::AUTHOR.eq("zzz")),
    ];
    for query in queries {
        let rows = query.clone().keys_only().fetch().await.unwrap().items.len() as u64;
        assert!(
            rows > 0 || format!("{query:?}").contains("zzz"),
            "{query:?}"
        );
        assert_eq!(query.clone().count().await.unwrap(), rows, "{query:?}");
        assert_eq!(
            query.clone().count_up_to(7).await.unwrap(),
            rows.min(7),
            "{query:?}"
        );
        assert_eq!(query.clone().count_up_to(0).await.unwrap(), 0, "{query:?}");
        let inside = db
            .transaction(|tx| {
                let query = query.clone();
                async move {
                    let _ = &tx;
                    query.count().await
                }
            })
            .await
            .unwrap();
        assert_eq!(inside, rows, "{query:?}");
    }
}

// ---------------------------------------------------------------------------------------
// Random filter trees against a reference model.

/// The kind the random trees query: `a` and `b` take the inequality operators (ranges, `ne`,
/// `not_in`), `c` and `d` the equality ones (`eq`, `is_in`). (A property under both an
/// equality and an inequality filter is met by one element for both: conformance tests cover
/// that rule, which a reference this plain cannot state.)
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(kind = "Tree")]
struct Tree {
    #[key]
    id: KeyId,
    a: Value,
    b: Value,
    c: Value,
    d: Value,
}

const INEQUALITY: [&str; 2] = ["a", "b"];
const EQUALITY: [&str; 2] = ["c", "d"];

fn path(name: &str) -> datastore_entity::PropertyPath<Tree, Value, datastore_entity::Indexed> {
    match name {
        "a" => Tree::A,
        "b" => Tree::B,
        "c" => Tree::C,
        _ => Tree::D,
    }
}

#[derive(Debug, Clone)]
enum Op {
    Lt,
    Le,
    Gt,
    Ge,
    Ne,
    NotIn,
    Eq,
    In,
}

#[derive(Debug, Clone)]
enum Node {
    Leaf(&'static str, Op, Vec<Value>),
    And(Vec<Node>),
    Or(Vec<Node>),
}

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        (0i64..4).prop_map(Value::Integer),
        (0i64..3).prop_map(|d| Value::Double(d as f64 * 0.5 + 0.5)),
        any::<bool>().prop_map(Value::Boolean),
        prop::sample::select(vec!["a", "b", "c"]).prop_map(|s| Value::String(s.into())),
    ]
}

/// A stored property: missing, a scalar, or an array of 0 to 3 scalars.
fn stored() -> impl Strategy<Value = Option<Value>> {
    prop_oneof![
        1 => Just(None),
        3 => scalar().prop_map(Some),
        2 => prop::collection::vec(scalar(), 0..4).prop_map(|v| Some(Value::Array(v))),
    ]
}

fn leaf() -> impl Strategy<Value = Node> {
    let inequality = (
        prop::sample::select(INEQUALITY.to_vec()),
        prop_oneof![
            Just(Op::Lt),
            Just(Op::Le),
            Just(Op::Gt),
            Just(Op::Ge),
            Just(Op::Ne),
            Just(Op::NotIn)
        ],
        prop::collection::vec(scalar(), 1..4),
    );
    let equality = (
        prop::sample::select(EQUALITY.to_vec()),
        prop_oneof![Just(Op::Eq), Just(Op::In)],
        prop::collection::vec(scalar(), 1..5),
    );
    prop_oneof![inequality, equality].prop_map(|(p, op, mut values)| {
        if !matches!(op, Op::In | Op::NotIn) {
            values.truncate(1);
        }
        Node::Leaf(p, op, values)
    })
}

fn tree() -> impl Strategy<Value = Node> {
    leaf().prop_recursive(3, 12, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 1..4).prop_map(Node::And),
            prop::collection::vec(inner, 1..4).prop_map(Node::Or),
        ]
    })
}

fn typed(node: &Node) -> Filter<Tree> {
    match node {
        Node::Leaf(p, op, values) => {
            let p = path(p);
            let v = values[0].clone();
            match op {
                Op::Lt => p.lt(v),
                Op::Le => p.le(v),
                Op::Gt => p.gt(v),
                Op::Ge => p.ge(v),
                Op::Ne => p.ne(v),
                Op::Eq => p.eq(v),
                Op::In => p.is_in(values.clone()),
                Op::NotIn => p.not_in(values.clone()),
            }
        }
        Node::And(nodes) | Node::Or(nodes) => {
            let mut filters = nodes.iter().map(typed);
            let first = filters.next().expect("at least one");
            filters.fold(first, |acc, f| match node {
                Node::And(_) => acc.and(f),
                _ => acc.or(f),
            })
        }
    }
}

fn leaves(node: &Node) -> Vec<(&'static str, &Op, &[Value])> {
    match node {
        Node::Leaf(p, op, values) => vec![(*p, op, values.as_slice())],
        Node::And(nodes) | Node::Or(nodes) => nodes.iter().flat_map(leaves).collect(),
    }
}

fn has_or(node: &Node) -> bool {
    match node {
        Node::Leaf(..) => false,
        Node::And(nodes) => nodes.iter().any(has_or),
        Node::Or(nodes) => nodes.len() > 1 || nodes.iter().any(has_or),
    }
}

fn branches(node: &Node) -> usize {
    match node {
        Node::Leaf(_, Op::In, values) => values.len(),
        Node::Leaf(..) => 1,
        Node::And(nodes) => nodes.iter().map(branches).product(),
        Node::Or(nodes) => nodes.iter().map(branches).sum(),
    }
}

/// Whether the service takes the query: one `ne`/`not_in` at most; `not_in` without IN or
/// OR; at most 30 branches.
fn accepted(node: &Node) -> bool {
    let all = leaves(node);
    let not_equal = all
        .iter()
        .filter(|(_, op, _)| matches!(op, Op::Ne | Op::NotIn))
        .count();
    let not_in = all.iter().any(|(_, op, _)| matches!(op, Op::NotIn));
    let is_in = all.iter().any(|(_, op, _)| matches!(op, Op::In));
    // (A one-filter OR is that filter: `typed` builds no OR for it.)
    not_equal <= 1 && !(not_in && (is_in || has_or(node))) && branches(node) <= 30
}

fn elements(value: &Option<Value>) -> Vec<Value> {
    let mut values = match value {
        None => Vec::new(),
        Some(Value::Array(values)) => values.clone(),
        Some(v) => vec![v.clone()],
    };
    values.sort_by(compare_values);
    values.dedup_by(|x, y| compare_values(x, y) == Ordering::Equal);
    values
}

fn eq(x: &Value, y: &Value) -> bool {
    compare_values(x, y) == Ordering::Equal
}

/// Whether `node` holds for an entity whose inequality properties are fixed to `row` (one
/// value each: a row of their index), the equality properties matching on any element.
fn holds(node: &Node, entity: &[Option<Value>; 4], row: &[(&str, Value)]) -> bool {
    match node {
        Node::And(nodes) => nodes.iter().all(|n| holds(n, entity, row)),
        Node::Or(nodes) => nodes.iter().any(|n| holds(n, entity, row)),
        Node::Leaf(p, op, values) => {
            if let Some((_, v)) = row.iter().find(|(name, _)| name == p) {
                let o = compare_values(v, &values[0]);
                return match op {
                    Op::Lt => o == Ordering::Less,
                    Op::Le => o != Ordering::Greater,
                    Op::Gt => o == Ordering::Greater,
                    Op::Ge => o != Ordering::Less,
                    Op::Ne => o != Ordering::Equal,
                    Op::NotIn => !values.iter().any(|x| eq(v, x)),
                    Op::Eq | Op::In => unreachable!("equality operators go to c and d"),
                };
            }
            let i = ["a", "b", "c", "d"].iter().position(|n| n == p).unwrap();
            elements(&entity[i])
                .iter()
                .any(|e| values.iter().any(|x| eq(e, x)))
        }
    }
}

/// The reference answer: one row per combination of the inequality properties' values
/// under which the tree holds, each once, ordered by those values (properties by name),
/// then by id.
fn expected(node: &Node, entities: &[[Option<Value>; 4]]) -> Vec<i64> {
    let mut ordered: Vec<&str> = leaves(node)
        .iter()
        .map(|(p, _, _)| *p)
        .filter(|p| INEQUALITY.contains(p))
        .collect();
    ordered.sort();
    ordered.dedup();
    let mut rows: Vec<(Vec<Value>, i64)> = Vec::new();
    for (i, entity) in entities.iter().enumerate() {
        let id = i as i64 + 1;
        let mut combos: Vec<Vec<(&str, Value)>> = vec![Vec::new()];
        for p in &ordered {
            let values = elements(&entity[if *p == "a" { 0 } else { 1 }]);
            combos = combos
                .into_iter()
                .flat_map(|c| {
                    values.iter().map(move |v| {
                        let mut c = c.clone();
                        c.push((*p, v.clone()));
                        c
                    })
                })
                .collect();
        }
        for combo in combos {
            if holds(node, entity, &combo) {
                rows.push((combo.into_iter().map(|(_, v)| v).collect(), id));
            }
        }
    }
    rows.sort_by(|(x, i), (y, j)| {
        x.iter()
            .zip(y)
            .map(|(a, b)| compare_values(a, b))
            .find(|o| o.is_ne())
            .unwrap_or(Ordering::Equal)
            .then(i.cmp(j))
    });
    rows.into_iter().map(|(_, id)| id).collect()
}

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(future)
}

async fn answer(
    db: &Db,
    filter: Filter<Tree>,
    page: Option<usize>,
) -> Result<(Vec<i64>, u64), Error> {
    let count = db.query::<Tree>().filter(filter.clone()).count().await?;
    let Some(size) = page else {
        let page = db.query::<Tree>().filter(filter).fetch().await?;
        let ids = page.items.iter().map(|t| t.id.get()).collect();
        return Ok((ids, count));
    };
    let mut ids = Vec::new();
    let mut cursor = None;
    loop {
        let page = db
            .query::<Tree>()
            .filter(filter.clone())
            .limit(size)
            .start_after(cursor)
            .fetch()
            .await?;
        ids.extend(page.items.iter().map(|t| t.id.get()));
        match page.next {
            Some(next) => cursor = Some(next),
            None => return Ok((ids, count)),
        }
    }
}

fn cases() -> u32 {
    std::env::var("FILTER_TREE_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(10_000)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn random_filter_trees_match_the_reference_model(
        entities in prop::collection::vec([stored(), stored(), stored(), stored()], 0..9),
        node in tree(),
        page in prop::option::of(1usize..4),
    ) {
        // Index plans (each branch's, merged) where the engine has them, its scan otherwise
        // (outside strict index mode, no composite index is declared).
        let engine: Arc<dyn Backend> = Arc::new(Embedded::in_memory().strict_indexes(false));
        let db = Db::with_backend(engine.clone());
        block_on(async {
            let mutations = entities
                .iter()
                .enumerate()
                .map(|(i, e)| {
                    let properties: PropertyMap = ["a", "b", "c", "d"]
                        .iter()
                        .zip(e)
                        .filter_map(|(n, v)| Some(((*n).to_owned(), Property::indexed(v.clone()?))))
                        .collect();
                    let key = Tree::key(KeyId::new(i as i64 + 1).unwrap()).into_raw();
                    Mutation::Upsert(
                        key.with_partition(db.partition().clone()),
                        properties,
                        Mask::Whole,
                    )
                })
                .collect();
            engine.commit(mutations, None).await.unwrap();
        });
        let got = block_on(answer(&db, typed(&node), page));
        if !accepted(&node) {
            prop_assert!(matches!(got, Err(Error::InvalidQuery { .. })), "{:?} accepted: {:?}", node, got);
            return Ok(());
        }
        let (ids, count) = got.map_err(|e| TestCaseError::fail(format!("{node:?}: {e}")))?;
        let want = expected(&node, &entities);
        prop_assert_eq!(&ids, &want, "{:?}", node);
        prop_assert_eq!(count, want.len() as u64);
    }
}
