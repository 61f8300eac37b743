//! Today's query surface (issue #9): `!=`, IN, NOT IN, OR nested with AND, range filters on
//! several properties, and COUNT / SUM / AVG — on arrays, nulls and mixed types, with cursors.
//!
//! Every expectation is exact, and the same on the embedded engine and the Firestore emulator
//! in Datastore mode (today's production service), so the two are compared value by value.
//! The legacy Datastore emulator predates these operators: each test checks that it refuses
//! them with a clear error, and runs what it does support (AND of `=` and one range property,
//! COUNT).

use datastore_entity::prelude::*;
use datastore_entity::{Error, Filter, Query, Value};

use crate::harness::{Backend, Ctx};

#[macro_export]
macro_rules! operators_tests {
    ($backend:expr) => {
        $crate::conformance!($backend;
            op_not_equal_orders_by_its_property,
            op_in_is_one_equality_per_value_in_key_order,
            op_in_with_an_order,
            op_not_in_is_the_ranges_between_its_values,
            op_or_of_equalities_returns_each_entity_once,
            op_or_with_a_range_orders_by_the_range_property,
            op_and_nested_in_or,
            op_range_filters_on_several_properties,
            op_arrays_under_not_equal_in_and_not_in,
            op_nulls_and_mixed_types_under_not_equal_and_in,
            op_cursors_page_through_or_and_in,
            op_count_and_count_up_to,
            op_sum_and_avg,
            op_sum_and_avg_over_arrays_and_of_nothing,
            op_sum_and_avg_inside_embedded_entities,
            op_sum_and_avg_of_an_array_its_filter_fixes,
            op_key_ranges_and_descending_key_order,
            op_key_in_not_equal_and_not_in,
            op_a_missing_property_matches_no_operator,
        );
    };
}

/// An entity of every kind of value the operators meet.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(
    kind = "Item",
    index(color, size),
    index(color, -size),
    index(size, weight),
    index(color, nums)
)]
pub struct Item {
    #[key]
    pub id: KeyId,
    pub color: String,
    pub size: i64,
    pub weight: f64,
    pub nums: Vec<i64>,
    pub any: Value,
}

fn item(id: i64, color: &str, size: i64, weight: f64, nums: &[i64], any: Value) -> Item {
    Item {
        id: KeyId::new(id).unwrap(),
        color: color.to_owned(),
        size,
        weight,
        nums: nums.to_vec(),
        any,
    }
}

async fn items(t: &Ctx) {
    t.db.put_many(&[
        item(1, "red", 1, 5.0, &[1, 5], Value::Integer(1)),
        item(2, "blue", 2, 1.5, &[2], Value::Null),
        item(3, "red", 3, 2.5, &[], Value::String("x".into())),
        item(4, "green", 4, 4.0, &[5, 7], Value::Boolean(true)),
        item(5, "blue", 5, 0.5, &[1], Value::Double(1.0)),
        item(6, "red", 6, 3.0, &[3, 9], Value::Integer(7)),
    ])
    .await
    .unwrap();
}

/// The ids of a query's results (one per row: an entity may come once per matching value).
async fn ids(query: Query<Item>) -> Result<Vec<i64>, Error> {
    Ok(query
        .fetch()
        .await?
        .items
        .iter()
        .map(|i| i.id.get())
        .collect())
}

async fn matching(t: &Ctx, filter: Filter<Item>) -> Result<Vec<i64>, Error> {
    ids(t.db.query::<Item>().filter(filter)).await
}

/// On the legacy emulator, which predates the operator: the query is refused with a clear
/// error (and `true` is returned, ending the test).
fn legacy_refuses<T: std::fmt::Debug>(t: &Ctx, result: &Result<T, Error>) -> bool {
    if t.backend != Backend::Datastore {
        return false;
    }
    assert!(
        matches!(
            result,
            Err(Error::InvalidQuery { .. } | Error::Service { .. })
        ),
        "the legacy emulator answered {result:?}"
    );
    true
}

