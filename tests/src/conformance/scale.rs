//! The scale helpers on every backend: sharded counters (R-S1), replicas (R-S2) and
//! sharded indexes (R-S3).

use datastore_entity::prelude::*;

use crate::harness::Ctx;
use crate::{Article, Event, Priority, SiteConfig, Status};

#[macro_export]
macro_rules! scale_tests {
    ($backend:expr) => {
        $crate::conformance!($backend;
            scale_a_sharded_counter_counts_every_increment,
            scale_counter_totals_of_several_counters_and_entities,
            scale_delete_removes_the_shards,
            scale_a_replicated_entity_is_written_read_updated_and_deleted,
            scale_a_sharded_index_pages_newest_first_and_resumes,
        );
    };
}

fn article(slug: &str) -> Article {
    Article {
        slug: KeyName::new(slug).unwrap(),
        title: format!("About {slug}"),
        status: Status::Published,
        priority: Priority(2),
        views: 0,
        likes: 0,
    }
}

/// The shards of `Article::views`, as keys of a kind of their own.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(kind = "Article.views.shard")]
struct ViewShard {
    #[key]
    name: String,
}

/// The replicas of `SiteConfig`, as keys of a kind of their own.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(kind = "SiteConfig.replica")]
struct ConfigReplica {
    #[key]
    name: String,
}

