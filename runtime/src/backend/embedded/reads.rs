//! The state's reads: entities by key (as maps with their stamps, or their stored forms in
//! one buffer) and queries (as a batch of results, or a whole-entity query's as stored).

use super::State;
use super::candidates;
use super::exec::Answered;
use super::index;
use crate::backend::{FoundStamped, TransactionId};
use datastore_entity_core::error::Error;
use datastore_entity_core::format::keycode;
use datastore_entity_core::model::key::RawKey;
use datastore_entity_core::query::spec::{QueryBatch, QuerySpec};
use datastore_entity_core::rules::commit::{check_ancestors, invalid_key};

impl State {
    /// The entities under `keys`, each with its stamp, read as `transaction` reads.
    pub(super) fn lookup(
        &mut self,
        keys: &[RawKey],
        transaction: Option<&TransactionId>,
    ) -> Result<FoundStamped, Error> {
        if let Some(k) = keys.iter().find(|k| !k.is_complete()) {
            return Err(invalid_key(k, "a lookup needs complete keys"));
        }
        keys.iter().try_for_each(check_ancestors)?;
        let at: Vec<Vec<u8>> = keys.iter().map(index::entity_key).collect();
        let version = self.read_version(transaction, true)?;
        let view = self.view(version);
        let found = at
            .iter()
            .map(|at| candidates::load(&view, at))
            .collect::<Result<_, _>>()?;
        self.record_reads(transaction, at)?;
        Ok(found)
    }

    /// The stored forms of the entities under `keys` (outside any transaction), back to back
    /// in one buffer: each found key's position and where its bytes lie.
    #[allow(clippy::type_complexity)]
    pub(super) fn lookup_stored(
        &mut self,
        keys: &[RawKey],
    ) -> Result<(Vec<u8>, Vec<(usize, std::ops::Range<usize>)>), Error> {
        if let Some(k) = keys.iter().find(|k| !k.is_complete()) {
            return Err(invalid_key(k, "a lookup needs complete keys"));
        }
        keys.iter().try_for_each(check_ancestors)?;
        let view = self.view(None);
        let mut bytes = Vec::new();
        let mut found = Vec::with_capacity(keys.len());
        // Room for most keys: a partition and a path of a few elements.
        let mut at = Vec::with_capacity(64);
        for (i, key) in keys.iter().enumerate() {
            at.clear();
            keycode::key(&mut at, key);
            if let Some(range) = candidates::copy_stored(&view, &at, &mut bytes)? {
                found.push((i, range));
            }
        }
        Ok((bytes, found))
    }

    /// One batch of `query`'s results, read as `transaction` reads.
    pub(super) fn run_query(
        &mut self,
        query: &QuerySpec,
        transaction: Option<&TransactionId>,
    ) -> Result<QueryBatch, Error> {
        self.build_needed(query)?;
        let version = self.read_version(transaction, false)?;
        let batch = self.answers().answer(&self.view(version), query)?;
        self.finish_query(query, transaction, batch)
    }

    /// A query's answer through its property mask; in a transaction, its reads recorded.
    pub(super) fn finish_query(
        &mut self,
        query: &QuerySpec,
        transaction: Option<&TransactionId>,
        mut batch: QueryBatch,
    ) -> Result<QueryBatch, Error> {
        if let Some(paths) = query.property_mask.as_deref() {
            for result in &mut batch.results {
                result.properties = result.properties.selected(paths);
            }
        }
        if transaction.is_some() {
            let at = batch
                .results
                .iter()
                .map(|r| index::entity_key(&r.key))
                .collect();
            self.record_reads(transaction, at)?;
            if let Some(t) = self.transaction(transaction)? {
                let keys = batch.results.iter().map(|r| r.key.clone()).collect();
                t.queries.push((query.clone(), keys));
            }
        }
        Ok(batch)
    }

    /// One batch of `query`'s results outside any transaction: a whole-entity query's as
    /// their entities are stored where one plan reads them ([`StoredBatch`](super::exec::StoredBatch)).
    pub(super) fn run_query_stored(&mut self, query: &QuerySpec) -> Result<Answered, Error> {
        if query.property_mask.is_some() {
            return self.run_query(query, None).map(Answered::Batch);
        }
        self.build_needed(query)?;
        self.answers().answer_stored(&self.view(None), query)
    }
}
