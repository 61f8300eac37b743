//! The README's code, compiled: every ```rust block of `README.md` appears below verbatim,
//! inside the context it needs (the types and values it names), so an example that no longer
//! compiles fails the build, and `every_readme_block_is_compiled_here` fails when a block of
//! the README is not (or no longer) in this file.
//!
//! The blocks are compiled, and the ones that need no other service run.

#![allow(unused_variables, unused_mut, dead_code, clippy::disallowed_names)]

use datastore_entity::prelude::*;

/// README: the declarations.
#[rustfmt::skip]
fn declarations() -> Result<(), Error> {
    use datastore_entity::prelude::*;

    #[derive(Entity, Debug, Clone, PartialEq)]
    #[entity(kind = "Account")]
    pub struct Account {
        #[key]
        pub name: KeyName,               // KeyName | String | KeyId | u64 | Option<KeyId>
        pub email: String,
        #[exclude_from_index]            // never queried: no index entries (R-I1)
        pub bio: String,
        #[property(rename = "displayName")]
        pub display_name: String,
        #[ttl]                           // expiry time; implies #[exclude_from_index]
        pub expires: Option<Timestamp>,
        pub balance: i64,
    }

    #[derive(Entity, Debug, Clone, PartialEq)]
    pub struct Post {
        #[parent]
        pub account: Key<Account>,       // Post keys live under an Account key (R-E1)
        #[key]
        pub id: Option<KeyId>,           // None: the id is allocated on put (R-K1)
        pub title: String,
        pub location: Option<Address>,   // embedded entity, indexed as `location.city` (R-P2)
    }

    #[derive(Entity, Debug, Clone, PartialEq)]
    pub struct Address { pub city: String }   // no #[key]: an embedded entity

    let ann = Account::key(KeyName::new("ann")?);
    let first_post = Post::key(&ann, KeyId::new(1)?);
    let by_email = Account::EMAIL.eq("ann@example.com");   // typed filter
    // Account::BIO.eq("x")  -> compile error: the property is excluded from indexes
    Ok(())
}

#[test]
fn the_declarations_block_runs() {
    declarations().unwrap();
}

/// README: storing and querying, on the types of the declarations block.
mod db_block {
    use datastore_entity::prelude::*;
    use std::time::Duration;

    #[derive(Entity, Debug, Clone, PartialEq)]
    #[entity(kind = "Account")]
    pub struct Account {
        #[key]
        pub name: KeyName,
        pub email: String,
        #[exclude_from_index]
        pub bio: String,
        #[property(rename = "displayName")]
        pub display_name: String,
        #[ttl]
        pub expires: Option<Timestamp>,
        pub balance: i64,
    }

    #[derive(Entity, Debug, Clone, PartialEq)]
    pub struct Post {
        #[parent]
        pub account: Key<Account>,
        #[key]
        pub id: Option<KeyId>,
        pub title: String,
        pub location: Option<Address>,
    }

    #[derive(Entity, Debug, Clone, PartialEq)]
    pub struct Address {
        pub city: String,
    }

    #[derive(Debug)]
    pub enum AppError {
        Insufficient,
        Store(Error),
    }

    impl From<Error> for AppError {
        fn from(error: Error) -> Self {
            AppError::Store(error)
        }
    }

