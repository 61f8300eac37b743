//! The scale patterns of Google's pages, built on the `Db` (R-S1, R-S3): sharded counters'
//! increments and totals, and queries through sharded indexes. Their companion entities are
//! written, read and deleted with their owner by the `Db`'s own pipeline (`db/write.rs`,
//! `db/read.rs`), in the layout of `format/companion.rs`; replicas (R-S2) need nothing more.

pub mod counter;
pub mod sharded_index;

pub use crate::rules::commit::MAX_MUTATIONS;
