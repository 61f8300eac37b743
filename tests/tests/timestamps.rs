//! `Timestamp`: arithmetic with `std::time::Duration`, the difference of two, and RFC 3339
//! written and read back (issue #16).

use std::time::Duration;

use datastore_entity::{Error, Timestamp};
use proptest::prelude::*;

/// 0001-01-01T00:00:00Z and 9999-12-31T23:59:59.999999Z: the range the service stores.
const FIRST: i64 = Timestamp::MIN.as_micros();
const LAST: i64 = Timestamp::MAX.as_micros();

/// `t` written at `offset` minutes east of UTC, as RFC 3339 text: `None` where the local
/// time falls outside the years four digits write.
fn at_offset(t: Timestamp, offset: i64) -> Option<String> {
    let local = match offset >= 0 {
        true => t.checked_add(Duration::from_secs(offset as u64 * 60)),
        false => t.checked_sub(Duration::from_secs(offset.unsigned_abs() * 60)),
    }?;
    let text = local.to_string();
    let sign = if offset < 0 { '-' } else { '+' };
    let (h, m) = (offset.abs() / 60, offset.abs() % 60);
    Some(format!("{}{sign}{h:02}:{m:02}", text.strip_suffix('Z')?))
}

proptest! {
    #[test]
    fn every_timestamp_reads_back_what_it_writes(micros in FIRST..=LAST) {
        let t = Timestamp::from_micros(micros);
        prop_assert_eq!(t.to_string().parse::<Timestamp>().unwrap(), t);
    }

    /// Issue #26: every valid time reads back from its text at any offset, and the same
    /// instant whatever the offset it was written at.
    #[test]
    fn every_timestamp_reads_back_at_every_offset(
        micros in FIRST..=LAST,
        offset in -(23 * 60 + 59)..=(23 * 60 + 59_i64),
    ) {
        let t = Timestamp::from_micros(micros);
        if let Some(text) = at_offset(t, offset) {
            prop_assert_eq!(text.parse::<Timestamp>().unwrap(), t, "{}", text);
        }
    }

    /// Any `i64` of microseconds gives a time the service stores.
    #[test]
    fn every_constructor_stays_in_the_services_range(micros in any::<i64>()) {
        let t = Timestamp::from_micros(micros);
        prop_assert!(Timestamp::MIN <= t && t <= Timestamp::MAX);
        prop_assert_eq!(Timestamp::try_from_micros(micros).is_ok(), (FIRST..=LAST).contains(&micros));
        prop_assert_eq!(t.to_string().parse::<Timestamp>().unwrap(), t);
    }

    #[test]
    fn adding_then_subtracting_a_duration_is_the_identity(
        micros in FIRST..=LAST,
        by in 0_u64..10_000_000_000_000,
    ) {
        let t = Timestamp::from_micros(micros);
        let d = Duration::from_micros(by);
        prop_assume!(t.checked_add(d).is_some());
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
fn times_outside_the_services_range_are_refused_or_saturate() {
    // Issue #26: `from_micros(i64::MAX)` held year 294,247, which `put` stored.
    assert_eq!(Timestamp::from_micros(i64::MAX), Timestamp::MAX);
    assert_eq!(Timestamp::from_micros(i64::MIN), Timestamp::MIN);
    assert_eq!(Timestamp::MAX.to_string(), "9999-12-31T23:59:59.999999Z");
    assert_eq!(Timestamp::MIN.to_string(), "0001-01-01T00:00:00.000000Z");
    assert!(matches!(
        Timestamp::try_from_micros(Timestamp::MAX.as_micros() + 1),
        Err(Error::InvalidValue { .. })
    ));
    assert!(Timestamp::try_from_micros(Timestamp::MIN.as_micros()).is_ok());
    let far = std::time::UNIX_EPOCH + Duration::from_secs(400_000_000_000);
    assert_eq!(Timestamp::from(far), Timestamp::MAX);
    // An offset that carries the time past either end is refused; one that keeps it inside
    // is read, whatever year the local time shows.
    for text in [
        "9999-12-31T23:59:59-23:59",
        "0001-01-01T00:00:00+00:01",
        "0000-06-01T00:00:00Z",
    ] {
        match text.parse::<Timestamp>() {
            Err(Error::Parse { reason, .. }) => assert!(reason.contains("range"), "{reason}"),
            other => panic!("{text}: {other:?}"),
        }
    }
    assert_eq!(
        "0000-12-31T23:00:00-01:00".parse::<Timestamp>().unwrap(),
        Timestamp::MIN
    );
    assert!(
        "10000-01-01T00:00:00Z".parse::<Timestamp>().is_err(),
        "five-digit years are not RFC 3339"
    );
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
