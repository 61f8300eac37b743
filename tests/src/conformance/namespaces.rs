//! Namespaces: isolated partitions; keys carry theirs.

use datastore_entity::Error;
use datastore_entity::prelude::*;

use crate::harness::Ctx;
use crate::{Account, account, account_key};

#[macro_export]
macro_rules! namespaces_tests {
    ($backend:expr) => {
        $crate::conformance!($backend;
            namespaces_are_isolated,
            namespaces_returned_keys_carry_their_namespace,
            namespaces_a_key_of_tenant_a_cannot_read_tenant_b,
            namespaces_queries_stay_in_their_namespace,
        );
    };
}

fn tenant(t: &Ctx, suffix: &str) -> Db {
    let name = format!("{}.{suffix}", t.db.partition().namespace);
    t.db.namespace(&name).unwrap()
}

pub async fn namespaces_are_isolated(t: Ctx) {
    let (a, b) = (tenant(&t, "a"), tenant(&t, "b"));
    a.put(&account("ann")).await.unwrap();
    assert!(a.get(&account_key("ann")).await.unwrap().is_some());
    assert!(b.get(&account_key("ann")).await.unwrap().is_none());
    assert!(t.db.get(&account_key("ann")).await.unwrap().is_none());
}

pub async fn namespaces_returned_keys_carry_their_namespace(t: Ctx) {
    let a = tenant(&t, "a");
    let key = a.put(&account("ann")).await.unwrap();
    assert_eq!(key.namespace(), a.partition().namespace);
    let queried = a
        .query::<Account>()
        .keys_only()
        .fetch()
        .await
        .unwrap()
        .items;
    assert_eq!(queried, std::slice::from_ref(&key));
    assert_eq!(a.bind(&account_key("ann")).unwrap(), key);
}

pub async fn namespaces_a_key_of_tenant_a_cannot_read_tenant_b(t: Ctx) {
    let (a, b) = (tenant(&t, "a"), tenant(&t, "b"));
    let a_key = a.put(&account("ann")).await.unwrap();
    let mut bs = account("ann");
    bs.email = "b@example.com".into();
    b.put(&bs).await.unwrap();
    for result in [
        b.get(&a_key).await.map(drop),
        b.delete(&a_key).await,
        b.query::<crate::Post>()
            .ancestor(&a_key)
            .fetch()
            .await
            .map(drop),
    ] {
        assert!(
            matches!(result, Err(Error::WrongPartition { .. })),
            "{result:?}"
        );
    }
    assert_eq!(
        b.get(&account_key("ann")).await.unwrap().unwrap().email,
        "b@example.com"
    );
    assert_eq!(
        a.get(&a_key).await.unwrap().unwrap().email,
        "ann@example.com"
    );
}

pub async fn namespaces_queries_stay_in_their_namespace(t: Ctx) {
    let (a, b) = (tenant(&t, "a"), tenant(&t, "b"));
    a.put_many(&[account("ann"), account("bob")]).await.unwrap();
    b.put(&account("cat")).await.unwrap();
    let in_a = a.query::<Account>().fetch().await.unwrap().items;
    let in_b = b.query::<Account>().fetch().await.unwrap().items;
    assert_eq!(in_a.len(), 2);
    assert_eq!(in_b.len(), 1);
    assert_eq!(in_b[0].name.as_str(), "cat");
}
