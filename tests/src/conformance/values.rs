//! Every value type the service stores, and the limits on values.

use datastore_entity::Error;
use datastore_entity::prelude::*;

use super::{sample, sample_key};
use crate::harness::Ctx;
use crate::{Account, account_key};

#[macro_export]
macro_rules! values_tests {
    ($backend:expr) => {
        $crate::conformance!($backend;
            values_every_type_round_trips,
            values_doubles_keep_their_bits,
            values_timestamps_keep_microseconds_before_and_after_the_epoch,
            values_keys_in_properties_round_trip_with_their_partition,
            values_a_large_excluded_string_round_trips,
            values_an_indexed_string_over_1500_bytes_is_refused,
            values_an_entity_over_1_mib_is_refused,
            values_an_array_inside_an_array_is_refused,
            values_empty_arrays_read_back_empty,
            values_an_integer_reads_as_a_float_field,
            values_twenty_nested_levels_are_stored_twenty_one_refused,
            values_an_embedded_entitys_own_key_round_trips,
        );
    };
}

pub async fn values_every_type_round_trips(t: Ctx) {
    let ann = t.db.put(&crate::account("ann")).await.unwrap();
    for count in 0..6 {
        let mut entity = sample(&format!("s{count}"), count);
        entity.owner = Some(ann.clone());
        entity.label = "héllo wörld ✓ 🚀".into();
        let key = t.db.put(&entity).await.unwrap();
        assert_eq!(t.db.get(&key).await.unwrap(), Some(entity));
    }
}

pub async fn values_doubles_keep_their_bits(t: Ctx) {
    #[derive(Entity, Debug, Clone)]
    struct Measure {
        #[key]
        id: KeyId,
        value: f64,
    }
    let values = [
        0.0,
        -0.0,
        1.5,
        -2.25e300,
        f64::MIN_POSITIVE,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
    ];
    for (i, value) in values.iter().enumerate() {
        let key =
            t.db.put(&Measure {
                id: KeyId::new(i as i64 + 1).unwrap(),
                value: *value,
            })
            .await
            .unwrap();
        let back = t.db.get(&key).await.unwrap().unwrap().value;
        assert_eq!(back.to_bits(), value.to_bits(), "{value}");
    }
}

pub async fn values_timestamps_keep_microseconds_before_and_after_the_epoch(t: Ctx) {
    for (i, micros) in [
        -62_135_596_800_000_000,
        -1,
        0,
        1,
        1_700_000_000_123_456,
        253_402_300_799_999_999,
    ]
    .into_iter()
    .enumerate()
    {
        let mut entity = sample(&format!("t{i}"), 1);
        entity.at = Timestamp::from_micros(micros);
        t.db.put(&entity).await.unwrap();
        let back =
            t.db.get(&sample_key(&format!("t{i}")))
                .await
                .unwrap()
                .unwrap();
        assert_eq!(back.at.as_micros(), micros);
    }
}

pub async fn values_keys_in_properties_round_trip_with_their_partition(t: Ctx) {
    let mut entity = sample("owned", 1);
    entity.owner = Some(account_key("bob"));
    t.db.put(&entity).await.unwrap();
    let back = t.db.get(&sample_key("owned")).await.unwrap().unwrap();
    let owner = back.owner.unwrap();
    assert_eq!(owner, t.db.bind(&account_key("bob")).unwrap());
    assert_eq!(owner.namespace(), t.db.partition().namespace);
    let _: Option<Account> = t.db.get(&owner).await.unwrap();
}

pub async fn values_a_large_excluded_string_round_trips(t: Ctx) {
    let mut entity = sample("big", 1);
    entity.notes = "x".repeat(900_000);
    t.db.put(&entity).await.unwrap();
    let back = t.db.get(&sample_key("big")).await.unwrap().unwrap();
    assert_eq!(back.notes.len(), 900_000);
}

pub async fn values_an_indexed_string_over_1500_bytes_is_refused(t: Ctx) {
    let mut entity = sample("long", 1);
    entity.label = "é".repeat(751); // 1,502 bytes
    let error = t.db.put(&entity).await.unwrap_err();
    assert!(
        matches!(&error, Error::IndexedValueTooLarge { property, len: 1502, .. } if property == "label"),
        "{error:?}"
    );
    entity.label = "é".repeat(750); // exactly 1,500 bytes
    t.db.put(&entity).await.unwrap();
}