pub async fn op_not_equal_orders_by_its_property(t: Ctx) {
    items(&t).await;
    let ne = matching(&t, Item::SIZE.ne(3)).await;
    if legacy_refuses(&t, &ne) {
        return;
    }
    assert_eq!(ne.unwrap(), [1, 2, 4, 5, 6]);
    // Ordered by the property: blue, blue, green.
    assert_eq!(
        matching(&t, Item::COLOR.ne("red")).await.unwrap(),
        [2, 5, 4]
    );
    // An explicit order first, the not-equal property after it (in its direction).
    let ordered = ids(t
        .db
        .query::<Item>()
        .filter(Item::SIZE.ne(3))
        .order(Item::SIZE.desc()))
    .await
    .unwrap();
    assert_eq!(ordered, [6, 5, 4, 2, 1]);
}

pub async fn op_in_is_one_equality_per_value_in_key_order(t: Ctx) {
    items(&t).await;
    let found = matching(&t, Item::COLOR.is_in(["red", "green"])).await;
    if legacy_refuses(&t, &found) {
        return;
    }
    assert_eq!(found.unwrap(), [1, 3, 4, 6]);
    // A value listed twice, or matching nothing, changes nothing.
    assert_eq!(
        matching(&t, Item::COLOR.is_in(["green", "green", "pink"]))
            .await
            .unwrap(),
        [4]
    );
    // A list built at run time.
    let wanted: Vec<String> = vec!["blue".into()];
    assert_eq!(
        matching(&t, Item::COLOR.is_in(wanted)).await.unwrap(),
        [2, 5]
    );
}

pub async fn op_in_with_an_order(t: Ctx) {
    items(&t).await;
    let found = ids(t
        .db
        .query::<Item>()
        .filter(Item::COLOR.is_in(["red", "green"]))
        .order(Item::SIZE.desc()))
    .await;
    if legacy_refuses(&t, &found) {
        return;
    }
    assert_eq!(found.unwrap(), [6, 4, 3, 1]);
}

pub async fn op_not_in_is_the_ranges_between_its_values(t: Ctx) {
    items(&t).await;
    let found = matching(&t, Item::SIZE.not_in([1, 3, 5])).await;
    if legacy_refuses(&t, &found) {
        return;
    }
    assert_eq!(found.unwrap(), [2, 4, 6]);
    assert_eq!(
        matching(&t, Item::COLOR.not_in(["red"])).await.unwrap(),
        [2, 5, 4]
    );
}

pub async fn op_or_of_equalities_returns_each_entity_once(t: Ctx) {
    items(&t).await;
    let found = matching(&t, Item::COLOR.eq("green").or(Item::SIZE.eq(1))).await;
    if legacy_refuses(&t, &found) {
        return;
    }
    assert_eq!(found.unwrap(), [1, 4]);
    // Entity 1 matches both branches: once.
    let both = matching(&t, Item::COLOR.eq("red").or(Item::SIZE.le(1))).await;
    assert_eq!(both.unwrap(), [1, 3, 6]);
    // `Filter::or` reads the same.
    let same = matching(&t, Filter::or(Item::COLOR.eq("green"), Item::SIZE.eq(1))).await;
    assert_eq!(same.unwrap(), [1, 4]);
}

pub async fn op_or_with_a_range_orders_by_the_range_property(t: Ctx) {
    items(&t).await;
    let found = matching(&t, Item::COLOR.eq("blue").or(Item::SIZE.gt(4))).await;
    if legacy_refuses(&t, &found) {
        return;
    }
    assert_eq!(found.unwrap(), [2, 5, 6]);
}

pub async fn op_and_nested_in_or(t: Ctx) {
    items(&t).await;
    let red_and_big = Item::COLOR.eq("red").and(Item::SIZE.gt(2));
    let found = matching(&t, red_and_big.or(Item::COLOR.eq("blue"))).await;
    if legacy_refuses(&t, &found) {
        return;
    }
    assert_eq!(found.unwrap(), [2, 3, 5, 6]);
    // An OR inside an AND, beside another filter.
    let found = ids(t
        .db
        .query::<Item>()
        .filter(Item::COLOR.eq("red").or(Item::COLOR.eq("green")))
        .filter(Item::SIZE.lt(5)))
    .await
    .unwrap();
    assert_eq!(found, [1, 3, 4]);
}

