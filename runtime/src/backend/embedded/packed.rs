//! The store in memory, compressed (see [`Packed`]): for a large data set held by a server,
//! where the memory store's maps would hold several times the data.

use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;

use datastore_entity_core::error::Error;
use datastore_entity_core::format::file::common_prefix;
use datastore_entity_core::hash::Map;

use super::ranges::{overlay, walk, within};
use super::store::{Batch, Key, Op, Range, Store, is_empty};

/// How many bytes of entries a block holds before it is compressed: large enough for the
/// compression to find what neighbouring entries repeat (property names, a kind, a key's
/// path), small enough that a read by key decompresses little.
const BLOCK_BYTES: usize = 8 << 10;

/// How many bytes of blocks a table keeps decompressed for reads by key ([`Decompressed`]).
const DECOMPRESSED_BYTES: usize = 4 << 20;

/// The fewest recent writes a table holds before they are packed into its blocks.
const PACK_AT_LEAST: usize = 4096;

/// The tables in memory, each a sequence of compressed blocks of sorted entries, and the
/// writes since they were last packed in an ordered map.
///
/// Within a block, each key is written as the length of what it shares with the key before
/// it and the rest (index entries of one value, and keys of one kind, differ by a few
/// bytes), then the whole block is compressed with LZ4, so that stored forms share their
/// property names and kinds with their neighbours. Writes go to the table's recent map,
/// which reads consult first; once it holds a thirty-second of the table (at least
/// [`PACK_AT_LEAST`] writes), its entries are merged into the blocks they fall in, and only
/// those blocks are written again. A read by key decompresses one block (at most
/// [`BLOCK_BYTES`]), which the table keeps decompressed for the next reads by key
/// ([`Decompressed`]); a scan decompresses each block it crosses once.
pub(crate) struct Packed {
    tables: Map<String, Table>,
    /// [`PACK_AT_LEAST`], [`BLOCK_BYTES`] and [`DECOMPRESSED_BYTES`] (smaller in tests, to
    /// pack and drop often).
    pack_at_least: usize,
    block_bytes: usize,
    decompressed_bytes: usize,
}

impl Default for Packed {
    fn default() -> Packed {
        Packed::with_sizes(PACK_AT_LEAST, BLOCK_BYTES)
    }
}

impl Packed {
    fn with_sizes(pack_at_least: usize, block_bytes: usize) -> Packed {
        Packed {
            tables: Map::default(),
            pack_at_least,
            block_bytes,
            decompressed_bytes: DECOMPRESSED_BYTES,
        }
    }
}

/// Bytes held at their length.
type Bytes = Box<[u8]>;

#[derive(Default)]
struct Table {
    /// Each block by its first key.
    blocks: BTreeMap<Bytes, Bytes>,
    /// How many entries the blocks hold.
    packed: usize,
    /// The writes since the last pack: a value, or `None` where one was deleted.
    recent: BTreeMap<Key, Option<Bytes>>,
    /// Blocks reads by key decompressed.
    decompressed: RefCell<Decompressed>,
}

/// Blocks decompressed by reads by key, each by its first key, kept for the next reads of the
/// same block: a lookup wants one entry, and decompressing its whole block cost a third of a
/// lookup's time in the server. At most [`DECOMPRESSED_BYTES`] (but the last block read), the
/// first kept dropped first; emptied whenever the table's blocks are packed again.
#[derive(Default)]
struct Decompressed {
    blocks: Map<Bytes, Flat>,
    /// The blocks' first keys in the order they were kept.
    kept: VecDeque<Bytes>,
    bytes: usize,
}

/// A block's entries with their whole keys, found by binary search (in the block, each key
/// is what it adds to the one before, so a read by key walks every entry before its own).
struct Flat {
    /// Each entry's key, then its value.
    bytes: Vec<u8>,
    /// Where each entry's key starts, where its value starts, where its value ends.
    entries: Vec<[u32; 3]>,
}

impl Flat {
    fn of(block: &[u8]) -> Result<Flat, Error> {
        let mut flat = Flat {
            bytes: Vec::with_capacity(2 * block.len()),
            entries: Vec::new(),
        };
        let mut offsets = true;
        entries(block, |key, value| {
            let start = flat.bytes.len();
            flat.bytes.extend_from_slice(key);
            let key_end = flat.bytes.len();
            flat.bytes.extend_from_slice(value);
            let offsets_of = [start, key_end, flat.bytes.len()].map(u32::try_from);
            match offsets_of {
                [Ok(start), Ok(key_end), Ok(end)] => flat.entries.push([start, key_end, end]),
                _ => offsets = false,
            }
            offsets
        })?;
        match offsets {
            true => Ok(flat),
            false => Err(damaged()),
        }
    }

