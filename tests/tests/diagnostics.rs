//! The scale rules watched at run time (`db.diagnostics()`): each pattern is found, once,
//! and its harmless neighbour is not. The clock is the test's own, moved by hand.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use datastore_entity::prelude::*;
use datastore_entity::{Diagnostics, Finding, Thresholds};

#[derive(Entity, Debug, Clone, PartialEq)]
struct Customer {
    #[key]
    name: KeyName,
    city: String,
}

/// A child written with an allocated id, under a `Customer`.
#[derive(Entity, Debug, Clone, PartialEq)]
struct Order {
    #[parent]
    customer: Key<Customer>,
    #[key]
    id: Option<KeyId>,
    #[exclude_from_index]
    total: i64,
}

#[derive(Entity, Debug, Clone, PartialEq)]
struct Reading {
    #[key]
    name: KeyName,
    seq: i64,
    #[exclude_from_index]
    note: i64,
}

/// A handle watched on a clock that moves only when the test says so.
fn watched() -> (Db, impl Fn(Duration)) {
    let now = Arc::new(AtomicU64::new(0));
    let clock = now.clone();
    let db = Db::in_memory().watch(
        Diagnostics::new().clock(move || Duration::from_micros(clock.load(Ordering::SeqCst))),
    );
    let advance = move |by: Duration| {
        now.fetch_add(by.as_micros() as u64, Ordering::SeqCst);
    };
    (db, advance)
}

fn rules(findings: &[Finding]) -> Vec<&'static str> {
    findings.iter().map(|f| f.rule.id()).collect()
}

fn customer(name: KeyName) -> Customer {
    Customer {
        name,
        city: "Oslo".into(),
    }
}

#[tokio::test]
async fn r_k4_names_written_in_sequence_are_found_once_and_scattered_ones_are_not() {
    let (db, advance) = watched();
    for i in 0..250 {
        advance(Duration::from_millis(5));
        let name = KeyName::new(format!("Customer{i:04}")).unwrap();
        db.put(&customer(name)).await.unwrap();
    }
    let findings = db.diagnostics();
    assert_eq!(rules(&findings), ["R-K4"]);
    let finding = &findings[0];
    assert_eq!(finding.kind, "Customer");
    assert_eq!(finding.writes, 100);
    assert!((finding.rate - 200.0).abs() < 1.0, "{}", finding.rate);
    let shown = finding.to_string();
    assert!(
        shown.starts_with("[R-K4]") && shown.contains("KeyName::scattered"),
        "{shown}"
    );

    // The same names, scattered: no finding.
    let (db, advance) = watched();
    for i in 0..250 {
        advance(Duration::from_millis(5));
        let name = KeyName::scattered(format!("Customer{i:04}")).unwrap();
        db.put(&customer(name)).await.unwrap();
    }
    assert_eq!(db.diagnostics(), []);

    // In sequence but slowly (one a second): no hotspot.
    let (db, advance) = watched();
    for i in 0..250 {
        advance(Duration::from_secs(1));
        let name = KeyName::new(format!("Customer{i:04}")).unwrap();
        db.put(&customer(name)).await.unwrap();
    }
    assert_eq!(db.diagnostics(), []);
}

/// Issue #26: children with allocated ids under one parent are the commonest hot entity
/// group; their keys are incomplete when written, but their group (the root) is not.
#[tokio::test]
async fn r_e2_children_with_allocated_ids_count_toward_their_parents_group() {
    let (db, advance) = watched();
    let parent = Customer::key(KeyName::new("busy").unwrap());
    for n in 0..90 {
        advance(Duration::from_millis(333));
        let order = Order {
            customer: parent.clone(),
            id: None,
            total: n,
        };
        db.put(&order).await.unwrap();
    }
    let findings = db.diagnostics();
    assert_eq!(rules(&findings), ["R-E2"], "{findings:?}");
    assert_eq!(findings[0].kind, "Customer");
    assert!(
        findings[0].subject.contains("busy"),
        "{}",
        findings[0].subject
    );

    // Incomplete root keys are each a new group: no finding, however fast.
    let (db, advance) = watched();
    for _ in 0..90 {
        advance(Duration::from_millis(333));
        db.put(&Sequenced { id: None }).await.unwrap();
    }
    assert_eq!(db.diagnostics(), []);
}

/// A root entity with an allocated id.
#[derive(Entity, Debug, Clone, PartialEq)]
struct Sequenced {
    #[key]
    id: Option<KeyId>,
}

