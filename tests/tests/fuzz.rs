//! Fuzzing of every input that comes from outside (issue #26): URL-safe keys, key text,
//! cursors (text and bytes), RFC 3339 text, the stored form's bytes (a value damaged in a
//! file), entities a server sends (a buggy or hostile endpoint on the cloud path), and GQL
//! texts a client sends the server.
//!
//! Each target takes arbitrary bytes and, structure-aware, valid inputs damaged the ways
//! damage happens (a flipped bit, a cut, a byte inserted, a length field at its largest).
//! Every input must end in a value or an error: never a panic (a panic fails the case), never
//! a hang (each target's work is bounded by its input), never an allocation sized by a length
//! nobody checked (CI runs this under a 2 GiB address-space limit, where a 4 GiB allocation
//! aborts the run). `FUZZ_CASES` sets the cases per target (500 by default):
//!
//! ```sh
//! FUZZ_CASES=100000 cargo test -p datastore-entity-tests --test fuzz --release
//! ```

use datastore_entity::bench_hooks::entities_from_lookup;
use datastore_entity::bench_hooks::{
    from_stored_form, from_stored_map, stored_form, stored_map_form,
};
use datastore_entity::prelude::*;
use datastore_entity::{Error, Property, PropertyMap, RawKey, Value};
use datastore_entity_tests::minimal::{Account, Post};
use gcloud_sdk::google::datastore::v1 as pb;
use gcloud_sdk::prost::Message as _;
use proptest::prelude::*;

fn config() -> ProptestConfig {
    let cases = std::env::var("FUZZ_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(500);
    ProptestConfig {
        cases,
        // A failure is shrunk to its smallest input, but not forever.
        max_shrink_iters: 2_000,
        ..ProptestConfig::default()
    }
}

/// Damage done to valid bytes: a flipped bit, a cut, an inserted byte, or a little-endian
/// `u32` (the stored form's lengths) set to its largest.
#[derive(Debug, Clone)]
enum Damage {
    Flip(usize, u8),
    Cut(usize),
    Insert(usize, u8),
    HugeLength(usize),
}

fn damage() -> impl Strategy<Value = Vec<Damage>> {
    prop::collection::vec(
        prop_oneof![
            (any::<usize>(), 0..8_u8).prop_map(|(at, bit)| Damage::Flip(at, bit)),
            any::<usize>().prop_map(Damage::Cut),
            (any::<usize>(), any::<u8>()).prop_map(|(at, b)| Damage::Insert(at, b)),
            any::<usize>().prop_map(Damage::HugeLength),
        ],
        1..4,
    )
}

fn damaged(mut bytes: Vec<u8>, damage: &[Damage]) -> Vec<u8> {
    for d in damage {
        let len = bytes.len().max(1);
        match *d {
            Damage::Flip(at, bit) if !bytes.is_empty() => bytes[at % len] ^= 1 << bit,
            Damage::Cut(at) => bytes.truncate(at % len),
            Damage::Insert(at, b) => bytes.insert(at % (bytes.len() + 1), b),
            Damage::HugeLength(at) if bytes.len() >= 4 => {
                let at = at % (bytes.len() - 3);
                bytes[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
            }
            _ => {}
        }
    }
    bytes
}

/// Text damaged as bytes, read back lossily (what arrives in a URL or a form field).
fn damaged_text(text: &str, damage: &[Damage]) -> String {
    String::from_utf8_lossy(&damaged(text.as_bytes().to_vec(), damage)).into_owned()
}

/// Names from every class of Unicode, valid key names (no `/`, not `__x__`, not `.`).
fn key_name() -> impl Strategy<Value = KeyName> {
    "[^/]{1,12}".prop_filter_map("a valid key name", |s| KeyName::new(s).ok())
}

fn key_id() -> impl Strategy<Value = KeyId> {
    prop_oneof![
        Just(1_i64),
        Just(i64::MAX),
        Just((1 << 53) + 1),
        1..i64::MAX
    ]
    .prop_map(|id| KeyId::new(id).expect("positive"))
}

fn post_key() -> impl Strategy<Value = Key<Post>> {
    (key_name(), key_id()).prop_map(|(name, id)| Post::key(&Account::key(name), id))
}

/// An entity with every kind of value, nested a little: what the stored form holds.
fn value(depth: u32) -> BoxedStrategy<Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Boolean),
        any::<i64>().prop_map(Value::Integer),
        any::<f64>().prop_map(Value::Double),
        any::<i64>().prop_map(|m| Value::Timestamp(Timestamp::from_micros(m))),
        "\\PC{0,20}".prop_map(Value::String),
        prop::collection::vec(any::<u8>(), 0..20).prop_map(|b| Value::Blob(b.into())),
        (-90.0..=90.0_f64, -180.0..=180.0_f64)
            .prop_map(|(lat, lng)| Value::GeoPoint(GeoPoint::new(lat, lng).expect("in range"))),
        post_key().prop_map(|k| Value::Key(k.into_raw())),
    ];
    if depth == 0 {
        return leaf.boxed();
    }
    prop_oneof![
        4 => leaf,
        1 => prop::collection::vec(value(0), 0..4).prop_map(Value::Array),
        1 => properties(depth - 1).prop_map(Value::Entity),
    ]
    .boxed()
}

