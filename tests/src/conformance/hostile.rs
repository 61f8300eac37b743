//! What an adversary tried (issue #26), on every backend: values nested past the limit, the
//! indexed values the referee counts, counters with many shards or huge totals, keys other
//! clients made, and what the service says when a write finds the entity there or missing.

use datastore_entity::backend::{Mask, Mutation};
use datastore_entity::prelude::*;
use datastore_entity::{
    Error, MAX_INDEXED_VALUES, MAX_NESTING, PartitionId, PathElement, Property, PropertyMap,
    RawKey, Value,
};

use crate::harness::{Backend, Ctx, foreign_commit};

#[macro_export]
macro_rules! hostile_tests {
    ($backend:expr) => {
        $crate::conformance!($backend;
            hostile_values_nested_past_the_limit_are_refused_and_the_kind_stays_usable,
            hostile_indexed_values_are_counted_as_the_referee_counts_them,
            hostile_an_owner_with_any_number_of_shards_is_deleted,
            hostile_no_increment_takes_a_counter_out_of_an_i64,
            hostile_urlsafe_keys_from_ndb_work_where_their_project_does,
            hostile_refusals_name_the_key_they_are_about,
            hostile_a_read_time_in_the_future_is_refused,
            hostile_a_rename_rolls_out_with_old_and_new_binaries_side_by_side,
            hostile_replicas_are_never_read_older_than_their_entity,
            hostile_index_entries_past_20_000_are_refused_on_every_backend,
            hostile_an_embedded_entity_value_is_written_whole,
            hostile_an_integer_sum_that_leaves_i64_is_an_error,
        );
    };
}

/// An entity holding any value, indexed and not.
#[derive(Entity, Debug, Clone, PartialEq)]
pub struct Deep {
    #[key]
    pub name: KeyName,
    pub indexed: Value,
    #[exclude_from_index]
    pub excluded: Value,
}

fn deep(name: &str, indexed: Value, excluded: Value) -> Deep {
    Deep {
        name: KeyName::new(name).unwrap(),
        indexed,
        excluded,
    }
}

/// `levels` embedded entities, one in another, the innermost holding `x: 1`.
pub fn entities(levels: usize) -> Value {
    let mut value = Value::Integer(1);
    for level in 0..levels {
        let name = if level == 0 { "x" } else { "a" };
        value = Value::Entity(PropertyMap::from([(name, Property::indexed(value))]));
    }
    value
}

/// `levels` values nested: entities and arrays by turns (an array holds one entity), every
/// property excluded from indexes (as everything inside an excluded property reads back).
pub fn alternating(levels: usize) -> Value {
    let mut value = Value::Integer(1);
    for level in 0..levels {
        value = match level % 2 {
            0 => Value::Entity(PropertyMap::from([("a", Property::excluded(value))])),
            _ => Value::Array(vec![value]),
        };
    }
    value
}

/// Whether `error` is the refusal of a value nested too deep.
fn too_deep(error: &Error) -> bool {
    matches!(error, Error::InvalidValue { reason, .. } if reason.contains("nested"))
}

