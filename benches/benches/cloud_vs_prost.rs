//! The cloud path over a real network round trip: `put_many` and `get_many` of 500 orders
//! through a `Db` on Google's Firestore emulator in Datastore mode, against the same calls
//! made with prost by hand (`benches/src/wire.rs`: the messages built and read field by
//! field, no checks) over a tonic channel to the same emulator. What the client adds to a
//! round trip, per entity: the ratio of the medians (each call carries 500 entities).
//!
//! The emulator is started once (free loopback port, own process group) and stopped when the
//! benchmark ends. `cargo bench -p datastore-entity-benches --bench cloud_vs_prost`
#![allow(missing_docs)]

use std::sync::OnceLock;

use datastore_entity::prelude::*;
use datastore_entity_benches::wire::{
    PROJECT, commit_by_hand, lookup_by_hand, order_by_hand, orders,
};
use datastore_entity_benches::{Order, runtime};
use datastore_entity_tests::harness::{Backend, Emulator};
use divan::Bencher;
use gcloud_sdk::google::datastore::v1 as pb;
use gcloud_sdk::tonic::transport::Channel;
use pb::datastore_client::DatastoreClient;

/// Orders per call.
const N: i64 = 500;

/// Rounds of every call made before anything is measured.
const WARM_UP: usize = 30;

/// The emulator's port, set by `main` before any benchmark runs.
static PORT: OnceLock<u16> = OnceLock::new();

fn main() {
    let emulator = Emulator::start(Backend::Firestore).unwrap_or_else(|reason| {
        panic!("this benchmark needs Google's Firestore emulator: {reason}")
    });
    PORT.set(emulator.port).expect("set once");
    divan::main();
    drop(emulator);
}

/// Both sides, connected to the emulator, with orders 1 to `N` stored.
struct Sides {
    runtime: tokio::runtime::Runtime,
    db: Db,
    client: DatastoreClient<Channel>,
    orders: Vec<Order>,
    keys: Vec<Key<Order>>,
}

fn sides() -> &'static Sides {
    static SIDES: OnceLock<Sides> = OnceLock::new();
    SIDES.get_or_init(|| {
        let runtime = runtime();
        let url = format!("http://127.0.0.1:{}", PORT.get().expect("main started it"));
        let (db, client) = runtime.block_on(async {
            let db = Db::cloud_builder(PROJECT)
                .endpoint(url.clone())
                .build()
                .await
                .expect("the emulator answers");
            let client = DatastoreClient::connect(url).await.expect("a channel");
            (db, client)
        });
        let orders = orders(N);
        let keys = runtime
            .block_on(db.put_many(&orders))
            .expect("the orders are stored");
        // The emulator is a JVM: both sides' calls warm it up before either is measured.
        for _ in 0..WARM_UP {
            runtime.block_on(async {
                let mut c = client.clone();
                db.put_many(&orders).await.expect("put");
                c.commit(commit_by_hand(&orders)).await.expect("commit");
                db.get_many(&keys).await.expect("get");
                c.lookup(lookup_by_hand(N)).await.expect("lookup");
            });
        }
        Sides {
            runtime,
            db,
            client,
            orders,
            keys,
        }
    })
}

/// Upserts of the 500 orders in one non-transactional commit.
mod put_many_500 {
    use super::*;

    #[divan::bench]
    fn ours(bencher: Bencher) {
        let s = sides();
        bencher.bench_local(|| s.runtime.block_on(s.db.put_many(&s.orders)).expect("put"));
    }

    #[divan::bench]
    fn prost_by_hand(bencher: Bencher) {
        let s = sides();
        bencher.bench_local(|| {
            let mut client = s.client.clone();
            s.runtime
                .block_on(client.commit(commit_by_hand(&s.orders)))
                .expect("commit")
                .into_inner()
        });
    }
}

/// The 500 orders read back by key in one lookup.
mod get_many_500 {
    use super::*;

    #[divan::bench]
    fn ours(bencher: Bencher) {
        let s = sides();
        bencher.bench_local(|| {
            let found = s.runtime.block_on(s.db.get_many(&s.keys)).expect("get");
            assert!(found.iter().all(Option::is_some));
            found
        });
    }

    #[divan::bench]
    fn prost_by_hand(bencher: Bencher) {
        let s = sides();
        bencher.bench_local(|| {
            let mut client = s.client.clone();
            let response = s
                .runtime
                .block_on(client.lookup(lookup_by_hand(N)))
                .expect("lookup")
                .into_inner();
            let found: Vec<Order> = response
                .found
                .into_iter()
                .map(|r| order_by_hand(r.entity.expect("an entity")))
                .collect();
            assert_eq!(found.len(), N as usize);
            found
        });
    }
}
