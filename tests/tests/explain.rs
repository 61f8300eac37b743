//! Query Explain: the embedded engine's planner says which plan answers a query — the kind's
//! keys, one property's built-in index, a zigzag merge of equality filters' indexes, a
//! declared composite index, merged branches, or every entity of the kind — and, analyzed,
//! what it read; the cloud backend sends the service's `explain_options` (asserted on the
//! request in `runtime/src/backend/cloud/mod.rs`), and what the emulators answer is recorded.

use std::sync::Arc;

use datastore_entity::backend::embedded::Embedded;
use datastore_entity::prelude::*;
use datastore_entity::{Error, Explanation};
use datastore_entity_tests::harness::{Backend, Emulator, PROJECT};

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(index(author, -published))]
struct Post {
    #[key]
    id: KeyId,
    author: String,
    tag: String,
    #[index(monotonic)]
    published: Timestamp,
    score: i64,
}

fn post(id: i64, author: &str, tag: &str) -> Post {
    Post {
        id: KeyId::new(id).unwrap(),
        author: author.into(),
        tag: tag.into(),
        published: Timestamp::from_micros(1_700_000_000_000_000 + id),
        score: id,
    }
}

async fn db() -> Db {
    let db = Db::in_memory();
    let posts: Vec<Post> = (1..=10)
        .map(|i| {
            post(
                i,
                ["ann", "bob", "eve"][(i % 3) as usize],
                ["x", "y"][(i % 2) as usize],
            )
        })
        .collect();
    db.put_many(&posts).await.unwrap();
    db
}

fn assert_plan(plan: &Explanation, says: &str, indexes: &[&str]) {
    assert!(plan.plan.contains(says), "{plan}");
    assert_eq!(plan.indexes_used, indexes, "{plan}");
    assert!(plan.stats.is_none(), "explain runs nothing");
    assert!(plan.to_string().starts_with("plan: "), "{plan}");
}

#[tokio::test]
async fn a_query_without_filters_reads_the_kinds_keys() {
    let plan = db().await.query::<Post>().explain().await.unwrap();
    assert_plan(&plan, "the kind's keys", &["Post (__key__ ASC)"]);
}

#[tokio::test]
async fn equality_filters_on_two_properties_are_a_zigzag_merge() {
    let plan = db()
        .await
        .query::<Post>()
        .filter(Post::AUTHOR.eq("ann"))
        .filter(Post::TAG.eq("x"))
        .explain()
        .await
        .unwrap();
    assert_plan(
        &plan,
        "zigzag merge join of 2 built-in indexes",
        &[
            "Post (author ASC, __key__ ASC)",
            "Post (tag ASC, __key__ ASC)",
        ],
    );
}

#[tokio::test]
async fn a_range_reads_one_built_in_index_in_its_direction() {
    let db = db().await;
    let forwards = db
        .query::<Post>()
        .filter(Post::SCORE.gt(3))
        .explain()
        .await
        .unwrap();
    assert_plan(
        &forwards,
        "built-in index of `score`, forwards",
        &["Post (score ASC, __key__ ASC)"],
    );
    let backwards = db
        .query::<Post>()
        .order(Post::SCORE.desc())
        .explain()
        .await
        .unwrap();
    assert!(backwards.plan.contains("backwards"), "{backwards}");
}

#[tokio::test]
async fn an_equality_and_an_order_read_the_declared_composite_index() {
    let plan = db()
        .await
        .query::<Post>()
        .filter(Post::AUTHOR.eq("ann"))
        .order(Post::PUBLISHED.desc())
        .explain()
        .await
        .unwrap();
    assert_plan(
        &plan,
        "declared composite index, forwards",
        &["Post (author ASC, published DESC, __key__ DESC)"],
    );
}

#[tokio::test]
async fn an_in_filter_is_branches_merged() {
    let plan = db()
        .await
        .query::<Post>()
        .filter(Post::AUTHOR.is_in(["ann", "eve"]))
        .explain()
        .await
        .unwrap();
    assert_plan(&plan, "2 branches", &["Post (author ASC, __key__ ASC)"]);
}

#[tokio::test]
async fn without_strict_index_mode_an_unserved_query_evaluates_the_kind() {
    let db = Db::with_backend(Arc::new(Embedded::in_memory().strict_indexes(false)));
    db.put(&post(1, "ann", "x")).await.unwrap();
    let query = || {
        db.query::<Post>()
            .filter(Post::TAG.eq("x"))
            .order(Post::SCORE.asc())
    };
    let plan = query().explain().await.unwrap();
    // The index named is the one the service reads (issue #48), which strict mode asks for.
    assert_plan(
        &plan,
        "every entity of the kind",
        &["Post (tag ASC, score ASC, __key__ ASC)"],
    );
    // In strict mode the same query is refused, explained or not, naming that index.
    let strict = Db::in_memory();
    let refused = strict
        .query::<Post>()
        .filter(Post::TAG.eq("x"))
        .order(Post::SCORE.asc())
        .explain()
        .await;
    assert!(
        matches!(&refused, Err(Error::MissingIndex { index_yaml, .. })
            if index_yaml.contains("- name: tag\n  - name: score\n")),
        "{refused:?}"
    );
}

