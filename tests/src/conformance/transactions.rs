//! Transactions (R-A2): reads and writes, contention, rollback, isolation, phantoms, and
//! partitions.
//!
//! The Firestore emulator locks pessimistically (a write outside a transaction waits for the
//! locks the transaction holds), the legacy emulator is optimistic: no test here makes a
//! task wait for a write while it holds a transaction open itself. Every root key is named
//! after its test: the legacy emulator locks entity groups by key path across namespaces.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use datastore_entity::prelude::*;
use datastore_entity::{Error, QueryRule, RetryPolicy};
use tokio::sync::Notify;

use crate::harness::{Backend, Ctx};
use crate::{Account, Post, account, account_key, draft};

#[macro_export]
macro_rules! transactions_tests {
    ($backend:expr) => {
        $crate::conformance!($backend;
            tx_reads_writes_and_returns_its_value,
            tx_concurrent_increments_all_land,
            tx_an_error_of_the_closure_rolls_back,
            tx_reads_do_not_see_the_transactions_own_writes,
            tx_a_scanned_range_and_a_later_insert_into_it,
            tx_a_query_without_an_ancestor,
            tx_a_key_of_another_namespace_is_wrong_partition,
            tx_a_second_rollback,
            tx_the_closures_own_error_type_comes_back_unchanged,
            tx_read_only_reads_one_snapshot,
            tx_a_put_learns_its_key_before_commit,
            tx_read_only_at_a_past_read_time,
            tx_reads_one_snapshot_never_a_torn_view,
            tx_a_dropped_transaction_is_rolled_back_and_leaves_nothing_locked,
            tx_has_the_verbs_of_the_db,
        );
    };
}

/// How long a test waits for something that must happen.
const PATIENCE: Duration = Duration::from_secs(20);

pub async fn tx_reads_writes_and_returns_its_value(t: Ctx) {
    let mut ann = account("tx-rw-ann");
    ann.balance = 10;
    let key = t.db.put(&ann).await.unwrap();
    let returned =
        t.db.transaction(|tx| {
            let key = key.clone();
            async move {
                let mut a = tx.get(&key).await?.expect("written above");
                a.balance += 5;
                tx.put(&a).await?;
                tx.put(&account("tx-rw-bob")).await?;
                Ok::<_, Error>((a.balance, a.email))
            }
        })
        .await
        .unwrap();
    assert_eq!(returned, (15, "tx-rw-ann@example.com".to_owned()));
    assert_eq!(t.db.get(&key).await.unwrap().unwrap().balance, 15);
    assert_eq!(
        t.db.get(&account_key("tx-rw-bob")).await.unwrap(),
        Some(account("tx-rw-bob"))
    );
}

pub async fn tx_concurrent_increments_all_land(t: Ctx) {
    let key = t.db.put(&account("tx-inc")).await.unwrap();
    let db = t.db.clone().with_retry(RetryPolicy {
        max_attempts: 50,
        ..RetryPolicy::default()
    });
    let tasks: Vec<_> = (0..4)
        .map(|_| {
            let (db, key) = (db.clone(), key.clone());
            tokio::spawn(async move {
                for _ in 0..10 {
                    db.transaction(|tx| {
                        let key = key.clone();
                        async move {
                            let mut a = tx.get(&key).await?.expect("exists");
                            tokio::task::yield_now().await;
                            a.balance += 1;
                            tx.put(&a).await?;
                            Ok::<_, Error>(())
                        }
                    })
                    .await
                    .unwrap();
                }
            })
        })
        .collect();
    // On the Firestore emulator two transactions that read the entity deadlock when both
    // commit, until a lock times out after about 2 s and one of them aborts: this takes
    // about 30 s there (4 s on the legacy emulator, which aborts at once).
    for task in tasks {
        tokio::time::timeout(Duration::from_secs(240), task)
            .await
            .expect("the increments end")
            .unwrap();
    }
    assert_eq!(t.db.get(&key).await.unwrap().unwrap().balance, 40);
}

