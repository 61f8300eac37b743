//! Answers the service gives where clients no one here wrote go (issue #48): projections that
//! name `__key__`, top-level property names holding dots (python-ndb's legacy layout of
//! structured properties), and queries without a kind. Sent as they are, through `Backend`,
//! on every runner; the Firestore emulator referees.

use datastore_entity::backend::{
    Aggregation, FilterNode, Mask, Mutation, PropertyFilter, PropertyOrder, QueryBatch, QuerySpec,
    ResultShape,
};
use datastore_entity::prelude::*;
use datastore_entity::{
    Annotations, CachePolicy, Direction, Error, IdOrName, IndexSchema, IndexedProperty, Operator,
    PartitionId, PathElement, Property, PropertyMap, QueryRule, RawKey, Schema, Value,
};

use crate::harness::{Backend, Ctx};

#[macro_export]
macro_rules! answers_tests {
    ($backend:expr) => {
        $crate::conformance!($backend;
            answers_a_projection_naming_the_key_has_a_row_per_entity,
            answers_dotted_names_combine_with_other_properties,
            answers_a_kindless_query_reads_every_kind,
            answers_no_sum_or_average_of_the_key,
            answers_a_masked_write_of_a_new_entity_writes_only_its_paths,
            answers_meanings_are_kept_as_written,
            answers_meanings_the_service_refuses_are_refused,
            answers_distinct_on_gives_the_first_of_each_combination,
        );
    };
}

/// A key of `kind` named `name` in `partition`, under `parent`'s path when given.
pub fn named(partition: &PartitionId, parent: Option<&RawKey>, kind: &str, name: &str) -> RawKey {
    let mut path: Vec<PathElement> = parent.map(|p| p.path().to_vec()).unwrap_or_default();
    path.push(PathElement::new(kind, Some(KeyName::new(name).unwrap().into())).unwrap());
    RawKey::new(Some(partition.clone()), path).unwrap()
}

fn text(s: &str) -> Value {
    Value::String(s.to_owned())
}

fn texts(values: &[&str]) -> Value {
    Value::Array(values.iter().map(|s| text(s)).collect())
}

/// Writes `entities` as they are, in one commit.
async fn write(t: &Ctx, entities: Vec<(RawKey, PropertyMap)>) {
    let mutations = entities
        .into_iter()
        .map(|(key, properties)| Mutation::Upsert(key, properties, Mask::Whole))
        .collect();
    t.db.backend().commit(mutations, None).await.unwrap();
}

/// Writes `e0`, `e1` and `e2` of `kind`, entity `i` holding `properties(i)`.
async fn write_three(t: &Ctx, kind: &str, properties: impl Fn(i64) -> PropertyMap) {
    let p = t.db.partition();
    let entities = (0..3)
        .map(|i| (named(p, None, kind, &format!("e{i}")), properties(i)))
        .collect();
    write(t, entities).await;
}

fn query(t: &Ctx, kind: &str) -> QuerySpec {
    QuerySpec {
        partition: t.db.partition().clone(),
        kind: kind.to_owned(),
        ..QuerySpec::default()
    }
}

fn filter(property: &str, op: Operator, value: Value) -> FilterNode {
    FilterNode::Property(PropertyFilter {
        property: property.to_owned(),
        op,
        value,
    })
}

fn projection(names: &[&str]) -> ResultShape {
    ResultShape::Projection(names.iter().map(|n| (*n).to_owned()).collect())
}

/// Each result's key name and its properties, in order.
async fn answer(t: &Ctx, spec: &QuerySpec) -> Vec<(String, PropertyMap)> {
    let batch = t.db.backend().run_query(spec, None).await.unwrap();
    batch
        .results
        .into_iter()
        .map(|r| (r.key.name().unwrap_or("").to_owned(), r.properties))
        .collect()
}

fn names(rows: &[(String, PropertyMap)]) -> Vec<&str> {
    rows.iter().map(|(n, _)| n.as_str()).collect()
}