    #[rustfmt::skip]
    pub async fn run(
        account: Account,
        posts: Vec<Post>,
        ann_key: Key<Account>,
        bob_key: Key<Account>,
        cursor: Option<Cursor>,
        draft: Post,
    ) -> Result<(), AppError> {
        let db = Db::in_memory();                          // the embedded engine, the default
        db.put(&account).await?;                           // create, or set what the type declares; returns the key
        let keys = db.put_many(&posts).await?;             // one commit (R-A1); a key twice is an error (R-A4)
        let ann: Option<Account> = db.get(&Account::key(KeyName::new("ann")?)).await?;
        let found = db.get_many(&keys).await?;             // one lookup; one slot per key, in order

        let page = db.query::<Post>()
            .ancestor(&ann_key)                            // strongly consistent (R-E1)
            .filter(Post::TITLE.eq("Hello"))
            .filter(Post::LOCATION.dot(Address::CITY).eq("Paris"))   // embedded: `location.city` (R-P2)
            .limit(20)
            .start_after(cursor)                           // Option<Cursor>; there is no offset (R-Q3)
            .fetch().await?;                               // Page { items, next: Option<Cursor> }
        let keys = db.query::<Post>().keys_only().fetch().await?;   // typed keys (R-Q1)
        let mut all = db.query::<Post>().stream();         // every result, page by page
        while let Some(post) = all.try_next().await? { /* … */ }   // the prelude brings TryStreamExt

        let balance = db.transaction(async |tx| {          // rollback + bounded jittered retry (R-A2)
            let mut a = tx.get(&ann_key).await?.unwrap();
            if a.balance < 10 {
                return Err(AppError::Insufficient);        // your own error type (E: From<Error>)
            }
            a.balance -= 10;
            tx.put(&a).await?;                             // buffered until commit; returns the Key
            let receipt: Key<Post> = tx.put(&draft).await?;  // `id: None`: allocated now, so the key
                                                           // can go into another write before commit
            Ok(a.balance)                                  // contention inside is still retried
        }).await?;
        let total = db.read_only_transaction(async |tx| {  // reads from one consistent snapshot
            let both = tx.get_many(&[ann_key.clone(), bob_key.clone()]).await?;
            Ok::<_, Error>(both.iter().flatten().map(|a| a.balance).sum::<i64>())
        }).await?;
        let ten_minutes_ago = Timestamp::now() - Duration::from_secs(600);
        let then = db.read_only_transaction_at(ten_minutes_ago, async |tx| { // the data back then
            tx.get(&ann_key).await                        // (kept an hour; before this Db existed:
        }).await;                                          // refused, FAILED_PRECONDITION)

        let ids = db.allocate_ids::<Post>(&ann_key, 10).await?;   // scattered ids (R-K1)
        let tenant = db.namespace("tenant-a")?;                    // isolated, validated namespace
        Ok(())
    }

    #[tokio::test]
    async fn the_db_block_runs() {
        let account = |name: &str, balance| Account {
            name: KeyName::new(name).unwrap(),
            email: format!("{name}@example.com"),
            bio: String::new(),
            display_name: name.to_owned(),
            expires: None,
            balance,
        };
        let ann_key = Account::key(KeyName::new("ann").unwrap());
        let bob_key = Account::key(KeyName::new("bob").unwrap());
        let post = |id| Post {
            account: ann_key.clone(),
            id,
            title: "Hello".into(),
            location: Some(Address {
                city: "Paris".into(),
            }),
        };
        let posts = vec![
            post(Some(KeyId::new(1).unwrap())),
            post(Some(KeyId::new(2).unwrap())),
        ];
        // The block makes its own `Db`: the accounts it reads are put by its first line.
        let draft = post(None);
        let result = run(account("ann", 50), posts, ann_key, bob_key, None, draft).await;
        assert!(result.is_ok(), "{result:?}");
    }
}

