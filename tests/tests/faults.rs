//! The Google Cloud backend under the network's faults, on both of Google's emulators (the
//! Firestore emulator in Datastore mode and the legacy Datastore emulator), through the harness's fault proxy (`tests/src/faults.rs`): reads, queries
//! and transactions survive a blip; a black hole ends in an error within the deadline; a
//! commit whose answer is lost says so and is never replayed; no acknowledged write is lost;
//! no transaction body's writes are applied twice; a restarted emulator is reconnected to.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use datastore_entity::prelude::*;
use datastore_entity::{Error, RetryPolicy};
use datastore_entity_tests::faults::{Fault, FaultProxy};
use datastore_entity_tests::harness::{Backend, Emulator, PROJECT, shared_emulator};
use datastore_entity_tests::{Account, account, account_key};

/// A `Db` on the emulator through a fault proxy, in a namespace of its own, with `timeout`.
async fn through_proxy(
    backend: Backend,
    name: &str,
    timeout: Duration,
) -> Option<(Db, FaultProxy)> {
    let emulator = shared_emulator(backend)?;
    let proxy = FaultProxy::start(emulator.port).await;
    let db = Db::cloud_builder(PROJECT)
        .endpoint(proxy.endpoint())
        .timeout(timeout)
        .build()
        .await
        .unwrap()
        .namespace(name)
        .unwrap();
    Some((db, proxy))
}

async fn reads_and_queries_survive_a_reset_of_every_connection(backend: Backend) {
    let Some((db, proxy)) = through_proxy(backend, "faults-reset", Duration::from_secs(20)).await
    else {
        return;
    };
    let key = db.put(&account("ann")).await.unwrap();
    for round in 0..3 {
        proxy.reset_all();
        let found = db.get(&key).await.unwrap_or_else(|e| {
            panic!(
                "round {round}: {e}; {} connections accepted; the emulator's last lines:\n{}",
                proxy.accepted(),
                shared_emulator(backend).map_or_else(String::new, |e| e.log_tail(30))
            )
        });
        assert_eq!(found.unwrap().email, "ann@example.com");
        proxy.reset_all();
        let page = db.query::<Account>().fetch().await.unwrap();
        assert_eq!(page.items.len(), 1);
    }
    assert!(
        proxy.accepted() >= 4,
        "each reset made the client reconnect"
    );
}

async fn reads_survive_a_server_that_refuses_connections_for_a_while(backend: Backend) {
    let Some((db, proxy)) = through_proxy(backend, "faults-refuse", Duration::from_secs(20)).await
    else {
        return;
    };
    let key = db.put(&account("ann")).await.unwrap();
    proxy.set(Fault::Refuse);
    proxy.reset_all();
    let proxy = Arc::new(proxy);
    let healer = proxy.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(700)).await;
        healer.set(Fault::None);
    });
    let started = Instant::now();
    let found = db.get(&key).await.unwrap();
    assert!(found.is_some());
    assert!(
        started.elapsed() >= Duration::from_millis(600),
        "it waited out the outage"
    );
}

async fn a_black_hole_ends_in_an_error_within_the_deadline(backend: Backend) {
    let deadline = Duration::from_secs(2);
    let Some((db, proxy)) = through_proxy(backend, "faults-hole", deadline).await else {
        return;
    };
    let key = db.put(&account("ann")).await.unwrap();
    proxy.set(Fault::Swallow);
    let started = Instant::now();
    let error = db.get(&key).await.unwrap_err();
    let took = started.elapsed();
    assert!(
        took < deadline + Duration::from_millis(500),
        "took {took:?}"
    );
    match &error {
        Error::Unavailable { reason } => {
            assert!(reason.contains("lookup"), "{reason}");
            assert!(
                reason.contains(&proxy.endpoint()),
                "names the endpoint: {reason}"
            );
            assert!(reason.contains("deadline"), "{reason}");
        }
        other => panic!("a lookup in a black hole is Unavailable, found {other:?}"),
    }
    // A commit in the black hole: its outcome is unknown, and it is said so.
    let error = db.put(&account("bob")).await.unwrap_err();
    assert!(
        matches!(error, Error::CommitOutcomeUnknown { .. }),
        "{error:?}"
    );
    assert!(
        error.to_string().contains("may have been applied"),
        "{error}"
    );
}

async fn a_commit_whose_answer_is_lost_is_unknown_and_never_replayed(backend: Backend) {
    let Some((db, proxy)) = through_proxy(backend, "faults-answer", Duration::from_secs(2)).await
    else {
        return;
    };
    proxy.set(Fault::SwallowAnswers);
    // An insert: sending it twice would fail with AlreadyExists; it is sent once (the
    // commit's `datastore` span says how many attempts its call made).
    let recorder = datastore_entity_tests::recorder::Recorder::default();
    let guard = datastore_entity_tests::recorder::scoped(recorder.clone());
    let error = db.insert(&account("ann")).await.unwrap_err();
    drop(guard);
    assert!(
        matches!(error, Error::CommitOutcomeUnknown { .. }),
        "{error:?}"
    );
    let commits: Vec<_> = recorder
        .take()
        .into_iter()
        .filter(|l| l.span.as_deref() == Some("datastore") && l.text().contains("\"commit\""))
        .collect();
    assert_eq!(commits.len(), 1, "{commits:#?}");
    assert!(commits[0].text().contains("attempts=1"), "{:?}", commits[0]);
    proxy.set(Fault::None);
    // It was applied (the request arrived): reading back tells, as the error says to do.
    let found = db.get(&account_key("ann")).await.unwrap();
    assert_eq!(found.unwrap().email, "ann@example.com");
}

