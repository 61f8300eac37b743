//! R-I5: what one entity indexes, counted as the service counts it, before every commit.
//!
//! Two limits, both counted by the walk of `limits.rs` as it checks the entity:
//!
//! - **Indexed values per entity level** ([`MAX_INDEXED_VALUES`]): Firestore in Datastore mode
//!   refuses an entity, or an embedded entity value inside one, that indexes more than 5,000
//!   values ("Too many indexed properties"). Each indexed value counts one, each element of an
//!   indexed array one (duplicates and nulls too; an empty array none), an embedded entity
//!   value one in its parent, and its own properties in a count of their own. The
//!   conformance suite (`tests/src/conformance/hostile.rs`) finds the same answers on the
//!   Firestore emulator; Google's legacy Datastore emulator enforces no such limit.
//! - **Index entries per entity** ([`MAX_INDEX_ENTRIES`], R-I5 as the README's rules table states it): one
//!   built-in entry per indexed value reachable by a property path (the properties of
//!   entities inside an array are not indexed), plus, for each composite index, the product of
//!   its properties' value counts, times the key's depth for an ancestor index.

use crate::error::Error;
use crate::model::annotations::AnnotationsView;
use crate::model::key::RawKey;
use crate::model::schema::IndexSchema;
use crate::model::value::PropertyMap;
use crate::model::views::ValueView;

/// The most index entries one entity may have in Datastore mode (R-I5).
pub const MAX_INDEX_ENTRIES: usize = 20_000;

/// The most values one entity, or one embedded entity value in it, may index (R-I5, as
/// Firestore in Datastore mode counts them).
pub const MAX_INDEXED_VALUES: usize = 5_000;

/// A composite index, as the entries it adds to an entity are counted: declared on a type
/// (`IndexSchema`) or known to the embedded engine.
pub trait CompositeIndex {
    /// Whether it is an ancestor index (one row per ancestor of the key).
    fn ancestor(&self) -> bool;
    /// Its columns' property paths.
    fn columns(&self) -> impl Iterator<Item = &str>;
}

impl<T: CompositeIndex> CompositeIndex for &T {
    fn ancestor(&self) -> bool {
        (**self).ancestor()
    }
    fn columns(&self) -> impl Iterator<Item = &str> {
        (**self).columns()
    }
}

impl CompositeIndex for IndexSchema {
    fn ancestor(&self) -> bool {
        self.ancestor
    }
    fn columns(&self) -> impl Iterator<Item = &str> {
        self.properties.iter().map(|p| p.name)
    }
}

/// The indexed values of one entity level, as the walk finds them.
#[derive(Default)]
pub struct Level<'a> {
    values: usize,
    widest: (&'a str, usize),
}

impl<'a> Level<'a> {
    /// Property `name` indexes `values` values at this level.
    pub fn add(&mut self, name: &'a str, values: usize) {
        self.values = self.values.saturating_add(values);
        if values > self.widest.1 {
            self.widest = (name, values);
        }
    }

    /// The level at `within` (the dotted path of an embedded entity, empty for the entity
    /// itself) against [`MAX_INDEXED_VALUES`].
    pub fn check(self, key: &RawKey, within: &[&str]) -> Result<(), Error> {
        if self.values <= MAX_INDEXED_VALUES {
            return Ok(());
        }
        let within = within.join(".");
        let property = match within.is_empty() {
            true => self.widest.0.to_owned(),
            false => format!("{within}.{}", self.widest.0),
        };
        Err(Error::TooManyIndexedValues {
            kind: key.kind().to_owned(),
            key: format!("{key:?}").into(),
            within: within.into(),
            values: self.values,
            max: MAX_INDEXED_VALUES,
            property,
            contribution: self.widest.1,
        })
    }
}

/// How many values the property at `path` (dotted through embedded entities; a top-level
/// name with dots, a flattened property, first) indexes: what a composite index multiplies.
fn indexed_at(properties: &PropertyMap, path: &str) -> usize {
    fn count(excluded: bool, value: ValueView<'_>, annotations: AnnotationsView<'_>) -> usize {
        match (excluded, value) {
            (true, _) | (false, ValueView::Entity(_)) => 0,
            // The elements indexed (where they differ, not all are).
            (false, ValueView::Array(values)) => (0..values.len())
                .filter(|&i| !annotations.element_excluded(i, false))
                .count(),
            (false, _) => 1,
        }
    }
    if let Some(n) = properties.with_view_of(path, count) {
        return n;
    }
    let mut segments = path.split('.');
    let Some(first) = segments.next() else {
        return 0;
    };
    /// The entries of the value at `segments` inside `value` (an embedded entity's).
    fn inside<'v>(
        segments: std::str::Split<'_, char>,
        mut excluded: bool,
        mut value: ValueView<'v>,
        mut annotations: AnnotationsView<'v>,
    ) -> usize {
        for segment in segments {
            let ValueView::Entity(inner) = value else {
                return 0;
            };
            match inner.iter().find(|(name, ..)| *name == segment) {
                Some((_, own, v, a)) => (excluded, value, annotations) = (excluded || own, v, a),
                None => return 0,
            }
        }
        count(excluded, value, annotations)
    }
    properties
        .with_view_of(first, |excluded, value, annotations| {
            inside(segments, excluded, value, annotations)
        })
        .unwrap_or(0)
}

/// The entries one composite index holds for one entity.
fn composite_entries(
    index: &impl CompositeIndex,
    key: &RawKey,
    count: &dyn Fn(&str) -> usize,
) -> usize {
    let product = index
        .columns()
        .fold(1_usize, |n, column| n.saturating_mul(count(column)));
    match index.ancestor() {
        true => product.saturating_mul(key.path().len()),
        false => product,
    }
}

/// R-I5: the entity's `builtin` entries (counted by the walk) and its composite indexes'
/// entries must not exceed [`MAX_INDEX_ENTRIES`]. The error names the property contributing
/// the most (a composite index's entries charged to its column with the most values);
/// `builtin_of` counts one top-level property's built-in entries, for the error only.
pub fn check_entries<C: CompositeIndex>(
    key: &RawKey,
    properties: &PropertyMap,
    composites: &[C],
    builtin: usize,
    builtin_of: &dyn Fn(&str) -> usize,
) -> Result<(), Error> {
    let count = |path: &str| indexed_at(properties, path);
    let total = composites.iter().fold(builtin, |total, index| {
        total.saturating_add(composite_entries(index, key, &count))
    });
    if total <= MAX_INDEX_ENTRIES {
        return Ok(());
    }
    // The error's details: each property's entries, composite ones charged to the column
    // with the most values.
    let mut by_property: Vec<(String, usize)> = properties
        .view()
        .map(|(name, ..)| (name.to_owned(), builtin_of(name)))
        .collect();
    for index in composites {
        let entries = composite_entries(index, key, &count);
        if let Some(widest) = index.columns().max_by_key(|column| count(column)) {
            match by_property.iter_mut().find(|(name, _)| name == widest) {
                Some(slot) => slot.1 = slot.1.saturating_add(entries),
                None => by_property.push((widest.to_owned(), entries)),
            }
        }
    }
    let (property, contribution) = by_property
        .into_iter()
        .max_by_key(|(_, n)| *n)
        .unwrap_or_default();
    Err(Error::TooManyIndexEntries {
        kind: key.kind().to_owned(),
        key: format!("{key:?}"),
        entries: total,
        max: MAX_INDEX_ENTRIES,
        property,
        contribution,
    })
}