/// README: the scale helpers.
#[rustfmt::skip]
async fn scale_block() -> Result<(), Box<dyn std::error::Error>> {
    let db = Db::in_memory();
    let key = Post::key(KeyId::new(1)?); // `Post` is the block's own, declared below
    db.put(&Post {
        id: Some(KeyId::new(1)?),
        title: "t".into(),
        author: "ann".into(),
        status: Status::Draft,
        published: Timestamp::now(),
        likes: 0,
    })
    .await?;
    let dir = std::env::temp_dir().join(format!("readme-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    std::env::set_current_dir(&dir)?; // the block writes index files into the current folder
    #[derive(Entity, Debug, Clone, PartialEq)]
    #[entity(
        projection(PostCard: title, author),   // pub struct PostCard { title, author } (R-Q2)
        index(author, title),                  // ... read from this index (R-I2)
        index(author, -published),             // a declared composite index (R-I2)
    )]
    pub struct Post {
        #[key]
        pub id: Option<KeyId>,
        pub title: String,
        pub author: String,
        pub status: Status,                    // an enum, stored as a string
        #[index(monotonic)]                    // an indexed timestamp must say so (R-I3)
        pub published: Timestamp,
        #[sharded(20)]                         // a counter in 20 shard entities (R-S1)
        pub likes: i64,
    }

    #[derive(PropertyValue, Debug, Clone, Copy, PartialEq)]
    #[property(rename_all = "snake_case")]
    pub enum Status { Draft, InReview, Published }

    #[derive(Entity, Debug, Clone, PartialEq)]
    #[replicated(5, unchecked)]                // 5 read replicas, one read at random (R-S2)
    pub struct SiteConfig { #[key] pub name: KeyName, pub banner: String }

    #[derive(Entity, Debug, Clone, PartialEq)]
    pub struct Event {
        #[key]
        pub id: Option<KeyId>,
        #[sharded_index(8)]                    // indexed behind 8 shard prefixes (R-S3)
        pub at: Timestamp,
    }

    let cards = db.query::<Post>().project::<PostCard>().fetch().await?;    // Page<PostCard>
    let drafts = db.query::<Post>().filter(Post::STATUS.eq(Status::Draft)).fetch().await?;
    Post::increment_likes(&db, &key, 1).await?;   // one random shard, on the server: one call
    let likes = Post::likes_total(&db, &key).await?;                         // one lookup
    let post = db.get(&key).await?;               // `likes` holds the total, same lookup
    let newest = Event::query_by_at(&db).desc().limit(20).fetch().await?;   // 8 queries, merged
    std::fs::write("index.yaml", datastore_entity::index_yaml(&[Post::SCHEMA]))?;
    std::fs::write("firestore.indexes.json",
        datastore_entity::firestore_indexes_json(&[Post::SCHEMA, Event::SCHEMA]))?;
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}

#[tokio::test]
async fn the_scale_block_runs() {
    scale_block().await.unwrap();
}

/// README: the query operators.
mod operators_block {
    use datastore_entity::prelude::*;

    #[derive(Entity, Debug, Clone, PartialEq)]
    pub struct Post {
        #[key]
        pub id: Option<KeyId>,
        pub title: String,
        pub author: String,
        pub likes: i64,
        pub rating: f64,
        pub pinned: bool,
        #[index(monotonic)]
        pub published: Timestamp,
    }

    #[rustfmt::skip]
    pub async fn run(db: Db, t: Timestamp, last_key: Key<Post>) -> Result<(), Error> {
        // On a Post with, besides the fields above, `author: String`, `likes: i64`, `rating: f64`,
        // `pinned: bool` and `published: Timestamp` (indexed, `#[index(monotonic)]`).
        // = and ranges (<, <=, >, >=) as before; on an array property they match any element.
        let not_bob = db.query::<Post>().filter(Post::AUTHOR.ne("bob"));                  // NOT_EQUAL
        let ann_or_bob = db.query::<Post>().filter(Post::AUTHOR.is_in(["ann", "bob"]));   // IN
        let not_eve = db.query::<Post>().filter(Post::AUTHOR.not_in(["eve"]));            // NOT_IN
        let either = db.query::<Post>().filter(Post::AUTHOR.eq("ann").or(Post::TITLE.eq("x")));  // OR
        let nested = db.query::<Post>()
            .filter(Post::AUTHOR.eq("ann").and(Post::LIKES.gt(3)).or(Post::PINNED.eq(true)));
        let two = db.query::<Post>().filter(Post::LIKES.gt(3)).filter(Post::PUBLISHED.lt(t)); // two ranges
        let page = not_bob.fetch().await?;                               // each runs as any query does
        let n: u64 = db.query::<Post>().filter(Post::AUTHOR.eq("ann")).count().await?;     // COUNT
        let some: u64 = db.query::<Post>().count_up_to(1_000).await?;   // reads at most 1,000 entries
        let likes: i64 = db.query::<Post>().sum(Post::LIKES).await?;    // i64 (integers), f64 (doubles)
        let rating: Option<f64> = db.query::<Post>().avg(Post::RATING).await?;      // None: no values
        let older = db.query::<Post>().filter(Key::PROPERTY.gt(last_key)).order(Key::PROPERTY.desc()); // __key__
        let keys = db.query::<Post>().keys_only().stream();             // keys-only streams too
        Ok(())
    }

    #[tokio::test]
    async fn the_operators_block_runs() {
        let last_key = Post::key(KeyId::new(9).unwrap());
        run(Db::in_memory(), Timestamp::now(), last_key)
            .await
            .unwrap();
    }
}

/// README: persistence (compiled, not run: it writes `data/app.redb`).
#[rustfmt::skip]
fn persistence_block() -> Result<(), Error> {
    let db = Db::open("data/app.redb")?;   // one file, created if missing (redb, ACID)
    Ok(())
}

/// README: Google Cloud (compiled, not run: it needs a project).
#[rustfmt::skip]
async fn cloud_block() -> Result<(), Error> {
    let db = Db::cloud("my-project").await?;                       // Application Default Credentials
    let db = Db::cloud_builder("my-project")
        .database("orders")                                        // a named database
        .endpoint("https://datastore.googleapis.com")              // the default
        .build().await?;
    Ok(())
}

/// README: caching (compiled, not run: it needs Redis and a project).
#[rustfmt::skip]
async fn caching_block() -> Result<(), Error> {
    use datastore_entity::GlobalCache;

    // Every kind is cached unless it opts out: #[entity(global_cache = false)];
    // #[entity(global_cache_timeout = 600)] keeps its entities ten minutes at most.
    let cache = GlobalCache::redis("redis://127.0.0.1:6379/0")?;    // python-ndb's REDIS_CACHE_URL
    let db = Db::cloud_builder("my-project").global_cache(cache).build().await?;
    let request = db.with_context_cache();    // one per request: what it read, it reads from memory
    println!("{:?}", db.cache_stats());        // hits, misses, locked, bypasses, context_hits
    Ok(())
}

/// README: running in production (compiled, not run: it needs credentials).
#[rustfmt::skip]
async fn production_block() -> Result<(), Error> {
    use datastore_entity::RetryPolicy;
    use std::time::Duration;
    let db = Db::cloud_builder("my-project")
        .timeout(Duration::from_secs(10))        // every call's deadline (default 60 s)
        .retry(RetryPolicy {                     // idempotent calls and transactions (R-A2)
            max_attempts: 8,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(5),
        })
        .build()
        .await?;
    Ok(())
}

/// README: existing data and schema changes, run on the embedded engine after version 1
/// of the program wrote `ann`.
#[rustfmt::skip]
async fn evolution_block(db: &Db) -> Result<(), Error> {
    #[derive(Entity, Debug, Clone, PartialEq)]
    #[entity(kind = "Member")]
    pub struct Member {                        // version 2 of the program
        #[key]
        pub id: KeyName,
        #[property(alias = "mail")]            // version 1 called it `mail`: read either,
        pub email: String,                     // a write stores `email` and removes `mail`
        #[property(default)]                   // missing in version 1's entities: 0
        pub visits: i64,
        #[property(default = "member_since")]  // missing: the function's value
        #[exclude_from_index]                  // a timestamp, never queried (R-I3)
        pub since: Timestamp,
        pub phone: Option<String>,             // an Option is None when missing
    }

    pub fn member_since() -> Timestamp { Timestamp::from_micros(0) }

    // Version 1 wrote { mail, phone, tags } (tags: a property version 2 dropped).
    let mut ann = db.get(&Member::key(KeyName::new("ann")?)).await?.expect("exists");
    ann.visits += 1;
    db.put(&ann).await?;     // stores email, visits, since, phone; removes mail; keeps tags

    let ann = db.get(&Member::key(KeyName::new("ann")?)).await?.expect("exists");
    assert_eq!((ann.email.as_str(), ann.visits), ("ann@example.com", 1));
    assert_eq!((ann.since, ann.phone.as_deref()), (member_since(), Some("555")));
    Ok(())
}

#[tokio::test]
async fn the_evolution_block_runs() {
    #[derive(Entity)]
    #[entity(kind = "Member")]
    struct V1 {
        #[key]
        id: KeyName,
        mail: String,
        phone: Option<String>,
        tags: Vec<String>,
    }
    #[derive(Entity, Debug, PartialEq)]
    #[entity(kind = "Member")]
    struct Leftovers {
        #[key]
        id: KeyName,
        mail: Option<String>,
        tags: Vec<String>,
    }
    let db = Db::in_memory();
    let id = KeyName::new("ann").unwrap();
    let v1 = V1 {
        id: id.clone(),
        mail: "ann@example.com".into(),
        phone: Some("555".into()),
        tags: vec!["vip".into()],
    };
    db.put(&v1).await.unwrap();
    evolution_block(&db).await.unwrap();
    let left = db.get(&Leftovers::key(id.clone())).await.unwrap().unwrap();
    let expected = Leftovers {
        id,
        mail: None,
        tags: vec!["vip".into()],
    };
    assert_eq!(left, expected, "`mail` removed, `tags` kept");
}

/// "Existing data and schema changes": a JSON property (feature `serde`; `.ci/run` runs this
/// file with it).
#[cfg(feature = "serde")]
#[rustfmt::skip]
mod json_property {
    use datastore_entity::prelude::*;

    #[derive(serde::Serialize, serde::Deserialize)]
    struct Prefs { theme: String, langs: Vec<String> }

    #[derive(Entity)]
    struct Member {
        #[key]
        id: KeyName,
        #[property(json)]                  // NDB: prefs = ndb.JsonProperty()
        prefs: Prefs,
    }

    #[test]
    fn a_json_property_round_trips() {
        let member = Member {
            id: KeyName::new("ann").unwrap(),
            prefs: Prefs { theme: "dark".into(), langs: vec!["fr".into()] },
        };
        let stored = member.to_properties().unwrap();
        assert!(stored["prefs"].excluded);
        let back = Member::from_entity(Member::key(member.id.clone()).raw(), stored).unwrap();
        assert_eq!((back.prefs.theme.as_str(), back.prefs.langs.len()), ("dark", 1));
    }
}

/// Every ```rust block of the README, found here line by line (indentation aside).
/// README: vector search.
mod vectors_block {
    use datastore_entity::prelude::*;
    use datastore_entity::{Distance, Vector};

    #[rustfmt::skip]
    pub async fn run(db: Db) -> Result<(), Error> {
        // (The type below is an item of this body: visible from its first line.)
        for (id, topic, emb) in [("a", "rust", [0.1, 0.2, 0.31]), ("b", "go", [0.1, 0.2, 0.3])] {
            let emb = Vector::new(emb.to_vec())?;
            db.put(&Doc { id: KeyName::new(id)?, topic: topic.into(), emb }).await?;
        }
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(index(topic, emb))]                     // a vector index pre-filtered on `topic`
struct Doc {
    #[key] id: KeyName,
    topic: String,
    #[vector_index(3)]                           // the vector index: 3 dimensions
    emb: Vector,                                 // excluded from the other indexes by itself
}

let v = Vector::new(vec![0.1, 0.2, 0.3])?;
let page = db.query::<Doc>().find_nearest(Doc::EMB, &v, Distance::Euclidean, 10).fetch().await?;
let scored: Vec<(Doc, f64)> = db.query::<Doc>()
    .filter(Doc::TOPIC.eq("rust"))                                   // pre-filter
    .find_nearest(Doc::EMB, &v, Distance::Cosine, 5)
    .distance_threshold(0.5)                                         // at most 0.5 away
    .fetch_with_distance().await?;                                   // nearest first
        assert_eq!(page.items[0].id.as_str(), "b");
        assert_eq!(scored.len(), 1);
        assert_eq!(scored[0].0.id.as_str(), "a");
        Ok(())
    }

    #[tokio::test]
    async fn the_vectors_block_runs() {
        run(Db::in_memory()).await.unwrap();
    }
}

