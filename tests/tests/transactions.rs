//! Transactions: optimistic concurrency, rollback, and bounded jittered retry (R-A2).

use std::sync::atomic::Ordering;
use std::time::Duration;

use datastore_entity::prelude::*;
use datastore_entity::{Error, QueryRule, RetryPolicy};
use datastore_entity_tests::{Account, Call, Instrumented, account, account_key, draft};

/// 8 tasks × 100 transactional increments of one entity, racing, with the default retry
/// policy: a read in a read-write transaction locks the entity (as Firestore's do), so the
/// increments queue instead of aborting each other, and every one lands.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn contended_increments_all_land_with_the_default_policy() {
    let path = std::env::temp_dir().join(format!("datastore-entity-inc-{}", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let (backend, memory) = Instrumented::db();
    for db in [memory, Db::open(&path).unwrap()] {
        db.put(&account("ann")).await.unwrap();
        let tasks: Vec<_> = (0..8)
            .map(|_| {
                let db = db.clone();
                tokio::spawn(async move {
                    for _ in 0..100 {
                        db.transaction(|tx| async move {
                            let mut a = tx.get(&account_key("ann")).await?.expect("exists");
                            // Give the other tasks a chance to run in between: real contention.
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
    }
    let attempts = backend.count(Call::Begin);
    eprintln!("800 increments in memory took {attempts} attempts");
    assert!(attempts < 880, "{attempts} attempts: aborts are not rare");
    let _ = std::fs::remove_file(&path);
}

/// 64 writers × 10 transfers among 8 accounts with the default retry policy: none is lost
/// (before locks, a third ran out of attempts), and the total is kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_four_writers_lose_no_transfer() {
    let path = std::env::temp_dir().join(format!("datastore-entity-64-{}", std::process::id()));
    let _ = std::fs::remove_file(&path);
    for db in [Db::in_memory(), Db::open(&path).unwrap()] {
        let keys = db
            .put_many(
                &(0..8)
                    .map(|i| {
                        let mut a = account(&format!("t-{i}"));
                        a.balance = 1_000;
                        a
                    })
                    .collect::<Vec<_>>(),
            )
            .await
            .unwrap();
        let tasks: Vec<_> = (0..64_usize)
            .map(|w| {
                let (db, keys) = (db.clone(), keys.clone());
                tokio::spawn(async move {
                    let mut lost = 0;
                    for i in 0..10_usize {
                        let (from, to) = ((w + i) % 8, (w * 5 + i * 3 + 1) % 8);
                        if from == to {
                            continue;
                        }
                        let done = db
                            .transaction(|tx| {
                                let (a, b) = (keys[from].clone(), keys[to].clone());
                                async move {
                                    let mut a_now = tx.get(&a).await?.expect("exists");
                                    tokio::task::yield_now().await;
                                    let mut b_now = tx.get(&b).await?.expect("exists");
                                    (a_now.balance, b_now.balance) =
                                        (a_now.balance - 1, b_now.balance + 1);
                                    tx.put(&a_now).await?;
                                    tx.put(&b_now).await?;
                                    Ok::<_, Error>(())
                                }
                            })
                            .await;
                        lost += usize::from(done.is_err());
                    }
                    lost
                })
            })
            .collect();
        let mut lost = 0;
        for task in tasks {
            lost += task.await.unwrap();
        }
        eprintln!("64 writers: {lost} transfers ran out of attempts");
        assert_eq!(lost, 0);
        let total: i64 = db
            .get_many(&keys)
            .await
            .unwrap()
            .into_iter()
            .map(|a| a.expect("exists").balance)
            .sum();
        assert_eq!(total, 8_000);
    }
    let _ = std::fs::remove_file(&path);
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
                rule: QueryRule::EmptyProjection,
            })
        })
        .await
        .unwrap_err();
    assert_eq!(
        error,
        Error::InvalidQuery {
            kind: "Mine".into(),
            rule: QueryRule::EmptyProjection,
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
            tx.delete(&account_key("ann")).await?;
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
    use datastore_entity::backend::{Mask, Mutation, TransactionMode};
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
    let foreign: Key<Account> = Key::from_raw(foreign.into_raw()).unwrap();
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
async fn the_engine_refuses_a_read_time_it_keeps_no_version_of_before_the_body_runs() {
    let (backend, db) = Instrumented::db();
    db.put(&account("ann")).await.unwrap();
    let ran = std::sync::atomic::AtomicBool::new(false);
    // Before the engine existed: no version to read.
    let refused = db
        .read_only_transaction_at(Timestamp::now() - Duration::from_secs(7200), async |tx| {
            ran.store(true, Ordering::SeqCst);
            tx.get(&account_key("ann")).await
        })
        .await;
    match &refused {
        Err(Error::Service { code, message }) => {
            assert_eq!(code, "FAILED_PRECONDITION");
            assert!(message.contains("older than"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    assert!(!ran.load(Ordering::SeqCst));
    assert_eq!(backend.count(Call::Lookup), 0);
    assert_eq!(
        backend.count(Call::Begin),
        1,
        "refused by the backend, not retried"
    );
}

#[tokio::test]
async fn a_read_time_reads_the_version_then_current_and_the_window_is_kept() {
    use datastore_entity::backend::embedded::Embedded;
    let mut ann = account("ann");
    for (retention, kept) in [(Duration::from_secs(3600), true), (Duration::ZERO, false)] {
        let db = Db::with_backend(std::sync::Arc::new(
            Embedded::in_memory().keep_versions(retention),
        ));
        ann.balance = 1;
        let key = db.put(&ann).await.unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
        let then = Timestamp::now();
        tokio::time::sleep(Duration::from_millis(5)).await;
        ann.balance = 2;
        db.put(&ann).await.unwrap();
        db.delete(&key).await.unwrap();
        let read = db
            .read_only_transaction_at(then, async |tx| tx.get(&key).await)
            .await
            .map(|a| a.map(|a| a.balance));
        match kept {
            true => assert_eq!(read, Ok(Some(1))),
            false => assert!(
                matches!(&read, Err(Error::Service { code, .. }) if code == "FAILED_PRECONDITION"),
                "{read:?}"
            ),
        }
        // Now: deleted, on both.
        let now = db
            .read_only_transaction_at(Timestamp::now(), async |tx| tx.get(&key).await)
            .await;
        assert_eq!(now, Ok(None));
    }
}

/// The balances of `keys` summed, read one at a time through `get`.
async fn total_of<'k, F, Fut>(keys: &'k [Key<Account>], get: F) -> Result<i64, Error>
where
    F: Fn(&'k Key<Account>) -> Fut,
    Fut: std::future::Future<Output = Result<Option<Account>, Error>>,
{
    let mut total = 0;
    for key in keys {
        total += get(key).await?.expect("exists").balance;
        tokio::task::yield_now().await;
    }
    Ok(total)
}

/// Transfers between ten accounts in read-write transactions, while auditors sum them in
/// read-write and read-only transactions, one read at a time: every audit body sees the true
/// total (each reads one snapshot), on the in-memory engine and on a file.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn auditors_see_only_the_true_total_under_concurrent_transfers() {
    let path = std::env::temp_dir().join(format!("datastore-entity-audit-{}", std::process::id()));
    let _ = std::fs::remove_file(&path);
    for db in [Db::in_memory(), Db::open(&path).unwrap()] {
        let db = db.with_retry(RetryPolicy {
            max_attempts: 100,
            initial_backoff: Duration::from_micros(200),
            max_backoff: Duration::from_millis(10),
        });
        let names: Vec<String> = (0..10).map(|i| format!("audit-{i}")).collect();
        let accounts: Vec<_> = names
            .iter()
            .map(|n| {
                let mut a = account(n);
                a.balance = 100;
                a
            })
            .collect();
        let keys = db.put_many(&accounts).await.unwrap();
        let transfers: Vec<_> = (0..4)
            .map(|task| {
                let (db, keys) = (db.clone(), keys.clone());
                tokio::spawn(async move {
                    for i in 0..50_usize {
                        let (from, to) = ((task + i) % 10, (task * 3 + i * 7 + 1) % 10);
                        if from == to {
                            continue;
                        }
                        let pair = [keys[from].clone(), keys[to].clone()];
                        db.transaction(|tx| {
                            let pair = pair.clone();
                            async move {
                                let found = tx.get_many(&pair).await?;
                                let (Some(mut a), Some(mut b)) =
                                    (found[0].clone(), found[1].clone())
                                else {
                                    unreachable!("both exist");
                                };
                                tokio::task::yield_now().await;
                                (a.balance, b.balance) = (a.balance - 7, b.balance + 7);
                                tx.put(&a).await?;
                                tx.put(&b).await?;
                                Ok::<_, Error>(())
                            }
                        })
                        .await
                        .unwrap();
                    }
                })
            })
            .collect();
        let wrong = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let audit = |read_only: bool| {
            let (db, keys, wrong) = (db.clone(), keys.clone(), wrong.clone());
            tokio::spawn(async move {
                for _ in 0..40 {
                    // Seen inside the body, whether or not it commits.
                    let checked = |total: i64| {
                        if total != 1000 {
                            wrong.lock().unwrap().push(total);
                        }
                        Ok::<i64, Error>(total)
                    };
                    let total = match read_only {
                        true => {
                            db.read_only_transaction(|tx| {
                                let keys = keys.clone();
                                async move { checked(total_of(&keys, |k| tx.get(k)).await?) }
                            })
                            .await
                        }
                        false => {
                            db.transaction(|tx| {
                                let keys = keys.clone();
                                async move { checked(total_of(&keys, |k| tx.get(k)).await?) }
                            })
                            .await
                        }
                    };
                    let total = total.unwrap();
                    if total != 1000 {
                        wrong.lock().unwrap().push(total);
                    }
                }
            })
        };
        let auditors = [audit(false), audit(true)];
        for task in transfers.into_iter().chain(auditors) {
            task.await.unwrap();
        }
        assert_eq!(*wrong.lock().unwrap(), Vec::<i64>::new());
        let total: i64 = db
            .get_many(&keys)
            .await
            .unwrap()
            .into_iter()
            .map(|a| a.expect("exists").balance)
            .sum();
        assert_eq!(total, 1000);
    }
    let _ = std::fs::remove_file(&path);
}

/// Queries at a past version see the indexes as they were: entities changed, deleted and
/// added since are answered from their past versions (the history keeps entities, and the
/// index entries of the ones changed since are recomputed).
#[tokio::test]
async fn queries_at_a_read_time_see_the_indexes_as_they_were() {
    let path = std::env::temp_dir().join(format!("datastore-entity-asof-{}", std::process::id()));
    let _ = std::fs::remove_file(&path);
    for db in [Db::in_memory(), Db::open(&path).unwrap()] {
        let accounts: Vec<_> = (0..20)
            .map(|i| {
                let mut a = account(&format!("asof-{i:02}"));
                a.balance = i;
                a
            })
            .collect();
        db.put_many(&accounts).await.unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
        let then = Timestamp::now();
        tokio::time::sleep(Duration::from_millis(5)).await;
        // Since: 0..5 deleted, 5..10 moved to 100 + i, new ones at 50.
        for a in &accounts[..5] {
            db.delete(&account_key(a.name.as_str())).await.unwrap();
        }
        for a in &accounts[5..10] {
            let mut a = a.clone();
            a.balance += 100;
            db.put(&a).await.unwrap();
        }
        for i in 0..3 {
            let mut a = account(&format!("asof-new-{i}"));
            a.balance = 50;
            db.put(&a).await.unwrap();
        }
        let (then_desc, then_count, then_keys) = db
            .read_only_transaction_at(then, async |tx| {
                let desc = tx
                    .query::<Account>()
                    .filter(Account::BALANCE.ge(3))
                    .order(Account::BALANCE.desc())
                    .fetch()
                    .await?
                    .items;
                let count = tx
                    .query::<Account>()
                    .filter(Account::BALANCE.lt(10))
                    .count()
                    .await?;
                let keys = tx.query::<Account>().keys_only().fetch().await?.items;
                Ok::<_, Error>((desc, count, keys.len()))
            })
            .await
            .unwrap();
        let balances: Vec<i64> = then_desc.iter().map(|a| a.balance).collect();
        assert_eq!(balances, (3..20).rev().collect::<Vec<i64>>());
        assert_eq!((then_count, then_keys), (10, 20));
        // And now, outside: the current indexes.
        let now_desc: Vec<i64> = db
            .query::<Account>()
            .filter(Account::BALANCE.ge(3))
            .order(Account::BALANCE.desc())
            .fetch()
            .await
            .unwrap()
            .items
            .iter()
            .map(|a| a.balance)
            .collect();
        let mut expected: Vec<i64> = (105..110).chain([50, 50, 50]).chain(10..20).collect();
        expected.sort_unstable_by(|a, b| b.cmp(a));
        assert_eq!(now_desc, expected);
    }
    let _ = std::fs::remove_file(&path);
}

#[tokio::test]
async fn a_dropped_transaction_is_rolled_back_in_the_background() {
    let (backend, db) = Instrumented::db();
    db.put(&account("ann")).await.unwrap();
    for _ in 0..3 {
        let dropped = tokio::time::timeout(
            Duration::from_millis(50),
            db.transaction(|tx| async move {
                tx.get(&account_key("ann")).await?;
                std::future::pending::<()>().await;
                Ok::<_, Error>(())
            }),
        )
        .await;
        assert!(dropped.is_err());
    }
    // The rollbacks were spawned: let them run.
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert_eq!(backend.count(Call::Begin), 3);
    assert_eq!(
        backend.count(Call::Rollback),
        3,
        "each dropped transaction rolled back"
    );
    // Nothing left holding the entity: a transaction reads it without waiting.
    tokio::time::timeout(
        Duration::from_secs(1),
        db.transaction(|tx| async move { tx.get(&account_key("ann")).await }),
    )
    .await
    .expect("not locked")
    .unwrap();
}

/// Two transactions that lock two entities in opposite orders, each waiting for the other:
/// the engine finds the circle, aborts the younger, and both commit (the younger on its
/// retry), well within the 20 s a lock wait may last.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadlock_aborts_the_younger_transaction_and_both_commit() {
    let db = Db::in_memory();
    db.put_many(&[account("a"), account("b")]).await.unwrap();
    let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(2));
    let task = |first: &'static str, second: &'static str| {
        let (db, barrier) = (db.clone(), barrier.clone());
        let waited = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        tokio::spawn(async move {
            db.transaction(|tx| {
                let (barrier, waited) = (barrier.clone(), waited.clone());
                async move {
                    let mut x = tx.get(&account_key(first)).await?.expect("exists");
                    if !waited.swap(true, Ordering::SeqCst) {
                        // Both hold their first entity before either asks for its second.
                        barrier.wait().await;
                    }
                    let mut y = tx.get(&account_key(second)).await?.expect("exists");
                    (x.balance, y.balance) = (x.balance - 1, y.balance + 1);
                    tx.put(&x).await?;
                    tx.put(&y).await?;
                    Ok::<_, Error>(())
                }
            })
            .await
        })
    };
    let (one, two) = (task("a", "b"), task("b", "a"));
    for handle in [one, two] {
        tokio::time::timeout(Duration::from_secs(10), handle)
            .await
            .expect("no deadlock")
            .unwrap()
            .unwrap();
    }
    let balances: Vec<i64> = db
        .get_many(&[account_key("a"), account_key("b")])
        .await
        .unwrap()
        .into_iter()
        .map(|a| a.expect("exists").balance)
        .collect();
    assert_eq!(balances, [0, 0]);
}

#[tokio::test]
async fn an_internal_failure_is_never_retried() {
    // Issue #50: invariant failures were `Unavailable`, which `is_retryable` retries.
    let (backend, db) = Instrumented::db();
    db.put(&account("ann")).await.unwrap();
    let attempts = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let failed = db
        .transaction(|tx| {
            let attempts = attempts.clone();
            async move {
                attempts.fetch_add(1, Ordering::SeqCst);
                tx.get(&account_key("ann")).await?;
                Err::<(), _>(Error::Internal {
                    invariant: "a test's own invariant",
                })
            }
        })
        .await
        .unwrap_err();
    assert!(!failed.is_retryable());
    assert!(matches!(failed, Error::Internal { .. }), "{failed:?}");
    assert_eq!(attempts.load(Ordering::SeqCst), 1, "not retried");
    assert_eq!(backend.count(Call::Rollback), 1);
    // A retryable failure of the same body is retried, for contrast.
    assert!(
        Error::Aborted {
            reason: String::new()
        }
        .is_retryable()
    );
}

#[tokio::test]
async fn an_id_allocated_by_an_attempt_that_is_retried_is_never_used() {
    // README: an id allocated by an attempt that is retried or fails is never used.
    let db = Db::in_memory();
    db.put(&account("ann")).await.unwrap();
    let outside = db.clone();
    let learned = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let committed = db
        .transaction(|tx| {
            let (outside, learned) = (outside.clone(), learned.clone());
            async move {
                let a = tx.get(&account_key("ann")).await?.unwrap();
                let key = tx.put(&draft(&account_key("ann"), "note")).await?;
                let first = {
                    let mut learned = learned.lock().unwrap();
                    learned.push(key.clone());
                    learned.len() == 1
                };
                if first {
                    // Another writer changes what this attempt read: its commit aborts.
                    let mut other = a.clone();
                    other.balance += 100;
                    outside.put(&other).await?;
                }
                Ok::<_, Error>(key)
            }
        })
        .await
        .unwrap();
    let learned = learned.lock().unwrap().clone();
    assert_eq!(learned.len(), 2, "one retry: {learned:?}");
    assert_eq!(committed, learned[1]);
    assert_ne!(learned[0], learned[1]);
    assert_eq!(db.get(&learned[0]).await.unwrap(), None);
    assert_eq!(db.get(&learned[1]).await.unwrap().unwrap().title, "note");
    // Nor is it handed out again.
    let more = db
        .allocate_ids::<datastore_entity_tests::Post>(&account_key("ann"), 200)
        .await
        .unwrap();
    assert!(!more.contains(&learned[0]));
}

#[tokio::test]
async fn an_idle_or_old_transaction_is_ended_and_its_locks_freed() {
    // README: a transaction idle for 60 s or open for 270 s is ended, as by the service.
    // Shortened here (the defaults are the service's): idle past 100 ms, open past 400 ms.
    use datastore_entity::backend::embedded::Embedded;
    use datastore_entity::backend::{Backend, TransactionMode};
    let engine: std::sync::Arc<dyn Backend> = std::sync::Arc::new(
        Embedded::in_memory()
            .transaction_timeouts(Duration::from_millis(100), Duration::from_millis(400)),
    );
    let db = Db::with_backend(engine.clone());
    db.put(&account("ann")).await.unwrap();
    let key = db.bind(&account_key("ann")).unwrap().into_raw();
    let mode = TransactionMode::ReadWrite { previous: None };
    // Idle: a read takes the lock, then nothing for 150 ms.
    let idle = engine
        .begin_transaction(db.partition(), &mode)
        .await
        .unwrap();
    engine
        .lookup(std::slice::from_ref(&key), Some(&idle))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(150)).await;
    // Another transaction reads the same entity at once: the lock is free.
    let other = engine
        .begin_transaction(db.partition(), &mode)
        .await
        .unwrap();
    tokio::time::timeout(
        Duration::from_millis(500),
        engine.lookup(std::slice::from_ref(&key), Some(&other)),
    )
    .await
    .expect("the idle transaction's lock was freed")
    .unwrap();
    engine.rollback(&other).await.unwrap();
    assert_eq!(
        engine.commit(Vec::new(), Some(&idle)).await,
        Err(Error::TransactionClosed)
    );
    // Old: used every 50 ms, but open for more than 400 ms.
    let old = engine
        .begin_transaction(db.partition(), &mode)
        .await
        .unwrap();
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let _ = engine.lookup(std::slice::from_ref(&key), Some(&old)).await;
    }
    let _ = engine
        .begin_transaction(db.partition(), &mode)
        .await
        .unwrap();
    assert_eq!(
        engine.commit(Vec::new(), Some(&old)).await,
        Err(Error::TransactionClosed)
    );
}

/// A read-only transaction at a past `read_time` ends with a commit of nothing — as Google's
/// Python client ends one — though what it read has changed since: it read one snapshot, and
/// does not abort. (Found by the Python client's system test `test_get_w_read_time` against the
/// server.)
#[tokio::test]
async fn a_read_only_transaction_commits_nothing_without_aborting() {
    use datastore_entity::Value;
    use datastore_entity::backend::embedded::Embedded;
    use datastore_entity::backend::{Backend, TransactionMode};

    let engine: std::sync::Arc<dyn Backend> = std::sync::Arc::new(Embedded::in_memory());
    let db = Db::with_backend(engine.clone());
    let mut ann = account("ann");
    let key = db.put(&ann).await.unwrap();
    let raw = db.bind(&key).unwrap().into_raw();
    tokio::time::sleep(Duration::from_millis(5)).await;
    let then = Timestamp::now();
    tokio::time::sleep(Duration::from_millis(5)).await;
    ann.balance = 10;
    db.put(&ann).await.unwrap();
    let partition = raw.partition().cloned().unwrap_or_default();
    let mode = TransactionMode::ReadOnly {
        read_time: Some(then),
    };
    let snapshot = engine.begin_transaction(&partition, &mode).await.unwrap();
    let old = engine
        .lookup(std::slice::from_ref(&raw), Some(&snapshot))
        .await
        .unwrap();
    let balance = old[0]
        .as_ref()
        .and_then(|p| p.get("balance"))
        .map(|p| p.value.clone());
    assert_eq!(
        balance,
        Some(Value::Integer(0)),
        "the entity as it was then"
    );
    let committed = engine.commit(Vec::new(), Some(&snapshot)).await;
    assert_eq!(committed.unwrap(), Vec::new(), "ends without aborting");
    assert_eq!(
        engine.commit(Vec::new(), Some(&snapshot)).await,
        Err(Error::TransactionClosed),
        "and is ended"
    );
}
