//! R-I5: the index entries of one entity, counted before every commit.

use crate::error::Error;
use crate::model::key::RawKey;
use crate::model::schema::{IndexSchema, Schema};
use crate::model::stored::ValueView;
use crate::model::value::PropertyMap;

/// The most index entries one entity may have in Datastore mode (R-I5).
pub const MAX_INDEX_ENTRIES: usize = 20_000;

/// How many indexed values a property holds: one per value, one per array element, one per
/// indexed value inside an embedded entity; none when it is excluded.
fn indexed_values(value: ValueView<'_>, excluded: bool) -> usize {
    if excluded {
        return 0;
    }
    match value {
        ValueView::Array(values) => values.iter().map(|v| indexed_values(v, false)).sum(),
        ValueView::Entity(properties) => properties
            .iter()
            .map(|(_, excluded, v)| indexed_values(v, excluded))
            .sum(),
        _ => 1,
    }
}

/// R-I5: the entity's index entries (one per indexed value in the built-in indexes, plus, for
/// each composite index, the product of its properties' value counts, times the key's depth
/// for an ancestor index) must not exceed [`MAX_INDEX_ENTRIES`]. The error names the property
/// contributing the most.
pub(crate) fn check_index_entries(
    schema: &Schema,
    key: &RawKey,
    properties: &PropertyMap,
) -> Result<(), Error> {
    // Most entities are far below the limit: counted without allocating, the total is all
    // there is to know. The details are gathered only for the error.
    let count = |name: &str| {
        properties
            .view_of(name)
            .map_or(0, |(excluded, value)| indexed_values(value, excluded))
    };
    let total = schema.indexes.iter().fold(
        properties
            .view()
            .map(|(_, excluded, value)| indexed_values(value, excluded))
            .sum::<usize>(),
        |total, index| total.saturating_add(composite_entries(index, key, &count)),
    );
    if total <= MAX_INDEX_ENTRIES {
        return Ok(());
    }
    let mut by_property: Vec<(&str, usize)> = properties
        .view()
        .map(|(name, excluded, value)| (name, indexed_values(value, excluded)))
        .collect();
    let counts = by_property.clone();
    let count = |name: &str| {
        counts
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(0, |(_, c)| *c)
    };
    let mut total: usize = by_property.iter().map(|(_, n)| n).sum();
    for index in schema.indexes {
        let entries = composite_entries(index, key, &count);
        total = total.saturating_add(entries);
        // The index's entries are charged to its property with the most values.
        if let Some(widest) = index.properties.iter().max_by_key(|p| count(p.name))
            && let Some(slot) = by_property
                .iter_mut()
                .find(|(name, _)| *name == widest.name)
        {
            slot.1 = slot.1.saturating_add(entries);
        }
    }
    if total <= MAX_INDEX_ENTRIES {
        return Ok(());
    }
    let (property, contribution) = by_property
        .into_iter()
        .max_by_key(|(_, n)| *n)
        .unwrap_or(("", 0));
    Err(Error::TooManyIndexEntries {
        kind: key.kind().to_owned(),
        key: format!("{key:?}"),
        entries: total,
        max: MAX_INDEX_ENTRIES,
        property: property.to_owned(),
        contribution,
    })
}

/// The entries one composite index holds for one entity.
fn composite_entries(index: &IndexSchema, key: &RawKey, count: &dyn Fn(&str) -> usize) -> usize {
    let product = index
        .properties
        .iter()
        .fold(1_usize, |n, p| n.saturating_mul(count(p.name)));
    if index.ancestor {
        product.saturating_mul(key.path().len())
    } else {
        product
    }
}
