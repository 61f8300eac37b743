//! Server-side property transforms (issue #29): increment, maximum, minimum, append missing
//! elements, remove all from an array, request time — applied to the stored entity without a
//! read, alone or after a write, with their results in order.
//!
//! The Firestore emulator referees; the legacy Datastore emulator does not know the field (its
//! REST surface refuses it as an invalid payload, its gRPC surface drops it) nor property masks
//! (a transform-only update would replace the entity with nothing): the client learns it from
//! the server's answers and refuses with `Error::Unsupported`, sending nothing.

use datastore_entity::backend::{
    Change, Mask, Mutation, PropertyFilter, PropertyTransform, QuerySpec, TransformKind,
};
use datastore_entity::prelude::*;
use datastore_entity::{Operator, PropertyMap, Value};

use crate::harness::{Backend, Ctx};

#[macro_export]
macro_rules! transforms_tests {
    ($backend:expr) => {
        $crate::conformance!($backend;
            transforms_numbers_on_the_server,
            transforms_arrays_as_sets,
            transforms_request_time,
            transforms_need_the_entity,
            transforms_after_a_put_see_its_values,
            transforms_in_a_transaction,
            transforms_write_an_indexed_value,
            transforms_through_an_embedded_entity,
            transforms_as_the_first_call_with_an_id_to_allocate,
            transforms_keep_the_exclusion_of_the_elements_stored,
        );
    };
}

/// A document the transforms change.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(kind = "Scored")]
pub struct Score {
    #[key]
    pub id: KeyName,
    pub count: i64,
    pub score: f64,
    pub tags: Vec<String>,
    pub marks: Vec<i64>,
    #[exclude_from_index]
    pub seen: Option<Timestamp>,
    #[exclude_from_index]
    pub hidden: i64,
}

fn tally(id: &str) -> Score {
    Score {
        id: KeyName::new(id).unwrap(),
        count: 0,
        score: 0.0,
        tags: Vec::new(),
        marks: Vec::new(),
        seen: None,
        hidden: 0,
    }
}

/// The legacy emulator does not know transforms: the client refuses before sending, and the
/// test ends there.
fn unsupported<T: std::fmt::Debug>(t: &Ctx, result: &Result<T, Error>) -> bool {
    if t.backend != Backend::Datastore {
        return false;
    }
    assert!(
        matches!(result, Err(Error::Unsupported { reason }) if reason.contains("nothing was sent")),
        "{result:?}"
    );
    true
}

pub async fn transforms_numbers_on_the_server(t: Ctx) {
    let key = t.db.put(&tally("numbers")).await.unwrap();
    let first =
        t.db.transform(
            &key,
            [
                Score::COUNT.increment(5),
                Score::COUNT.increment(-2),
                Score::SCORE.increment(1.5),
            ],
        )
        .await;
    if unsupported(&t, &first) {
        let stored = t.db.get(&key).await.unwrap();
        assert_eq!(stored, Some(tally("numbers")), "nothing written");
        return;
    }
    assert_eq!(
        first.unwrap(),
        [Value::Integer(5), Value::Integer(3), Value::Double(1.5)],
        "each result is the value after that transform"
    );
    let results =
        t.db.transform(
            &key,
            [
                Score::COUNT.maximum(10),
                Score::COUNT.minimum(7),
                Score::SCORE.maximum(0.5),
                Score::HIDDEN.increment(i64::MAX),
                Score::HIDDEN.increment(1),
            ],
        )
        .await
        .unwrap();
    assert_eq!(
        results,
        [
            Value::Integer(10),
            Value::Integer(7),
            Value::Double(1.5),
            Value::Integer(i64::MAX),
            Value::Integer(i64::MAX), // saturates
        ]
    );
    let stored = t.db.get(&key).await.unwrap().unwrap();
    assert_eq!(
        (stored.count, stored.score, stored.hidden),
        (7, 1.5, i64::MAX)
    );
}

pub async fn transforms_arrays_as_sets(t: Ctx) {
    let mut start = tally("arrays");
    start.tags = vec!["a".into(), "b".into()];
    start.marks = vec![1, 2, 2, 3];
    let key = t.db.put(&start).await.unwrap();
    let results =
        t.db.transform(
            &key,
            [
                Score::TAGS.append_missing(vec![
                    "b".to_owned(),
                    "c".into(),
                    "c".into(),
                    "d".into(),
                ]),
                Score::MARKS.remove_all(vec![2, 9]),
            ],
        )
        .await;
    if unsupported(&t, &results) {
        return;
    }
    assert_eq!(results.unwrap(), [Value::Null, Value::Null]);
    let stored = t.db.get(&key).await.unwrap().unwrap();
    assert_eq!(stored.tags, ["a", "b", "c", "d"], "appended in order, once");
    assert_eq!(stored.marks, [1, 3], "every equal element removed");
    // Removing everything leaves an empty array, which reads back as an empty `Vec`.
    t.db.transform(&key, [Score::MARKS.remove_all(vec![1, 3])])
        .await
        .unwrap();
    assert_eq!(
        t.db.get(&key).await.unwrap().unwrap().marks,
        Vec::<i64>::new()
    );
}