pub async fn tx_an_error_of_the_closure_rolls_back(t: Ctx) {
    let key = t.db.put(&account("tx-err")).await.unwrap();
    let mine = Error::InvalidQuery {
        kind: "Mine".into(),
        rule: QueryRule::ByService {
            message: "my own failure".into(),
        },
    };
    let attempts = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let error =
        t.db.transaction(|tx| {
            let (key, mine, attempts) = (key.clone(), mine.clone(), attempts.clone());
            async move {
                attempts.fetch_add(1, Ordering::SeqCst);
                let mut a = tx.get(&key).await?.expect("exists");
                a.balance = 1_000;
                tx.put(&a).await?;
                tx.put(&account("tx-err-other")).await?;
                Err::<(), _>(mine)
            }
        })
        .await
        .unwrap_err();
    assert_eq!(error, mine);
    assert_eq!(attempts.load(Ordering::SeqCst), 1, "not retried");
    assert_eq!(t.db.get(&key).await.unwrap().unwrap().balance, 0);
    assert_eq!(t.db.get(&account_key("tx-err-other")).await.unwrap(), None);
    // The rollback released what the transaction held: a write goes through at once.
    let mut changed = account("tx-err");
    changed.balance = 7;
    tokio::time::timeout(PATIENCE, t.db.put(&changed))
        .await
        .expect("nothing holds the entity any more")
        .unwrap();
    assert_eq!(t.db.get(&key).await.unwrap().unwrap().balance, 7);
}

pub async fn tx_reads_do_not_see_the_transactions_own_writes(t: Ctx) {
    let key = t.db.put(&account("tx-own")).await.unwrap();
    let parent = account_key("tx-own");
    let seen =
        t.db.transaction(|tx| {
            let (key, parent) = (key.clone(), parent.clone());
            async move {
                let mut a = tx.get(&key).await?.expect("exists");
                a.balance = 99;
                tx.put(&a).await?;
                tx.put(&account("tx-own-new")).await?;
                tx.put(&Post {
                    account: parent.clone(),
                    id: Some(KeyId::new(1).unwrap()),
                    title: "buffered".into(),
                    author: "tx-own".into(),
                    published: Timestamp::from_micros(1),
                    tags: vec![],
                    body: String::new(),
                    location: None,
                })
                .await?;
                let again = tx.get(&key).await?.expect("exists");
                let new = tx.get(&account_key("tx-own-new")).await?;
                let posts = tx.query::<Post>().ancestor(&parent).fetch().await?.items;
                Ok::<_, Error>((again.balance, new.is_some(), posts.len()))
            }
        })
        .await
        .unwrap();
    assert_eq!(seen, (0, false, 0));
    // Committed, everything is there.
    assert_eq!(t.db.get(&key).await.unwrap().unwrap().balance, 99);
    assert!(
        t.db.get(&account_key("tx-own-new"))
            .await
            .unwrap()
            .is_some()
    );
    let posts =
        t.db.query::<Post>()
            .ancestor(&parent)
            .fetch()
            .await
            .unwrap();
    assert_eq!(posts.items.len(), 1);
}

fn post(parent: &Key<Account>, id: i64, published: i64) -> Post {
    Post {
        account: parent.clone(),
        id: Some(KeyId::new(id).unwrap()),
        title: format!("post {id}"),
        author: "tx".into(),
        published: Timestamp::from_micros(published),
        tags: vec![],
        body: String::new(),
        location: None,
    }
}

/// What happened in a phantom test: the transaction's result, whether the other writer's
/// insert had finished when the transaction went on to commit, and the insert's result.
#[derive(Debug)]
struct Phantom {
    transaction: Result<usize, Error>,
    insert_done_before_commit: bool,
    insert: Result<(), Error>,
}

impl Phantom {
    /// Optimistic: the insert went through at once, and the transaction was aborted at
    /// commit, writing nothing (`balance` stays 0).
    fn aborted_after_the_insert(&self, balance: i64) {
        assert!(self.insert_done_before_commit, "{self:?}");
        assert!(
            matches!(self.transaction, Err(Error::Aborted { .. })),
            "{self:?}"
        );
        assert_eq!(balance, 0);
    }

    /// Pessimistic: the insert waited for the transaction, which committed its count of 1.
    fn committed_before_the_insert(&self, balance: i64) {
        assert!(!self.insert_done_before_commit, "{self:?}");
        assert_eq!(self.transaction, Ok(1));
        assert_eq!(balance, 1);
    }
}

