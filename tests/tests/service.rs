//! What Google Cloud does and Google's emulators never do, played by the tests' scripted
//! server (`tests/src/scripted.rs`) in front of each emulator: keys a lookup defers are looked
//! up again until none remain; a query whose batch is not finished goes on where it stopped,
//! through empty batches too; a lookup is split at Google's 1,000 keys; idempotent calls are
//! retried on `UNAVAILABLE` and a read's `DEADLINE_EXCEEDED`, each kind of call on its own; a
//! commit is never sent twice, except a commit of its own transaction refused as `ABORTED`
//! (which applied nothing); the plan Google Cloud sends for Query Explain is read.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use datastore_entity::prelude::*;
use datastore_entity::{Error, RetryPolicy};
use datastore_entity_tests::harness::{Backend, PROJECT, shared_emulator};
use datastore_entity_tests::scripted::Scripted;
use datastore_entity_tests::{Account, Post, account, account_key, draft};
use gcloud_sdk::google::datastore::v1 as pb;
use tonic::Code;

/// A `Db` on the emulator of `backend` through a scripted server, in namespace `name`, its
/// retries quick.
async fn scripted(backend: Backend, name: &str) -> Option<(Db, Scripted)> {
    let emulator = shared_emulator(backend)?;
    let server = Scripted::start(emulator.port).await;
    let db = Db::cloud_builder(PROJECT)
        .endpoint(server.endpoint())
        .timeout(Duration::from_secs(20))
        .retry(RetryPolicy {
            max_attempts: 5,
            initial_backoff: Duration::from_millis(1),
            max_backoff: Duration::from_millis(20),
        })
        .build()
        .await
        .unwrap()
        .namespace(name)
        .unwrap();
    Some((db, server))
}

/// Twelve accounts, `a00`…`a11`, of balances 0…11 (out of their names' order).
async fn twelve_accounts(db: &Db) -> Vec<Account> {
    let accounts: Vec<Account> = (0..12)
        .map(|i| Account {
            balance: (i * 7) % 12,
            ..account(&format!("a{i:02}"))
        })
        .collect();
    db.put_many(&accounts).await.unwrap();
    accounts
}

async fn deferred_keys_are_looked_up_again_until_none_remain(backend: Backend) {
    let Some((db, server)) = scripted(backend, "service-deferred").await else {
        return;
    };
    let accounts = twelve_accounts(&db).await;
    let mut keys: Vec<Key<Account>> = accounts.iter().map(|a| a.entity_key().unwrap()).collect();
    keys.insert(3, account_key("missing-1"));
    keys.push(account_key("missing-2"));
    let expected = db.get_many(&keys).await.unwrap();
    assert_eq!(expected.iter().flatten().count(), 12);

    // One key answered a round, the others deferred: 14 rounds, the same answer.
    server.set(|s| s.answered_per_lookup = Some(1));
    server.forget_calls();
    assert_eq!(db.get_many(&keys).await.unwrap(), expected);
    assert_eq!(server.calls("Lookup"), 14, "one lookup per key answered");

    // In a transaction, every round reads in it, and its commit still lands.
    server.set(|s| s.answered_per_lookup = Some(5));
    let read = db
        .transaction(|tx| {
            let keys = keys.clone();
            async move {
                let found = tx.get_many(&keys).await?;
                tx.put(&Account {
                    balance: 100,
                    ..account("after")
                })
                .await?;
                Ok::<_, Error>(found)
            }
        })
        .await
        .unwrap();
    assert_eq!(read, expected);
    assert_eq!(
        db.get(&account_key("after"))
            .await
            .unwrap()
            .unwrap()
            .balance,
        100
    );
}

#[tokio::test]
async fn firestore_deferred_keys_are_looked_up_again_until_none_remain() {
    deferred_keys_are_looked_up_again_until_none_remain(Backend::Firestore).await;
}

#[tokio::test]
async fn datastore_deferred_keys_are_looked_up_again_until_none_remain() {
    deferred_keys_are_looked_up_again_until_none_remain(Backend::Datastore).await;
}

#[tokio::test]
async fn a_lookup_is_split_at_googles_limit_of_1000_keys() {
    let Some((db, server)) = scripted(Backend::Firestore, "service-split").await else {
        return;
    };
    db.put(&account("k1999")).await.unwrap();
    let keys: Vec<Key<Account>> = (0..2_001).map(|i| account_key(&format!("k{i}"))).collect();
    server.forget_calls();
    let found = db.get_many(&keys).await.unwrap();
    assert_eq!(server.calls("Lookup"), 3, "1,000 + 1,000 + 1 keys");
    assert_eq!(found.iter().flatten().count(), 1);
    assert!(found[1_999].is_some());
}

