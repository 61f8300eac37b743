// The guide's chapters, one documentation module each; every ```rust block in them is a
// doctest (`cargo test -p datastore-entity --doc guide`). `lib.rs` brings this file into its
// `guide` module with `include!`: the chapters hold no code, and the layer check of
// `layers/` (which follows `mod` declarations) has no file of theirs to place.

#[doc = include_str!("guide/modelling.md")]
pub mod modelling {}

#[doc = include_str!("guide/keys.md")]
pub mod keys {}

#[doc = include_str!("guide/queries.md")]
pub mod queries {}

#[doc = include_str!("guide/reads_and_writes.md")]
pub mod reads_and_writes {}

#[doc = include_str!("guide/existing_data.md")]
pub mod existing_data {}

#[doc = include_str!("guide/embedded.md")]
pub mod embedded {}

#[doc = include_str!("guide/cloud.md")]
pub mod cloud {}

#[doc = include_str!("guide/scale.md")]
pub mod scale {}

#[doc = include_str!("guide/caching.md")]
pub mod caching {}