/// A transaction counts the posts published after 15 (under `parent` if `ancestor`), then,
/// while it is still open, another task inserts a post published at 30; the transaction
/// waits (at most 3 s) for that insert, then writes the count and commits.
async fn phantom(t: &Ctx, parent: Key<Account>, ancestor: bool) -> Phantom {
    let db = t.db.clone().with_retry(RetryPolicy {
        max_attempts: 1,
        ..RetryPolicy::default()
    });
    let scanned = Arc::new(Notify::new());
    let inserted = Arc::new(Notify::new());
    let writer = {
        let (db, parent, scanned, inserted) = (
            t.db.clone(),
            parent.clone(),
            scanned.clone(),
            inserted.clone(),
        );
        tokio::spawn(async move {
            scanned.notified().await;
            let result = tokio::time::timeout(PATIENCE, db.put(&post(&parent, 3, 30)))
                .await
                .expect("the insert ends")
                .map(drop);
            inserted.notify_one();
            result
        })
    };
    let transaction = {
        let parent = parent.clone();
        tokio::spawn(async move {
            let done_before_commit = Arc::new(AtomicBool::new(false));
            let result = db
                .transaction(|tx| {
                    let (parent, scanned, inserted, done_before_commit) = (
                        parent.clone(),
                        scanned.clone(),
                        inserted.clone(),
                        done_before_commit.clone(),
                    );
                    async move {
                        let query = tx
                            .query::<Post>()
                            .filter(Post::PUBLISHED.gt(Timestamp::from_micros(15)));
                        let query = if ancestor {
                            query.ancestor(&parent)
                        } else {
                            query
                        };
                        let scan = query.fetch().await;
                        // Let the writer go even when the scan failed.
                        scanned.notify_one();
                        let count = scan?.items.len();
                        // A backend that holds the insert back makes this wait time out.
                        let finished =
                            tokio::time::timeout(Duration::from_secs(3), inserted.notified())
                                .await
                                .is_ok();
                        done_before_commit.store(finished, Ordering::SeqCst);
                        let mut owner = account(parent.name().unwrap());
                        owner.balance = count as i64;
                        tx.put(&owner).await?;
                        Ok(count)
                    }
                })
                .await;
            (result, done_before_commit.load(Ordering::SeqCst))
        })
    };
    let (transaction, insert_done_before_commit) = tokio::time::timeout(PATIENCE * 2, transaction)
        .await
        .expect("the transaction ends")
        .unwrap();
    let insert = tokio::time::timeout(PATIENCE * 2, writer)
        .await
        .expect("the insert ends")
        .unwrap();
    Phantom {
        transaction,
        insert_done_before_commit,
        insert,
    }
}

pub async fn tx_a_scanned_range_and_a_later_insert_into_it(t: Ctx) {
    let parent = t.db.put(&account("tx-phantom")).await.unwrap();
    t.db.put_many(&[post(&parent, 1, 10), post(&parent, 2, 20)])
        .await
        .unwrap();
    let outcome = phantom(&t, parent.clone(), true).await;
    let balance = t.db.get(&parent).await.unwrap().unwrap().balance;
    let posts =
        t.db.query::<Post>()
            .ancestor(&parent)
            .fetch()
            .await
            .unwrap();
    // The insert is written in the end, everywhere.
    assert_eq!(posts.items.len(), 3);
    assert!(outcome.insert.is_ok(), "{outcome:?}");
    match t.backend {
        // Optimistic concurrency (the legacy emulator, and the embedded engine, which re-runs
        // a transaction's queries at commit): the insert goes through at once, and the
        // transaction is aborted at commit, since what it scanned changed.
        Backend::Datastore | Backend::Embedded | Backend::File | Backend::Server => {
            outcome.aborted_after_the_insert(balance)
        }
        // Pessimistic locking (Firestore in Datastore mode): the insert is held back until the
        // transaction has committed, so the count it wrote was true when it committed.
        Backend::Firestore => outcome.committed_before_the_insert(balance),
    }
}

pub async fn tx_a_query_without_an_ancestor(t: Ctx) {
    let parent = t.db.put(&account("tx-global")).await.unwrap();
    t.db.put_many(&[post(&parent, 1, 10), post(&parent, 2, 20)])
        .await
        .unwrap();
    let outcome = phantom(&t, parent.clone(), false).await;
    let balance = t.db.get(&parent).await.unwrap().unwrap().balance;
    assert!(outcome.insert.is_ok(), "{outcome:?}");
    match t.backend {
        // The legacy emulator refuses queries without an ancestor in transactions.
        Backend::Datastore => {
            assert!(
                matches!(
                    &outcome.transaction,
                    Err(Error::InvalidQuery { rule: QueryRule::ByService { message }, .. })
                        if message == "Only ancestor queries are allowed inside transactions."
                ),
                "{outcome:?}"
            );
            assert_eq!(balance, 0);
        }
        // Firestore in Datastore mode runs them, and locks the scanned range as for an
        // ancestor query.
        Backend::Firestore => outcome.committed_before_the_insert(balance),
        // The embedded engine runs them too, optimistically: aborted at commit.
        Backend::Embedded | Backend::File | Backend::Server => {
            outcome.aborted_after_the_insert(balance)
        }
    }
}

