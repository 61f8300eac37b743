//! The service's rules for one commit, the one checker every write goes through: each
//! backend's commit calls it before anything is written or sent (the embedded engine checks
//! each entity after merging a masked write with what is stored). A commit has at most 500
//! mutations, each entity at most once (R-A4), complete keys where an entity is named (an
//! update, a delete, every ancestor), and every entity written follows the rules of
//! `limits.rs`.

use crate::hash::Set;

use crate::backend::Mutation;
use crate::error::Error;
use crate::model::key::RawKey;
#[cfg(feature = "cloud")]
use crate::rules::index_entries::CompositeIndex;
#[cfg(feature = "cloud")]
use crate::rules::limits::check_entity;

/// The most mutations the service takes in one commit.
pub const MAX_MUTATIONS: usize = 500;

/// Every rule of a commit of `mutations`, each entity written checked with the composite
/// indexes `composites_of` gives for its mutation (the cloud backend's check; the embedded
/// engine checks the mutations first and each entity as it will store it).
#[cfg(feature = "cloud")]
pub(crate) fn check_commit<C: CompositeIndex>(
    mutations: &[Mutation],
    composites_of: impl Fn(&Mutation) -> Vec<C>,
) -> Result<(), Error> {
    check_mutations(mutations.iter())?;
    for mutation in mutations {
        if let Mutation::Insert(key, properties, _)
        | Mutation::Update(key, properties, _)
        | Mutation::Upsert(key, properties, _) = mutation
        {
            check_entity(key, properties, &composites_of(mutation))?;
        }
    }
    Ok(())
}

/// The rules of a commit that concern its mutations, not what they write: how many, each
/// entity at most once (R-A4), and complete keys where an entity is named.
pub(crate) fn check_mutations<'m>(
    mutations: impl ExactSizeIterator<Item = &'m Mutation>,
) -> Result<(), Error> {
    if mutations.len() > MAX_MUTATIONS {
        return Err(Error::TooManyMutations {
            count: mutations.len(),
            max: MAX_MUTATIONS,
        });
    }
    // A single mutation has nothing to be a duplicate of (and the set would allocate).
    let many = mutations.len() > 1;
    let mut seen =
        Set::with_capacity_and_hasher(if many { mutations.len() } else { 0 }, Default::default());
    for mutation in mutations {
        let key = mutation.key();
        check_ancestors(key)?;
        // The service refuses these with INVALID_ARGUMENT: there is no entity to name.
        if matches!(mutation, Mutation::Update(..) | Mutation::Delete(_)) && !key.is_complete() {
            return Err(invalid_key(
                key,
                "an update or a delete needs a complete key (with its id or name)",
            ));
        }
        // R-A4: one entity at most once per commit.
        if many && key.is_complete() && !seen.insert(key) {
            return Err(Error::DuplicateKey {
                key: format!("{key:?}"),
            });
        }
    }
    Ok(())
}

/// A key the service would accept: every ancestor has an id or a name.
pub(crate) fn check_ancestors(key: &RawKey) -> Result<(), Error> {
    let path = key.path();
    match path[..path.len().saturating_sub(1)]
        .iter()
        .any(|e| e.id_or_name().is_none())
    {
        true => Err(invalid_key(
            key,
            "an ancestor has no id or name; put the parent first and use the key it returns",
        )),
        false => Ok(()),
    }
}

pub(crate) fn invalid_key(key: &RawKey, reason: &str) -> Error {
    Error::InvalidKey {
        key: format!("{key:?}"),
        reason: reason.to_owned(),
    }
}