pub async fn answers_a_projection_naming_the_key_has_a_row_per_entity(t: Ctx) {
    write_three(&t, "Proj", |i| {
        PropertyMap::from([
            ("a", Property::indexed(Value::Integer(i))),
            ("t", Property::indexed(texts(&["x", "y"]))),
        ])
    })
    .await;
    // The key alone: a row per entity, no property (a keys-only query).
    let mut spec = query(&t, "Proj");
    spec.shape = projection(&["__key__"]);
    let rows = answer(&t, &spec).await;
    assert_eq!(names(&rows), ["e0", "e1", "e2"]);
    assert!(rows.iter().all(|(_, p)| p.is_empty()), "{rows:?}");
    // Beside a property, on either side: a row per entity, with the property only.
    for shape in [&["__key__", "a"][..], &["a", "__key__"]] {
        spec.shape = projection(shape);
        let rows = answer(&t, &spec).await;
        assert_eq!(names(&rows), ["e0", "e1", "e2"], "{shape:?}");
        for (i, (_, properties)) in rows.iter().enumerate() {
            let expected =
                PropertyMap::from([("a", Property::projected(Value::Integer(i as i64)))]);
            assert_eq!(properties, &expected, "{shape:?}");
        }
    }
    // Beside an array: a row per element, ordered by the element, then the key.
    spec.shape = projection(&["t", "__key__"]);
    let rows = answer(&t, &spec).await;
    assert_eq!(names(&rows), ["e0", "e1", "e2", "e0", "e1", "e2"]);
    let elements: Vec<&Value> = rows.iter().map(|(_, p)| &p["t"].value).collect();
    assert_eq!(
        elements,
        [&text("x"); 3]
            .into_iter()
            .chain([&text("y"); 3])
            .collect::<Vec<_>>()
    );
    // A property projected twice is refused, as the service does (the key twice is not).
    spec.shape = projection(&["a", "a", "__key__"]);
    let refused = t.db.backend().run_query(&spec, None).await.unwrap_err();
    assert!(matches!(refused, Error::InvalidQuery { .. }), "{refused}");
    spec.shape = projection(&["__key__", "__key__"]);
    assert_eq!(names(&answer(&t, &spec).await), ["e0", "e1", "e2"]);
}

/// A composite index (not an ancestor one) of these columns.
macro_rules! index {
    ($(($name:literal, $direction:ident)),*) => {
        IndexSchema {
            ancestor: false,
            properties: &[$(IndexedProperty { name: $name, direction: Direction::$direction }),*],
        }
    };
}

/// The composite indexes the queries of python-ndb's legacy layout below need (production
/// needs them; the embedded engine in strict index mode and the legacy emulator ask for them).
pub static LEGACY: Schema = Schema {
    kind: "Legacy",
    embedded: false,
    properties: &[],
    indexes: &[
        index![("bar.two", Ascending), ("foo", Descending)],
        index![("bar.one", Ascending), ("foo", Ascending)],
        index![("foo", Ascending), ("bar.two", Descending)],
        index![("foo", Ascending), ("bar.two", Ascending), ("t", Ascending)],
    ],
    counters: &[],
    sharded_indexes: &[],
    replicas: None,
    vector_indexes: &[],
    cache: CachePolicy::DEFAULT,
};

