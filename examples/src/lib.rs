//! Runnable programs, one scenario each:
//!
//! - `cargo run -p datastore-entity-examples --example quickstart` — a small blog.
//! - `cargo run -p datastore-entity-examples --example concurrent` — a lookup and a query
//!   running at the same time (R-A3).
