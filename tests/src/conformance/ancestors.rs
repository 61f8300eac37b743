//! Ancestor queries: entity groups (R-E1), with filters and orders, in transactions, and
//! over several levels.

use datastore_entity::prelude::*;

use crate::harness::Ctx;
use crate::{Account, Post, account, account_key};

#[macro_export]
macro_rules! ancestors_tests {
    ($backend:expr) => {
        $crate::conformance!($backend;
            ancestor_query_returns_only_the_entity_group,
            ancestor_with_an_equality_filter_and_an_order,
            ancestor_query_in_a_transaction,
            ancestor_nested_grandchildren,
        );
    };
}

fn post(parent: &Key<Account>, title: &str, published: i64, tags: &[&str]) -> Post {
    Post {
        account: parent.clone(),
        id: None,
        title: title.into(),
        author: parent.name().unwrap_or_default().into(),
        published: Timestamp::from_micros(published),
        tags: tags.iter().map(|t| (*t).to_owned()).collect(),
        body: String::new(),
        location: None,
    }
}

fn titles(posts: &[Post]) -> Vec<&str> {
    posts.iter().map(|p| p.title.as_str()).collect()
}

/// Ann with three posts, Bob with one; returns their keys and the posts' keys.
///
/// The accounts' names start with `tag`, different in each test: the legacy emulator locks
/// entity groups by key path across namespaces, so that an ancestor query on `ann` in one
/// test's namespace aborts with "too much contention" while another test writes to `ann`
/// in its own.
async fn blog(t: &Ctx, tag: &str) -> (Key<Account>, Key<Account>, Vec<Key<Post>>) {
    let ann = t.db.put(&account(&format!("{tag}-ann"))).await.unwrap();
    let bob = t.db.put(&account(&format!("{tag}-bob"))).await.unwrap();
    let keys =
        t.db.put_many(&[
            post(&ann, "a1", 10, &["rust", "db"]),
            post(&ann, "a2", 30, &["rust"]),
            post(&ann, "a3", 20, &["go"]),
            post(&bob, "b1", 15, &["rust"]),
        ])
        .await
        .unwrap();
    (ann, bob, keys)
}

pub async fn ancestor_query_returns_only_the_entity_group(t: Ctx) {
    let (ann, bob, keys) = blog(&t, "group").await;
    let anns =
        t.db.query::<Post>()
            .ancestor(&ann)
            .order(Post::PUBLISHED.asc())
            .fetch()
            .await
            .unwrap();
    assert_eq!(titles(&anns.items), ["a1", "a3", "a2"]);
    assert!(anns.items.iter().all(|p| p.account == ann));
    let bobs = t.db.query::<Post>().ancestor(&bob).fetch().await.unwrap();
    assert_eq!(titles(&bobs.items), ["b1"]);
    // The ancestor itself is returned when it is of the queried kind, and only it.
    let accounts =
        t.db.query::<Account>()
            .ancestor(&ann)
            .fetch()
            .await
            .unwrap();
    assert_eq!(accounts.items, [account("group-ann")]);
    // A post is its own ancestor, and nothing else's.
    let itself =
        t.db.query::<Post>()
            .ancestor(&keys[1])
            .fetch()
            .await
            .unwrap();
    assert_eq!(titles(&itself.items), ["a2"]);
    let no_accounts =
        t.db.query::<Account>()
            .ancestor(&keys[1])
            .fetch()
            .await
            .unwrap();
    assert!(no_accounts.items.is_empty());
    // The group's root need not exist.
    let carol = account_key("group-carol");
    t.db.put(&post(&carol, "c1", 5, &[])).await.unwrap();
    let carols = t.db.query::<Post>().ancestor(&carol).fetch().await.unwrap();
    assert_eq!(titles(&carols.items), ["c1"]);
    assert_eq!(t.db.get(&carol).await.unwrap(), None);
}

