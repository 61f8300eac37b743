//! The service's rules on one entity written, all checked by one walk of it: valid property
//! names, indexed strings and byte strings of at most 1,500 bytes (R-I4), at most
//! [`MAX_NESTING`] array and entity values nested in one another, no array directly inside an
//! array, no incomplete key as a value, the indexed values and index entries of R-I5
//! (counted as `index_entries.rs` says), and at most 1 MiB in all.
//!
//! The walk recurses at most [`MAX_NESTING`] levels, whatever the value holds: past that it
//! refuses, naming the path.

use crate::error::Error;
use crate::model::annotations::{AnnotationsView, VECTOR_MEANING};
use crate::model::key::{KEY_PROPERTY, RawKey};
use crate::model::name::{NameRole, validate};
use crate::model::value::{MAX_NESTING, PropertyMap};
use crate::model::views::{ValueView, Viewed};
use crate::rules::index_entries::{CompositeIndex, Level, MAX_INDEXED_VALUES, check_entries};

/// Longest indexed string or byte string, in bytes (R-I4).
pub const MAX_INDEXED_BYTES: usize = 1500;

/// The longest link (a string of the service's meaning 2, NDB's and App Engine's `Link`) the
/// service stores, indexed or not (an indexed link is not bound by [`MAX_INDEXED_BYTES`]).
pub const MAX_LINK_BYTES: usize = 2083;

/// The largest entity the service stores, in bytes (its key and properties, encoded).
pub const MAX_ENTITY_BYTES: usize = 1_048_572;

/// Every rule on one entity written at `key`: the one implementation, called by each
/// backend's commit for each entity it writes (the embedded engine after merging a masked
/// write with what is stored, which is what it stores). `composites` are the composite
/// indexes of the entity's kind.
pub fn check_entity<C: CompositeIndex>(
    key: &RawKey,
    entity: &PropertyMap,
    composites: &[C],
) -> Result<(), Error> {
    let facts = entity.facts();
    let builtin = match facts.indexed {
        // Every property plain (scalars, or one array of scalars), with names the derive
        // validated, as the sink that wrote them saw: all the walk below would find is how
        // many values are indexed — unless one is too long or there are too many, which the
        // walk then reports with their property.
        Some(indexed)
            if facts.names
                && (facts.longest as usize) <= MAX_INDEXED_BYTES
                && (indexed as usize) <= MAX_INDEXED_VALUES =>
        {
            indexed as usize
        }
        _ => {
            let mut walk = Walk::new(key);
            walk.names_checked = facts.names;
            walk.level(entity.view(), false, false, 0)?;
            walk.builtin
        }
    };
    check_entries(key, entity, composites, builtin, &|name| {
        // For the error only: the built-in entries of one top-level property.
        let mut one = Walk::new(key);
        let property = entity.view().filter(|(n, ..)| *n == name);
        match one.level(property, false, false, 0) {
            Ok(()) => one.builtin,
            Err(_) => 0,
        }
    })?;
    let size = entity.entity_size(key);
    if size > MAX_ENTITY_BYTES {
        return Err(Error::EntityTooLarge {
            key: format!("{key:?}"),
            size,
            max: MAX_ENTITY_BYTES,
        });
    }
    Ok(())
}

/// The walk of one entity: where it is (the property path, for errors) and the built-in
/// index entries found so far.
struct Walk<'a> {
    key: &'a RawKey,
    path: Vec<&'a str>,
    builtin: usize,
    /// Whether every name was validated when the derive compiled: not validated again.
    names_checked: bool,
}