pub async fn hostile_values_nested_past_the_limit_are_refused_and_the_kind_stays_usable(t: Ctx) {
    // At the limit: stored, and read back as written.
    let at_limit = deep("at-limit", entities(MAX_NESTING), alternating(MAX_NESTING));
    let key = t.db.put(&at_limit).await.unwrap();
    assert_eq!(t.db.get(&key).await.unwrap(), Some(at_limit.clone()));
    // Past it, at the depths an adversary tried, by either property and either shape:
    // refused, nothing written, and the kind as readable and deletable as before.
    for levels in [MAX_NESTING + 1, 65, 100_000] {
        for (what, entity) in [
            ("indexed", deep("deep", entities(levels), Value::Null)),
            ("excluded", deep("deep", Value::Null, alternating(levels))),
        ] {
            let refused = t.db.put(&entity).await.unwrap_err();
            assert!(too_deep(&refused), "{levels} levels, {what}: {refused}");
            let refused =
                t.db.put_many(std::slice::from_ref(&entity))
                    .await
                    .unwrap_err();
            assert!(too_deep(&refused), "{levels} levels, {what}: {refused}");
            let in_transaction =
                t.db.transaction(|tx| {
                    let entity = entity.clone();
                    async move {
                        tx.put(&entity).await?;
                        Ok(())
                    }
                })
                .await
                .unwrap_err();
            assert!(
                too_deep(&in_transaction),
                "{levels}, {what}: {in_transaction}"
            );
            assert_eq!(
                t.db.get(&Deep::key(KeyName::new("deep").unwrap()))
                    .await
                    .unwrap(),
                None
            );
        }
    }
    let all = t.db.query::<Deep>().fetch().await.unwrap();
    assert_eq!(all.items, [at_limit]);
    t.db.delete(&key).await.unwrap();
    assert_eq!(t.db.get(&key).await.unwrap(), None);
}

/// The REST form of `value`, as another client sends it (`excluded` on each value; an
/// array's flag on its elements).
fn json(value: &Value, excluded: bool) -> serde_json::Value {
    use serde_json::json;
    let flagged = |mut v: serde_json::Value| {
        if excluded {
            v["excludeFromIndexes"] = json!(true);
        }
        v
    };
    match value {
        Value::Null => flagged(json!({ "nullValue": null })),
        Value::Integer(i) => flagged(json!({ "integerValue": i.to_string() })),
        Value::String(s) => flagged(json!({ "stringValue": s })),
        Value::Array(values) => json!({
            "arrayValue": { "values": values.iter().map(|v| json(v, excluded)).collect::<Vec<_>>() }
        }),
        Value::Entity(map) => flagged(json!({
            "entityValue": { "properties": properties_json(map, excluded) }
        })),
        other => panic!("not needed here: {other:?}"),
    }
}

fn properties_json(map: &PropertyMap, excluded: bool) -> serde_json::Value {
    map.iter()
        .map(|(name, p)| (name.to_owned(), json(&p.value, excluded || p.excluded)))
        .collect::<serde_json::Map<_, _>>()
        .into()
}

/// An entity's properties, as a case builds them.
type Properties = Vec<(String, Property)>;

fn integers(n: usize) -> Value {
    Value::Array((0..n as i64).map(Value::Integer).collect())
}

fn little_entities(n: usize, properties: usize) -> Value {
    Value::Array(
        (0..n)
            .map(|i| {
                Value::Entity(
                    (0..properties)
                        .map(|p| (format!("p{p}"), Property::indexed(Value::Integer(i as i64))))
                        .collect(),
                )
            })
            .collect(),
    )
}

fn wide_entity(properties: usize) -> Value {
    Value::Entity(
        (0..properties)
            .map(|p| (format!("p{p}"), Property::indexed(Value::Null)))
            .collect(),
    )
}