pub async fn ancestor_with_an_equality_filter_and_an_order(t: Ctx) {
    let (ann, bob, _) = blog(&t, "filtered").await;
    let rust_newest_first =
        t.db.query::<Post>()
            .ancestor(&ann)
            .filter(Post::TAGS.eq("rust"))
            .order(Post::PUBLISHED.desc())
            .fetch()
            .await
            .unwrap();
    assert_eq!(titles(&rust_newest_first.items), ["a2", "a1"]);
    let with_range =
        t.db.query::<Post>()
            .ancestor(&ann)
            .filter(Post::AUTHOR.eq("filtered-ann"))
            .filter(Post::PUBLISHED.ge(Timestamp::from_micros(20)))
            .order(Post::PUBLISHED.asc())
            .fetch()
            .await
            .unwrap();
    assert_eq!(titles(&with_range.items), ["a3", "a2"]);
    let bobs_go =
        t.db.query::<Post>()
            .ancestor(&bob)
            .filter(Post::TAGS.eq("go"))
            .fetch()
            .await
            .unwrap();
    assert!(bobs_go.items.is_empty());
}

pub async fn ancestor_query_in_a_transaction(t: Ctx) {
    let (ann, _, _) = blog(&t, "in-tx").await;
    let counted =
        t.db.transaction(|tx| {
            let ann = ann.clone();
            async move {
                let posts = tx.query::<Post>().ancestor(&ann).fetch().await?.items;
                let mut account = tx.get(&ann).await?.expect("ann exists");
                account.balance = posts.len() as i64;
                tx.put(&account).await?;
                Ok::<_, Error>(
                    titles(&posts)
                        .into_iter()
                        .map(str::to_owned)
                        .collect::<Vec<_>>(),
                )
            }
        })
        .await
        .unwrap();
    let mut sorted = counted.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, ["a1", "a2", "a3"]);
    assert_eq!(t.db.get(&ann).await.unwrap().unwrap().balance, 3);
}

/// A comment under a post: the third level of ann's entity group.
#[derive(Entity, Debug, Clone, PartialEq)]
struct Comment {
    #[parent]
    post: Key<Post>,
    #[key]
    id: Option<KeyId>,
    text: String,
}

/// The texts of the comments under `ancestor`, sorted.
async fn comments_under<P>(t: &Ctx, ancestor: &Key<P>) -> Vec<String> {
    let comments =
        t.db.query::<Comment>()
            .ancestor(ancestor)
            .fetch()
            .await
            .unwrap()
            .items;
    let mut texts: Vec<String> = comments.into_iter().map(|c| c.text).collect();
    texts.sort_unstable();
    texts
}

pub async fn ancestor_nested_grandchildren(t: Ctx) {
    let (ann, bob, posts) = blog(&t, "nested").await;
    let comment = |post: &Key<Post>, text: &str| Comment {
        post: post.clone(),
        id: None,
        text: text.into(),
    };
    let keys =
        t.db.put_many(&[
            comment(&posts[0], "c1"),
            comment(&posts[0], "c2"),
            comment(&posts[1], "c3"),
            comment(&posts[3], "c4"),
        ])
        .await
        .unwrap();
    assert_eq!(keys[0].parent().as_ref(), Some(posts[0].raw()));
    assert_eq!(keys[0].raw().root(), *ann.raw());
    assert_eq!(keys[0].raw().path().len(), 3);
    assert_eq!(comments_under(&t, &ann).await, ["c1", "c2", "c3"]);
    assert_eq!(comments_under(&t, &posts[0]).await, ["c1", "c2"]);
    assert_eq!(comments_under(&t, &posts[1]).await, ["c3"]);
    assert!(comments_under(&t, &posts[2]).await.is_empty());
    assert_eq!(comments_under(&t, &bob).await, ["c4"]);
    // A comment's own key is its ancestor too.
    assert_eq!(comments_under(&t, &keys[3]).await, ["c4"]);
    // A comment loads with its parent post, and queries of posts never see comments.
    let loaded = t.db.get(&keys[2]).await.unwrap().unwrap();
    assert_eq!(loaded.post, posts[1]);
    let anns = t.db.query::<Post>().ancestor(&ann).fetch().await.unwrap();
    assert_eq!(anns.items.len(), 3);
}
