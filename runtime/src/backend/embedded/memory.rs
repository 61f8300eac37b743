//! The store in memory: the engine's tables as ordered maps (see [`Memory`]).

use std::collections::BTreeMap;
use std::ops::RangeBounds;

use datastore_entity_core::error::Error;
use datastore_entity_core::format::file::ENTITIES;
use datastore_entity_core::hash::Map;

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

#[cfg(test)]
pub(crate) mod tests {
    use std::ops::Bound;

    use super::*;

    /// Every entry of `table` in `range`, forwards or backwards, stopping after `limit`.
    pub(crate) fn scanned(
        store: &dyn Store,
        table: &str,
        range: Range<'_>,
        reverse: bool,
        limit: usize,
    ) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out = Vec::new();
        store
            .scan(table, range, reverse, &mut |k, v| {
                out.push((k.to_vec(), v.to_vec()));
                out.len() < limit
            })
            .unwrap();
        out
    }

    /// `rounds` commits of random puts and deletes (over keys written before, some of them
    /// long before) applied to `store` and to the memory store, and `store` read after each
    /// as the memory store reads: by key, by range in both directions, whole or stopped
    /// early, and counted.
    pub(crate) fn reads_as_the_memory_store(store: &mut dyn Store, rounds: usize) {
        let mut memory = Memory::default();
        let mut random = datastore_entity_core::hash::xorshift(0x2545_f491_4f6c_dd1d_u64);
        let tables = ["entities", "kinds", "properties"];
        for _ in 0..rounds {
            let mut batch = (Batch::default(), Batch::default());
            for _ in 0..=random(6) {
                let table = tables[random(3) as usize];
                // Keys of one to three bytes after a shared one: scans compare and check
                // them from where they leave their bounds' shared prefix.
                let mut key = vec![b'k', random(40) as u8];
                key.extend((0..random(3)).map(|_| random(4) as u8));
                match random(3) {
                    0 => {
                        batch.0.delete(table, key.clone());
                        batch.1.delete(table, key);
                    }
                    _ => {
                        // Index entries hold no value (a file keeps none).
                        let len = if table == "entities" { random(20) } else { 0 };
                        let value = vec![random(256) as u8; len as usize];
                        batch.0.put(table, key.clone(), value.clone());
                        batch.1.put(table, key, value);
                    }
                }
            }
            store.apply(batch.0).unwrap();
            memory.apply(batch.1).unwrap();
            for table in tables {
                let (a, b) = (vec![b'k', random(40) as u8], vec![b'k', random(40) as u8]);
                let ranges: [Range<'_>; 6] = [
                    (Bound::Unbounded, Bound::Unbounded),
                    (Bound::Included(&a), Bound::Excluded(&b)),
                    (Bound::Excluded(&a), Bound::Included(&b)),
                    (Bound::Included(&a), Bound::Included(&b)),
                    (Bound::Included(&a), Bound::Unbounded),
                    (Bound::Unbounded, Bound::Excluded(&b)),
                ];
                for range in ranges {
                    for reverse in [false, true] {
                        let limit = random(30) as usize + 1;
                        assert_eq!(
                            scanned(store, table, range, reverse, limit),
                            scanned(&memory, table, range, reverse, limit),
                            "{table} {range:?} reverse: {reverse}, limit {limit}"
                        );
                    }
                    // Counted (whole, up to a limit, up to none) as many as a scan visits.
                    let all = scanned(&memory, table, range, false, usize::MAX).len();
                    for limit in [usize::MAX, random(30) as usize, 0] {
                        let counts = [&*store, &memory as &dyn Store]
                            .map(|store| store.count(table, range, limit).unwrap());
                        assert_eq!(counts, [all.min(limit); 2], "{table} {range:?} {limit}");
                    }
                }
                let read = |store: &dyn Store| {
                    let mut found = None;
                    let there = store.get(table, &a, &mut |v| found = Some(v.to_vec()));
                    (there.unwrap(), found)
                };
                assert_eq!(read(store), read(&memory), "{table} {a:?}");
            }
        }
    }
}