/// README: partial reads.
mod partial_block {
    use datastore_entity::prelude::*;

    #[derive(Entity, Debug, Clone, PartialEq)]
    #[entity(projection(ArticleCard: title))]
    pub struct Article {
        #[key]
        pub id: KeyName,
        pub title: String,
        #[exclude_from_index]
        pub body: String,
    }

    #[derive(Entity, Debug, Clone, PartialEq)]
    #[entity(kind = "Article")]
    pub struct Headline {
        #[key]
        pub id: KeyName,
        pub title: String,
    }

    #[rustfmt::skip]
    pub async fn run(db: Db, id: KeyName) -> Result<(), Error> {
// `Article { id, title, body }` stored; `Headline` is the same kind without its `body`.
let headline: Option<Headline> = db.get_partial(&Headline::key(id.clone())).await?;
let page = db.query::<Headline>().filter(Headline::TITLE.eq("Hi")).partial().fetch().await?;
let card: Option<ArticleCard> = db.get_projected(&Article::key(id)).await?;  // projection(ArticleCard: title)
        assert_eq!(headline.map(|h| h.title).as_deref(), Some("Hi"));
        assert_eq!(page.items.len(), 1);
        assert_eq!(card.map(|c| c.title).as_deref(), Some("Hi"));
        Ok(())
    }