fn properties(depth: u32) -> BoxedStrategy<PropertyMap> {
    let entry = ("[a-z]{1,6}", value(depth), any::<bool>(), any::<u64>());
    prop::collection::vec(entry, 0..6)
        .prop_map(|entries| {
            entries
                .into_iter()
                .map(|(name, value, excluded, marks)| {
                    let annotations = annotations(&value, marks);
                    let property = Property {
                        value,
                        excluded,
                        annotations,
                    };
                    (name, property)
                })
                .collect()
        })
        .boxed()
}

/// What another client may have written beside `value`, drawn from `marks`: nothing, a
/// meaning, or each element's meaning and exclusion (the stored form keeps them all).
fn annotations(value: &Value, marks: u64) -> datastore_entity::Annotations {
    use datastore_entity::Annotations;
    let meaning = (marks >> 8) as i32 % 33;
    match (marks % 3, value) {
        (0, _) => Annotations::None,
        (_, Value::Array(elements)) => Annotations::Elements(
            (0..elements.len())
                .map(|i| (meaning + i as i32, (marks >> (16 + i)) & 1 == 1))
                .collect::<Vec<_>>()
                .into(),
        ),
        _ => Annotations::Meaning(meaning),
    }
}

/// An entity whose one property holds any value (`Value` fields hold whatever is stored).
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(kind = "Fuzzed")]
struct Fuzzed {
    #[key]
    id: KeyId,
    #[exclude_from_index]
    v: Value,
}

/// An entity whose one indexed property holds any value: an embedded entity there is written
/// with each property's own flag.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(kind = "Carrier")]
struct Carrier {
    #[key]
    id: KeyId,
    v: Value,
}

/// An entity the derive reads in one pass over the stored form (every field plain).
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(kind = "Wide")]
struct Wide {
    #[key]
    id: KeyId,
    #[property(default)]
    b: i64,
    #[property(default)]
    d: String,
    f: Option<f64>,
    #[property(default)]
    g: bool,
    h: Vec<String>,
    #[property(default)]
    k: Value,
    #[property(default)]
    m: i32,
    #[exclude_from_index]
    t: Option<Timestamp>,
    u: Vec<Option<i64>>,
}

/// An embedded entity whose names are out of order (two swapped in the bytes) is malformed
/// where the map is checked, as where it is decoded: an error for every read, never a
/// panic of a decode the check let through (which the fuzzing below found).
#[test]
fn an_embedded_entity_with_names_out_of_order_is_malformed() {
    let mut inner = PropertyMap::new();
    inner.insert("pa", Property::indexed(Value::Integer(1)));
    inner.insert("pb", Property::indexed(Value::Integer(2)));
    let mut outer = PropertyMap::new();
    outer.insert("k", Property::indexed(Value::Entity(inner)));
    let mut bytes = stored_map_form(&outer);
    let at = |bytes: &[u8], name: &[u8]| bytes.windows(2).position(|w| w == name).unwrap();
    let (a, b) = (at(&bytes, b"pa"), at(&bytes, b"pb"));
    (bytes[a + 1], bytes[b + 1]) = (b'b', b'a');
    let key = Wide::key(KeyId::new(3).unwrap()).into_raw();
    assert!(from_stored_form::<Wide>(&key, &bytes).is_err());
    assert!(from_stored_map::<Wide>(&key, &bytes).is_err());
}

