//! The read pipeline of every entity: one lookup reads the entities by key together with their
//! companions — a random replica of each replicated entity, every shard of every counter
//! (R-S1, R-S2) — and turns what comes back into typed entities.

use crate::backend::{FoundEntity, FoundStamped, Stamp};
use datastore_entity_core::error::Error;
use datastore_entity_core::format::companion::{
    check_owner, companion_key, from_replica, shard_count,
};
use datastore_entity_core::model::entity::Entity;
use datastore_entity_core::model::key::{Key, RawKey};
use datastore_entity_core::model::schema::{CounterSchema, Schema};
use datastore_entity_core::model::value::{Property, PropertyMap, Value};

use super::scope::{Scope, TxRef, lookup};

/// The error of a counter whose total does not fit an `i64`.
pub(crate) fn overflow(counter: &CounterSchema) -> Error {
    Error::CounterOverflow {
        kind: counter.kind.to_owned(),
        field: counter.field.to_owned(),
    }
}

/// The keys of every shard of every counter of `owner`.
fn shard_keys<'s>(schema: &'s Schema, owner: &'s RawKey) -> impl Iterator<Item = RawKey> + 's {
    schema
        .counters
        .iter()
        .flat_map(move |c| (0..c.shards).map(move |s| companion_key(owner, c.kind, s)))
}

/// Sums the shards of `counter` found by a lookup. Increments keep the total within an
/// `i64`; shards another program wrote past that make the total saturate at `i64::MIN` or
/// `i64::MAX` (with a warning), never a failed read.
pub(crate) fn sum_shards(
    owner: &RawKey,
    counter: &CounterSchema,
    shards: impl Iterator<Item = (RawKey, Option<PropertyMap>)>,
) -> Result<i64, Error> {
    let mut total: i128 = 0;
    for (key, found) in shards {
        let Some(properties) = found else { continue };
        check_owner(owner, &key, &properties)?;
        total += i128::from(shard_count(&key, &properties)?);
    }
    i64::try_from(total).or_else(|_| {
        tracing::warn!(
            kind = counter.kind,
            field = counter.field,
            "the shards of a counter hold more than an i64: its total is read as the nearest \
             end of the range (written by another program; increments keep it in range)"
        );
        Ok(if total < 0 { i64::MIN } else { i64::MAX })
    })
}

/// Reads entities by key, with their companions, in one lookup: every shard of every counter
/// (R-S1), and, of an entity `#[replicated(n, unchecked)]`, a random replica instead of the
/// entity (R-S2): a replica whose entity another writer changed since is stale, which only
/// `unchecked` accepts (a replicated entity otherwise reads its own key, never older than
/// the entity). A replica that is missing (written before `#[replicated]` was added, or
/// never written) is read from the entity's own key in a second lookup.
pub(crate) async fn load<E: Entity>(
    scope: &Scope,
    keys: &[Key<E>],
    transaction: Option<&TxRef>,
) -> Result<Vec<Option<E>>, Error> {
    let schema = E::SCHEMA;
    if scope.caching.is_some() {
        // The caches learn the kind's policy.
        scope.declare(schema).await?;
    }
    let replicas = schema.replicas.as_ref().filter(|r| r.unchecked);
    let owners: Vec<RawKey> = keys
        .iter()
        .map(|k| scope.outgoing(k.raw()))
        .collect::<Result<_, _>>()?;
    if reads_alone(schema, transaction) {
        return read_each(scope, &owners).await;
    }
    let shards_each: usize = schema.counters.iter().map(|c| c.shards as usize).sum();
    let mut wanted = Vec::with_capacity(owners.len() * (1 + shards_each));
    for owner in &owners {
        wanted.push(match replicas {
            None => owner.clone(),
            Some(r) => companion_key(owner, r.kind, fastrand::u32(..r.copies.max(1))),
        });
    }
    for owner in &owners {
        wanted.extend(shard_keys(schema, owner));
    }
    let mut found = lookup(scope, &wanted, transaction).await?;
    let shard_results = found.split_off(owners.len());
    let mut entities: Vec<Option<PropertyMap>> = Vec::with_capacity(owners.len());
    let mut missing = Vec::new();
    for (i, (slot, owner)) in found.into_iter().zip(&owners).enumerate() {
        entities.push(match (replicas, slot) {
            (None, slot) => slot,
            (_, Some(replica)) => Some(from_replica(owner, &wanted[i], replica)?),
            (_, None) => {
                missing.push(i);
                None
            }
        });
    }
    if !missing.is_empty() {
        let originals: Vec<RawKey> = missing.iter().map(|&i| owners[i].clone()).collect();
        let again = lookup(scope, &originals, transaction).await?;
        for (i, slot) in missing.into_iter().zip(again) {
            entities[i] = slot;
        }
    }
    let mut shard_results = wanted[owners.len()..].iter().cloned().zip(shard_results);
    owners
        .iter()
        .zip(entities)
        .map(|(owner, slot)| {
            // Consume this owner's shards whether or not the entity exists.
            let totals = schema
                .counters
                .iter()
                .map(|c| sum_shards(owner, c, shard_results.by_ref().take(c.shards as usize)))
                .collect::<Result<Vec<i64>, Error>>()?;
            slot.map(|mut properties| {
                fill_counters(schema, &mut properties, &totals);
                E::from_entity(owner, properties)
            })
            .transpose()
        })
        .collect()
}

