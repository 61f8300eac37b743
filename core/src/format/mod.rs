//! Every byte format that names stored data, in one place: change a byte here and data written
//! before becomes unreachable. `tests/tests/formats.rs` pins each with golden bytes and names.
//!
//! - `companion`: the keys and properties of counter shards, replicas and sharded-index
//!   values, stored in Google Cloud as in the embedded engine (R-S1, R-S2, R-S3);
//! - `cursor`: the envelope of every cursor users keep (R-Q3);
//! - `file`: the embedded engine's tables and meta keys;
//! - `keycode`: the order-preserving encoding of the engine's index entries;
//! - `urlsafe`: URL-safe keys, the legacy `Reference` NDB, Go and Java share.
//!
//! The hashes behind scattered key names (R-K4) and companion names are `hash.rs`, below the
//! model (which names scattered keys with them); the stored form of an entity's properties is
//! `model/stored.rs` (the model reads and writes it directly). Both are pinned by the same tests.

pub mod companion;
pub mod cursor;
pub mod file;
pub mod keycode;
pub mod urlsafe;
