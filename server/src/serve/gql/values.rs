//! GQL's values as the service's: literals (`'text'`, `"text"`, integers, doubles, `TRUE`,
//! `FALSE`, `NULL`, `KEY(…)`, `DATETIME('…')`, `BLOB('…')`, `ARRAY(…)`) and bindings.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use gcloud_sdk::google::datastore::v1 as pb;
use tonic::Status;

use crate::serve::gql::lexer::{Pos, Symbol, Tok, error};
use crate::serve::gql::reader::{Bound, Reader};
use datastore_entity::backend::cloud::wire::timestamp;
use datastore_entity_core::model::scalar::Timestamp;
use pb::key::path_element::IdType;
use pb::value::ValueType;

/// The functions that make a value.
const CONSTRUCTORS: &[&str] = &["key", "array", "datetime", "blob"];

/// Whether a value starts at the reader (rather than a property's name).
pub(super) fn at_value(r: &Reader<'_>) -> bool {
    match r.peek() {
        Tok::Str(_) | Tok::Int(_) | Tok::Double(_) | Tok::Named(_) | Tok::Positional(_) => true,
        Tok::Word(_) => {
            ["true", "false", "null"].iter().any(|w| r.is(w))
                || CONSTRUCTORS.iter().any(|w| r.is_call(w))
        }
        _ => false,
    }
}

fn of(value_type: ValueType) -> pb::Value {
    pb::Value {
        value_type: Some(value_type),
        ..pb::Value::default()
    }
}

/// `NULL`, as `IS NULL` compares.
pub(super) fn null() -> pb::Value {
    of(ValueType::NullValue(0))
}

/// A value: a literal or a binding that holds a value (a cursor is refused here).
pub(super) fn value(r: &mut Reader<'_>) -> Result<pb::Value, Status> {
    let at = r.at();
    if CONSTRUCTORS.iter().any(|w| r.is_call(w)) {
        return constructed(r);
    }
    let token = r.bump();
    let literal = |r: &Reader<'_>, text: &str, value| r.literal(at, text).map(|()| of(value));
    match token.tok {
        Tok::Str(text) => literal(r, "string", ValueType::StringValue(text)),
        Tok::Int(n) => literal(r, &n.to_string(), ValueType::IntegerValue(n)),
        Tok::Double(d) => literal(r, &d.to_string(), ValueType::DoubleValue(d)),
        Tok::Word(w) if w.eq_ignore_ascii_case("true") => {
            literal(r, "TRUE", ValueType::BooleanValue(true))
        }
        Tok::Word(w) if w.eq_ignore_ascii_case("false") => {
            literal(r, "FALSE", ValueType::BooleanValue(false))
        }
        Tok::Word(w) if w.eq_ignore_ascii_case("null") => r.literal(at, "NULL").map(|()| null()),
        tok @ (Tok::Named(_) | Tok::Positional(_)) => match r.bound(&tok, at)? {
            Bound::Value(value) => Ok(value),
            Bound::Cursor(_) => Err(error(
                at,
                format_args!("{tok} is a cursor, where a value is expected"),
            )),
        },
        tok => Err(error(at, format_args!("expected a value, found {tok}"))),
    }
}

/// `KEY(…)`, `ARRAY(…)`, `DATETIME('…')` or `BLOB('…')`.
fn constructed(r: &mut Reader<'_>) -> Result<pb::Value, Status> {
    let at = r.at();
    let Tok::Word(word) = r.bump().tok else {
        return Err(error(at, "expected a value"));
    };
    let word = word.to_ascii_uppercase();
    r.literal(at, &word)?;
    r.expect_symbol(Symbol::Open)?;
    let value = match word.as_str() {
        "KEY" => of(ValueType::KeyValue(key(r)?)),
        "ARRAY" => {
            r.deeper()?;
            let mut values = Vec::new();
            if *r.peek() != Tok::Symbol(Symbol::Close) {
                values.push(value(r)?);
                while r.eat_symbol(Symbol::Comma) {
                    values.push(value(r)?);
                }
            }
            r.shallower();
            of(ValueType::ArrayValue(pb::ArrayValue { values }))
        }
        "DATETIME" => {
            let (text, at) = string(r)?;
            let t: Timestamp = text
                .parse()
                .map_err(|e| error(at, format_args!("invalid DATETIME: {e}")))?;
            of(ValueType::TimestampValue(timestamp(t)))
        }
        _ => {
            let (text, at) = string(r)?;
            let bytes = URL_SAFE_NO_PAD
                .decode(text.as_bytes())
                .map_err(|_| error(at, "invalid BLOB: expected URL-safe base64 without padding"))?;
            of(ValueType::BlobValue(bytes))
        }
    };
    r.expect_symbol(Symbol::Close)?;
    Ok(value)
}

/// `WORD('text')` and the comma after it, inside `KEY(…)`: the text.
fn called(r: &mut Reader<'_>) -> Result<String, Status> {
    r.bump();
    r.expect_symbol(Symbol::Open)?;
    let text = string(r)?.0;
    r.expect_symbol(Symbol::Close)?;
    r.expect_symbol(Symbol::Comma)?;
    Ok(text)
}

/// A quoted string and where it is.
fn string(r: &mut Reader<'_>) -> Result<(String, Pos), Status> {
    let at = r.at();
    match r.peek() {
        Tok::Str(_) => match r.bump().tok {
            Tok::Str(text) => Ok((text, at)),
            _ => Err(error(at, "expected a string")),
        },
        _ => Err(r.expected("a string")),
    }
}

/// A key's inside: `[PROJECT('p'),] [NAMESPACE('n'),] Kind, id-or-name [, Kind, id-or-name]…`.
/// As the service reads it, a key without `PROJECT` is in the request's project, and in its
/// namespace too unless `NAMESPACE` says; `PROJECT` alone is the default namespace.
fn key(r: &mut Reader<'_>) -> Result<pb::Key, Status> {
    let mut partition = r.partition.clone();
    if r.is_call("project") {
        partition.project_id = called(r)?;
        partition.namespace_id.clear();
    }
    if r.is_call("namespace") {
        partition.namespace_id = called(r)?;
    }
    let mut path = Vec::new();
    loop {
        let kind = r.name("a kind")?;
        r.expect_symbol(Symbol::Comma)?;
        let at = r.at();
        let id_type = match r.bump().tok {
            Tok::Int(0) => return Err(error(at, "a key's id is never 0")),
            Tok::Int(id) => IdType::Id(id),
            Tok::Str(name) => IdType::Name(name),
            tok => {
                return Err(error(
                    at,
                    format_args!(
                        "expected a key's id (an integer) or name (a string), found {tok}"
                    ),
                ));
            }
        };
        path.push(pb::key::PathElement {
            kind,
            id_type: Some(id_type),
        });
        if !r.eat_symbol(Symbol::Comma) {
            return Ok(pb::Key {
                partition_id: Some(partition),
                path,
            });
        }
    }
}