pub async fn values_an_entity_over_1_mib_is_refused(t: Ctx) {
    let mut entity = sample("huge", 1);
    entity.notes = "x".repeat(1_048_600);
    let error = t.db.put(&entity).await.unwrap_err();
    assert!(
        matches!(error, Error::EntityTooLarge { max: 1_048_572, .. }),
        "{error:?}"
    );
    assert_eq!(t.db.get(&sample_key("huge")).await.unwrap(), None);
}

pub async fn values_an_array_inside_an_array_is_refused(t: Ctx) {
    #[derive(Entity, Debug)]
    struct Grid {
        #[key]
        id: KeyId,
        #[exclude_from_index]
        cells: Vec<Vec<i64>>,
    }
    let error =
        t.db.put(&Grid {
            id: KeyId::new(1).unwrap(),
            cells: vec![vec![1, 2], vec![3]],
        })
        .await
        .unwrap_err();
    assert!(
        matches!(error, Error::InvalidValue { .. }),
        "{:?}: {error:?}",
        t.backend
    );
    assert!(
        t.db.get(&Grid::key(KeyId::new(1).unwrap()))
            .await
            .unwrap()
            .is_none()
    );
}

pub async fn values_empty_arrays_read_back_empty(t: Ctx) {
    let mut entity = sample("empty", 1);
    entity.tags = vec![];
    t.db.put(&entity).await.unwrap();
    let back = t.db.get(&sample_key("empty")).await.unwrap().unwrap();
    assert!(back.tags.is_empty());
    assert_eq!(back, entity);
}

/// Issue #16: an integer stored where the struct now has an `f64` (or `f32`) reads as that
/// number, as NDB reads it; other mismatches stay errors, and a missing property names the
/// field's type as the struct spells it.
pub async fn values_an_integer_reads_as_a_float_field(t: Ctx) {
    #[derive(Entity, Debug, Clone, PartialEq)]
    #[entity(kind = "Reading")]
    struct Before {
        #[key]
        id: KeyId,
        value: i64,
        small: i64,
    }
    #[derive(Entity, Debug, Clone, PartialEq)]
    #[entity(kind = "Reading")]
    struct After {
        #[key]
        id: KeyId,
        value: f64,
        small: f32,
    }
    #[derive(Entity, Debug, Clone, PartialEq)]
    #[entity(kind = "Reading")]
    struct Later {
        #[key]
        id: KeyId,
        value: f64,
        unit: String,
    }
    let id = KeyId::new(1).unwrap();
    t.db.put(&Before {
        id,
        value: 1 << 40,
        small: -3,
    })
    .await
    .unwrap();
    let read = t.db.get(&After::key(id)).await.unwrap().unwrap();
    assert_eq!(
        read,
        After {
            id,
            value: (1_i64 << 40) as f64,
            small: -3.0
        }
    );
    match t.db.get(&Later::key(id)).await {
        Err(Error::Decode {
            property, expected, ..
        }) => {
            assert_eq!(property, "unit");
            assert_eq!(expected, "String", "the type as the struct spells it");
        }
        other => panic!("a missing String is a decode error, found {other:?}"),
    }
}

/// A recursive embedded entity: one level per node.
#[derive(Entity, Debug, Clone, PartialEq)]
pub struct Node {
    pub depth: i64,
    pub child: Option<Box<Node>>,
}

/// An entity holding a chain of nodes.
#[derive(Entity, Debug, Clone, PartialEq)]
pub struct Tree {
    #[key]
    pub name: KeyName,
    pub root: Node,
}

/// A chain of `levels` nodes, built without recursion.
pub fn chain(levels: usize) -> Node {
    let mut node = Node {
        depth: levels as i64,
        child: None,
    };
    for depth in (1..levels).rev() {
        node = Node {
            depth: depth as i64,
            child: Some(Box::new(node)),
        };
    }
    node
}

/// Frees a chain without recursion (the default drop of a `Box` chain recurses once per node).
pub fn unchain(mut node: Node) {
    let mut next = node.child.take();
    while let Some(mut n) = next {
        next = n.child.take();
    }
}