/// Stored maps with some of `Wide`'s names, names it does not know around them, and values
/// of any type under each.
fn wide_properties() -> impl Strategy<Value = PropertyMap> {
    let name = prop_oneof![
        Just("b"),
        Just("d"),
        Just("f"),
        Just("h"),
        Just("k"),
        Just("g"),
        Just("m"),
        Just("t"),
        Just("u"),
        Just("a"),
        Just("c"),
        Just("e"),
        Just("ha"),
        Just("z"),
        Just("\u{e9}t\u{e9}"),
    ];
    let value = prop_oneof![
        2 => value(2),
        1 => any::<i64>().prop_map(Value::Integer),
        1 => "[a-z]{0,8}".prop_map(Value::String),
        1 => prop::collection::vec("[a-z]{0,4}".prop_map(Value::String), 0..4).prop_map(Value::Array),
        1 => any::<bool>().prop_map(Value::Boolean),
        1 => any::<i64>().prop_map(|n| Value::Timestamp(Timestamp::from_micros(n >> 12))),
        1 => prop::collection::vec(prop_oneof![any::<i64>().prop_map(Value::Integer), Just(Value::Null)], 0..4).prop_map(Value::Array),
    ];
    prop::collection::vec((name, value, any::<bool>()), 0..10).prop_map(|entries| {
        let mut map = PropertyMap::new();
        for (name, value, excluded) in entries {
            map.insert(
                name,
                Property {
                    value,
                    excluded,
                    annotations: datastore_entity::Annotations::None,
                },
            );
        }
        map
    })
}

