//! Transactions: optimistic concurrency, rollback, and bounded jittered retry (R-A2).

use std::sync::atomic::Ordering;
use std::time::Duration;

use datastore_entity::prelude::*;
use datastore_entity::{Error, RetryPolicy};
use datastore_entity_tests::{Call, Instrumented, account, account_key};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn contended_increments_all_land() {
    // R-A2: 8 tasks × 100 increments of one entity, racing; retries make every one count.
    let (backend, db) = Instrumented::db();
    let db = db.with_retry(RetryPolicy {
        max_attempts: 200,
        initial_backoff: Duration::from_micros(200),
        max_backoff: Duration::from_millis(20),
    });
    db.put(&account("ann")).await.unwrap();
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let db = db.clone();
            tokio::spawn(async move {
                for _ in 0..100 {
                    db.transaction(|tx| async move {
                        let mut a = tx.get(&account_key("ann")).await?.expect("exists");
                        // Give the other tasks a chance to commit in between: real contention.
                        tokio::task::yield_now().await;
                        a.balance += 1;
                        tx.put(&a);
                        Ok(())
                    })
                    .await
                    .unwrap();
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(
        db.get(&account_key("ann")).await.unwrap().unwrap().balance,
        800
    );
    let attempts = backend.count(Call::Begin);
    eprintln!("800 increments took {attempts} attempts");
    assert!(
        attempts > 800,
        "no transaction was ever retried: no contention was tested"
    );
}

#[tokio::test]
async fn a_conflicting_commit_aborts_the_transaction_and_writes_nothing() {
    let db = Db::in_memory().with_retry(RetryPolicy {
        max_attempts: 1,
        ..RetryPolicy::default()
    });
    db.put(&account("ann")).await.unwrap();
    let outside = db.clone();
    let error = db
        .transaction(|tx| {
            let outside = outside.clone();
            async move {
                let mut a = tx.get(&account_key("ann")).await?.unwrap();
                // Another writer changes the entity after this transaction read it.
                let mut other = account("ann");
                other.balance = 100;
                outside.put(&other).await?;
                a.balance += 1;
                tx.put(&a);
                tx.put(&account("carol"));
                Ok(())
            }
        })
        .await
        .unwrap_err();
    assert!(matches!(error, Error::Aborted { .. }), "{error}");
    assert_eq!(
        db.get(&account_key("ann")).await.unwrap().unwrap().balance,
        100
    );
    assert_eq!(db.get(&account_key("carol")).await.unwrap(), None);
}

#[tokio::test]
async fn the_closures_own_error_is_returned_unchanged_after_a_rollback() {
    let (backend, db) = Instrumented::db();
    db.put(&account("ann")).await.unwrap();
    let error = db
        .transaction(|tx| async move {
            tx.put(&account("bob"));
            Err::<(), _>(Error::InvalidQuery {
                kind: "Mine".into(),
                reason: "my own failure".into(),
            })
        })
        .await
        .unwrap_err();
    assert_eq!(
        error,
        Error::InvalidQuery {
            kind: "Mine".into(),
            reason: "my own failure".into()
        }
    );
    assert_eq!(backend.count(Call::Begin), 1, "not retried");
    assert_eq!(backend.count(Call::Rollback), 1);
    assert_eq!(db.get(&account_key("bob")).await.unwrap(), None);
}

#[tokio::test(start_paused = true)]
async fn transient_failures_are_retried_with_backoff_and_bounded() {
    let (backend, db) = Instrumented::db();
    let policy = RetryPolicy {
        max_attempts: 4,
        initial_backoff: Duration::from_millis(100),
        max_backoff: Duration::from_secs(10),
    };
    let db = db.with_retry(policy);
    db.put(&account("ann")).await.unwrap();

    // Two outages, then success: three attempts.
    backend.fail_commits.store(2, Ordering::SeqCst);
    let started = tokio::time::Instant::now();
    let balance = db
        .transaction(|tx| async move {
            let mut a = tx.get(&account_key("ann")).await?.unwrap();
            a.balance += 1;
            tx.put(&a);
            Ok(a.balance)
        })
        .await
        .unwrap();
    assert_eq!(balance, 1);
    assert_eq!(backend.count(Call::Begin), 3);
    // Full jitter: each pause is at most its cap (100 ms, then 200 ms).
    assert!(
        started.elapsed() <= Duration::from_millis(300),
        "{:?}",
        started.elapsed()
    );

    // Always failing: exactly max_attempts attempts, and no pause after the last one.
    backend.fail_commits.store(usize::MAX, Ordering::SeqCst);
    let begins = backend.count(Call::Begin);
    let started = tokio::time::Instant::now();
    let error = db
        .transaction(|tx| async move {
            tx.put(&account("ann"));
            Ok(())
        })
        .await
        .unwrap_err();
    assert!(matches!(error, Error::Unavailable { .. }));
    assert_eq!(backend.count(Call::Begin) - begins, 4);
    assert!(started.elapsed() <= Duration::from_millis(100 + 200 + 400));

    // One attempt only: it fails at once, without sleeping.
    let once = db.clone().with_retry(RetryPolicy {
        max_attempts: 1,
        ..policy
    });
    let started = tokio::time::Instant::now();
    assert!(once.transaction(|_tx| async { Ok(()) }).await.is_err());
    assert_eq!(started.elapsed(), Duration::ZERO);
}

#[test]
fn backoff_grows_exponentially_up_to_the_cap() {
    let policy = RetryPolicy {
        max_attempts: 10,
        initial_backoff: Duration::from_millis(10),
        max_backoff: Duration::from_millis(50),
    };
    for _ in 0..1000 {
        assert!(policy.backoff(1) <= Duration::from_millis(10));
        assert!(policy.backoff(2) <= Duration::from_millis(20));
        assert!(policy.backoff(9) <= Duration::from_millis(50));
        assert!(policy.backoff(u32::MAX) <= Duration::from_millis(50));
    }
    // Jittered: not always the same pause.
    let pauses: std::collections::HashSet<Duration> = (0..50).map(|_| policy.backoff(3)).collect();
    assert!(pauses.len() > 10);
}

#[tokio::test]
async fn the_async_closure_form_works_inside_spawned_tasks() {
    // `async |tx| …` and `|tx| async move …` both compile, and the future is Send.
    let db = Db::in_memory();
    db.put(&account("ann")).await.unwrap();
    let task = tokio::spawn({
        let db = db.clone();
        async move {
            db.transaction(async |tx| {
                let mut a = tx.get(&account_key("ann")).await?.unwrap();
                a.balance = 42;
                tx.put(&a);
                Ok(a.balance)
            })
            .await
        }
    });
    assert_eq!(task.await.unwrap().unwrap(), 42);
    assert_eq!(
        db.get(&account_key("ann")).await.unwrap().unwrap().balance,
        42
    );
}

#[tokio::test]
async fn a_duplicate_write_in_a_transaction_fails_before_commit() {
    // R-A4
    let (backend, db) = Instrumented::db();
    let error = db
        .transaction(|tx| async move {
            tx.put(&account("ann"));
            tx.delete(&account_key("ann"));
            Ok(())
        })
        .await
        .unwrap_err();
    assert!(matches!(error, Error::DuplicateKey { .. }));
    assert_eq!(backend.count(Call::Commit), 0);
    assert_eq!(backend.count(Call::Rollback), 1);
}

#[tokio::test]
async fn a_tx_handle_kept_after_its_transaction_is_closed() {
    let db = Db::in_memory();
    let kept = db.transaction(|tx| async move { Ok(tx) }).await.unwrap();
    assert!(matches!(
        kept.get(&account_key("ann")).await,
        Err(Error::TransactionClosed)
    ));
}

#[tokio::test]
async fn a_blind_write_does_not_conflict_like_in_the_emulator() {
    // Google's emulator commits a transaction that only writes an entity another commit
    // changed after the transaction began; only reads are checked.
    let db = Db::in_memory().with_retry(RetryPolicy {
        max_attempts: 1,
        ..RetryPolicy::default()
    });
    db.put(&account("ann")).await.unwrap();
    let outside = db.clone();
    db.transaction(|tx| {
        let outside = outside.clone();
        async move {
            let mut other = account("ann");
            other.balance = 100;
            outside.put(&other).await?;
            let mut mine = account("ann");
            mine.balance = 7;
            tx.put(&mine);
            Ok(())
        }
    })
    .await
    .unwrap();
    assert_eq!(
        db.get(&account_key("ann")).await.unwrap().unwrap().balance,
        7
    );
}
