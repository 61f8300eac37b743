//! The scale patterns of Google's pages, built on the `Db`: sharded counters' increments and
//! totals (R-S1), queries through sharded indexes (R-S3), the 500/50/5 ramp and the bulk
//! writer paced by it (R-S4), migrations (R-S5). Their companion entities are
//! written, read and deleted with their owner by the `Db`'s own pipeline (`db/write.rs`,
//! `db/read.rs`), in the layout of `format/companion.rs`; replicas (R-S2) need nothing more.

pub(crate) mod bulk;
pub(crate) mod counter;
pub mod migrate;
pub(crate) mod ramp;
pub(crate) mod sharded_index;
