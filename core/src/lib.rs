//! The core of [datastore-entity](https://docs.rs/datastore-entity): the value model
//! (names, keys, values, property maps and their stored form), the query and write vocabulary
//! backends receive, the stored formats and the service's rules. It knows no backend and
//! no wire: the embedded engine and the Google Cloud path build on it in the
//! `datastore-entity` crate, which re-exports what users need. Depend on that crate; the
//! modules here are its internals, not a public API.
//!
//! A backend that keeps property maps in its own form (the Google Cloud path's protocol
//! buffers) implements `model::value::ForeignMap`: the model reads and writes such maps only
//! through it.

// The layers, bottom up: error.rs, hash.rs, model/, query/, format/, rules/ (DEVELOPERS.md, "Layout").
// `layers/` checks that every file uses only files below it in that table.
#[doc(hidden)]
pub mod error;
#[doc(hidden)]
pub mod format;
#[doc(hidden)]
pub mod hash;
#[doc(hidden)]
pub mod model;
/// The query and write vocabulary the backends receive and the typed descriptors that
/// build queries.
#[doc(hidden)]
pub mod query {
    pub mod descriptor;
    pub mod explain;
    pub mod results;
    pub mod spec;
    pub mod transform;
    pub mod write;
}
#[doc(hidden)]
pub mod query_rule;
#[doc(hidden)]
pub mod rules;