pub async fn tx_a_key_of_another_namespace_is_wrong_partition(t: Ctx) {
    let other =
        t.db.namespace(&format!("{}.other", t.db.partition().namespace))
            .unwrap();
    let foreign = other.put(&account("tx-foreign")).await.unwrap();
    let read =
        t.db.transaction(|tx| {
            let foreign = foreign.clone();
            async move {
                tx.put(&account("tx-local")).await?;
                tx.get(&foreign).await
            }
        })
        .await;
    assert!(
        matches!(read, Err(Error::WrongPartition { .. })),
        "{read:?}"
    );
    let delete =
        t.db.transaction(|tx| {
            let foreign = foreign.clone();
            async move {
                tx.put(&account("tx-local")).await?;
                let refused = tx.delete(&foreign).await;
                assert!(
                    matches!(refused, Err(Error::WrongPartition { .. })),
                    "{refused:?}"
                );
                // Even when the body goes on, the refused delete fails the commit.
                Ok(())
            }
        })
        .await;
    assert!(
        matches!(delete, Err(Error::WrongPartition { .. })),
        "{delete:?}"
    );
    // Nothing was written, here or there.
    assert_eq!(t.db.get(&account_key("tx-local")).await.unwrap(), None);
    assert_eq!(
        other.get(&foreign).await.unwrap(),
        Some(account("tx-foreign"))
    );
}

pub async fn tx_a_second_rollback(t: Ctx) {
    // `Db::transaction` never rolls back twice; the backends' own answers, through the trait.
    use datastore_entity::backend::TransactionMode;
    let backend = t.db.backend();
    let mode = TransactionMode::ReadWrite { previous: None };
    let id = backend
        .begin_transaction(t.db.partition(), &mode)
        .await
        .unwrap();
    backend.rollback(&id).await.unwrap();
    let again = backend.rollback(&id).await;
    match t.backend {
        // The legacy emulator refuses it: "transaction has expired or is invalid".
        Backend::Datastore => assert!(matches!(again, Err(Error::TransactionClosed)), "{again:?}"),
        // Firestore in Datastore mode accepts it.
        _ => assert_eq!(again, Ok(())),
    }
    // Either way the transaction is over: a commit with it writes nothing.
    let commit = backend.commit(Vec::new(), Some(&id)).await;
    assert!(commit.is_err(), "{:?}: {commit:?}", t.backend);
}

/// An application's error: its own refusals, and the store's errors through `?`.
#[derive(Debug, PartialEq)]
enum TransferError {
    Insufficient { balance: i64 },
    Store(Error),
}

impl From<Error> for TransferError {
    fn from(e: Error) -> Self {
        TransferError::Store(e)
    }
}

pub async fn tx_the_closures_own_error_type_comes_back_unchanged(t: Ctx) {
    let mut ann = account("tx-own-ann");
    ann.balance = 5;
    let key = t.db.put(&ann).await.unwrap();
    let attempts = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let withdraw = |amount: i64| {
        let (key, attempts) = (key.clone(), attempts.clone());
        t.db.transaction(move |tx| {
            let (key, attempts) = (key.clone(), attempts.clone());
            async move {
                attempts.fetch_add(1, Ordering::SeqCst);
                let mut a = tx.get(&key).await?.expect("exists");
                if a.balance < amount {
                    tx.put(&account("tx-own-never")).await?;
                    return Err(TransferError::Insufficient { balance: a.balance });
                }
                a.balance -= amount;
                tx.put(&a).await?;
                Ok(a.balance)
            }
        })
    };
    // Its own refusal: returned as it was, not retried, nothing written.
    assert_eq!(
        withdraw(10).await,
        Err(TransferError::Insufficient { balance: 5 })
    );
    assert_eq!(attempts.load(Ordering::SeqCst), 1, "not retried");
    assert_eq!(t.db.get(&account_key("tx-own-never")).await.unwrap(), None);
    assert_eq!(t.db.get(&key).await.unwrap().unwrap().balance, 5);
    // Success, through the same closure type.
    assert_eq!(withdraw(3).await, Ok(2));
    // The store's errors reach it through `From`.
    let foreign = t.db.bind(&key).unwrap();
    let other =
        t.db.namespace(&format!("{}.own", t.db.partition().namespace))
            .unwrap();
    let refused = other
        .transaction(async |tx| {
            tx.get(&foreign).await?;
            Ok::<_, TransferError>(())
        })
        .await;
    assert!(
        matches!(
            refused,
            Err(TransferError::Store(Error::WrongPartition { .. }))
        ),
        "{refused:?}"
    );
}

