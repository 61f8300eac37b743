//! Queries on the embedded engine: filters, orders, arrays, exclusions, ancestors,
//! keys-only, projections, and cursor paging (R-Q1, R-Q3, R-E1, R-I1).

use std::collections::HashSet;

use datastore_entity::backend::embedded::Embedded;
use datastore_entity::backend::{
    Backend, Mask, Mutation, PropertyFilter, PropertyOrder, QuerySpec, ResultShape,
};
use datastore_entity::prelude::*;
use datastore_entity::{Direction, Error, Operator, Property, PropertyMap, Value};
use datastore_entity_tests::{Account, Address, Post, account};
use futures_util::TryStreamExt;

#[derive(Entity, Debug, Clone, PartialEq)]
struct Item {
    #[key]
    id: KeyId,
    rank: i64,
    group: String,
}

fn item(id: i64, rank: i64, group: &str) -> Item {
    Item {
        id: KeyId::new(id).unwrap(),
        rank,
        group: group.into(),
    }
}

async fn blog() -> (Db, Key<Account>, Key<Account>) {
    let db = Db::in_memory();
    let ann = db.put(&account("ann")).await.unwrap();
    let bob = db.put(&account("bob")).await.unwrap();
    let posts = [
        (&ann, "a1", "ann", 10, vec!["rust", "db"], Some("Paris")),
        (&ann, "a2", "ann", 30, vec!["rust"], None),
        (&ann, "a3", "ann", 20, vec![], Some("Lyon")),
        (&bob, "b1", "bob", 15, vec!["db"], Some("Paris")),
    ];
    let posts: Vec<Post> = posts
        .into_iter()
        .map(|(parent, title, author, t, tags, city)| Post {
            account: parent.clone(),
            id: None,
            title: title.into(),
            author: author.into(),
            published: Timestamp::from_micros(t),
            tags: tags.into_iter().map(String::from).collect(),
            body: format!("body of {title}"),
            location: city.map(|c| Address { city: c.into() }),
        })
        .collect();
    db.put_many(&posts).await.unwrap();
    (db, ann, bob)
}

fn titles(posts: &[Post]) -> Vec<&str> {
    posts.iter().map(|p| p.title.as_str()).collect()
}

#[tokio::test]
async fn equality_filters_combine_with_and() {
    let (db, _, _) = blog().await;
    let page = db
        .query::<Post>()
        .filter(Post::AUTHOR.eq("ann"))
        .filter(Post::TAGS.eq("rust"))
        .order(Post::TITLE.asc())
        .fetch()
        .await
        .unwrap();
    assert_eq!(titles(&page.items), ["a1", "a2"]);
    assert_eq!(page.next, None);
}

#[tokio::test]
async fn range_filters_and_orders() {
    let (db, _, _) = blog().await;
    let newest_first = db
        .query::<Post>()
        .filter(Post::PUBLISHED.ge(Timestamp::from_micros(15)))
        .order(Post::PUBLISHED.desc())
        .fetch()
        .await
        .unwrap();
    assert_eq!(titles(&newest_first.items), ["a2", "a3", "b1"]);
    let between = db
        .query::<Post>()
        .filter(Post::PUBLISHED.gt(Timestamp::from_micros(10)))
        .filter(Post::PUBLISHED.lt(Timestamp::from_micros(30)))
        .fetch()
        .await
        .unwrap();
    // Without an explicit order, a range filter orders by its property.
    assert_eq!(titles(&between.items), ["b1", "a3"]);
    let le = db
        .query::<Post>()
        .filter(Post::PUBLISHED.le(Timestamp::from_micros(15)))
        .fetch()
        .await
        .unwrap();
    assert_eq!(titles(&le.items), ["a1", "b1"]);
}

