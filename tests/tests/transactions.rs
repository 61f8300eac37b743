//! Transactions: optimistic concurrency, rollback, and bounded jittered retry (R-A2).

use std::sync::atomic::Ordering;
use std::time::Duration;

use datastore_entity::prelude::*;
use datastore_entity::{Error, RetryPolicy};
use datastore_entity_tests::{Call, Instrumented, account, account_key, draft};

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
                        tx.put(&a).await?;
                        Ok::<_, Error>(())
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
                tx.put(&a).await?;
                tx.put(&account("carol")).await?;
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
            tx.put(&account("bob")).await?;
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
    // The body read nothing: the transaction never began, so nothing was sent at all (and
    // nothing retried: no begin, no rollback, no commit).
    assert_eq!(backend.count(Call::Begin), 0, "not retried");
    assert_eq!(backend.count(Call::Rollback), 0);
    assert_eq!(
        backend.count(Call::Commit),
        1,
        "the put before the transaction"
    );
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
            tx.put(&a).await?;
            Ok::<_, Error>(a.balance)
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
            tx.put(&account("ann")).await?;
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
    assert!(
        once.transaction(|tx| async move {
            tx.put(&account("ann")).await?;
            Ok::<_, Error>(())
        })
        .await
        .is_err()
    );
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
                tx.put(&a).await?;
                Ok::<_, Error>(a.balance)
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
            tx.put(&account("ann")).await?;
            tx.delete(&account_key("ann"));
            Ok(())
        })
        .await
        .unwrap_err();
    assert!(matches!(error, Error::DuplicateKey { .. }));
    assert_eq!(backend.count(Call::Commit), 0);
    // It read nothing, so it never began: nothing to roll back.
    assert_eq!(backend.count(Call::Rollback), 0);
}

#[tokio::test]
async fn a_tx_handle_kept_after_its_transaction_is_closed() {
    let db = Db::in_memory();
    let kept = db
        .transaction(|tx| async move { Ok::<_, Error>(tx) })
        .await
        .unwrap();
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
            tx.put(&mine).await?;
            Ok::<_, Error>(())
        }
    })
    .await
    .unwrap();
    assert_eq!(
        db.get(&account_key("ann")).await.unwrap().unwrap().balance,
        7
    );
}

/// An application's error type, with the store's errors inside.
#[derive(Debug)]
enum AppError {
    Store(Error),
}

impl From<Error> for AppError {
    fn from(e: Error) -> Self {
        AppError::Store(e)
    }
}

#[tokio::test(start_paused = true)]
async fn contention_met_inside_a_body_with_its_own_error_type_is_retried() {
    // R-A2: the body turned the read's `Aborted` into its own error with `?`; the attempt is
    // retried all the same, because the crate saw the contention.
    let (backend, db) = Instrumented::db();
    db.put(&account("ann")).await.unwrap();
    backend.fail_lookups.store(1, Ordering::SeqCst);
    let balance = db
        .transaction(async |tx| {
            let mut a = tx.get(&account_key("ann")).await?.expect("exists");
            a.balance += 1;
            tx.put(&a).await?;
            Ok::<_, AppError>(a.balance)
        })
        .await
        .unwrap();
    assert_eq!(balance, 1);
    assert_eq!(backend.count(Call::Begin), 2, "one retry");
    assert_eq!(
        backend.count(Call::Rollback),
        1,
        "the failed attempt rolled back"
    );
    // Once the policy runs out, the body's error comes back, holding the store's.
    backend.fail_lookups.store(usize::MAX, Ordering::SeqCst);
    let failed = db
        .clone()
        .with_retry(RetryPolicy {
            max_attempts: 3,
            ..RetryPolicy::default()
        })
        .transaction(async |tx| {
            tx.get(&account_key("ann")).await?;
            Ok::<_, AppError>(())
        })
        .await;
    assert!(
        matches!(failed, Err(AppError::Store(Error::Aborted { .. }))),
        "{failed:?}"
    );
    assert_eq!(backend.count(Call::Begin), 2 + 3);
    backend.fail_lookups.store(0, Ordering::SeqCst);
    assert_eq!(
        db.get(&account_key("ann")).await.unwrap().unwrap().balance,
        1
    );
}