    /// The value of `key`.
    fn get(&self, key: &[u8]) -> Option<&[u8]> {
        let at = self
            .entries
            .binary_search_by(|&[start, key_end, _]| {
                self.bytes[start as usize..key_end as usize].cmp(key)
            })
            .ok()?;
        let [_, key_end, end] = self.entries[at];
        self.bytes.get(key_end as usize..end as usize)
    }

    /// The bytes it holds.
    fn size(&self) -> usize {
        self.bytes.len() + size_of::<[u32; 3]>() * self.entries.len()
    }
}

impl Decompressed {
    /// The block that starts at `first`, `block` decompressed if it is not kept yet; the
    /// others kept add up to at most `limit` bytes.
    fn block(&mut self, first: &[u8], block: &[u8], limit: usize) -> Result<&Flat, Error> {
        if !self.blocks.contains_key(first) {
            let flat = Flat::of(block)?;
            self.bytes += flat.size();
            while self.bytes > limit
                && let Some(oldest) = self.kept.pop_front()
            {
                self.bytes -= self.blocks.remove(&oldest).map_or(0, |b| b.size());
            }
            self.kept.push_back(first.into());
            self.blocks.insert(first.into(), flat);
        }
        self.blocks.get(first).ok_or_else(damaged)
    }

    fn clear(&mut self) {
        *self = Decompressed::default();
    }
}

/// A block that does not decompress, or whose entries do not read: the process's own memory
/// was damaged, or this module has a bug. Never data made up.
fn damaged() -> Error {
    Error::storage("a compressed block of the store in memory does not read back".to_owned())
}

fn put_varint(out: &mut Vec<u8>, mut n: usize) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn varint(bytes: &[u8], at: &mut usize) -> Result<usize, Error> {
    let mut n = 0_usize;
    for shift in (0..64).step_by(7) {
        let byte = *bytes.get(*at).ok_or_else(damaged)?;
        *at += 1;
        n |= usize::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return Ok(n);
        }
    }
    Err(damaged())
}

fn decompress(block: &[u8]) -> Result<Vec<u8>, Error> {
    lz4_flex::decompress_size_prepended(block).map_err(|_| damaged())
}

/// Calls `each` with every entry of the compressed `block`, in order, until it returns
/// `false`; returns whether it went to the end.
fn entries(block: &[u8], mut each: impl FnMut(&[u8], &[u8]) -> bool) -> Result<bool, Error> {
    let raw = decompress(block)?;
    let mut key = Vec::new();
    let mut at = 0;
    while at < raw.len() {
        let shared = varint(&raw, &mut at)?;
        let rest = varint(&raw, &mut at)?;
        let value = at.checked_add(rest).ok_or_else(damaged)?;
        if shared > key.len() || value > raw.len() {
            return Err(damaged());
        }
        key.truncate(shared);
        key.extend_from_slice(&raw[at..value]);
        at = value;
        let len = varint(&raw, &mut at)?;
        let end = at.checked_add(len).filter(|&e| e <= raw.len());
        let end = end.ok_or_else(damaged)?;
        if !each(&key, &raw[at..end]) {
            return Ok(false);
        }
        at = end;
    }
    Ok(true)
}

/// Entries in key order, packed into blocks of about `block_bytes`.
struct Packer {
    block_bytes: usize,
    raw: Vec<u8>,
    first: Option<Box<[u8]>>,
    last: Vec<u8>,
    blocks: Vec<(Bytes, Bytes)>,
    count: usize,
}

impl Packer {
    fn new(block_bytes: usize) -> Packer {
        Packer {
            block_bytes,
            raw: Vec::new(),
            first: None,
            last: Vec::new(),
            blocks: Vec::new(),
            count: 0,
        }
    }

    fn push(&mut self, key: &[u8], value: &[u8]) {
        let shared = match self.first {
            None => {
                self.first = Some(key.into());
                0
            }
            Some(_) => common_prefix(&self.last, key),
        };
        put_varint(&mut self.raw, shared);
        put_varint(&mut self.raw, key.len() - shared);
        self.raw.extend_from_slice(&key[shared..]);
        put_varint(&mut self.raw, value.len());
        self.raw.extend_from_slice(value);
        self.last.truncate(shared);
        self.last.extend_from_slice(&key[shared..]);
        self.count += 1;
        if self.raw.len() >= self.block_bytes {
            self.seal();
        }
    }

    fn seal(&mut self) {
        if let Some(first) = self.first.take() {
            let block = lz4_flex::compress_prepend_size(&self.raw);
            self.blocks.push((first, block.into()));
            self.raw.clear();
        }
    }
}

