//! The scale helpers of Google's pages: the 500/50/5 ramp and the bulk writer paced by it
//! (R-S4, on a paused tokio clock), migrations — `rollout`, parallel reads, the copy job and
//! its resume after a crash (R-S5, on the embedded engine and the Firestore emulator) — and
//! queues that resume from the last processed value (R-Q4).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use datastore_entity::migrate::{self, CopyJob, CopyState, Found};
use datastore_entity::prelude::*;
use datastore_entity::{BulkWriter, Diagnostics, RampUp, RetryPolicy};
use datastore_entity_tests::Instrumented;
use datastore_entity_tests::harness::{self, Backend};
use futures_util::FutureExt as _;

#[derive(Entity, Debug, Clone, PartialEq)]
struct Item {
    #[key]
    name: KeyName,
    n: i64,
}

fn items(count: usize) -> Vec<Item> {
    (0..count)
        .map(|i| Item {
            // Sequential names, the R-K4 anti-pattern: the writer's order must scatter them.
            name: KeyName::new(format!("item{i:05}")).unwrap(),
            n: i as i64,
        })
        .collect()
}

const MINUTE: Duration = Duration::from_secs(60);

#[test]
fn r_s4_the_ramp_is_500_then_50_percent_more_every_5_minutes() {
    let ramp = RampUp::new();
    assert_eq!(ramp.rate_at(Duration::ZERO), 500.0);
    assert_eq!(ramp.rate_at(5 * MINUTE - Duration::from_millis(1)), 500.0);
    assert_eq!(ramp.rate_at(5 * MINUTE), 750.0);
    assert_eq!(ramp.rate_at(10 * MINUTE), 1125.0);
    let at_90 = ramp.rate_at(90 * MINUTE);
    assert_eq!(at_90, 500.0 * 1.5_f64.powi(18));
    assert_eq!(at_90.floor(), 738_945.0);
    assert!(ramp.rate_at(24 * 60 * MINUTE).is_finite());
    let warm = RampUp::new().starting_at(2_000.0).capped_at(2_500.0);
    assert_eq!(warm.rate_at(Duration::ZERO), 2_000.0);
    assert_eq!(warm.rate_at(5 * MINUTE), 2_500.0);
    assert_eq!(RampUp::new().starting_at(0.0).rate_at(Duration::ZERO), 1.0);
}

#[tokio::test(start_paused = true)]
async fn r_s4_the_limiter_paces_operations_to_the_ramp() {
    let limiter = RampUp::new().limiter();
    let start = tokio::time::Instant::now();
    for _ in 0..10 {
        limiter.acquire(500).await;
    }
    // 10 batches of 500 at 500/s: the tenth starts 9 s in.
    assert_eq!(start.elapsed(), Duration::from_secs(9));
    // Five minutes later the ramp allows 750/s: 1,500 operations take 2 s more.
    tokio::time::advance(5 * MINUTE).await;
    limiter.acquire(1).await; // pays the time before: starts at once
    let at = tokio::time::Instant::now();
    limiter.acquire(749).await;
    limiter.acquire(750).await;
    limiter.acquire(1).await;
    assert_eq!(at.elapsed(), Duration::from_secs(2));
    assert_eq!(limiter.rate(), 750.0);
}

