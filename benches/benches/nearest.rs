//! Vector search on the embedded engine (issue #29): `find_nearest` of the 10 nearest among
//! 10,000 entities with a 128-dimension embedding, each measure, against the same search by
//! hand over the same vectors held in a `Vec` (a brute-force scan, the least any exact search
//! does): what the engine adds to the arithmetic — reading each entity, checking it, decoding
//! the results.
//!
//! `cargo bench -p datastore-entity-benches --bench nearest`
#![allow(missing_docs)]

use datastore_entity::prelude::*;
use datastore_entity::{Distance, Vector};
use divan::Bencher;

const ENTITIES: usize = 10_000;
const DIMENSION: usize = 128;
const K: usize = 10;

#[derive(Entity, Debug, Clone, PartialEq)]
struct Doc {
    #[key]
    id: KeyId,
    title: String,
    #[vector_index(128)]
    emb: Vector,
}

/// The same pseudo-random vectors every run.
fn vectors() -> Vec<Vec<f64>> {
    let mut rng = fastrand::Rng::with_seed(29);
    (0..ENTITIES)
        .map(|_| (0..DIMENSION).map(|_| rng.f64() * 2.0 - 1.0).collect())
        .collect()
}

fn query_vector() -> Vector {
    let mut rng = fastrand::Rng::with_seed(7);
    Vector::new((0..DIMENSION).map(|_| rng.f64() * 2.0 - 1.0).collect()).expect("valid")
}

fn loaded() -> Db {
    let db = Db::in_memory();
    let docs: Vec<Doc> = vectors()
        .into_iter()
        .enumerate()
        .map(|(i, v)| Doc {
            id: KeyId::new(i as i64 + 1).expect("positive"),
            title: format!("doc {i}"),
            emb: Vector::new(v).expect("valid"),
        })
        .collect();
    let runtime = datastore_entity_benches::runtime();
    runtime.block_on(async {
        for chunk in docs.chunks(500) {
            db.put_many(chunk).await.expect("written");
        }
    });
    db
}

const MEASURES: [Distance; 3] = [Distance::Euclidean, Distance::Cosine, Distance::DotProduct];

#[divan::bench(args = MEASURES, sample_count = 20, sample_size = 1)]
fn engine(bencher: Bencher, measure: Distance) {
    let db = loaded();
    let v = query_vector();
    let runtime = datastore_entity_benches::runtime();
    bencher.bench_local(|| {
        runtime.block_on(async {
            let found = db
                .query::<Doc>()
                .find_nearest(Doc::EMB, &v, measure, K)
                .fetch_with_distance()
                .await
                .expect("found");
            assert_eq!(found.len(), K);
            found
        })
    });
}

#[divan::bench(args = MEASURES, sample_count = 20, sample_size = 1)]
fn by_hand(bencher: Bencher, measure: Distance) {
    let all = vectors();
    let v = query_vector();
    bencher.bench_local(|| {
        let mut scored: Vec<(f64, usize)> = all
            .iter()
            .enumerate()
            .map(|(i, x)| (measure.between(x, v.as_slice()), i))
            .collect();
        scored.sort_by(|a, b| match measure {
            Distance::DotProduct => b.0.total_cmp(&a.0),
            _ => a.0.total_cmp(&b.0),
        });
        scored.truncate(K);
        scored
    });
}

fn main() {
    divan::main();
}