#[tokio::test]
async fn range_filters_on_several_properties_name_the_composite_index_they_need() {
    // Several range properties are read from one composite index holding them in order (by
    // name, as the implied orders are): strict index mode names it. (The answers are
    // conformance tests.)
    let (db, _, _) = blog().await;
    let refused = db
        .query::<Post>()
        .filter(Post::TITLE.gt("a"))
        .filter(Post::PUBLISHED.gt(Timestamp::from_micros(0)))
        .fetch()
        .await
        .unwrap_err();
    let Error::MissingIndex { index_yaml, .. } = &refused else {
        panic!("expected MissingIndex, got {refused:?}");
    };
    assert_eq!(
        index_yaml,
        "indexes:\n- kind: Post\n  ancestor: no\n  properties:\n  - name: published\n  \
         - name: title\n"
    );
}

#[tokio::test]
async fn array_properties_match_on_any_element_and_each_entity_comes_once() {
    let (db, _, _) = blog().await;
    let db_tagged = db
        .query::<Post>()
        .filter(Post::TAGS.eq("db"))
        .fetch()
        .await
        .unwrap();
    let mut got = titles(&db_tagged.items);
    got.sort_unstable();
    assert_eq!(got, ["a1", "b1"]);
    // Ordering on an array scans its index: one row per element, as in Firestore in
    // Datastore mode (the legacy emulator returned each entity once, by its smallest
    // element); an entity without elements has no index entry and is not returned.
    let by_tag = db
        .query::<Post>()
        .order(Post::TAGS.asc())
        .fetch()
        .await
        .unwrap();
    assert_eq!(titles(&by_tag.items), ["a1", "b1", "a2", "a1"]);
}

#[tokio::test]
async fn ancestor_queries_stay_in_the_entity_group() {
    // R-E1
    let (db, ann, bob) = blog().await;
    let anns = db
        .query::<Post>()
        .ancestor(&ann)
        .order(Post::PUBLISHED.asc())
        .fetch()
        .await
        .unwrap();
    assert_eq!(titles(&anns.items), ["a1", "a3", "a2"]);
    let bobs = db.query::<Post>().ancestor(&bob).fetch().await.unwrap();
    assert_eq!(titles(&bobs.items), ["b1"]);
}

#[tokio::test]
async fn keys_only_returns_typed_keys() {
    // R-Q1
    let (db, ann, _) = blog().await;
    let page = db
        .query::<Post>()
        .ancestor(&ann)
        .keys_only()
        .fetch()
        .await
        .unwrap();
    assert_eq!(page.items.len(), 3);
    for key in &page.items {
        assert_eq!(key.kind(), "Post");
        assert_eq!(key.parent().as_ref(), Some(ann.raw()));
        assert!(db.get(key).await.unwrap().is_some());
    }
}

#[tokio::test]
async fn cursors_page_through_1000_entities_each_exactly_once_in_order() {
    // R-Q3
    let db = Db::in_memory();
    let items: Vec<Item> = (1..=1000)
        .map(|i| {
            item(
                i,
                (i * 7919) % 1000,
                if i % 2 == 0 { "even" } else { "odd" },
            )
        })
        .collect();
    db.put_chunked(&items).await.unwrap();
    let mut seen = Vec::new();
    let mut cursor: Option<Cursor> = None;
    let mut pages = 0;
    loop {
        let page = db
            .query::<Item>()
            .order(Item::RANK.desc())
            .limit(37)
            .start_after(cursor.clone())
            .fetch()
            .await
            .unwrap();
        pages += 1;
        assert!(page.items.len() <= 37);
        seen.extend(page.items.iter().map(|i| (i.rank, i.id.get())));
        match page.next {
            // Cursors survive a trip through text, as in a web page's "next" link.
            Some(next) => cursor = Some(next.to_string().parse().unwrap()),
            None => break,
        }
        assert!(pages < 100, "paging does not end");
    }
    assert_eq!(seen.len(), 1000);
    let distinct: HashSet<i64> = seen.iter().map(|(_, id)| *id).collect();
    assert_eq!(distinct.len(), 1000);
    let mut expected = seen.clone();
    expected.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    assert_eq!(seen, expected);
    assert_eq!(pages, 28);
}