pub async fn answers_dotted_names_combine_with_other_properties(t: Ctx) {
    // python-ndb's legacy structured properties: `bar.one` and `bar.two` as top-level names.
    t.db.backend().declare(&LEGACY).await.unwrap();
    write_three(&t, "Legacy", |i| {
        PropertyMap::from([
            ("bar.one", Property::indexed(text("pish"))),
            ("bar.two", Property::indexed(texts(&["posh", "q"]))),
            ("foo", Property::indexed(Value::Integer(i))),
            ("t", Property::indexed(texts(&["x", "y"]))),
        ])
    })
    .await;
    // Alone.
    let mut spec = query(&t, "Legacy");
    spec.filters = vec![filter("bar.one", Operator::Equal, text("pish"))];
    assert_eq!(names(&answer(&t, &spec).await), ["e0", "e1", "e2"]);
    // Beside an order on another property.
    spec.filters = vec![filter("bar.two", Operator::Equal, text("posh"))];
    spec.orders = vec![PropertyOrder {
        property: "foo".to_owned(),
        direction: Direction::Descending,
    }];
    assert_eq!(names(&answer(&t, &spec).await), ["e2", "e1", "e0"]);
    // Beside a range filter on another property.
    spec.orders.clear();
    spec.filters = vec![
        filter("bar.one", Operator::Equal, text("pish")),
        filter("foo", Operator::GreaterThanOrEqual, Value::Integer(2)),
    ];
    assert_eq!(names(&answer(&t, &spec).await), ["e2"]);
    // Ordered by a dotted name, beside an equality on another property: one row per element
    // (the legacy emulator returned an entity once).
    spec.filters = vec![filter("foo", Operator::Equal, Value::Integer(1))];
    spec.orders = vec![PropertyOrder {
        property: "bar.two".to_owned(),
        direction: Direction::Descending,
    }];
    let expected: &[&str] = match t.backend {
        Backend::Datastore => &["e1"],
        _ => &["e1", "e1"],
    };
    assert_eq!(names(&answer(&t, &spec).await), expected);
    // A projection of a dotted array and another array: their cross product.
    spec.orders.clear();
    spec.shape = projection(&["bar.two", "t"]);
    let rows = answer(&t, &spec).await;
    let pairs: Vec<(&Value, &Value)> = rows
        .iter()
        .map(|(_, p)| (&p["bar.two"].value, &p["t"].value))
        .collect();
    assert_eq!(
        pairs,
        [
            (&text("posh"), &text("x")),
            (&text("posh"), &text("y")),
            (&text("q"), &text("x")),
            (&text("q"), &text("y")),
        ]
    );
    assert_eq!(names(&rows), ["e1"; 4]);
}

