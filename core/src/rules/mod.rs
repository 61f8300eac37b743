//! The service's rules, as datastore-entity enforces them (the catalogue, with each rule's
//! id, is the `datastore-entity` crate's `rules` module).

// The service's rules, checked before anything is sent (and by the
// embedded engine itself, so a raw `Backend` call is held to them too): one entity's limits
// (`limits`), one commit's (`commit`), an entity's index entries (`index_entries`, R-I5),
// and a query's filter tree (`filter`).

pub mod commit;
pub mod filter;
pub mod index_entries;
pub mod limits;
