//! `Timestamp`: arithmetic with `std::time::Duration`, the difference of two, and RFC 3339
//! written and read back (issue #16).

use std::time::Duration;

use datastore_entity::{Error, Timestamp};
use proptest::prelude::*;

/// 0000-01-01T00:00:00Z and 9999-12-31T23:59:59.999999Z: the years RFC 3339 writes.
const FIRST: i64 = -62_167_219_200_000_000;
const LAST: i64 = 253_402_300_799_999_999;

proptest! {
    #[test]
    fn every_timestamp_reads_back_what_it_writes(micros in FIRST..=LAST) {
        let t = Timestamp::from_micros(micros);
        prop_assert_eq!(t.to_string().parse::<Timestamp>().unwrap(), t);
    }

    #[test]
    fn adding_then_subtracting_a_duration_is_the_identity(
        micros in FIRST..=LAST,
        by in 0_u64..10_000_000_000_000,
    ) {
        let t = Timestamp::from_micros(micros);
        let d = Duration::from_micros(by);
        prop_assert_eq!((t + d) - d, t);
        prop_assert_eq!((t + d) - t, d);
        prop_assert_eq!(t.checked_duration_since(t + d), (by == 0).then_some(Duration::ZERO));
    }
}

#[test]
fn offsets_fractions_and_separators_are_read() {
    let t = Timestamp::from_micros(1_700_000_000_000_000);
    for text in [
        "2023-11-14T22:13:20Z",
        "2023-11-14t22:13:20z",
        "2023-11-14 22:13:20Z",
        "2023-11-14T23:13:20+01:00",
        "2023-11-14T17:43:20-04:30",
        "2023-11-14T22:13:20.000000Z",
    ] {
        assert_eq!(text.parse::<Timestamp>().unwrap(), t, "{text}");
    }
    // Microseconds kept, nanoseconds truncated (the service keeps microseconds).
    let fine: Timestamp = "2023-11-14T22:13:20.123456789Z".parse().unwrap();
    assert_eq!(fine.as_micros() - t.as_micros(), 123_456);
    let short: Timestamp = "2023-11-14T22:13:20.5Z".parse().unwrap();
    assert_eq!(short.as_micros() - t.as_micros(), 500_000);
    // Before the epoch, and a leap day.
    let t: Timestamp = "1969-12-31T23:59:59.999999Z".parse().unwrap();
    assert_eq!(t.as_micros(), -1);
    assert!("2024-02-29T00:00:00Z".parse::<Timestamp>().is_ok());
}

#[test]
fn what_is_not_rfc_3339_is_a_parse_error() {
    for text in [
        "",
        "2023-11-14",
        "2023-11-14T22:13:20",
        "2023-13-01T00:00:00Z",
        "2023-02-29T00:00:00Z",
        "2023-11-14T24:00:00Z",
        "2023-11-14T22:60:00Z",
        "2023-11-14T22:13:20.Z",
        "2023-11-14T22:13:20+1:00",
        "2023-11-14T22:13:20+24:00",
        "2023-11-14T22:13:20Zjunk",
        "２０２３-11-14T22:13:20Z",
    ] {
        match text.parse::<Timestamp>() {
            Err(Error::Parse { what, text: t, .. }) => {
                assert_eq!(what, "an RFC 3339 timestamp");
                assert_eq!(t, text);
            }
            other => panic!("{text:?} -> {other:?}"),
        }
    }
}

#[test]
fn arithmetic_saturates_at_the_ends_and_checked_says_so() {
    let max = Timestamp::from_micros(i64::MAX);
    let min = Timestamp::from_micros(i64::MIN);
    assert_eq!(max + Duration::from_secs(1), max);
    assert_eq!(min - Duration::from_secs(1), min);
    assert_eq!(max.checked_add(Duration::from_micros(1)), None);
    assert_eq!(min.checked_sub(Duration::from_micros(1)), None);
    let t = Timestamp::from_micros(0);
    assert_eq!(
        t - Timestamp::from_micros(5),
        Duration::ZERO,
        "saturates as Instant does"
    );
    let mut u = t;
    u += Duration::from_millis(3);
    u -= Duration::from_millis(1);
    assert_eq!(u.as_micros(), 2_000);
}