#[tokio::test]
async fn a_read_only_transaction_cannot_write_even_through_the_backend() {
    // `ReadTx` has no writes; the engine refuses a read-only transaction's mutations too,
    // as the service does, and writes nothing.
    use datastore_entity::backend::{Backend as _, Mask, Mutation, TransactionMode};
    let (backend, db) = Instrumented::db();
    let engine = backend.engine();
    let id = engine
        .begin_transaction(
            db.partition(),
            &TransactionMode::ReadOnly { read_time: None },
        )
        .await
        .unwrap();
    let key = db.bind(&account_key("ro")).unwrap().into_raw();
    let refused = engine
        .commit(
            vec![Mutation::Upsert(
                key,
                datastore_entity::PropertyMap::new(),
                Mask::Whole,
            )],
            Some(&id),
        )
        .await;
    assert!(matches!(refused, Err(Error::Service { .. })), "{refused:?}");
    assert_eq!(db.get(&account_key("ro")).await.unwrap(), None);
}

#[tokio::test]
async fn a_put_allocates_the_id_before_commit_and_commits_that_key() {
    let (backend, db) = Instrumented::db();
    let parent = db.put(&account("ann")).await.unwrap();
    let key = db
        .transaction(|tx| {
            let post = draft(&parent, "draft");
            async move {
                let key = tx.put(&post).await?;
                // Allocated now: one call to the allocator, nothing committed yet.
                assert!(key.is_complete());
                Ok::<_, Error>(key)
            }
        })
        .await
        .unwrap();
    assert_eq!(backend.count(Call::Ids), 1);
    let committed = backend.commits().pop().expect("one commit");
    assert_eq!(committed, [db.bind(&key).unwrap().into_raw()]);
    assert_eq!(db.get(&key).await.unwrap().unwrap().title, "draft");
}

#[tokio::test]
async fn a_failed_put_fails_the_commit_even_when_its_error_is_ignored() {
    // A write is never dropped silently: the put's own error comes back from the commit, and
    // nothing is written.
    let (backend, db) = Instrumented::db();
    let elsewhere = db.namespace("elsewhere").unwrap();
    let foreign = elsewhere.bind(&account_key("zed")).unwrap();
    let foreign: Key<datastore_entity_tests::Account> = Key::from_raw(foreign.into_raw()).unwrap();
    let result = db
        .transaction(|tx| {
            let (ann, foreign) = (account("ann"), foreign.clone());
            async move {
                tx.put(&ann).await?;
                let ignored = tx
                    .put(&datastore_entity_tests::Post {
                        account: foreign,
                        ..draft(&account_key("ann"), "draft")
                    })
                    .await;
                assert!(
                    matches!(ignored, Err(Error::WrongPartition { .. })),
                    "{ignored:?}"
                );
                Ok::<_, Error>(())
            }
        })
        .await;
    assert!(
        matches!(result, Err(Error::WrongPartition { .. })),
        "{result:?}"
    );
    assert_eq!(backend.count(Call::Commit), 0);
    assert_eq!(db.get(&account_key("ann")).await.unwrap(), None);
}

#[tokio::test]
async fn the_engine_refuses_a_read_time_before_the_body_runs() {
    let (backend, db) = Instrumented::db();
    db.put(&account("ann")).await.unwrap();
    let ran = std::sync::atomic::AtomicBool::new(false);
    let refused = db
        .read_only_transaction_at(Timestamp::now(), async |tx| {
            ran.store(true, Ordering::SeqCst);
            tx.get(&account_key("ann")).await
        })
        .await;
    assert!(
        matches!(refused, Err(Error::Unsupported { .. })),
        "{refused:?}"
    );
    assert!(!ran.load(Ordering::SeqCst));
    assert_eq!(backend.count(Call::Lookup), 0);
    assert_eq!(
        backend.count(Call::Begin),
        1,
        "refused by the backend, not retried"
    );
}
