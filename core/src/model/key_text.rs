//! Keys as readable text (`Display` / `FromStr`): `Account:"ann"/Post:5`, the path's elements
//! joined by `/` (a kind cannot hold one, R-N2), each its kind, then its id or its name quoted
//! as Rust quotes strings. A key outside the default namespace or database starts with them
//! in brackets: `[tenant-a]Account:"ann"`, `[orders/tenant-a]Account:"ann"`. The project is
//! not written: text read back belongs to the project of the `Db` that uses it.
//!
//! For links and stored references that other clients read, use URL-safe keys
//! ([`RawKey::to_urlsafe`]); this form is for people (logs, admin tools, tests).

use std::fmt;
use std::str::FromStr;

use crate::error::Error;
use crate::model::entity::Entity;
use crate::model::key::{IdOrName, Key, KeyId, PartitionId, PathElement, RawKey};
use crate::model::name::KeyName;

impl fmt::Display for RawKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(partition) = self.partition() {
            match (partition.database_id.as_str(), partition.namespace.as_str()) {
                ("", "") => {}
                ("", namespace) => write!(f, "[{namespace}]")?,
                (database, namespace) => write!(f, "[{database}/{namespace}]")?,
            }
        }
        for (i, element) in self.path().iter().enumerate() {
            if i > 0 {
                f.write_str("/")?;
            }
            write!(f, "{}:", element.kind())?;
            match element.id_or_name() {
                Some(IdOrName::Id(id)) => write!(f, "{id}")?,
                Some(IdOrName::Name(name)) => write!(f, "{:?}", name.as_str())?,
                None => f.write_str("?")?,
            }
        }
        Ok(())
    }
}

/// `Account:"ann"/Post:5`; see the module docs.
///
/// ```
/// # use datastore_entity::prelude::*;
/// #[derive(Entity)]
/// struct Account { #[key] name: KeyName }
///
/// let key = Account::key(KeyName::new("ann")?);
/// assert_eq!(key.to_string(), r#"Account:"ann""#);
/// assert_eq!(r#"Account:"ann""#.parse::<Key<Account>>()?, key);
/// assert!(r#"Post:"ann""#.parse::<Key<Account>>().is_err()); // another kind
/// # Ok::<(), datastore_entity::Error>(())
/// ```
impl<E> fmt::Display for Key<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self.raw(), f)
    }
}

impl FromStr for RawKey {
    type Err = Error;

    /// Reads what `Display` writes, every kind, name and id checked as for a new key.
    fn from_str(text: &str) -> Result<RawKey, Error> {
        let fail = |reason: String| Error::Parse {
            what: "a key",
            text: text.to_owned(),
            reason,
        };
        let (partition, mut rest) = match text.strip_prefix('[') {
            Some(rest) => {
                let (inside, rest) = rest
                    .split_once(']')
                    .ok_or_else(|| fail("the `[` of its namespace is not closed".into()))?;
                let (database, namespace) = inside.split_once('/').unwrap_or(("", inside));
                let partition = PartitionId {
                    project_id: String::new(),
                    database_id: database.to_owned(),
                    namespace: namespace.to_owned(),
                };
                (Some(partition), rest)
            }
            None => (None, text),
        };
        let mut path = Vec::new();
        loop {
            let (kind, after) = rest.split_once(':').ok_or_else(|| {
                fail("each element is `Kind:id` or `Kind:\"name\"`, this one has no `:`".into())
            })?;
            let (id_or_name, after) = id_or_name(after).map_err(|e| fail(e.to_string()))?;
            path.push(PathElement::new(kind, id_or_name)?);
            match after.strip_prefix('/') {
                Some(next) => rest = next,
                None if after.is_empty() => break,
                None => return Err(fail(format!("unexpected `{after}` after an element"))),
            }
        }
        RawKey::new(partition, path)
    }
}

impl<E: Entity> FromStr for Key<E> {
    type Err = Error;

    /// Reads what `Display` writes, checking it as the generated builders make keys: its
    /// kind, and the parents above it ([`Key::from_raw_checked`]).
    fn from_str(text: &str) -> Result<Key<E>, Error> {
        Key::from_raw_checked(text.parse()?)
    }
}

/// Why an element's id or name cannot be read.
enum Unreadable {
    NeitherIdNorName(String),
    Invalid(Error),
    UnicodeEscape,
    NotAChar(String),
    UnknownEscape(char),
    Unclosed,
}

impl fmt::Display for Unreadable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unreadable::NeitherIdNorName(digits) => {
                write!(f, "`{digits}` is neither an id nor a quoted name")
            }
            Unreadable::Invalid(error) => write!(f, "{error}"),
            Unreadable::UnicodeEscape => f.write_str("a `\\u` escape is written `\\u{…}`"),
            Unreadable::NotAChar(hex) => write!(f, "`\\u{{{hex}}}` is not a character"),
            Unreadable::UnknownEscape(c) => write!(f, "an unknown escape `\\{c}`"),
            Unreadable::Unclosed => f.write_str("a name's closing quote is missing"),
        }
    }
}

/// The id or quoted name at the start of `text`, and what follows it.
fn id_or_name(text: &str) -> Result<(Option<IdOrName>, &str), Unreadable> {
    if let Some(rest) = text.strip_prefix('?') {
        return Ok((None, rest));
    }
    if let Some(quoted) = text.strip_prefix('"') {
        let (name, rest) = unquote(quoted)?;
        let name = KeyName::new(name).map_err(Unreadable::Invalid)?;
        return Ok((Some(IdOrName::Name(name)), rest));
    }
    let end = text.find('/').unwrap_or(text.len());
    let (digits, rest) = text.split_at(end);
    let id: i64 = digits
        .parse()
        .map_err(|_| Unreadable::NeitherIdNorName(digits.to_owned()))?;
    let id = KeyId::new(id).map_err(Unreadable::Invalid)?;
    Ok((Some(IdOrName::Id(id)), rest))
}

/// A string quoted as Rust's `{:?}` quotes it, after its opening quote: the string, and what
/// follows the closing quote.
fn unquote(text: &str) -> Result<(String, &str), Unreadable> {
    let mut out = String::new();
    let mut chars = text.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Ok((out, &text[i + 1..])),
            '\\' => {
                let escaped = match chars.next().map(|(_, c)| c) {
                    Some('n') => '\n',
                    Some('r') => '\r',
                    Some('t') => '\t',
                    Some('0') => '\0',
                    Some(c @ ('\\' | '"' | '\'')) => c,
                    Some('u') => {
                        let rest = chars.as_str();
                        let hex = rest
                            .strip_prefix('{')
                            .and_then(|r| r.split_once('}'))
                            .map(|(hex, _)| hex)
                            .ok_or(Unreadable::UnicodeEscape)?;
                        let code = u32::from_str_radix(hex, 16)
                            .ok()
                            .and_then(char::from_u32)
                            .ok_or_else(|| Unreadable::NotAChar(hex.to_owned()))?;
                        // Skip `{hex}`.
                        for _ in 0..hex.len() + 2 {
                            chars.next();
                        }
                        code
                    }
                    other => return Err(Unreadable::UnknownEscape(other.unwrap_or(' '))),
                };
                out.push(escaped);
            }
            c => out.push(c),
        }
    }
    Err(Unreadable::Unclosed)
}
