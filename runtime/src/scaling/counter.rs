//! `#[sharded(n)]` counters (R-S1): the value lives in `n` shard entities; an increment
//! adds to one shard chosen at random, on the server (a transform: no read, no transaction),
//! and the total is the sum of all shards, read in one batched lookup.
//!
//! Every instance of the kind is sharded, not only the hot ones: sharding only the hottest
//! entities leaves too few keys between them to keep them on different tablets (Google's
//! "common mistakes when sharding").

use std::sync::atomic::Ordering;

use crate::backend::retry::RetryPolicy;
use crate::backend::{Change, Mask, Mutation, PropertyTransform, TransformKind};
use crate::db::Db;
use crate::db::read::{overflow, sum_shards};
use crate::db::write::{Op, Write};
use datastore_entity_core::error::Error;
use datastore_entity_core::format::companion::{
    COUNT, check_owner, companion_key, shard, shard_count,
};
use datastore_entity_core::model::key::RawKey;
use datastore_entity_core::model::schema::CounterSchema;
use datastore_entity_core::model::value::{PropertyMap, Value};

/// Attempts an increment makes at least, each on a freshly chosen shard: with `n` shards,
/// contention that exhausts them all is vanishingly rare.
const MIN_ATTEMPTS: u32 = 16;

/// The range one shard of a counter of `shards` shards holds: whatever they hold, their total
/// fits an `i64`.
fn shard_range(shards: u32) -> std::ops::RangeInclusive<i64> {
    let n = i64::from(shards.max(1));
    i64::MIN / n..=i64::MAX / n
}

/// Adds `delta` to the counter of `owner` (a key as the user holds it): one random shard,
/// on the server, without a transaction (a server-side increment of the shard's count). A
/// shard that does not exist yet, a server that does not know transforms (the legacy
/// emulator), a counter of one shard and an increment the shard cannot take go through a
/// transaction instead, retried on contention, each attempt on a freshly chosen shard, at
/// least 16 attempts; nothing is written unless the increment is.
///
/// So that the counter's total always fits an `i64` (and no read of it can fail), each of its
/// `n` shards stays within `i64::MIN / n ..= i64::MAX / n`: an increment the random shard
/// cannot take goes to the first shard that can (all of them read, in the same transaction),
/// and one no shard can take — larger than `i64::MAX / n`, or past what the total holds —
/// is [`Error::CounterOverflow`], nothing written. (On the server, a shard that goes out of
/// its range is taken back at once, and the increment goes through the transaction: a read
/// in between sees a total that saturates, never an error.)
pub async fn increment(
    db: &Db,
    owner: &RawKey,
    counter: &'static CounterSchema,
    delta: i64,
) -> Result<(), Error> {
    let owner = db.outgoing(owner)?;
    let retry = RetryPolicy {
        max_attempts: db.retry.max_attempts.max(MIN_ATTEMPTS),
        ..db.retry
    };
    let range = shard_range(counter.shards);
    if !range.contains(&delta) {
        return Err(overflow(counter));
    }
    // The shard the transaction tries first: the one the server could not add to because it
    // does not exist yet (so that every shard gets created), else a random one.
    let preferred = std::sync::atomic::AtomicU32::new(u32::MAX);
    if counter.shards >= 2 {
        let slot = fastrand::u32(..counter.shards);
        let at = companion_key(&owner, counter.kind, slot);
        match add_on_server(db, &at, delta).await {
            // Two in-range values never saturate an `i64` when there are two shards or more.
            Ok(count) if range.contains(&count) => return Ok(()),
            Ok(_) => {
                add_on_server(db, &at, -delta).await?;
            }
            Err(Error::NotFound { .. }) => preferred.store(slot, Ordering::Relaxed),
            Err(Error::Unsupported { .. }) => {}
            Err(other) => return Err(other),
        }
    }
    let owner = &owner;
    let range = &range;
    let preferred = &preferred;
    db.clone()
        .with_retry(retry)
        .transaction(|tx| async move {
            let shards = counter.shards.max(1);
            let first = match preferred.swap(u32::MAX, Ordering::Relaxed) {
                u32::MAX => fastrand::u32(..shards),
                slot => slot,
            };
            let count = |at: &RawKey, found: Option<&PropertyMap>| -> Result<Option<i64>, Error> {
                let current = match found {
                    Some(properties) => {
                        check_owner(owner, at, properties)?;
                        shard_count(at, properties)?
                    }
                    None => 0,
                };
                Ok(current.checked_add(delta).filter(|c| range.contains(c)))
            };
            let at = companion_key(owner, counter.kind, first);
            let found = tx.lookup_raw(std::slice::from_ref(&at)).await?;
            if let Some(new) = count(&at, found.first().and_then(Option::as_ref))? {
                tx.write(Write::raw(Op::Upsert, at, shard(owner, new)));
                return Ok(());
            }
            // Near the limit: the first of the other shards with room.
            let others: Vec<RawKey> = (1..shards)
                .map(|i| companion_key(owner, counter.kind, (first + i) % shards))
                .collect();
            let found = tx.lookup_raw(&others).await?;
            for (at, found) in others.into_iter().zip(found) {
                if let Some(new) = count(&at, found.as_ref())? {
                    tx.write(Write::raw(Op::Upsert, at, shard(owner, new)));
                    return Ok(());
                }
            }
            Err(overflow(counter))
        })
        .await
}

/// Adds `delta` to the count of the existing shard `at`, on the server; returns the new count.
/// [`Error::NotFound`] if the shard does not exist (nothing is created: a shard is created with
/// its owner, in a transaction), [`Error::Unsupported`] if the server does not know transforms.
async fn add_on_server(db: &Db, at: &RawKey, delta: i64) -> Result<i64, Error> {
    let change = Change {
        transforms: vec![PropertyTransform {
            path: vec![COUNT.into()],
            kind: TransformKind::Increment(Value::Integer(delta)),
        }],
        ..Change::from(Mutation::Update(
            at.clone(),
            PropertyMap::new(),
            Mask::Paths(Vec::new()),
        ))
    };
    let committed = db.backend().commit_changes(vec![change], None).await?;
    let result = committed.results.into_iter().next();
    match result.and_then(|r| r.transform_results.into_iter().next()) {
        Some(Value::Integer(count)) => Ok(count),
        other => Err(Error::Decode {
            key: Some(format!("{at:?}").into()),
            kind: at.kind().to_owned(),
            property: COUNT.to_owned(),
            expected: "integer".to_owned(),
            found: other
                .as_ref()
                .map_or("nothing", Value::type_name)
                .to_owned(),
        }),
    }
}

/// The counter's total for `owner` (a key as the user holds it): every shard, one lookup.
pub async fn total(db: &Db, owner: &RawKey, counter: &CounterSchema) -> Result<i64, Error> {
    let owner = db.outgoing(owner)?;
    let keys: Vec<RawKey> = (0..counter.shards)
        .map(|s| companion_key(&owner, counter.kind, s))
        .collect();
    let found = db.backend().lookup(&keys, None).await?;
    sum_shards(&owner, counter, keys.into_iter().zip(found))
}
