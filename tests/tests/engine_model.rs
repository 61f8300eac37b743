//! The embedded engine against a plain reference model of the same data: random writes,
//! deletes and queries (filters, orders, limits, paging by cursor), plus garbage cursors.
//! Nothing may panic, and every query must return exactly what the model says, in order.
//!
//! It runs on both stores (in memory, and a `redb` file), with the composite indexes its
//! queries need declared (so they run on index plans), and once more in memory outside
//! strict index mode without any declared index (so they run on the engine's scan).

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};

use datastore_entity::backend::embedded::Embedded;
use datastore_entity::prelude::*;
use datastore_entity::{Error, IdOrName, Query};
use proptest::prelude::*;

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(
    index(s, n), index(s, -n), index(s, opt), index(s, -opt),
    index(tags, n), index(tags, -n), index(tags, s), index(tags, -s),
    index(tags, opt), index(tags, -opt),
    index(opt, n), index(opt, -n), index(opt, s), index(opt, -s)
)]
struct Row {
    #[key]
    id: KeyId,
    n: i64,
    s: String,
    tags: Vec<String>,
    opt: Option<i64>,
}

/// The same kind, with no composite index declared.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(kind = "Row")]
struct Bare {
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

/// What the test needs of the two entity types.
trait Shape: Entity + std::fmt::Debug + Sized {
    fn from_parts(parts: RowParts) -> Self;
    fn id(&self) -> i64;
    fn query(db: &Db, q: &QueryCase) -> Query<Self>;
}

macro_rules! shape {
    ($t:ident) => {
        impl Shape for $t {
            fn from_parts((id, n, s, tags, opt): RowParts) -> $t {
                $t {
                    id: KeyId::new(id).unwrap(),
                    n,
                    s,
                    tags,
                    opt,
                }
            }

            fn id(&self) -> i64 {
                self.id.get()
            }

            fn query(db: &Db, q: &QueryCase) -> Query<$t> {
                let mut query = db.query::<$t>();
                match &q.eq {
                    Some(Eq::S(s)) => query = query.filter($t::S.eq(s.as_str())),
                    Some(Eq::Tag(t)) => query = query.filter($t::TAGS.eq(t.as_str())),
                    Some(Eq::Opt(o)) => query = query.filter($t::OPT.eq(*o)),
                    None => {}
                }
                match q.range {
                    Some((Operator::Lt, v)) => query = query.filter($t::N.lt(v)),
                    Some((Operator::Le, v)) => query = query.filter($t::N.le(v)),
                    Some((Operator::Gt, v)) => query = query.filter($t::N.gt(v)),
                    Some((Operator::Ge, v)) => query = query.filter($t::N.ge(v)),
                    None => {}
                }
                match q.order {
                    None => query,
                    Some((Field::N, desc)) => {
                        query.order(if desc { $t::N.desc() } else { $t::N.asc() })
                    }
                    Some((Field::S, desc)) => {
                        query.order(if desc { $t::S.desc() } else { $t::S.asc() })
                    }
                    Some((Field::Opt, desc)) => {
                        query.order(if desc { $t::OPT.desc() } else { $t::OPT.asc() })
                    }
                }
            }
        }
    };
}

shape!(Row);
shape!(Bare);

fn to_row(parts: RowParts) -> Row {
    Row::from_parts(parts)
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

async fn run<T: Shape>(db: &Db, q: &QueryCase) -> Vec<i64> {
    let mut got = Vec::new();
    let mut cursor: Option<Cursor> = None;
    for _ in 0..100 {
        let page = T::query(db, q)
            .limit(q.page)
            .start_after(cursor.take())
            .fetch()
            .await
            .unwrap();
        assert!(page.items.len() <= q.page);
        got.extend(page.items.iter().map(T::id));
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

/// Runs `ops` on `db` through `T`, checking every query against the model.
async fn check<T: Shape>(db: &Db, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let mut model: BTreeMap<i64, Row> = BTreeMap::new();
    for op in ops {
        match op {
            Op::Put(rows) => {
                let entities: Vec<T> = rows.iter().cloned().map(T::from_parts).collect();
                let mut ids: Vec<i64> = rows.iter().map(|r| r.0).collect();
                ids.sort_unstable();
                let duplicate = ids.windows(2).any(|w| w[0] == w[1]);
                let result = db.put_many(&entities).await;
                if duplicate {
                    // R-A4: refused whole.
                    prop_assert!(
                        matches!(result, Err(Error::DuplicateKey { .. })),
                        "{:?}",
                        result
                    );
                } else {
                    prop_assert!(result.is_ok(), "{:?}", result);
                    for r in rows {
                        model.insert(r.0, to_row(r));
                    }
                }
            }
            Op::Delete(ids) => {
                let mut unique = ids.clone();
                unique.sort_unstable();
                unique.dedup();
                let keys: Vec<Key<T>> = unique
                    .iter()
                    .map(|i| Key::new(None, Some(IdOrName::Id(KeyId::new(*i).unwrap()))))
                    .collect();
                db.delete_many(&keys).await.unwrap();
                for i in unique {
                    model.remove(&i);
                }
            }
            Op::Query(q) => {
                let got = run::<T>(db, &q).await;
                prop_assert_eq!(got, expected(&model, &q), "{:?}", q);
            }
            Op::GarbageCursor(bytes) => {
                let text = String::from_utf8_lossy(&bytes).into_owned();
                if let Ok(cursor) = text.parse::<Cursor>() {
                    let result = db.query::<T>().start_after(cursor).fetch().await;
                    prop_assert!(
                        matches!(result, Err(Error::InvalidCursor { .. })),
                        "{:?}",
                        result
                    );
                }
            }
        }
    }
    Ok(())
}

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(future)
}

/// A fresh file for one case, on a memory file system when there is one (`fsync` is then
/// free, and the test exercises the same code).
fn fresh_file() -> std::path::PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let shm = std::path::Path::new("/dev/shm");
    let dir = if shm.is_dir() {
        shm.to_owned()
    } else {
        std::env::temp_dir()
    };
    dir.join(format!(
        "engine-model-{}-{}.redb",
        std::process::id(),
        NEXT.fetch_add(1, AtomicOrdering::Relaxed)
    ))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn engine_in_memory_matches_the_reference_model(ops in prop::collection::vec(op(), 1..8)) {
        block_on(check::<Row>(&Db::in_memory(), ops))?;
    }

    #[test]
    fn engine_in_a_file_matches_the_reference_model(ops in prop::collection::vec(op(), 1..8)) {
        let path = fresh_file();
        let result = block_on(async { check::<Row>(&Db::open(&path).unwrap(), ops).await });
        let _ = std::fs::remove_file(&path);
        result?;
    }

    #[test]
    fn engine_scan_without_indexes_matches_the_reference_model(ops in prop::collection::vec(op(), 1..8)) {
        let engine = Embedded::in_memory().strict_indexes(false);
        block_on(check::<Bare>(&Db::with_backend(Arc::new(engine)), ops))?;
    }
}

/// The engine holding its data compressed (`Embedded::in_memory_compressed`, the server's
/// store in memory), with enough entities that its tables are packed into blocks many times
/// over: writes, overwrites and deletes of thousands of rows, its composite indexes built
/// from the packed entities at the first query, and every kind of query paged through and
/// checked against the model.
#[test]
fn engine_compressed_in_memory_matches_the_reference_model_past_packing() {
    let strings = ["", "a", "b", "ab", "é", "z"];
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    let mut random = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % n) as i64
    };
    let mut row = |id: i64| -> RowParts {
        let tags = random(3);
        let mut string = || strings[random(6) as usize].to_owned();
        let (s, tags) = (string(), (0..tags).map(|_| string()).collect());
        (
            id,
            random(10) - 5,
            s,
            tags,
            (random(4) > 0).then(|| random(6) - 3),
        )
    };
    let mut queries = Vec::new();
    let eqs = [
        None,
        Some(Eq::S("a".into())),
        Some(Eq::Tag("b".into())),
        Some(Eq::Opt(1)),
    ];
    for eq in eqs {
        for range in [None, Some((Operator::Ge, 0))] {
            for order in [
                None,
                Some((Field::N, false)),
                Some((Field::S, true)),
                Some((Field::Opt, false)),
            ] {
                let order = match (range, order) {
                    (Some(_), Some((_, desc))) => Some((Field::N, desc)),
                    (_, order) => order,
                };
                queries.push(Op::Query(QueryCase {
                    eq: eq.clone(),
                    range,
                    order,
                    page: 900,
                }));
            }
        }
    }
    let mut ops: Vec<Op> = (0..12)
        .map(|batch| Op::Put((1..=500).map(|i| row(batch * 500 + i)).collect()))
        .collect();
    ops.extend(queries.iter().cloned());
    ops.extend((0..4).map(|batch| Op::Delete((1..=500).map(|i| (batch * 500 + i) * 3).collect())));
    ops.extend((0..4).map(|batch| Op::Put((1..=500).map(|i| row(batch * 500 + i)).collect())));
    ops.extend(queries);
    let engine = Embedded::in_memory_compressed();
    block_on(check::<Row>(&Db::with_backend(Arc::new(engine)), ops)).unwrap();
}
