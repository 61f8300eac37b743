//! The typed `Db` API on the embedded engine: reads, writes, atomic commits, ids,
//! namespaces. Each runtime rule's test names its rule id.

use datastore_entity::prelude::*;
use datastore_entity::{Error, MAX_COMMIT_BYTES};
use datastore_entity_tests::{Account, Address, Call, Instrumented, Post, account, account_key};

fn post(account: &Key<Account>, title: &str, author: &str, micros: i64) -> Post {
    Post {
        account: account.clone(),
        id: None,
        title: title.into(),
        author: author.into(),
        published: Timestamp::from_micros(micros),
        tags: vec!["rust".into()],
        body: "…".into(),
        location: Some(Address {
            city: "Paris".into(),
        }),
    }
}

#[tokio::test]
async fn put_then_get_returns_the_same_entity_with_key_fields_filled() {
    let db = Db::in_memory();
    let ann = account("ann");
    let key = db.put(&ann).await.unwrap();
    assert_eq!(key, db.bind(&account_key("ann")).unwrap());
    assert_eq!(key.namespace(), "");
    assert_eq!(db.get(&key).await.unwrap(), Some(ann));
    assert_eq!(db.get(&account_key("bob")).await.unwrap(), None);

    // R-K1: an incomplete key gets an id; loading fills #[key] and #[parent].
    let post_key = db.put(&post(&key, "Hello", "ann", 1)).await.unwrap();
    let loaded = db.get(&post_key).await.unwrap().unwrap();
    assert_eq!(loaded.id, post_key.id());
    assert_eq!(loaded.account, key);
    assert_eq!(
        loaded.location,
        Some(Address {
            city: "Paris".into()
        })
    );
}

#[tokio::test]
async fn batch_calls_are_one_backend_call_each() {
    // R-A1
    let (backend, db) = Instrumented::db();
    let accounts: Vec<Account> = (0..50).map(|i| account(&format!("user{i}"))).collect();
    let keys = db.put_many(&accounts).await.unwrap();
    assert_eq!(backend.calls(), [Call::Commit]);
    assert_eq!(keys.len(), 50);
    assert_eq!(keys[7].name(), Some("user7"));

    let mut wanted = keys.clone();
    wanted.insert(3, account_key("nobody"));
    wanted.reverse();
    let found = db.get_many(&wanted).await.unwrap();
    assert_eq!(backend.calls(), [Call::Commit, Call::Lookup]);
    // One slot per key, in the order of the keys.
    assert_eq!(found.len(), 51);
    for (key, slot) in wanted.iter().zip(&found) {
        match slot {
            Some(account) => assert_eq!(account.name.as_str(), key.name().unwrap()),
            None => assert_eq!(key.name(), Some("nobody")),
        }
    }

    db.delete_many(&keys[..10]).await.unwrap();
    assert_eq!(backend.count(Call::Commit), 2);
    let after = db.get_many(&keys[..12]).await.unwrap();
    assert_eq!(after.iter().filter(|a| a.is_some()).count(), 2);
}

#[tokio::test]
async fn a_duplicate_key_fails_the_commit_before_anything_is_sent() {
    // R-A4
    let (backend, db) = Instrumented::db();
    let error = db
        .put_many(&[account("ann"), account("bob"), account("ann")])
        .await
        .unwrap_err();
    assert!(
        matches!(&error, Error::DuplicateKey { key } if key.contains("ann")),
        "{error}"
    );
    assert_eq!(backend.count(Call::Commit), 0, "nothing was sent");
    assert_eq!(db.get(&account_key("bob")).await.unwrap(), None);

    let ann = account_key("ann");
    let error = db.delete_many(&[ann.clone(), ann]).await.unwrap_err();
    assert!(matches!(error, Error::DuplicateKey { .. }));
    assert_eq!(backend.count(Call::Commit), 0);
}