pub async fn hostile_indexed_values_are_counted_as_the_referee_counts_them(t: Ctx) {
    // R-I5 as Firestore in Datastore mode counts it ("Too many indexed properties"): at most
    // 5,000 indexed values in an entity, and in each embedded entity value on its own; every
    // array element counts (duplicates, nulls and entities too), an empty array nothing.
    let n = MAX_INDEXED_VALUES;
    let one = |name: &str, value: Value| vec![(name.to_owned(), Property::indexed(value))];
    let cases: Vec<(&str, Properties, bool)> = vec![
        ("5,000 values", one("a", integers(n)), true),
        ("5,001 values", one("a", integers(n + 1)), false),
        (
            "5,001 copies of one value",
            one("a", Value::Array(vec![Value::Integer(7); n + 1])),
            false,
        ),
        ("5,001 entities", one("a", little_entities(n + 1, 1)), false),
        (
            "2,000 entities of 3 values",
            one("a", little_entities(2_000, 3)),
            true,
        ),
        (
            "an entity of 5,001 values",
            one("e", wide_entity(n + 1)),
            false,
        ),
        ("an entity of 5,000 values", one("e", wide_entity(n)), true),
        (
            "4,999 values and 2 more properties",
            [
                one("a", integers(n - 1)),
                one("b", Value::Null),
                one("c", Value::Null),
            ]
            .concat(),
            false,
        ),
        (
            "4,999 values, an empty array and 1 more property",
            [
                one("a", integers(n - 1)),
                one("b", Value::Array(Vec::new())),
                one("c", Value::Null),
            ]
            .concat(),
            true,
        ),
        (
            "5,001 excluded values",
            vec![("a".to_owned(), Property::excluded(integers(n + 1)))],
            true,
        ),
    ];
    // The typed path meets the same checker: an entity's `Value` field of 5,001 values.
    for (values, accepted) in [(n, true), (n + 1, false)] {
        let entity = deep("typed", integers(values), Value::Null);
        match (t.db.put(&entity).await, accepted) {
            (Ok(_), true) => {}
            (Err(Error::TooManyIndexedValues { values: v, .. }), false) => assert_eq!(v, values),
            (other, _) => panic!("{values} values: {other:?}"),
        }
    }
    t.db.delete(&Deep::key(KeyName::new("typed").unwrap()))
        .await
        .unwrap();
    let partition = t.db.partition().clone();
    for (i, (what, properties, accepted)) in cases.into_iter().enumerate() {
        let properties: PropertyMap = properties.into_iter().collect();
        let key = row_key(&partition, &format!("case-{i}"));
        // This crate's answer, on every backend, past the typed API.
        let ours =
            t.db.backend()
                .commit(
                    vec![Mutation::Upsert(
                        key.clone(),
                        properties.clone(),
                        Mask::Whole,
                    )],
                    None,
                )
                .await;
        match &ours {
            Ok(_) => assert!(accepted, "{what}: accepted, but the referee refuses it"),
            Err(Error::TooManyIndexedValues { max, .. }) => {
                assert!(!accepted, "{what}: refused, but the referee accepts it");
                assert_eq!(*max, MAX_INDEXED_VALUES);
            }
            Err(other) => panic!("{what}: {other}"),
        }
        let found =
            t.db.backend()
                .lookup(std::slice::from_ref(&key), None)
                .await
                .unwrap();
        assert_eq!(
            found[0].is_some(),
            accepted,
            "{what}: nothing written when refused"
        );
        // The emulators' own answer to another client sending it.
        if t.backend.is_emulator() {
            let theirs = foreign_commit(
                t.backend,
                serde_json::json!([{ "upsert": {
                    "key": {
                        "partitionId": { "projectId": crate::harness::PROJECT, "namespaceId": partition.namespace },
                        "path": [{ "kind": "Counted", "name": format!("foreign-{i}") }],
                    },
                    "properties": properties_json(&properties, false),
                }}]),
            );
            match t.backend {
                Backend::Firestore => assert_eq!(
                    theirs.is_ok(),
                    accepted,
                    "{what}: the Firestore emulator says {theirs:?}"
                ),
                // The legacy emulator enforces no such limit: it takes them all.
                _ => assert!(theirs.is_ok(), "{what}: {theirs:?}"),
            }
        }
    }
}

fn row_key(partition: &PartitionId, name: &str) -> RawKey {
    RawKey::new(
        Some(partition.clone()),
        vec![PathElement::new("Counted", Some(KeyName::new(name).unwrap().into())).unwrap()],
    )
    .unwrap()
}

/// A counter in 1,000 shards: more than one commit holds.
#[derive(Entity, Debug, Clone, PartialEq)]
pub struct Crowd {
    #[key]
    pub name: KeyName,
    #[sharded(1000)]
    pub hits: i64,
    pub label: String,
}

