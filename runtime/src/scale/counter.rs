//! `#[sharded(n)]` counters (R-S1): the value lives in `n` shard entities; an increment
//! updates one shard chosen at random, in a transaction, and the total is the sum of all shards,
//! read in one batched lookup.
//!
//! Every instance of the kind is sharded, not only the hot ones: sharding only the hottest
//! entities leaves too few keys between them to keep them on different tablets (Google's
//! "common mistakes when sharding").

use super::{Op, Write, check_owner, companion_key, sum_shards};
use crate::entity::CounterSchema;
use crate::value::{Property, PropertyMap, Value};
use crate::{Db, Error, RawKey, RetryPolicy};

/// The property of a shard that holds its part of the total.
const COUNT: &str = "count";

/// Attempts an increment makes at least, each on a freshly chosen shard: with `n` shards,
/// contention that exhausts them all is vanishingly rare.
const MIN_ATTEMPTS: u32 = 16;

/// The error of a counter whose total does not fit an `i64`.
pub(crate) fn overflow(counter: &CounterSchema) -> Error {
    Error::CounterOverflow {
        kind: counter.kind.to_owned(),
        field: counter.field.to_owned(),
    }
}

/// The part of the total a shard holds.
pub(crate) fn shard_count(key: &RawKey, properties: &PropertyMap) -> Result<i64, Error> {
    match properties.get(COUNT).map(|p| &p.value) {
        Some(Value::Integer(count)) => Ok(*count),
        other => Err(Error::Decode {
            kind: key.kind().to_owned(),
            property: COUNT.to_owned(),
            expected: "integer".to_owned(),
            found: other.map_or("nothing", Value::type_name).to_owned(),
        }),
    }
}

/// Adds `delta` to the counter of `owner` (a key as the user holds it): one random shard,
/// in a transaction. Contention is retried, each attempt on a freshly chosen shard, at least
/// 16 attempts; nothing is written unless the increment is.
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
    let owner = &owner;
    db.clone()
        .with_retry(retry)
        .transaction(|tx| async move {
            let shard = companion_key(owner, counter.kind, fastrand::u32(..counter.shards.max(1)));
            let found = tx
                .lookup_raw(std::slice::from_ref(&shard))
                .await?
                .pop()
                .flatten();
            let current = match &found {
                Some(properties) => {
                    check_owner(owner, &shard, properties)?;
                    shard_count(&shard, properties)?
                }
                None => 0,
            };
            let count = current
                .checked_add(delta)
                .ok_or_else(|| overflow(counter))?;
            let properties = PropertyMap::from([
                (COUNT.to_owned(), Property::excluded(Value::Integer(count))),
                (
                    super::OWNER.to_owned(),
                    Property::excluded(Value::Key(owner.clone())),
                ),
            ]);
            tx.write(Write::raw(Op::Upsert, shard, properties));
            Ok(())
        })
        .await
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