proptest! {
    #![proptest_config(config())]

    /// The derive's one pass over the stored form (`from_stored`) reads exactly what the map
    /// over the same bytes reads — the same entity, or an error for both — whatever the
    /// bytes hold: unknown properties before, between and after the fields, values of the
    /// wrong type, and damage.
    #[test]
    fn one_pass_reads_what_the_map_reads(properties in wide_properties(), hurt in damage()) {
        let key = Wide::key(KeyId::new(3).unwrap()).into_raw();
        let bytes = stored_map_form(&properties);
        for candidate in [bytes.clone(), damaged(bytes, &hurt)] {
            let one_pass = from_stored_form::<Wide>(&key, &candidate);
            let map = from_stored_map::<Wide>(&key, &candidate);
            match (&one_pass, &map) {
                // Compared as text: a NaN is not equal to itself.
                (Ok(a), Ok(b)) => prop_assert_eq!(format!("{a:?}"), format!("{b:?}")),
                (Err(_), Err(_)) => {}
                _ => prop_assert!(false, "one pass {:?}, map {:?}", one_pass, map),
            }
        }
    }

    /// The derive's one pass over a map received from the service (each property put in its
    /// field's place by the derive's match on its name) reads exactly what the map over the
    /// same properties in the stored form reads: unknown names around the fields, missing
    /// fields with and without defaults, values of the wrong type.
    #[test]
    fn one_pass_reads_a_received_map_as_the_map_reads(properties in wide_properties()) {
        let key = Wide::key(KeyId::new(3).unwrap()).into_raw();
        // The service's form of the properties: those of an embedded entity, as written
        // (indexed, so that each keeps its own flag unless it is inside an excluded entity).
        let carrier = Carrier { id: KeyId::new(3).unwrap(), v: Value::Entity(properties) };
        let request = datastore_entity::bench_hooks::commit_request("p", std::slice::from_ref(&carrier));
        let Ok(request) = request else { return Ok(()) };
        let Some(pb::mutation::Operation::Upsert(written)) =
            request.mutations.into_iter().next().and_then(|m| m.operation)
        else {
            return Err(TestCaseError::fail("an upsert"));
        };
        let Some(pb::Value { value_type: Some(pb::value::ValueType::EntityValue(inner)), .. }) =
            written.properties.get("v").cloned()
        else {
            return Err(TestCaseError::fail("the embedded entity"));
        };
        // The same properties as received, read whole (a `Value` field), then through the
        // map over their stored form.
        let received = pb::LookupResponse {
            found: vec![pb::EntityResult { entity: Some(written.clone()), ..Default::default() }],
            ..Default::default()
        };
        let Ok(mut carried) = entities_from_lookup::<Carrier>("p", received) else {
            return Err(TestCaseError::fail("the carrier reads back"));
        };
        let carried = carried.remove(0).v;
        let Value::Entity(received) = &carried else {
            return Err(TestCaseError::fail("an entity value"));
        };
        let map = from_stored_map::<Wide>(&key, &stored_map_form(received));
        let mut wide_key = written.key.clone().expect("a key");
        wide_key.path[0].kind = "Wide".to_owned();
        let response = pb::LookupResponse {
            found: vec![pb::EntityResult {
                entity: Some(pb::Entity { key: Some(wide_key), properties: inner.properties }),
                ..Default::default()
            }],
            ..Default::default()
        };
        let one_pass = entities_from_lookup::<Wide>("p", response).map(|mut found| found.remove(0));
        match (&one_pass, &map) {
            // Compared as text: a NaN is not equal to itself.
            (Ok(a), Ok(b)) => prop_assert_eq!(format!("{a:?}"), format!("{b:?}")),
            (Err(_), Err(_)) => {}
            _ => prop_assert!(false, "one pass {:?}, map {:?}", one_pass, map),
        }
    }

    /// URL-safe keys: anything is a key or an error; keys round trip, damaged ones are
    /// refused or read as some valid key.
    #[test]
    fn urlsafe_keys(key in post_key(), project in "[a-z][a-z0-9-]{0,20}", junk in "\\PC{0,80}", hurt in damage()) {
        let text = key.to_urlsafe(&project);
        let back = Key::<Post>::from_urlsafe(&text).unwrap();
        prop_assert_eq!(back.raw().path(), key.raw().path());
        let _ = RawKey::from_urlsafe(&damaged_text(&text, &hurt));
        let _ = RawKey::from_urlsafe(&junk);
        let _ = Key::<Post>::from_urlsafe(&junk);
    }

    /// Key text (`Display`/`FromStr`, and serde through it).
    #[test]
    fn key_text(key in post_key(), junk in "\\PC{0,80}", hurt in damage()) {
        let text = key.to_string();
        prop_assert_eq!(text.parse::<Key<Post>>().unwrap(), key);
        if let Ok(read) = damaged_text(&text, &hurt).parse::<RawKey>() {
            // Whatever reads back writes back as itself.
            prop_assert_eq!(read.to_string().parse::<RawKey>().unwrap(), read);
        }
        let _ = junk.parse::<RawKey>();
        let _ = junk.parse::<Key<Post>>();
    }

    /// RFC 3339: what parses is in the service's range and writes back as the same instant.
    #[test]
    fn rfc_3339(micros in any::<i64>(), junk in "\\PC{0,40}", hurt in damage()) {
        let text = Timestamp::from_micros(micros).to_string();
        for candidate in [damaged_text(&text, &hurt), junk] {
            if let Ok(t) = candidate.parse::<Timestamp>() {
                prop_assert!(Timestamp::MIN <= t && t <= Timestamp::MAX);
                prop_assert_eq!(t.to_string().parse::<Timestamp>().unwrap(), t);
            }
        }
    }

    /// The stored form of an entity, damaged as a file's bytes are: an error or an entity,
    /// never a panic.
    #[test]
    fn stored_form_bytes(v in value(3), junk in prop::collection::vec(any::<u8>(), 0..200), hurt in damage()) {
        let entity = Fuzzed { id: KeyId::new(7).unwrap(), v };
        let key = Fuzzed::key(entity.id).into_raw();
        let bytes = stored_form(&entity).unwrap();
        let back = from_stored_form::<Fuzzed>(&key, &bytes).unwrap();
        prop_assert_eq!(stored_form(&back).unwrap(), bytes.clone());
        for candidate in [damaged(bytes, &hurt), junk] {
            if let Ok(read) = from_stored_form::<Fuzzed>(&key, &candidate) {
                // What reads writes again, and reads back the same.
                let again = stored_form(&read).unwrap();
                prop_assert_eq!(stored_form(&from_stored_form::<Fuzzed>(&key, &again).unwrap()).unwrap(), again);
            }
        }
    }

    /// Cursors: text that is not one, and bytes that are not one, are `InvalidCursor` when
    /// used (never a panic, never another query's position).
    #[test]
    fn cursors(junk in "\\PC{0,60}", bytes in prop::collection::vec(any::<u8>(), 0..120), hurt in damage()) {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        runtime.block_on(async {
            let db = Db::in_memory();
            let accounts: Vec<Account> = ["a", "b", "c"]
                .iter()
                .map(|n| Account { name: KeyName::new(*n).unwrap() })
                .collect();
            db.put_many(&accounts).await.unwrap();
            let page = db.query::<Account>().limit(1).fetch().await.unwrap();
            let valid = page.next.unwrap().to_string();
            use base64::Engine as _;
            let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&bytes);
            for text in [junk.clone(), damaged_text(&valid, &hurt), raw] {
                let Ok(cursor) = text.parse::<Cursor>() else { continue };
                match db.query::<Account>().limit(2).start_after(cursor).fetch().await {
                    Ok(page) => prop_assert!(page.items.len() <= 2),
                    Err(Error::InvalidCursor { .. }) => {}
                    Err(other) => prop_assert!(false, "{}: {}", text, other),
                }
            }
            Ok(())
        })?;
    }

    /// Entities a server sends: a `LookupResponse` decoded from arbitrary bytes, and a valid
    /// one damaged, read as the cloud backend reads them.
    #[test]
    fn entities_from_a_server(v in value(3), junk in prop::collection::vec(any::<u8>(), 0..300), hurt in damage()) {
        let entity = Fuzzed { id: KeyId::new(9).unwrap(), v };
        let request = datastore_entity::bench_hooks::commit_request("p", std::slice::from_ref(&entity));
        let Ok(request) = request else { return Ok(()) };
        let Some(pb::mutation::Operation::Upsert(written)) =
            request.mutations.into_iter().next().and_then(|m| m.operation)
        else {
            return Ok(());
        };
        let response = pb::LookupResponse {
            found: vec![pb::EntityResult { entity: Some(written), ..Default::default() }],
            ..Default::default()
        };
        let bytes = response.encode_to_vec();
        for candidate in [damaged(bytes, &hurt), junk] {
            if let Ok(response) = pb::LookupResponse::decode(candidate.as_slice()) {
                let _ = entities_from_lookup::<Fuzzed>("p", response.clone());
                let _ = entities_from_lookup::<Post>("p", response);
            }
        }
    }
}