/// A counter in 400 shards: two of them are more than one commit holds.
#[derive(Entity, Debug, Clone, PartialEq)]
pub struct Flock {
    #[key]
    pub name: KeyName,
    #[sharded(400)]
    pub hits: i64,
}

/// The shards of `Crowd::hits` and `Flock::hits`, as keys of kinds of their own.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(kind = "Crowd.hits.shard")]
struct CrowdShard {
    #[key]
    name: String,
}

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(kind = "Flock.hits.shard")]
struct FlockShard {
    #[key]
    name: String,
}

pub async fn hostile_an_owner_with_any_number_of_shards_is_deleted(t: Ctx) {
    // Issue #26: the owner and its 1,000 shards were one commit of 1,001 mutations, refused
    // (then over the 500 mutations the crate took for a limit), so the entity could never be
    // deleted.
    let crowd = Crowd {
        name: KeyName::new("crowd").unwrap(),
        hits: 0,
        label: "many".into(),
    };
    let key = t.db.put(&crowd).await.unwrap();
    for _ in 0..3 {
        Crowd::increment_hits(&t.db, &key, 2).await.unwrap();
    }
    assert_eq!(Crowd::hits_total(&t.db, &key).await.unwrap(), 6);
    t.db.delete(&key).await.unwrap();
    assert_eq!(t.db.get(&key).await.unwrap(), None);
    assert_eq!(Crowd::hits_total(&t.db, &key).await.unwrap(), 0);
    let shards =
        t.db.query::<CrowdShard>()
            .keys_only()
            .fetch()
            .await
            .unwrap();
    assert!(shards.items.is_empty(), "{:?}", shards.items);

    // Two owners of 400 shards each: 802 mutations, in as many commits as they need.
    let flocks: Vec<Flock> = ["a", "b"]
        .iter()
        .map(|n| Flock {
            name: KeyName::new(*n).unwrap(),
            hits: 0,
        })
        .collect();
    let keys = t.db.put_many(&flocks).await.unwrap();
    for key in &keys {
        Flock::increment_hits(&t.db, key, 1).await.unwrap();
    }
    t.db.delete_many(&keys).await.unwrap();
    assert_eq!(t.db.get_many(&keys).await.unwrap(), [None, None]);
    let shards =
        t.db.query::<FlockShard>()
            .keys_only()
            .fetch()
            .await
            .unwrap();
    assert!(shards.items.is_empty(), "{:?}", shards.items);
}

/// A counter in 3 shards.
#[derive(Entity, Debug, Clone, PartialEq)]
pub struct Tally {
    #[key]
    pub name: KeyName,
    #[sharded(3)]
    pub n: i64,
}

pub async fn hostile_no_increment_takes_a_counter_out_of_an_i64(t: Ctx) {
    // Issue #26: three increments of i64::MAX / 2 were each `Ok`, and from then on every
    // read of the owner failed with `CounterOverflow`.
    let key =
        t.db.put(&Tally {
            name: KeyName::new("tally").unwrap(),
            n: 0,
        })
        .await
        .unwrap();
    // More than a shard holds (i64::MAX / 3): refused, nothing written.
    for delta in [i64::MAX / 2, i64::MIN / 2, i64::MAX] {
        match Tally::increment_n(&t.db, &key, delta).await {
            Err(Error::CounterOverflow { field, .. }) => assert_eq!(field, "n"),
            other => panic!("{delta}: {other:?}"),
        }
    }
    assert_eq!(Tally::n_total(&t.db, &key).await.unwrap(), 0);
    // Three shards' worth fill the counter up to what an i64 holds; then any increment is
    // refused, and every read still answers.
    let most = i64::MAX / 3;
    for _ in 0..3 {
        Tally::increment_n(&t.db, &key, most).await.unwrap();
    }
    assert_eq!(Tally::n_total(&t.db, &key).await.unwrap(), 3 * most);
    assert!(matches!(
        Tally::increment_n(&t.db, &key, most).await,
        Err(Error::CounterOverflow { .. })
    ));
    let read = t.db.get(&key).await.unwrap().unwrap();
    assert_eq!(read.n, 3 * most);
    let all = t.db.query::<Tally>().fetch().await.unwrap();
    assert_eq!(
        all.items.iter().map(|t| t.n).collect::<Vec<_>>(),
        [3 * most]
    );
    // Going down works the same way.
    Tally::increment_n(&t.db, &key, -most).await.unwrap();
    assert_eq!(Tally::n_total(&t.db, &key).await.unwrap(), 2 * most);
}