#[tokio::test]
async fn an_end_cursor_stops_the_query() {
    let db = Db::in_memory();
    db.put_many(&(1..=10).map(|i| item(i, i, "g")).collect::<Vec<_>>())
        .await
        .unwrap();
    let first = db
        .query::<Item>()
        .order(Item::RANK.asc())
        .limit(4)
        .fetch()
        .await
        .unwrap();
    let until = first.next.unwrap();
    let page = db
        .query::<Item>()
        .order(Item::RANK.asc())
        .end_at(until)
        .fetch()
        .await
        .unwrap();
    assert_eq!(
        page.items.iter().map(|i| i.rank).collect::<Vec<_>>(),
        [1, 2, 3, 4]
    );
}

#[tokio::test]
async fn bad_cursors_are_clear_errors() {
    // R-Q3
    let db = Db::in_memory();
    db.put_many(&(1..=10).map(|i| item(i, i, "g")).collect::<Vec<_>>())
        .await
        .unwrap();
    let next = db
        .query::<Item>()
        .order(Item::RANK.asc())
        .limit(3)
        .fetch()
        .await
        .unwrap()
        .next
        .unwrap();
    // Not cursor text at all.
    assert!(matches!(
        "not a cursor!".parse::<Cursor>(),
        Err(Error::InvalidCursor { .. })
    ));
    // Every single-byte change is detected.
    let bytes = next.as_bytes().to_vec();
    for i in 0..bytes.len() {
        let mut tampered = bytes.clone();
        tampered[i] ^= 0x20;
        let text = base64_url(&tampered);
        let cursor: Cursor = text.parse().unwrap();
        let result = db
            .query::<Item>()
            .order(Item::RANK.asc())
            .start_after(cursor)
            .fetch()
            .await;
        assert!(
            matches!(result, Err(Error::InvalidCursor { .. })),
            "byte {i}: {result:?}"
        );
    }
    // A cursor of another query.
    let result = db
        .query::<Item>()
        .order(Item::RANK.desc())
        .start_after(next)
        .fetch()
        .await;
    assert!(
        matches!(result, Err(Error::InvalidCursor { reason }) if reason.contains("different query"))
    );
}

fn base64_url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..=chunk.len() {
            out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    out
}

#[tokio::test]
async fn stream_yields_every_result_across_pages() {
    let db = Db::in_memory();
    db.put_chunked(&(1..=700).map(|i| item(i, i % 13, "g")).collect::<Vec<_>>())
        .await
        .unwrap();
    let all: Vec<Item> = db
        .query::<Item>()
        .filter(Item::GROUP.eq("g"))
        .stream()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(all.len(), 700);
    let capped: Vec<Item> = db
        .query::<Item>()
        .limit(450)
        .stream()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(capped.len(), 450);
    assert_eq!(capped[0].id.get(), 1);
}

/// Raw engine access, for what the typed API deliberately cannot express.
/// The engine's calls: the methods of `dyn Backend`.
fn calls(engine: &Embedded) -> &dyn Backend {
    engine
}

async fn engine_with(entities: Vec<(i64, PropertyMap)>) -> Embedded {
    let engine = Embedded::new();
    let mutations = entities
        .into_iter()
        .map(|(id, props)| {
            Mutation::Upsert(
                Item::key(KeyId::new(id).unwrap()).into_raw(),
                props,
                Mask::Whole,
            )
        })
        .collect();
    calls(&engine).commit(mutations, None).await.unwrap();
    engine
}

fn props(entries: &[(&str, Value, bool)]) -> PropertyMap {
    entries
        .iter()
        .map(|(name, value, excluded)| {
            (
                (*name).to_owned(),
                Property {
                    value: value.clone(),
                    excluded: *excluded,
                    annotations: datastore_entity::Annotations::None,
                },
            )
        })
        .collect()
}