pub async fn tx_read_only_reads_one_snapshot(t: Ctx) {
    let (mut ann, mut bob) = (account("tx-ro-ann"), account("tx-ro-bob"));
    (ann.balance, bob.balance) = (5, 7);
    let keys = t.db.put_many(&[ann, bob]).await.unwrap();
    let attempts = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let total =
        t.db.read_only_transaction(|tx| {
            let (db, keys, attempts) = (t.db.clone(), keys.clone(), attempts.clone());
            async move {
                let ann = tx.get(&keys[0]).await?.expect("exists");
                if attempts.fetch_add(1, Ordering::SeqCst) == 0 {
                    // A transfer of 3 from ann to bob lands between the two reads.
                    let (mut a, mut b) = (ann.clone(), db.get(&keys[1]).await?.expect("exists"));
                    (a.balance, b.balance) = (a.balance - 3, b.balance + 3);
                    tokio::time::timeout(PATIENCE, db.put_many(&[a, b]))
                        .await
                        .expect("a read-only transaction holds no lock")?;
                }
                let bob = tx.get(&keys[1]).await?.expect("exists");
                Ok::<_, Error>(ann.balance + bob.balance)
            }
        })
        .await
        .unwrap();
    // Both balances as of one moment: before the transfer (a snapshot taken at the start)
    // or after it (the attempt that straddled the transfer ran again).
    assert_eq!(total, 12, "{:?}", t.backend);
    // Firestore and the engine read from a snapshot: one attempt. The legacy emulator is
    // optimistic: the attempt that straddled the transfer failed and ran again.
    let expected_attempts = match t.backend {
        Backend::Firestore | Backend::Embedded | Backend::File | Backend::Server => 1,
        Backend::Datastore => 2,
    };
    assert_eq!(attempts.load(Ordering::SeqCst), expected_attempts);
    let balances: Vec<i64> =
        t.db.get_many(&keys)
            .await
            .unwrap()
            .into_iter()
            .map(|a| a.expect("exists").balance)
            .collect();
    assert_eq!(balances, [2, 10]);
}

pub async fn tx_a_put_learns_its_key_before_commit(t: Ctx) {
    let parent = t.db.put(&account("tx-key-early")).await.unwrap();
    let post = |title: &str| draft(&parent, title);
    let (first, second, seen_inside) =
        t.db.transaction(|tx| {
            let (first, second) = (post("first"), post("second"));
            async move {
                let a = tx.put(&first).await?;
                let b = tx.put(&second).await?;
                // The keys are complete before commit; the writes are not visible yet.
                let seen = tx.get(&a).await?;
                Ok::<_, Error>((a, b, seen))
            }
        })
        .await
        .unwrap();
    assert!(
        first.is_complete() && second.is_complete(),
        "{first:?} {second:?}"
    );
    assert_ne!(first, second);
    assert_eq!(first.parent(), Some(parent.raw().clone()));
    assert_eq!(seen_inside, None);
    let stored = t.db.get_many(&[first, second]).await.unwrap();
    let titles: Vec<_> = stored
        .into_iter()
        .map(|p| p.expect("committed").title)
        .collect();
    assert_eq!(titles, ["first", "second"]);
    // A body that fails after learning its key writes nothing.
    let learned = Arc::new(std::sync::Mutex::new(None));
    let failed: Result<(), Error> =
        t.db.transaction(|tx| {
            let (learned, failing) = (learned.clone(), post("never"));
            async move {
                let key = tx.put(&failing).await?;
                *learned.lock().unwrap() = Some(key);
                Err(Error::TransactionClosed)
            }
        })
        .await;
    assert_eq!(failed, Err(Error::TransactionClosed));
    let learned = learned.lock().unwrap().clone().expect("the put ran");
    assert_eq!(t.db.get(&learned).await.unwrap(), None);
}

