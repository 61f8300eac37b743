//! The two sides of `benches/wire.rs` build the same messages and read the same entities, so
//! the benchmark compares equal work.

use datastore_entity::bench_hooks::{commit_request, entities_from_lookup};
use datastore_entity_benches::Order;
use datastore_entity_benches::wire::{PROJECT, commit_by_hand, lookup_response, orders};

#[test]
fn ours_and_prost_by_hand_build_and_read_the_same_messages() {
    let orders = orders(20);
    let ours = commit_request(PROJECT, &orders).expect("encodes");
    assert_eq!(ours, commit_by_hand(&orders));
    let read = entities_from_lookup::<Order>(PROJECT, lookup_response(20)).expect("decodes");
    assert_eq!(read, orders);
}