#[tokio::test]
async fn the_engine_itself_refuses_duplicate_keys_in_one_commit() {
    // R-A4, at the backend level: a caller of the raw trait gets the same guarantee.
    use datastore_entity::backend::{Backend, Mask, Mutation, embedded::Embedded};
    let engine = Embedded::new();
    let engine: &dyn Backend = &engine;
    let key = account_key("ann").into_raw();
    let props = account("ann").to_properties().unwrap();
    let error = engine
        .commit(
            vec![
                Mutation::Upsert(key.clone(), props.clone(), Mask::Whole),
                Mutation::Delete(key.clone()),
            ],
            None,
        )
        .await
        .unwrap_err();
    assert!(matches!(error, Error::DuplicateKey { .. }));
    assert_eq!(engine.lookup(&[key], None).await.unwrap(), vec![None]);
}

#[tokio::test]
async fn an_indexed_string_over_1500_bytes_fails_the_whole_commit() {
    // R-I4
    let db = Db::in_memory();
    let mut long = account("long");
    long.email = "x".repeat(1501);
    let error = db
        .put_many(&[account("ok"), long.clone()])
        .await
        .unwrap_err();
    assert_eq!(
        error,
        Error::IndexedValueTooLarge {
            kind: "Account".into(),
            property: "email".into(),
            len: 1501,
            max: 1500,
        }
    );
    assert!(error.to_string().contains("R-I4"));
    // The failed commit left the store unchanged.
    assert_eq!(db.query::<Account>().fetch().await.unwrap().items, vec![]);

    // Exactly 1,500 bytes is fine; an excluded property may be longer.
    long.email = "é".repeat(750);
    long.bio = "x".repeat(100_000);
    db.put(&long).await.unwrap();
    assert_eq!(db.get(&account_key("long")).await.unwrap(), Some(long));
}

#[tokio::test]
async fn an_indexed_string_inside_an_embedded_entity_is_checked_too() {
    // R-I4, R-P2: the error names the dotted path.
    let db = Db::in_memory();
    let ann = db.put(&account("ann")).await.unwrap();
    let mut p = post(&ann, "t", "ann", 1);
    p.location = Some(Address {
        city: "c".repeat(2000),
    });
    let error = db.put(&p).await.unwrap_err();
    assert!(
        matches!(&error, Error::IndexedValueTooLarge { property, .. } if property == "location.city"),
        "{error:?}"
    );
    assert!(db.query::<Post>().fetch().await.unwrap().items.is_empty());
}

#[tokio::test]
async fn insert_and_update_check_existence() {
    let db = Db::in_memory();
    db.insert(&account("ann")).await.unwrap();
    let error = db.insert(&account("ann")).await.unwrap_err();
    assert!(matches!(error, Error::AlreadyExists { .. }));
    let error = db.update(&account("bob")).await.unwrap_err();
    assert!(matches!(error, Error::NotFound { .. }));
    assert_eq!(db.get(&account_key("bob")).await.unwrap(), None);
    let mut ann = account("ann");
    ann.balance = 5;
    db.update(&ann).await.unwrap();
    assert_eq!(db.get(&account_key("ann")).await.unwrap(), Some(ann));
}

#[tokio::test]
async fn allocated_ids_are_scattered() {
    // R-K1: no two consecutive allocations are numerically adjacent, and the high bits vary.
    let db = Db::in_memory();
    let ann = db.put(&account("ann")).await.unwrap();
    let keys = db.allocate_ids::<Post>(&ann, 200).await.unwrap();
    let ids: Vec<i64> = keys.iter().map(|k| k.id().unwrap().get()).collect();
    assert!(keys.iter().all(|k| k.parent().as_ref() == Some(ann.raw())));
    for pair in ids.windows(2) {
        assert!((pair[0] - pair[1]).abs() > 1, "adjacent ids {pair:?}");
    }
    let distinct: std::collections::HashSet<i64> = ids.iter().copied().collect();
    assert_eq!(distinct.len(), ids.len());
    let high_bytes: std::collections::HashSet<i64> = ids.iter().map(|id| id >> 44).collect();
    assert!(
        high_bytes.len() > 50,
        "high bits barely vary: {high_bytes:?}"
    );
    // Ids from put with an incomplete key are scattered as well.
    let a = db
        .put(&post(&ann, "a", "ann", 1))
        .await
        .unwrap()
        .id()
        .unwrap()
        .get();
    let b = db
        .put(&post(&ann, "b", "ann", 2))
        .await
        .unwrap()
        .id()
        .unwrap()
        .get();
    assert!((a - b).abs() > 1);
}