pub async fn transforms_request_time(t: Ctx) {
    let key = t.db.put(&tally("time")).await.unwrap();
    let before = Timestamp::now();
    let results =
        t.db.transform(
            &key,
            [Score::SEEN.request_time(), Score::COUNT.increment(1)],
        )
        .await;
    if unsupported(&t, &results) {
        return;
    }
    let results = results.unwrap();
    let Value::Timestamp(at) = results[0] else {
        panic!("{results:?}")
    };
    assert_eq!(
        at.as_micros() % 1000,
        0,
        "milliseconds, as the service's request time"
    );
    let slack = std::time::Duration::from_secs(5);
    assert!(
        at >= before.checked_sub(slack).unwrap() && at <= Timestamp::now() + slack,
        "{at} around {before}"
    );
    let stored = t.db.get(&key).await.unwrap().unwrap();
    assert_eq!(stored.seen, Some(at));
}

pub async fn transforms_need_the_entity(t: Ctx) {
    let key = Score::key(KeyName::new("absent").unwrap());
    let missing = t.db.transform(&key, [Score::COUNT.increment(1)]).await;
    if !unsupported(&t, &missing) {
        assert!(
            matches!(missing, Err(Error::NotFound { .. })),
            "{missing:?}"
        );
    }
    assert_eq!(t.db.get(&key).await.unwrap(), None, "nothing created");
    // No transforms: nothing to send.
    assert_eq!(t.db.transform(&key, []).await.unwrap(), Vec::<Value>::new());
}

pub async fn transforms_after_a_put_see_its_values(t: Ctx) {
    let mut start = tally("with-put");
    start.count = 40;
    let results =
        t.db.put_transformed(&start, [Score::COUNT.increment(2)])
            .await;
    if unsupported(&t, &results) {
        return;
    }
    assert_eq!(results.unwrap(), [Value::Integer(42)]);
    let key = Score::key(KeyName::new("with-put").unwrap());
    assert_eq!(t.db.get(&key).await.unwrap().unwrap().count, 42);
}

pub async fn transforms_in_a_transaction(t: Ctx) {
    let key = t.db.put(&tally("in-tx")).await.unwrap();
    let committed =
        t.db.transaction(async |tx| {
            let current = tx.get(&key).await?.expect("written");
            tx.transform(&key, [Score::COUNT.increment(current.count + 3)])
                .await?;
            Ok::<_, Error>(())
        })
        .await;
    if unsupported(&t, &committed) {
        return;
    }
    committed.unwrap();
    assert_eq!(t.db.get(&key).await.unwrap().unwrap().count, 3);
}

pub async fn transforms_write_an_indexed_value(t: Ctx) {
    // The Firestore emulator writes a transformed property indexed, even one the entity
    // stored excluded: a query on it finds the entity. The next typed put excludes it again.
    let key = t.db.put(&tally("indexed")).await.unwrap();
    let results = t.db.transform(&key, [Score::HIDDEN.increment(7)]).await;
    if unsupported(&t, &results) {
        return;
    }
    let spec = |value: i64| QuerySpec {
        partition: t.db.partition().clone(),
        kind: "Scored".to_owned(),
        filters: vec![datastore_entity::backend::FilterNode::Property(
            PropertyFilter {
                property: "hidden".to_owned(),
                op: Operator::Equal,
                value: Value::Integer(value),
            },
        )],
        ..QuerySpec::default()
    };
    let found = t.db.backend().run_query(&spec(7), None).await.unwrap();
    assert_eq!(found.results.len(), 1, "indexed by the transform");
    let mut again = t.db.get(&key).await.unwrap().unwrap();
    again.hidden = 8;
    t.db.put(&again).await.unwrap();
    let found = t.db.backend().run_query(&spec(8), None).await.unwrap();
    assert!(found.results.is_empty(), "excluded again by the put");
}