async fn a_query_that_is_not_finished_goes_on_where_it_stopped(backend: Backend) {
    let Some((db, server)) = scripted(backend, "service-batches").await else {
        return;
    };
    twelve_accounts(&db).await;
    let parent = account_key("a00");
    let drafts: Vec<Post> = (0..6).map(|i| draft(&parent, &format!("t{i}"))).collect();
    db.put_many(&drafts).await.unwrap();
    // Every answer a query can give, read once as the emulator gives it...
    let answers = async || {
        let ordered = db
            .query::<Account>()
            .order(Account::BALANCE.desc())
            .fetch()
            .await?
            .items;
        let first = db
            .query::<Account>()
            .order(Account::BALANCE.asc())
            .limit(5)
            .fetch()
            .await?;
        let second = db
            .query::<Account>()
            .order(Account::BALANCE.asc())
            .limit(5)
            .start_after(first.next.clone())
            .fetch()
            .await?;
        let keys = db
            .query::<Account>()
            .filter(Account::BALANCE.ge(3))
            .keys_only()
            .fetch()
            .await?
            .items;
        let streamed: Vec<Account> = db.query::<Account>().stream().try_collect().await?;
        // The legacy emulator has no aggregations.
        let counted = match backend {
            Backend::Datastore => 0,
            _ => db.query::<Account>().count().await?,
        };
        // (The legacy emulator queries only an entity group in a transaction.)
        let in_transaction = db
            .read_only_transaction(|tx| {
                let parent = parent.clone();
                async move {
                    let posts = tx.query::<Post>().ancestor(&parent).limit(5).fetch();
                    Ok::<_, Error>(posts.await?.items)
                }
            })
            .await?;
        Ok::<_, Error>((
            ordered,
            first.items,
            second.items,
            second.next.is_some(),
            keys,
            streamed,
            counted,
            in_transaction,
        ))
    };
    let expected = answers().await.unwrap();
    assert_eq!(expected.0.len(), 12);
    assert_eq!(expected.4.len(), 9);
    assert_eq!(expected.7.len(), 5);

    // ...and again with the service stopping after every 2 results, or before any.
    for (per_batch, empty) in [(Some(2), false), (None, true), (Some(3), true)] {
        server.set(|s| {
            s.results_per_batch = per_batch;
            s.empty_batches = empty;
        });
        server.forget_calls();
        assert_eq!(
            answers().await.unwrap(),
            expected,
            "{per_batch:?} results a batch, empty batches: {empty}"
        );
        assert!(server.calls("RunQuery") > 8, "the queries went on");
    }
}

#[tokio::test]
async fn firestore_a_query_that_is_not_finished_goes_on_where_it_stopped() {
    a_query_that_is_not_finished_goes_on_where_it_stopped(Backend::Firestore).await;
}

#[tokio::test]
async fn datastore_a_query_that_is_not_finished_goes_on_where_it_stopped() {
    a_query_that_is_not_finished_goes_on_where_it_stopped(Backend::Datastore).await;
}

#[tokio::test]
async fn every_idempotent_call_is_retried_on_unavailable_and_a_reads_deadline() {
    let Some((db, server)) = scripted(Backend::Firestore, "service-retries").await else {
        return;
    };
    twelve_accounts(&db).await;
    let transient = [Code::Unavailable, Code::DeadlineExceeded];
    let rolled_back = Arc::new(AtomicUsize::new(0));
    let calls: [(&str, _); 7] = [
        ("Lookup", 0),
        ("RunQuery", 1),
        ("RunAggregationQuery", 2),
        ("BeginTransaction", 3),
        ("Rollback", 4),
        ("AllocateIds", 5),
        ("ReserveIds", 6),
    ];
    for (method, which) in calls {
        server.fail(method, &transient);
        server.forget_calls();
        let outcome: Result<(), Error> = match which {
            0 => db
                .get(&account_key("a01"))
                .await
                .map(|a| assert!(a.is_some())),
            1 => db
                .query::<Account>()
                .fetch()
                .await
                .map(|p| assert_eq!(p.items.len(), 12)),
            2 => db
                .query::<Account>()
                .count()
                .await
                .map(|n| assert_eq!(n, 12)),
            3 => {
                db.transaction(|tx| async move { tx.get(&account_key("a02")).await.map(drop) })
                    .await
            }
            4 => {
                let runs = rolled_back.clone();
                let refused = db
                    .transaction(|tx| {
                        let runs = runs.clone();
                        async move {
                            runs.fetch_add(1, Ordering::SeqCst);
                            tx.get(&account_key("a03")).await?;
                            Err::<(), _>(Error::InvalidCursor {
                                reason: "the body's own error".into(),
                            })
                        }
                    })
                    .await;
                assert!(matches!(refused, Err(Error::InvalidCursor { .. })));
                Ok(())
            }
            5 => db
                .allocate_ids::<Account>((), 3)
                .await
                .map(|keys| assert_eq!(keys.len(), 3)),
            _ => {
                let key = Post::key(&account_key("a04"), KeyId::new(77).unwrap());
                db.reserve_ids(&[key]).await
            }
        };
        outcome.unwrap_or_else(|e| panic!("{method} after {transient:?}: {e:?}"));
        assert_eq!(
            server.calls(method),
            3,
            "{method}: two failures, one success"
        );
    }
    assert_eq!(rolled_back.load(Ordering::SeqCst), 1, "the body ran once");

    // Past the policy's attempts the call fails, saying how many it made.
    server.fail("Lookup", &[Code::Unavailable; 5]);
    server.forget_calls();
    let refused = db.get(&account_key("a01")).await;
    assert!(
        matches!(&refused, Err(Error::Unavailable { reason }) if reason.contains("after 5 attempts")),
        "{refused:?}"
    );
    assert_eq!(server.calls("Lookup"), 5);
}

