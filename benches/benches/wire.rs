//! The Google Cloud backend's wire form, ours against prost by hand: 500 twelve-property
//! entities encoded into the `CommitRequest` a `put_many` sends, and a 1,000-entity
//! `LookupResponse` (as tonic hands it over, already parsed from bytes) read into entities.
//! "Ours" is the crate's whole path (the derive's conversion, then protobuf); "by hand"
//! builds and reads the same messages field by field, as a user of the raw API would.
//!
//! `cargo bench -p datastore-entity-benches --bench wire`
#![allow(missing_docs)]

use datastore_entity::bench_hooks::{commit_request, entities_from_lookup};
use datastore_entity_benches::Order;
use datastore_entity_benches::wire::{
    PROJECT, commit_by_hand, lookup_response, order_by_hand, orders,
};
use divan::{Bencher, black_box};

fn main() {
    divan::main();
}

mod encode_500_entities {
    use super::*;

    #[divan::bench]
    fn ours(bencher: Bencher) {
        let orders = orders(500);
        bencher.bench(|| commit_request(PROJECT, black_box(&orders)).expect("encodes"));
    }

    #[divan::bench]
    fn prost_by_hand(bencher: Bencher) {
        let orders = orders(500);
        bencher.bench(|| commit_by_hand(black_box(&orders)));
    }
}

mod decode_1000_entities {
    use super::*;

    #[divan::bench]
    fn ours(bencher: Bencher) {
        let response = lookup_response(1_000);
        bencher
            .with_inputs(|| response.clone())
            .bench_values(|r| entities_from_lookup::<Order>(PROJECT, r).expect("decodes"));
    }

    #[divan::bench]
    fn prost_by_hand(bencher: Bencher) {
        let response = lookup_response(1_000);
        bencher.with_inputs(|| response.clone()).bench_values(|r| {
            r.found
                .into_iter()
                .filter_map(|f| f.entity)
                .map(order_by_hand)
                .collect::<Vec<Order>>()
        });
    }
}