pub async fn op_range_filters_on_several_properties(t: Ctx) {
    items(&t).await;
    let found = ids(t
        .db
        .query::<Item>()
        .filter(Item::SIZE.gt(1))
        .filter(Item::WEIGHT.lt(4.0)))
    .await;
    if legacy_refuses(&t, &found) {
        return;
    }
    // Ordered by the range properties, by name: size, then weight.
    assert_eq!(found.unwrap(), [2, 3, 5, 6]);
}

pub async fn op_arrays_under_not_equal_in_and_not_in(t: Ctx) {
    items(&t).await;
    // One row per element that differs, ordered by it; the empty array has none.
    let ne = matching(&t, Item::NUMS.ne(5)).await;
    if legacy_refuses(&t, &ne) {
        return;
    }
    assert_eq!(ne.unwrap(), [1, 5, 2, 6, 4, 6]);
    // Unordered, IN returns each entity once.
    assert_eq!(
        matching(&t, Item::NUMS.is_in([1, 5])).await.unwrap(),
        [1, 4, 5]
    );
    // Ordered by the array, an entity comes once per element (not only the listed ones).
    let ordered = ids(t
        .db
        .query::<Item>()
        .filter(Item::NUMS.is_in([1, 5]))
        .order(Item::NUMS.asc()))
    .await
    .unwrap();
    assert_eq!(ordered, [1, 5, 1, 4, 4]);
    assert_eq!(
        matching(&t, Item::NUMS.not_in([1, 5])).await.unwrap(),
        [2, 6, 4, 6]
    );
}

pub async fn op_nulls_and_mixed_types_under_not_equal_and_in(t: Ctx) {
    items(&t).await;
    // Everything but null, in the order of values across types.
    let ne = matching(&t, Item::ANY.ne(Value::Null)).await;
    if legacy_refuses(&t, &ne) {
        return;
    }
    assert_eq!(ne.unwrap(), [1, 6, 4, 3, 5]);
    // Null is a value IN can list; an integer does not match the equal double.
    let found = matching(
        &t,
        Item::ANY.is_in([Value::Null, Value::Integer(7), Value::Integer(1)]),
    )
    .await
    .unwrap();
    assert_eq!(found, [1, 2, 6]);
    // NOT IN keeps null: it is a value other than the listed ones.
    let found = matching(&t, Item::ANY.not_in([Value::Integer(1), Value::Integer(7)]))
        .await
        .unwrap();
    assert_eq!(found, [2, 4, 3, 5]);
}

pub async fn op_cursors_page_through_or_and_in(t: Ctx) {
    items(&t).await;
    let queries: [(Filter<Item>, Vec<i64>); 4] = [
        (Item::COLOR.eq("blue").or(Item::SIZE.gt(4)), vec![2, 5, 6]),
        (Item::NUMS.is_in([1, 5, 9]), vec![1, 4, 5, 6]),
        (Item::NUMS.ne(5), vec![1, 5, 2, 6, 4, 6]),
        (Item::NUMS.not_in([5]), vec![1, 5, 2, 6, 4, 6]),
    ];
    for (filter, all) in queries {
        let mut pages = Vec::new();
        let mut cursor = None;
        loop {
            let page =
                t.db.query::<Item>()
                    .filter(filter.clone())
                    .limit(2)
                    .start_after(cursor)
                    .fetch()
                    .await;
            if legacy_refuses(&t, &page) {
                return;
            }
            let page = page.unwrap();
            pages.push(page.items.iter().map(|i| i.id.get()).collect::<Vec<_>>());
            // A cursor goes through text and back, as in a "next" link.
            match page.next {
                Some(next) => cursor = Some(next.to_string().parse().unwrap()),
                None => break,
            }
        }
        assert_eq!(pages.concat(), all, "{filter:?}");
        assert!(pages.iter().all(|p| p.len() <= 2));
        // The stream reads the same, page by page.
        let streamed: Vec<i64> =
            t.db.query::<Item>()
                .filter(filter)
                .stream()
                .map_ok(|i| i.id.get())
                .try_collect()
                .await
                .unwrap();
        assert_eq!(streamed, all);
    }
}