pub async fn answers_a_kindless_query_reads_every_kind(t: Ctx) {
    let p = t.db.partition().clone();
    let a0 = named(&p, None, "A", "e0");
    let child = named(&p, Some(&a0), "C", "c");
    let mut entities: Vec<(RawKey, PropertyMap)> = ["A", "B"]
        .iter()
        .flat_map(|kind| (0..2).map(move |i| (*kind, i)))
        .map(|(kind, i)| {
            let properties = PropertyMap::from([("a", Property::indexed(Value::Integer(i)))]);
            (named(&p, None, kind, &format!("e{i}")), properties)
        })
        .collect();
    entities.push((child.clone(), PropertyMap::new()));
    write(&t, entities).await;
    let path = |key: &RawKey| {
        key.path()
            .iter()
            .map(|e| match e.id_or_name() {
                Some(IdOrName::Name(n)) => format!("{}:{}", e.kind(), n.as_str()),
                _ => e.kind().to_owned(),
            })
            .collect::<Vec<_>>()
            .join("/")
    };
    let paths =
        |batch: QueryBatch| -> Vec<String> { batch.results.iter().map(|r| path(&r.key)).collect() };
    let db = &t.db;
    let run = |spec: QuerySpec| async move { db.backend().run_query(&spec, None).await };
    let every = ["A:e0", "A:e0/C:c", "A:e1", "B:e0", "B:e1"];
    // Every kind, in key order, whole.
    let all = run(query(&t, "")).await.unwrap();
    assert_eq!(paths(all.clone()), every);
    assert_eq!(all.results[2].properties["a"].value, Value::Integer(1));
    // Keys only; ordered by the key ascending (the only order the service takes).
    let mut spec = query(&t, "");
    spec.shape = ResultShape::KeysOnly;
    spec.orders = vec![PropertyOrder {
        property: "__key__".to_owned(),
        direction: Direction::Ascending,
    }];
    let keys = run(spec).await.unwrap();
    assert_eq!(paths(keys.clone()), every);
    assert!(keys.results.iter().all(|r| r.properties.is_empty()));
    // Under an ancestor (python-ndb cleans an entity group this way).
    let mut spec = query(&t, "");
    spec.ancestor = Some(a0.clone());
    assert_eq!(paths(run(spec).await.unwrap()), ["A:e0", "A:e0/C:c"]);
    // Key ranges, equality, IN and `!=` on the key.
    let mut spec = query(&t, "");
    spec.filters = vec![
        filter("__key__", Operator::GreaterThan, Value::Key(a0.clone())),
        filter(
            "__key__",
            Operator::LessThan,
            Value::Key(named(&p, None, "B", "e1")),
        ),
    ];
    assert_eq!(
        paths(run(spec).await.unwrap()),
        ["A:e0/C:c", "A:e1", "B:e0"]
    );
    let b1 = Value::Key(named(&p, None, "B", "e1"));
    let mut spec = query(&t, "");
    spec.filters = vec![filter("__key__", Operator::Equal, b1.clone())];
    assert_eq!(paths(run(spec).await.unwrap()), ["B:e1"]);
    let mut spec = query(&t, "");
    spec.filters = vec![filter(
        "__key__",
        Operator::In,
        Value::Array(vec![b1.clone()]),
    )];
    assert_eq!(paths(run(spec).await.unwrap()), ["B:e1"]);
    if t.backend != Backend::Datastore {
        // The legacy emulator fails `!=` with UNKNOWN here.
        let mut spec = query(&t, "");
        spec.filters = vec![filter("__key__", Operator::NotEqual, b1.clone())];
        assert_eq!(paths(run(spec).await.unwrap()), every[..4]);
    }
    // Paged by cursors.
    let mut spec = query(&t, "");
    spec.limit = Some(2);
    let first = run(spec.clone()).await.unwrap();
    assert_eq!(paths(first.clone()), every[..2]);
    spec.limit = None;
    spec.start_cursor = Some(first.end_cursor);
    assert_eq!(paths(run(spec).await.unwrap()), every[2..]);
    // A property filter, or an order other than the key ascending, needs a kind.
    for refused in [
        QuerySpec {
            filters: vec![filter("a", Operator::Equal, Value::Integer(1))],
            ..query(&t, "")
        },
        QuerySpec {
            orders: vec![PropertyOrder {
                property: "a".to_owned(),
                direction: Direction::Ascending,
            }],
            ..query(&t, "")
        },
        QuerySpec {
            orders: vec![PropertyOrder {
                property: "__key__".to_owned(),
                direction: Direction::Descending,
            }],
            ..query(&t, "")
        },
    ] {
        let error = run(refused).await.unwrap_err();
        assert!(matches!(error, Error::InvalidQuery { .. }), "{error}");
    }
}

pub async fn answers_no_sum_or_average_of_the_key(t: Ctx) {
    let p = t.db.partition().clone();
    write(
        &t,
        vec![(
            named(&p, None, "Summed", "s"),
            PropertyMap::from([("n", Property::indexed(Value::Integer(2)))]),
        )],
    )
    .await;
    let spec = query(&t, "Summed");
    let key = "__key__".to_owned();
    for aggregation in [Aggregation::Sum(key.clone()), Aggregation::Avg(key)] {
        let answer =
            t.db.backend()
                .run_aggregation(&spec, &aggregation, None)
                .await;
        match (t.backend, answer) {
            // The legacy emulator has no aggregations.
            (Backend::Datastore, Err(Error::Service { code, .. })) => {
                assert_eq!(code, "UNIMPLEMENTED")
            }
            // Matched by its rule where the crate refuses it, by the service's words where an
            // emulator does.
            (_, Err(Error::InvalidQuery { rule, .. })) => assert!(
                rule == QueryRule::SumOfKey || rule.to_string().contains("__key__"),
                "{rule:?}"
            ),
            (backend, other) => panic!("{backend:?}, {aggregation:?}: {other:?}"),
        }
    }
    // A count of the same query is answered.
    if t.backend != Backend::Datastore {
        let count =
            t.db.backend()
                .run_aggregation(&spec, &Aggregation::Count { up_to: None }, None);
        assert_eq!(count.await.unwrap(), Value::Integer(1));
    }
}

