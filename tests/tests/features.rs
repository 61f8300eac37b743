//! The runtime's optional Cargo features (issue #16), each tested where it is enabled:
//! `cargo test -p datastore-entity-tests --features serde,chrono,time,uuid --test features`
//! (`.ci/run` does). Date-times and UUIDs are stored, read, filtered and ordered on the
//! embedded engine and on Google's Firestore emulator in Datastore mode.

#![allow(unused_imports)]

use datastore_entity::Error;
use datastore_entity::prelude::*;
use datastore_entity_tests::harness::{self, Backend};

/// The handles a storage test runs on: the embedded engine, and the Firestore emulator when
/// it is there (in CI it must be).
#[allow(dead_code)]
async fn handles(test: &str) -> Vec<Db> {
    let mut dbs = vec![Db::in_memory()];
    dbs.extend(harness::db(Backend::Firestore, test).await);
    dbs
}

#[cfg(feature = "chrono")]
mod chrono_date_times {
    use super::*;
    use chrono::{DateTime, TimeZone as _, Utc};

    #[derive(Entity, Debug, Clone, PartialEq)]
    #[entity(kind = "Meeting")]
    struct Meeting {
        #[key]
        id: KeyId,
        #[index(monotonic)] // R-I3 applies to chrono's date-times as to `Timestamp`
        at: DateTime<Utc>,
        #[exclude_from_index]
        ended: Option<DateTime<Utc>>,
    }

    fn at(seconds: i64, nanos: u32) -> DateTime<Utc> {
        Utc.timestamp_opt(seconds, nanos).unwrap()
    }

    /// Issue #26: a date-time past what the service stores saturates at its ends.
    #[test]
    fn chrono_date_times_past_the_services_range_saturate() {
        let far = Utc.with_ymd_and_hms(20_000, 1, 1, 0, 0, 0).unwrap();
        assert_eq!(Timestamp::from(far), Timestamp::MAX);
        let before = Utc.with_ymd_and_hms(-5, 1, 1, 0, 0, 0).unwrap();
        assert_eq!(Timestamp::from(before), Timestamp::MIN);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn chrono_date_times_are_timestamps_filters_included() {
        for db in handles("chrono").await {
            let meetings: Vec<Meeting> = (1..=3)
                .map(|i| Meeting {
                    id: KeyId::new(i).unwrap(),
                    at: at(1_700_000_000 + i * 60, 123_456_000),
                    ended: (i == 2).then(|| at(-1, 999_999_000)),
                })
                .collect();
            db.put_many(&meetings).await.unwrap();
            let read = db.get(&Meeting::key(KeyId::new(2).unwrap())).await.unwrap();
            assert_eq!(
                read.as_ref(),
                Some(&meetings[1]),
                "whole microseconds round trip"
            );
            let later = db
                .query::<Meeting>()
                .filter(Meeting::AT.gt(meetings[0].at))
                .order(Meeting::AT.desc())
                .fetch()
                .await
                .unwrap();
            let ids: Vec<i64> = later.items.iter().map(|m| m.id.get()).collect();
            assert_eq!(ids, [3, 2]);
            // Nanoseconds are truncated toward the past, as the service keeps microseconds.
            let precise = Meeting {
                id: KeyId::new(9).unwrap(),
                at: at(-2, 678_901_999),
                ended: None,
            };
            db.put(&precise).await.unwrap();
            let read = db.get(&Meeting::key(KeyId::new(9).unwrap())).await.unwrap();
            assert_eq!(read.unwrap().at, at(-2, 678_901_000));
            assert_eq!(
                Timestamp::from(at(-2, 678_901_999)).to_string(),
                "1969-12-31T23:59:58.678901Z"
            );
        }
    }
}

#[cfg(feature = "time")]
mod time_date_times {
    use super::*;
    use time::{OffsetDateTime, UtcOffset};

    #[derive(Entity, Debug, Clone, PartialEq)]
    #[entity(kind = "Shift")]
    struct Shift {
        #[key]
        id: KeyId,
        #[index(monotonic)]
        starts: OffsetDateTime,
    }

