//! The tables the engine keeps, laid out as the service lays out its own:
//!
//! - `entities`: partition + key path → the entity's properties (`codec` form).
//! - `kinds`: partition + kind + key path → nothing: every entity of a kind, in key order.
//! - `properties`: partition + kind + property + value + key path → nothing: the built-in
//!   single-property index, one entry per distinct indexed value (array elements each,
//!   embedded properties as `outer.inner`), scanned forwards for ascending queries and
//!   backwards for descending ones.
//! - one table per declared composite index: partition + kind + (for an ancestor index, an
//!   ancestor's path) + one value per column (inverted for a descending column) + key path,
//!   one entry per combination of the columns' distinct values (and per ancestor).
//! - `meta`: the id allocator's state, reserved ids, declared indexes.

use std::borrow::Cow;
use std::ops::Range;

use smallvec::{SmallVec, smallvec};

use datastore_entity_core::format::file::{
    ENTITIES, KINDS, PROPERTIES, composite_table, split_times, with_times,
};
use datastore_entity_core::format::keycode;
use datastore_entity_core::hash::Map;
use datastore_entity_core::model::key::{KEY_PROPERTY, PartitionId, RawKey};
use datastore_entity_core::model::scalar::Timestamp;
use datastore_entity_core::model::schema::{Direction, IndexSchema};
use datastore_entity_core::model::value::PropertyMap;
use datastore_entity_core::model::views::{ValueView, Viewed};
use datastore_entity_core::query::spec::Stamp;
use datastore_entity_core::rules::index_entries::CompositeIndex;

use super::store::Key;

/// A declared composite index, as the engine maintains it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Composite {
    pub(crate) kind: String,
    pub(crate) ancestor: bool,
    pub(crate) columns: Vec<(String, Direction)>,
    /// Its table: a name derived from the definition.
    pub(crate) table: String,
}

impl Composite {
    pub(crate) fn new(kind: &str, ancestor: bool, columns: Vec<(String, Direction)>) -> Composite {
        let mut definition = Vec::new();
        keycode::bytes(&mut definition, kind.as_bytes());
        definition.push(u8::from(ancestor));
        for (name, direction) in &columns {
            keycode::bytes(&mut definition, name.as_bytes());
            keycode::bytes(&mut definition, direction_code(*direction));
        }
        Composite {
            table: composite_table(&definition),
            kind: kind.to_owned(),
            ancestor,
            columns,
        }
    }

    pub(crate) fn from_schema(kind: &str, index: &IndexSchema) -> Composite {
        Composite::new(
            kind,
            index.ancestor,
            index
                .properties
                .iter()
                .map(|p| (p.name.to_owned(), p.direction))
                .collect(),
        )
    }

    /// Whether entries end with the key path inverted: a descending last column orders ties
    /// by key descending (as the service's indexes do), so one scan direction serves both.
    pub(crate) fn path_inverted(&self) -> bool {
        self.columns
            .last()
            .is_some_and(|(_, d)| *d == Direction::Descending)
    }

    /// The definition, as the engine records it in a file.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        keycode::bytes(&mut out, self.kind.as_bytes());
        keycode::bytes(&mut out, if self.ancestor { b"1" } else { b"0" });
        for (name, direction) in &self.columns {
            keycode::bytes(&mut out, name.as_bytes());
            keycode::bytes(&mut out, direction_code(*direction));
        }
        out
    }

    /// What [`encode`](Composite::encode) wrote.
    pub(crate) fn decode(bytes: &[u8]) -> Option<Composite> {
        let mut r = keycode::Reader::new(bytes);
        let mut text = || String::from_utf8(r.bytes().ok()?).ok();
        let kind = text()?;
        let ancestor = text()? == "1";
        let mut columns = Vec::new();
        while let Some(name) = text() {
            let direction = match text()?.as_str() {
                "a" => Direction::Ascending,
                _ => Direction::Descending,
            };
            columns.push((name, direction));
        }
        Some(Composite::new(&kind, ancestor, columns))
    }

    /// The `index.yaml` entry of this index.
    pub(crate) fn yaml(&self) -> String {
        let mut yaml = format!(
            "- kind: {}\n  ancestor: {}\n  properties:\n",
            self.kind,
            if self.ancestor { "yes" } else { "no" }
        );
        for (name, direction) in &self.columns {
            yaml.push_str(&format!("  - name: {name}\n"));
            if *direction == Direction::Descending {
                yaml.push_str("    direction: desc\n");
            }
        }
        yaml
    }
}

fn direction_code(direction: Direction) -> &'static [u8] {
    match direction {
        Direction::Ascending => b"a",
        Direction::Descending => b"d",
    }
}

/// partition + kind: where every table's entries of one kind start.
pub(crate) fn kind_prefix(partition: &PartitionId, kind: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(32 + kind.len());
    keycode::partition(&mut out, partition);
    keycode::bytes(&mut out, kind.as_bytes());
    out
}

