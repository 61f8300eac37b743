//! URL-safe keys: the legacy App Engine `Reference` protocol buffer, base64url without
//! padding — what NDB's `key.urlsafe()` and `ndb.Key(urlsafe=...)`, App Engine Go's `Key.Encode` and
//! Java's `KeyFactory.keyToString` share, so links and stored references keep working across
//! clients.
//!
//! ```text
//! Reference { app = 13: string; path = 14: Path; name_space = 20: string; database_id = 23: string }
//! Path { repeated group Element = 1 { type = 2: string; id = 3: int64; name = 4: string } }
//! ```

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use crate::error::Error;
use crate::model::entity::Entity;
use crate::model::key::{IdOrName, Key, KeyId, PartitionId, PathElement, RawKey};
use crate::model::name::KeyName;

const APP: u64 = 13;
const PATH: u64 = 14;
const NAMESPACE: u64 = 20;
const DATABASE: u64 = 23;
const ELEMENT: u64 = 1;
const TYPE: u64 = 2;
const ID: u64 = 3;
const NAME: u64 = 4;

const VARINT: u64 = 0;
const BYTES: u64 = 2;
const START_GROUP: u64 = 3;
const END_GROUP: u64 = 4;

impl RawKey {
    /// The key as a URL-safe string, byte for byte what NDB's `key.urlsafe()` gives for the
    /// same key in project `project_id` (the key's own namespace and database included; a key
    /// built by a generated builder is in the default ones).
    ///
    /// The string only encodes the key: anyone can read the kind, ids and names back, so do
    /// not put sensitive data in key names (R-N8).
    pub fn to_urlsafe(&self, project_id: &str) -> String {
        let mut path = Vec::new();
        for element in self.path() {
            tag(&mut path, ELEMENT, START_GROUP);
            string(&mut path, TYPE, element.kind());
            match element.id_or_name() {
                Some(IdOrName::Id(id)) => {
                    tag(&mut path, ID, VARINT);
                    varint(&mut path, id.get() as u64);
                }
                Some(IdOrName::Name(name)) => string(&mut path, NAME, name.as_str()),
                None => {}
            }
            tag(&mut path, ELEMENT, END_GROUP);
        }
        let mut out = Vec::with_capacity(path.len() + project_id.len() + 16);
        string(&mut out, APP, project_id);
        tag(&mut out, PATH, BYTES);
        varint(&mut out, path.len() as u64);
        out.extend_from_slice(&path);
        if !self.namespace().is_empty() {
            string(&mut out, NAMESPACE, self.namespace());
        }
        if let Some(database) = self.partition().map(|p| &p.database_id)
            && !database.is_empty()
        {
            string(&mut out, DATABASE, database);
        }
        URL_SAFE_NO_PAD.encode(out)
    }

    /// Reads a URL-safe key (NDB's `key.urlsafe()`, App Engine Go's `Key.Encode`): its project (an App
    /// Engine app id's `s~` prefix dropped), database, namespace and path, every name and id
    /// checked as for a new key. Anything else is [`Error::Parse`], never a panic.
    pub fn from_urlsafe(text: &str) -> Result<RawKey, Error> {
        let fail = |reason: &str| Error::Parse {
            what: "a URL-safe key",
            text: shown(text),
            reason: reason.to_owned(),
        };
        // Padding is accepted too: some encoders keep it.
        let bytes = URL_SAFE_NO_PAD
            .decode(text.trim_end_matches('='))
            .map_err(|e| fail(&format!("not base64url ({e})")))?;
        let mut reader = Reader(&bytes);
        let (mut app, mut namespace, mut database, mut path) = (None, None, None, None);
        while !reader.0.is_empty() {
            let (field, wire) = reader.tag().ok_or_else(|| fail("a truncated field"))?;
            match (field, wire) {
                (APP, BYTES) => app = Some(reader.string().ok_or_else(|| fail("a bad app id"))?),
                (NAMESPACE, BYTES) => {
                    namespace = Some(reader.string().ok_or_else(|| fail("a bad namespace"))?);
                }
                (DATABASE, BYTES) => {
                    database = Some(reader.string().ok_or_else(|| fail("a bad database"))?);
                }
                (PATH, BYTES) => {
                    let bytes = reader.bytes().ok_or_else(|| fail("a truncated path"))?;
                    path = Some(elements(bytes).map_err(|unreadable| match unreadable {
                        Unreadable::Malformed(what) => fail(what),
                        Unreadable::Invalid(error) => fail(&error.to_string()),
                    })?);
                }
                _ => reader
                    .skip(wire)
                    .ok_or_else(|| fail("an unknown, truncated field"))?,
            }
        }
        let app = app.ok_or_else(|| fail("it has no app id"))?;
        // App Engine app ids carry a partition prefix (`s~`, `e~`, `dev~`).
        let project_id = app.rsplit_once('~').map_or(app, |(_, p)| p).to_owned();
        let path = path.ok_or_else(|| fail("it has no path"))?;
        let partition = PartitionId {
            project_id,
            database_id: database.unwrap_or_default().to_owned(),
            namespace: namespace.unwrap_or_default().to_owned(),
        };
        let key = RawKey::new(Some(partition), path)?;
        if !key.is_complete() {
            return Err(fail("its last element has no id or name"));
        }
        Ok(key)
    }
}

