//! Keys that compare equal (issue #16): a key built in code equals the same key a `Db` of the
//! default namespace returns — in `==`, in a `HashSet`, as a `HashMap` key, and as the
//! `#[parent]` field of a child read back — while keys of different namespaces never are, and
//! the partition checks stay as strict as before (`Error::WrongPartition`).

use std::collections::{HashMap, HashSet};

use datastore_entity::Error;
use datastore_entity::prelude::*;

#[derive(Entity, Debug, Clone, PartialEq)]
struct Account {
    #[key]
    name: KeyName,
}

#[derive(Entity, Debug, Clone, PartialEq)]
struct Post {
    #[parent]
    account: Key<Account>,
    #[key]
    id: KeyId,
}

fn ann() -> Key<Account> {
    Account::key(KeyName::new("ann").unwrap())
}

#[tokio::test]
async fn a_built_key_equals_the_key_the_db_returns_in_the_default_namespace() {
    let db = Db::in_memory();
    let returned = db
        .put(&Account {
            name: KeyName::new("ann").unwrap(),
        })
        .await
        .unwrap();
    assert!(returned.partition().is_some() && ann().partition().is_none());
    assert_eq!(ann(), returned);
    assert_eq!(ann().cmp(&returned), std::cmp::Ordering::Equal);
    let set: HashSet<Key<Account>> = [returned.clone()].into();
    assert!(set.contains(&ann()));
    let by_key: HashMap<Key<Account>, &str> = [(ann(), "built")].into();
    assert_eq!(by_key.get(&returned), Some(&"built"));

    // The parent field of a child read back is the same key as the built parent.
    let post = Post {
        account: ann(),
        id: KeyId::new(1).unwrap(),
    };
    let key = db.put(&post).await.unwrap();
    let read = db.get(&key).await.unwrap().unwrap();
    assert_eq!(read.account, ann());
    assert_eq!(read, post);
    assert_eq!(key, Post::key(&ann(), KeyId::new(1).unwrap()));
}

#[tokio::test]
async fn keys_of_different_namespaces_are_never_equal_and_stay_apart() {
    let db = Db::in_memory();
    let tenant = db.namespace("tenant-a").unwrap();
    let account = Account {
        name: KeyName::new("ann").unwrap(),
    };
    let in_default = db.put(&account).await.unwrap();
    let in_tenant = tenant.put(&account).await.unwrap();
    assert_ne!(in_default, in_tenant);
    assert_ne!(ann(), in_tenant);
    let set: HashSet<Key<Account>> = [in_default.clone(), in_tenant.clone()].into();
    assert_eq!(set.len(), 2);
    // Equality does not loosen the partition checks: the tenant's key is refused elsewhere.
    assert!(matches!(
        db.get(&in_tenant).await,
        Err(Error::WrongPartition { .. })
    ));
    assert!(matches!(
        tenant.get(&in_default).await,
        Err(Error::WrongPartition { .. })
    ));
}