pub async fn hostile_urlsafe_keys_from_ndb_work_where_their_project_does(t: Ctx) {
    // Issue #26: a key read from NDB's URL-safe text (which names its project) was refused
    // by the embedded engine, in a message naming the same partition twice.
    let account = crate::account("urlsafe");
    let stored = t.db.put(&account).await.unwrap();
    let namespace = t.db.partition().namespace.clone();
    let ndb = |project: &str| {
        let text = stored.to_urlsafe(project);
        Key::<crate::Account>::from_urlsafe(&text).unwrap()
    };
    // The embedded engine has no project: a key of any project is read in the handle's.
    // Google Cloud has one: a key of the handle's project works, another's is refused,
    // naming both projects.
    let here = ndb(crate::harness::PROJECT);
    assert_eq!(t.db.get(&here).await.unwrap(), Some(account.clone()));
    let elsewhere = ndb("my-project");
    match (t.backend.is_embedded(), t.db.get(&elsewhere).await) {
        (true, Ok(found)) => assert_eq!(found, Some(account.clone())),
        (
            false,
            Err(Error::WrongPartition {
                expected, found, ..
            }),
        ) => {
            assert!(expected.contains(crate::harness::PROJECT), "{expected}");
            assert!(found.contains("my-project"), "{found}");
            assert!(!expected.contains("my-project"), "{expected}");
        }
        (embedded, other) => panic!("embedded: {embedded}: {other:?}"),
    }
    // A key of another namespace is refused everywhere, naming the namespaces.
    let other = Key::<crate::Account>::from_raw(
        RawKey::new(
            Some(PartitionId {
                namespace: format!("{namespace}-other"),
                ..t.db.partition().clone()
            }),
            stored.raw().path().to_vec(),
        )
        .unwrap(),
    )
    .unwrap();
    match t.db.get(&other).await {
        Err(Error::WrongPartition {
            expected, found, ..
        }) => {
            assert!(found.contains("-other"), "{found}");
            assert!(
                expected.contains(&namespace) && !expected.contains("-other"),
                "{expected}"
            );
        }
        other => panic!("{other:?}"),
    }
}

pub async fn hostile_refusals_name_the_key_they_are_about(t: Ctx) {
    // Issue #26: on Google Cloud `AlreadyExists` and `NotFound` carried the emulator's
    // message where the embedded engine names the key; in a commit of several mutations, the
    // one refused.
    let partition = t.db.partition().clone();
    let entity = |n: i64| PropertyMap::from([("n", Property::indexed(Value::Integer(n)))]);
    let (new, there, missing) = (
        row_key(&partition, "new"),
        row_key(&partition, "there"),
        row_key(&partition, "missing"),
    );
    let backend = t.db.backend();
    backend
        .commit(
            vec![Mutation::Upsert(there.clone(), entity(1), Mask::Whole)],
            None,
        )
        .await
        .unwrap();
    let inserts = vec![
        Mutation::Insert(new.clone(), entity(2), Mask::Whole),
        Mutation::Insert(there.clone(), entity(3), Mask::Whole),
    ];
    // Both emulators apply a non-transactional commit's mutations one by one (`new` was
    // written before `there` was refused: "not necessarily all or none", says the service's
    // API): the cloud backend commits several mutations in a transaction of their own.
    match backend.commit(inserts, None).await {
        Err(Error::AlreadyExists { key }) => assert_eq!(key, format!("{there:?}")),
        other => panic!("{other:?}"),
    }
    let updates = vec![
        Mutation::Update(there.clone(), entity(4), Mask::Whole),
        Mutation::Update(missing.clone(), entity(5), Mask::Whole),
    ];
    match backend.commit(updates, None).await {
        Err(Error::NotFound { key }) => assert_eq!(key, format!("{missing:?}")),
        other => panic!("{other:?}"),
    }
    // Nothing of either commit was written.
    let found = backend.lookup(&[new, there, missing], None).await.unwrap();
    assert!(found[0].is_none() && found[2].is_none(), "{found:?}");
    assert_eq!(
        found[1].as_ref().unwrap().get("n").unwrap().value,
        Value::Integer(1)
    );
}

