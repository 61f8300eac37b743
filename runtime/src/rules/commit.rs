//! The service's rules for one commit: each entity at most once (R-A4), at most 500 mutations.

use std::collections::HashSet;

use crate::error::Error;
use crate::model::key::RawKey;

/// The most mutations the service takes in one commit.
pub const MAX_MUTATIONS: usize = 500;

/// R-A4: each complete key at most once per commit, checked before anything is sent.
pub(crate) fn check_unique<'k>(keys: impl Iterator<Item = &'k RawKey>) -> Result<(), Error> {
    let mut seen = HashSet::new();
    for key in keys {
        if key.is_complete() && !seen.insert(key) {
            return Err(Error::DuplicateKey {
                key: format!("{key:?}"),
            });
        }
    }
    Ok(())
}

/// The 500-mutation limit, checked before anything is sent.
pub(crate) fn check_mutation_count(count: usize) -> Result<(), Error> {
    if count > MAX_MUTATIONS {
        return Err(Error::TooManyMutations {
            count,
            max: MAX_MUTATIONS,
        });
    }
    Ok(())
}
