//! The value types the service has and Rust lacks: [`Timestamp`], [`Blob`], [`GeoPoint`].

use std::fmt;
use std::ops::Deref;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::error::Error;

/// A point in time with microsecond precision, as the service stores it.
///
/// ```
/// use datastore_entity::Timestamp;
/// let t = Timestamp::from_micros(1_700_000_000_000_000);
/// assert_eq!(t.as_micros(), 1_700_000_000_000_000);
/// assert_eq!(t.to_string(), "2023-11-14T22:13:20.000000Z");
/// ```
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default)]
pub struct Timestamp(i64);

impl Timestamp {
    /// Microseconds since the Unix epoch (negative before it).
    pub const fn from_micros(micros: i64) -> Timestamp {
        Timestamp(micros)
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
    /// Times beyond ±292,000 years saturate.
    fn from(time: SystemTime) -> Timestamp {
        let micros = |d: Duration| i64::try_from(d.as_micros()).unwrap_or(i64::MAX);
        match time.duration_since(UNIX_EPOCH) {
            Ok(after) => Timestamp(micros(after)),
            Err(before) => Timestamp(-micros(before.duration())),
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
