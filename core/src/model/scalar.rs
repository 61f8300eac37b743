//! The value types the service has and Rust lacks: [`Timestamp`], [`Blob`], [`GeoPoint`].

use std::fmt;
use std::ops::{Add, AddAssign, Deref, Sub, SubAssign};
use std::str::FromStr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::error::Error;

/// A point in time with microsecond precision, as the service stores it: from
/// [`Timestamp::MIN`] (0001-01-01T00:00:00Z) to [`Timestamp::MAX`]
/// (9999-12-31T23:59:59.999999Z), the range the service takes — a `Timestamp` never holds
/// anything else.
///
/// It adds and subtracts `std::time::Duration`s (saturating at the ends of its range; the
/// `checked_` methods say when they would), the difference of two is a `Duration`, and it
/// reads and writes RFC 3339. Nanoseconds, which the service does not keep, are truncated.
/// Conversions saturate at the ends too ([`Timestamp::from_micros`], `From<SystemTime>`, the
/// `chrono` and `time` types); [`Timestamp::try_from_micros`] and parsing refuse instead.
///
/// ```
/// use std::time::Duration;
/// use datastore_entity::Timestamp;
///
/// let t = Timestamp::from_micros(1_700_000_000_000_000);
/// assert_eq!(t.as_micros(), 1_700_000_000_000_000);
/// assert_eq!(t.to_string(), "2023-11-14T22:13:20.000000Z");
/// assert_eq!("2023-11-14T23:13:20+01:00".parse::<Timestamp>()?, t);
/// let later = t + Duration::from_secs(600);
/// assert_eq!(later - t, Duration::from_secs(600));
/// assert_eq!(t.checked_duration_since(later), None);
/// # Ok::<(), datastore_entity::Error>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default)]
pub struct Timestamp(i64);

impl Timestamp {
    /// The earliest time the service stores: 0001-01-01T00:00:00Z.
    pub const MIN: Timestamp = Timestamp(-62_135_596_800_000_000);

    /// The latest time the service stores: 9999-12-31T23:59:59.999999Z.
    pub const MAX: Timestamp = Timestamp(253_402_300_799_999_999);

    /// Microseconds since the Unix epoch (negative before it), saturating at
    /// [`Timestamp::MIN`] and [`Timestamp::MAX`]: `from_micros(i64::MAX)` is the latest time
    /// the service stores.
    pub const fn from_micros(micros: i64) -> Timestamp {
        if micros < Timestamp::MIN.0 {
            Timestamp::MIN
        } else if micros > Timestamp::MAX.0 {
            Timestamp::MAX
        } else {
            Timestamp(micros)
        }
    }

    /// Microseconds since the Unix epoch, or [`Error::InvalidValue`] outside the service's
    /// range.
    pub fn try_from_micros(micros: i64) -> Result<Timestamp, Error> {
        Timestamp::checked(micros).ok_or_else(|| Error::InvalidValue {
            kind: String::new(),
            property: String::new(),
            reason: format!(
                "{micros} microseconds since the Unix epoch is outside the range of timestamps \
                 the service stores ({} to {})",
                Timestamp::MIN,
                Timestamp::MAX
            ),
        })
    }

    /// The time `micros` microseconds since the epoch, if the service stores it.
    pub const fn checked(micros: i64) -> Option<Timestamp> {
        if micros < Timestamp::MIN.0 || micros > Timestamp::MAX.0 {
            None
        } else {
            Some(Timestamp(micros))
        }
    }

    /// Microseconds since the Unix epoch.
    pub const fn as_micros(self) -> i64 {
        self.0
    }

    /// The current time, truncated to microseconds.
    pub fn now() -> Timestamp {
        SystemTime::now().into()
    }
}

impl From<SystemTime> for Timestamp {
    /// Times outside the service's range saturate at its ends.
    fn from(time: SystemTime) -> Timestamp {
        let micros = |d: Duration| i64::try_from(d.as_micros()).unwrap_or(i64::MAX);
        match time.duration_since(UNIX_EPOCH) {
            Ok(after) => Timestamp::from_micros(micros(after)),
            Err(before) => Timestamp::from_micros(-micros(before.duration())),
        }
    }
}