#[tokio::test]
async fn reserved_ids_are_never_allocated() {
    // R-K3: the allocator is deterministic, so a twin engine shows which ids come next.
    let twin = Db::in_memory();
    let upcoming = twin.allocate_ids::<Account>((), 20).await.unwrap();
    let db = Db::in_memory();
    db.reserve_ids(&upcoming).await.unwrap();
    let allocated = db.allocate_ids::<Account>((), 20).await.unwrap();
    assert!(allocated.iter().all(|k| !upcoming.contains(k)));
    // An id written without being reserved may be handed out later, as the service does:
    // that is why R-K3 says to reserve ids you choose.
    let explicit: Vec<_> = twin.allocate_ids::<Account>((), 5).await.unwrap();
    let fresh = Db::in_memory();
    for key in &explicit {
        fresh
            .put(&Post {
                account: account_key("x"),
                id: key.id(),
                title: String::new(),
                author: String::new(),
                published: Timestamp::from_micros(0),
                tags: vec![],
                body: String::new(),
                location: None,
            })
            .await
            .unwrap();
    }
    let written_ids: Vec<i64> = explicit.iter().map(|k| k.id().unwrap().get()).collect();
    fresh.reserve_ids(&upcoming).await.unwrap();
    let later: Vec<i64> = fresh
        .allocate_ids::<Account>((), 50)
        .await
        .unwrap()
        .iter()
        .map(|k| k.id().unwrap().get())
        .collect();
    assert!(written_ids.iter().all(|id| later.contains(id)));
}

#[tokio::test]
async fn namespaces_are_isolated_and_validated() {
    let db = Db::in_memory();
    let tenant_a = db.namespace("tenant-a").unwrap();
    let tenant_b = db.namespace("tenant-b").unwrap();
    tenant_a.put(&account("ann")).await.unwrap();
    let key = account_key("ann");
    assert!(tenant_a.get(&key).await.unwrap().is_some());
    assert!(tenant_b.get(&key).await.unwrap().is_none());
    assert!(db.get(&key).await.unwrap().is_none());
    assert_eq!(
        tenant_b
            .query::<Account>()
            .fetch()
            .await
            .unwrap()
            .items
            .len(),
        0
    );
    assert_eq!(
        tenant_a
            .query::<Account>()
            .fetch()
            .await
            .unwrap()
            .items
            .len(),
        1
    );
    // R-N5, and the namespace character set.
    assert!(matches!(
        db.namespace("__system__"),
        Err(Error::InvalidName { .. })
    ));
    assert!(matches!(
        db.namespace("a b"),
        Err(Error::InvalidName { .. })
    ));
    assert!(db.namespace(&"n".repeat(101)).is_err());
}

#[tokio::test]
async fn invalid_keys_are_errors_not_panics() {
    let db = Db::in_memory();
    // An incomplete key cannot be looked up or deleted.
    let parent = account_key("ann");
    let incomplete = Post::incomplete_key(&parent);
    assert!(matches!(
        db.get(&incomplete).await,
        Err(Error::InvalidKey { .. })
    ));
    assert!(matches!(
        db.delete(&incomplete).await,
        Err(Error::InvalidKey { .. })
    ));
    // A child of an incomplete parent cannot be written, and nothing is.
    let incomplete_parent: Key<Account> = Key::new(None, None);
    let orphan = post(&incomplete_parent, "t", "a", 1);
    assert!(matches!(
        db.put(&orphan).await,
        Err(Error::InvalidKey { .. })
    ));
    assert!(db.query::<Post>().fetch().await.unwrap().items.is_empty());
}

#[test]
fn db_handles_and_their_futures_can_cross_threads() {
    fn send_sync<T: Send + Sync + Clone + 'static>(_: &T) {}
    fn send<T: Send>(_: T) {}
    let db = Db::in_memory();
    send_sync(&db);
    send(db.get(&account_key("ann")));
    send(db.query::<Account>().fetch());
    send(db.transaction(|_tx| async { Ok::<_, Error>(()) }));
}

