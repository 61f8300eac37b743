//! Filters: equality and ranges on every indexed value type, embedded paths, missing and
//! excluded properties.

use datastore_entity::Error;
use datastore_entity::prelude::*;

use super::{Row, Sample, ids, row, sample};
use crate::Address;
use crate::harness::{Backend, Ctx};

#[macro_export]
macro_rules! filters_tests {
    ($backend:expr) => {
        $crate::conformance!($backend;
            filter_equality_on_each_value_type,
            filter_integers_and_doubles_are_different_values,
            filter_ranges_lt_le_gt_ge,
            filter_range_with_equality_on_another_property,
            filter_a_range_property_is_ordered_after_the_explicit_orders,
            filter_on_an_embedded_property_by_dotted_path,
            filter_a_whole_embedded_entity_is_refused,
            filter_missing_and_null_properties,
            filter_excluded_properties_are_invisible,
        );
    };
}

async fn samples(t: &Ctx, n: i64) -> Vec<Sample> {
    let all: Vec<Sample> = (0..n).map(|i| sample(&format!("s{i:02}"), i)).collect();
    t.db.put_many(&all).await.unwrap();
    all
}

fn names(found: &[Sample]) -> Vec<&str> {
    found.iter().map(|s| s.name.as_str()).collect()
}

async fn matching(t: &Ctx, filter: datastore_entity::Filter<Sample>) -> Vec<String> {
    let found =
        t.db.query::<Sample>()
            .filter(filter)
            .fetch()
            .await
            .unwrap()
            .items;
    names(&found).into_iter().map(str::to_owned).collect()
}

pub async fn filter_equality_on_each_value_type(t: Ctx) {
    let all = samples(&t, 6).await;
    assert_eq!(matching(&t, Sample::COUNT.eq(4)).await, ["s04"]);
    assert_eq!(
        matching(&t, Sample::FLAG.eq(true)).await,
        ["s00", "s02", "s04"]
    );
    assert_eq!(matching(&t, Sample::RATIO.eq(1.25)).await, ["s05"]);
    assert_eq!(matching(&t, Sample::LABEL.eq("label-003")).await, ["s03"]);
    assert_eq!(matching(&t, Sample::AT.eq(all[2].at)).await, ["s02"]);
    assert_eq!(
        matching(&t, Sample::BYTES.eq(all[1].bytes.clone())).await,
        ["s01"]
    );
    assert_eq!(matching(&t, Sample::PLACE.eq(all[3].place)).await, ["s03"]);
    assert_eq!(
        matching(&t, Sample::MAYBE.eq("three")).await,
        ["s00", "s03"]
    );
    assert!(matching(&t, Sample::COUNT.eq(99)).await.is_empty());
}

pub async fn filter_integers_and_doubles_are_different_values(t: Ctx) {
    #[derive(Entity, Debug)]
    struct Mixed {
        #[key]
        id: KeyId,
        value: datastore_entity::Value,
    }
    use datastore_entity::Value;
    for (id, value) in [(1, Value::Integer(1)), (2, Value::Double(1.0))] {
        t.db.put(&Mixed {
            id: KeyId::new(id).unwrap(),
            value,
        })
        .await
        .unwrap();
    }
    let ints =
        t.db.query::<Mixed>()
            .filter(Mixed::VALUE.eq(Value::Integer(1)))
            .fetch()
            .await
            .unwrap();
    assert_eq!(
        ints.items.iter().map(|m| m.id.get()).collect::<Vec<_>>(),
        [1]
    );
    let doubles =
        t.db.query::<Mixed>()
            .filter(Mixed::VALUE.eq(Value::Double(1.0)))
            .fetch()
            .await
            .unwrap();
    assert_eq!(
        doubles.items.iter().map(|m| m.id.get()).collect::<Vec<_>>(),
        [2]
    );
}