impl From<Timestamp> for SystemTime {
    fn from(t: Timestamp) -> SystemTime {
        let magnitude = Duration::from_micros(t.0.unsigned_abs());
        if t.0 >= 0 {
            UNIX_EPOCH + magnitude
        } else {
            UNIX_EPOCH - magnitude
        }
    }
}

impl fmt::Display for Timestamp {
    /// RFC 3339 in UTC, with microseconds.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let days = self.0.div_euclid(86_400_000_000);
        let micros_of_day = self.0.rem_euclid(86_400_000_000);
        // Howard Hinnant's civil-from-days.
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z.rem_euclid(146_097);
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = doy - (153 * mp + 2) / 5 + 1;
        let month = if mp < 10 { mp + 3 } else { mp - 9 };
        let year = yoe + era * 400 + i64::from(month <= 2);
        let secs = micros_of_day / 1_000_000;
        write!(
            f,
            "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:06}Z",
            secs / 3600,
            secs / 60 % 60,
            secs % 60,
            micros_of_day % 1_000_000
        )
    }
}

impl Timestamp {
    /// The time `duration` after this one; `None` after [`Timestamp::MAX`].
    pub fn checked_add(self, duration: Duration) -> Option<Timestamp> {
        let micros = i64::try_from(duration.as_micros()).ok()?;
        Timestamp::checked(self.0.checked_add(micros)?)
    }

    /// The time `duration` before this one; `None` before [`Timestamp::MIN`].
    pub fn checked_sub(self, duration: Duration) -> Option<Timestamp> {
        let micros = i64::try_from(duration.as_micros()).ok()?;
        Timestamp::checked(self.0.checked_sub(micros)?)
    }

    /// How long after `earlier` this is; `None` when `earlier` is later.
    pub fn checked_duration_since(self, earlier: Timestamp) -> Option<Duration> {
        let micros = self.0.checked_sub(earlier.0)?;
        u64::try_from(micros).ok().map(Duration::from_micros)
    }

    /// How long after `earlier` this is; zero when `earlier` is later (as `Instant` does).
    pub fn duration_since(self, earlier: Timestamp) -> Duration {
        self.checked_duration_since(earlier).unwrap_or_default()
    }
}

/// `t + duration`, saturating at the ends of the range.
impl Add<Duration> for Timestamp {
    type Output = Timestamp;
    fn add(self, duration: Duration) -> Timestamp {
        self.checked_add(duration).unwrap_or(Timestamp::MAX)
    }
}

/// `t - duration`, saturating at the ends of the range.
impl Sub<Duration> for Timestamp {
    type Output = Timestamp;
    fn sub(self, duration: Duration) -> Timestamp {
        self.checked_sub(duration).unwrap_or(Timestamp::MIN)
    }
}

impl AddAssign<Duration> for Timestamp {
    fn add_assign(&mut self, duration: Duration) {
        *self = *self + duration;
    }
}

impl SubAssign<Duration> for Timestamp {
    fn sub_assign(&mut self, duration: Duration) {
        *self = *self - duration;
    }
}

/// `later - earlier`: how long after `earlier` `later` is, zero when `earlier` is later (as
/// `Instant` does; [`Timestamp::checked_duration_since`] tells the two apart).
impl Sub<Timestamp> for Timestamp {
    type Output = Duration;
    fn sub(self, earlier: Timestamp) -> Duration {
        self.duration_since(earlier)
    }
}

/// Days since 1970-01-01 of a date of the proleptic Gregorian calendar (Howard Hinnant's
/// days-from-civil).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let yoe = year - era * 400;
    let doy = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// RFC 3339: `2023-11-14T22:13:20Z`, `2023-11-14T23:13:20.5+01:00`, `2023-11-14 22:13:20z`.
/// Fractions finer than a microsecond are truncated (the service keeps microseconds). A time
/// outside the service's range ([`Timestamp::MIN`] to [`Timestamp::MAX`]) is refused, also
/// when only its offset takes it there (`9999-12-31T23:59:59-23:59`).
impl FromStr for Timestamp {
    type Err = Error;