/// Where the entities a query reads are listed in key order: the kinds table after the kind's
/// prefix, or for a query without a kind, the entities table after the partition's.
pub(crate) fn listing(partition: &PartitionId, kind: &str) -> (&'static str, Vec<u8>) {
    match kind.is_empty() {
        true => {
            let mut out = Vec::with_capacity(32);
            keycode::partition(&mut out, partition);
            (ENTITIES, out)
        }
        false => (KINDS, kind_prefix(partition, kind)),
    }
}

/// The entities table's key of `key`.
pub(crate) fn entity_key(key: &RawKey) -> Vec<u8> {
    let mut out = Vec::with_capacity(48);
    keycode::key(&mut out, key);
    out
}

/// The path elements of `key` without the end marker: the prefix of its descendants' paths.
pub(crate) fn path_prefix(key: &RawKey) -> Vec<u8> {
    let mut out = Vec::new();
    keycode::path(&mut out, key.path());
    out.pop();
    out
}

/// The indexed property paths of an entity (`outer.inner` inside embedded entities, not
/// inside arrays) and their distinct values, encoded into one buffer: read where the
/// properties lie (the stored form is not decoded), with two allocations per entity
/// instead of one per value.
struct Columns<'a> {
    /// Each path, and which of `values` are its values (sorted, distinct).
    columns: Vec<(Cow<'a, str>, Range<usize>)>,
    /// Where each value's encoding lies in `bytes`.
    values: Vec<Range<usize>>,
    bytes: Vec<u8>,
}

impl<'a> Columns<'a> {
    fn of(properties: &'a PropertyMap) -> Columns<'a> {
        let mut columns = Columns {
            columns: Vec::with_capacity(properties.len()),
            values: Vec::with_capacity(properties.len()),
            bytes: Vec::with_capacity(16 * properties.len()),
        };
        columns.walk(None, properties.view_indexed());
        columns
    }

    fn walk(&mut self, prefix: Option<&str>, properties: impl Iterator<Item = Viewed<'a>>) {
        for (name, excluded, value, annotations) in properties {
            // An embedded entity's own key is no property: never indexed (as the service).
            let own_key = prefix.is_some() && name == KEY_PROPERTY;
            // An array some of whose elements are indexed is not excluded as a whole.
            if excluded || own_key && matches!(value, ValueView::Key(_)) {
                continue;
            }
            let path: Cow<'a, str> = match prefix {
                None => Cow::Borrowed(name),
                Some(prefix) => Cow::Owned(format!("{prefix}.{name}")),
            };
            let first = self.values.len();
            match value {
                ValueView::Entity(inner) => {
                    self.walk(Some(&path), inner.iter());
                    continue;
                }
                ValueView::Array(elements) => elements
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| !annotations.element_excluded(*i, excluded))
                    .for_each(|(_, v)| self.push(v)),
                value => self.push(value),
            }
            if self.values.len() - first > 1 {
                // Distinct values: sorted, so an array of n values costs n log n, not n².
                let bytes = &self.bytes;
                let mut values = self.values.split_off(first);
                values.sort_unstable_by(|a, b| bytes[a.clone()].cmp(&bytes[b.clone()]));
                values.dedup_by(|a, b| bytes[a.clone()] == bytes[b.clone()]);
                self.values.append(&mut values);
            }
            if self.values.len() > first {
                self.columns.push((path, first..self.values.len()));
            }
        }
    }

    /// Encodes `value` if it is indexed (an array or entity inside an array is not).
    fn push(&mut self, value: ValueView<'_>) {
        let start = self.bytes.len();
        match keycode::value_view(&mut self.bytes, value) {
            Some(_) => self.values.push(start..self.bytes.len()),
            None => self.bytes.truncate(start),
        }
    }

    /// The encoded values of the column at `values`.
    fn values(&self, values: &Range<usize>) -> impl Iterator<Item = &[u8]> {
        self.values[values.clone()]
            .iter()
            .map(|at| &self.bytes[at.clone()])
    }
}

/// A composite index's columns as an entity fills them: each one's distinct values (where
/// they lie in [`Columns::values`]) and its direction.
type Picked = SmallVec<[(Range<usize>, Direction); 4]>;

/// A table's name, borrowed for the built-in tables.
pub(crate) type TableName = Cow<'static, str>;

