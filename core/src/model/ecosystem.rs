//! The Rust ecosystem's types as properties, each behind its Cargo feature (off by default):
//! `chrono::DateTime<Utc>` (`chrono`) and `time::OffsetDateTime` (`time`) are timestamps, with
//! R-I3 applying to them exactly as to [`Timestamp`](crate::model::scalar::Timestamp); `uuid::Uuid` (`uuid`) is its hyphenated
//! lowercase text, indexed and filterable.
//!
//! The service keeps microseconds. Nanoseconds are truncated toward the past when written
//! (`…:05.678901999Z` is stored as `…:05.678901Z`), so a date-time reads back equal only when
//! it holds whole microseconds; an `OffsetDateTime` reads back in UTC (the same instant).

#[cfg(any(feature = "chrono", feature = "time"))]
use crate::model::property_type::{Flat, Increasing, Projectable, PropertyType, ShardIndexable};
#[cfg(any(feature = "chrono", feature = "time"))]
use crate::model::scalar::Timestamp;
#[cfg(any(feature = "chrono", feature = "time"))]
use crate::model::value::{DecodeError, Value};

/// A date-time type stored as a timestamp: `to_micros` (floored to the microsecond) and
/// `from_micros` (`None` outside the type's range).
#[cfg(any(feature = "chrono", feature = "time"))]
macro_rules! timestamp_type {
    ($t:ty, $name:literal, $to_micros:expr, $from_micros:expr) => {
        impl From<$t> for Timestamp {
            /// The instant, truncated to the microsecond toward the past.
            fn from(value: $t) -> Timestamp {
                let to_micros: fn(&$t) -> i64 = $to_micros;
                Timestamp::from_micros(to_micros(&value))
            }
        }

        impl PropertyType for $t {
            type Operand = $t;
            type Growth = Increasing;
            fn to_value(&self) -> Value {
                Value::Timestamp(Timestamp::from(*self))
            }
            fn from_value(value: Value) -> Result<Self, DecodeError> {
                Timestamp::from_value(value).and_then(in_range)
            }
            fn from_index_value(value: Value) -> Result<Self, DecodeError> {
                Timestamp::from_index_value(value).and_then(in_range)
            }
        }

        impl Projectable for $t {
            type Projected = $t;
            type Shape = Flat;
        }

        impl ShardIndexable for $t {
            fn sort_value(&self) -> Option<i64> {
                Some(Timestamp::from(*self).as_micros())
            }
        }

        /// The stored timestamp as this type, or an error when the type cannot hold it.
        fn in_range(timestamp: Timestamp) -> Result<$t, DecodeError> {
            let from_micros: fn(i64) -> Option<$t> = $from_micros;
            from_micros(timestamp.as_micros()).ok_or_else(|| DecodeError {
                path: String::new(),
                expected: concat!("a timestamp within the range of ", $name).to_owned(),
                found: format!("the timestamp {timestamp}"),
            })
        }
    };
}

#[cfg(feature = "chrono")]
mod chrono_date_time {
    use super::*;
    use chrono::{DateTime, Utc};

    timestamp_type!(
        DateTime<Utc>,
        "chrono::DateTime<Utc>",
        |t| t.timestamp_micros(),
        DateTime::<Utc>::from_timestamp_micros
    );
}

#[cfg(feature = "time")]
mod time_date_time {
    use super::*;
    use time::OffsetDateTime;

    timestamp_type!(
        OffsetDateTime,
        "time::OffsetDateTime",
        // time's years are at most 9999 (or 999,999 with its `large-dates`): in range of i64.
        |t| i64::try_from(t.unix_timestamp_nanos().div_euclid(1_000)).unwrap_or(i64::MAX),
        |micros| OffsetDateTime::from_unix_timestamp_nanos(i128::from(micros) * 1_000).ok()
    );
}

#[cfg(feature = "uuid")]
mod uuid_text {
    use uuid::Uuid;

    use crate::model::property_type::{Flat, Projectable, PropertyType, Steady};
    use crate::model::value::{DecodeError, Value};

    impl PropertyType for Uuid {
        type Operand = Uuid;
        type Growth = Steady;
        fn to_value(&self) -> Value {
            Value::String(self.hyphenated().to_string())
        }
        fn from_value(value: Value) -> Result<Self, DecodeError> {
            match &value {
                Value::String(text) => Uuid::parse_str(text).map_err(|e| DecodeError {
                    path: String::new(),
                    expected: "a UUID".to_owned(),
                    found: format!("the string {text:?} ({e})"),
                }),
                other => Err(DecodeError::mismatch("a UUID (a string)", other)),
            }
        }
    }

    impl Projectable for Uuid {
        type Projected = Uuid;
        type Shape = Flat;
    }
}

/// `#[property(json)]` (feature `serde`): the layout of NDB's JsonProperty — compact JSON
/// text, ASCII only (Python's `json.dumps(..., ensure_ascii=True)`; NDB decodes the bytes as
/// ASCII), as bytes excluded from indexes.
#[cfg(feature = "serde")]
mod json {
    use std::fmt::Write as _;