pub async fn answers_a_masked_write_of_a_new_entity_writes_only_its_paths(t: Ctx) {
    let p = t.db.partition().clone();
    let written = PropertyMap::from([
        ("x", Property::indexed(Value::Integer(1))),
        ("y", Property::indexed(Value::Integer(2))),
        (
            "e",
            Property::indexed(Value::Entity(PropertyMap::from([
                ("in", Property::indexed(Value::Integer(3))),
                ("out", Property::indexed(Value::Integer(4))),
            ]))),
        ),
    ]);
    let mask = Mask::Paths(vec![vec!["x".into()], vec!["e".into(), "in".into()]]);
    let upserted = named(&p, None, "Masked", "upsert");
    let inserted = named(&p, None, "Masked", "insert");
    let mutations = vec![
        Mutation::Upsert(upserted.clone(), written.clone(), mask.clone()),
        Mutation::Insert(inserted.clone(), written, mask),
    ];
    t.db.backend().commit(mutations, None).await.unwrap();
    let expected = PropertyMap::from([
        ("x", Property::indexed(Value::Integer(1))),
        (
            "e",
            Property::indexed(Value::Entity(PropertyMap::from([(
                "in",
                Property::indexed(Value::Integer(3)),
            )]))),
        ),
    ]);
    let found =
        t.db.backend()
            .lookup(&[upserted, inserted], None)
            .await
            .unwrap();
    for stored in found {
        assert_eq!(stored.as_ref(), Some(&expected));
    }
}

fn annotated(value: Value, excluded: bool, annotations: Annotations) -> Property {
    Property {
        value,
        excluded,
        annotations,
    }
}

fn blob(bytes: &[u8]) -> Value {
    Value::Blob(bytes.to_vec().into())
}

/// What python-ndb and older clients write beside values: compressed blobs (22), texts (15),
/// a rating (13), a link (2), a user (20), and in arrays each element's meaning and exclusion.
fn with_meanings() -> PropertyMap {
    let user = PropertyMap::from([
        ("email", Property::excluded(text("ann@example.com"))),
        ("auth_domain", Property::excluded(text("example.com"))),
    ]);
    let inner = PropertyMap::from([(
        "z",
        annotated(blob(b"x\x9c inner"), true, Annotations::Meaning(22)),
    )]);
    PropertyMap::from([
        (
            "z",
            annotated(blob(b"x\x9c zlib"), true, Annotations::Meaning(22)),
        ),
        (
            "t",
            annotated(text("old text"), true, Annotations::Meaning(15)),
        ),
        (
            "rating",
            annotated(Value::Integer(50), false, Annotations::Meaning(13)),
        ),
        (
            "link",
            annotated(text("http://example.com"), false, Annotations::Meaning(2)),
        ),
        // A link is indexed up to 2,083 bytes, past the 1,500 of other strings.
        (
            "long_link",
            annotated(text(&"l".repeat(2_083)), false, Annotations::Meaning(2)),
        ),
        (
            "archive",
            annotated(
                Value::Array(vec![blob(b"x\x9c a"), blob(b"plain"), text("old")]),
                true,
                Annotations::Elements(vec![(22, true), (0, true), (15, true)].into()),
            ),
        ),
        (
            "mixed",
            annotated(
                texts(&["hidden", "shown"]),
                false,
                Annotations::Elements(vec![(0, true), (0, false)].into()),
            ),
        ),
        (
            "owner",
            annotated(Value::Entity(user), false, Annotations::Meaning(20)),
        ),
        ("e", Property::indexed(Value::Entity(inner))),
    ])
}

/// A type of the kind that knows none of what `with_meanings` wrote.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(kind = "Meant")]
pub struct Meant {
    #[key]
    pub id: KeyName,
    #[property(default)]
    pub seen: i64,
}

