//! What watching writes for the scale rules (`db.diagnostics()`: R-K4, R-E2, R-S4, R-S6)
//! costs: `put_many` of 500 twelve-property entities into a fresh in-memory engine, watched
//! (the default) and not (`Diagnostics::off()`), side by side in one process.
//!
//! `cargo bench -p datastore-entity-benches --bench diagnostics`
#![allow(missing_docs)]

use datastore_entity::prelude::*;
use datastore_entity::{Diagnostics, Thresholds};
use datastore_entity_benches::runtime;
use divan::Bencher;

/// Twelve properties, eleven of them indexed.
#[derive(Entity, Debug, Clone, PartialEq)]
struct Order {
    #[key]
    name: KeyName,
    customer: String,
    city: String,
    status: String,
    total: i64,
    items: i64,
    weight: f64,
    discount: f64,
    priority: i64,
    channel: String,
    region: String,
    #[exclude_from_index]
    notes: String,
}

fn orders(batch: usize) -> Vec<Order> {
    (0..500)
        .map(|i| Order {
            name: KeyName::scattered(format!("order-{batch}-{i}")).unwrap(),
            customer: format!("customer-{}", i % 37),
            city: ["Oslo", "Lima", "Pune"][i % 3].into(),
            status: "open".into(),
            total: (i * 7919 % 1000) as i64,
            items: (i % 9) as i64,
            weight: (i % 13) as f64 * 0.5,
            discount: 0.0,
            priority: (i % 3) as i64,
            channel: "web".into(),
            region: "eu".into(),
            notes: "leave at the door".into(),
        })
        .collect()
}

fn put_500(bencher: Bencher, diagnostics: fn() -> Diagnostics) {
    let rt = runtime();
    bencher
        .with_inputs(|| (Db::in_memory().watch(diagnostics()), orders(0)))
        .bench_local_values(|(db, orders)| {
            rt.block_on(db.put_many(&orders)).unwrap();
            db
        });
}

#[divan::bench]
fn put_500_watched(bencher: Bencher) {
    // Thresholds nothing here reaches, so the bench measures watching, not reporting.
    put_500(bencher, || {
        Diagnostics::new().thresholds(Thresholds {
            ramp_rate: f64::MAX,
            ..Thresholds::default()
        })
    });
}

#[divan::bench]
fn put_500_unwatched(bencher: Bencher) {
    put_500(bencher, Diagnostics::off);
}

fn main() {
    divan::main();
}
