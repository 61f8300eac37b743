//! The store in memory: the engine's tables as ordered maps (see [`Memory`]).

use std::collections::BTreeMap;
use std::ops::RangeBounds;

use crate::error::Error;
use crate::format::file::ENTITIES;
use crate::hash::Map;

use super::ranges::walk;
use super::store::{Batch, Key, Op, Range, Store, is_empty};

/// The tables in memory. Keys up to 56 bytes (most: an entity key, an index entry of a short
/// value) are held inline in the tree's nodes, so a search compares bytes where it finds them
/// instead of following a pointer per comparison; the entities table, only ever read by key,
/// is a hash table. Values are held at their length (`Box<[u8]>`): a stored form is built in a
/// growing buffer, whose spare capacity would be most of an entity's memory.
#[derive(Default)]
pub(crate) struct Memory {
    entities: Map<Key, Box<[u8]>>,
    tables: Map<String, BTreeMap<Key, Box<[u8]>>>,
}

/// `value` in an allocation of its length. A fresh one, not `into_boxed_slice`'s: shrinking in
/// place leaves the spare capacity as a fragment the allocator rarely reuses.
fn exact(value: Vec<u8>) -> Box<[u8]> {
    Box::from(value.as_slice())
}

/// Calls `visit` with `value` if there is one; returns whether there was.
fn visit_one(value: Option<&[u8]>, visit: &mut dyn FnMut(&[u8])) -> bool {
    value.map(visit).is_some()
}

impl Store for Memory {
    fn written_here(&self) -> bool {
        // Filled only by commits, whose maps are checked or written by the writer.
        true
    }

    fn get(&self, table: &str, key: &[u8], visit: &mut dyn FnMut(&[u8])) -> Result<bool, Error> {
        let value = match table {
            ENTITIES => self.entities.get(key),
            _ => self.tables.get(table).and_then(|t| t.get(key)),
        };
        Ok(visit_one(value.map(|v| &**v), visit))
    }

    fn scan(
        &self,
        table: &str,
        range: Range<'_>,
        reverse: bool,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), Error> {
        if is_empty(&range) {
            return Ok(());
        }
        if table == ENTITIES {
            // Rare (building a newly declared index): sort what the hash table holds.
            let mut entries: Vec<(&Key, &Box<[u8]>)> = self
                .entities
                .iter()
                .filter(|(k, _)| RangeBounds::<[u8]>::contains(&range, k.as_slice()))
                .collect();
            entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
            return walk(entries.into_iter(), reverse, |(k, v)| Ok(visit(k, v)));
        }
        let Some(table) = self.tables.get(table) else {
            return Ok(());
        };
        walk(table.range::<[u8], _>(range), reverse, |(k, v)| {
            Ok(visit(k, v))
        })
    }

    fn count(&self, table: &str, range: Range<'_>, limit: usize) -> Result<usize, Error> {
        if is_empty(&range) {
            return Ok(0);
        }
        Ok(match table {
            ENTITIES => self
                .entities
                .keys()
                .filter(|k| RangeBounds::<[u8]>::contains(&range, k.as_slice()))
                .take(limit)
                .count(),
            _ => self
                .tables
                .get(table)
                .map_or(0, |t| t.range::<[u8], _>(range).take(limit).count()),
        })
    }

    fn apply(&mut self, batch: Batch) -> Result<(), Error> {
        for op in batch.ops {
            match op {
                Op::Put(table, key, value) if table == ENTITIES => {
                    self.entities.insert(key, exact(value));
                }
                Op::Delete(table, key) if table == ENTITIES => {
                    self.entities.remove(key.as_slice());
                }
                Op::Put(table, key, value) => {
                    let value = exact(value);
                    match self.tables.get_mut(table.as_ref()) {
                        Some(t) => t.insert(key, value),
                        None => self
                            .tables
                            .entry(table.into_owned())
                            .or_default()
                            .insert(key, value),
                    };
                }
                Op::Delete(table, key) => {
                    if let Some(t) = self.tables.get_mut(table.as_ref()) {
                        t.remove(key.as_slice());
                    }
                }
            }
        }
        Ok(())
    }
}