pub async fn op_count_and_count_up_to(t: Ctx) {
    items(&t).await;
    let all = t.db.query::<Item>().count().await;
    if legacy_refuses(&t, &all) {
        return;
    }
    assert_eq!(all.unwrap(), 6);
    let red = t.db.query::<Item>().filter(Item::COLOR.eq("red"));
    assert_eq!(red.clone().count().await.unwrap(), 3);
    assert_eq!(red.clone().count_up_to(2).await.unwrap(), 2);
    assert_eq!(red.count_up_to(10).await.unwrap(), 3);
    assert_eq!(t.db.query::<Item>().limit(4).count().await.unwrap(), 4);
    if t.backend == Backend::Datastore {
        return;
    }
    // A count counts rows: once per matching element of an ordered array.
    let rows = t.db.query::<Item>().filter(Item::NUMS.ne(5));
    assert_eq!(rows.count().await.unwrap(), 6);
    let either =
        t.db.query::<Item>()
            .filter(Item::COLOR.eq("green").or(Item::SIZE.eq(1)));
    assert_eq!(either.count().await.unwrap(), 2);
}

pub async fn op_sum_and_avg(t: Ctx) {
    items(&t).await;
    let sum = t.db.query::<Item>().sum(Item::SIZE).await;
    if legacy_refuses(&t, &sum) {
        return;
    }
    let sum: i64 = sum.unwrap();
    assert_eq!(sum, 21);
    let weight: f64 = t.db.query::<Item>().sum(Item::WEIGHT).await.unwrap();
    assert_eq!(weight, 16.5);
    let avg = t.db.query::<Item>().avg(Item::WEIGHT).await.unwrap();
    assert_eq!(avg, Some(2.75));
    let red = t.db.query::<Item>().filter(Item::COLOR.eq("red"));
    assert_eq!(red.clone().sum(Item::SIZE).await.unwrap(), 10);
    assert_eq!(red.avg(Item::SIZE).await.unwrap(), Some(10.0 / 3.0));
}

pub async fn op_sum_and_avg_over_arrays_and_of_nothing(t: Ctx) {
    items(&t).await;
    let sum = t.db.query::<Item>().sum(Item::NUMS).await;
    if legacy_refuses(&t, &sum) {
        return;
    }
    // Every element counts.
    assert_eq!(sum.unwrap(), 33);
    assert_eq!(
        t.db.query::<Item>().avg(Item::NUMS).await.unwrap(),
        Some(33.0 / 8.0)
    );
    let none = t.db.query::<Item>().filter(Item::COLOR.eq("pink"));
    assert_eq!(none.clone().sum(Item::SIZE).await.unwrap(), 0);
    assert_eq!(none.clone().avg(Item::SIZE).await.unwrap(), None);
    assert_eq!(none.count().await.unwrap(), 0);
}

/// An embedded entity with a number.
#[derive(Entity, Debug, Clone, PartialEq)]
pub struct Dims {
    pub weight: i64,
}

