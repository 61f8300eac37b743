#![doc = include_str!("../../docs/rules.md")]

// Inside the crate: the service's rules, checked before anything is sent (and by the
// embedded engine itself, so a raw `Backend` call is held to them too): one entity's limits
// (`limits`), one commit's (`commit`), an entity's index entries (`index_entries`, R-I5),
// and a query's filter tree (`filter`). The module's public face is the catalogue above.

pub(crate) mod commit;
pub(crate) mod filter;
pub(crate) mod index_entries;
pub(crate) mod limits;
