//! The layout of an embedded engine's store — a `Db::open` file, and the same tables in
//! memory: the table names, the meta table's keys, and the format marker a file starts with.
//! Keys and values of the index tables are `keycode.rs`'s order-preserving encoding; an
//! entity's value is the stored form (`model/stored.rs`).
//!
//! - `entities`: partition + key path → the entity's properties.
//! - `kinds`: partition + kind + key path → nothing: every entity of a kind, in key order.
//! - `properties`: partition + kind + property + value + key path → nothing: the built-in
//!   single-property index, one entry per distinct indexed value.
//! - `composite:{hash}`: one table per declared composite index ([`composite_table`]).
//! - `meta`: [`FORMAT_KEY`] → [`FORMAT`]; [`IDS_KEY`] → the id allocator's counter;
//!   [`RESERVED_PREFIX`] + id → reserved ids; [`INDEX_PREFIX`] + table → a declared index.
//!
//! A file written by one version is read by the next: `tests/tests/formats.rs` pins every
//! table's bytes, and a change of layout must change [`FORMAT`] (and read the old one).

use crate::format::hash::fnv1a_128;

/// Every entity, by key.
pub(crate) const ENTITIES: &str = "entities";
/// Every entity of a kind, in key order.
pub(crate) const KINDS: &str = "kinds";
/// The built-in single-property index.
pub(crate) const PROPERTIES: &str = "properties";
/// The engine's own state.
pub(crate) const META: &str = "meta";

/// What a file of this engine holds under [`FORMAT_KEY`]; a file of another format is refused.
pub(crate) const FORMAT: &[u8] = b"datastore-entity embedded 1";
/// The meta key of the format marker.
pub(crate) const FORMAT_KEY: &[u8] = b"format";
/// The meta key of the id allocator's counter.
pub(crate) const IDS_KEY: &[u8] = b"ids";
/// The meta keys of reserved ids (then the id, big-endian).
pub(crate) const RESERVED_PREFIX: &[u8] = b"reserved:";
/// The meta keys of declared composite indexes (then the index's table name).
pub(crate) const INDEX_PREFIX: &[u8] = b"index:";

/// The table of a composite index, named by a hash of its definition (kind, ancestor,
/// columns and directions, in their order-preserving encoding).
pub(crate) fn composite_table(definition: &[u8]) -> String {
    format!("composite:{:032x}", fnv1a_128(definition))
}