pub async fn hostile_a_read_time_in_the_future_is_refused(t: Ctx) {
    // Issue #26: the embedded engine read "the future" as now; the Firestore emulator refuses
    // it (INVALID_ARGUMENT). The legacy emulator ignores read times altogether.
    let key = t.db.put(&crate::account("future")).await.unwrap();
    let later = Timestamp::now() + std::time::Duration::from_secs(3_600);
    let read =
        t.db.read_only_transaction_at(later, |tx| {
            let key = key.clone();
            async move { tx.get(&key).await }
        })
        .await;
    match t.backend {
        Backend::Datastore => assert!(read.unwrap().is_some()),
        _ => match read {
            Err(Error::Service { code, message }) => {
                assert_eq!(code, "INVALID_ARGUMENT");
                assert!(message.contains("future"), "{message}");
            }
            other => panic!("{:?}: {other:?}", t.backend),
        },
    }
}

/// Version 1 of a program: the property is `mail`.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(kind = "Renamed")]
pub struct RenamedV1 {
    #[key]
    pub id: KeyName,
    pub mail: String,
}

/// Version 2, the first step of renaming it `email`: the value is written under both names,
/// and the former name is read first (version 1 binaries, still running, write only it).
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(kind = "Renamed")]
pub struct RenamedV2 {
    #[key]
    pub id: KeyName,
    #[property(alias = "mail", write_alias)]
    pub email: String,
}

/// Version 3, the last step, once every entity was written by version 2: `email` only (the
/// former name read when `email` is missing, removed by every write).
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(kind = "Renamed")]
pub struct RenamedV3 {
    #[key]
    pub id: KeyName,
    #[property(alias = "mail")]
    pub email: String,
}

pub async fn hostile_a_rename_rolls_out_with_old_and_new_binaries_side_by_side(t: Ctx) {
    // Issue #26: once a struct with `#[property(alias)]` wrote, the old binaries still
    // running could not read the entity ("expected String, found no such property").
    let id = |n: &str| KeyName::new(n).unwrap();
    let v1 = |n: &str, mail: &str| RenamedV1 {
        id: id(n),
        mail: mail.into(),
    };
    let v2 = |n: &str, email: &str| RenamedV2 {
        id: id(n),
        email: email.into(),
    };
    let read_v1 = async |n: &str| t.db.get(&RenamedV1::key(id(n))).await;
    let read_v2 = async |n: &str| t.db.get(&RenamedV2::key(id(n))).await;
    let read_v3 = async |n: &str| t.db.get(&RenamedV3::key(id(n))).await;
    t.db.put_many(&[v1("a", "a1"), v1("b", "b1")])
        .await
        .unwrap();
    // Step 1: versions 1 and 2 side by side, each reading what the other wrote.
    assert_eq!(read_v2("a").await.unwrap().unwrap().email, "a1");
    t.db.put(&v2("a", "a2")).await.unwrap();
    assert_eq!(read_v1("a").await.unwrap().unwrap().mail, "a2");
    t.db.put(&v1("a", "a3")).await.unwrap();
    assert_eq!(read_v2("a").await.unwrap().unwrap().email, "a3");
    // Step 2: no version 1 left; every entity is written once by version 2 (which reads the
    // former name, the one version 1 kept up to date, and writes both).
    let all: Vec<RenamedV2> = t.db.query::<RenamedV2>().fetch().await.unwrap().items;
    t.db.put_many(&all).await.unwrap();
    // Step 3: versions 2 and 3 side by side.
    assert_eq!(read_v3("a").await.unwrap().unwrap().email, "a3");
    assert_eq!(read_v3("b").await.unwrap().unwrap().email, "b1");
    t.db.put(&RenamedV3 {
        id: id("a"),
        email: "a4".into(),
    })
    .await
    .unwrap();
    assert_eq!(read_v2("a").await.unwrap().unwrap().email, "a4");
    t.db.put(&v2("b", "b5")).await.unwrap();
    assert_eq!(read_v3("b").await.unwrap().unwrap().email, "b5");
    // Version 3's writes leave only the new name.
    #[derive(Entity, Debug, Clone, PartialEq)]
    #[entity(kind = "Renamed")]
    struct Both {
        #[key]
        id: KeyName,
        mail: Option<String>,
        email: Option<String>,
    }
    let a = t.db.get(&Both::key(id("a"))).await.unwrap().unwrap();
    assert_eq!((a.mail, a.email.as_deref()), (None, Some("a4")));
}