#[tokio::test(start_paused = true)]
async fn r_s4_tasks_sharing_a_limiter_are_paced_together() {
    let limiter = Arc::new(RampUp::new().limiter());
    let start = tokio::time::Instant::now();
    let tasks: Vec<_> = (0..4)
        .map(|_| {
            let limiter = limiter.clone();
            tokio::spawn(async move {
                for _ in 0..5 {
                    limiter.acquire(100).await;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    // 2,000 operations at 500/s: the last 100 start at 3.8 s.
    assert_eq!(start.elapsed(), Duration::from_millis(3_800));
}

/// A `Db` on an instrumented engine, watched on tokio's (paused) clock.
fn instrumented() -> (Arc<Instrumented>, Db) {
    let (backend, db) = Instrumented::db();
    let start = tokio::time::Instant::now();
    (
        backend,
        db.watch(Diagnostics::new().clock(move || start.elapsed())),
    )
}

#[tokio::test(start_paused = true)]
async fn r_s4_the_bulk_writer_commits_at_most_500_scattered_at_the_ramps_pace() {
    let (backend, db) = instrumented();
    let all = items(2_000);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    let start = tokio::time::Instant::now();
    let keys = BulkWriter::new(&db)
        .on_progress(move |p| record.lock().unwrap().push(*p))
        .put_all(&all)
        .await
        .unwrap();
    // Keys in input order; everything written.
    assert_eq!(
        keys,
        all.iter()
            .map(|i| Item::key(i.name.clone()))
            .collect::<Vec<_>>()
    );
    assert_eq!(db.query::<Item>().count().await.unwrap(), 2_000);
    // Four commits of 500 at 500/s: the last starts 3 s in.
    let commits = backend.commits();
    assert_eq!(commits.iter().map(Vec::len).collect::<Vec<_>>(), [500; 4]);
    assert_eq!(start.elapsed(), Duration::from_secs(3));
    // Scattered: each commit holds names from all over the range, not one run of them.
    for commit in &commits {
        let mut numbers: Vec<usize> = commit
            .iter()
            .map(|k| k.name().unwrap()[4..].parse().unwrap())
            .collect();
        numbers.sort_unstable();
        assert!(numbers[0] < 100 && numbers[499] > 1_900, "{numbers:?}");
    }
    let progress = seen.lock().unwrap();
    assert_eq!(
        progress.iter().map(|p| p.done).collect::<Vec<_>>(),
        [500, 1_000, 1_500, 2_000]
    );
    assert!(progress.iter().all(|p| p.total == 2_000 && p.retries == 0));
    // Neither the sequential names (R-K4) nor the pace (R-S4) is reported.
    assert_eq!(db.diagnostics(), []);
}

#[tokio::test(start_paused = true)]
async fn r_s4_the_bulk_writer_retries_an_outage_and_reports_what_it_wrote() {
    let (backend, db) = instrumented();
    let all = items(1_500);
    backend.fail_commits.store(2, Ordering::SeqCst);
    let retries = Arc::new(AtomicUsize::new(0));
    let seen = retries.clone();
    let mut writer = BulkWriter::new(&db)
        .retry(RetryPolicy {
            max_attempts: 3,
            ..RetryPolicy::default()
        })
        .on_progress(move |p| seen.store(p.retries as usize, Ordering::SeqCst));
    writer.put_all(&all).await.unwrap();
    assert_eq!(retries.load(Ordering::SeqCst), 2);
    assert_eq!(db.query::<Item>().count().await.unwrap(), 1_500);

    // An outage that outlasts the retries, after two commits: those two are reported.
    writer
        .delete_all(
            &all.iter()
                .map(|i| Item::key(i.name.clone()))
                .collect::<Vec<_>>(),
        )
        .await
        .unwrap();
    let failing = backend.clone();
    let mut commits = 0;
    let mut writer = BulkWriter::new(&db)
        .retry(RetryPolicy {
            max_attempts: 3,
            ..RetryPolicy::default()
        })
        .on_progress(move |_| {
            commits += 1;
            if commits == 2 {
                failing.fail_commits.store(usize::MAX / 2, Ordering::SeqCst);
            }
        });
    let error = writer.put_all(&all).await.unwrap_err();
    backend.fail_commits.store(0, Ordering::SeqCst);
    assert!(
        matches!(&error, Error::PartiallyWritten { written: 1_000, source } if matches!(**source, Error::Unavailable { .. })),
        "{error:?}"
    );
    assert_eq!(db.query::<Item>().count().await.unwrap(), 1_000);
    // Writing them all again is safe.
    writer.put_all(&all).await.unwrap();
    assert_eq!(db.query::<Item>().count().await.unwrap(), 1_500);
}

/// A document of about 50 KB.
#[derive(Entity, Debug, Clone, PartialEq)]
struct Page {
    #[key]
    name: KeyName,
    #[exclude_from_index]
    text: String,
}

#[tokio::test(start_paused = true)]
async fn r_s4_the_bulk_writer_keeps_commits_under_10_mib_and_retries_contention() {
    // README: commits of at most 500 mutations and under the service's 10 MiB; contention and
    // outages retried.
    let (backend, db) = instrumented();
    let pages: Vec<Page> = (0..500)
        .map(|i| Page {
            name: KeyName::new(format!("page{i:04}")).unwrap(),
            text: "p".repeat(50_000),
        })
        .collect();
    backend.abort_commits.store(2, Ordering::SeqCst);
    let retries = Arc::new(AtomicUsize::new(0));
    let seen = retries.clone();
    BulkWriter::new(&db)
        .on_progress(move |p| seen.store(p.retries as usize, Ordering::SeqCst))
        .put_all(&pages)
        .await
        .unwrap();
    assert_eq!(
        retries.load(Ordering::SeqCst),
        2,
        "two aborted commits sent again"
    );
    let commits = backend.commits();
    let sizes: Vec<usize> = commits.iter().map(Vec::len).collect();
    // 10 MiB holds 209 pages of 50 KB (with their keys): no commit holds more.
    assert!(sizes.iter().all(|&n| n <= 209), "{sizes:?}");
    assert!(sizes.len() >= 3 + 2, "{sizes:?}");
    assert_eq!(db.query::<Page>().count().await.unwrap(), 500);
}

#[tokio::test(start_paused = true)]
async fn r_s4_the_bulk_writer_deletes_and_checks_everything_before_writing() {
    let (backend, db) = instrumented();
    let all = items(600);
    let mut writer = BulkWriter::new(&db);
    writer.put_all(&all).await.unwrap();
    let keys: Vec<Key<Item>> = all.iter().map(|i| Item::key(i.name.clone())).collect();
    writer.delete_all(&keys).await.unwrap();
    assert_eq!(db.query::<Item>().count().await.unwrap(), 0);
    // The same key twice in one commit would be refused (R-A4); an invalid entity anywhere
    // is refused before the first commit.
    let before = backend.commits().len();
    let mut bad = items(3);
    bad.push(Item {
        name: KeyName::new("item00001").unwrap(),
        n: 1,
    });
    bad.extend(items(700).into_iter().skip(3));
    let error = writer.put_all(&bad).await.unwrap_err();
    // The duplicate is in one of the two commits: the first that holds it is refused whole.
    assert!(
        matches!(
            error,
            Error::DuplicateKey { .. } | Error::PartiallyWritten { .. }
        ),
        "{error:?}"
    );
    assert!(backend.commits().len() - before <= 1);
}

#[test]
fn r_s5_rollout_is_pinned_uniform_and_monotone() {
    // The documented hash, computed independently (FNV-1a 64, murmur3 fmix64, mod 100).
    for (id, bucket) in [
        ("user-42", 53),
        ("user-43", 61),
        ("", 42),
        ("ann", 83),
        ("Ünïcode", 38),
    ] {
        assert_eq!(migrate::bucket(id), bucket, "{id}");
    }
    let ids: Vec<String> = (0..100_000).map(|i| format!("user-{i}")).collect();
    for percent in [1_u8, 5, 10, 25, 50, 75, 90, 99] {
        let share = ids
            .iter()
            .filter(|id| migrate::rollout(id, percent))
            .count() as f64
            / 1_000.0;
        assert!(
            (share - f64::from(percent)).abs() <= 2.0,
            "{percent} %: {share:.2} %"
        );
    }
    for id in ids.iter().take(5_000) {
        let first_in = (0..=100).find(|&p| migrate::rollout(id, p)).unwrap();
        assert!((first_in..=255).all(|p| migrate::rollout(id, p)), "{id}");
        assert!((0..first_in).all(|p| !migrate::rollout(id, p)), "{id}");
    }
    assert!(ids.iter().all(|id| migrate::rollout(id, 100)));
    assert!(ids.iter().all(|id| !migrate::rollout(id, 0)));
}

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(kind = "Profile")]
struct Profile {
    #[key]
    user: KeyId,
    name: String,
}

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(kind = "ProfileV2")]
struct ProfileV2 {
    #[key]
    user: KeyName,
    first: String,
    last: String,
}

fn upgrade(old: Profile) -> ProfileV2 {
    let (first, last) = old.name.split_once(' ').unwrap_or((&old.name, ""));
    ProfileV2 {
        user: KeyName::scattered(old.user.to_string()).unwrap(),
        first: first.to_owned(),
        last: last.to_owned(),
    }
}

fn profile(i: i64) -> Profile {
    Profile {
        user: KeyId::new(i).unwrap(),
        name: format!("Ann Number{i}"),
    }
}

async fn read_new_then_old_prefers_the_new_entity(db: Db) {
    let old = Profile::key(KeyId::new(7).unwrap());
    let new = ProfileV2::key(KeyName::scattered("7").unwrap());
    assert_eq!(
        migrate::read_new_then_old(&db, &new, &old).await.unwrap(),
        None
    );
    db.put(&profile(7)).await.unwrap();
    assert_eq!(
        migrate::read_new_then_old(&db, &new, &old).await.unwrap(),
        Some(Found::Old(profile(7)))
    );
    db.put(&upgrade(profile(7))).await.unwrap();
    let found = migrate::read_new_then_old(&db, &new, &old).await.unwrap();
    assert_eq!(found, Some(Found::New(upgrade(profile(7)))));
}

/// The copy job crashes right after its third batch is committed, before that batch's state
/// is saved; resumed from the second's, it goes on and copies everything exactly once.
async fn r_s5_copy_job_resumes_after_a_crash(db: Db, delete_source: bool) {
    let total = 240;
    // Sequential ids: the job's stripes spread its writes anyway.
    BulkWriter::new(&db)
        .put_all(&(1..=total).map(profile).collect::<Vec<_>>())
        .await
        .unwrap();
    // One new entity the application has already written (and changed): never overwritten.
    let mut changed = upgrade(profile(100));
    changed.last = "Changed".into();
    db.put(&changed).await.unwrap();

    let saved: Arc<Mutex<Option<CopyState>>> = Arc::default();
    let save = saved.clone();
    let mut batches = 0;
    let crashed = std::panic::AssertUnwindSafe(
        CopyJob::new(&db, |old: Profile| Ok(Some(upgrade(old))))
            .stripes(4)
            .batch_size(20)
            .delete_source(delete_source)
            .ramp(RampUp::new().starting_at(100_000.0))
            .on_progress(move |p| {
                batches += 1;
                assert_eq!(p.state.stripes_done().1, 4);
                if batches == 3 {
                    panic!("simulated crash");
                }
                *save.lock().unwrap() = Some(p.state.clone());
            })
            .run(),
    )
    .catch_unwind()
    .await;
    assert!(crashed.is_err(), "the job crashed");
    let state = saved.lock().unwrap().clone().unwrap();
    assert_eq!(state.report.copied + state.report.present, 40);
    // Saved as text, read back.
    let state: CopyState = state.to_string().parse().unwrap();
    let report = CopyJob::new(&db, |old: Profile| Ok(Some(upgrade(old))))
        .delete_source(delete_source)
        .ramp(RampUp::new().starting_at(100_000.0))
        .batch_size(20)
        .resume(state)
        .run()
        .await
        .unwrap();
    // The third batch was committed before the crash: done again, it writes nothing twice.
    assert_eq!(
        report.copied + report.present,
        total as u64 - if delete_source { 20 } else { 0 }
    );
    assert_eq!(
        report.present,
        if delete_source { 1 } else { 21 },
        "{report:?}"
    );
    let news: Vec<ProfileV2> = db
        .query::<ProfileV2>()
        .stream()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(news.len(), total as usize);
    for i in 1..=total {
        let expected = if i == 100 {
            changed.clone()
        } else {
            upgrade(profile(i))
        };
        let key = ProfileV2::key(expected.user.clone());
        assert_eq!(db.get(&key).await.unwrap(), Some(expected));
    }
    let olds = db.query::<Profile>().count().await.unwrap();
    assert_eq!(olds, if delete_source { 0 } else { total as u64 });
    // Deleted: all but the third batch's, whose count was lost with the crash.
    assert_eq!(
        report.deleted,
        if delete_source { total as u64 - 20 } else { 0 }
    );
}

#[tokio::test]
async fn r_s5_the_copy_job_spreads_its_writes_over_the_key_range() {
    let (backend, db) = Instrumented::db();
    BulkWriter::new(&db)
        .put_all(&(1..=400).map(profile).collect::<Vec<_>>())
        .await
        .unwrap();
    let before = backend.commits().len();
    CopyJob::new(&db, |old: Profile| {
        // The same key space in the new kind: what a plain copy would write in order.
        Ok(Some(Profile {
            name: old.name.to_uppercase(),
            ..old
        }))
    })
    .stripes(8)
    .batch_size(25)
    .ramp(RampUp::new().starting_at(100_000.0))
    .run()
    .await
    .unwrap();
    // In place (same kind, same key): each entity rewritten once.
    let first_ids: Vec<i64> = backend.commits()[before..]
        .iter()
        .map(|c| c.iter().map(|k| k.id().unwrap().get()).min().unwrap())
        .collect();
    // 400 entities in batches of at most 25 (stripes at sampled quantiles are about even).
    assert!((16..=24).contains(&first_ids.len()), "{first_ids:?}");
    assert!(backend.commits()[before..].iter().all(|c| c.len() <= 25));
    // The first eight commits come from eight stripes, 50 ids apart, not one run of ids.
    let mut spread = first_ids[..8].to_vec();
    spread.sort_unstable();
    assert!(
        spread.windows(2).all(|w| w[1] - w[0] >= 25),
        "{first_ids:?}"
    );
    let stored: Vec<Profile> = db.query::<Profile>().stream().try_collect().await.unwrap();
    assert_eq!(stored.len(), 400);
    assert!(stored.iter().all(|p| p.name.starts_with("ANN NUMBER")));
}

#[tokio::test]
async fn r_s5_a_conversion_error_stops_the_copy_and_writes_nothing_of_its_batch() {
    let db = Db::in_memory();
    BulkWriter::new(&db)
        .put_all(&(1..=10).map(profile).collect::<Vec<_>>())
        .await
        .unwrap();
    let error = CopyJob::new(&db, |old: Profile| {
        if old.user.get() == 5 {
            return Err(Error::InvalidValue {
                kind: "Profile".into(),
                property: "name".into(),
                reason: "cannot be split".into(),
            });
        }
        Ok(Some(upgrade(old)))
    })
    .stripes(1)
    .delete_source(true)
    .run()
    .await
    .unwrap_err();
    assert!(matches!(error, Error::InvalidValue { .. }), "{error:?}");
    assert_eq!(db.query::<ProfileV2>().count().await.unwrap(), 0);
    assert_eq!(db.query::<Profile>().count().await.unwrap(), 10);
    assert!("datastore-entity copy v2\n".parse::<CopyState>().is_err());
}

#[derive(Entity, Debug, Clone, PartialEq)]
struct Job {
    #[key]
    id: KeyName,
    priority: i64,
}

/// A work queue that deletes what it processed: each round resumes after the last item of
/// the one before (R-Q4), and every item is processed once, in order.
async fn r_q4_a_queue_resumes_from_the_last_processed_value(db: Db, descending: bool) {
    let jobs: Vec<Job> = (0..45)
        .map(|i| Job {
            id: KeyName::new(format!("job{:02}", (i * 7) % 45)).unwrap(),
            priority: i % 6, // ties, resolved by key
        })
        .collect();
    db.put_many(&jobs).await.unwrap();
    let order = |desc: bool| {
        if desc {
            Job::PRIORITY.desc()
        } else {
            Job::PRIORITY.asc()
        }
    };
    let mut expected = jobs.clone();
    expected.sort_by(|a, b| (a.priority, &a.id).cmp(&(b.priority, &b.id)));
    if descending {
        expected.reverse();
    }
    let mut processed = Vec::new();
    let mut last: Option<Job> = None;
    loop {
        let mut query = db.query::<Job>().order(order(descending));
        if let Some(last) = &last {
            query = query.resume_after(last);
        }
        let round = query.limit(7).fetch().await.unwrap().items;
        if round.is_empty() {
            break;
        }
        let keys: Vec<Key<Job>> = round.iter().map(|j| Job::key(j.id.clone())).collect();
        db.delete_many(&keys).await.unwrap();
        last = round.last().cloned();
        processed.extend(round);
    }
    assert_eq!(processed, expected);
}

#[tokio::test]
async fn r_q4_resume_after_refuses_what_it_cannot_resume() {
    let db = Db::in_memory();
    let job = Job {
        id: KeyName::new("a").unwrap(),
        priority: 1,
    };
    db.put(&job).await.unwrap();
    let error = db
        .query::<Job>()
        .order(Key::<Job>::PROPERTY.asc())
        .order(Job::PRIORITY.asc())
        .resume_after(&job)
        .fetch()
        .await
        .unwrap_err();
    assert!(
        matches!(
            &error,
            Error::InvalidQuery {
                rule: datastore_entity::QueryRule::ResumeOrders { orders: 2 },
                ..
            }
        ),
        "{error:?}"
    );
    // Key order alone: resumes after the key.
    db.put(&Job {
        id: KeyName::new("b").unwrap(),
        priority: 0,
    })
    .await
    .unwrap();
    let next = db
        .query::<Job>()
        .resume_after(&job)
        .fetch()
        .await
        .unwrap()
        .items;
    assert_eq!(
        next.iter().map(|j| j.id.as_str()).collect::<Vec<_>>(),
        ["b"]
    );
}

macro_rules! on_backends {
    ($($name:ident: $body:expr;)*) => {
        mod embedded {
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let db = harness::db(Backend::Embedded, stringify!($name)).await.unwrap();
                    ($body)(db).await;
                }
            )*
        }
        mod firestore {
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    if let Some(db) = harness::db(Backend::Firestore, stringify!($name)).await {
                        ($body)(db).await;
                    }
                }
            )*
        }
    };
}