/// GQL texts (issue #51): token soup (GQL's words, symbols, literals and bindings in random
/// order), random bytes, and nesting deeper than the reader allows, through the server's
/// `RunQuery` and `RunAggregationQuery`: an answer or `INVALID_ARGUMENT`, in bounded time, and
/// nesting past the bound refused.
mod gql {
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use datastore_entity::backend::embedded::Embedded;
    use datastore_entity_server::serve::Service;
    use gcloud_sdk::google::datastore::v1 as pb;
    use pb::gql_query_parameter::ParameterType;
    use proptest::prelude::*;
    use tonic::Code;

    use super::config;

    /// The longest a text may take to answer, on an empty store (debug builds, a slow machine).
    const BOUND: Duration = Duration::from_secs(2);

    /// What GQL is made of, and some of what it is not.
    const TOKENS: &[&str] = &[
        "SELECT",
        "select",
        "*",
        "DISTINCT",
        "ON",
        "FROM",
        "Task",
        "`my kind`",
        "WHERE",
        "AND",
        "OR",
        "NOT",
        "IN",
        "IS",
        "NULL",
        "HAS",
        "ANCESTOR",
        "DESCENDANT",
        "ORDER",
        "BY",
        "ASC",
        "DESC",
        "LIMIT",
        "OFFSET",
        "FIRST",
        "AGGREGATE",
        "OVER",
        "AS",
        "COUNT",
        "COUNT_UP_TO",
        "SUM",
        "AVG",
        "(",
        ")",
        ",",
        "=",
        "!=",
        "<",
        "<=",
        ">",
        ">=",
        "+",
        "-",
        "__key__",
        "n",
        "a.b",
        "'text'",
        "\"it\"\"s\"",
        "'",
        "\"",
        "`",
        "\\",
        "0",
        "1",
        "-7",
        "2147483648",
        "9223372036854775808",
        "1.5",
        ".5e3",
        "1e",
        "TRUE",
        "false",
        "KEY",
        "KEY(Task, 1)",
        "PROJECT('p')",
        "NAMESPACE('')",
        "ARRAY",
        "DATETIME('2020-01-01T00:00:00Z')",
        "DATETIME('x')",
        "BLOB('aGk')",
        "BLOB('=')",
        "@a",
        "@c",
        "@1",
        "@2",
        "@0",
        "@",
        "@99999999999999999999",
        "~",
        "\n",
        "é",
    ];

