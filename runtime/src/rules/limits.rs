//! The service's rules on one entity written, all checked by one walk of it: valid property
//! names, indexed strings and byte strings of at most 1,500 bytes (R-I4), at most
//! [`MAX_NESTING`] array and entity values nested in one another, no array directly inside an
//! array, no incomplete key as a value, the indexed values and index entries of R-I5
//! (counted as `index_entries.rs` says), and at most 1 MiB in all.
//!
//! The walk recurses at most [`MAX_NESTING`] levels, whatever the value holds: past that it
//! refuses, naming the path.

use crate::error::Error;
use crate::model::key::{KEY_PROPERTY, RawKey};
use crate::model::name::{NameRole, validate};
use crate::model::stored::ValueView;
use crate::model::value::{MAX_NESTING, PropertyMap};
use crate::rules::index_entries::{CompositeIndex, Level, MAX_INDEXED_VALUES, check_entries};

/// Longest indexed string or byte string, in bytes (R-I4).
pub const MAX_INDEXED_BYTES: usize = 1500;

/// The largest entity the service stores, in bytes (its key and properties, encoded).
pub const MAX_ENTITY_BYTES: usize = 1_048_572;

/// Every rule on one entity written at `key`: the one implementation, called by each
/// backend's commit for each entity it writes (the embedded engine after merging a masked
/// write with what is stored, which is what it stores). `composites` are the composite
/// indexes of the entity's kind.
pub(crate) fn check_entity<C: CompositeIndex>(
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
        let property = entity.view().filter(|(n, _, _)| *n == name);
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
        properties: impl Iterator<Item = (&'a str, bool, ValueView<'a>)>,
        excluded: bool,
        in_array: bool,
        depth: usize,
    ) -> Result<(), Error> {
        let mut level = Level::default();
        for (name, property_excluded, value) in properties {
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
            let values =
                self.value(value, excluded || property_excluded, in_array, false, depth)?;
            self.path.pop();
            level.add(name, values);
        }
        level.check(self.key, &self.path)
    }

    /// Checks `value`, found `depth` array and entity values deep (an element of an array
    /// when `element`); returns how many values it indexes at its level.
    fn value(
        &mut self,
        value: ValueView<'a>,
        excluded: bool,
        in_array: bool,
        element: bool,
        depth: usize,
    ) -> Result<usize, Error> {
        let indexed = usize::from(!excluded);
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
            ValueView::String(s) if !excluded && s.len() > MAX_INDEXED_BYTES => {
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
                    self.value(v, excluded, in_array, true, depth + 1)?;
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
