//! Round trips, counted: every call the cloud backend makes is one `datastore` span (`tracing`,
//! at `debug`), so a subscriber of the test's own counts the RPCs of a transaction. Begin, read
//! and commit take two round trips where the first read begins the transaction (Google Cloud;
//! here the legacy emulator, told to), a transaction that reads nothing one, and one that does
//! nothing none. The Firestore emulator mishandles a lookup that begins a transaction (it
//! locks in another transaction than the one it returns, and the commit then times out on that
//! lock), which is why emulators begin transactions on their own by default: recorded below.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use datastore_entity::Error;
use datastore_entity::prelude::*;
use datastore_entity_tests::harness::{Backend, Emulator, PROJECT};
use datastore_entity_tests::{account, account_key};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// Records the `rpc` of every `datastore` span.
#[derive(Clone, Default)]
struct Rpcs {
    calls: Arc<Mutex<Vec<String>>>,
    next: Arc<AtomicU64>,
}

struct RpcName<'a>(&'a mut Option<String>);

impl tracing::field::Visit for RpcName<'_> {
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        if field.name() == "rpc" {
            *self.0 = Some(value.to_owned());
        }
    }
    fn record_debug(&mut self, _: &tracing::field::Field, _: &dyn std::fmt::Debug) {}
}

impl Subscriber for Rpcs {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, span: &Attributes<'_>) -> Id {
        if span.metadata().name() == "datastore" {
            let mut rpc = None;
            span.record(&mut RpcName(&mut rpc));
            self.calls.lock().unwrap().push(rpc.unwrap_or_default());
        }
        Id::from_u64(self.next.fetch_add(1, Ordering::Relaxed) + 1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, _: &Event<'_>) {}
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

impl Rpcs {
    /// The RPCs made since the last call.
    fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.calls.lock().unwrap())
    }
}

fn emulator(backend: Backend) -> Option<Emulator> {
    match Emulator::start(backend) {
        Ok(emulator) => Some(emulator),
        Err(reason) if std::env::var_os("CI").is_some() => panic!("CI needs it: {reason}"),
        Err(reason) => {
            eprintln!("skipped: {reason}");
            None
        }
    }
}

/// A transaction that reads one entity and writes it.
async fn read_and_write(db: &Db) -> Result<(), Error> {
    db.transaction(async |tx| {
        let mut ann = tx.get(&account_key("ann")).await?.expect("put first");
        ann.balance += 1;
        tx.put(&ann).await?;
        Ok::<_, Error>(())
    })
    .await
}

/// The round trips of a read-and-write, a write-only and an empty transaction.
async fn count(db: &Db, rpcs: &Rpcs) -> [Vec<String>; 3] {
    db.put(&account("ann")).await.unwrap();
    rpcs.take();
    read_and_write(db).await.unwrap();
    let read_write = rpcs.take();
    db.transaction(async |tx| {
        tx.put(&account("bob")).await?;
        Ok::<_, Error>(())
    })
    .await
    .unwrap();
    let write_only = rpcs.take();
    db.transaction(async |_| Ok::<_, Error>(())).await.unwrap();
    [read_write, write_only, rpcs.take()]
}

#[tokio::test]
async fn begin_read_and_commit_are_two_round_trips_where_the_first_read_begins() {
    let Some(emulator) = emulator(Backend::Datastore) else {
        return;
    };
    let rpcs = Rpcs::default();
    let _guard = datastore_entity_tests::recorder::scoped(rpcs.clone());
    let db = Db::cloud_builder(PROJECT)
        .endpoint(format!("http://127.0.0.1:{}", emulator.port))
        .begin_transactions_with_reads(true)
        .build()
        .await
        .unwrap();
    let [read_write, write_only, nothing] = count(&db, &rpcs).await;
    assert_eq!(read_write, ["lookup", "commit"]);
    assert_eq!(write_only, ["commit"]);
    assert!(nothing.is_empty(), "{nothing:?}");
    assert_eq!(
        db.get(&account_key("ann")).await.unwrap().unwrap().balance,
        1
    );
}

#[tokio::test]
async fn on_the_firestore_emulator_transactions_begin_on_their_own() {
    let Some(emulator) = emulator(Backend::Firestore) else {
        return;
    };
    let rpcs = Rpcs::default();
    let _guard = datastore_entity_tests::recorder::scoped(rpcs.clone());
    let db = Db::cloud_builder(PROJECT)
        .endpoint(format!("http://127.0.0.1:{}", emulator.port))
        .build()
        .await
        .unwrap();
    let [read_write, write_only, nothing] = count(&db, &rpcs).await;
    assert_eq!(read_write, ["begin_transaction", "lookup", "commit"]);
    // A commit of a transaction that read nothing begins it itself, here too.
    assert_eq!(write_only, ["commit"]);
    assert!(nothing.is_empty(), "{nothing:?}");

    // Told to begin with the lookup, the emulator leaves the read's lock in a transaction it
    // does not return, and the commit waits for it until the emulator gives up.
    let db = Db::cloud_builder(PROJECT)
        .endpoint(format!("http://127.0.0.1:{}", emulator.port))
        .begin_transactions_with_reads(true)
        .retry(datastore_entity::RetryPolicy {
            max_attempts: 1,
            initial_backoff: Duration::ZERO,
            max_backoff: Duration::ZERO,
        })
        .build()
        .await
        .unwrap()
        .namespace("lazy")
        .unwrap();
    db.put(&account("ann")).await.unwrap();
    match read_and_write(&db).await {
        Err(Error::Aborted { reason }) => assert!(reason.contains("lock"), "{reason}"),
        other => panic!(
            "the Firestore emulator now handles a lookup that begins a transaction ({other:?}): \
             make `begin_transactions_with_reads` the default on emulators too"
        ),
    }
}
