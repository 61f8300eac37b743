//! Keys that compare equal (issue #16): a key built in code equals the same key a `Db` of the
//! default namespace returns — in `==`, in a `HashSet`, as a `HashMap` key, and as the
//! `#[parent]` field of a child read back — while keys of different namespaces never are, and
//! the partition checks stay as strict as before (`Error::WrongPartition`).

use std::collections::{HashMap, HashSet};

use datastore_entity::Error;
use datastore_entity::prelude::*;

use datastore_entity_tests::minimal::{Account, Post, ann};

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

/// Keys as text (issue #16): what `Display` writes, `FromStr` reads back, kind checked.
mod text {
    use super::*;
    use datastore_entity::{PartitionId, RawKey};
    use proptest::prelude::*;

    fn in_partition(key: Key<Account>, database: &str, namespace: &str) -> RawKey {
        key.into_raw().with_partition(PartitionId {
            project_id: "p".into(),
            database_id: database.into(),
            namespace: namespace.into(),
        })
    }

    #[test]
    fn keys_display_as_their_path_and_read_back() {
        let post = Post::key(&ann(), KeyId::new(5).unwrap());
        assert_eq!(post.to_string(), r#"Account:"ann"/Post:5"#);
        assert_eq!(post.to_string().parse::<Key<Post>>().unwrap(), post);
        let tenant = in_partition(ann(), "", "tenant-a");
        assert_eq!(tenant.to_string(), r#"[tenant-a]Account:"ann""#);
        let orders = in_partition(ann(), "orders", "tenant-a");
        assert_eq!(orders.to_string(), r#"[orders/tenant-a]Account:"ann""#);
        assert_eq!(orders.to_string().parse::<RawKey>().unwrap(), orders);
        // The default namespace writes no brackets, and reads back equal.
        let default = in_partition(ann(), "", "");
        assert_eq!(default.to_string(), r#"Account:"ann""#);
        assert_eq!(default.to_string().parse::<RawKey>().unwrap(), default);
        // Names are quoted as Rust quotes strings.
        let odd = Account::key(KeyName::new("a \"b\"\n\\ é ✓").unwrap());
        assert_eq!(odd.to_string(), r#"Account:"a \"b\"\n\\ é ✓""#);
        assert_eq!(odd.to_string().parse::<Key<Account>>().unwrap(), odd);
    }

    #[test]
    fn text_of_another_kind_or_malformed_is_an_error() {
        match r#"Post:"ann""#.parse::<Key<Account>>() {
            Err(Error::InvalidKey { .. }) => {}
            other => panic!("a Post key is not an Account key: {other:?}"),
        }
        // Issue #26: the path above the key is checked as the builders make it: a `Post` is
        // under an `Account`, an `Account` under nothing (URL-safe keys alike).
        for text in [
            "Post:5",
            r#"Other:"x"/Post:5"#,
            r#"Account:"ann"/Account:"bob"/Post:5"#,
        ] {
            match text.parse::<Key<Post>>() {
                Err(Error::InvalidKey { reason, .. }) => {
                    assert!(
                        reason.contains("parent") || reason.contains("root"),
                        "{reason}"
                    )
                }
                other => panic!("{text}: {other:?}"),
            }
            let raw: RawKey = text.parse().unwrap();
            assert!(
                Key::<Post>::from_urlsafe(&raw.to_urlsafe("p")).is_err(),
                "{text}"
            );
        }
        assert!(r#"Other:"x"/Account:"ann""#.parse::<Key<Account>>().is_err());
        for text in [
            "",
            "Account",
            "Account:",
            "Account:0",
            "Account:-3",
            "Account:x",
            r#"Account:"ann"#,
            r#"Account:"a/b""#,
            r#"Account:"ann"/"#,
            r#"Account:"ann"x"#,
            r#"[tenant-aAccount:"ann""#,
            r#"Account:"\q""#,
            r#"Account:"\u{110000}""#,
        ] {
            assert!(text.parse::<RawKey>().is_err(), "{text:?} is not a key");
        }
    }

    #[tokio::test]
    async fn a_key_read_from_text_is_used_in_its_namespace() {
        let db = Db::in_memory();
        let tenant = db.namespace("tenant-a").unwrap();
        let key = tenant
            .put(&Account {
                name: KeyName::new("ann").unwrap(),
            })
            .await
            .unwrap();
        assert_eq!(key.to_string(), r#"[tenant-a]Account:"ann""#);
        let read: Key<Account> = key.to_string().parse().unwrap();
        assert_eq!(read, key);
        assert!(tenant.get(&read).await.unwrap().is_some());
        // The same text cannot reach another namespace's handle.
        assert!(matches!(
            db.get(&read).await,
            Err(Error::WrongPartition { .. })
        ));
        // A default-namespace key reads back equal to the key the Db returns.
        let plain = db
            .put(&Account {
                name: KeyName::new("bob").unwrap(),
            })
            .await
            .unwrap();
        assert_eq!(plain.to_string().parse::<Key<Account>>().unwrap(), plain);
    }

    proptest! {
        /// Any text: an answer, never a panic.
        #[test]
        fn any_text_is_an_answer(text in r#"(\[[a-z/]{0,6}\])?[A-Za-z:"/\\0-9?u{}-]{0,40}"#) {
            let _ = text.parse::<RawKey>();
        }

        /// Every valid key reads back as itself.
        #[test]
        fn valid_keys_round_trip(name in "[^/]{1,16}", id in 1..i64::MAX, namespace in "[a-z]{0,6}") {
            prop_assume!(KeyName::new(name.clone()).is_ok());
            let account = Account::key(KeyName::new(name).unwrap());
            let key = Post::key(&account, KeyId::new(id).unwrap()).into_raw();
            let key = key.with_partition(PartitionId {
                project_id: String::new(),
                database_id: String::new(),
                namespace,
            });
            prop_assert_eq!(key.to_string().parse::<RawKey>().unwrap(), key);
        }
    }
}