pub async fn transforms_through_an_embedded_entity(t: Ctx) {
    // Untyped, a transform reaches into an embedded entity by its path (`e.n`), creating it.
    let key = t.db.put(&tally("embedded")).await.unwrap();
    let raw = t.db.bind(&key).unwrap().into_raw();
    let change = |path: Vec<&'static str>, by: i64| Change {
        transforms: vec![PropertyTransform {
            path: path.into_iter().map(Into::into).collect(),
            kind: TransformKind::Increment(Value::Integer(by)),
        }],
        ..Change::from(Mutation::Update(
            raw.clone(),
            PropertyMap::new(),
            Mask::Paths(Vec::new()),
        ))
    };
    let first =
        t.db.backend()
            .commit_changes(vec![change(vec!["e", "n"], 2)], None)
            .await;
    if unsupported(&t, &first) {
        return;
    }
    let first = first.unwrap();
    assert_eq!(first.results[0].transform_results, [Value::Integer(2)]);
    let again =
        t.db.backend()
            .commit_changes(vec![change(vec!["e", "n"], 3)], None)
            .await
            .unwrap();
    assert_eq!(again.results[0].transform_results, [Value::Integer(5)]);
    let stored = t.db.backend().lookup(&[raw], None).await.unwrap();
    let stored = stored[0].as_ref().expect("there");
    let Some(Value::Entity(inner)) = stored.get("e").map(|p| &p.value) else {
        panic!("{stored:?}")
    };
    assert_eq!(inner.get("n").map(|p| &p.value), Some(&Value::Integer(5)));
    // The typed entity still reads: `e` is a property its type does not declare.
    assert!(t.db.get(&key).await.unwrap().is_some());
}

/// A counter row whose id the write allocates.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(kind = "Visits")]
pub struct Visits {
    #[key]
    pub id: Option<KeyId>,
    pub n: i64,
}

pub async fn transforms_as_the_first_call_with_an_id_to_allocate(t: Ctx) {
    // The handle's first call: the cloud backend does not know yet whether the server has
    // transforms, and asks with a lookup, which needs a complete key.
    let written =
        t.db.put_transformed(&Visits { id: None, n: 1 }, [Visits::N.increment(2)])
            .await;
    if unsupported(&t, &written) {
        return;
    }
    assert_eq!(written.unwrap(), [Value::Integer(3)]);
    let all = t.db.query::<Visits>().fetch().await.unwrap();
    assert_eq!(all.items.len(), 1);
    assert!(all.items[0].id.is_some(), "an id was allocated");
    assert_eq!(all.items[0].n, 3);
}

/// Lines never queried, excluded from indexes.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(kind = "Log")]
pub struct Log {
    #[key]
    pub id: KeyName,
    #[exclude_from_index]
    pub lines: Vec<String>,
}

pub async fn transforms_keep_the_exclusion_of_the_elements_stored(t: Ctx) {
    // Issue #48: the engine made every element indexed, so a transform of an excluded array of
    // one 2,000-byte line failed with the indexed-string limit, and of 6,000 lines with the
    // 5,000 indexed values. The service keeps the stored elements excluded and indexes only
    // what a transform adds.
    let long = Log {
        id: KeyName::new("long").unwrap(),
        lines: vec!["L".repeat(2_000)],
    };
    let many = Log {
        id: KeyName::new("many").unwrap(),
        lines: (0..6_000).map(|i| format!("line {i}")).collect(),
    };
    let (long_key, many_key) = (
        t.db.put(&long).await.unwrap(),
        t.db.put(&many).await.unwrap(),
    );
    let appended =
        t.db.transform(&long_key, [Log::LINES.append_missing(vec!["y".to_owned()])]);
    let appended = appended.await;
    if unsupported(&t, &appended) {
        return;
    }
    appended.unwrap();
    t.db.transform(&many_key, [Log::LINES.append_missing(vec!["z".to_owned()])])
        .await
        .unwrap();
    t.db.transform(
        &many_key,
        [Log::LINES.remove_all(vec!["line 0".to_owned()])],
    )
    .await
    .unwrap();
    let read = t.db.get(&long_key).await.unwrap().unwrap();
    assert_eq!(read.lines, [long.lines[0].clone(), "y".to_owned()]);
    assert_eq!(
        t.db.get(&many_key).await.unwrap().unwrap().lines.len(),
        6_000
    );
    // As stored: the old element excluded, the appended one indexed, each with its flag.
    let raw = t.db.bind(&long_key).unwrap().into_raw();
    let stored =
        t.db.backend()
            .lookup(std::slice::from_ref(&raw), None)
            .await
            .unwrap();
    let lines = stored[0].as_ref().unwrap().get("lines").unwrap();
    assert_eq!(
        (lines.element_excluded(0), lines.element_excluded(1)),
        (true, false),
        "{lines:?}"
    );
    // The appended element is found through its index, the stored one is not.
    let query = |value: &str| QuerySpec {
        partition: t.db.partition().clone(),
        kind: "Log".to_owned(),
        filters: vec![
            PropertyFilter {
                property: "lines".to_owned(),
                op: Operator::Equal,
                value: Value::String(value.to_owned()),
            }
            .into(),
        ],
        ..QuerySpec::default()
    };
    let found = t.db.backend().run_query(&query("y"), None).await.unwrap();
    assert_eq!(found.results.len(), 1);
    let found =
        t.db.backend()
            .run_query(&query("line 7"), None)
            .await
            .unwrap();
    assert!(
        found.results.is_empty(),
        "an excluded element is not indexed"
    );
}