#[tokio::test]
async fn a_commit_is_never_sent_twice_unless_its_own_transaction_was_aborted() {
    let Some((db, server)) = scripted(Backend::Firestore, "service-commits").await else {
        return;
    };
    // A put (one mutation, not transactional) whose commit meets a transient status: it may
    // have been applied, so it is not sent again, and the error says so.
    for code in [Code::Unavailable, Code::DeadlineExceeded] {
        server.fail("Commit", &[code]);
        server.forget_calls();
        let refused = db.put(&account("once")).await;
        assert!(
            matches!(refused, Err(Error::CommitOutcomeUnknown { .. })),
            "{code:?}: {refused:?}"
        );
        assert_eq!(server.calls("Commit"), 1, "{code:?}: sent once");
        assert_eq!(db.get(&account_key("once")).await.unwrap(), None);
    }

    // Several mutations go in a transaction of their own: refused as ABORTED, it applied
    // nothing, and it is sent again.
    let pair = [account("p1"), account("p2")];
    server.fail("Commit", &[Code::Aborted]);
    server.forget_calls();
    db.put_many(&pair).await.unwrap();
    assert_eq!(server.calls("Commit"), 2);
    let keys: Vec<Key<Account>> = pair.iter().map(|a| a.entity_key().unwrap()).collect();
    assert_eq!(
        db.get_many(&keys).await.unwrap().iter().flatten().count(),
        2
    );

    // A transaction whose commit is refused as ABORTED runs its body again (R-A2).
    let runs = Arc::new(AtomicUsize::new(0));
    server.fail("Commit", &[Code::Aborted]);
    server.forget_calls();
    db.transaction(|tx| {
        let runs = runs.clone();
        async move {
            runs.fetch_add(1, Ordering::SeqCst);
            let mut a = tx.get(&account_key("p1")).await?.unwrap();
            a.balance += 1;
            tx.put(&a).await?;
            Ok::<_, Error>(())
        }
    })
    .await
    .unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    assert_eq!(server.calls("Commit"), 2);
    let p1 = db.get(&account_key("p1")).await.unwrap().unwrap();
    assert_eq!(p1.balance, 1, "applied once");
}

#[tokio::test]
async fn query_explain_reads_the_plan_google_cloud_sends() {
    let Some((db, server)) = scripted(Backend::Firestore, "service-explain").await else {
        return;
    };
    twelve_accounts(&db).await;
    let index = |properties: &str| gcloud_sdk::prost_types::Struct {
        fields: [
            ("query_scope", "Collection group"),
            ("properties", properties),
        ]
        .into_iter()
        .map(|(name, text)| {
            let value = gcloud_sdk::prost_types::Value {
                kind: Some(gcloud_sdk::prost_types::value::Kind::StringValue(
                    text.into(),
                )),
            };
            (name.to_owned(), value)
        })
        .collect(),
    };
    let stat = |n: f64| gcloud_sdk::prost_types::Value {
        kind: Some(gcloud_sdk::prost_types::value::Kind::NumberValue(n)),
    };
    server.set(|s| {
        s.explain_metrics = Some(pb::ExplainMetrics {
            plan_summary: Some(pb::PlanSummary {
                indexes_used: vec![index("(balance ASC, __name__ ASC)")],
            }),
            execution_stats: Some(pb::ExecutionStats {
                results_returned: 4,
                execution_duration: Some(gcloud_sdk::prost_types::Duration {
                    seconds: 0,
                    nanos: 3_000_000,
                }),
                read_operations: 5,
                debug_stats: Some(gcloud_sdk::prost_types::Struct {
                    fields: [
                        ("index_entries_scanned".to_owned(), stat(9.0)),
                        ("documents_scanned".to_owned(), stat(4.0)),
                    ]
                    .into_iter()
                    .collect(),
                }),
            }),
        })
    });
    let query = || {
        db.query::<Account>()
            .filter(Account::BALANCE.ge(8))
            .order(Account::BALANCE.asc())
    };
    let plan = query().explain().await.unwrap();
    assert_eq!(plan.plan, "the service's plan");
    assert_eq!(plan.indexes_used, ["Account (balance ASC, __name__ ASC)"]);
    assert!(plan.stats.is_none(), "a plan alone has no statistics");

    let (page, analyzed) = query().explain_analyze().await.unwrap();
    let balances: Vec<i64> = page.items.iter().map(|a| a.balance).collect();
    assert_eq!(balances, [8, 9, 10, 11]);
    let stats = analyzed.stats.unwrap();
    assert_eq!(stats.results_returned, 4);
    assert_eq!(stats.index_entries_scanned, 9);
    assert_eq!(stats.entities_scanned, 4);
    assert_eq!(stats.read_operations, Some(5));
    assert_eq!(stats.execution_duration, Some(Duration::from_millis(3)));
}