    fn from_str(text: &str) -> Result<Timestamp, Error> {
        let refused = |reason: &str| Error::Parse {
            what: "an RFC 3339 timestamp",
            text: text.to_owned(),
            reason: reason.to_owned(),
        };
        let bytes = text.as_bytes();
        let number = |at: usize, len: usize| -> Result<i64, Error> {
            let digits = bytes
                .get(at..at + len)
                .filter(|d| d.iter().all(u8::is_ascii_digit))
                .ok_or_else(|| refused("expected YYYY-MM-DDTHH:MM:SS"))?;
            Ok(digits.iter().fold(0, |n, d| n * 10 + i64::from(d - b'0')))
        };
        let separator = |at: usize, allowed: &[u8]| match bytes.get(at) {
            Some(b) if allowed.contains(b) => Ok(()),
            _ => Err(refused("expected YYYY-MM-DDTHH:MM:SS")),
        };
        let year = number(0, 4)?;
        separator(4, b"-")?;
        let month = number(5, 2)?;
        separator(7, b"-")?;
        let day = number(8, 2)?;
        separator(10, b"Tt ")?;
        let hour = number(11, 2)?;
        separator(13, b":")?;
        let minute = number(14, 2)?;
        separator(16, b":")?;
        let second = number(17, 2)?;
        if !(1..=12).contains(&month) || !(1..=days_in_month(year, month)).contains(&day) {
            return Err(refused("no such date"));
        }
        if hour > 23 || minute > 59 || second > 59 {
            return Err(refused("no such time of day"));
        }
        let mut at = 19;
        let mut micros = 0;
        if bytes.get(at) == Some(&b'.') {
            at += 1;
            let start = at;
            while bytes.get(at).is_some_and(u8::is_ascii_digit) {
                if at - start < 6 {
                    micros = micros * 10 + i64::from(bytes[at] - b'0');
                }
                at += 1;
            }
            if at == start {
                return Err(refused("a fraction of a second needs digits"));
            }
            micros *= 10_i64.pow(6_u32.saturating_sub((at - start) as u32));
        }
        let offset = match bytes.get(at) {
            Some(b'Z' | b'z') if at + 1 == bytes.len() => 0,
            Some(sign @ (b'+' | b'-')) if at + 6 == bytes.len() => {
                separator(at + 3, b":")?;
                let (hours, minutes) = (number(at + 1, 2)?, number(at + 4, 2)?);
                if hours > 23 || minutes > 59 {
                    return Err(refused("no such offset"));
                }
                let offset = (hours * 60 + minutes) * 60;
                if *sign == b'-' { -offset } else { offset }
            }
            _ => return Err(refused("expected Z or an offset like +01:00 at the end")),
        };
        let seconds =
            days_from_civil(year, month, day) * 86_400 + hour * 3_600 + minute * 60 + second
                - offset;
        Timestamp::checked(seconds * 1_000_000 + micros).ok_or_else(|| {
            refused("outside the range the service stores, 0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999999Z")
        })
    }
}

/// Bytes stored as a byte string, never as text (R-P1).
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default)]
pub struct Blob(Vec<u8>);

impl Blob {
    /// The bytes, by value.
    pub fn into_vec(self) -> Vec<u8> {
        self.0
    }
}

impl From<Vec<u8>> for Blob {
    fn from(bytes: Vec<u8>) -> Blob {
        Blob(bytes)
    }
}

impl From<&[u8]> for Blob {
    fn from(bytes: &[u8]) -> Blob {
        Blob(bytes.to_vec())
    }
}

impl From<Blob> for Vec<u8> {
    fn from(blob: Blob) -> Vec<u8> {
        blob.0
    }
}