pub async fn scale_a_sharded_counter_counts_every_increment(t: Ctx) {
    let key = t.db.put(&article("scale-hot")).await.unwrap();
    let tasks: Vec<_> = (0..4)
        .map(|_| {
            let (db, key) = (t.db.clone(), key.clone());
            tokio::spawn(async move {
                for _ in 0..10 {
                    Article::increment_views(&db, &key, 1).await.unwrap();
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(Article::views_total(&t.db, &key).await.unwrap(), 40);
    let loaded = t.db.get(&key).await.unwrap().unwrap();
    assert_eq!(loaded.views, 40);
    assert_eq!(loaded.likes, 0);
    assert_eq!(loaded.title, "About scale-hot");
    // Queries fill the counter too.
    let queried = t.db.query::<Article>().fetch().await.unwrap().items;
    assert_eq!(queried.len(), 1);
    assert_eq!(queried[0].views, 40);
}

pub async fn scale_counter_totals_of_several_counters_and_entities(t: Ctx) {
    let rust = t.db.put(&article("scale-rust")).await.unwrap();
    let go = t.db.put(&article("scale-go")).await.unwrap();
    for _ in 0..3 {
        Article::increment_views(&t.db, &rust, 2).await.unwrap();
    }
    Article::increment_views(&t.db, &go, 5).await.unwrap();
    Article::increment_likes(&t.db, &rust, 7).await.unwrap();
    Article::increment_likes(&t.db, &rust, -2).await.unwrap();
    assert_eq!(Article::views_total(&t.db, &rust).await.unwrap(), 6);
    assert_eq!(Article::views_total(&t.db, &go).await.unwrap(), 5);
    assert_eq!(Article::likes_total(&t.db, &rust).await.unwrap(), 5);
    assert_eq!(Article::likes_total(&t.db, &go).await.unwrap(), 0);
    let both = t.db.get_many(&[rust.clone(), go.clone()]).await.unwrap();
    let counts: Vec<(i64, i32)> = both
        .iter()
        .map(|a| a.as_ref().map(|a| (a.views, a.likes)).unwrap())
        .collect();
    assert_eq!(counts, [(6, 5), (5, 0)]);
    // A put never writes the counters: the totals stay.
    let mut stale = article("scale-rust");
    stale.views = 1_000;
    stale.title = "Renamed".into();
    t.db.put(&stale).await.unwrap();
    let loaded = t.db.get(&rust).await.unwrap().unwrap();
    assert_eq!((loaded.title.as_str(), loaded.views), ("Renamed", 6));
    // A counter of an entity never written counts from zero.
    let ghost = Article::key(KeyName::new("scale-ghost").unwrap());
    assert_eq!(Article::views_total(&t.db, &ghost).await.unwrap(), 0);
}

pub async fn scale_delete_removes_the_shards(t: Ctx) {
    let key = t.db.put(&article("scale-gone")).await.unwrap();
    for _ in 0..12 {
        Article::increment_views(&t.db, &key, 1).await.unwrap();
    }
    let shards =
        t.db.query::<ViewShard>()
            .keys_only()
            .fetch()
            .await
            .unwrap()
            .items;
    assert!(
        (1..=12).contains(&shards.len()),
        "12 increments touch between 1 and 12 of the 20 shards: {shards:?}"
    );
    t.db.delete(&key).await.unwrap();
    assert_eq!(t.db.get(&key).await.unwrap(), None);
    let left =
        t.db.query::<ViewShard>()
            .keys_only()
            .fetch()
            .await
            .unwrap()
            .items;
    assert_eq!(left, []);
    assert_eq!(Article::views_total(&t.db, &key).await.unwrap(), 0);
    // Written again, the article starts from zero.
    t.db.put(&article("scale-gone")).await.unwrap();
    assert_eq!(t.db.get(&key).await.unwrap().unwrap().views, 0);
}

fn config(name: &str, version: i64) -> SiteConfig {
    SiteConfig {
        name: KeyName::new(name).unwrap(),
        banner: format!("banner v{version}"),
        version,
    }
}

pub async fn scale_a_replicated_entity_is_written_read_updated_and_deleted(t: Ctx) {
    let key = t.db.put(&config("scale-site", 1)).await.unwrap();
    let replicas =
        t.db.query::<ConfigReplica>()
            .keys_only()
            .fetch()
            .await
            .unwrap()
            .items;
    assert_eq!(replicas.len(), 5);
    for _ in 0..20 {
        assert_eq!(t.db.get(&key).await.unwrap(), Some(config("scale-site", 1)));
    }
    t.db.put(&config("scale-site", 2)).await.unwrap();
    // Never older than the last acknowledged put, whichever replica is read.
    for _ in 0..20 {
        assert_eq!(t.db.get(&key).await.unwrap(), Some(config("scale-site", 2)));
    }
    // Queries see each entity once; a transaction reads it too.
    t.db.put(&config("scale-admin", 7)).await.unwrap();
    let all = t.db.query::<SiteConfig>().fetch().await.unwrap().items;
    assert_eq!(all, [config("scale-admin", 7), config("scale-site", 2)]);
    let in_tx =
        t.db.transaction(|tx| {
            let key = key.clone();
            async move { tx.get(&key).await }
        })
        .await
        .unwrap();
    assert_eq!(in_tx, Some(config("scale-site", 2)));
    t.db.delete(&key).await.unwrap();
    assert_eq!(t.db.get(&key).await.unwrap(), None);
    let left =
        t.db.query::<ConfigReplica>()
            .keys_only()
            .fetch()
            .await
            .unwrap()
            .items;
    assert_eq!(left.len(), 5, "the admin config's replicas are left");
    let all = t.db.query::<SiteConfig>().fetch().await.unwrap().items;
    assert_eq!(all, [config("scale-admin", 7)]);
}

fn event(topic: &str, micros: i64) -> Event {
    Event {
        id: None,
        topic: topic.into(),
        at: Timestamp::from_micros(micros),
    }
}

pub async fn scale_a_sharded_index_pages_newest_first_and_resumes(t: Ctx) {
    const BASE: i64 = 1_700_000_000_000_000;
    let events: Vec<Event> = (0..60)
        .map(|i| event(if i % 3 == 0 { "a" } else { "b" }, BASE + i * 1_000))
        .collect();
    t.db.put_many(&events).await.unwrap();
    let mut seen = Vec::new();
    let mut cursor: Option<Cursor> = None;
    let mut pages = 0;
    loop {
        let page = Event::query_by_at(&t.db)
            .desc()
            .limit(25)
            .start_after(cursor)
            .fetch()
            .await
            .unwrap();
        pages += 1;
        seen.extend(page.items.iter().map(|e| (e.at.as_micros() - BASE) / 1_000));
        match page.next {
            Some(next) => cursor = Some(next.to_string().parse().unwrap()),
            None => break,
        }
        assert!(pages < 10, "paging does not end");
    }
    assert_eq!(pages, 3);
    assert_eq!(seen, (0..60).rev().collect::<Vec<i64>>());

    // Resumed after writes: newer events are behind the cursor (skipped), older ahead.
    let first = Event::query_by_at(&t.db)
        .desc()
        .limit(10)
        .fetch()
        .await
        .unwrap();
    assert_eq!(
        first
            .items
            .iter()
            .map(|e| (e.at.as_micros() - BASE) / 1_000)
            .collect::<Vec<_>>(),
        (50..60).rev().collect::<Vec<i64>>()
    );
    t.db.put_many(&[event("c", BASE + 100_000), event("c", BASE - 5_000)])
        .await
        .unwrap();
    let rest: Vec<i64> = Event::query_by_at(&t.db)
        .desc()
        .start_after(first.next)
        .stream()
        .map_ok(|e| (e.at.as_micros() - BASE) / 1_000)
        .try_collect()
        .await
        .unwrap();
    let mut expected: Vec<i64> = (0..50).rev().collect();
    expected.push(-5);
    assert_eq!(rest, expected);
    // With an equality filter on another property (the declared index(topic, at)).
    let topic_a: Vec<i64> = Event::query_by_at(&t.db)
        .filter(Event::TOPIC.eq("a"))
        .desc()
        .limit(4)
        .fetch()
        .await
        .unwrap()
        .items
        .iter()
        .map(|e| (e.at.as_micros() - BASE) / 1_000)
        .collect();
    assert_eq!(topic_a, [57, 54, 51, 48]);
}
