//! The engine's own records in a file (its `META` table): the format, the id counter, the
//! last commit's time, the reserved ids and the declared composite indexes — read when a file
//! is opened — and the
//! declaration of new indexes, recorded and built from what is stored.

use std::collections::HashSet;
use std::path::Path;

use super::bounds::Bounds;
use super::candidates;
use super::history::History;
use super::ids::Ids;
use super::index::{self, Composite};
use super::metadata;
use super::store::{Batch, Key, Store};
use datastore_entity_core::error::Error;
use datastore_entity_core::format::file::{
    CLOCK_KEY, FORMAT, FORMAT_KEY, IDENTITY_KEY, IDS_KEY, INDEX_PREFIX, KINDS, META,
    RESERVED_PREFIX,
};
use datastore_entity_core::format::keycode;
use datastore_entity_core::hash::Map;
use datastore_entity_core::model::scalar::Timestamp;
use datastore_entity_core::model::schema::Schema;

/// Reads a file's own state: its format, id counter, last commit's time, reserved ids and
/// declared indexes; and its identity, which a file gets when first opened.
pub(super) fn load(
    store: &mut dyn Store,
    path: &Path,
    ids: &mut Ids,
    history: &mut History,
    composites: &mut Map<String, Vec<Composite>>,
) -> Result<u128, Error> {
    let mut format = None;
    store.get(META, FORMAT_KEY, &mut |v| format = Some(v.to_vec()))?;
    match format {
        Some(f) if f == FORMAT => {}
        Some(_) => {
            return Err(Error::storage(format!(
                "{} was written by another version of this engine (or another program)",
                path.display()
            )));
        }
        None => {
            let mut batch = Batch::default();
            batch.put(META, FORMAT_KEY.to_vec(), FORMAT.to_vec());
            store.apply(batch)?;
        }
    }
    let mut entries: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    store.scan(
        META,
        (std::ops::Bound::Unbounded, std::ops::Bound::Unbounded),
        false,
        &mut |k, v| {
            entries.push((k.to_vec(), v.to_vec()));
            true
        },
    )?;
    let corrupt = || {
        Error::storage(format!(
            "{}: the engine's own records are corrupt",
            path.display()
        ))
    };
    let mut identity = None;
    for (k, v) in entries {
        if k == IDENTITY_KEY {
            let bytes = <[u8; 16]>::try_from(v.as_slice()).map_err(|_| corrupt())?;
            identity = Some(u128::from_be_bytes(bytes));
        } else if k == IDS_KEY {
            let counter = <[u8; 8]>::try_from(v.as_slice()).map_err(|_| corrupt())?;
            ids.load_counter(u64::from_be_bytes(counter));
        } else if k == CLOCK_KEY {
            let clock = <[u8; 8]>::try_from(v.as_slice()).map_err(|_| corrupt())?;
            history.load_clock(Timestamp::from_micros(i64::from_be_bytes(clock)));
        } else if let Some(id) = k.strip_prefix(RESERVED_PREFIX) {
            let id = <[u8; 8]>::try_from(id).map_err(|_| corrupt())?;
            ids.load_reserved(i64::from_be_bytes(id));
        } else if k.starts_with(INDEX_PREFIX) {
            let index = Composite::decode(&v).ok_or_else(corrupt)?;
            composites
                .entry(index.kind.clone())
                .or_default()
                .push(index);
        }
    }
    match identity {
        Some(identity) => Ok(identity),
        None => {
            let identity = fastrand::u128(..);
            let mut batch = Batch::default();
            batch.put(META, IDENTITY_KEY.to_vec(), identity.to_be_bytes().to_vec());
            store.apply(batch)?;
            Ok(identity)
        }
    }
}

/// Records in `batch` that a commit was applied at `time`.
pub(super) fn clock(batch: &mut Batch, time: Timestamp) {
    batch.put(
        META,
        Key::from_slice(CLOCK_KEY),
        time.as_micros().to_be_bytes().to_vec(),
    );
}

/// The composite indexes `schema` declares that `known` does not have.
pub(super) fn new_indexes(known: &[Composite], schema: &'static Schema) -> Vec<Composite> {
    let mut new: Vec<Composite> = Vec::new();
    for index in schema.indexes {
        let index = Composite::from_schema(schema.kind, index);
        if !known.contains(&index) && !new.contains(&index) {
            new.push(index);
        }
    }
    new
}

/// The batch declaring `new` indexes of `kind`: their records, and their entries for the
/// entities already stored.
pub(super) fn declaration(
    store: &dyn Store,
    kind: &str,
    new: &[Composite],
) -> Result<Batch, Error> {
    let mut batch = Batch::default();
    for index in new {
        batch.put(
            META,
            [INDEX_PREFIX, index.table.as_bytes()].concat(),
            index.encode(),
        );
    }
    backfill(store, kind, new, &mut batch)?;
    Ok(batch)
}

/// The entries of `indexes` (all of kind `kind`) for the entities already stored: the kind's
/// entities alone, found through the kinds table in each partition that holds data.
fn backfill(
    store: &dyn Store,
    kind: &str,
    indexes: &[Composite],
    batch: &mut Batch,
) -> Result<(), Error> {
    let tables: HashSet<&str> = indexes.iter().map(|i| i.table.as_str()).collect();
    metadata::partitions(store, &mut |partition| {
        let prefix = index::kind_prefix(partition, kind);
        let mut paths = Vec::new();
        store.scan(
            KINDS,
            Bounds::prefix(prefix.clone()).range(),
            false,
            &mut |k, _| {
                paths.push(k[prefix.len()..].to_vec());
                true
            },
        )?;
        let mut at = Vec::with_capacity(64);
        keycode::partition(&mut at, partition);
        let head = at.len();
        for path in paths {
            at.truncate(head);
            at.extend_from_slice(&path);
            let key = keycode::Reader::new(&at)
                .key()
                .map_err(|_| candidates::corrupt())?;
            let (properties, _) = candidates::load(store, &at)?.ok_or_else(candidates::corrupt)?;
            for (table, entry) in index::entries(&key, &properties, indexes) {
                if tables.contains(table.as_ref()) {
                    batch.put(table, entry, Vec::new());
                }
            }
        }
        Ok(())
    })
}