on_backends! {
    r_s5_read_new_then_old: read_new_then_old_prefers_the_new_entity;
    r_s5_copy_job_resumes_after_a_crash_keeping_the_source: |db| r_s5_copy_job_resumes_after_a_crash(db, false);
    r_s5_copy_job_resumes_after_a_crash_deleting_the_source: |db| r_s5_copy_job_resumes_after_a_crash(db, true);
    r_q4_queue_ascending: |db| r_q4_a_queue_resumes_from_the_last_processed_value(db, false);
    r_q4_queue_descending: |db| r_q4_a_queue_resumes_from_the_last_processed_value(db, true);
}

#[derive(Entity, Debug, Clone, PartialEq)]
struct Lease {
    #[key]
    id: KeyName,
    generation: i64,
}

/// Expiry by generation (R-S7): the expired generation is invisible to the live query at once,
/// and deleted through an equality query on it, leaving the live generation untouched.
#[tokio::test]
async fn r_s7_an_expired_generation_is_dropped_by_equality_not_by_range() {
    let db = Db::in_memory();
    let lease = |i: usize, generation| Lease {
        id: KeyName::scattered(format!("lease-{generation}-{i}")).unwrap(),
        generation,
    };
    let mut writer = BulkWriter::new(&db).ramp(RampUp::new().starting_at(100_000.0));
    writer
        .put_all(&(0..300).map(|i| lease(i, 1)).collect::<Vec<_>>())
        .await
        .unwrap();
    writer
        .put_all(&(0..120).map(|i| lease(i, 2)).collect::<Vec<_>>())
        .await
        .unwrap();
    let live = || db.query::<Lease>().filter(Lease::GENERATION.eq(2)).count();
    assert_eq!(live().await.unwrap(), 120);
    let expired: Vec<Key<Lease>> = db
        .query::<Lease>()
        .filter(Lease::GENERATION.eq(1))
        .keys_only()
        .stream()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(expired.len(), 300);
    writer.delete_all(&expired).await.unwrap();
    assert_eq!(live().await.unwrap(), 120);
    assert_eq!(db.query::<Lease>().count().await.unwrap(), 120);
    assert_eq!(db.diagnostics(), []);
}