    /// Issue #26: a date-time before what the service stores saturates at its start.
    #[test]
    fn time_date_times_past_the_services_range_saturate() {
        // (`time` holds years to 9999 only: its last instant truncates to the service's.)
        let last = time::Date::from_calendar_date(9_999, time::Month::December, 31)
            .unwrap()
            .with_hms_nano(23, 59, 59, 999_999_999)
            .unwrap()
            .assume_utc();
        assert_eq!(Timestamp::from(last), Timestamp::MAX);
        let before = time::Date::from_calendar_date(-1, time::Month::January, 1)
            .unwrap()
            .midnight()
            .assume_offset(UtcOffset::UTC);
        assert_eq!(Timestamp::from(before), Timestamp::MIN);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn time_date_times_are_timestamps_read_back_in_utc() {
        for db in handles("time").await {
            let paris = UtcOffset::from_hms(1, 0, 0).unwrap();
            let starts = OffsetDateTime::from_unix_timestamp_nanos(1_700_000_000_123_456_789)
                .unwrap()
                .to_offset(paris);
            let shift = Shift {
                id: KeyId::new(1).unwrap(),
                starts,
            };
            db.put(&shift).await.unwrap();
            let read = db
                .get(&Shift::key(KeyId::new(1).unwrap()))
                .await
                .unwrap()
                .unwrap();
            assert_eq!(read.starts.offset(), UtcOffset::UTC, "read back in UTC");
            assert_eq!(
                read.starts.unix_timestamp_nanos(),
                1_700_000_000_123_456_000
            );
            // A filter's value is truncated the same way, so it meets the stored instant.
            let found = db
                .query::<Shift>()
                .filter(Shift::STARTS.eq(starts))
                .fetch()
                .await;
            assert_eq!(found.unwrap().items, vec![read.clone()]);
            let found = db
                .query::<Shift>()
                .filter(Shift::STARTS.gt(starts))
                .fetch()
                .await;
            assert!(found.unwrap().items.is_empty());
        }
    }
}

#[cfg(feature = "uuid")]
mod uuids {
    use super::*;
    use uuid::Uuid;

    #[derive(Entity, Debug, Clone, PartialEq)]
    #[entity(kind = "Device")]
    struct Device {
        #[key]
        id: KeyId,
        serial: Uuid,
        spare: Option<Uuid>,
    }

    #[derive(Entity)]
    #[entity(kind = "Device")]
    struct Written {
        #[key]
        id: KeyId,
        serial: String,
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn uuids_are_indexed_text() {
        for db in handles("uuid").await {
            let serial = Uuid::parse_str("67e55044-10b1-426f-9247-bb680e5fe0c8").unwrap();
            let device = Device {
                id: KeyId::new(1).unwrap(),
                serial,
                spare: None,
            };
            db.put(&device).await.unwrap();
            let found = db
                .query::<Device>()
                .filter(Device::SERIAL.eq(serial))
                .fetch()
                .await;
            assert_eq!(found.unwrap().items, vec![device.clone()]);
            // Stored as its hyphenated lowercase text, which other clients read as a string.
            let raw = db
                .get(&Written::key(KeyId::new(1).unwrap()))
                .await
                .unwrap()
                .unwrap();
            assert_eq!(raw.serial, "67e55044-10b1-426f-9247-bb680e5fe0c8");
            db.put(&Written {
                id: KeyId::new(2).unwrap(),
                serial: "not a uuid".into(),
            })
            .await
            .unwrap();
            match db.get(&Device::key(KeyId::new(2).unwrap())).await {
                Err(Error::Decode {
                    property, expected, ..
                }) => {
                    assert_eq!((property.as_str(), expected.as_str()), ("serial", "a UUID"));
                }
                other => panic!("a string that is no UUID is a decode error: {other:?}"),
            }
        }
    }
}

#[cfg(feature = "serde")]
mod serde_forms {
    use super::*;
    use datastore_entity::{Blob, Cursor, GeoPoint, RawKey};
    use serde_json::json;

    use datastore_entity_tests::minimal::{Account, Post, ann};

    fn round_trip<T>(value: &T, json: serde_json::Value)
    where
        T: serde::Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
    {
        assert_eq!(serde_json::to_value(value).unwrap(), json);
        assert_eq!(&serde_json::from_value::<T>(json).unwrap(), value);
    }

