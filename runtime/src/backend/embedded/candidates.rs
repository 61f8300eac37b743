//! A scan's candidates — every entity of the query's kind under its ancestor — read from the
//! store in slices, decoded and evaluated (the reference evaluation of `scan.rs`); and the
//! errors of the executor's reads: a malformed entry, a cursor of another plan.

use std::ops::Bound;

use super::bounds::Bounds;
use super::index;
use super::plan::Access;
use super::scan::Prepared;
use super::store::Store;
use datastore_entity_core::error::Error;
use datastore_entity_core::format::file::ENTITIES;
use datastore_entity_core::format::keycode::{self, Reader};
use datastore_entity_core::model::key::RawKey;
use datastore_entity_core::model::value::PropertyMap;
use datastore_entity_core::query::spec::{QueryBatch, ResultShape, Stamp};

pub(crate) fn corrupt() -> Error {
    Error::storage("an index entry is malformed (the store is corrupt)".to_owned())
}

pub(super) fn other_plan() -> Error {
    Error::InvalidCursor {
        reason: "it was made by another plan of this query (a composite index was declared \
                 since); start the query again"
            .to_owned(),
    }
}

/// Every entity of the query's kind under its ancestor, for a scan, and their stamps.
#[allow(clippy::type_complexity)]
pub(super) fn candidates(
    store: &dyn Store,
    prepared: &Prepared<'_>,
) -> Result<(Vec<(RawKey, PropertyMap)>, Vec<Stamp>), Error> {
    let (slice, _) = candidate_slice(store, prepared, None, usize::MAX)?;
    decode_candidates(prepared, slice, store.written_here())
}

/// The stored forms of a scan's candidates: up to `max` entities of the query's kind under its
/// ancestor after the key path `after`, each its key path and stored form as they lie in
/// the store (copied, decoded later: [`decode_candidates`]); and whether more follow.
#[allow(clippy::type_complexity)]
pub(super) fn candidate_slice(
    store: &dyn Store,
    prepared: &Prepared<'_>,
    after: Option<&[u8]>,
    max: usize,
) -> Result<(Vec<(Vec<u8>, Vec<u8>)>, bool), Error> {
    let query = prepared.query;
    let (table, head) = index::listing(&query.partition, &query.kind);
    let mut prefix = head.clone();
    if let Some(ancestor) = &query.ancestor {
        prefix.extend_from_slice(&index::path_prefix(ancestor));
    }
    let mut bounds = Bounds::prefix(prefix);
    if let Some(after) = after {
        bounds.raise(Bound::Excluded([head.as_slice(), after].concat()));
    }
    let mut paths = Vec::new();
    let mut more = false;
    store.scan(table, bounds.range(), false, &mut |k, _| {
        if paths.len() == max {
            more = true;
            return false;
        }
        paths.push(k[head.len()..].to_vec());
        true
    })?;
    let mut partition = Vec::new();
    keycode::partition(&mut partition, &query.partition);
    let mut at = partition.clone();
    let mut slice = Vec::with_capacity(paths.len());
    for path in paths {
        at.truncate(partition.len());
        at.extend_from_slice(&path);
        let mut stored = None;
        store.get(ENTITIES, &at, &mut |value| stored = Some(value.to_vec()))?;
        slice.push((path, stored.ok_or_else(corrupt)?));
    }
    Ok((slice, more))
}

/// A scan's candidates from their stored forms ([`candidate_slice`]), and their stamps;
/// `written_here`: the forms need no check ([`Store::written_here`]).
#[allow(clippy::type_complexity)]
pub(super) fn decode_candidates(
    prepared: &Prepared<'_>,
    slice: Vec<(Vec<u8>, Vec<u8>)>,
    written_here: bool,
) -> Result<(Vec<(RawKey, PropertyMap)>, Vec<Stamp>), Error> {
    let partition = &prepared.query.partition;
    slice
        .into_iter()
        .map(|(path, stored)| {
            let elements = Reader::new(&path).path().map_err(|_| corrupt())?;
            let key = RawKey::new(Some(partition.clone()), elements).map_err(|_| corrupt())?;
            let (properties, stamp) =
                index::decode_entity(stored, written_here).ok_or_else(corrupt)?;
            Ok(((key, properties), stamp))
        })
        .collect()
}

/// A scan's answer from all its candidates: the query's rows among them, from its start
/// cursor to its end cursor, in order, each whole result with its stamp.
pub(super) fn scanned(
    prepared: &Prepared<'_>,
    candidates: &[(RawKey, PropertyMap)],
    stamps: Vec<Stamp>,
) -> Result<QueryBatch, Error> {
    let query = prepared.query;
    let position = |bytes: &Option<Vec<u8>>| -> Result<Option<Vec<u8>>, Error> {
        let Some(bytes) = bytes else { return Ok(None) };
        let (tag, position) = prepared.decode_cursor(bytes)?;
        if tag != Access::Scan.tag() {
            return Err(other_plan());
        }
        Ok(Some(position.to_vec()))
    };
    let (start, end) = (position(&query.start_cursor)?, position(&query.end_cursor)?);
    let mut batch = prepared.scan(candidates, start.as_deref(), end.as_deref())?;
    if query.shape == ResultShape::Full {
        let stamps: std::collections::HashMap<&RawKey, Stamp> =
            candidates.iter().map(|(key, _)| key).zip(stamps).collect();
        for result in &mut batch.results {
            result.stamp = stamps.get(&result.key).copied();
        }
    }
    Ok(batch)
}

/// The entity stored under `at` (an entities-table key), with its stamp.
pub(crate) fn load(store: &dyn Store, at: &[u8]) -> Result<Option<(PropertyMap, Stamp)>, Error> {
    let mut decoded = None;
    let written_here = store.written_here();
    store.get(ENTITIES, at, &mut |bytes| {
        decoded = Some(index::decode_entity(bytes.to_vec(), written_here));
    })?;
    decoded.map(|d| d.ok_or_else(corrupt)).transpose()
}

/// Copies the stored form of the entity under `at` (an entities-table key) to the end of
/// `bytes`, and says where it lies there; `None` if there is none.
pub(crate) fn copy_stored(
    store: &dyn Store,
    at: &[u8],
    bytes: &mut Vec<u8>,
) -> Result<Option<std::ops::Range<usize>>, Error> {
    let start = bytes.len();
    let mut found = None;
    store.get(ENTITIES, at, &mut |value| {
        found = Some(index::split_entity(value).map(|(form, _)| bytes.extend_from_slice(form)));
    })?;
    match found {
        None => Ok(None),
        Some(None) => Err(corrupt()),
        Some(Some(())) => Ok(Some(start..bytes.len())),
    }
}
