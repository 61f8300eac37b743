//! Queries and writes as the backends receive them (`spec`, `write`: the vocabulary) and the typed descriptors
//! that build them (`descriptor`: `Post::TITLE.eq(..)`). The typed, runnable query
//! (`db.query::<E>()`) is the `Db`'s (`db/query.rs`), re-exported here where it has always been.

pub(crate) mod descriptor;
pub(crate) mod explain;
pub(crate) mod spec;
pub(crate) mod write;

pub use crate::db::query::{Cursor, KeysOnlyQuery, Numeric, Page, ProjectionQuery, Query};
