//! The conformance suite: tests written once against `Db`, run on every backend by
//! `tests/tests/conformance_{embedded,datastore,firestore}.rs`.
//!
//! Where Google's two emulators answer differently, the tests follow the Firestore emulator
//! in Datastore mode (today's production service) and say what the legacy emulator does;
//! where the rules (the README's rules table) make the crate stricter than both, the test says so.

#![allow(missing_docs)]

mod ancestors;
mod answers;
mod arrays;
mod batches;
mod crud;
mod cursors;
mod evolution;
mod filters;
mod hostile;
mod ids;
mod indexes;
mod metadata;
mod namespaces;
mod operators;
mod ordering;
mod partial;
mod projections;
mod refusals;
mod scale;
mod transactions;
mod transforms;
mod values;
mod vectors;
mod versions;

pub use ancestors::*;
pub use answers::*;
pub use arrays::*;
pub use batches::*;
pub use crud::*;
pub use cursors::*;
pub use evolution::*;
pub use filters::*;
pub use hostile::*;
pub use ids::*;
pub use indexes::*;
pub use metadata::*;
pub use namespaces::*;
pub use operators::*;
pub use ordering::*;
pub use partial::*;
pub use projections::*;
pub use refusals::*;
pub use scale::*;
pub use transactions::*;
pub use transforms::*;
pub use values::*;
pub use vectors::*;
pub use versions::*;

use datastore_entity::prelude::*;

/// Every conformance test, declared for one backend: `all_conformance_tests!(Backend::X)`.
#[macro_export]
macro_rules! all_conformance_tests {
    ($backend:expr) => {
        $crate::crud_tests!($backend);
        $crate::batches_tests!($backend);
        $crate::values_tests!($backend);
        $crate::filters_tests!($backend);
        $crate::arrays_tests!($backend);
        $crate::ordering_tests!($backend);
        $crate::ancestors_tests!($backend);
        $crate::projections_tests!($backend);
        $crate::refusals_tests!($backend);
        $crate::cursors_tests!($backend);
        $crate::operators_tests!($backend);
        $crate::namespaces_tests!($backend);
        $crate::ids_tests!($backend);
        $crate::indexes_tests!($backend);
        $crate::transactions_tests!($backend);
        $crate::scale_tests!($backend);
        $crate::evolution_tests!($backend);
        $crate::hostile_tests!($backend);
        $crate::versions_tests!($backend);
        $crate::transforms_tests!($backend);
        $crate::partial_tests!($backend);
        $crate::vectors_tests!($backend);
        $crate::answers_tests!($backend);
        $crate::metadata_tests!($backend);
    };
}

/// Every composite index the suite's entities declare, as the `index.yaml` the legacy
/// emulator is started with.
pub fn index_yaml() -> String {
    datastore_entity::index_yaml(&[
        crate::Post::SCHEMA,
        crate::Event::SCHEMA,
        Row::SCHEMA,
        Indexed::SCHEMA,
        projections::Stamp::SCHEMA,
        operators::Item::SCHEMA,
        &answers::LEGACY,
    ])
}

/// A kind with one property of every value type.
#[derive(Entity, Debug, Clone, PartialEq)]
pub struct Sample {
    #[key]
    pub name: KeyName,
    pub flag: bool,
    pub count: i64,
    pub ratio: f64,
    pub label: String,
    pub maybe: Option<String>,
    #[index(monotonic)]
    pub at: Timestamp,
    pub bytes: Blob,
    pub place: GeoPoint,
    pub owner: Option<Key<crate::Account>>,
    pub tags: Vec<String>,
    pub home: Option<crate::Address>,
    #[exclude_from_index]
    pub notes: String,
}

/// A sample named `name` with `count`, the other properties derived from it.
pub fn sample(name: &str, count: i64) -> Sample {
    Sample {
        name: KeyName::new(name).expect("a valid test name"),
        flag: count % 2 == 0,
        count,
        ratio: count as f64 / 4.0,
        label: format!("label-{count:03}"),
        maybe: (count % 3 == 0).then(|| "three".to_owned()),
        at: Timestamp::from_micros(1_700_000_000_000_000 + count * 1_000_001),
        bytes: Blob::from(vec![count as u8, 0, 255]),
        place: GeoPoint::new(count as f64 / 10.0, -(count as f64) / 10.0).expect("in range"),
        owner: None,
        tags: vec![format!("t{}", count % 3), format!("u{}", count % 2)],
        home: Some(crate::Address {
            city: if count % 2 == 0 { "Paris" } else { "Lyon" }.into(),
        }),
        notes: "n".repeat(10),
    }
}

/// A small numbered entity for queries and paging.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(
    index(group, rank),
    index(group, -rank),
    index(-group, -rank),
    index(rank, group),
    index(rank, -group)
)]
pub struct Row {
    #[key]
    pub id: KeyId,
    pub rank: i64,
    pub group: String,
}

/// Row `id`, with its rank and group.
pub fn row(id: i64, rank: i64, group: &str) -> Row {
    Row {
        id: KeyId::new(id).expect("a positive id"),
        rank,
        group: group.into(),
    }
}

/// The key of `Sample` `name`.
pub fn sample_key(name: &str) -> Key<Sample> {
    Sample::key(KeyName::new(name).expect("a valid test name"))
}

/// The ids of rows, in order.
pub fn ids(rows: &[Row]) -> Vec<i64> {
    rows.iter().map(|r| r.id.get()).collect()
}