/// Every index entry of the entity `key` holding `properties`: `(table, key)` pairs, each
/// built in one reused buffer and held in place (most are short: no allocation each).
pub(crate) fn entries(
    key: &RawKey,
    properties: &PropertyMap,
    composites: &[Composite],
) -> Vec<(TableName, Key)> {
    let default = PartitionId::default();
    // The kind's prefix, then the key's path: the kinds table's entry.
    let mut head = Vec::with_capacity(64);
    keycode::partition(&mut head, key.partition().unwrap_or(&default));
    keycode::bytes(&mut head, key.kind().as_bytes());
    let kind_end = head.len();
    keycode::path(&mut head, key.path());
    let (prefix, path) = head.split_at(kind_end);
    let columns = Columns::of(properties);
    let mut out = Vec::with_capacity(1 + columns.values.len() + composites.len());
    out.push((KINDS.into(), Key::from_slice(&head)));
    let mut entry = Vec::with_capacity(head.len() + 64);
    for (name, values) in &columns.columns {
        entry.clear();
        entry.extend_from_slice(prefix);
        keycode::bytes(&mut entry, name.as_bytes());
        let property = entry.len();
        for value in columns.values(values) {
            entry.truncate(property);
            entry.extend_from_slice(value);
            entry.extend_from_slice(path);
            out.push((PROPERTIES.into(), Key::from_slice(&entry)));
        }
    }
    let mut composites = composites
        .iter()
        .filter(|c| c.kind == key.kind())
        .peekable();
    if composites.peek().is_none() {
        return out;
    }
    let mut inverted_path = Vec::with_capacity(path.len());
    keycode::inverted(&mut inverted_path, path);
    for index in composites {
        let path = match index.path_inverted() {
            true => &inverted_path,
            false => path,
        };
        // Each column's distinct values and direction (an entity without a column has no
        // entry in the index).
        let picked: Option<Picked> = index
            .columns
            .iter()
            .map(|(name, direction)| {
                let (_, values) = columns.columns.iter().find(|(path, _)| path == name)?;
                Some((values.clone(), *direction))
            })
            .collect();
        let Some(picked) = picked else {
            continue;
        };
        let ancestors: SmallVec<[Vec<u8>; 1]> = match index.ancestor {
            true => (1..=key.path().len())
                .map(|n| {
                    let mut ancestor = Vec::new();
                    keycode::path(&mut ancestor, &key.path()[..n]);
                    ancestor
                })
                .collect(),
            false => smallvec![Vec::new()],
        };
        // Every combination of the columns' values, the last column turning fastest.
        let mut at: SmallVec<[usize; 4]> = picked.iter().map(|(values, _)| values.start).collect();
        'combinations: loop {
            for ancestor in &ancestors {
                entry.clear();
                entry.extend_from_slice(prefix);
                entry.extend_from_slice(ancestor);
                for ((_, direction), &value) in picked.iter().zip(&at) {
                    let value = &columns.bytes[columns.values[value].clone()];
                    match direction {
                        Direction::Ascending => entry.extend_from_slice(value),
                        Direction::Descending => keycode::inverted(&mut entry, value),
                    }
                }
                entry.extend_from_slice(path);
                out.push((index.table.clone().into(), Key::from_slice(&entry)));
            }
            let mut column = picked.len();
            loop {
                let Some(previous) = column.checked_sub(1) else {
                    break 'combinations;
                };
                column = previous;
                at[column] += 1;
                if at[column] < picked[column].0.end {
                    break;
                }
                at[column] = picked[column].0.start;
            }
        }
    }
    out
}

/// An entity's value in the entities table: its stored form `form`, then when it was created
/// and last written (`format/file.rs`).
pub(crate) fn entity_value(form: Vec<u8>, created: Timestamp, updated: Timestamp) -> Vec<u8> {
    with_times(form, created.as_micros(), updated.as_micros())
}

/// An entities-table value split into the entity's stored form and its stamp; `None` if it is
/// too short to hold the times.
pub(crate) fn split_entity(value: &[u8]) -> Option<(&[u8], Stamp)> {
    let (form, created, updated) = split_times(value)?;
    let updated = Timestamp::from_micros(updated);
    let stamp = Stamp {
        version: version_at(updated),
        create_time: Some(Timestamp::from_micros(created)),
        update_time: Some(updated),
    };
    Some((form, stamp))
}

/// The version of an entity written at `time`: its microseconds, as Firestore's (at least 1:
/// 0 is the version of no entity).
pub(crate) fn version_at(time: Timestamp) -> u64 {
    u64::try_from(time.as_micros()).unwrap_or(0).max(1)
}

/// What [`entity_value`] wrote, checked but not decoded (the derive reads its fields straight
/// out of it), with its stamp. `None` if it is malformed.
pub(crate) fn decode_entity(
    mut value: Vec<u8>,
    written_here: bool,
) -> Option<(PropertyMap, Stamp)> {
    let (form, stamp) = split_entity(&value)?;
    let form = form.len();
    value.truncate(form);
    let properties = match written_here {
        true => PropertyMap::from_written(value),
        false => PropertyMap::from_stored(value).ok()?,
    };
    Some((properties, stamp))
}

/// R-I5 counts a composite index's entries from its columns.
impl CompositeIndex for Composite {
    fn ancestor(&self) -> bool {
        self.ancestor
    }
    fn columns(&self) -> impl Iterator<Item = &str> {
        self.columns.iter().map(|(name, _)| name.as_str())
    }
}

/// The composite indexes of `kind`.
pub(crate) fn of_kind<'c>(
    composites: &'c Map<String, Vec<Composite>>,
    kind: &str,
) -> &'c [Composite] {
    composites.get(kind).map_or(&[], Vec::as_slice)
}