/// The sum and mean of `dims.weight` read the embedded property's index, with or without a
/// filter on it. (With a filter on another property, the service needs a composite index
/// holding `dims.weight`, which the derive's `index(..)` does not declare yet.)
pub async fn op_sum_and_avg_inside_embedded_entities(t: Ctx) {
    #[derive(Entity, Debug, Clone, PartialEq)]
    struct Parcel {
        #[key]
        id: KeyId,
        dims: Dims,
        tag: String,
    }
    let parcel = |id: i64, weight: i64, tag: &str| Parcel {
        id: KeyId::new(id).unwrap(),
        dims: Dims { weight },
        tag: tag.to_owned(),
    };
    t.db.put_many(&[parcel(1, 10, "a"), parcel(2, 20, "a"), parcel(3, 120, "b")])
        .await
        .unwrap();
    let weight = || Parcel::DIMS.dot(Dims::WEIGHT);
    let all = t.db.query::<Parcel>();
    let sum = all.clone().sum(weight()).await;
    if legacy_refuses(&t, &sum) {
        return;
    }
    assert_eq!(sum.unwrap(), 150);
    assert_eq!(all.avg(weight()).await.unwrap(), Some(50.0));
    let light = t.db.query::<Parcel>().filter(weight().lt(100));
    assert_eq!(light.clone().sum(weight()).await.unwrap(), 30);
    let exactly = t.db.query::<Parcel>().filter(weight().eq(20));
    assert_eq!(exactly.sum(weight()).await.unwrap(), 20);
}

/// Where an equality or IN filter fixes the summed array property, each of an entity's
/// distinct values is a row of the index that holds the fixed value (the first IN value the
/// entity holds): `nums = 1` over `[1, 5]` sums 1 + 1. The Firestore emulator's answer,
/// reproduced by hand first.
pub async fn op_sum_and_avg_of_an_array_its_filter_fixes(t: Ctx) {
    items(&t).await;
    let ones = t.db.query::<Item>().filter(Item::NUMS.eq(1));
    let sum = ones.clone().sum(Item::NUMS).await;
    if legacy_refuses(&t, &sum) {
        return;
    }
    assert_eq!(sum.unwrap(), 3);
    assert_eq!(ones.avg(Item::NUMS).await.unwrap(), Some(1.0));
    let listed = t.db.query::<Item>().filter(Item::NUMS.is_in([5, 1]));
    assert_eq!(listed.clone().sum(Item::NUMS).await.unwrap(), 21);
    assert_eq!(listed.avg(Item::NUMS).await.unwrap(), Some(4.2));
    let red_fives =
        t.db.query::<Item>()
            .filter(Item::COLOR.eq("red").and(Item::NUMS.eq(5)));
    assert_eq!(red_fives.sum(Item::NUMS).await.unwrap(), 10);
    let either =
        t.db.query::<Item>()
            .filter(Item::NUMS.eq(9).or(Item::COLOR.eq("blue")));
    assert_eq!(either.sum(Item::NUMS).await.unwrap(), 21);
}

fn key(id: i64) -> Key<Item> {
    Item::key(KeyId::new(id).unwrap())
}

pub async fn op_key_ranges_and_descending_key_order(t: Ctx) {
    items(&t).await;
    let q = || t.db.query::<Item>();
    assert_eq!(
        ids(q().filter(Key::PROPERTY.gt(key(2)))).await.unwrap(),
        [3, 4, 5, 6]
    );
    let between = q()
        .filter(Key::PROPERTY.ge(key(2)))
        .filter(Key::PROPERTY.lt(key(5)));
    assert_eq!(ids(between).await.unwrap(), [2, 3, 4]);
    assert_eq!(
        ids(q().filter(Key::PROPERTY.le(key(1)))).await.unwrap(),
        [1]
    );
    // Beside an equality filter.
    let red_after = q()
        .filter(Item::COLOR.eq("red"))
        .filter(Key::PROPERTY.gt(key(1)));
    assert_eq!(ids(red_after).await.unwrap(), [3, 6]);
    let descending = ids(q().order(Key::PROPERTY.desc())).await;
    if t.backend == Backend::Datastore {
        // The legacy emulator needs a declared `__key__ desc` index, which Firestore in
        // Datastore mode (and the engine, following it) does not.
        assert!(
            matches!(descending, Err(Error::MissingIndex { .. })),
            "{descending:?}"
        );
        return;
    }
    assert_eq!(descending.unwrap(), [6, 5, 4, 3, 2, 1]);
    let newest_first = q()
        .filter(Key::PROPERTY.le(key(4)))
        .order(Key::PROPERTY.desc());
    assert_eq!(ids(newest_first.clone()).await.unwrap(), [4, 3, 2, 1]);
    // Paged by cursor, descending.
    let first = newest_first.clone().limit(3).fetch().await.unwrap();
    let rest = newest_first.start_after(first.next).fetch().await.unwrap();
    let paged: Vec<i64> = first
        .items
        .iter()
        .chain(&rest.items)
        .map(|i| i.id.get())
        .collect();
    assert_eq!(paged, [4, 3, 2, 1]);
}

