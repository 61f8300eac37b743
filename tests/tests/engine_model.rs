//! The embedded engine against a plain reference model of the same data: random writes,
//! deletes and queries (filters, orders, limits, paging by cursor), plus garbage cursors.
//! Nothing may panic, and every query must return exactly what the model says, in order.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use datastore_entity::prelude::*;
use datastore_entity::{Error, Filter, Order};
use proptest::prelude::*;

#[derive(Entity, Debug, Clone, PartialEq)]
struct Row {
    #[key]
    id: KeyId,
    n: i64,
    s: String,
    tags: Vec<String>,
    opt: Option<i64>,
}

/// id, n, s, tags, opt
type RowParts = (i64, i64, String, Vec<String>, Option<i64>);

#[derive(Debug, Clone)]
enum Op {
    Put(Vec<RowParts>),
    Delete(Vec<i64>),
    Query(QueryCase),
    GarbageCursor(Vec<u8>),
}

#[derive(Debug, Clone)]
struct QueryCase {
    eq: Option<Eq>,
    range: Option<(Operator, i64)>,
    order: Option<(Field, bool)>,
    page: usize,
}

#[derive(Debug, Clone, Copy)]
enum Operator {
    Lt,
    Le,
    Gt,
    Ge,
}

#[derive(Debug, Clone)]
enum Eq {
    S(String),
    Tag(String),
    Opt(i64),
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Field {
    N,
    S,
    Opt,
}

fn small_string() -> impl Strategy<Value = String> {
    prop::sample::select(vec!["", "a", "b", "ab", "é", "z"]).prop_map(String::from)
}

fn op() -> impl Strategy<Value = Op> {
    let row = (
        1..30i64,
        -5..5i64,
        small_string(),
        prop::collection::vec(small_string(), 0..3),
        prop::option::of(-3..3i64),
    );
    let operator =
        prop::sample::select(vec![Operator::Lt, Operator::Le, Operator::Gt, Operator::Ge]);
    let eq = prop_oneof![
        small_string().prop_map(Eq::S),
        small_string().prop_map(Eq::Tag),
        (-3..3i64).prop_map(Eq::Opt),
    ];
    let field = prop::sample::select(vec![Field::N, Field::S, Field::Opt]);
    let query = (
        prop::option::of(eq),
        prop::option::of((operator, -5..5i64)),
        prop::option::of((field, any::<bool>())),
        1..6usize,
    )
        .prop_map(|(eq, range, order, page)| {
            // A range filter (always on `n`) needs `n` as the first order, as in the service.
            let order = match (range, order) {
                (Some(_), Some((_, desc))) => Some((Field::N, desc)),
                (_, order) => order,
            };
            Op::Query(QueryCase {
                eq,
                range,
                order,
                page,
            })
        });
    prop_oneof![
        3 => prop::collection::vec(row, 1..6).prop_map(Op::Put),
        1 => prop::collection::vec(1..30i64, 1..4).prop_map(Op::Delete),
        4 => query,
        1 => prop::collection::vec(any::<u8>(), 0..40).prop_map(Op::GarbageCursor),
    ]
}

fn to_row((id, n, s, tags, opt): RowParts) -> Row {
    Row {
        id: KeyId::new(id).unwrap(),
        n,
        s,
        tags,
        opt,
    }
}

/// The model's answer: filter, then sort by the order field and the key.
fn expected(model: &BTreeMap<i64, Row>, q: &QueryCase) -> Vec<i64> {
    let mut rows: Vec<&Row> = model
        .values()
        .filter(|r| match &q.eq {
            None => true,
            Some(Eq::S(s)) => &r.s == s,
            Some(Eq::Tag(t)) => r.tags.contains(t),
            Some(Eq::Opt(o)) => r.opt == Some(*o),
        })
        .filter(|r| match q.range {
            None => true,
            Some((Operator::Lt, v)) => r.n < v,
            Some((Operator::Le, v)) => r.n <= v,
            Some((Operator::Gt, v)) => r.n > v,
            Some((Operator::Ge, v)) => r.n >= v,
        })
        .collect();
    // Without an order, a range filter orders by its property, as in the service.
    let order = q.order.or(q.range.map(|_| (Field::N, false)));
    let cmp = |a: &&Row, b: &&Row| -> Ordering {
        let by_field = match order {
            None => Ordering::Equal,
            Some((field, desc)) => {
                let o = match field {
                    Field::N => a.n.cmp(&b.n),
                    Field::S => a.s.as_bytes().cmp(b.s.as_bytes()),
                    // Null sorts before every number.
                    Field::Opt => a.opt.cmp(&b.opt),
                };
                if desc { o.reverse() } else { o }
            }
        };
        // Ties go by key, in the direction of the last order (as in Firestore in Datastore mode).
        let by_key = match order {
            Some((_, true)) => b.id.cmp(&a.id),
            _ => a.id.cmp(&b.id),
        };
        by_field.then(by_key)
    };
    rows.sort_by(cmp);
    rows.iter().map(|r| r.id.get()).collect()
}

fn filters(q: &QueryCase) -> (Vec<Filter<Row>>, Vec<Order<Row>>) {
    let mut filters = Vec::new();
    match &q.eq {
        Some(Eq::S(s)) => filters.push(Row::S.eq(s.as_str())),
        Some(Eq::Tag(t)) => filters.push(Row::TAGS.eq(t.as_str())),
        Some(Eq::Opt(o)) => filters.push(Row::OPT.eq(*o)),
        None => {}
    }
    match q.range {
        Some((Operator::Lt, v)) => filters.push(Row::N.lt(v)),
        Some((Operator::Le, v)) => filters.push(Row::N.le(v)),
        Some((Operator::Gt, v)) => filters.push(Row::N.gt(v)),
        Some((Operator::Ge, v)) => filters.push(Row::N.ge(v)),
        None => {}
    }
    let orders = match q.order {
        None => vec![],
        Some((Field::N, desc)) => vec![if desc { Row::N.desc() } else { Row::N.asc() }],
        Some((Field::S, desc)) => vec![if desc { Row::S.desc() } else { Row::S.asc() }],
        Some((Field::Opt, desc)) => vec![if desc {
            Row::OPT.desc()
        } else {
            Row::OPT.asc()
        }],
    };
    (filters, orders)
}

async fn run(db: &Db, q: &QueryCase) -> Vec<i64> {
    let mut got = Vec::new();
    let mut cursor: Option<Cursor> = None;
    for _ in 0..100 {
        let (filters, orders) = filters(q);
        let mut query = db.query::<Row>();
        for f in filters {
            query = query.filter(f);
        }
        for o in orders {
            query = query.order(o);
        }
        let page = query
            .limit(q.page)
            .start_after(cursor.take())
            .fetch()
            .await
            .unwrap();
        assert!(page.items.len() <= q.page);
        got.extend(page.items.iter().map(|r| r.id.get()));
        match page.next {
            Some(next) => cursor = Some(next),
            None => return got,
        }
    }
    panic!("paging did not end");
}

fn cases() -> u32 {
    std::env::var("ENGINE_MODEL_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(10_000)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn engine_matches_the_reference_model(ops in prop::collection::vec(op(), 1..8)) {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        runtime.block_on(async {
            let db = Db::in_memory();
            let mut model: BTreeMap<i64, Row> = BTreeMap::new();
            for op in ops {
                match op {
                    Op::Put(rows) => {
                        let rows: Vec<Row> = rows.into_iter().map(to_row).collect();
                        let mut ids: Vec<i64> = rows.iter().map(|r| r.id.get()).collect();
                        ids.sort_unstable();
                        let duplicate = ids.windows(2).any(|w| w[0] == w[1]);
                        let result = db.put_many(&rows).await;
                        if duplicate {
                            // R-A4: refused whole.
                            prop_assert!(matches!(result, Err(Error::DuplicateKey { .. })), "{:?}", result);
                        } else {
                            prop_assert!(result.is_ok(), "{:?}", result);
                            for r in rows {
                                model.insert(r.id.get(), r);
                            }
                        }
                    }
                    Op::Delete(ids) => {
                        let mut unique = ids.clone();
                        unique.sort_unstable();
                        unique.dedup();
                        let keys: Vec<Key<Row>> = unique.iter().map(|i| Row::key(KeyId::new(*i).unwrap())).collect();
                        db.delete_many(&keys).await.unwrap();
                        for i in unique {
                            model.remove(&i);
                        }
                    }
                    Op::Query(q) => {
                        let got = run(&db, &q).await;
                        prop_assert_eq!(got, expected(&model, &q), "{:?}", q);
                    }
                    Op::GarbageCursor(bytes) => {
                        let text = String::from_utf8_lossy(&bytes).into_owned();
                        if let Ok(cursor) = text.parse::<Cursor>() {
                            let result = db.query::<Row>().start_after(cursor).fetch().await;
                            prop_assert!(matches!(result, Err(Error::InvalidCursor { .. })), "{:?}", result);
                        }
                    }
                }
            }
            Ok(())
        })?;
    }
}