#[tokio::test]
async fn explain_analyze_returns_the_page_and_what_it_read() {
    let db = db().await;
    let query = || db.query::<Post>().filter(Post::AUTHOR.eq("ann")).limit(2);
    let (page, plan) = query().explain_analyze().await.unwrap();
    assert_eq!(page.items, query().fetch().await.unwrap().items);
    assert_eq!(page.items.len(), 2);
    let stats = plan.stats.clone().expect("analyzed");
    assert_eq!(stats.results_returned, 2);
    assert_eq!(stats.entities_scanned, 2, "{plan}");
    // The index entries of the page, and one more to know whether the page is the last.
    assert!((2..=3).contains(&stats.index_entries_scanned), "{plan}");
    assert!(plan.to_string().contains("returned 2 results"), "{plan}");
    // A count reads no entity: analyzed keys only.
    let (keys, plan) = db
        .query::<Post>()
        .filter(Post::SCORE.ge(5))
        .explain_analyze()
        .await
        .unwrap();
    assert_eq!(keys.items.len(), 6);
    assert_eq!(plan.stats.unwrap().results_returned, 6);
}

/// What Google's emulators answer to Query Explain.
#[tokio::test]
async fn the_emulators_answer_to_explain_is_recorded() {
    for backend in [Backend::Firestore, Backend::Datastore] {
        let emulator = match Emulator::start(backend) {
            Ok(emulator) => emulator,
            Err(reason) if std::env::var_os("CI").is_some() => panic!("CI needs it: {reason}"),
            Err(reason) => return eprintln!("skipped: {reason}"),
        };
        let db = Db::cloud_builder(PROJECT)
            .endpoint(format!("http://127.0.0.1:{}", emulator.port))
            .build()
            .await
            .unwrap();
        db.put(&post(1, "ann", "x")).await.unwrap();
        // Both answer the query and ignore `explain_options`: no plan, no statistics.
        let plan = db.query::<Post>().explain().await.unwrap();
        assert!(plan.plan.contains("did not explain"), "{backend:?}: {plan}");
        assert!(
            plan.indexes_used.is_empty() && plan.stats.is_none(),
            "{plan:?}"
        );
        let (page, plan) = db.query::<Post>().explain_analyze().await.unwrap();
        assert_eq!(page.items, [post(1, "ann", "x")], "{backend:?}");
        assert!(plan.stats.is_none(), "{backend:?}: {plan:?}");
    }
}

/// The engine served to the cloud backend explains as Google Cloud does: its indexes named as
/// the service names them, and, analyzed, what it read with the reads it bills.
#[tokio::test]
async fn the_servers_explain_is_the_engines_plan_as_the_service_says_it() {
    use datastore_entity_tests::harness::server_host;
    let db = Db::cloud_builder(PROJECT)
        .endpoint(format!("http://{}", server_host()))
        .build()
        .await
        .unwrap()
        .namespace("explain-served")
        .unwrap();
    let posts: Vec<Post> = (1..=4)
        .map(|i| post(i, ["ann", "bob"][(i % 2) as usize], "x"))
        .collect();
    db.put_many(&posts).await.unwrap();
    let query = || db.query::<Post>().filter(Post::AUTHOR.eq("ann"));
    let plan = query().explain().await.unwrap();
    assert_eq!(plan.plan, "the service's plan");
    assert_eq!(plan.indexes_used, ["Post (author ASC, __name__ ASC)"]);
    assert!(plan.stats.is_none(), "{plan}");
    let (page, plan) = query().explain_analyze().await.unwrap();
    assert_eq!(page.items, query().fetch().await.unwrap().items);
    assert_eq!(page.items.len(), 2);
    let stats = plan.stats.expect("analyzed");
    assert_eq!(
        (stats.results_returned, stats.entities_scanned),
        (2, 2),
        "{stats:?}"
    );
    assert!((2..=3).contains(&stats.index_entries_scanned), "{stats:?}");
    assert_eq!(stats.read_operations, Some(2));
    assert!(stats.execution_duration.is_some_and(|d| !d.is_zero()));
}

#[tokio::test]
async fn a_distinct_page_reads_the_combinations_it_returns_not_the_entries_between() {
    // Issue #49: a `distinct_on` query read every remaining row of the kind for each page
    // (1,000 distinct values: 27 s). The engine seeks from one combination to the next.
    use datastore_entity::backend::{PropertyOrder, QuerySpec};
    let db = Db::in_memory();
    let posts: Vec<Post> = (1..=2_000)
        .map(|i| post(i, &format!("author-{:02}", i % 20), "x"))
        .collect();
    db.put_many(&posts).await.unwrap();
    let spec = QuerySpec {
        partition: db.partition().clone(),
        kind: "Post".to_owned(),
        orders: vec![PropertyOrder {
            property: "author".to_owned(),
            direction: datastore_entity::Direction::Ascending,
        }],
        distinct_on: vec!["author".to_owned()],
        limit: Some(5),
        ..QuerySpec::default()
    };
    let (page, plan) = db.backend().explain(&spec, true, None).await.unwrap();
    let page = page.expect("analyzed");
    assert_eq!(page.results.len(), 5);
    assert!(page.more_results);
    let stats = plan.stats.expect("analyzed");
    // Five combinations and the one that says more follow: not the 100 posts of each.
    assert!(stats.index_entries_scanned <= 6, "{stats:?}");
    // The next page starts at the sixth author, its cost the same.
    let next = QuerySpec {
        start_cursor: Some(page.end_cursor),
        ..spec
    };
    let (page, plan) = db.backend().explain(&next, true, None).await.unwrap();
    let page = page.expect("analyzed");
    let authors: Vec<&datastore_entity::Value> = page
        .results
        .iter()
        .map(|r| &r.properties.get("author").unwrap().value)
        .collect();
    assert_eq!(
        authors[0],
        &datastore_entity::Value::String("author-05".to_owned())
    );
    assert!(plan.stats.unwrap().index_entries_scanned <= 6);
}