#[tokio::test]
async fn r_e2_one_entity_group_written_three_times_a_second_is_found() {
    let (db, advance) = watched();
    let name = KeyName::new("config").unwrap();
    for _ in 0..90 {
        advance(Duration::from_millis(333));
        db.put(&customer(name.clone())).await.unwrap();
    }
    let findings = db.diagnostics();
    assert_eq!(rules(&findings), ["R-E2"], "{findings:?}");
    assert!(
        findings[0].rate > 2.5 && findings[0].rate < 3.5,
        "{}",
        findings[0].rate
    );
    assert!(findings[0].to_string().contains("sharded"));

    // Once every two seconds: within what a group sustains.
    let (db, advance) = watched();
    for _ in 0..30 {
        advance(Duration::from_secs(2));
        db.put(&customer(name.clone())).await.unwrap();
    }
    assert_eq!(db.diagnostics(), []);
}

#[tokio::test]
async fn r_s4_a_new_kind_written_faster_than_500_a_second_is_found() {
    let (db, advance) = watched();
    let batch = |from: usize| {
        (from..from + 100)
            .map(|i| customer(KeyName::scattered(format!("c{i}")).unwrap()))
            .collect::<Vec<_>>()
    };
    // 5,500 in 10 s: within the ramp (500/s, and one commit's burst).
    for i in 0..55 {
        db.put_many(&batch(i * 100)).await.unwrap();
    }
    assert_eq!(db.diagnostics(), []);
    // 5,600 in the next 10 s.
    advance(Duration::from_secs(10));
    for i in 55..111 {
        db.put_many(&batch(i * 100)).await.unwrap();
    }
    let findings = db.diagnostics();
    assert_eq!(rules(&findings), ["R-S4"]);
    assert!(findings[0].to_string().contains("500/50/5"));
    assert!(findings[0].to_string().contains("BulkWriter"));
    // Found as the window crossed the threshold.
    assert_eq!((findings[0].writes, findings[0].rate), (5_501, 550.1));

    // Past the first five minutes, the kind is no longer new.
    let (db, advance) = watched();
    db.put(&customer(KeyName::new("first").unwrap()))
        .await
        .unwrap();
    advance(Duration::from_secs(301));
    for i in 0..6 {
        db.put_many(&batch(i * 100)).await.unwrap();
    }
    assert_eq!(db.diagnostics(), []);
}

#[tokio::test]
async fn r_s6_an_indexed_sequence_number_is_found_and_an_excluded_one_is_not() {
    let (db, advance) = watched();
    for i in 0..150 {
        advance(Duration::from_millis(2));
        let reading = Reading {
            name: KeyName::scattered(format!("r{i}")).unwrap(),
            seq: i,
            note: i,
        };
        db.put(&reading).await.unwrap();
    }
    let findings = db.diagnostics();
    assert_eq!(rules(&findings), ["R-S6"], "{findings:?}");
    assert_eq!(findings[0].subject, "seq");
    assert!(findings[0].to_string().contains("#[sharded_index(n)]"));

    // Values that do not follow each other: nothing.
    let (db, advance) = watched();
    for i in 0..150_i64 {
        advance(Duration::from_millis(2));
        let reading = Reading {
            name: KeyName::scattered(format!("r{i}")).unwrap(),
            seq: (i * 7919) % 151,
            note: i,
        };
        db.put(&reading).await.unwrap();
    }
    assert_eq!(db.diagnostics(), []);
}

#[tokio::test]
async fn thresholds_are_configurable() {
    let db = Db::in_memory().watch(Diagnostics::new().thresholds(Thresholds {
        monotonic_run: 10,
        monotonic_rate: 0.0,
        ..Thresholds::default()
    }));
    for i in 0..12 {
        let name = KeyName::new(format!("Customer{i:02}")).unwrap();
        db.put(&customer(name)).await.unwrap();
    }
    assert_eq!(rules(&db.diagnostics()), ["R-K4"]);
}

#[tokio::test]
async fn r_k4_a_decreasing_sequence_is_found_off_watches_nothing_and_clones_share_findings() {
    // Names counting down are a sequence too (README: "increasing (or decreasing)").
    let (db, advance) = watched();
    let clone = db.clone();
    for i in (0..250).rev() {
        advance(Duration::from_millis(5));
        let name = KeyName::new(format!("Customer{i:04}")).unwrap();
        clone.put(&customer(name)).await.unwrap();
    }
    // Written through a clone, found on the handle it was cloned from.
    assert_eq!(rules(&db.diagnostics()), ["R-K4"]);

    // `Diagnostics::off()` watches nothing.
    let quiet = Db::in_memory().watch(Diagnostics::off());
    for i in 0..250 {
        let name = KeyName::new(format!("Customer{i:04}")).unwrap();
        quiet.put(&customer(name)).await.unwrap();
    }
    assert_eq!(quiet.diagnostics(), []);
}
