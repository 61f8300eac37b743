//! URL-safe keys (issue #16): byte for byte what Google's Python NDB writes (the strings
//! below were printed by google-cloud-ndb 2.7.1's `key.urlsafe()`; the NDB interop suite
//! checks the same live), the kind checked on the way back, and malformed input an error,
//! never a panic.

use datastore_entity::prelude::*;
use datastore_entity::{Error, PartitionId, RawKey};
use proptest::prelude::*;

use datastore_entity_tests::minimal::{Account, Post, ann};

fn partition(namespace: &str, database: &str) -> PartitionId {
    PartitionId {
        project_id: "my-project".into(),
        database_id: database.into(),
        namespace: namespace.into(),
    }
}

#[test]
fn keys_encode_as_ndb_does() {
    // ndb.Key("Account", "ann").urlsafe()
    assert_eq!(
        ann().to_urlsafe("my-project"),
        "agpteS1wcm9qZWN0chALEgdBY2NvdW50IgNhbm4M"
    );
    // ndb.Key("Account", "ann", "Post", 5, namespace="ns").urlsafe()
    let post = Post::key(&ann(), KeyId::new(5).unwrap())
        .into_raw()
        .with_partition(partition("ns", ""));
    assert_eq!(
        post.to_urlsafe("my-project"),
        "agpteS1wcm9qZWN0choLEgdBY2NvdW50IgNhbm4MCxIEUG9zdBgFDKIBAm5z"
    );
    // ndb.Key("Account", "ann", database="db2").urlsafe()
    let other_database = ann().into_raw().with_partition(partition("", "db2"));
    assert_eq!(
        other_database.to_urlsafe("my-project"),
        "agpteS1wcm9qZWN0chALEgdBY2NvdW50IgNhbm4MugEDZGIy"
    );
}

#[test]
fn keys_decode_with_their_partition_and_kind() {
    let text = "agpteS1wcm9qZWN0choLEgdBY2NvdW50IgNhbm4MCxIEUG9zdBgFDKIBAm5z";
    let post = Key::<Post>::from_urlsafe(text).unwrap();
    assert_eq!(post.partition(), Some(&partition("ns", "")));
    assert_eq!(post.parent().unwrap().kind(), "Account");
    assert_eq!(post.to_urlsafe("my-project"), text);
    // An App Engine app id's partition prefix is not part of the project.
    let app_engine = RawKey::from_urlsafe("agxzfm15LXByb2plY3RyEAsSB0FjY291bnQiA2Fubgw").unwrap();
    assert_eq!(app_engine.partition().unwrap().project_id, "my-project");
    assert_eq!(
        app_engine.to_urlsafe("my-project"),
        ann().to_urlsafe("my-project")
    );
    // Padding, as some encoders keep it, is accepted.
    assert!(Key::<Account>::from_urlsafe("agpteS1wcm9qZWN0chALEgdBY2NvdW50IgNhbm4M==").is_ok());
    match Key::<Account>::from_urlsafe(text) {
        Err(Error::InvalidKey { .. }) => {}
        other => panic!("a Post key is not an Account key: {other:?}"),
    }
}

#[test]
fn malformed_urlsafe_keys_are_errors() {
    for text in [
        "",
        "not base64!",
        "agpteS1wcm9qZWN0",                        // an app id, no path
        "chALEgdBY2NvdW50IgNhbm4M",                // a path, no app id
        "agpteS1wcm9qZWN0chALEgdBY2NvdW50IgNhbm4", // truncated
        "agpteS1wcm9qZWN0cg0LEgdBY2NvdW50GAAM",    // id 0
        "agpteS1wcm9qZWN0cg8LEgdBY2NvdW50IgJhLww", // name "a/" (R-N2)
        "agpteS1wcm9qZWN0cgsLEgdBY2NvdW50DA",      // no id or name
    ] {
        match RawKey::from_urlsafe(text) {
            Err(Error::Parse { .. } | Error::InvalidId { .. } | Error::InvalidName { .. }) => {}
            other => panic!("{text:?} is not a URL-safe key, found {other:?}"),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    /// Any text, and any bytes in base64url: an answer, never a panic.
    #[test]
    fn any_input_is_an_answer(text in ".{0,64}", bytes in proptest::collection::vec(any::<u8>(), 0..96)) {
        let _ = RawKey::from_urlsafe(&text);
        use base64::Engine as _;
        let _ = RawKey::from_urlsafe(&base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes));
    }

    /// Every valid key comes back as itself.
    #[test]
    fn valid_keys_round_trip(name in "[a-z]{1,12}", id in 1..i64::MAX, namespace in "[a-z]{0,8}") {
        let key = Post::key(&Account::key(KeyName::new(name).unwrap()), KeyId::new(id).unwrap())
            .into_raw()
            .with_partition(partition(&namespace, ""));
        let back = RawKey::from_urlsafe(&key.to_urlsafe("my-project")).unwrap();
        prop_assert_eq!(back.partition(), key.partition());
        prop_assert_eq!(back, key);
    }
}