pub async fn op_key_in_not_equal_and_not_in(t: Ctx) {
    items(&t).await;
    let found = matching(&t, Key::PROPERTY.is_in([key(4), key(1)])).await;
    if legacy_refuses(&t, &found) {
        return;
    }
    assert_eq!(found.unwrap(), [1, 4]);
    assert_eq!(
        matching(&t, Key::PROPERTY.ne(key(3))).await.unwrap(),
        [1, 2, 4, 5, 6]
    );
    assert_eq!(
        matching(&t, Key::PROPERTY.not_in([key(1), key(6)]))
            .await
            .unwrap(),
        [2, 3, 4, 5]
    );
    let either = Key::PROPERTY.eq(key(2)).or(Item::COLOR.eq("green"));
    assert_eq!(matching(&t, either).await.unwrap(), [2, 4]);
}

/// An `Item` written before it had `weight`, `nums` and `any`: the properties are missing,
/// which is not the same as null.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(kind = "Item")]
pub struct OldItem {
    #[key]
    pub id: KeyId,
    pub color: String,
    pub size: i64,
}

pub async fn op_a_missing_property_matches_no_operator(t: Ctx) {
    items(&t).await;
    let old = OldItem {
        id: KeyId::new(7).unwrap(),
        color: "red".into(),
        size: 7,
    };
    t.db.put(&old).await.unwrap();
    let keys = async |filter: Filter<Item>| -> Result<Vec<i64>, Error> {
        let page =
            t.db.query::<Item>()
                .filter(filter)
                .keys_only()
                .fetch()
                .await?;
        Ok(page
            .items
            .iter()
            .filter_map(|k| k.id())
            .map(KeyId::get)
            .collect())
    };
    let ne = keys(Item::ANY.ne(Value::Null)).await;
    if legacy_refuses(&t, &ne) {
        return;
    }
    // `!=` and NOT IN match only entities that have the property.
    assert_eq!(ne.unwrap(), [1, 6, 4, 3, 5]);
    assert_eq!(
        keys(Item::ANY.not_in([Value::Integer(1)])).await.unwrap(),
        [2, 6, 4, 3, 5]
    );
    assert_eq!(keys(Item::NUMS.ne(5)).await.unwrap(), [1, 5, 2, 6, 4, 6]);
    // `= null` matches a stored null, not a missing property; the other branch of an OR
    // still finds the old entity.
    assert_eq!(keys(Item::ANY.eq(Value::Null)).await.unwrap(), [2]);
    let either = Item::ANY.eq(Value::Null).or(Item::COLOR.eq("red"));
    assert_eq!(keys(either).await.unwrap(), [1, 2, 3, 6, 7]);
    assert_eq!(
        keys(Item::ANY.is_in([Value::Null, Value::Integer(7)]))
            .await
            .unwrap(),
        [2, 6]
    );
    // Aggregations skip it: SUM and AVG over the rows that have the property.
    let count =
        t.db.query::<Item>()
            .filter(Item::ANY.ne(Value::Null))
            .count();
    assert_eq!(count.await.unwrap(), 5);
    assert_eq!(t.db.query::<Item>().count().await.unwrap(), 7);
    assert_eq!(t.db.query::<Item>().sum(Item::WEIGHT).await.unwrap(), 16.5);
    assert_eq!(
        t.db.query::<Item>().avg(Item::WEIGHT).await.unwrap(),
        Some(2.75)
    );
    assert_eq!(t.db.query::<Item>().sum(Item::SIZE).await.unwrap(), 28);
}