/// A hot entity with 3 replicas, read from its own key.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(kind = "Hot")]
#[replicated(3)]
pub struct Hot {
    #[key]
    pub name: KeyName,
    pub banner: String,
}

/// The same kind, its reads spread over the replicas (`unchecked`).
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(kind = "Hot")]
#[replicated(3, unchecked)]
pub struct HotSpread {
    #[key]
    pub name: KeyName,
    pub banner: String,
}

/// The same kind, written by a program that knows nothing of the replicas.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(kind = "Hot")]
pub struct HotPlain {
    #[key]
    pub name: KeyName,
    pub banner: String,
}

pub async fn hostile_replicas_are_never_read_older_than_their_entity(t: Ctx) {
    // Issue #26: a `#[replicated(n)]` entity overwritten by a type without replicas (an old
    // binary in a rolling deploy, another tool) was read back at its old value from the
    // replicas, 40 reads of 40.
    let name = || KeyName::new("site").unwrap();
    let key =
        t.db.put(&Hot {
            name: name(),
            banner: "v1".into(),
        })
        .await
        .unwrap();
    t.db.put(&HotPlain {
        name: name(),
        banner: "v2".into(),
    })
    .await
    .unwrap();
    for _ in 0..40 {
        assert_eq!(t.db.get(&key).await.unwrap().unwrap().banner, "v2");
    }
    // `unchecked` trusts every writer of the kind to write the replicas: after one that did
    // not, it reads what they hold (the trade it makes for reads spread over them).
    let spread = HotSpread::key(name());
    for _ in 0..10 {
        assert_eq!(t.db.get(&spread).await.unwrap().unwrap().banner, "v1");
    }
    // Never older than the last put through a replicated type.
    t.db.put(&Hot {
        name: name(),
        banner: "v3".into(),
    })
    .await
    .unwrap();
    for _ in 0..10 {
        assert_eq!(t.db.get(&spread).await.unwrap().unwrap().banner, "v3");
        assert_eq!(t.db.get(&key).await.unwrap().unwrap().banner, "v3");
    }
}

/// Two arrays indexed together: their composite index holds the product of their lengths.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(index(left, right))]
pub struct Crossed {
    #[key]
    pub name: KeyName,
    pub left: Vec<String>,
    pub right: Vec<String>,
}