pub async fn answers_meanings_are_kept_as_written(t: Ctx) {
    // Issue #48: the engine dropped every meaning, so NDB handed its users compressed bytes.
    let p = t.db.partition().clone();
    let key = named(&p, None, "Meant", "m");
    write(&t, vec![(key.clone(), with_meanings())]).await;
    let stored = || async {
        let found =
            t.db.backend()
                .lookup(std::slice::from_ref(&key), None)
                .await;
        found.unwrap().pop().flatten().expect("stored")
    };
    let mut expected = with_meanings();
    if t.backend == Backend::Datastore {
        // The legacy emulator adds a user id to a user, and puts an array's indexed elements
        // first.
        for name in ["owner", "mixed"] {
            expected.remove(name);
        }
    }
    let compared = |mut found: PropertyMap| {
        if t.backend == Backend::Datastore {
            found.remove("owner");
            found.remove("mixed");
        }
        found
    };
    assert_eq!(compared(stored().await), expected);
    if t.backend == Backend::Datastore {
        // The legacy emulator ignores the property masks of a typed write (it replaces the
        // entity): the rest is the Firestore emulator's to referee.
        return;
    }
    // A Rust read-modify-write by a type that declares none of them keeps them all.
    let typed = Meant::key(KeyName::new("m").unwrap());
    let mut read = t.db.get(&typed).await.unwrap().expect("read by the type");
    read.seen += 1;
    t.db.put(&read).await.unwrap();
    expected.insert("seen", Property::indexed(Value::Integer(1)));
    assert_eq!(compared(stored().await), expected);
    // Only the indexed element of an array is found through its index.
    let mut spec = query(&t, "Meant");
    spec.filters = vec![filter("mixed", Operator::Equal, text("shown"))];
    assert_eq!(names(&answer(&t, &spec).await), ["m"]);
    spec.filters = vec![filter("mixed", Operator::Equal, text("hidden"))];
    assert_eq!(names(&answer(&t, &spec).await), Vec::<&str>::new());
}

pub async fn answers_meanings_the_service_refuses_are_refused(t: Ctx) {
    // Refused before anything is written, on every backend, as the service refuses them.
    let p = t.db.partition().clone();
    let key = named(&p, None, "Meant", "refused");
    let array = Value::Array(vec![blob(b"a")]);
    for (property, what) in [
        (
            annotated(text("indexed"), false, Annotations::Meaning(15)),
            "Indexed value has meaning 15",
        ),
        (
            annotated(blob(b"indexed"), false, Annotations::Meaning(22)),
            "Indexed value has meaning 22",
        ),
        (
            annotated(text("not a blob"), true, Annotations::Meaning(22)),
            "does not match blob_value",
        ),
        (
            annotated(Value::Integer(5), true, Annotations::Meaning(7)),
            "must be stored as a timestamp",
        ),
        (
            annotated(text("x"), true, Annotations::Meaning(99)),
            "Unknown value meaning 99",
        ),
        (
            annotated(text(&"l".repeat(2_084)), true, Annotations::Meaning(2)),
            "The Url value is longer than 2083 bytes.",
        ),
        (
            annotated(text("x"), true, Annotations::Meaning(9)),
            "Unexpected value meaning 9",
        ),
        (
            annotated(array, true, Annotations::Meaning(22)),
            "list_value cannot specify a meaning",
        ),
        (
            annotated(
                Value::Entity(PropertyMap::new()),
                false,
                Annotations::Meaning(20),
            ),
            "missing required property \"email\"",
        ),
    ] {
        let mutation = Mutation::Upsert(
            key.clone(),
            PropertyMap::from([("p", property.clone())]),
            Mask::Whole,
        );
        let refused =
            t.db.backend()
                .commit(vec![mutation], None)
                .await
                .unwrap_err();
        assert!(
            matches!(&refused, Error::InvalidValue { reason, .. } if reason.contains(what)),
            "{property:?}: {refused}"
        );
    }
    let found = t.db.backend().lookup(&[key], None).await.unwrap();
    assert_eq!(found, [None], "nothing was written");
}