/// A query on `Item` ordered by one property.
fn ordered(property: &str, direction: Direction) -> QuerySpec {
    QuerySpec {
        kind: "Item".into(),
        orders: vec![PropertyOrder {
            property: property.into(),
            direction,
        }],
        ..QuerySpec::default()
    }
}

/// A query on `Item` with one filter.
fn filtered(property: &str, op: Operator, value: Value) -> QuerySpec {
    QuerySpec {
        kind: "Item".into(),
        filters: vec![
            PropertyFilter {
                property: property.into(),
                op,
                value,
            }
            .into(),
        ],
        ..QuerySpec::default()
    }
}

fn ids(batch: &datastore_entity::backend::QueryBatch) -> Vec<i64> {
    batch
        .results
        .iter()
        .map(|r| r.key.id().unwrap().get())
        .collect()
}

#[tokio::test]
async fn excluded_properties_are_invisible_to_filters_orders_and_projections() {
    // R-I1, at the engine: the typed API cannot even express these queries.
    let engine = engine_with(vec![
        (1, props(&[("rank", Value::Integer(1), true)])),
        (2, props(&[("rank", Value::Integer(1), false)])),
    ])
    .await;
    let filter = filtered("rank", Operator::Equal, Value::Integer(1));
    assert_eq!(
        ids(&calls(&engine).run_query(&filter, None).await.unwrap()),
        [2]
    );
    let order = ordered("rank", Direction::Descending);
    assert_eq!(
        ids(&calls(&engine).run_query(&order, None).await.unwrap()),
        [2]
    );
    let projection = QuerySpec {
        kind: "Item".into(),
        shape: ResultShape::Projection(vec!["rank".into()]),
        ..QuerySpec::default()
    };
    let batch = calls(&engine).run_query(&projection, None).await.unwrap();
    assert_eq!(ids(&batch), [2]);
    assert_eq!(batch.results[0].properties["rank"].value, Value::Integer(1));
}

#[tokio::test]
async fn values_of_different_types_follow_the_emulators_order() {
    // The order Google's Datastore emulator (CloudDatastore.jar 2.3.1) returns for the same
    // data: null; integers and timestamps together; booleans; byte strings and strings
    // together, by bytes; doubles with NaN last; geo points; keys.
    let key = Value::Key(Item::key(KeyId::new(1).unwrap()).into_raw());
    let values = [
        Value::String("b".into()),
        Value::Integer(3),
        Value::Null,
        Value::Double(2.5),
        Value::Boolean(true),
        Value::Blob(vec![1u8].into()),
        Value::Timestamp(Timestamp::from_micros(0)),
        Value::Double(f64::NAN),
        Value::String("a".into()),
        Value::Boolean(false),
        key,
        Value::GeoPoint(GeoPoint::new(1.0, 2.0).unwrap()),
        Value::Double(f64::NEG_INFINITY),
        Value::Integer(-4),
        Value::Timestamp(Timestamp::from_micros(5)),
    ];
    let engine = engine_with(
        values
            .iter()
            .enumerate()
            .map(|(i, v)| (i as i64 + 1, props(&[("v", v.clone(), false)])))
            .collect(),
    )
    .await;
    let ordered = ordered("v", Direction::Ascending);
    assert_eq!(
        ids(&calls(&engine).run_query(&ordered, None).await.unwrap()),
        [3, 14, 7, 2, 15, 10, 5, 6, 9, 1, 13, 4, 8, 12, 11]
    );
    // A range filter scans the index from its operand on, across types, like the emulator:
    // `v > 0` also returns the booleans, strings and doubles that sort after numbers.
    let above_zero = filtered("v", Operator::GreaterThan, Value::Integer(0));
    assert_eq!(
        ids(&calls(&engine).run_query(&above_zero, None).await.unwrap()),
        [2, 15, 10, 5, 6, 9, 1, 13, 4, 8, 12, 11]
    );
    // Equality does not cross types: the integer 3 is not the double 3.0.
    let three = filtered("v", Operator::Equal, Value::Double(3.0));
    assert_eq!(
        ids(&calls(&engine).run_query(&three, None).await.unwrap()),
        Vec::<i64>::new()
    );
}