    #[test]
    fn the_crate_types_serialize_as_their_text_and_deserialize_checked() {
        let post = Post::key(&ann(), KeyId::new(5).unwrap());
        round_trip(&post, json!(r#"Account:"ann"/Post:5"#));
        round_trip(&post.clone().into_raw(), json!(r#"Account:"ann"/Post:5"#));
        round_trip(&KeyName::new("ann").unwrap(), json!("ann"));
        round_trip(&KeyId::new(7).unwrap(), json!(7));
        let t: Timestamp = "2024-01-02T03:04:05.678901Z".parse().unwrap();
        round_trip(&t, json!("2024-01-02T03:04:05.678901Z"));
        round_trip(
            &GeoPoint::new(48.8566, 2.3522).unwrap(),
            json!({ "latitude": 48.8566, "longitude": 2.3522 }),
        );
        round_trip(&Blob::from(vec![1_u8, 2, 255]), json!([1, 2, 255]));
        // Deserializing validates, as the constructors do.
        for (json, what) in [
            (json!("a/b"), "KeyName"),
            (json!(0), "KeyId"),
            (json!({ "latitude": 91.0, "longitude": 0.0 }), "GeoPoint"),
            (json!(r#"Post:"ann""#), "Key<Account>"),
            // Issue #26: a `Post` is under an `Account`; these were accepted and then never
            // matched a key `Post::key` makes.
            (json!("Post:5"), "Key<Post>"),
            (json!(r#"Other:"x"/Post:5"#), "Key<Post>"),
            (json!(r#"Account:"ann"/Account:"bob""#), "Key<Account>"),
            (json!("yesterday"), "Timestamp"),
            (json!("not a cursor"), "Cursor"),
        ] {
            let refused = match what {
                "KeyName" => serde_json::from_value::<KeyName>(json.clone()).is_err(),
                "KeyId" => serde_json::from_value::<KeyId>(json.clone()).is_err(),
                "GeoPoint" => serde_json::from_value::<GeoPoint>(json.clone()).is_err(),
                "Key<Account>" => serde_json::from_value::<Key<Account>>(json.clone()).is_err(),
                "Key<Post>" => serde_json::from_value::<Key<Post>>(json.clone()).is_err(),
                "Timestamp" => serde_json::from_value::<Timestamp>(json.clone()).is_err(),
                _ => serde_json::from_value::<Cursor>(json.clone()).is_err(),
            };
            assert!(refused, "{json} is not a {what}");
        }
        let _: Option<RawKey> = None;
    }

    #[tokio::test]
    async fn a_cursor_survives_serde() {
        let db = Db::in_memory();
        let accounts: Vec<Account> = ["a", "b", "c"]
            .iter()
            .map(|n| Account {
                name: KeyName::new(*n).unwrap(),
            })
            .collect();
        db.put_many(&accounts).await.unwrap();
        let page = db.query::<Account>().limit(1).fetch().await.unwrap();
        let kept = serde_json::to_string(&page.next.unwrap()).unwrap();
        let cursor: Cursor = serde_json::from_str(&kept).unwrap();
        let next = db
            .query::<Account>()
            .limit(1)
            .start_after(cursor)
            .fetch()
            .await
            .unwrap();
        assert_eq!(next.items, vec![accounts[1].clone()]);
    }
}

/// `#[property(json)]`: NDB's JsonProperty layout — compact ASCII JSON text as bytes,
/// excluded from indexes — on the engine and the Firestore emulator.
#[cfg(feature = "serde")]
mod json_properties {
    use std::collections::{BTreeMap, HashMap};

    use super::*;
    use datastore_entity::Value;
    use serde::{Deserialize, Serialize};

    #[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
    struct Prefs {
        theme: String,
        langs: Vec<String>,
        limits: BTreeMap<String, i64>,
    }

    #[derive(Entity, Debug, Clone, PartialEq)]
    #[entity(kind = "Profile")]
    struct Profile {
        #[key]
        id: KeyName,
        #[property(json)]
        prefs: Prefs,
        #[property(json)]
        extra: Option<Vec<u32>>,
        #[property(json, default, alias = "settings")]
        flags: BTreeMap<String, bool>,
    }

    /// The same entities as another program sees them: the stored bytes and values.
    #[derive(Entity, Debug)]
    #[entity(kind = "Profile")]
    struct Stored {
        #[key]
        id: KeyName,
        #[blob]
        prefs: Vec<u8>,
        extra: Value,
    }

    /// A map whose keys JSON cannot hold: `Serialize` refuses it.
    #[derive(Entity, Debug)]
    #[entity(kind = "Grid")]
    struct Grid {
        #[key]
        id: KeyName,
        #[property(json)]
        cells: HashMap<(i32, i32), i32>,
    }

    fn profile(id: &str) -> Profile {
        Profile {
            id: KeyName::new(id).unwrap(),
            prefs: Prefs {
                theme: "Zoë ✓ 🎉".into(),
                langs: vec!["fr".into(), "en".into()],
                limits: BTreeMap::from([("daily".into(), 5)]),
            },
            extra: None,
            flags: BTreeMap::from([("beta".into(), true)]),
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn json_properties_are_stored_as_ndb_stores_them() {
        // Excluded from indexes in the schema, as NDB's JsonProperty.
        let prefs = Profile::SCHEMA
            .properties
            .iter()
            .find(|p| p.name == "prefs");
        assert!(prefs.unwrap().excluded);
        for db in handles("json").await {
            let ann = profile("ann");
            db.put(&ann).await.unwrap();
            assert_eq!(
                db.get(&Profile::key(ann.id.clone())).await.unwrap(),
                Some(ann.clone())
            );
            // Compact JSON, non-ASCII escaped as Python's `json.dumps(ensure_ascii=True)`
            // writes it (NDB decodes the bytes as ASCII); `None` as a null value.
            let stored = db.get(&Stored::key(ann.id.clone())).await.unwrap().unwrap();
            assert_eq!(
                String::from_utf8(stored.prefs).unwrap(),
                r#"{"theme":"Zo\u00eb \u2713 \ud83c\udf89","langs":["fr","en"],"limits":{"daily":5}}"#
            );
            assert_eq!(stored.extra, Value::Null);
        }
    }

    /// Another client's layout: the JSON as a string, under the former name `settings`.
    #[derive(Entity, Debug)]
    #[entity(kind = "Profile")]
    struct AsText {
        #[key]
        id: KeyName,
        #[exclude_from_index]
        prefs: String,
        #[blob]
        settings: Vec<u8>,
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn json_reads_text_defaults_aliases_and_names_what_it_cannot_read() {
        for db in handles("json_reads").await {
            // JSON as a string (as a projection returns it), the former name `settings`,
            // no `flags` and no `extra`.
            let bo = AsText {
                id: KeyName::new("bo").unwrap(),
                prefs: r#"{"theme":"dark","langs":[],"limits":{}}"#.into(),
                settings: br#"{"x":false}"#.to_vec(),
            };
            db.put(&bo).await.unwrap();
            let read = db.get(&Profile::key(bo.id.clone())).await.unwrap().unwrap();
            assert_eq!(read.prefs.theme, "dark");
            assert_eq!(read.extra, None);
            assert_eq!(read.flags, BTreeMap::from([("x".into(), false)]));

            // JSON the type cannot read is a decode error naming the key and the property.
            let cy = Stored {
                id: KeyName::new("cy").unwrap(),
                prefs: br#"{"theme":"#.to_vec(),
                extra: Value::Null,
            };
            db.put(&cy).await.unwrap();
            match db.get(&Profile::key(cy.id.clone())).await {
                Err(Error::Decode {
                    key: Some(named),
                    property,
                    ..
                }) => {
                    assert!(named.contains("cy"), "{named}");
                    assert_eq!(property, "prefs");
                }
                other => panic!("expected a decode error, got {other:?}"),
            }

            // A value `Serialize` refuses is an error before anything is written.
            let grid = Grid {
                id: KeyName::new("g").unwrap(),
                cells: HashMap::from([((1, 2), 3)]),
            };
            match db.put(&grid).await {
                Err(Error::InvalidValue {
                    kind,
                    property,
                    reason,
                }) => {
                    assert_eq!((kind.as_str(), property.as_str()), ("Grid", "cells"));
                    assert!(reason.contains("JSON"), "{reason}");
                }
                other => panic!("expected InvalidValue, got {other:?}"),
            }
            assert!(db.get(&Grid::key(grid.id.clone())).await.unwrap().is_none());
        }
    }
}