impl Deref for Blob {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

/// A latitude/longitude pair in degrees, always within range.
///
/// ```
/// use datastore_entity::GeoPoint;
/// assert_eq!(GeoPoint::new(48.85, 2.35).unwrap().latitude(), 48.85);
/// assert!(GeoPoint::new(91.0, 0.0).is_err());
/// ```
#[derive(Clone, Copy, PartialEq, Debug)]
pub struct GeoPoint {
    lat: f64,
    lng: f64,
}

impl GeoPoint {
    /// Validates latitude in `-90..=90` and longitude in `-180..=180`.
    pub fn new(lat: f64, lng: f64) -> Result<GeoPoint, Error> {
        if (-90.0..=90.0).contains(&lat) && (-180.0..=180.0).contains(&lng) {
            Ok(GeoPoint { lat, lng })
        } else {
            Err(Error::InvalidGeoPoint { lat, lng })
        }
    }

    /// The latitude, in degrees.
    pub fn latitude(&self) -> f64 {
        self.lat
    }

    /// The longitude, in degrees.
    pub fn longitude(&self) -> f64 {
        self.lng
    }
}

/// A vector embedding: 1 to 2,048 finite doubles, stored as the service stores one (an array
/// of doubles with meaning 31, always excluded from indexes) and searched by
/// `find_nearest`.
///
/// ```
/// # use datastore_entity::Vector;
/// let v = Vector::new(vec![0.1, 0.2, 0.3])?;
/// assert_eq!(v.dimension(), 3);
/// assert!(Vector::new(vec![]).is_err());
/// assert!(Vector::new(vec![f64::NAN]).is_err());
/// # Ok::<(), datastore_entity::Error>(())
/// ```
#[derive(Clone, PartialEq, Debug)]
pub struct Vector(Vec<f64>);

impl Vector {
    /// The most dimensions the service takes.
    pub const MAX_DIMENSION: usize = 2048;

    /// Validates 1 to [`MAX_DIMENSION`](Vector::MAX_DIMENSION) finite values.
    pub fn new(values: Vec<f64>) -> Result<Vector, Error> {
        let reason = match values.len() {
            0 => Some("a vector has at least one dimension".to_owned()),
            n if n > Vector::MAX_DIMENSION => Some(format!(
                "a vector has at most {} dimensions, not {n}",
                Vector::MAX_DIMENSION
            )),
            _ => values
                .iter()
                .position(|v| !v.is_finite())
                .map(|i| format!("dimension {i} is {}, not a finite number", values[i])),
        };
        match reason {
            None => Ok(Vector(values)),
            Some(reason) => Err(Error::InvalidVector { reason }),
        }
    }

    /// How many dimensions.
    pub fn dimension(&self) -> usize {
        self.0.len()
    }

    /// The values.
    pub fn as_slice(&self) -> &[f64] {
        &self.0
    }

    /// The values, owned.
    pub fn into_vec(self) -> Vec<f64> {
        self.0
    }
}

/// A property type that holds a vector, `Vector` or `Option<Vector>`: what
/// [`Query::find_nearest`](struct.Query.html#method.find_nearest) searches and `#[vector_index(n)]`
/// indexes.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a vector: `find_nearest` searches a `Vector` or `Option<Vector>` property",
    label = "not a vector property"
)]
pub trait VectorField {
    /// The vector, if there is one.
    fn vector(&self) -> Option<&Vector>;
}

impl VectorField for Vector {
    fn vector(&self) -> Option<&Vector> {
        Some(self)
    }
}

impl VectorField for Option<Vector> {
    fn vector(&self) -> Option<&Vector> {
        self.as_ref()
    }
}

/// Refuses a vector of another dimension than its field's `#[vector_index(n)]` declares: the
/// service would store it and leave it out of the index, so no search would ever find it.
/// Used by the derive.
#[doc(hidden)]
pub fn check_dimension(
    kind: &str,
    name: &str,
    field: &impl VectorField,
    dimension: usize,
) -> Result<(), Error> {
    match field.vector() {
        Some(v) if v.dimension() != dimension => Err(Error::InvalidVector {
            reason: format!(
                "property `{name}` of a `{kind}` has {} dimensions, where its \
                 `#[vector_index({dimension})]` declares {dimension}: no search would find it",
                v.dimension()
            ),
        }),
        _ => Ok(()),
    }
}