impl<'a> Walk<'a> {
    fn new(key: &'a RawKey) -> Walk<'a> {
        Walk {
            key,
            path: Vec::new(),
            builtin: 0,
            names_checked: false,
        }
    }

    fn kind(&self) -> String {
        self.key.kind().to_owned()
    }

    /// The dotted path of the property being checked, built only for an error.
    fn dotted(&self) -> String {
        self.path.join(".")
    }

    /// One entity level: the entity's own properties, or an embedded entity value's at
    /// `self.path`, found `depth` array and entity values deep. `excluded`: everything in it
    /// is excluded from indexes; `in_array`: it is an element of an array, so its properties
    /// are not indexed (but still counted against its own level's limit, as the service does).
    fn level(
        &mut self,
        properties: impl Iterator<Item = Viewed<'a>>,
        excluded: bool,
        in_array: bool,
        depth: usize,
    ) -> Result<(), Error> {
        let mut level = Level::default();
        for (name, property_excluded, value, annotations) in properties {
            // An embedded entity's own key, held as a property of that name, is no property to
            // the service: it may be incomplete, and counts nowhere.
            if !self.path.is_empty() && name == KEY_PROPERTY && matches!(value, ValueView::Key(_)) {
                continue;
            }
            match (self.names_checked, self.path.is_empty()) {
                // Validated when the derive compiled.
                (true, _) => {}
                // A top-level `field.sub` is a flattened embedded entity (`#[property(flatten)]`,
                // NDB's legacy layout): each of its names follows the rules.
                (false, true) => {
                    for segment in name.split('.') {
                        validate(NameRole::Property, segment)?;
                    }
                }
                (false, false) => validate(NameRole::Property, name)?,
            }
            self.path.push(name);
            let excluded = excluded || property_excluded;
            let meaning = annotations.meaning();
            let values = match value {
                // Each element of an array as its annotations say.
                ValueView::Array(_) if !annotations.is_none() => {
                    self.array(value, excluded, annotations, in_array, depth)?
                }
                _ => self.value(value, excluded, meaning, in_array, false, depth)?,
            };
            self.path.pop();
            level.add(name, values);
        }
        level.check(self.key, &self.path)
    }

    /// Checks an array whose elements carry `annotations` (each one's meaning and exclusion)
    /// as [`Walk::value`] checks one; returns how many values it indexes.
    fn array(
        &mut self,
        value: ValueView<'a>,
        excluded: bool,
        annotations: AnnotationsView<'a>,
        in_array: bool,
        depth: usize,
    ) -> Result<usize, Error> {
        let ValueView::Array(values) = value else {
            return self.value(value, excluded, 0, in_array, false, depth);
        };
        if annotations.meaning() != 0 {
            return Err(Error::InvalidValue {
                kind: self.kind(),
                property: self.dotted(),
                reason: "an array with the service's meaning, which the service refuses (\"A \
                         Value containing a list_value cannot specify a meaning.\")"
                    .to_owned(),
            });
        }
        if depth >= MAX_NESTING {
            return self.value(value, excluded, 0, in_array, false, depth);
        }
        let mut indexed = 0;
        for (i, v) in values.iter().enumerate() {
            let (meaning, own) = annotations.element(i, false);
            let excluded = excluded || own;
            self.value(v, excluded, meaning, in_array, true, depth + 1)?;
            indexed += usize::from(!excluded);
        }
        Ok(indexed)
    }

    /// Checks `value`, found `depth` array and entity values deep (an element of an array
    /// when `element`) with the service's `meaning` (`0`: none); returns how many values it
    /// indexes at its level.
    fn value(
        &mut self,
        value: ValueView<'a>,
        excluded: bool,
        meaning: i32,
        in_array: bool,
        element: bool,
        depth: usize,
    ) -> Result<usize, Error> {
        let indexed = usize::from(!excluded);
        if meaning != 0 {
            check_meaning(value, meaning, excluded).map_err(|refused| Error::InvalidValue {
                kind: self.kind(),
                property: self.dotted(),
                reason: refused.to_string(),
            })?;
        }
        match value {
            ValueView::Array(_) | ValueView::Entity(_) if depth >= MAX_NESTING => {
                Err(Error::InvalidValue {
                    kind: self.kind(),
                    property: self.dotted(),
                    reason: format!(
                        "more than {MAX_NESTING} array and embedded entity values nested in \
                         one another, which the service refuses"
                    ),
                })
            }
            // A link (meaning 2) is indexed up to its own bound (checked with its meaning).
            ValueView::String(s) if !excluded && s.len() > MAX_INDEXED_BYTES && meaning != 2 => {
                Err(self.too_large(s.len()))
            }
            ValueView::Blob(b) if !excluded && b.len() > MAX_INDEXED_BYTES => {
                Err(self.too_large(b.len()))
            }
            ValueView::Key(key) if !key.to_key().is_some_and(|k| k.is_complete()) => {
                Err(Error::InvalidValue {
                    kind: self.kind(),
                    property: self.dotted(),
                    reason: "an incomplete key (without an id or a name), which the service \
                             refuses as a value: store the key the write returned"
                        .to_owned(),
                })
            }
            ValueView::Vector(_) if !excluded => Err(Error::InvalidValue {
                kind: self.kind(),
                property: self.dotted(),
                reason: "a vector that is not excluded from indexes, which the service refuses \
                         (\"Vectors must be excluded from indexes\"); a vector property is \
                         searched with `find_nearest`, never filtered"
                    .to_owned(),
            }),
            ValueView::Vector(_) if element => Err(Error::InvalidValue {
                kind: self.kind(),
                property: self.dotted(),
                reason: "a vector inside an array, which the service refuses".to_owned(),
            }),
            ValueView::Array(_) if element => Err(Error::InvalidValue {
                kind: self.kind(),
                property: self.dotted(),
                reason: "an array directly inside an array, which the service refuses; wrap \
                         each inner array in an embedded entity (a struct deriving `Entity` \
                         without `#[key]`)"
                    .to_owned(),
            }),
            ValueView::Array(values) => {
                for v in values.iter() {
                    self.value(v, excluded, 0, in_array, true, depth + 1)?;
                }
                Ok(indexed * values.len())
            }
            ValueView::Entity(inner) => {
                self.level(inner.iter(), excluded, in_array || element, depth + 1)?;
                Ok(indexed)
            }
            _ => {
                if !excluded && !in_array {
                    self.builtin += 1;
                }
                Ok(indexed)
            }
        }
    }

    fn too_large(&self, len: usize) -> Error {
        Error::IndexedValueTooLarge {
            kind: self.kind(),
            property: self.dotted(),
            len,
            max: MAX_INDEXED_BYTES,
        }
    }
}

/// Whether a value may carry the service's `meaning` (not `0`), excluded from indexes or not:
/// the service's rules, as Firestore in Datastore mode answers them (its messages), so that a
/// value another client wrote is kept only where the service would keep it. The reason of a
/// refusal.
fn check_meaning(value: ValueView<'_>, meaning: i32, excluded: bool) -> Result<(), Meaning> {
    // The field of the value each known meaning goes with.
    let field = match meaning {
        1..=6 | 8 | 10..=12 | 15 | 17 | 32 => "string_value",
        16 | 19 | 22 => "blob_value",
        7 | 13 | 29 | 30 => "integer_value",
        20 => "entity_value",
        23 => "geo_point_value",
        VECTOR_MEANING => "vector",
        18 if !matches!(value, ValueView::Entity(_)) => return Err(Meaning::Projection),
        18 => "a projection's",
        9 | 14 | 21 | 24..=28 => return Err(Meaning::Unexpected(meaning)),
        _ => return Err(Meaning::Unknown(meaning)),
    };
    let own = match value {
        ValueView::String(_) => "string_value",
        ValueView::Blob(_) => "blob_value",
        ValueView::Integer(_) => "integer_value",
        ValueView::Entity(_) => "entity_value",
        ValueView::GeoPoint(_) => "geo_point_value",
        _ => "",
    };
    if own != field {
        let own = match own {
            "" => field,
            own => own,
        };
        return Err(Meaning::Mismatch {
            meaning,
            own,
            field,
        });
    }
    match (value, meaning) {
        (ValueView::String(_) | ValueView::Blob(_), 15 | 22) if !excluded => {
            Err(Meaning::Indexed(meaning))
        }
        (ValueView::Blob(_), 19) => Err(Meaning::UnknownBlob),
        (ValueView::String(s), 2) if s.len() > MAX_LINK_BYTES => Err(Meaning::LinkTooLong),
        (ValueView::GeoPoint(_), 23) => Err(Meaning::Unexpected(meaning)),
        (ValueView::String(s), 32) if !is_decimal(s) => Err(Meaning::Decimal),
        (ValueView::Integer(micros), 7)
            if crate::model::scalar::Timestamp::checked(micros).is_some() =>
        {
            Err(Meaning::Timestamp)
        }
        // A rating (GD_RATING): a percentage.
        (ValueView::Integer(percent), 13) if !(0..=100).contains(&percent) => Err(Meaning::Percent),
        (ValueView::Entity(user), 20) => check_user(user.iter()),
        _ => Ok(()),
    }
}

/// Why the service refuses a value with its meaning: its messages (Firestore in Datastore
/// mode's, where it has one).
enum Meaning {
    Projection,
    Unexpected(i32),
    Unknown(i32),
    Mismatch {
        meaning: i32,
        own: &'static str,
        field: &'static str,
    },
    Indexed(i32),
    UnknownBlob,
    LinkTooLong,
    Decimal,
    Timestamp,
    Percent,
    UserProperty(String),
    UserIndexed(String),
    UserEmail,
}

impl std::fmt::Display for Meaning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Meaning::Projection => f.write_str("Projection property cannot be used."),
            Meaning::Unexpected(m) => write!(f, "Unexpected value meaning {m}."),
            Meaning::Unknown(m) => write!(f, "Unknown value meaning {m}."),
            Meaning::Mismatch {
                meaning,
                own,
                field,
            } => write!(
                f,
                "the service's meaning {meaning}, which does not match its value ({own}): the \
                 service refuses it (\"has a meaning {meaning} which does not match {field} \
                 field\")"
            ),
            Meaning::Indexed(m) => write!(
                f,
                "the service's meaning {m} on an indexed value, which the service refuses \
                 (\"Indexed value has meaning {m}.\"): exclude it from indexes"
            ),
            Meaning::UnknownBlob => f.write_str("Unknown meaning 19."),
            Meaning::LinkTooLong => {
                write!(f, "The Url value is longer than {MAX_LINK_BYTES} bytes.")
            }
            Meaning::Decimal => f.write_str("Invalid decimal128 string."),
            Meaning::Timestamp => f.write_str(
                "A timestamp in range [0001-01-01T00:00:00Z, 9999-12-31T23:59:59.999999Z] must \
                 be stored as a timestamp value.",
            ),
            Meaning::Percent => f.write_str("Percent value outside permitted range [0, 100]."),
            Meaning::UserProperty(name) => {
                write!(f, "The user entity property \"{name}\" is not allowed.")
            }
            Meaning::UserIndexed(name) => {
                write!(f, "The user entity property \"{name}\" is indexed.")
            }
            Meaning::UserEmail => {
                f.write_str("The user entity is missing required property \"email\".")
            }
        }
    }
}