pub async fn hostile_index_entries_past_20_000_are_refused_on_every_backend(t: Ctx) {
    // R-I5: 150 + 140 built-in entries and 150 × 140 = 21,000 composite ones, counted before
    // anything is sent (the service's indexes come from index.yaml, which no emulator reads:
    // the crate counts them from the types' declarations).
    let words = |n: usize, p: &str| (0..n).map(|i| format!("{p}{i}")).collect();
    let crossed = |left, right| Crossed {
        name: KeyName::new("crossed").unwrap(),
        left: words(left, "l"),
        right: words(right, "r"),
    };
    match t.db.put(&crossed(150, 140)).await {
        Err(Error::TooManyIndexEntries {
            entries, property, ..
        }) => assert_eq!((entries, property.as_str()), (290 + 21_000, "left")),
        other => panic!("{other:?}"),
    }
    let key = Crossed::key(KeyName::new("crossed").unwrap());
    assert_eq!(t.db.get(&key).await.unwrap(), None);
    // 98 × 200 = 19,600, and 298 built-in: within the limit.
    t.db.put(&crossed(98, 200)).await.unwrap();
    assert_eq!(t.db.get(&key).await.unwrap().unwrap().left.len(), 98);
}

/// An address with a postcode, embedded.
#[derive(Entity, Debug, Clone, PartialEq)]
pub struct Postal {
    pub city: String,
    pub zip: String,
}

/// The same address, as an older program knew it: no postcode.
#[derive(Entity, Debug, Clone, PartialEq)]
pub struct CityOnly {
    pub city: String,
}

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(kind = "Shop")]
pub struct ShopNew {
    #[key]
    pub name: KeyName,
    pub address: Postal,
}

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(kind = "Shop")]
pub struct ShopOld {
    #[key]
    pub name: KeyName,
    pub address: CityOnly,
}

pub async fn hostile_an_embedded_entity_value_is_written_whole(t: Ctx) {
    // README: inside an embedded entity value the value is written whole, as the service
    // stores it: a sub-property the embedded struct lacks is not kept (unlike a top-level
    // property the struct lacks).
    let name = || KeyName::new("corner").unwrap();
    t.db.put(&ShopNew {
        name: name(),
        address: Postal {
            city: "Lyon".into(),
            zip: "69001".into(),
        },
    })
    .await
    .unwrap();
    t.db.put(&ShopOld {
        name: name(),
        address: CityOnly {
            city: "Paris".into(),
        },
    })
    .await
    .unwrap();
    let key = t.db.bind(&ShopOld::key(name())).unwrap().into_raw();
    let stored = t.db.backend().lookup(&[key], None).await.unwrap();
    let address = match &stored[0].as_ref().unwrap().get("address").unwrap().value {
        Value::Entity(address) => address.clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(
        address.get("city").map(|p| &p.value),
        Some(&Value::String("Paris".into()))
    );
    assert_eq!(address.get("zip"), None, "{address:?}");
}

/// A number to sum.
#[derive(Entity, Debug, Clone, PartialEq)]
pub struct Amount {
    #[key]
    pub id: KeyId,
    pub n: i64,
}

pub async fn hostile_an_integer_sum_that_leaves_i64_is_an_error(t: Ctx) {
    // README: an integer sum that leaves `i64` is `Error::InvalidValue` (the service turns it
    // into a double, which an `i64` sum cannot hold exactly).
    let amounts: Vec<Amount> = (1..=2)
        .map(|i| Amount {
            id: KeyId::new(i).unwrap(),
            n: i64::MAX / 2 + 1,
        })
        .collect();
    t.db.put_many(&amounts).await.unwrap();
    let sum = t.db.query::<Amount>().sum(Amount::N).await;
    match (t.backend, sum) {
        // The legacy emulator has no aggregations.
        (Backend::Datastore, Err(Error::Service { code, .. })) => assert_eq!(code, "UNIMPLEMENTED"),
        (_, Err(Error::InvalidValue { .. })) => {}
        (backend, other) => panic!("{backend:?}: {other:?}"),
    }
    // One fits.
    t.db.delete(&Amount::key(KeyId::new(2).unwrap()))
        .await
        .unwrap();
    if t.backend != Backend::Datastore {
        let one: i64 = t.db.query::<Amount>().sum(Amount::N).await.unwrap();
        assert_eq!(one, i64::MAX / 2 + 1);
    }
}