pub async fn answers_distinct_on_gives_the_first_of_each_combination(t: Ctx) {
    // Issue #49: `distinct_on` read every remaining row of the kind for each page; the engine
    // now seeks from one combination of values to the next (the service's answers, refereed
    // by both emulators: each combination's first result, its cursor past the combination).
    let p = t.db.partition().clone();
    let entities = (0..9)
        .map(|i| {
            let properties = PropertyMap::from([
                ("a", Property::indexed(Value::Integer(i / 3))),
                ("b", Property::indexed(Value::Integer(i % 3))),
            ]);
            (named(&p, None, "Distinct", &format!("e{i}")), properties)
        })
        .collect();
    write(&t, entities).await;
    let order = |direction| PropertyOrder {
        property: "a".to_owned(),
        direction,
    };
    let distinct = |direction| QuerySpec {
        orders: vec![order(direction)],
        distinct_on: vec!["a".to_owned()],
        ..query(&t, "Distinct")
    };
    assert_eq!(
        names(&answer(&t, &distinct(Direction::Ascending)).await),
        ["e0", "e3", "e6"]
    );
    let descending = answer(&t, &distinct(Direction::Descending)).await;
    let values: Vec<&Value> = descending
        .iter()
        .map(|(_, p)| &p.get("a").unwrap().value)
        .collect();
    assert_eq!(
        values,
        [&Value::Integer(2), &Value::Integer(1), &Value::Integer(0)]
    );
    // A page of two, then the rest from its end: the combinations are not read again.
    let first =
        t.db.backend()
            .run_query(
                &QuerySpec {
                    limit: Some(2),
                    ..distinct(Direction::Ascending)
                },
                None,
            )
            .await
            .unwrap();
    let keys: Vec<&str> = first
        .results
        .iter()
        .map(|r| r.key.name().unwrap())
        .collect();
    assert_eq!(keys, ["e0", "e3"]);
    let rest = QuerySpec {
        start_cursor: Some(first.end_cursor.clone()),
        ..distinct(Direction::Ascending)
    };
    assert_eq!(names(&answer(&t, &rest).await), ["e6"]);
    // From the first result's own cursor: the next combination.
    let after_first = QuerySpec {
        start_cursor: Some(first.results[0].cursor.clone()),
        ..distinct(Direction::Ascending)
    };
    assert_eq!(names(&answer(&t, &after_first).await), ["e3", "e6"]);
    // Keys only, and a projection of the property.
    let keys_only = QuerySpec {
        shape: ResultShape::KeysOnly,
        ..distinct(Direction::Ascending)
    };
    assert_eq!(names(&answer(&t, &keys_only).await), ["e0", "e3", "e6"]);
    let projected = QuerySpec {
        shape: projection(&["a"]),
        ..distinct(Direction::Ascending)
    };
    let rows = answer(&t, &projected).await;
    assert_eq!(names(&rows), ["e0", "e3", "e6"]);
    // A range of the property: read from the range's start.
    let range = QuerySpec {
        filters: vec![filter("a", Operator::GreaterThan, Value::Integer(0))],
        ..distinct(Direction::Ascending)
    };
    assert_eq!(names(&answer(&t, &range).await), ["e3", "e6"]);
    if t.backend != Backend::Datastore {
        // Read by several plans merged (the legacy emulator takes neither).
        let not_one = QuerySpec {
            filters: vec![filter("a", Operator::NotEqual, Value::Integer(1))],
            ..distinct(Direction::Ascending)
        };
        assert_eq!(names(&answer(&t, &not_one).await), ["e0", "e6"]);
    }
    // The property fixed by an equality filter: refused, as the service refuses it.
    let fixed = QuerySpec {
        filters: vec![filter("a", Operator::Equal, Value::Integer(1))],
        ..distinct(Direction::Ascending)
    };
    let refused = t.db.backend().run_query(&fixed, None).await.unwrap_err();
    assert!(
        refused
            .to_string()
            .to_lowercase()
            .contains("cannot use group by on a property with an equality filter"),
        "{refused}"
    );
}