    #[tokio::test]
    async fn the_partial_block_runs() {
        let db = Db::in_memory();
        let id = KeyName::new("a").unwrap();
        let article = Article {
            id: id.clone(),
            title: "Hi".into(),
            body: "x".repeat(10_000),
        };
        db.put(&article).await.unwrap();
        run(db, id).await.unwrap();
    }
}

/// README: server-side transforms.
mod transforms_block {
    use datastore_entity::Value;
    use datastore_entity::prelude::*;

    #[derive(Entity, Debug, Clone, PartialEq)]
    pub struct Account {
        #[key]
        pub name: KeyName,
        pub balance: i64,
        pub tags: Vec<String>,
        #[exclude_from_index]
        pub seen: Option<Timestamp>,
    }

    #[rustfmt::skip]
    pub async fn run(db: Db, key: Key<Account>, account: Account) -> Result<(), Error> {
// With a transaction: read, add, write — two round trips at least, retried on contention.
db.transaction(async |tx| {
    let mut account = tx.get(&key).await?.expect("exists");
    account.balance += 5;
    account.tags.push("vip".to_owned());       // (a set: check it is not there first)
    tx.put(&account).await?;
    Ok::<_, Error>(())
}).await?;

// Without: one call, nothing read, nothing to retry.
let results: Vec<Value> = db
    .transform(&key, [
        Account::BALANCE.increment(5),                  // i64 / f64 fields; also .maximum(n), .minimum(n)
        Account::TAGS.append_missing(vec!["vip".to_owned()]),   // Vec fields; also .remove_all(..)
        Account::SEEN.request_time(),                   // Timestamp (chrono / time) fields
    ])
    .await?;
assert_eq!(results[0], Value::Integer(10));            // each numeric result: the new value
db.put_transformed(&account, [Account::BALANCE.increment(1)]).await?;   // a put, then transforms
db.transaction(async |tx| tx.transform(&key, [Account::BALANCE.increment(1)]).await).await?;
        let stored = db.get(&key).await?.expect("exists");
        // The put wrote `account` as it was first read (no tags, no time), then two increments.
        assert_eq!((stored.balance, stored.tags.len(), stored.seen), (2, 0, None));
        Ok(())
    }