#[tokio::test]
async fn projections_return_only_the_projected_properties_one_row_per_array_element() {
    let engine = engine_with(vec![(
        1,
        props(&[
            (
                "tags",
                Value::Array(vec![Value::String("x".into()), Value::String("y".into())]),
                false,
            ),
            ("rank", Value::Integer(4), false),
            ("secret", Value::String("s".into()), false),
        ]),
    )])
    .await;
    let query = QuerySpec {
        kind: "Item".into(),
        shape: ResultShape::Projection(vec!["tags".into(), "rank".into()]),
        ..QuerySpec::default()
    };
    // Two projected properties need a composite index (R-I2): refused in strict index mode,
    // evaluated over the kind without it.
    let refused = calls(&engine).run_query(&query, None).await;
    assert!(
        matches!(refused, Err(Error::MissingIndex { .. })),
        "{refused:?}"
    );
    let engine = engine.strict_indexes(false);
    let batch = calls(&engine).run_query(&query, None).await.unwrap();
    assert_eq!(batch.results.len(), 2);
    // Without an order, results come in the order of the projected values, as in the emulator.
    for (result, tag) in batch.results.iter().zip(["x", "y"]) {
        assert_eq!(result.properties.len(), 2);
        assert_eq!(result.properties["tags"].value, Value::String(tag.into()));
        assert_eq!(result.properties["rank"].value, Value::Integer(4));
    }
    // Projecting a property that is also filtered by equality is refused, as by the service.
    let query = QuerySpec {
        kind: "Item".into(),
        filters: vec![
            PropertyFilter {
                property: "rank".into(),
                op: Operator::Equal,
                value: Value::Integer(4),
            }
            .into(),
        ],
        shape: ResultShape::Projection(vec!["rank".into()]),
        ..QuerySpec::default()
    };
    assert!(matches!(
        calls(&engine).run_query(&query, None).await,
        Err(Error::InvalidQuery { .. })
    ));
}