pub async fn tx_read_only_at_a_past_read_time(t: Ctx) {
    let mut ann = account("tx-read-time");
    ann.balance = 5;
    let key = t.db.put(&ann).await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let then = Timestamp::now();
    tokio::time::sleep(Duration::from_millis(50)).await;
    ann.balance = 9;
    t.db.put(&ann).await.unwrap();
    let read =
        t.db.read_only_transaction_at(then, |tx| {
            let key = key.clone();
            async move {
                let balance = tx.get(&key).await?.expect("written before").balance;
                let queried = tx.query::<Account>().ancestor(&key).fetch().await?.items;
                Ok::<_, Error>((balance, queried[0].balance))
            }
        })
        .await;
    match t.backend {
        Backend::Firestore | Backend::Embedded | Backend::File | Backend::Server => {
            assert_eq!(read, Ok((5, 5)))
        }
        // The legacy emulator accepts a read time and ignores it: it reads the current data.
        // Production (Firestore in Datastore mode) and its emulator honour it.
        Backend::Datastore => assert_eq!(read, Ok((9, 9))),
    }
    assert_eq!(t.db.get(&key).await.unwrap().unwrap().balance, 9);
}

pub async fn tx_reads_one_snapshot_never_a_torn_view(t: Ctx) {
    let (mut a, mut b) = (account("tx-torn-a"), account("tx-torn-b"));
    (a.balance, b.balance) = (100, 100);
    let keys = t.db.put_many(&[a, b]).await.unwrap();
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let transfer = Arc::new(std::sync::Mutex::new(None));
    t.db.transaction(|tx| {
        let (db, keys, seen, transfer) =
            (t.db.clone(), keys.clone(), seen.clone(), transfer.clone());
        async move {
            let a = tx.get(&keys[0]).await?.expect("exists");
            if transfer.lock().unwrap().is_none() {
                // Another transaction moves 10 from a to b between this body's two reads. It
                // commits at once where nothing holds it back, or waits for this transaction
                // to end where reads take locks (Firestore): either way, not awaited here.
                let keys = keys.clone();
                let mut moving = tokio::spawn(async move {
                    db.transaction(|tx| {
                        let keys = keys.clone();
                        async move {
                            let mut found = tx.get_many(&keys).await?.into_iter().flatten();
                            let (Some(mut a), Some(mut b)) = (found.next(), found.next()) else {
                                return Ok(());
                            };
                            (a.balance, b.balance) = (a.balance - 10, b.balance + 10);
                            tx.put(&a).await?;
                            tx.put(&b).await?;
                            Ok::<_, Error>(())
                        }
                    })
                    .await
                });
                let done = tokio::time::timeout(Duration::from_millis(300), &mut moving).await;
                *transfer.lock().unwrap() = Some((moving, done.ok()));
            }
            let b = tx.get(&keys[1]).await?.expect("exists");
            seen.lock().unwrap().push(a.balance + b.balance);
            Ok::<_, Error>(())
        }
    })
    .await
    .unwrap();
    let (moving, done) = transfer.lock().unwrap().take().expect("spawned");
    let done = match done {
        Some(done) => done,
        None => tokio::time::timeout(PATIENCE, moving)
            .await
            .expect("the transfer ends"),
    };
    done.unwrap().unwrap();
    let seen = seen.lock().unwrap().clone();
    assert!(
        seen.iter().all(|total| *total == 200),
        "{:?}: {seen:?}",
        t.backend
    );
    let balances: Vec<i64> =
        t.db.get_many(&keys)
            .await
            .unwrap()
            .into_iter()
            .map(|a| a.expect("exists").balance)
            .collect();
    assert_eq!(balances, [90, 110]);
}