/// Whether entities of `schema` are read alone, as the backend hands them over: no replica
/// read in their place, no counter shards, no transaction.
fn reads_alone(schema: &Schema, transaction: Option<&TxRef>) -> bool {
    schema.replicas.as_ref().is_none_or(|r| !r.unchecked)
        && schema.counters.is_empty()
        && transaction.is_none()
}

/// The entity under `key` as a lookup handed it over.
pub(crate) fn entity_from<E: Entity>(key: &RawKey, found: FoundEntity<'_>) -> Result<E, Error> {
    match found {
        FoundEntity::Stored(bytes) => E::from_stored(key, bytes),
        FoundEntity::Map(properties) => E::from_entity(key, properties),
    }
}

/// Reads one entity by key: [`load`], without copying the key or collecting a vector where
/// the entity has no companions and no transaction reads it (a `get`'s usual case).
pub(crate) async fn load_one<E: Entity>(
    scope: &Scope,
    key: &Key<E>,
    transaction: Option<&TxRef>,
) -> Result<Option<E>, Error> {
    if !reads_alone(E::SCHEMA, transaction) || scope.caching.is_some() {
        let mut found = load(scope, std::slice::from_ref(key), transaction).await?;
        return Ok(found.pop().flatten());
    }
    let key = scope.outgoing_ref(key.raw())?;
    let mut entity = None;
    let mut read = |_: usize, found: FoundEntity<'_>| {
        entity = Some(entity_from(&key, found)?);
        Ok(())
    };
    scope
        .backend
        .lookup_each(std::slice::from_ref(&*key), &mut read)
        .await?;
    Ok(entity)
}

/// Reads entities without companions outside a transaction: each as the backend hands it
/// over, the embedded engine's stored form read straight into the entity.
async fn read_each<E: Entity>(scope: &Scope, keys: &[RawKey]) -> Result<Vec<Option<E>>, Error> {
    let mut entities: Vec<Option<E>> = std::iter::repeat_with(|| None).take(keys.len()).collect();
    let mut read = |i: usize, found: FoundEntity<'_>| {
        entities[i] = Some(entity_from(&keys[i], found)?);
        Ok(())
    };
    scope.backend.lookup_each(keys, &mut read).await?;
    Ok(entities)
}

/// Puts each counter's total where the entity's field reads it from.
fn fill_counters(schema: &Schema, properties: &mut PropertyMap, totals: &[i64]) {
    for (counter, total) in schema.counters.iter().zip(totals) {
        properties.insert(counter.name, Property::excluded(Value::Integer(*total)));
    }
}

/// Fills the counters of entities a query returned, with one lookup for the whole page.
pub(crate) async fn with_counters(
    scope: &Scope,
    schema: &'static Schema,
    rows: &mut [(RawKey, PropertyMap)],
    transaction: Option<&TxRef>,
) -> Result<(), Error> {
    if schema.counters.is_empty() || rows.is_empty() {
        return Ok(());
    }
    let wanted: Vec<RawKey> = rows
        .iter()
        .flat_map(|(owner, _)| shard_keys(schema, owner))
        .collect();
    let found = lookup(scope, &wanted, transaction).await?;
    let mut shard_results = wanted.into_iter().zip(found);
    for (owner, properties) in rows {
        let totals = schema
            .counters
            .iter()
            .map(|c| sum_shards(owner, c, shard_results.by_ref().take(c.shards as usize)))
            .collect::<Result<Vec<i64>, Error>>()?;
        fill_counters(schema, properties, &totals);
    }
    Ok(())
}

/// Typed entities from what a lookup of `owners` found outside a transaction, each with its
/// stamp, their counters filled with one more lookup: one slot per key, in order.
pub(crate) async fn stamped<E: Entity>(
    scope: &Scope,
    owners: Vec<RawKey>,
    found: FoundStamped,
) -> Result<Vec<Option<(E, Stamp)>>, Error> {
    let mut rows = Vec::with_capacity(owners.len());
    let mut stamps = Vec::with_capacity(owners.len());
    let mut slots = Vec::with_capacity(owners.len());
    for (owner, slot) in owners.into_iter().zip(found) {
        slots.push(slot.is_some());
        if let Some((properties, stamp)) = slot {
            rows.push((owner, properties));
            stamps.push(stamp);
        }
    }
    with_counters(scope, E::SCHEMA, &mut rows, None).await?;
    let mut read = rows.into_iter().zip(stamps);
    slots
        .into_iter()
        .map(|found| match found.then(|| read.next()).flatten() {
            Some(((key, properties), stamp)) => {
                Ok(Some((E::from_entity(&key, properties)?, stamp)))
            }
            None => Ok(None),
        })
        .collect()
}