#[tokio::test]
async fn keys_carry_the_partition_of_the_handle_that_returned_them() {
    let db = Db::in_memory();
    let tenant = db.namespace("tenant-a").unwrap();
    let key = tenant.put(&account("ann")).await.unwrap();
    assert_eq!(key.namespace(), "tenant-a");
    assert_eq!(key, tenant.bind(&account_key("ann")).unwrap());
    // A key built in code has none until a handle uses it.
    assert_eq!(account_key("ann").partition(), None);
    let found = tenant.query::<Account>().keys_only().fetch().await.unwrap();
    assert_eq!(found.items, std::slice::from_ref(&key));
    let loaded = tenant.get(&account_key("ann")).await.unwrap().unwrap();
    assert_eq!(loaded.name.as_str(), "ann");
    // Posts under ann: their parent field comes back in ann's partition.
    let post_key = tenant.put(&post(&key, "Hi", "ann", 1)).await.unwrap();
    assert_eq!(post_key.namespace(), "tenant-a");
    assert_eq!(tenant.get(&post_key).await.unwrap().unwrap().account, key);
    assert_eq!(
        post_key.parent().unwrap().partition(),
        key.raw().partition()
    );
}

#[tokio::test]
async fn a_key_of_tenant_a_cannot_read_or_write_tenant_b() {
    // Each tenant has an "ann"; tenant A's key must never reach tenant B's.
    let (backend, db) = Instrumented::db();
    let a = db.namespace("tenant-a").unwrap();
    let b = db.namespace("tenant-b").unwrap();
    let a_key = a.put(&account("ann")).await.unwrap();
    let mut b_ann = account("ann");
    b_ann.email = "b@example.com".into();
    b.put(&b_ann).await.unwrap();
    let calls = backend.calls().len();

    let wrong = |result: Result<(), Error>| match result {
        Err(Error::WrongPartition {
            expected, found, ..
        }) => {
            assert!(expected.contains("tenant-b") && found.contains("tenant-a"));
        }
        other => panic!("expected WrongPartition, got {other:?}"),
    };
    wrong(b.get(&a_key).await.map(drop));
    wrong(
        b.get_many(&[account_key("ann"), a_key.clone()])
            .await
            .map(drop),
    );
    wrong(b.delete(&a_key).await);
    wrong(b.delete_many(std::slice::from_ref(&a_key)).await);
    wrong(b.put(&post(&a_key, "x", "ann", 1)).await.map(drop));
    wrong(b.allocate_ids::<Post>(&a_key, 2).await.map(drop));
    wrong(b.reserve_ids(std::slice::from_ref(&a_key)).await);
    wrong(b.query::<Post>().ancestor(&a_key).fetch().await.map(drop));
    wrong(
        b.query::<Post>()
            .ancestor(&a_key)
            .keys_only()
            .fetch()
            .await
            .map(drop),
    );
    // The default namespace is a partition too.
    wrong(db.get(&a_key).await.map(drop).map_err(|e| match e {
        Error::WrongPartition { key, found, .. } => Error::WrongPartition {
            key,
            expected: "tenant-b".into(),
            found,
        },
        other => other,
    }));
    assert_eq!(backend.calls().len(), calls, "nothing was sent");

    // In a transaction: the read fails; a write fails the commit, which sends nothing.
    let error = b
        .transaction(|tx| {
            let a_key = a_key.clone();
            async move { tx.get(&a_key).await.map(drop) }
        })
        .await
        .unwrap_err();
    assert!(matches!(error, Error::WrongPartition { .. }), "{error}");
    let error = b
        .transaction(|tx| {
            let a_key = a_key.clone();
            async move {
                tx.delete(&a_key).await?;
                Ok(())
            }
        })
        .await
        .unwrap_err();
    assert!(matches!(error, Error::WrongPartition { .. }), "{error}");
    assert_eq!(
        backend.count(Call::Commit),
        2,
        "only the two puts were committed"
    );

    // Both anns are untouched.
    assert_eq!(
        a.get(&a_key).await.unwrap().unwrap().email,
        "ann@example.com"
    );
    assert_eq!(
        b.get(&account_key("ann")).await.unwrap().unwrap().email,
        "b@example.com"
    );
}