impl<E: Entity> Key<E> {
    /// The key as a URL-safe string, as NDB's `key.urlsafe()` (see [`RawKey::to_urlsafe`]).
    ///
    /// ```
    /// # use datastore_entity::prelude::*;
    /// #[derive(Entity)]
    /// struct Account { #[key] name: KeyName }
    ///
    /// let key = Account::key(KeyName::new("ann")?);
    /// let text = key.to_urlsafe("my-project");
    /// assert_eq!(text, "agpteS1wcm9qZWN0chALEgdBY2NvdW50IgNhbm4M"); // = ndb.Key("Account", "ann").urlsafe()
    /// assert_eq!(Key::<Account>::from_urlsafe(&text)?, key);
    /// # Ok::<(), datastore_entity::Error>(())
    /// ```
    pub fn to_urlsafe(&self, project_id: &str) -> String {
        self.raw().to_urlsafe(project_id)
    }

    /// Reads a URL-safe key, checking that it is of kind `E::KIND` under the parents `E`
    /// has (see [`RawKey::from_urlsafe`] and [`Key::from_raw_checked`]).
    pub fn from_urlsafe(text: &str) -> Result<Key<E>, Error> {
        Key::from_raw_checked(RawKey::from_urlsafe(text)?)
    }
}

/// Why a URL-safe key's path cannot be read.
enum Unreadable {
    /// Its bytes are not a path.
    Malformed(&'static str),
    /// An element is not a valid key element.
    Invalid(Error),
}

fn malformed(what: &'static str) -> Unreadable {
    Unreadable::Malformed(what)
}

/// The path's elements, each checked as for a new key.
fn elements(mut bytes: &[u8]) -> Result<Vec<PathElement>, Unreadable> {
    let mut path = Vec::new();
    while !bytes.is_empty() {
        let mut reader = Reader(bytes);
        match reader.tag() {
            Some((ELEMENT, START_GROUP)) => {}
            _ => return Err(Unreadable::Malformed("a path element is not a group")),
        }
        let (mut kind, mut id_or_name) = (None, None);
        loop {
            let (field, wire) = reader.tag().ok_or(malformed("a truncated path element"))?;
            match (field, wire) {
                (ELEMENT, END_GROUP) => break,
                (TYPE, BYTES) => kind = Some(reader.string().ok_or(malformed("a bad kind"))?),
                (ID, VARINT) => {
                    let id = reader.varint().ok_or(malformed("a truncated id"))? as i64;
                    let id = KeyId::new(id).map_err(Unreadable::Invalid)?;
                    id_or_name = Some(IdOrName::Id(id));
                }
                (NAME, BYTES) => {
                    let name = reader.string().ok_or(malformed("a bad key name"))?;
                    let name = KeyName::new(name).map_err(Unreadable::Invalid)?;
                    id_or_name = Some(IdOrName::Name(name));
                }
                _ => reader
                    .skip(wire)
                    .ok_or(malformed("an unknown, truncated field"))?,
            }
        }
        let kind = kind.ok_or(malformed("a path element has no kind"))?;
        path.push(PathElement::new(kind, id_or_name).map_err(Unreadable::Invalid)?);
        bytes = reader.0;
    }
    Ok(path)
}

/// At most 80 characters of untrusted input, for an error message.
fn shown(text: &str) -> String {
    match text.char_indices().nth(80) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

fn tag(out: &mut Vec<u8>, field: u64, wire: u64) {
    varint(out, (field << 3) | wire);
}

fn varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn string(out: &mut Vec<u8>, field: u64, text: &str) {
    tag(out, field, BYTES);
    varint(out, text.len() as u64);
    out.extend_from_slice(text.as_bytes());
}

/// Reads protocol buffer fields; `None` is truncated or malformed input.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Option<u64> {
        let mut n = 0u64;
        for shift in (0..64).step_by(7) {
            let (&byte, rest) = self.0.split_first()?;
            self.0 = rest;
            n |= u64::from(byte & 0x7f) << shift;
            if byte < 0x80 {
                return Some(n);
            }
        }
        None
    }

    fn tag(&mut self) -> Option<(u64, u64)> {
        let tag = self.varint()?;
        Some((tag >> 3, tag & 7))
    }

    fn bytes(&mut self) -> Option<&'a [u8]> {
        let len = usize::try_from(self.varint()?).ok()?;
        if len > self.0.len() {
            return None;
        }
        let (bytes, rest) = self.0.split_at(len);
        self.0 = rest;
        Some(bytes)
    }

    fn string(&mut self) -> Option<&'a str> {
        std::str::from_utf8(self.bytes()?).ok()
    }

    /// Skips a field of wire type `wire` (groups are not expected outside the path).
    fn skip(&mut self, wire: u64) -> Option<()> {
        match wire {
            VARINT => self.varint().map(drop),
            BYTES => self.bytes().map(drop),
            1 => self.advance(8),
            5 => self.advance(4),
            _ => None,
        }
    }

    fn advance(&mut self, n: usize) -> Option<()> {
        self.0 = self.0.get(n..)?;
        Some(())
    }
}