#[tokio::test]
async fn a_deep_cursor_resumes_exactly_where_it_points() {
    // The page after a cursor is computed from the cursor's position, not by counting
    // earlier rows: starting after the 990th entity returns exactly the last 10.
    let db = Db::in_memory();
    db.put_chunked(&(1..=1000).map(|i| item(i, i, "g")).collect::<Vec<_>>())
        .await
        .unwrap();
    let last = db
        .query::<Item>()
        .order(Item::RANK.asc())
        .limit(990)
        .fetch()
        .await
        .unwrap();
    assert_eq!(last.items.len(), 990);
    let rest = db
        .query::<Item>()
        .order(Item::RANK.asc())
        .start_after(last.next)
        .fetch()
        .await
        .unwrap();
    assert_eq!(
        rest.items.iter().map(|i| i.rank).collect::<Vec<_>>(),
        (991..=1000).collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn entities_without_the_property_are_not_returned_by_filters_or_orders() {
    let engine = engine_with(vec![
        (
            1,
            props(&[
                ("rank", Value::Integer(1), false),
                (
                    "home",
                    Value::Entity(props(&[("city", Value::String("Paris".into()), false)])),
                    false,
                ),
            ]),
        ),
        (
            2,
            props(&[
                ("other", Value::Integer(1), false),
                ("home", Value::Null, false),
            ]),
        ),
        (3, props(&[("rank", Value::Null, false)])),
    ])
    .await;
    let ascending = |property: &str| ordered(property, Direction::Ascending);
    // Entity 2 has no `rank`; entity 3's null `rank` is a value, and sorts first.
    assert_eq!(
        ids(&calls(&engine)
            .run_query(&ascending("rank"), None)
            .await
            .unwrap()),
        [3, 1]
    );
    // R-P2: embedded properties are indexed under dotted paths.
    assert_eq!(
        ids(&calls(&engine)
            .run_query(&ascending("home.city"), None)
            .await
            .unwrap()),
        [1]
    );
    let by_city = filtered("home.city", Operator::Equal, Value::String("Paris".into()));
    assert_eq!(
        ids(&calls(&engine).run_query(&by_city, None).await.unwrap()),
        [1]
    );
    let missing = filtered("rank", Operator::GreaterThanOrEqual, Value::Integer(0));
    assert_eq!(
        ids(&calls(&engine).run_query(&missing, None).await.unwrap()),
        [1]
    );
}

#[tokio::test]
async fn embedded_properties_are_queried_by_dotted_typed_paths() {
    // R-P2: `Post::LOCATION.dot(Address::CITY)` is the property `location.city`.
    let (db, _, _) = blog().await;
    let path = Post::LOCATION.dot(Address::CITY);
    assert_eq!(path.name(), "location.city");
    let in_paris = db
        .query::<Post>()
        .filter(path.eq("Paris"))
        .order(Post::LOCATION.dot(Address::CITY).asc())
        .fetch()
        .await
        .unwrap();
    let mut got = titles(&in_paris.items);
    got.sort_unstable();
    assert_eq!(got, ["a1", "b1"]);
    // Ordering on it skips the post without a location.
    let by_city = db
        .query::<Post>()
        .order(Post::LOCATION.dot(Address::CITY).desc())
        .fetch()
        .await
        .unwrap();
    // Paris before Lyon; the two Paris posts tie, and ties go by key, descending too.
    let cities = titles(&by_city.items);
    assert_eq!(cities.len(), 3);
    assert_eq!(cities[2], "a3");
    let mut paris = cities[..2].to_vec();
    paris.sort_unstable();
    assert_eq!(paris, ["a1", "b1"]);
}

/// A ticket, with the composite index its triage query needs.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(kind = "Ticket", index(status, -opened))]
struct Ticket {
    #[key]
    id: KeyId,
    status: String,
    opened: i64,
}

/// The same kind, declaring nothing.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(kind = "Ticket")]
struct UndeclaredTicket {
    #[key]
    id: KeyId,
    status: String,
    opened: i64,
}

#[tokio::test]
async fn r_i2_strict_index_mode_refuses_a_query_no_declared_index_serves() {
    let db = Db::in_memory();
    let tickets: Vec<UndeclaredTicket> = (1..=5)
        .map(|i| UndeclaredTicket {
            id: KeyId::new(i).unwrap(),
            status: if i % 2 == 0 { "open" } else { "closed" }.into(),
            opened: i * 10,
        })
        .collect();
    // Written through the type that declares nothing (writing through `Ticket` declares its
    // indexes, as querying through it does).
    db.put_many(&tickets).await.unwrap();
    let triage = || {
        db.query::<UndeclaredTicket>()
            .filter(UndeclaredTicket::STATUS.eq("open"))
            .order(UndeclaredTicket::OPENED.desc())
    };
    // Nobody declared index(status, -opened) yet: refused, naming the index to add.
    let refused = triage().fetch().await.unwrap_err();
    let Error::MissingIndex { index_yaml, .. } = &refused else {
        panic!("expected MissingIndex, got {refused:?}");
    };
    assert_eq!(
        index_yaml,
        "indexes:\n- kind: Ticket\n  ancestor: no\n  properties:\n  - name: status\n  \
         - name: opened\n    direction: desc\n"
    );
    assert!(
        refused.to_string().contains("#[entity(index(...))]"),
        "{refused}"
    );
    // Declaring it (querying through the type that declares it) builds it from the stored
    // entities; from then on the query runs, whichever type asks.
    let declared = db
        .query::<Ticket>()
        .filter(Ticket::STATUS.eq("open"))
        .order(Ticket::OPENED.desc())
        .fetch()
        .await
        .unwrap();
    assert_eq!(
        declared.items.iter().map(|t| t.opened).collect::<Vec<_>>(),
        [40, 20]
    );
    let page = triage().fetch().await.unwrap();
    assert_eq!(
        page.items.iter().map(|t| t.opened).collect::<Vec<_>>(),
        [40, 20]
    );
    // Outside strict index mode the engine evaluates the kind instead of refusing.
    let loose = Db::with_backend(std::sync::Arc::new(
        Embedded::in_memory().strict_indexes(false),
    ));
    loose.put_many(&tickets).await.unwrap();
    let page = loose
        .query::<UndeclaredTicket>()
        .filter(UndeclaredTicket::STATUS.eq("open"))
        .order(UndeclaredTicket::OPENED.desc())
        .fetch()
        .await
        .unwrap();
    assert_eq!(
        page.items.iter().map(|t| t.opened).collect::<Vec<_>>(),
        [40, 20]
    );
}

/// Issue #29: a nearest-neighbour search on the embedded engine — only vectors of the query's
/// dimension, the service's limit of 1 to 100, no order nor limit of the query's own. (No
/// vector index is declared: outside strict index mode.)
#[tokio::test]
async fn a_nearest_search_keeps_to_its_dimension_and_its_bounds() {
    use datastore_entity::{Distance, Vector};

    #[derive(Entity, Debug, Clone, PartialEq)]
    struct Doc {
        #[key]
        id: KeyName,
        rank: i64,
        emb: Vector,
    }

    let db = Db::with_backend(std::sync::Arc::new(
        Embedded::in_memory().strict_indexes(false),
    ));
    for (id, v) in [("two", vec![1.0, 0.0]), ("three", vec![1.0, 0.0, 0.0])] {
        db.put(&Doc {
            id: KeyName::new(id).unwrap(),
            rank: 1,
            emb: Vector::new(v).unwrap(),
        })
        .await
        .unwrap();
    }
    let v = Vector::new(vec![1.0, 0.0]).unwrap();
    let found = db
        .query::<Doc>()
        .find_nearest(Doc::EMB, &v, Distance::Cosine, 10)
        .fetch_with_distance()
        .await
        .unwrap();
    assert_eq!(found.len(), 1, "only the vector of two dimensions");
    assert!(
        found[0].1.abs() < 1e-12,
        "the same direction: cosine distance 0"
    );
    for limit in [0, 101] {
        let refused = db
            .query::<Doc>()
            .find_nearest(Doc::EMB, &v, Distance::Euclidean, limit)
            .fetch()
            .await;
        assert!(
            matches!(refused, Err(Error::InvalidQuery { .. })),
            "{limit}: {refused:?}"
        );
    }
    let ordered = db
        .query::<Doc>()
        .find_nearest(Doc::EMB, &v, Distance::Euclidean, 5)
        .order(Doc::RANK.asc())
        .fetch()
        .await;
    assert!(
        matches!(ordered, Err(Error::InvalidQuery { .. })),
        "{ordered:?}"
    );
    let threshold_alone = db.query::<Doc>().distance_threshold(1.0).fetch().await;
    assert!(
        matches!(threshold_alone, Err(Error::InvalidQuery { .. })),
        "{threshold_alone:?}"
    );
}

/// Issue #29: in strict index mode a nearest-neighbour search needs the vector index the
/// service would need — on the property, of the query vector's dimension, pre-filtered on
/// exactly the properties filtered — and the error names the attribute and the `gcloud`
/// command; a typed write of a vector of another dimension than its index's is refused,
/// nothing written.
#[tokio::test]
async fn strict_mode_asks_for_the_vector_index_a_search_needs() {
    use datastore_entity::{Distance, Vector};

    #[derive(Entity, Debug, Clone, PartialEq)]
    #[entity(index(topic, emb))]
    struct Doc {
        #[key]
        id: KeyName,
        topic: String,
        lang: String,
        #[vector_index(2)]
        emb: Vector,
        plain: Option<Vector>,
    }

    let db = Db::in_memory();
    let doc = |id: &str, emb: Vec<f64>| Doc {
        id: KeyName::new(id).unwrap(),
        topic: "rust".into(),
        lang: "en".into(),
        emb: Vector::new(emb).unwrap(),
        plain: None,
    };
    db.put(&doc("a", vec![1.0, 0.0])).await.unwrap();
    let v = Vector::new(vec![1.0, 0.1]).unwrap();
    let found = db
        .query::<Doc>()
        .find_nearest(Doc::EMB, &v, Distance::Euclidean, 3)
        .fetch()
        .await
        .unwrap();
    assert_eq!(found.items.len(), 1);
    let prefiltered = db
        .query::<Doc>()
        .filter(Doc::TOPIC.eq("rust"))
        .find_nearest(Doc::EMB, &v, Distance::Euclidean, 3)
        .fetch()
        .await
        .unwrap();
    assert_eq!(prefiltered.items.len(), 1);
    let missing = |result: Result<Page<Doc>, Error>, wanted: &[&str]| match result {
        Err(Error::MissingIndex {
            message,
            index_yaml,
        }) => {
            for text in wanted {
                assert!(
                    message.contains(text) || index_yaml.contains(text),
                    "{text} in {message} / {index_yaml}"
                );
            }
            assert!(
                index_yaml.contains("gcloud firestore indexes composite create"),
                "{index_yaml}"
            );
        }
        other => panic!("{other:?}"),
    };
    // A filter on another property than the declared index's.
    missing(
        db.query::<Doc>()
            .filter(Doc::LANG.eq("en"))
            .find_nearest(Doc::EMB, &v, Distance::Euclidean, 3)
            .fetch()
            .await,
        &["pre-filtered on lang", "index(lang, emb)"],
    );
    // A vector with no index.
    missing(
        db.query::<Doc>()
            .find_nearest(Doc::PLAIN, &v, Distance::Euclidean, 3)
            .fetch()
            .await,
        &["#[vector_index(2)]", "field-path=plain,vector-config"],
    );
    // A query vector of another dimension than the index's: refused by the typed query
    // (on every backend), and by the engine's strict mode when sent untyped.
    let three = Vector::new(vec![1.0, 0.0, 0.0]).unwrap();
    let refused = db
        .query::<Doc>()
        .find_nearest(Doc::EMB, &three, Distance::Euclidean, 3)
        .fetch()
        .await;
    assert!(
        matches!(
            &refused,
            Err(Error::InvalidQuery {
                rule: datastore_entity::QueryRule::VectorDimension { given: 3, .. },
                ..
            })
        ),
        "{refused:?}"
    );
    let untyped = QuerySpec {
        partition: db.partition().clone(),
        kind: Doc::KIND.to_owned(),
        find_nearest: Some(datastore_entity::backend::FindNearest {
            property: "emb".into(),
            vector: three,
            measure: Distance::Euclidean,
            limit: 3,
            distance_property: None,
            threshold: None,
        }),
        ..QuerySpec::default()
    };
    missing(
        db.backend()
            .run_query(&untyped, None)
            .await
            .map(|_| unreachable!()),
        &["3 dimensions", r#""dimension":"3""#],
    );
    // A typed write of a vector of another dimension: refused, nothing written.
    let refused = db.put(&doc("b", vec![1.0, 0.0, 0.0])).await;
    match refused {
        Err(Error::InvalidVector { reason }) => {
            assert!(
                reason.contains("`emb`") && reason.contains("3 dimensions"),
                "{reason}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        db.get(&Doc::key(KeyName::new("b").unwrap())).await.unwrap(),
        None
    );
}