#[tokio::test]
async fn key_valued_properties_take_the_partition_of_the_handle() {
    #[derive(Entity, Debug, Clone, PartialEq)]
    struct Follow {
        #[key]
        id: Option<KeyId>,
        who: Key<Account>,
    }
    let db = Db::in_memory();
    let tenant = db.namespace("tenant-a").unwrap();
    let key = tenant
        .put(&Follow {
            id: None,
            who: account_key("bob"),
        })
        .await
        .unwrap();
    let loaded = tenant.get(&key).await.unwrap().unwrap();
    assert_eq!(loaded.who.namespace(), "tenant-a");
    assert_eq!(loaded.who, tenant.bind(&account_key("bob")).unwrap());
    // Filters on a key property bind the operand the same way.
    let found = tenant
        .query::<Follow>()
        .filter(Follow::WHO.eq(account_key("bob")))
        .fetch()
        .await
        .unwrap();
    assert_eq!(found.items.len(), 1);
}

#[tokio::test]
async fn a_commit_over_10_mib_is_refused_and_put_chunked_writes_it_in_parts() {
    let (backend, db) = Instrumented::db();
    // Any number of mutations is one commit: the service's limit is on bytes.
    let accounts: Vec<Account> = (0..1_200).map(|i| account(&format!("u{i}"))).collect();
    db.put_many(&accounts).await.unwrap();
    assert_eq!(backend.count(Call::Commit), 1);
    // Twelve entities of 1 MB: over the 10 MiB of a commit, refused before anything is sent.
    let big = |prefix: &str, i: usize| Account {
        bio: "b".repeat(1_000_000),
        ..account(&format!("{prefix}{i}"))
    };
    let large: Vec<Account> = (0..12).map(|i| big("w", i)).collect();
    match db.put_many(&large).await {
        Err(Error::CommitTooLarge {
            mutations,
            bytes,
            max,
        }) => {
            assert_eq!((mutations, max), (12, MAX_COMMIT_BYTES));
            assert!(bytes > 12_000_000 && bytes < 12_100_000, "{bytes}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(backend.count(Call::Commit), 1, "nothing was sent");
    assert!(db.get(&account_key("w0")).await.unwrap().is_none());
    // In parts: 9 (9 MB) fit under the 10 MiB with room to spare, then 3.
    let keys = db.put_chunked(&large).await.unwrap();
    assert_eq!(keys.len(), 12);
    assert_eq!(backend.count(Call::Commit), 3);
    assert_eq!(keys[11].name(), Some("w11"));
    assert!(db.get(&account_key("w11")).await.unwrap().is_some());
    // A failing commit after the first reports how much was written.
    let mut bad: Vec<Account> = (0..12).map(|i| big("v", i)).collect();
    bad[10].email = "y".repeat(2_000); // indexed and over 1,500 bytes
    match db.put_chunked(&bad).await {
        Err(Error::PartiallyWritten { written, source }) => {
            assert_eq!(written, 9);
            assert!(matches!(*source, Error::IndexedValueTooLarge { .. }));
        }
        other => panic!("{other:?}"),
    }
    assert!(db.get(&account_key("v8")).await.unwrap().is_some());
    assert!(db.get(&account_key("v9")).await.unwrap().is_none());
}

#[tokio::test]
async fn a_failed_commit_outside_a_transaction_is_not_replayed() {
    // Its outcome may be unknown (a timeout after the service applied it): the caller decides.
    let (backend, db) = Instrumented::db();
    backend
        .fail_commits
        .store(1, std::sync::atomic::Ordering::SeqCst);
    let error = db.put(&account("ann")).await.unwrap_err();
    assert!(matches!(error, Error::Unavailable { .. }), "{error:?}");
    assert_eq!(backend.count(Call::Commit), 1, "sent once, not replayed");
    assert!(db.get(&account_key("ann")).await.unwrap().is_none());
}
