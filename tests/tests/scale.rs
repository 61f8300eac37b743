//! The scale patterns, generated from one attribute each: sharded counters (R-S1), read
//! replicas (R-S2) and sharded timestamp indexes (R-S3), with exact values.

use std::collections::HashSet;
use std::time::Duration;

use datastore_entity::prelude::*;
use datastore_entity::{Error, RawKey, Value};
use datastore_entity_tests::{
    Account, Article, Call, Event, Instrumented, Latency, Priority, SiteConfig, Status, account,
    account_key,
};

fn article(slug: &str) -> Article {
    Article {
        slug: KeyName::new(slug).unwrap(),
        title: format!("About {slug}"),
        status: Status::Published,
        priority: Priority(1),
        views: 0,
        likes: 0,
    }
}

fn article_key(slug: &str) -> Key<Article> {
    Article::key(KeyName::new(slug).unwrap())
}

/// `tasks` tasks each add 1 to `key`'s views `each` times; every increment must succeed.
async fn hammer(db: &Db, key: &Key<Article>, tasks: usize, each: usize) {
    let handles: Vec<_> = (0..tasks)
        .map(|_| {
            let (db, key) = (db.clone(), key.clone());
            tokio::spawn(async move {
                for _ in 0..each {
                    Article::increment_views(&db, &key, 1).await.unwrap();
                }
            })
        })
        .collect();
    for handle in handles {
        handle.await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sharded_counters_count_every_increment() {
    // R-S1: 16 tasks × 25 increments = 400, through increment_* and get.
    let db = Db::in_memory();
    let key = db.put(&article("rust")).await.unwrap();
    hammer(&db, &key, 16, 25).await;
    assert_eq!(Article::views_total(&db, &key).await.unwrap(), 400);
    let loaded = db.get(&key).await.unwrap().unwrap();
    assert_eq!(loaded.views, 400);
    assert_eq!(loaded.likes, 0);
    // Negative deltas count too, on a counter of another type and name.
    Article::increment_likes(&db, &key, 7).await.unwrap();
    Article::increment_likes(&db, &key, -2).await.unwrap();
    assert_eq!(Article::likes_total(&db, &key).await.unwrap(), 5);
    assert_eq!(db.get(&key).await.unwrap().unwrap().likes, 5);
}

#[tokio::test]
async fn an_increment_of_an_existing_shard_is_one_commit_without_a_transaction() {
    // Issue #29: the shard's count is incremented on the server. A shard that does not exist
    // yet is created in a transaction (begin, lookup, commit); after that, one commit each.
    let (backend, db) = Instrumented::db();
    let key = db.put(&article("fast")).await.unwrap();
    // `likes` has 4 shards: enough increments create them all.
    for _ in 0..64 {
        Article::increment_likes(&db, &key, 1).await.unwrap();
    }
    let before = backend.calls().len();
    for _ in 0..10 {
        Article::increment_likes(&db, &key, 2).await.unwrap();
    }
    let calls = backend.calls()[before..].to_vec();
    assert_eq!(
        calls,
        vec![Call::Commit; 10],
        "one commit per increment, nothing else"
    );
    assert_eq!(Article::likes_total(&db, &key).await.unwrap(), 84);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn counters_are_isolated_per_namespace_and_per_entity() {
    let db = Db::in_memory();
    let tenant = db.namespace("tenant-a").unwrap();
    for handle in [&db, &tenant] {
        handle.put(&article("rust")).await.unwrap();
        handle.put(&article("go")).await.unwrap();
    }
    hammer(&tenant, &article_key("rust"), 16, 25).await;
    Article::increment_views(&tenant, &article_key("go"), 3)
        .await
        .unwrap();
    Article::increment_views(&db, &article_key("rust"), 1)
        .await
        .unwrap();
    let in_tenant = tenant
        .get_many(&[article_key("rust"), article_key("go")])
        .await
        .unwrap();
    assert_eq!(in_tenant[0].as_ref().unwrap().views, 400);
    assert_eq!(in_tenant[1].as_ref().unwrap().views, 3);
    assert_eq!(
        Article::views_total(&db, &article_key("rust"))
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        Article::views_total(&db, &article_key("go")).await.unwrap(),
        0
    );
}

#[tokio::test]
async fn get_reads_the_counters_in_the_same_lookup_and_put_never_writes_them() {
    let (backend, db) = Instrumented::db();
    let mut written = article("rust");
    written.views = 999; // ignored: the counter lives in its shards
    let key = db.put(&written).await.unwrap();
    let commits = backend.commits();
    assert_eq!(commits.len(), 1);
    assert_eq!(commits[0].len(), 1, "put writes the article alone");
    Article::increment_views(&db, &key, 2).await.unwrap();
    Article::increment_likes(&db, &key, 1).await.unwrap();

    let before = backend.count(Call::Lookup);
    let loaded = db.get(&key).await.unwrap().unwrap();
    assert_eq!((loaded.views, loaded.likes), (2, 1));
    assert_eq!(
        backend.count(Call::Lookup) - before,
        1,
        "entity and shards come from one lookup"
    );
    let last = backend.lookups().pop().unwrap();
    assert_eq!(last.len(), 1 + 20 + 4);
    // Shards are root entities (not in the owner's entity group, R-E2) of their own kinds.
    assert!(last[1..].iter().all(|k| k.path().len() == 1));
    assert_eq!(last[1].kind(), "Article.views.shard");
    assert_eq!(last[21].kind(), "Article.likeCount.shard");
    // Their names are scattered (R-K4): no two shards share a name prefix.
    let prefixes: HashSet<&str> = last[1..21]
        .iter()
        .map(|k| &k.name().unwrap()[..6])
        .collect();
    assert_eq!(prefixes.len(), 20);

    // put again: the counter keeps its total.
    db.put(&written).await.unwrap();
    assert_eq!(db.get(&key).await.unwrap().unwrap().views, 2);
    // get_many fills each entity's counters, still with one lookup.
    db.put(&article("go")).await.unwrap();
    let before = backend.count(Call::Lookup);
    let both = db
        .get_many(&[article_key("go"), key.clone(), article_key("none")])
        .await
        .unwrap();
    assert_eq!(backend.count(Call::Lookup) - before, 1);
    assert_eq!(both[0].as_ref().unwrap().views, 0);
    assert_eq!(both[1].as_ref().unwrap().views, 2);
    assert!(both[2].is_none());
}

#[tokio::test]
async fn shards_never_appear_in_queries_and_are_deleted_with_their_owner() {
    let (backend, db) = Instrumented::db();
    let key = db.put(&article("rust")).await.unwrap();
    db.put(&article("go")).await.unwrap();
    for _ in 0..30 {
        Article::increment_views(&db, &key, 1).await.unwrap();
    }
    let page = db.query::<Article>().fetch().await.unwrap();
    assert_eq!(
        page.items.len(),
        2,
        "the kind holds two articles, not their shards"
    );
    // Queries fill the counters too.
    let rust = page
        .items
        .iter()
        .find(|a| a.slug.as_str() == "rust")
        .unwrap();
    assert_eq!(rust.views, 30);
    let streamed: Vec<Article> = db.query::<Article>().stream().try_collect().await.unwrap();
    assert_eq!(streamed.iter().map(|a| a.views).sum::<i64>(), 30);

    let commits_before = backend.count(Call::Commit);
    db.delete(&key).await.unwrap();
    assert_eq!(
        backend.count(Call::Commit) - commits_before,
        1,
        "one commit"
    );
    let deleted = backend.commits().pop().unwrap();
    assert_eq!(deleted.len(), 1 + 20 + 4, "the article and all its shards");
    let shards: Vec<RawKey> = deleted[1..].to_vec();
    let found = backend.engine().lookup(&shards, None).await.unwrap();
    assert!(found.iter().all(Option::is_none), "no shard is left behind");
    assert_eq!(Article::views_total(&db, &key).await.unwrap(), 0);
    // Re-created, the article starts from zero.
    db.put(&article("rust")).await.unwrap();
    assert_eq!(db.get(&key).await.unwrap().unwrap().views, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn under_latency_a_plain_counter_queues_and_a_sharded_one_spreads() {
    // With a 1 ms round trip, 8 writers × 100 transactional increments of one entity: the
    // engine's read-write transactions lock what they read (as Firestore's do), so the plain
    // counter's increments queue behind each other and all land (before locks, dozens were
    // lost to exhausted retries); the sharded counter spreads them over its shards. What the
    // queue costs in time is the `counters` benchmark's to measure.
    const WRITERS: usize = 8;
    const EACH: usize = 100;
    let db = Latency::db(Duration::from_millis(1));
    db.put(&account("ann")).await.unwrap();
    let plain: Vec<_> = (0..WRITERS)
        .map(|_| {
            let db = db.clone();
            tokio::spawn(async move {
                for _ in 0..EACH {
                    db.transaction(|tx| async move {
                        let mut a: Account = tx.get(&account_key("ann")).await?.unwrap();
                        a.balance += 1;
                        tx.put(&a).await?;
                        Ok::<_, Error>(())
                    })
                    .await
                    .unwrap();
                }
            })
        })
        .collect();
    for handle in plain {
        handle.await.unwrap();
    }
    let balance = db.get(&account_key("ann")).await.unwrap().unwrap().balance;
    assert_eq!(balance as usize, WRITERS * EACH);

    let key = db.put(&article("hot")).await.unwrap();
    hammer(&db, &key, WRITERS, EACH).await;
    assert_eq!(
        Article::views_total(&db, &key).await.unwrap(),
        (WRITERS * EACH) as i64
    );
}

#[tokio::test]
async fn counter_overflow_is_an_error_and_writes_nothing() {
    // Each of a counter's n shards holds at most i64::MAX / n either way, so its total always
    // fits an i64 and no read of it can fail (issue #26: increments that summed past i64 were
    // accepted, and every read of the owner failed from then on).
    let (backend, db) = Instrumented::db();
    let key = db.put(&article("big")).await.unwrap();
    let n = i64::from(Article::SCHEMA.counter("views").unwrap().shards);
    for delta in [i64::MAX, i64::MIN, i64::MAX / n + 1] {
        match Article::increment_views(&db, &key, delta).await {
            Err(Error::CounterOverflow { field, .. }) => assert_eq!(field, "views"),
            other => panic!("{delta}: {other:?}"),
        }
    }
    assert_eq!(Article::views_total(&db, &key).await.unwrap(), 0);
    // Full shards send an increment to the next one with room, until none has.
    let most = i64::MAX / n;
    for _ in 0..n {
        Article::increment_views(&db, &key, most).await.unwrap();
    }
    assert_eq!(Article::views_total(&db, &key).await.unwrap(), n * most);
    assert!(matches!(
        Article::increment_views(&db, &key, 1).await,
        Err(Error::CounterOverflow { .. })
    ));
    assert_eq!(db.get(&key).await.unwrap().unwrap().views, n * most);
    // Shards another program wrote past that: the total saturates, and reads still answer.
    let shards: Vec<_> = backend.lookups().pop().unwrap()[1..=n as usize].to_vec();
    let owner = db.bind(&key).unwrap().into_raw();
    let writes = shards
        .iter()
        .map(|shard| {
            let properties = datastore_entity::PropertyMap::from([
                (
                    "count",
                    datastore_entity::Property::excluded(Value::Integer(i64::MAX)),
                ),
                (
                    "owner",
                    datastore_entity::Property::excluded(Value::Key(owner.clone())),
                ),
            ]);
            datastore_entity::backend::Mutation::Upsert(
                shard.clone(),
                properties,
                datastore_entity::backend::Mask::Whole,
            )
        })
        .collect();
    backend.engine().commit(writes, None).await.unwrap();
    assert_eq!(Article::views_total(&db, &key).await.unwrap(), i64::MAX);
    assert_eq!(db.get(&key).await.unwrap().unwrap().views, i64::MAX);
    assert_eq!(
        db.query::<Article>().fetch().await.unwrap().items[0].views,
        i64::MAX
    );
}

fn config(version: i64) -> SiteConfig {
    SiteConfig {
        name: KeyName::new("site").unwrap(),
        banner: format!("banner v{version}"),
        version,
    }
}

#[tokio::test]
async fn replicas_are_written_in_one_commit_and_read_one_at_a_time() {
    // R-S2
    let (backend, db) = Instrumented::db();
    let key = db.put(&config(1)).await.unwrap();
    let commits = backend.commits();
    assert_eq!(commits.len(), 1, "one commit");
    assert_eq!(commits[0].len(), 6, "the entity and its 5 replicas");
    assert_eq!(commits[0][0], *key.raw());
    let replicas: HashSet<RawKey> = commits[0][1..].iter().cloned().collect();
    assert_eq!(replicas.len(), 5);
    assert!(
        replicas
            .iter()
            .all(|k| k.kind() == "SiteConfig.replica" && k.path().len() == 1)
    );

    // Each get reads one replica, chosen at random: over many reads, all of them.
    let mut read = HashSet::new();
    for _ in 0..200 {
        assert_eq!(db.get(&key).await.unwrap(), Some(config(1)));
        let lookup = backend.lookups().pop().unwrap();
        assert_eq!(lookup.len(), 1);
        assert!(
            replicas.contains(&lookup[0]),
            "{:?} is not a replica",
            lookup[0]
        );
        read.insert(lookup[0].clone());
    }
    assert_eq!(read, replicas);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replica_is_never_older_than_the_last_acknowledged_put() {
    let db = Db::in_memory();
    let key = db.put(&config(0)).await.unwrap();
    let reader = {
        let (db, key) = (db.clone(), key.clone());
        tokio::spawn(async move {
            let mut last = 0;
            for _ in 0..500 {
                let version = db.get(&key).await.unwrap().unwrap().version;
                assert!(version >= last, "read v{version} after v{last}");
                last = version;
                tokio::task::yield_now().await;
            }
        })
    };
    for version in 1..=200 {
        db.put(&config(version)).await.unwrap();
        // Acknowledged: every replica now holds it.
        for _ in 0..5 {
            assert_eq!(db.get(&key).await.unwrap().unwrap().version, version);
        }
    }
    reader.await.unwrap();
}

#[tokio::test]
async fn replicated_entities_appear_once_in_queries_and_are_deleted_with_their_replicas() {
    let (backend, db) = Instrumented::db();
    let key = db.put(&config(1)).await.unwrap();
    let other = SiteConfig {
        name: KeyName::new("admin").unwrap(),
        ..config(2)
    };
    db.put(&other).await.unwrap();
    let all = db.query::<SiteConfig>().fetch().await.unwrap().items;
    assert_eq!(all, vec![other.clone(), config(1)]);
    let tx_read = db
        .transaction(|tx| {
            let key = key.clone();
            async move { tx.get(&key).await }
        })
        .await
        .unwrap();
    assert_eq!(tx_read, Some(config(1)));

    db.delete(&key).await.unwrap();
    let deleted = backend.commits().pop().unwrap();
    assert_eq!(
        deleted.len(),
        6,
        "the entity and its 5 replicas, in one commit"
    );
    let found = backend.engine().lookup(&deleted, None).await.unwrap();
    assert!(found.iter().all(Option::is_none));
    assert_eq!(db.get(&key).await.unwrap(), None);
}

#[tokio::test]
async fn an_entity_written_without_its_replicas_is_still_read() {
    // Written by another tool, or before `#[replicated]` was added: the replica is missing,
    // so `get` reads the entity itself in a second lookup.
    let (backend, db) = Instrumented::db();
    let key = db.put(&config(3)).await.unwrap();
    let replicas: Vec<RawKey> = backend.commits()[0][1..].to_vec();
    let deletes = replicas
        .iter()
        .cloned()
        .map(datastore_entity::backend::Mutation::Delete)
        .collect();
    backend.engine().commit(deletes, None).await.unwrap();
    let before = backend.count(Call::Lookup);
    assert_eq!(db.get(&key).await.unwrap(), Some(config(3)));
    assert_eq!(backend.count(Call::Lookup) - before, 2);
    // A missing entity is None, also after the second lookup.
    let missing = SiteConfig::key(KeyName::new("none").unwrap());
    assert_eq!(db.get(&missing).await.unwrap(), None);
}

#[tokio::test]
async fn replicas_live_in_the_namespace_of_their_entity() {
    let db = Db::in_memory();
    let tenant = db.namespace("tenant-b").unwrap();
    let key = tenant.put(&config(7)).await.unwrap();
    assert_eq!(tenant.get(&key).await.unwrap(), Some(config(7)));
    // The default namespace has no such entity, and refuses tenant-b's key.
    assert_eq!(
        db.get(&SiteConfig::key(config(7).name)).await.unwrap(),
        None
    );
    assert!(matches!(
        db.get(&key).await,
        Err(datastore_entity::Error::WrongPartition { .. })
    ));
}

fn event(topic: &str, micros: i64) -> Event {
    Event {
        id: None,
        topic: topic.into(),
        at: Timestamp::from_micros(micros),
    }
}

#[tokio::test]
async fn a_sharded_index_spreads_writes_and_reads_them_back_in_order() {
    // R-S3: 240 events; the timeline is read newest first, 25 at a time, each event exactly
    // once, in order, with one cursor for all 8 shards.
    let (backend, db) = Instrumented::db();
    let events: Vec<Event> = (0..240)
        .map(|i| {
            event(
                if i % 3 == 0 { "a" } else { "b" },
                1_700_000_000_000_000 + i * 997,
            )
        })
        .collect();
    db.put_many(&events).await.unwrap();

    // The plain value is excluded; the companion spreads over the shards.
    let raw = db.query::<Event>().keys_only().fetch().await.unwrap().items;
    let stored = backend
        .engine()
        .lookup(
            &raw.iter().map(|k| k.raw().clone()).collect::<Vec<_>>(),
            None,
        )
        .await
        .unwrap();
    let mut shards = HashSet::new();
    for properties in stored.into_iter().flatten() {
        assert!(properties["at"].excluded);
        let Value::String(companion) = &properties["at_sharded"].value else {
            panic!("the companion is a string");
        };
        assert!(!properties["at_sharded"].excluded);
        shards.insert(companion[..1].to_owned());
    }
    assert_eq!(shards.len(), 8, "240 events land in all 8 shards");

    let mut cursor = None;
    let mut seen = Vec::new();
    loop {
        let queries = backend.count(Call::RunQuery);
        let page = Event::query_by_at(&db)
            .desc()
            .limit(25)
            .start_after(cursor)
            .fetch()
            .await
            .unwrap();
        assert!(
            backend.count(Call::RunQuery) - queries <= 8,
            "one query per shard at most"
        );
        seen.extend(page.items.iter().map(|e| e.at.as_micros()));
        match page.next {
            // The cursor survives the web: text and back.
            Some(next) => cursor = Some(next.to_string().parse::<Cursor>().unwrap()),
            None => break,
        }
    }
    let mut expected: Vec<i64> = events.iter().map(|e| e.at.as_micros()).collect();
    expected.sort_unstable_by(|a, b| b.cmp(a));
    assert_eq!(seen, expected);

    // Ascending, within a range, streamed.
    let from = Timestamp::from_micros(1_700_000_000_000_000 + 100 * 997);
    let to = Timestamp::from_micros(1_700_000_000_000_000 + 110 * 997);
    let range: Vec<i64> = Event::query_by_at(&db)
        .ge(from)
        .lt(to)
        .stream()
        .map_ok(|e| e.at.as_micros())
        .try_collect()
        .await
        .unwrap();
    assert_eq!(
        range,
        (100..110)
            .map(|i| 1_700_000_000_000_000 + i * 997)
            .collect::<Vec<_>>()
    );

    // With an equality filter on another property (the index(topic, at) declared on Event).
    let topic_a: Vec<Event> = Event::query_by_at(&db)
        .filter(Event::TOPIC.eq("a"))
        .desc()
        .limit(5)
        .fetch()
        .await
        .unwrap()
        .items;
    assert_eq!(topic_a.len(), 5);
    assert!(topic_a.iter().all(|e| e.topic == "a"));
    assert_eq!(topic_a[0].at.as_micros(), 1_700_000_000_000_000 + 237 * 997);
    assert!(topic_a.windows(2).all(|w| w[0].at > w[1].at));
}

#[tokio::test]
async fn a_sharded_cursor_resumes_after_concurrent_writes_and_refuses_other_queries() {
    let db = Db::in_memory();
    let events: Vec<Event> = (0..50).map(|i| event("x", i * 10)).collect();
    db.put_many(&events).await.unwrap();
    let first = Event::query_by_at(&db).limit(20).fetch().await.unwrap();
    let got: Vec<i64> = first.items.iter().map(|e| e.at.as_micros()).collect();
    assert_eq!(got, (0..20).map(|i| i * 10).collect::<Vec<_>>());
    // Written after the first page: an earlier one is not returned, a later one is.
    db.put_many(&[event("x", 5), event("x", 10_000)])
        .await
        .unwrap();
    let rest: Vec<i64> = Event::query_by_at(&db)
        .start_after(first.next.clone())
        .stream()
        .map_ok(|e| e.at.as_micros())
        .try_collect()
        .await
        .unwrap();
    let mut expected: Vec<i64> = (20..50).map(|i| i * 10).collect();
    expected.push(10_000);
    assert_eq!(rest, expected);

    // The cursor of the ascending query does not fit the descending one.
    let error = Event::query_by_at(&db)
        .desc()
        .start_after(first.next.clone())
        .fetch()
        .await
        .unwrap_err();
    assert!(matches!(error, Error::InvalidCursor { .. }), "{error}");
    // Nor does an ordinary query's cursor, nor an altered one.
    let plain = db.query::<Event>().limit(1).fetch().await.unwrap().next;
    assert!(matches!(
        Event::query_by_at(&db).start_after(plain).fetch().await,
        Err(Error::InvalidCursor { .. })
    ));
    let mut text = first.next.unwrap().to_string();
    text.replace_range(10..11, if &text[10..11] == "A" { "B" } else { "A" });
    assert!(matches!(
        Event::query_by_at(&db)
            .start_after(text.parse::<Cursor>().unwrap())
            .fetch()
            .await,
        Err(Error::InvalidCursor { .. })
    ));
}

#[test]
fn scale_schemas_describe_their_companions() {
    let schema = Article::SCHEMA;
    let views = schema.counter("views").unwrap();
    assert_eq!(
        (views.shards, views.kind, views.name),
        (20, "Article.views.shard", "views")
    );
    assert_eq!(
        schema.counter("likes").unwrap().kind,
        "Article.likeCount.shard"
    );
    assert!(
        schema.property("views").is_none(),
        "a counter is not stored on the article"
    );
    let replicas = SiteConfig::SCHEMA.replicas.as_ref().unwrap();
    assert_eq!((replicas.copies, replicas.kind), (5, "SiteConfig.replica"));
    let at = &Event::SCHEMA.sharded_indexes[0];
    assert_eq!((at.name, at.companion, at.shards), ("at", "at_sharded", 8));
    assert!(Event::SCHEMA.property("at").unwrap().excluded);
    assert!(!Event::SCHEMA.property("at_sharded").unwrap().excluded);
    // The index declared on `at` is the index of its companion.
    assert_eq!(Event::SCHEMA.indexes[0].properties[1].name, "at_sharded");
}

/// A counter in more shards than one commit holds.
#[derive(Entity, Debug, Clone, PartialEq)]
struct Crowded {
    #[key]
    name: KeyName,
    #[sharded(1000)]
    hits: i64,
}

#[tokio::test]
async fn owners_with_more_shards_than_a_commit_holds_are_deleted_shards_first() {
    // Issue #26: one commit of 1,001 mutations was refused (the crate took the legacy
    // Datastore's 500 for a limit), and the owner stayed forever. An owner and its 1,000
    // shards are one commit; owners whose shards' keys pass the 10 MiB of a commit have their
    // shards deleted first, in as many commits as they need, the owners last: a failure on
    // the way leaves owners that can be deleted again.
    let (backend, db) = Instrumented::db();
    let key = db
        .put(&Crowded {
            name: KeyName::new("crowd").unwrap(),
            hits: 0,
        })
        .await
        .unwrap();
    Crowded::increment_hits(&db, &key, 3).await.unwrap();
    let before = backend.commits().len();
    db.delete(&key).await.unwrap();
    let sizes: Vec<usize> = backend.commits()[before..].iter().map(Vec::len).collect();
    assert_eq!(sizes, [1_001]);
    assert_eq!(db.get(&key).await.unwrap(), None);
    assert_eq!(Crowded::hits_total(&db, &key).await.unwrap(), 0);
    // 9 owners of long names, which each shard's name spells: 9,000 shards' keys of about
    // 1.4 KB, over 12 MB.
    let keys: Vec<Key<Crowded>> = (0..9)
        .map(|i| Crowded::key(KeyName::new(format!("{i}-{}", "o".repeat(1_000))).unwrap()))
        .collect();
    let before = backend.commits().len();
    db.delete_many(&keys).await.unwrap();
    let commits = backend.commits()[before..].to_vec();
    let (owners, shards) = commits.split_last().unwrap();
    assert!(shards.len() >= 2, "{} commits of shards", shards.len());
    assert!(
        shards
            .iter()
            .flatten()
            .all(|k| k.kind() == "Crowded.hits.shard")
    );
    assert_eq!(shards.iter().map(Vec::len).sum::<usize>(), 9_000);
    assert_eq!(owners.len(), 9);
    assert!(owners.iter().all(|k| k.kind() == "Crowded"));
}

/// A replicated entity whose id is allocated on put.
#[derive(Entity, Debug, Clone, PartialEq)]
#[replicated(3)]
struct Notice {
    #[key]
    id: Option<KeyId>,
    text: String,
}

#[tokio::test]
async fn a_replicated_entity_without_an_id_gets_one_before_its_replicas_are_written() {
    // Replicas are keyed by the entity's complete key: its id is allocated first, then the
    // entity and its replicas are one commit.
    let (backend, db) = Instrumented::db();
    let key = db
        .put(&Notice {
            id: None,
            text: "hello".into(),
        })
        .await
        .unwrap();
    assert!(key.id().is_some());
    assert_eq!(backend.count(Call::Ids), 1);
    let commit = backend.commits().pop().unwrap();
    assert_eq!(commit.len(), 1 + 3);
    assert_eq!(commit[0], *key.raw());
    assert!(commit[1..].iter().all(|k| k.kind() == "Notice.replica"));
    assert_eq!(db.get(&key).await.unwrap().unwrap().text, "hello");
}

/// A reading with a signed integer behind a sharded index.
#[derive(Entity, Debug, Clone, PartialEq)]
struct Reading {
    #[key]
    id: Option<KeyId>,
    #[sharded_index(4)]
    level: i64,
}

#[tokio::test]
async fn a_sharded_index_of_integers_orders_negative_and_positive_values() {
    // README: `#[sharded_index(n)]` takes timestamps or integers; the shards keep the
    // integers' order across zero (the prefix encodes them sign-flipped).
    let db = Db::in_memory();
    let levels: Vec<i64> = (-30..=30)
        .map(|i| i * 37 - 11)
        .chain([i64::MIN, i64::MAX])
        .collect();
    let readings: Vec<Reading> = levels
        .iter()
        .map(|&level| Reading { id: None, level })
        .collect();
    db.put_many(&readings).await.unwrap();
    let mut ascending = levels.clone();
    ascending.sort_unstable();
    let mut seen = Vec::new();
    let mut cursor = None;
    loop {
        let page = Reading::query_by_level(&db)
            .limit(7)
            .start_after(cursor)
            .fetch()
            .await
            .unwrap();
        seen.extend(page.items.iter().map(|r| r.level));
        match page.next {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    assert_eq!(seen, ascending);
    let descending: Vec<i64> = Reading::query_by_level(&db)
        .desc()
        .limit(5)
        .fetch()
        .await
        .unwrap()
        .items
        .iter()
        .map(|r| r.level)
        .collect();
    let mut expected = ascending.clone();
    expected.reverse();
    assert_eq!(descending, expected[..5]);
    let negative: Vec<i64> = Reading::query_by_level(&db)
        .ge(-100)
        .lt(0)
        .fetch()
        .await
        .unwrap()
        .items
        .iter()
        .map(|r| r.level)
        .collect();
    let expected: Vec<i64> = ascending
        .iter()
        .copied()
        .filter(|l| (-100..0).contains(l))
        .collect();
    assert_eq!(negative, expected);
}

#[tokio::test]
async fn a_query_of_a_kind_with_counters_takes_one_more_lookup_per_page() {
    // README: queries fill the counters with one more lookup per page (every shard of every
    // result, in one call), and each increment's attempts go to shards chosen at random.
    let (backend, db) = Instrumented::db();
    let articles: Vec<Article> = (0..6).map(|i| article(&format!("a{i}"))).collect();
    let keys = db.put_many(&articles).await.unwrap();
    for key in &keys {
        Article::increment_views(&db, key, 2).await.unwrap();
    }
    let mut cursor = None;
    let mut pages = 0;
    loop {
        let lookups = backend.count(Call::Lookup);
        let page = db
            .query::<Article>()
            .limit(4)
            .start_after(cursor)
            .fetch()
            .await
            .unwrap();
        assert_eq!(
            backend.count(Call::Lookup) - lookups,
            1,
            "one lookup for the page"
        );
        assert!(page.items.iter().all(|a| a.views == 2));
        pages += 1;
        match page.next {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    assert_eq!(pages, 2);
    // 40 increments of one article: their shards are spread (a random one each time).
    let before = backend.commits().len();
    for _ in 0..40 {
        Article::increment_views(&db, &keys[0], 1).await.unwrap();
    }
    let shards: HashSet<RawKey> = backend.commits()[before..]
        .iter()
        .flatten()
        .cloned()
        .collect();
    assert!(
        shards.len() >= 10,
        "{} shards of 20 for 40 increments",
        shards.len()
    );
}
