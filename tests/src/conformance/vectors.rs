//! Vector embeddings (issue #29): stored as the service stores them (an array of doubles with
//! meaning 31, excluded from indexes), read back exactly, refused where the service refuses
//! them.

use datastore_entity::backend::{Mask, Mutation};
use datastore_entity::prelude::*;
use datastore_entity::{Distance, Error, Property, PropertyMap, QueryRule, Value, Vector};

use crate::harness::{Backend, Ctx};

#[macro_export]
macro_rules! vectors_tests {
    ($backend:expr) => {
        $crate::conformance!($backend;
            vectors_round_trip_exactly,
            vectors_must_be_excluded_from_indexes,
            vectors_nearest_first_by_each_measure,
            vectors_a_threshold_is_finite_and_a_search_streams,
        );
    };
}

/// A document with an embedding.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(kind = "Embedded")]
pub struct Embedded {
    #[key]
    pub id: KeyName,
    pub label: String,
    pub emb: Vector,
    pub other: Option<Vector>,
}

/// A point on a plane, searched by its position, pre-filtered on its label.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(kind = "Point", index(label, emb))]
pub struct Point {
    #[key]
    pub id: KeyName,
    pub label: String,
    #[vector_index(2)]
    pub emb: Vector,
}

pub async fn vectors_round_trip_exactly(t: Ctx) {
    let doc = Embedded {
        id: KeyName::new("round").unwrap(),
        label: "a".into(),
        emb: Vector::new(vec![0.1, -2.5, 1e-300, 3.0]).unwrap(),
        other: None,
    };
    if t.backend == Backend::Datastore {
        // The legacy emulator has no vectors: "A Value containing a list_value cannot specify
        // a meaning."
        let refused = t.db.put(&doc).await;
        assert!(
            matches!(&refused, Err(Error::Service { message, .. }) if message.contains("meaning")),
            "{refused:?}"
        );
        return;
    }
    let key = t.db.put(&doc).await.unwrap();
    assert_eq!(t.db.get(&key).await.unwrap(), Some(doc.clone()));
    let raw = t.db.bind(&key).unwrap().into_raw();
    let stored = t.db.backend().lookup(&[raw], None).await.unwrap();
    let stored = stored[0].as_ref().unwrap();
    let emb = stored.get("emb").unwrap();
    assert!(emb.excluded, "a vector is always excluded from indexes");
    assert_eq!(emb.value, Value::Vector(doc.emb.clone()));
    let mut two = doc.clone();
    two.other = Some(Vector::new(vec![1.0; 2048]).unwrap());
    t.db.put(&two).await.unwrap();
    assert_eq!(t.db.get(&key).await.unwrap(), Some(two));
}