pub async fn values_twenty_nested_levels_are_stored_twenty_one_refused(t: Ctx) {
    // The service: "At most 20 nested entity values are supported" (arrays count as levels
    // too). `root` is level 1, each `child` one more.
    let tree = |name: &str, levels: usize| Tree {
        name: KeyName::new(name).unwrap(),
        root: chain(levels),
    };
    let twenty = tree("nest-20", 20);
    let key = t.db.put(&twenty).await.unwrap();
    let back = t.db.get(&key).await.unwrap().expect("stored");
    assert_eq!(back, twenty, "{:?}", t.backend);
    unchain(back.root);
    unchain(twenty.root);
    for levels in [21, 10_000] {
        let deep = tree("nest-deep", levels);
        let refused = t.db.put(&deep).await;
        match &refused {
            Err(Error::InvalidValue { property, .. }) => {
                assert_eq!(property.split('.').count(), 21, "{property}");
                assert!(property.starts_with("root.child.child"), "{property}");
            }
            other => panic!("{:?}: {other:?}", t.backend),
        }
        unchain(deep.root);
        assert_eq!(
            t.db.get(&Tree::key(KeyName::new("nest-deep").unwrap()))
                .await
                .unwrap(),
            None,
            "nothing was written"
        );
    }
    // Below the typed path, a raw value 10,000 levels deep built by hand: refused by every
    // backend's commit, without recursion.
    use datastore_entity::backend::{Mask, Mutation};
    use datastore_entity::{Property, PropertyMap, Value};
    let mut value = Value::Integer(1);
    for _ in 0..10_000 {
        let mut inner = PropertyMap::new();
        inner.insert("c", Property::indexed(value));
        value = Value::Entity(inner);
    }
    let mut properties = PropertyMap::new();
    properties.insert("a", Property::indexed(value));
    let raw =
        t.db.bind(&Tree::key(KeyName::new("nest-raw").unwrap()))
            .unwrap()
            .into_raw();
    let refused =
        t.db.backend()
            .commit(vec![Mutation::Upsert(raw, properties, Mask::Whole)], None)
            .await;
    assert!(
        matches!(&refused, Err(Error::InvalidValue { .. })),
        "{:?}: {refused:?}",
        t.backend
    );
}

/// An entity value may carry a key of its own (NDB's `LocalStructuredProperty(keep_keys=True)`,
/// an entity Google's clients embed whole): held as its `__key__` property, it is stored,
/// read back and written again with the entity value's key, never dropped.
pub async fn values_an_embedded_entitys_own_key_round_trips(t: Ctx) {
    use datastore_entity::backend::{Mask, Mutation};
    use datastore_entity::{KEY_PROPERTY, PathElement, Property, PropertyMap, RawKey, Value};
    let raw = t.db.bind(&sample_key("keyed-home")).unwrap().into_raw();
    let db = &t.db;
    // Writes `properties`; reads the entity back, and its embedded entity `home`.
    let round_trip = async |properties: PropertyMap| -> (PropertyMap, PropertyMap) {
        let upsert = Mutation::Upsert(raw.clone(), properties, Mask::Whole);
        db.backend().commit(vec![upsert], None).await.unwrap();
        let found = db.backend().lookup(std::slice::from_ref(&raw), None).await;
        let back = found.unwrap().remove(0).expect("stored");
        match &back["home"].value {
            Value::Entity(home) => (home.clone(), back),
            other => panic!("{:?}: an entity value, not {other:?}", t.backend),
        }
    };
    let with_home = |home: PropertyMap| {
        let mut properties = PropertyMap::new();
        properties.insert("home", Property::indexed(Value::Entity(home)));
        properties
    };
    let owner = t.db.bind(&account_key("ann")).unwrap().into_raw();
    let mut home = PropertyMap::new();
    home.insert("city", Property::indexed(Value::String("Lyon".into())));
    home.insert(KEY_PROPERTY, Property::excluded(Value::Key(owner.clone())));
    let (home, back) = round_trip(with_home(home)).await;
    assert_eq!(
        home[KEY_PROPERTY].value,
        Value::Key(owner.clone()),
        "{:?}",
        t.backend
    );
    assert_eq!(home["city"].value, Value::String("Lyon".into()));
    // Written again as it was read: the key is still there.
    let (home, _) = round_trip(back).await;
    assert_eq!(
        home[KEY_PROPERTY].value,
        Value::Key(owner),
        "{:?}",
        t.backend
    );
    // An incomplete key, given as indexed: kept as it is, indexed nowhere (the service takes
    // both; it is the embedded entity's key, not a property).
    let incomplete = RawKey::new(
        Some(t.db.partition().clone()),
        vec![PathElement::new("Address", None).unwrap()],
    )
    .unwrap();
    let mut home = PropertyMap::new();
    home.insert(
        KEY_PROPERTY,
        Property::indexed(Value::Key(incomplete.clone())),
    );
    let (home, _) = round_trip(with_home(home)).await;
    assert_eq!(
        home[KEY_PROPERTY].value,
        Value::Key(incomplete),
        "{:?}",
        t.backend
    );
}