pub async fn tx_a_dropped_transaction_is_rolled_back_and_leaves_nothing_locked(t: Ctx) {
    let key = t.db.put(&account("tx-dropped")).await.unwrap();
    // A body that read the entity (Firestore and the engine lock it) and then stalls, under a
    // timeout that drops the transaction's future.
    let dropped = tokio::time::timeout(
        Duration::from_millis(500),
        t.db.transaction(|tx| {
            let key = key.clone();
            async move {
                let a = tx.get(&key).await?.expect("exists");
                tokio::time::sleep(Duration::from_secs(3600)).await;
                tx.put(&a).await?;
                Ok::<_, Error>(())
            }
        }),
    )
    .await;
    assert!(dropped.is_err(), "the timeout fired");
    // At once (not after the service's 60 s): a transaction reads and writes the entity, and
    // a plain write (which on Firestore waits for the locks of open transactions) lands.
    let soon = Duration::from_secs(10);
    tokio::time::timeout(
        soon,
        t.db.transaction(|tx| {
            let key = key.clone();
            async move {
                let mut a = tx.get(&key).await?.expect("exists");
                a.balance += 1;
                tx.put(&a).await?;
                Ok::<_, Error>(())
            }
        }),
    )
    .await
    .expect("nothing left locked")
    .unwrap();
    let mut a = t.db.get(&key).await.unwrap().expect("exists");
    a.balance += 1;
    tokio::time::timeout(soon, t.db.put(&a))
        .await
        .expect("nothing left locked")
        .unwrap();
    assert_eq!(t.db.get(&key).await.unwrap().unwrap().balance, 2);
}

/// `Tx` writes with the `Db`'s verbs and signatures: `insert`, `update`, `put_many`, `delete`,
/// `delete_many`; what the service refuses at commit (a taken key, a missing entity, the same
/// key twice) fails the whole transaction and writes nothing.
pub async fn tx_has_the_verbs_of_the_db(t: Ctx) {
    let names = ["tx-verbs-ann", "tx-verbs-bob"];
    let keys: Vec<_> = names.iter().map(|n| account_key(n)).collect();
    // put_many, then update and delete_many in another transaction.
    let written =
        t.db.transaction(|tx| async move {
            tx.put_many(&[account("tx-verbs-ann"), account("tx-verbs-bob")])
                .await
        })
        .await
        .unwrap();
    let written: Vec<_> = written.iter().map(|k| k.name()).collect();
    assert_eq!(written, names.map(Some));
    t.db.transaction(|tx| async move {
        let mut ann = account("tx-verbs-ann");
        ann.balance = 7;
        tx.update(&ann).await?;
        tx.insert(&account("tx-verbs-cat")).await?;
        tx.delete(&account_key("tx-verbs-bob")).await
    })
    .await
    .unwrap();
    let found = t.db.get_many(&keys).await.unwrap();
    assert_eq!(found[0].as_ref().map(|a| a.balance), Some(7));
    assert_eq!(found[1], None);
    assert!(
        t.db.get(&account_key("tx-verbs-cat"))
            .await
            .unwrap()
            .is_some()
    );

    // An insert of a taken key: the commit is refused, the transaction's other write too.
    let taken =
        t.db.transaction(|tx| async move {
            tx.put(&account("tx-verbs-dan")).await?;
            tx.insert(&account("tx-verbs-ann")).await
        })
        .await;
    assert!(
        matches!(taken, Err(Error::AlreadyExists { .. })),
        "{taken:?}"
    );
    // An update of a missing entity, likewise.
    let missing =
        t.db.transaction(|tx| async move {
            tx.put(&account("tx-verbs-dan")).await?;
            tx.update(&account("tx-verbs-bob")).await
        })
        .await;
    assert!(
        matches!(missing, Err(Error::NotFound { .. })),
        "{missing:?}"
    );
    assert_eq!(t.db.get(&account_key("tx-verbs-dan")).await.unwrap(), None);
    // The same key twice (R-A4), in put_many and in delete_many: nothing written, nothing
    // deleted.
    let twice =
        t.db.transaction(|tx| async move {
            tx.put_many(&[account("tx-verbs-eve"), account("tx-verbs-eve")])
                .await
        })
        .await;
    assert!(
        matches!(twice, Err(Error::DuplicateKey { .. })),
        "{twice:?}"
    );
    let twice =
        t.db.transaction(|tx| async move {
            let ann = account_key("tx-verbs-ann");
            tx.delete_many(&[ann.clone(), ann]).await
        })
        .await;
    assert!(
        matches!(twice, Err(Error::DuplicateKey { .. })),
        "{twice:?}"
    );
    assert_eq!(t.db.get(&account_key("tx-verbs-eve")).await.unwrap(), None);
    assert!(t.db.get(&keys[0]).await.unwrap().is_some());
    t.db.delete_many(&[keys[0].clone(), account_key("tx-verbs-cat")])
        .await
        .unwrap();
}