/// A user value (meaning 20) holds only the properties the service allows, each excluded from
/// indexes, and an email.
fn check_user<'a>(properties: impl Iterator<Item = Viewed<'a>>) -> Result<(), Meaning> {
    const ALLOWED: [&str; 5] = [
        "auth_domain",
        "email",
        "federated_identity",
        "federated_provider",
        "user_id",
    ];
    let mut email = false;
    for (name, excluded, ..) in properties {
        if !ALLOWED.contains(&name) {
            return Err(Meaning::UserProperty(name.to_owned()));
        }
        if !excluded {
            return Err(Meaning::UserIndexed(name.to_owned()));
        }
        email |= name == "email";
    }
    match email {
        true => Ok(()),
        false => Err(Meaning::UserEmail),
    }
}

/// Whether `text` is a decimal number as a decimal128 value is written: a sign, digits with a
/// point among them, an exponent; or `NaN`, `Infinity`.
fn is_decimal(text: &str) -> bool {
    let unsigned = text.strip_prefix(['-', '+']).unwrap_or(text);
    if matches!(unsigned, "NaN" | "Infinity" | "Inf") {
        return true;
    }
    let (mantissa, exponent) = match unsigned.split_once(['e', 'E']) {
        Some((m, e)) => (m, Some(e.strip_prefix(['-', '+']).unwrap_or(e))),
        None => (unsigned, None),
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let mantissa = match mantissa.split_once('.') {
        Some((a, b)) => {
            (digits(a) || a.is_empty())
                && (digits(b) || b.is_empty())
                && !(a.is_empty() && b.is_empty())
        }
        None => digits(mantissa),
    };
    mantissa && exponent.is_none_or(digits)
}
