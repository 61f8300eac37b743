//! Batches: one call for many keys (R-A1), each key at most once per commit (R-A4).

use datastore_entity::Error;
use datastore_entity::prelude::*;

use super::{Row, ids, row};
use crate::harness::Ctx;
use crate::{Account, account, account_key};

#[macro_export]
macro_rules! batches_tests {
    ($backend:expr) => {
        $crate::conformance!($backend;
            batch_put_many_returns_keys_in_order,
            batch_get_many_keeps_one_slot_per_key_in_order,
            batch_delete_many_removes_every_key,
            batch_a_key_twice_in_one_commit_is_refused,
            batch_any_number_of_mutations_and_at_most_10_mib,
            batch_lookups_over_1000_keys_are_split,
        );
    };
}

pub async fn batch_put_many_returns_keys_in_order(t: Ctx) {
    let rows: Vec<Row> = (1..=20).rev().map(|i| row(i, i, "g")).collect();
    let keys = t.db.put_many(&rows).await.unwrap();
    assert_eq!(
        keys.iter()
            .map(|k| k.id().unwrap().get())
            .collect::<Vec<_>>(),
        (1..=20).rev().collect::<Vec<_>>()
    );
}

pub async fn batch_get_many_keeps_one_slot_per_key_in_order(t: Ctx) {
    t.db.put_many(&[account("ann"), account("bob")])
        .await
        .unwrap();
    let keys = [
        account_key("bob"),
        account_key("nobody"),
        account_key("ann"),
        account_key("bob"),
    ];
    let found = t.db.get_many(&keys).await.unwrap();
    let names: Vec<Option<&str>> = found
        .iter()
        .map(|a| a.as_ref().map(|a| a.name.as_str()))
        .collect();
    assert_eq!(names, [Some("bob"), None, Some("ann"), Some("bob")]);
}

pub async fn batch_delete_many_removes_every_key(t: Ctx) {
    let rows: Vec<Row> = (1..=10).map(|i| row(i, i, "g")).collect();
    let keys = t.db.put_many(&rows).await.unwrap();
    t.db.delete_many(&keys[..7]).await.unwrap();
    let left = t.db.query::<Row>().fetch().await.unwrap().items;
    assert_eq!(ids(&left), [8, 9, 10]);
}

pub async fn batch_a_key_twice_in_one_commit_is_refused(t: Ctx) {
    // R-A4: stricter than the service, which applies both: the crate refuses before sending.
    let error =
        t.db.put_many(&[account("ann"), account("bob"), account("ann")])
            .await
            .unwrap_err();
    assert!(matches!(error, Error::DuplicateKey { .. }), "{error:?}");
    assert_eq!(t.db.get(&account_key("bob")).await.unwrap(), None);
}

pub async fn batch_any_number_of_mutations_and_at_most_10_mib(t: Ctx) {
    // The service's limits page sets no count of mutations (the legacy Datastore's 500 is gone,
    // and the Firestore emulator takes any number): 650 in one commit.
    let rows: Vec<Row> = (1..=650).map(|i| row(i, i % 7, "g")).collect();
    let keys = t.db.put_many(&rows).await.unwrap();
    assert_eq!(keys.len(), 650);
    let count =
        t.db.query::<Row>()
            .keys_only()
            .stream()
            .try_fold(0, |n, _| async move { Ok(n + 1) })
            .await
            .unwrap();
    assert_eq!(count, 650);
    // Over 10 MiB, the limit of a request and of a transaction: refused before anything is
    // sent; `put_chunked` writes it in parts.
    let large: Vec<Account> = (0..11)
        .map(|i| Account {
            bio: "b".repeat(1_000_000),
            ..account(&format!("large{i}"))
        })
        .collect();
    let error = t.db.put_many(&large).await.unwrap_err();
    assert!(
        matches!(error, Error::CommitTooLarge { mutations: 11, .. }),
        "{error:?}"
    );
    assert_eq!(t.db.get(&account_key("large0")).await.unwrap(), None);
    if t.backend.is_emulator() {
        // Google's emulators take gRPC messages of at most 4 MiB (the Firestore emulator:
        // "gRPC message exceeds maximum size 4194304"), where the service takes 10 MiB.
        return;
    }
    let keys = t.db.put_chunked(&large).await.unwrap();
    assert_eq!(keys.len(), 11);
    let found = t.db.get_many(&keys).await.unwrap();
    assert!(found.iter().zip(&large).all(|(f, a)| f.as_ref() == Some(a)));
}

pub async fn batch_lookups_over_1000_keys_are_split(t: Ctx) {
    let rows: Vec<Row> = (1..=1_100).map(|i| row(i, i, "g")).collect();
    let keys = t.db.put_chunked(&rows).await.unwrap();
    let mut wanted = keys.clone();
    wanted.push(Row::key(KeyId::new(5_000).unwrap()));
    let found = t.db.get_many(&wanted).await.unwrap();
    assert_eq!(found.len(), 1_101);
    assert!(
        found[..1_100]
            .iter()
            .zip(&rows)
            .all(|(f, r)| f.as_ref() == Some(r))
    );
    assert!(found[1_100].is_none());
}