async fn under_repeated_resets_no_acknowledged_write_is_lost_and_no_body_is_applied_twice(
    backend: Backend,
) {
    let Some((db, proxy)) = through_proxy(backend, "faults-chaos", Duration::from_secs(5)).await
    else {
        return;
    };
    db.put(&account("counter")).await.unwrap();
    let proxy = Arc::new(proxy);
    let chaos = {
        let proxy = proxy.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(37)).await;
                proxy.reset_all();
            }
        })
    };
    let mut acknowledged = Vec::new();
    let (mut committed, mut unknown) = (0, 0);
    let bodies = Arc::new(AtomicUsize::new(0));
    for i in 0..40 {
        let name = format!("w{i}");
        match db.put(&account(&name)).await {
            Ok(key) => acknowledged.push(key),
            Err(Error::CommitOutcomeUnknown { .. } | Error::Unavailable { .. }) => {}
            Err(other) => panic!("a put under resets: {other:?}"),
        }
        let runs = bodies.clone();
        let outcome = db
            .transaction(|tx| {
                let runs = runs.clone();
                async move {
                    runs.fetch_add(1, Ordering::SeqCst);
                    let mut counter = tx.get(&account_key("counter")).await?.unwrap();
                    counter.balance += 1;
                    tx.put(&counter).await?;
                    Ok::<_, Error>(())
                }
            })
            .await;
        match outcome {
            Ok(()) => committed += 1,
            Err(Error::CommitOutcomeUnknown { .. }) => unknown += 1,
            Err(Error::Unavailable { .. } | Error::Aborted { .. }) => {}
            Err(other) => panic!("a transaction under resets: {other:?}"),
        }
    }
    chaos.abort();
    proxy.reset_all();
    let found = db.get_many(&acknowledged).await.unwrap();
    assert!(
        found.iter().all(Option::is_some),
        "every acknowledged put is there"
    );
    let balance = db
        .get(&account_key("counter"))
        .await
        .unwrap()
        .unwrap()
        .balance;
    // Each committed body added 1; each unknown one at most 1; none twice.
    assert!(
        balance >= committed && balance <= committed + unknown,
        "balance {balance}, {committed} committed, {unknown} unknown"
    );
    eprintln!(
        "{} acknowledged puts of 40; transactions: {committed} committed, {unknown} unknown, \
         {} bodies run; {} connections",
        acknowledged.len(),
        bodies.load(Ordering::SeqCst),
        proxy.accepted()
    );
}

async fn a_live_db_reconnects_to_a_restarted_emulator(backend: Backend) {
    // An emulator of this test's own, stopped and started again on the same port.
    let emulator = match Emulator::start(backend) {
        Ok(emulator) => emulator,
        Err(reason) if std::env::var_os("CI").is_some() => panic!("CI needs it: {reason}"),
        Err(reason) => return eprintln!("skipped: {reason}"),
    };
    let port = emulator.port;
    // Retried until the deadline rather than for the default 8 attempts: those sleep 5.6 s in
    // all on average (full jitter, so sometimes much less), and a Java emulator restarting on
    // a busy machine can take longer than that.
    let db = Db::cloud_builder(PROJECT)
        .endpoint(format!("http://127.0.0.1:{port}"))
        .timeout(Duration::from_secs(30))
        .retry(RetryPolicy {
            max_attempts: 1_000,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(500),
        })
        .build()
        .await
        .unwrap();
    let key = db.put(&account("ann")).await.unwrap();
    assert!(db.get(&key).await.unwrap().is_some());
    drop(emulator);
    let restarted = std::thread::spawn(move || Emulator::start_on(backend, port));
    // The same handle, while the emulator comes back: retried until it answers. The
    // emulator keeps its data in memory, so the entity is gone with the old process.
    let found = db.get(&key).await.unwrap();
    assert!(found.is_none());
    db.put(&account("bob")).await.unwrap();
    drop(restarted.join().unwrap().unwrap());
}

/// Every test above, on one emulator.
macro_rules! on {
    ($module:ident, $backend:expr) => {
        mod $module {
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn reads_and_queries_survive_a_reset_of_every_connection() {
                super::reads_and_queries_survive_a_reset_of_every_connection($backend).await
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn reads_survive_a_server_that_refuses_connections_for_a_while() {
                super::reads_survive_a_server_that_refuses_connections_for_a_while($backend).await
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_black_hole_ends_in_an_error_within_the_deadline() {
                super::a_black_hole_ends_in_an_error_within_the_deadline($backend).await
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_commit_whose_answer_is_lost_is_unknown_and_never_replayed() {
                super::a_commit_whose_answer_is_lost_is_unknown_and_never_replayed($backend).await
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn under_repeated_resets_no_acknowledged_write_is_lost_and_no_body_is_applied_twice() {
                super::under_repeated_resets_no_acknowledged_write_is_lost_and_no_body_is_applied_twice($backend).await
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_live_db_reconnects_to_a_restarted_emulator() {
                super::a_live_db_reconnects_to_a_restarted_emulator($backend).await
            }
        }
    };
}

on!(firestore, Backend::Firestore);
on!(datastore, Backend::Datastore);