    #[tokio::test]
    async fn the_transforms_block_runs() {
        let db = Db::in_memory();
        let account = Account {
            name: KeyName::new("ann").unwrap(),
            balance: 0,
            tags: Vec::new(),
            seen: None,
        };
        let key = db.put(&account).await.unwrap();
        run(db, key, account).await.unwrap();
    }
}

/// README: versions and conditional writes, on the declarations' `Account`.
mod versions_block {
    use datastore_entity::Versioned;
    use datastore_entity::prelude::*;

    #[derive(Entity, Debug, Clone, PartialEq)]
    pub struct Account {
        #[key]
        pub name: KeyName,
        pub balance: i64,
    }

    #[rustfmt::skip]
    pub async fn run(db: Db, key: Key<Account>) -> Result<(), Error> {
// With a transaction: begin, read (locks the entity), write, commit — retried on contention.
db.transaction(async |tx| {
    let mut account = tx.get(&key).await?.expect("exists");
    account.balance += 5;
    tx.put(&account).await?;
    Ok::<_, Error>(())
}).await?;

// Without: read with the version, write only if it is still that version.
let read: Versioned<Account> = db.get_versioned(&key).await?.expect("exists");
let mut account = read.entity.clone();
account.balance += 5;
match db.put_if_version(&account, read.version).await {
    Ok(written) => assert!(written.version > read.version),      // Written { key, version, update_time, commit_time }
    Err(Error::Conflict { stored, .. }) => { /* changed since (now at `stored`): read again */ }
    Err(other) => return Err(other),
}
db.put_many_if_version([(&account, read.version)]).await.err();   // per entity, all or none
db.delete_if_version(&key, 0).await.err();                        // 0: "does not exist" (a conflict here)
let created = db.put_if_version(&account, 0).await.err();        // create only if absent
        assert!(matches!(created, Some(Error::Conflict { .. })));
        assert_eq!(db.get(&key).await?.map(|a| a.balance), Some(10));
        Ok(())
    }

    #[tokio::test]
    async fn the_versions_block_runs() {
        let db = Db::in_memory();
        let key = db
            .put(&Account {
                name: KeyName::new("ann").unwrap(),
                balance: 0,
            })
            .await
            .unwrap();
        run(db, key).await.unwrap();
    }
}

#[test]
fn every_readme_block_is_compiled_here() {
    let readme = include_str!("../../README.md");
    let here: Vec<&str> = include_str!("readme.rs").lines().map(str::trim).collect();
    let mut blocks = 0;
    for block in readme.split("```rust\n").skip(1) {
        let block = block.split("```").next().unwrap_or_default();
        let lines: Vec<&str> = block.lines().map(str::trim).collect();
        blocks += 1;
        assert!(
            here.windows(lines.len()).any(|w| w == lines.as_slice()),
            "README block {blocks} is not compiled by tests/tests/readme.rs; copy it here, in \
             the context it needs:\n{block}"
        );
    }
    assert_eq!(
        blocks, 14,
        "the README's rust blocks changed: compile each new one here"
    );
}
