//! `#[sharded(n)]` counters (R-S1): the value lives in `n` shard entities; an increment
//! updates one shard chosen at random, in a transaction, and the total is the sum of all shards,
//! read in one batched lookup.
//!
//! Every instance of the kind is sharded, not only the hot ones: sharding only the hottest
//! entities leaves too few keys between them to keep them on different tablets (Google's
//! "common mistakes when sharding").

use crate::backend::retry::RetryPolicy;
use crate::db::Db;
use crate::db::read::{overflow, sum_shards};
use crate::db::write::{Op, Write};
use crate::error::Error;
use crate::format::companion::{check_owner, companion_key, shard, shard_count};
use crate::model::key::RawKey;
use crate::model::schema::CounterSchema;

/// Attempts an increment makes at least, each on a freshly chosen shard: with `n` shards,
/// contention that exhausts them all is vanishingly rare.
const MIN_ATTEMPTS: u32 = 16;

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
            let at = companion_key(owner, counter.kind, fastrand::u32(..counter.shards.max(1)));
            let found = tx
                .lookup_raw(std::slice::from_ref(&at))
                .await?
                .pop()
                .flatten();
            let current = match &found {
                Some(properties) => {
                    check_owner(owner, &at, properties)?;
                    shard_count(&at, properties)?
                }
                None => 0,
            };
            let count = current
                .checked_add(delta)
                .ok_or_else(|| overflow(counter))?;
            tx.write(Write::raw(Op::Upsert, at, shard(owner, count)));
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
