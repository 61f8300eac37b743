//! Create, read, replace, delete.

use datastore_entity::Error;
use datastore_entity::prelude::*;

use super::{sample, sample_key};
use crate::harness::Ctx;
use crate::{Post, account, account_key};

#[macro_export]
macro_rules! crud_tests {
    ($backend:expr) => {
        $crate::conformance!($backend;
            crud_put_then_get_returns_the_same_entity,
            crud_get_of_a_missing_key_is_none,
            crud_put_replaces_the_whole_entity,
            crud_insert_refuses_an_existing_key,
            crud_update_refuses_a_missing_key,
            crud_update_of_an_incomplete_key_is_refused,
            crud_delete_removes_and_deleting_again_is_fine,
            crud_incomplete_keys_get_distinct_ids,
            crud_children_fill_their_parent_field,
        );
    };
}

pub async fn crud_put_then_get_returns_the_same_entity(t: Ctx) {
    let entity = sample("alpha", 7);
    let key = t.db.put(&entity).await.unwrap();
    assert_eq!(key.name(), Some("alpha"));
    assert_eq!(t.db.get(&key).await.unwrap(), Some(entity.clone()));
    // A key built in code reads it too.
    assert_eq!(t.db.get(&sample_key("alpha")).await.unwrap(), Some(entity));
}

pub async fn crud_get_of_a_missing_key_is_none(t: Ctx) {
    assert_eq!(t.db.get(&sample_key("nobody")).await.unwrap(), None);
}

pub async fn crud_put_replaces_the_whole_entity(t: Ctx) {
    let mut entity = sample("alpha", 1);
    entity.maybe = Some("first".into());
    t.db.put(&entity).await.unwrap();
    entity.maybe = None;
    entity.count = 2;
    t.db.put(&entity).await.unwrap();
    let loaded = t.db.get(&sample_key("alpha")).await.unwrap().unwrap();
    assert_eq!(loaded.maybe, None);
    assert_eq!(loaded.count, 2);
}

pub async fn crud_insert_refuses_an_existing_key(t: Ctx) {
    t.db.insert(&account("ann")).await.unwrap();
    let mut other = account("ann");
    other.email = "other@example.com".into();
    let error = t.db.insert(&other).await.unwrap_err();
    // The error names the key on every backend (issue #26: the emulators' own message).
    assert!(
        matches!(&error, Error::AlreadyExists { key } if key.contains(r#"Account:"ann""#)),
        "{error:?}"
    );
    let kept = t.db.get(&account_key("ann")).await.unwrap().unwrap();
    assert_eq!(kept.email, "ann@example.com");
}

pub async fn crud_update_refuses_a_missing_key(t: Ctx) {
    let error = t.db.update(&account("ghost")).await.unwrap_err();
    assert!(
        matches!(&error, Error::NotFound { key } if key.contains(r#"Account:"ghost""#)),
        "{error:?}"
    );
    assert_eq!(t.db.get(&account_key("ghost")).await.unwrap(), None);
    t.db.put(&account("ann")).await.unwrap();
    let mut changed = account("ann");
    changed.balance = 5;
    t.db.update(&changed).await.unwrap();
    assert_eq!(
        t.db.get(&account_key("ann"))
            .await
            .unwrap()
            .unwrap()
            .balance,
        5
    );
}

pub async fn crud_update_of_an_incomplete_key_is_refused(t: Ctx) {
    // The emulators refuse an update without an id (there is nothing to update); the
    // embedded engine matches: NotFound on the emulator's side of the crate too.
    let post = Post {
        account: account_key("ann"),
        id: None,
        title: "t".into(),
        author: "ann".into(),
        published: Timestamp::from_micros(1),
        tags: vec![],
        body: String::new(),
        location: None,
    };
    let error = t.db.update(&post).await.unwrap_err();
    assert!(
        matches!(error, Error::InvalidKey { .. }),
        "{:?}: {error:?}",
        t.backend
    );
    let none: Vec<Post> = t.db.query::<Post>().fetch().await.unwrap().items;
    assert!(none.is_empty());
}

pub async fn crud_delete_removes_and_deleting_again_is_fine(t: Ctx) {
    let key = t.db.put(&sample("alpha", 1)).await.unwrap();
    t.db.delete(&key).await.unwrap();
    assert_eq!(t.db.get(&key).await.unwrap(), None);
    t.db.delete(&key).await.unwrap();
    t.db.delete(&sample_key("never")).await.unwrap();
}

pub async fn crud_incomplete_keys_get_distinct_ids(t: Ctx) {
    let ann = t.db.put(&account("ann")).await.unwrap();
    let mut ids = Vec::new();
    for i in 0..5 {
        let key =
            t.db.put(&Post {
                account: ann.clone(),
                id: None,
                title: format!("post {i}"),
                author: "ann".into(),
                published: Timestamp::from_micros(i),
                tags: vec![],
                body: String::new(),
                location: None,
            })
            .await
            .unwrap();
        assert_eq!(key.parent().as_ref(), Some(ann.raw()));
        ids.push(key.id().unwrap().get());
    }
    let mut distinct = ids.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), 5, "{ids:?}");
    assert!(ids.iter().all(|id| *id > 0));
}

pub async fn crud_children_fill_their_parent_field(t: Ctx) {
    let ann = t.db.put(&account("ann")).await.unwrap();
    let key =
        t.db.put(&Post {
            account: ann.clone(),
            id: None,
            title: "hello".into(),
            author: "ann".into(),
            published: Timestamp::from_micros(5),
            tags: vec!["a".into()],
            body: "…".into(),
            location: Some(crate::Address {
                city: "Oslo".into(),
            }),
        })
        .await
        .unwrap();
    let loaded = t.db.get(&key).await.unwrap().unwrap();
    assert_eq!(loaded.account, ann);
    assert_eq!(loaded.id, key.id());
    assert_eq!(loaded.location.unwrap().city, "Oslo");
}