pub async fn filter_ranges_lt_le_gt_ge(t: Ctx) {
    let rows: Vec<Row> = (1..=10).map(|i| row(i, i * 10, "g")).collect();
    t.db.put_many(&rows).await.unwrap();
    let run = |f: datastore_entity::Filter<Row>| {
        let db = t.db.clone();
        async move { ids(&db.query::<Row>().filter(f).fetch().await.unwrap().items) }
    };
    assert_eq!(run(Row::RANK.lt(30)).await, [1, 2]);
    assert_eq!(run(Row::RANK.le(30)).await, [1, 2, 3]);
    assert_eq!(run(Row::RANK.gt(80)).await, [9, 10]);
    assert_eq!(run(Row::RANK.ge(80)).await, [8, 9, 10]);
    let between =
        t.db.query::<Row>()
            .filter(Row::RANK.gt(20))
            .filter(Row::RANK.le(50))
            .fetch()
            .await
            .unwrap();
    assert_eq!(ids(&between.items), [3, 4, 5]);
}

pub async fn filter_range_with_equality_on_another_property(t: Ctx) {
    let rows: Vec<Row> = (1..=12)
        .map(|i| row(i, i, if i % 3 == 0 { "a" } else { "b" }))
        .collect();
    t.db.put_many(&rows).await.unwrap();
    let found =
        t.db.query::<Row>()
            .filter(Row::GROUP.eq("a"))
            .filter(Row::RANK.ge(6))
            .order(Row::RANK.desc())
            .fetch()
            .await;
    match found {
        Ok(page) => assert_eq!(ids(&page.items), [12, 9, 6]),
        // Without the composite index (group, -rank) the service refuses the query.
        Err(Error::MissingIndex { .. }) => {}
        Err(other) => panic!("{other:?}"),
    }
}

pub async fn filter_a_range_property_is_ordered_after_the_explicit_orders(t: Ctx) {
    t.db.put_many(&[
        row(1, 3, "b"),
        row(2, 2, "a"),
        row(3, 1, "b"),
        row(4, 0, "a"),
    ])
    .await
    .unwrap();
    let result =
        t.db.query::<Row>()
            .filter(Row::RANK.gt(0))
            .order(Row::GROUP.desc())
            .fetch()
            .await;
    match t.backend {
        // The legacy emulator insists on the range property as the first order.
        Backend::Datastore => {
            assert!(
                matches!(result, Err(Error::InvalidQuery { .. })),
                "{result:?}"
            );
        }
        // Firestore in Datastore mode orders by group, then by rank in the direction of the
        // last explicit order.
        _ => assert_eq!(ids(&result.unwrap().items), [1, 3, 2]),
    }
}

pub async fn filter_on_an_embedded_property_by_dotted_path(t: Ctx) {
    samples(&t, 4).await;
    let paris = matching(&t, Sample::HOME.dot(Address::CITY).eq("Paris")).await;
    assert_eq!(paris, ["s00", "s02"]);
}

pub async fn filter_a_whole_embedded_entity_is_refused(t: Ctx) {
    samples(&t, 2).await;
    let result =
        t.db.query::<Sample>()
            .filter(Sample::HOME.eq(Address {
                city: "Paris".into(),
            }))
            .fetch()
            .await;
    assert!(
        matches!(result, Err(Error::InvalidQuery { .. })),
        "{:?}: {result:?}",
        t.backend
    );
}

pub async fn filter_missing_and_null_properties(t: Ctx) {
    samples(&t, 6).await;
    // `maybe` is null where the count is not a multiple of 3: null is a value, and equal to null.
    let nulls = matching(&t, Sample::MAYBE.is_null()).await;
    assert_eq!(nulls, ["s01", "s02", "s04", "s05"]);
    // An entity without the property at all is not returned by a filter on it.
    #[derive(Entity, Debug)]
    #[entity(kind = "Sample")]
    struct Bare {
        #[key]
        name: KeyName,
    }
    t.db.put(&Bare {
        name: KeyName::new("bare").unwrap(),
    })
    .await
    .unwrap();
    let again = matching(&t, Sample::MAYBE.is_null()).await;
    assert_eq!(again, ["s01", "s02", "s04", "s05"]);
}

pub async fn filter_excluded_properties_are_invisible(t: Ctx) {
    // `notes` is excluded: no typed filter exists on it, and a raw filter finds nothing.
    samples(&t, 3).await;
    let raw: datastore_entity::Filter<Sample> =
        datastore_entity::PropertyPath::<Sample, String, datastore_entity::Indexed>::new("notes")
            .eq("nnnnnnnnnn");
    assert!(matching(&t, raw).await.is_empty());
}