    use serde::Serialize;
    use serde::de::DeserializeOwned;

    use crate::model::generated::JsonField;
    use crate::model::property_type::short_type_name;
    use crate::model::scalar::Blob;
    use crate::model::value::{DecodeError, Value};

    impl<T: Serialize + DeserializeOwned> JsonField for T {
        fn to_json(&self) -> Result<Value, Box<dyn std::error::Error + Send + Sync>> {
            let text = serde_json::to_string(self)?;
            if text == "null" {
                return Ok(Value::Null);
            }
            Ok(Value::Blob(Blob::from(ascii(&text).into_bytes())))
        }

        fn from_json(value: Option<Value>) -> Result<Self, DecodeError> {
            let missing = value.is_none();
            let parsed = match &value {
                None | Some(Value::Null) => serde_json::from_str("null"),
                Some(Value::Blob(bytes)) => serde_json::from_slice(&bytes[..]),
                Some(Value::String(text)) => serde_json::from_str(text),
                Some(other) => {
                    return Err(DecodeError::mismatch(
                        "JSON text (bytes or a string)",
                        other,
                    ));
                }
            };
            parsed.map_err(|error| DecodeError {
                path: String::new(),
                expected: format!(
                    "JSON of a `{}`",
                    short_type_name(std::any::type_name::<T>())
                ),
                found: match missing {
                    true => "no such property".to_owned(),
                    false => format!("JSON it cannot read ({error})"),
                },
            })
        }
    }

    /// JSON text with every character outside ASCII escaped as `\uXXXX` (UTF-16 units, as
    /// Python writes them): such characters occur only inside strings, where the escape means
    /// the same.
    pub(super) fn ascii(text: &str) -> String {
        if text.is_ascii() {
            return text.to_owned();
        }
        let mut out = String::with_capacity(text.len() + 16);
        for c in text.chars() {
            if c.is_ascii() {
                out.push(c);
            } else {
                for unit in c.encode_utf16(&mut [0; 2]) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
        }
        out
    }
}

/// serde for the crate's own types (feature `serde`): keys, names and timestamps as their
/// text (`Account:"ann"`, `2024-01-02T03:04:05.678901Z`), ids as integers, geo points as
/// `{ latitude, longitude }`, blobs as bytes. Deserializing checks what the constructors
/// check: `"a/b"` is not a `KeyName`, `0` is not a `KeyId`.
#[cfg(feature = "serde")]
pub mod serde_forms {
    use std::fmt::Display;
    use std::str::FromStr;

    use serde::de::Error as _;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use crate::model::entity::Entity;
    use crate::model::key::{Key, KeyId, RawKey};
    use crate::model::name::KeyName;
    use crate::model::scalar::{Blob, GeoPoint, Timestamp};

    /// `value` as its `Display` text.
    pub fn as_text<S: Serializer>(value: &impl Display, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(value)
    }

    /// A value read from text by its `FromStr`, whose error says what is wrong.
    pub fn from_text<'de, D, T>(d: D) -> Result<T, D::Error>
    where
        D: Deserializer<'de>,
        T: FromStr,
        T::Err: Display,
    {
        let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        text.parse().map_err(D::Error::custom)
    }

    macro_rules! text_form {
        ($($t:ty),*) => {$(
            impl Serialize for $t {
                fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                    as_text(self, s)
                }
            }
            impl<'de> Deserialize<'de> for $t {
                fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                    from_text(d)
                }
            }
        )*};
    }
    text_form!(RawKey, Timestamp);

    impl<E> Serialize for Key<E> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            as_text(self, s)
        }
    }

    impl<'de, E: Entity> Deserialize<'de> for Key<E> {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            from_text(d)
        }
    }

    impl Serialize for KeyName {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.serialize_str(self.as_str())
        }
    }

    impl<'de> Deserialize<'de> for KeyName {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            KeyName::new(String::deserialize(d)?).map_err(D::Error::custom)
        }
    }

    impl Serialize for KeyId {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.serialize_i64(self.get())
        }
    }

    impl<'de> Deserialize<'de> for KeyId {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            KeyId::new(i64::deserialize(d)?).map_err(D::Error::custom)
        }
    }

    /// A geo point's wire form.
    #[derive(Serialize, Deserialize)]
    #[serde(rename = "GeoPoint")]
    struct LatLng {
        latitude: f64,
        longitude: f64,
    }

    impl Serialize for GeoPoint {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            let point = LatLng {
                latitude: self.latitude(),
                longitude: self.longitude(),
            };
            point.serialize(s)
        }
    }

    impl<'de> Deserialize<'de> for GeoPoint {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            let point = LatLng::deserialize(d)?;
            GeoPoint::new(point.latitude, point.longitude).map_err(D::Error::custom)
        }
    }

    impl Serialize for Blob {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.serialize_bytes(self)
        }
    }

    impl<'de> Deserialize<'de> for Blob {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            <Vec<u8>>::deserialize(d).map(Blob::from)
        }
    }
}
