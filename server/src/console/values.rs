//! Values as the console shows and edits them: each type in a field of its own kind (an
//! integer as an integer, a string as text), and what has no plain form — a timestamp, bytes,
//! a key, a point, an array, an embedded entity — as the text of its proto3 JSON (a timestamp
//! in RFC 3339, bytes in base64), read back the same way.

use gcloud_sdk::google::datastore::v1 as pb;
use pb::value::ValueType;
use serde_json::json;

use crate::rest;

/// The types a value can have, as the console names them.
pub(super) const TYPES: [&str; 11] = [
    "null",
    "boolean",
    "integer",
    "double",
    "timestamp",
    "string",
    "blob",
    "key",
    "geo",
    "array",
    "entity",
];

/// The type of `value`, as [`TYPES`] names it.
pub(super) fn type_of(value: &pb::Value) -> &'static str {
    match &value.value_type {
        None | Some(ValueType::NullValue(_)) => "null",
        Some(ValueType::BooleanValue(_)) => "boolean",
        Some(ValueType::IntegerValue(_)) => "integer",
        Some(ValueType::DoubleValue(_)) => "double",
        Some(ValueType::TimestampValue(_)) => "timestamp",
        Some(ValueType::StringValue(_)) => "string",
        Some(ValueType::BlobValue(_)) => "blob",
        Some(ValueType::KeyValue(_)) => "key",
        Some(ValueType::GeoPointValue(_)) => "geo",
        Some(ValueType::ArrayValue(_)) => "array",
        Some(ValueType::EntityValue(_)) => "entity",
    }
}

/// The proto3 JSON field that holds a value of `type_name`, for the types edited as JSON.
fn json_field(type_name: &str) -> Option<&'static str> {
    Some(match type_name {
        "timestamp" => "timestampValue",
        "blob" => "blobValue",
        "key" => "keyValue",
        "geo" => "geoPointValue",
        "array" => "arrayValue",
        "entity" => "entityValue",
        _ => return None,
    })
}

/// The text `value` is shown and edited as.
pub(super) fn text_of(value: &pb::Value) -> String {
    match &value.value_type {
        None | Some(ValueType::NullValue(_)) => String::new(),
        Some(ValueType::BooleanValue(b)) => b.to_string(),
        Some(ValueType::IntegerValue(i)) => i.to_string(),
        Some(ValueType::DoubleValue(d)) => double_text(*d),
        Some(ValueType::StringValue(s)) => s.clone(),
        Some(_) => {
            let field = json_field(type_of(value)).unwrap_or_default();
            let inner = rest::to_json("Value", value)
                .ok()
                .and_then(|mut json| json.get_mut(field).map(serde_json::Value::take))
                .unwrap_or_default();
            match inner {
                serde_json::Value::String(text) => text,
                other => serde_json::to_string_pretty(&other).unwrap_or_default(),
            }
        }
    }
}

/// A double as its text: Rust's shortest form that reads back, `NaN` and `±Infinity`.
fn double_text(d: f64) -> String {
    match d {
        d if d.is_nan() => "NaN".to_owned(),
        f64::INFINITY => "Infinity".to_owned(),
        f64::NEG_INFINITY => "-Infinity".to_owned(),
        d => format!("{d:?}"),
    }
}

/// The value of type `type_name` that `text` writes, or what is wrong with it.
pub(super) fn parse(type_name: &str, text: &str) -> Result<pb::Value, String> {
    let trimmed = text.trim();
    let value_type = match type_name {
        "null" => ValueType::NullValue(0),
        "boolean" => match trimmed {
            "true" => ValueType::BooleanValue(true),
            "false" => ValueType::BooleanValue(false),
            _ => return Err(format!("a boolean is true or false, not {trimmed:?}")),
        },
        "integer" => ValueType::IntegerValue(
            trimmed
                .parse()
                .map_err(|_| format!("{trimmed:?} is not a 64-bit integer"))?,
        ),
        "double" => ValueType::DoubleValue(match trimmed {
            "NaN" => f64::NAN,
            "Infinity" => f64::INFINITY,
            "-Infinity" => f64::NEG_INFINITY,
            t => t.parse().map_err(|_| format!("{t:?} is not a number"))?,
        }),
        "string" => ValueType::StringValue(text.to_owned()),
        other => {
            let field = json_field(other).ok_or_else(|| format!("no type {other:?}"))?;
            let inner = match other {
                "timestamp" | "blob" => json!(trimmed),
                _ => serde_json::from_str(trimmed)
                    .map_err(|e| format!("not JSON ({e}): {trimmed:?}"))?,
            };
            let value: pb::Value = rest::from_json("Value", &json!({ field: inner }))
                .map_err(|status| format!("not a {other}: {}", status.message()))?;
            return Ok(value);
        }
    };
    Ok(pb::Value {
        value_type: Some(value_type),
        ..pb::Value::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every type's text reads back as the same value.
    #[test]
    fn every_type_reads_back_from_its_text() {
        let samples = [
            ("null", ""),
            ("boolean", "true"),
            ("integer", "-9223372036854775808"),
            ("double", "NaN"),
            ("double", "-Infinity"),
            ("double", "0.1"),
            ("timestamp", "2024-02-29T23:59:59.123456Z"),
            ("string", "  <b>spaced</b>  "),
            ("blob", "AP8="),
            (
                "key",
                r#"{"partitionId":{"projectId":"p"},"path":[{"kind":"A","name":"x"}]}"#,
            ),
            ("geo", r#"{"latitude":1.5,"longitude":-2}"#),
            (
                "array",
                r#"{"values":[{"integerValue":"1"},{"stringValue":"a"}]}"#,
            ),
            ("entity", r#"{"properties":{"n":{"integerValue":"2"}}}"#),
        ];
        for (type_name, text) in samples {
            let value = parse(type_name, text).unwrap_or_else(|e| panic!("{type_name}: {e}"));
            assert_eq!(type_of(&value), type_name);
            let again = parse(type_name, &text_of(&value)).unwrap();
            // NaN is not equal to itself: compare the texts.
            assert_eq!(text_of(&again), text_of(&value), "{type_name}");
        }
    }

    #[test]
    fn a_wrong_text_says_what_is_wrong() {
        assert!(
            parse("integer", "1.5")
                .unwrap_err()
                .contains("not a 64-bit integer")
        );
        assert!(
            parse("boolean", "yes")
                .unwrap_err()
                .contains("true or false")
        );
        assert!(
            parse("timestamp", "yesterday")
                .unwrap_err()
                .contains("not a timestamp")
        );
        assert!(parse("array", "[1").unwrap_err().contains("not JSON"));
        assert!(parse("nothing", "").unwrap_err().contains("no type"));
    }
}