pub async fn vectors_must_be_excluded_from_indexes(t: Ctx) {
    // Untyped, an indexed vector is refused before anything is sent, as the service refuses it.
    let key = Embedded::key(KeyName::new("indexed").unwrap());
    let raw = t.db.bind(&key).unwrap().into_raw();
    let properties = PropertyMap::from([(
        "emb",
        Property::indexed(Value::Vector(Vector::new(vec![1.0, 2.0]).unwrap())),
    )]);
    let refused =
        t.db.backend()
            .commit(vec![Mutation::Upsert(raw, properties, Mask::Whole)], None)
            .await;
    match refused {
        Err(Error::InvalidValue {
            property, reason, ..
        }) => {
            assert_eq!(property, "emb");
            assert!(reason.contains("excluded from indexes"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(t.db.get(&key).await.unwrap(), None, "nothing written");
}

pub async fn vectors_nearest_first_by_each_measure(t: Ctx) {
    if t.backend == Backend::Datastore {
        return; // no vectors (see above)
    }
    let points = [
        ("east", "a", [1.0, 0.0]),
        ("north", "a", [0.0, 1.0]),
        ("west", "b", [-1.0, 0.0]),
        ("far-east", "a", [3.0, 0.1]),
    ];
    for (id, label, v) in points {
        t.db.put(&Point {
            id: KeyName::new(id).unwrap(),
            label: label.into(),
            emb: Vector::new(v.to_vec()).unwrap(),
        })
        .await
        .unwrap();
    }
    let near = Vector::new(vec![0.9, 0.1]).unwrap();
    if t.backend == Backend::Firestore {
        // The Firestore emulator takes the search and ignores it (over gRPC and REST alike):
        // every entity, in key order, no limit, no distance. It cannot referee; the engine
        // follows the service's documentation (below), and this records the emulator.
        let page =
            t.db.query::<Point>()
                .find_nearest(Point::EMB, &near, Distance::Euclidean, 1)
                .fetch()
                .await
                .unwrap();
        let ids: Vec<&str> = page.items.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(ids, ["east", "far-east", "north", "west"]);
        return;
    }
    let ids = |found: &[(Point, f64)]| -> Vec<String> {
        found
            .iter()
            .map(|(e, _)| e.id.as_str().to_owned())
            .collect()
    };
    let euclid =
        t.db.query::<Point>()
            .find_nearest(Point::EMB, &near, Distance::Euclidean, 3)
            .fetch_with_distance()
            .await
            .unwrap();
    assert_eq!(ids(&euclid), ["east", "north", "west"], "{euclid:?}");
    assert!((euclid[0].1 - 0.1f64.hypot(0.1)).abs() < 1e-9, "{euclid:?}");
    let dot =
        t.db.query::<Point>()
            .find_nearest(Point::EMB, &near, Distance::DotProduct, 2)
            .fetch_with_distance()
            .await
            .unwrap();
    assert_eq!(ids(&dot), ["far-east", "east"], "larger is nearer: {dot:?}");
    let cosine =
        t.db.query::<Point>()
            .find_nearest(Point::EMB, &near, Distance::Cosine, 1)
            .fetch_with_distance()
            .await
            .unwrap();
    assert_eq!(ids(&cosine), ["far-east"], "{cosine:?}");
    // A pre-filter, and a threshold.
    let filtered =
        t.db.query::<Point>()
            .filter(Point::LABEL.eq("b"))
            .find_nearest(Point::EMB, &near, Distance::Euclidean, 5)
            .fetch()
            .await
            .unwrap();
    assert_eq!(filtered.items.len(), 1);
    assert_eq!(filtered.items[0].id.as_str(), "west");
    let close =
        t.db.query::<Point>()
            .find_nearest(Point::EMB, &near, Distance::Euclidean, 5)
            .distance_threshold(1.5)
            .fetch_with_distance()
            .await
            .unwrap();
    assert_eq!(ids(&close), ["east", "north"], "{close:?}");
}

pub async fn vectors_a_threshold_is_finite_and_a_search_streams(t: Ctx) {
    let near = Vector::new(vec![0.9, 0.1]).unwrap();
    // A threshold that is not a finite number: refused before anything is sent, as the
    // service refuses it ("distanceThreshold must be a finite number").
    for threshold in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        let refused =
            t.db.query::<Point>()
                .find_nearest(Point::EMB, &near, Distance::Euclidean, 2)
                .distance_threshold(threshold)
                .fetch()
                .await;
        assert!(
            matches!(
                &refused,
                Err(Error::InvalidQuery {
                    rule: QueryRule::NearestThreshold { .. },
                    ..
                })
            ),
            "{threshold}: {refused:?}"
        );
    }
    if t.backend == Backend::Datastore {
        return; // no vectors
    }
    for (id, v) in [
        ("s-east", [1.0, 0.0]),
        ("s-north", [0.0, 1.0]),
        ("s-west", [-1.0, 0.0]),
    ] {
        t.db.put(&Point {
            id: KeyName::new(id).unwrap(),
            label: "s".into(),
            emb: Vector::new(v.to_vec()).unwrap(),
        })
        .await
        .unwrap();
    }
    // Streamed, a search gives what a fetch gives: one page, limited by its own `limit`.
    let search = || {
        t.db.query::<Point>()
            .filter(Point::LABEL.eq("s"))
            .find_nearest(Point::EMB, &near, Distance::Euclidean, 2)
    };
    let fetched = search().fetch().await.unwrap().items;
    let streamed: Vec<Point> = search().stream().try_collect().await.unwrap();
    assert_eq!(streamed, fetched);
    let keys: Vec<Key<Point>> = search().keys_only().stream().try_collect().await.unwrap();
    let ids: Vec<&str> = keys.iter().map(|k| k.name().unwrap()).collect();
    let fetched_ids: Vec<&str> = fetched.iter().map(|p| p.id.as_str()).collect();
    assert_eq!(ids, fetched_ids);
    if t.backend != Backend::Firestore {
        // (The Firestore emulator ignores the search: see above.)
        assert_eq!(fetched_ids, ["s-east", "s-north"]);
    }
}