    fn soup() -> impl Strategy<Value = String> {
        prop::collection::vec(prop::sample::select(TOKENS), 0..40).prop_map(|t| t.join(" "))
    }

    /// A request of `text`, with a named value, a named cursor and a positional value.
    fn request(text: &str) -> pb::GqlQuery {
        let value = |v| pb::GqlQueryParameter {
            parameter_type: Some(ParameterType::Value(pb::Value {
                value_type: Some(v),
                ..pb::Value::default()
            })),
        };
        let cursor = pb::GqlQueryParameter {
            parameter_type: Some(ParameterType::Cursor(vec![1, 2, 3])),
        };
        pb::GqlQuery {
            query_string: text.to_owned(),
            allow_literals: !text.contains('~'),
            named_bindings: [
                ("a".to_owned(), value(pb::value::ValueType::IntegerValue(2))),
                ("c".to_owned(), cursor),
            ]
            .into(),
            // Only where used: an unused positional binding is refused before anything runs.
            positional_bindings: match text.contains("@1") {
                true => vec![value(pb::value::ValueType::StringValue("s".into()))],
                false => Vec::new(),
            },
        }
    }

    /// `text` run as a query and as an aggregation: each answered or refused as a client's
    /// mistake, in bounded time. The codes, for the caller's checks.
    fn answer(text: &str) -> [Option<Code>; 2] {
        thread_local! {
            static RUNTIME: tokio::runtime::Runtime = tokio::runtime::Builder::new_current_thread()
                .build()
                .expect("a runtime");
            static SERVICE: Service = Service::new(Arc::new(Embedded::in_memory().strict_indexes(false)));
        }
        let started = Instant::now();
        let codes = RUNTIME.with(|runtime| {
            SERVICE.with(|service| {
                runtime.block_on(async {
                    let query = pb::RunQueryRequest {
                        project_id: "p".into(),
                        query_type: Some(pb::run_query_request::QueryType::GqlQuery(request(text))),
                        ..pb::RunQueryRequest::default()
                    };
                    let aggregation = pb::RunAggregationQueryRequest {
                        project_id: "p".into(),
                        query_type: Some(pb::run_aggregation_query_request::QueryType::GqlQuery(
                            request(text),
                        )),
                        ..pb::RunAggregationQueryRequest::default()
                    };
                    [
                        service.run_query(query).await.err().map(|s| s.code()),
                        service
                            .run_aggregation_query(aggregation)
                            .await
                            .err()
                            .map(|s| s.code()),
                    ]
                })
            })
        });
        assert!(
            started.elapsed() < BOUND,
            "{text:?} took {:?}",
            started.elapsed()
        );
        for code in codes.into_iter().flatten() {
            // A malformed text is the client's mistake; a valid one may need an index.
            assert!(
                matches!(code, Code::InvalidArgument | Code::FailedPrecondition),
                "{text:?}: {code:?}"
            );
        }
        codes
    }

    proptest! {
        #![proptest_config(config())]

        #[test]
        fn token_soup_is_answered_or_refused(text in soup()) {
            answer(&text);
        }

        #[test]
        fn random_bytes_are_answered_or_refused(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
            answer(&String::from_utf8_lossy(&bytes));
        }

        #[test]
        fn nesting_past_the_bound_is_refused(depth in 101_usize..20_000, array in any::<bool>()) {
            let text = match array {
                true => format!("SELECT * FROM T WHERE a IN {}1{}", "ARRAY(".repeat(depth), ")".repeat(depth)),
                false => format!("SELECT * FROM T WHERE {}a = 1{}", "(".repeat(depth), ")".repeat(depth)),
            };
            prop_assert_eq!(answer(&text), [Some(Code::InvalidArgument); 2]);
        }
    }

    /// Valid texts are answered (the fuzzing above would pass if all were refused). The cursor
    /// bound to `@c` is not one the engine issued, so it stays out of them.
    #[test]
    fn valid_texts_are_answered() {
        let texts = [
            "SELECT * FROM Task WHERE n = @a AND s = @1 ORDER BY n DESC LIMIT 3",
            "SELECT DISTINCT ON (a) a, b FROM `my kind` WHERE ((a > 1.5 OR a < -2)) ORDER BY a OFFSET @a",
        ];
        for text in texts {
            assert_eq!(answer(text)[0], None, "{text}");
        }
    }
}
