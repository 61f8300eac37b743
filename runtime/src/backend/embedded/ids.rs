//! Id allocation: scattered over `[2^52, 2^53)` (R-K1) from a counter persisted in blocks,
//! never a reserved id (R-K3).

use std::collections::HashSet;

use super::store::Batch;
use datastore_entity_core::error::Error;
use datastore_entity_core::format::file::{IDS_KEY, META, RESERVED_PREFIX};
use datastore_entity_core::model::key::{IdOrName, KeyId, RawKey};
use datastore_entity_core::rules::commit::invalid_key;

/// Allocation counters are persisted this many at a time: a crash skips at most this many
/// ids, never hands one out twice.
const ID_BLOCK: u64 = 1024;

/// The allocation counter and the reserved ids.
#[derive(Default)]
pub(super) struct Ids {
    /// The allocation counter.
    next: u64,
    /// The counter value the store holds: allocations up to it are safe after a crash.
    persisted: u64,
    /// Reserved ids: never allocated.
    reserved: HashSet<i64>,
}

impl Ids {
    /// The counter a file holds (its `IDS_KEY` record).
    pub(super) fn load_counter(&mut self, counter: u64) {
        self.next = counter;
        self.persisted = counter;
    }

    /// An id a file reserved (its `RESERVED_PREFIX` records).
    pub(super) fn load_reserved(&mut self, id: i64) {
        self.reserved.insert(id);
    }

    /// A batch that allocated ids was not applied: persist the counter again next time.
    pub(super) fn forget_persisted(&mut self) {
        self.persisted = 0;
    }

    /// The next id, scattered; `batch` persists the counter's next block when needed.
    pub(super) fn next_id(&mut self, batch: &mut Batch) -> KeyId {
        loop {
            self.next += 1;
            if self.next > self.persisted {
                self.persisted = self.next + ID_BLOCK;
                batch.put(
                    META,
                    IDS_KEY.to_vec(),
                    self.persisted.to_be_bytes().to_vec(),
                );
            }
            // Bit-reverse a counter into the low 52 bits: consecutive allocations differ in
            // the highest of them, so ids are never adjacent and spread over the whole range.
            let scattered = (1_i64 << 52) | (self.next.reverse_bits() >> 12).cast_signed();
            if !self.reserved.contains(&scattered)
                && let Ok(id) = KeyId::new(scattered)
            {
                return id;
            }
        }
    }

    /// `keys` (incomplete) completed with allocated ids, into `batch`.
    pub(super) fn allocate(
        &mut self,
        keys: Vec<RawKey>,
        batch: &mut Batch,
    ) -> Result<Vec<RawKey>, Error> {
        if let Some(k) = keys.iter().find(|k| k.is_complete()) {
            return Err(invalid_key(k, "allocate_ids takes incomplete keys"));
        }
        Ok(keys
            .into_iter()
            .map(|k| k.completed(IdOrName::Id(self.next_id(batch))))
            .collect())
    }

    /// The ids of `keys` (complete) to reserve, their records put in `batch`; named keys
    /// have no id to reserve and are accepted, as by the service. [`Ids::reserve`] them once
    /// the batch is applied.
    pub(super) fn to_reserve(keys: &[RawKey], batch: &mut Batch) -> Result<Vec<i64>, Error> {
        if let Some(k) = keys.iter().find(|k| !k.is_complete()) {
            return Err(invalid_key(k, "reserve_ids takes complete keys"));
        }
        let ids: Vec<i64> = keys.iter().filter_map(|k| k.id()).map(KeyId::get).collect();
        for id in &ids {
            batch.put(
                META,
                [RESERVED_PREFIX, &id.to_be_bytes()].concat(),
                Vec::new(),
            );
        }
        Ok(ids)
    }

    /// Never allocates `ids` from now on.
    pub(super) fn reserve(&mut self, ids: Vec<i64>) {
        self.reserved.extend(ids);
    }
}