impl Table {
    /// The first key of the block that holds `key`, or would: the last block starting at or
    /// before it, else the first block.
    fn block_of(&self, key: &[u8]) -> Option<&[u8]> {
        let before = (Bound::Unbounded, Bound::Included(key));
        let before = self.blocks.range::<[u8], _>(before).next_back();
        before
            .or_else(|| self.blocks.first_key_value())
            .map(|(k, _)| &**k)
    }

    /// Merges the recent writes into the blocks they fall in, writing only those blocks
    /// again. The table is changed only once every block is packed: a block that does not
    /// read back leaves it as it was.
    fn pack(&mut self, block_bytes: usize) -> Result<(), Error> {
        let mut packer = Packer::new(block_bytes);
        let (mut replaced, mut was) = (Vec::new(), 0);
        let mut changes = self.recent.iter().peekable();
        while let Some((key, _)) = changes.peek() {
            let first = self.block_of(key);
            // The writes before the next block's first key go to this one.
            let next = first.and_then(|first| {
                let after = (Bound::Excluded(first), Bound::Unbounded);
                self.blocks
                    .range::<[u8], _>(after)
                    .next()
                    .map(|(k, _)| &**k)
            });
            let mine = |k: &[u8]| next.is_none_or(|next| k < next);
            if let Some(first) = first {
                replaced.push(first);
                entries(&self.blocks[first], |key, value| {
                    was += 1;
                    // The writes up to this entry, then the entry unless one replaced it.
                    while let Some((k, v)) = changes.next_if(|(k, _)| k.as_slice() <= key) {
                        if let Some(v) = v {
                            packer.push(k, v);
                        }
                        if k.as_slice() == key {
                            return true;
                        }
                    }
                    packer.push(key, value);
                    true
                })?;
            }
            while let Some((k, v)) = changes.next_if(|(k, _)| mine(k)) {
                if let Some(v) = v {
                    packer.push(k, v);
                }
            }
            packer.seal();
        }
        let replaced: Vec<Box<[u8]>> = replaced.into_iter().map(Box::from).collect();
        for first in &replaced {
            self.blocks.remove(first);
        }
        self.blocks.extend(packer.blocks);
        self.decompressed.get_mut().clear();
        self.packed = self.packed - was + packer.count;
        self.recent.clear();
        Ok(())
    }

    /// The packed entries of `range`, in order (reversed with `reverse`), until `visit`
    /// returns `false`.
    fn scan_blocks(
        &self,
        range: Range<'_>,
        reverse: bool,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), Error> {
        let (near, far) = match reverse {
            false => (range.0, range.1),
            true => (range.1, range.0),
        };
        // Whether `key` is past the near bound, where the scan starts.
        let started = |key: &[u8]| within(key, near, !reverse);
        let blocks = match (reverse, near) {
            (false, Bound::Included(k) | Bound::Excluded(k)) => {
                let from = self.block_of(k).unwrap_or(k);
                self.blocks
                    .range::<[u8], _>((Bound::Included(from), Bound::Unbounded))
            }
            (true, Bound::Included(k) | Bound::Excluded(k)) => self
                .blocks
                .range::<[u8], _>((Bound::Unbounded, Bound::Included(k))),
            (_, Bound::Unbounded) => self.blocks.range::<[u8], _>(..),
        };
        let mut held = Vec::new();
        walk(blocks, reverse, |(_, block)| {
            if !reverse {
                let mut done = false;
                entries(block, |key, value| {
                    if !started(key) {
                        return true;
                    }
                    done = !within(key, far, false) || !visit(key, value);
                    !done
                })?;
                return Ok(!done);
            }
            held.clear();
            entries(block, |key, value| {
                if started(key) {
                    held.push((key.to_vec(), value.to_vec()));
                }
                true
            })?;
            for (key, value) in held.iter().rev() {
                if !within(key, far, true) || !visit(key, value) {
                    return Ok(false);
                }
            }
            Ok(true)
        })
    }
}

impl Store for Packed {
    fn written_here(&self) -> bool {
        // Filled only by commits, whose maps are checked or written by the writer.
        true
    }

    fn get(&self, table: &str, key: &[u8], visit: &mut dyn FnMut(&[u8])) -> Result<bool, Error> {
        let Some(table) = self.tables.get(table) else {
            return Ok(false);
        };
        if let Some(recent) = table.recent.get(key) {
            return Ok(recent.as_deref().map(visit).is_some());
        }
        let Some((first, block)) = table
            .block_of(key)
            .and_then(|first| table.blocks.get_key_value(first))
        else {
            return Ok(false);
        };
        let mut decompressed = table.decompressed.borrow_mut();
        let flat = decompressed.block(first, block, self.decompressed_bytes)?;
        Ok(flat.get(key).map(visit).is_some())
    }

