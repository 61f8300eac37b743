//! Which queries need a composite index (R-I2). The legacy emulator runs with
//! `--require_indexes` and the suite's declared indexes, so it refuses, as the service does,
//! what no declared index serves; the embedded engine's strict index mode must refuse exactly
//! the same queries (and name the index to add). The Firestore emulator does not check
//! indexes: there every query runs.

use datastore_entity::Query;
use datastore_entity::prelude::*;

use crate::harness::{Backend, Ctx};
use crate::{Account, account};

#[macro_export]
macro_rules! indexes_tests {
    ($backend:expr) => {
        $crate::conformance!($backend;
            index_built_in_indexes_serve_kind_ancestor_equality_and_single_property_queries,
            index_queries_that_need_an_undeclared_composite_index_are_refused,
            index_declared_composite_indexes_serve_their_queries,
        );
    };
}

/// An entity with one declared composite index.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(index(a, -b))]
pub struct Indexed {
    #[parent]
    pub owner: Key<Account>,
    #[key]
    pub id: KeyId,
    pub a: i64,
    pub b: i64,
    pub c: String,
}

/// An account owning four `Indexed` rows. `tag` differs per test: the legacy emulator locks
/// entity groups by key path across namespaces.
async fn owner(t: &Ctx, tag: &str) -> Key<Account> {
    let owner = t.db.put(&account(&format!("{tag}-owner"))).await.unwrap();
    let rows: Vec<Indexed> = (1..=4)
        .map(|i| Indexed {
            owner: owner.clone(),
            id: KeyId::new(i).unwrap(),
            a: i % 2,
            b: i,
            c: format!("c{}", i % 2),
        })
        .collect();
    t.db.put_many(&rows).await.unwrap();
    owner
}

async fn count(query: Query<Indexed>) -> Result<usize, Error> {
    query.fetch().await.map(|page| page.items.len())
}

pub async fn index_built_in_indexes_serve_kind_ancestor_equality_and_single_property_queries(
    t: Ctx,
) {
    let owner = owner(&t, "built-in").await;
    let q = || t.db.query::<Indexed>();
    assert_eq!(count(q()).await.unwrap(), 4, "the kind");
    assert_eq!(count(q().ancestor(&owner)).await.unwrap(), 4, "an ancestor");
    // Equality filters on several properties: the single-property indexes, merged.
    let eq = q().filter(Indexed::A.eq(1)).filter(Indexed::C.eq("c1"));
    assert_eq!(count(eq).await.unwrap(), 2, "equality filters");
    let eq = q().ancestor(&owner).filter(Indexed::A.eq(0));
    assert_eq!(
        count(eq).await.unwrap(),
        2,
        "an ancestor and an equality filter"
    );
    // One property, ordered and filtered: its own index, either direction.
    assert_eq!(count(q().order(Indexed::B.desc())).await.unwrap(), 4);
    assert_eq!(count(q().filter(Indexed::B.gt(1))).await.unwrap(), 3);
    let range = q().filter(Indexed::B.gt(1)).order(Indexed::B.desc());
    assert_eq!(count(range).await.unwrap(), 3);
}

pub async fn index_queries_that_need_an_undeclared_composite_index_are_refused(t: Ctx) {
    let owner = owner(&t, "refused").await;
    let q = || t.db.query::<Indexed>();
    let cases: Vec<(&str, Query<Indexed>, &[&str])> = vec![
        (
            "an equality filter and an order on another property",
            q().filter(Indexed::C.eq("c1")).order(Indexed::B.asc()),
            &["c", "b"],
        ),
        (
            "the declared index's order in the other direction",
            q().filter(Indexed::A.eq(1)).order(Indexed::B.asc()),
            &["a", "b"],
        ),
        (
            "an equality filter and a range filter on another property",
            q().filter(Indexed::C.eq("c1")).filter(Indexed::B.gt(1)),
            &["c", "b"],
        ),
        (
            "two orders",
            q().order(Indexed::A.asc()).order(Indexed::B.asc()),
            &["a", "b"],
        ),
        (
            "an ancestor and an order",
            q().ancestor(&owner).order(Indexed::A.asc()),
            &["a"],
        ),
        (
            "an ancestor and a range filter",
            q().ancestor(&owner).filter(Indexed::B.gt(1)),
            &["b"],
        ),
    ];
    for (what, query, properties) in cases {
        let result = count(query).await;
        // The Firestore emulator serves any query; so does the server, as an emulator, unless
        // started with the indexes it requires.
        if matches!(t.backend, Backend::Firestore | Backend::Server) {
            assert!(result.is_ok(), "{what}: {result:?}");
            continue;
        }
        match result {
            // The legacy emulator's message names no index to add.
            Err(Error::MissingIndex { .. }) if t.backend == Backend::Datastore => {}
            Err(Error::MissingIndex { index_yaml, .. }) => {
                for p in properties {
                    assert!(
                        index_yaml.contains(&format!("name: {p}")),
                        "{what}: the recommended index names `{p}`:\n{index_yaml}"
                    );
                }
                assert!(
                    index_yaml.contains("kind: Indexed"),
                    "{what}:\n{index_yaml}"
                );
            }
            other => panic!("{what}: expected MissingIndex, got {other:?}"),
        }
    }
}

pub async fn index_declared_composite_indexes_serve_their_queries(t: Ctx) {
    owner(&t, "declared").await;
    let q = || t.db.query::<Indexed>();
    // index(a, -b): the equality filter, then the order in the declared direction.
    let page = q()
        .filter(Indexed::A.eq(0))
        .order(Indexed::B.desc())
        .fetch()
        .await
        .unwrap();
    let bs: Vec<i64> = page.items.iter().map(|r| r.b).collect();
    assert_eq!(bs, [4, 2]);
    // A range filter without an explicit order: the same index, read backwards.
    let page = q()
        .filter(Indexed::A.eq(1))
        .filter(Indexed::B.gt(1))
        .fetch()
        .await
        .unwrap();
    let bs: Vec<i64> = page.items.iter().map(|r| r.b).collect();
    assert_eq!(bs, [3]);
}