    fn scan(
        &self,
        table: &str,
        range: Range<'_>,
        reverse: bool,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), Error> {
        let Some(table) = self.tables.get(table).filter(|_| !is_empty(&range)) else {
            return Ok(());
        };
        let recent = table.recent.range::<[u8], _>(range);
        let recent = recent.map(|(k, v)| (k.as_slice(), v.as_deref()));
        overlay(recent, reverse, visit, |visit| {
            table.scan_blocks(range, reverse, visit)
        })
    }

    fn apply(&mut self, batch: Batch) -> Result<(), Error> {
        for op in batch.ops {
            let (name, key, value) = match op {
                Op::Put(table, key, value) => (table, key, Some(Box::from(value.as_slice()))),
                Op::Delete(table, key) => (table, key, None),
            };
            let table = match self.tables.get_mut(name.as_ref()) {
                Some(table) => table,
                None => self.tables.entry(name.into_owned()).or_default(),
            };
            table.recent.insert(key, value);
        }
        // After the whole batch, applied whatever a pack says: one that fails leaves the
        // writes where reads find them, and is tried again after the next batch.
        for (name, table) in &mut self.tables {
            if table.recent.len() >= self.pack_at_least.max(table.packed / 32)
                && let Err(e) = table.pack(self.block_bytes)
            {
                tracing::error!(table = %name, error = %e, "packing the recent writes failed");
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::embedded::memory::tests::{reads_as_the_memory_store, scanned};

    /// Random puts and deletes read as the memory store reads them, packed every few
    /// commits into blocks of a few entries: writes that fall before, between and after
    /// blocks, that replace or delete packed entries, and that empty a block.
    #[test]
    fn reads_merge_the_recent_writes_with_the_blocks_as_one_store() {
        let mut packed = Packed::with_sizes(8, 24);
        // A few blocks kept decompressed: reads by key drop and decompress them again.
        packed.decompressed_bytes = 100;
        reads_as_the_memory_store(&mut packed, 600);
        for table in packed.tables.values() {
            let kept = table.decompressed.borrow();
            let held: usize = kept.blocks.values().map(Flat::size).sum();
            assert_eq!(held, kept.bytes);
            assert!(kept.kept.len() == 1 || held <= 100, "{held} bytes kept");
        }
        let table = &packed.tables["kinds"];
        assert!(
            table.blocks.len() > 3,
            "entries were packed in several blocks"
        );
        let all = (Bound::Unbounded, Bound::Unbounded);
        let mut held = 0;
        for block in table.blocks.values() {
            entries(block, |_, _| {
                held += 1;
                true
            })
            .unwrap();
        }
        assert_eq!(
            held, table.packed,
            "the packed count is what the blocks hold"
        );
        assert!(
            scanned(&packed, "kinds", all, false, usize::MAX).len() <= held + table.recent.len()
        );
    }

    /// Large values and keys that share long prefixes, in blocks of the real size: what is
    /// read back is what was written, and the blocks hold less than the entries.
    #[test]
    fn blocks_hold_long_shared_keys_and_values_compressed() {
        let mut packed = Packed::default();
        let mut batch = Batch::default();
        let entity = |n: u32| {
            let mut value = b"customer\x00customer-3\x00status\x00paid".repeat(4);
            value.extend(n.to_be_bytes());
            value
        };
        for n in 0..20_000_u32 {
            let mut key = b"orders-by-customer-and-total".to_vec();
            key.extend(n.to_be_bytes());
            batch.put(ENTITY_TABLE, key, entity(n));
        }
        packed.apply(batch).unwrap();
        let table = &packed.tables[ENTITY_TABLE];
        assert_eq!((table.packed, table.recent.len()), (20_000, 0));
        let held: usize = table.blocks.iter().map(|(k, v)| k.len() + v.len()).sum();
        let written = 20_000 * (32 + entity(0).len());
        assert!(held * 4 < written, "{held} bytes held for {written}");
        let all = (Bound::Unbounded, Bound::Unbounded);
        let read = scanned(&packed, ENTITY_TABLE, all, true, usize::MAX);
        assert_eq!(read.len(), 20_000);
        for (n, (key, value)) in (0..20_000_u32).rev().zip(read) {
            assert_eq!((&key[28..], value), (&n.to_be_bytes()[..], entity(n)));
        }
        let mut found = Vec::new();
        let key = [
            &b"orders-by-customer-and-total"[..],
            &12_345_u32.to_be_bytes(),
        ]
        .concat();
        assert!(
            packed
                .get(ENTITY_TABLE, &key, &mut |v| found = v.to_vec())
                .unwrap()
        );
        assert_eq!(found, entity(12_345));
    }

    const ENTITY_TABLE: &str = "entities";
}
