//! The service's rules for one commit, the one checker every write goes through: each
//! backend's commit calls it before anything is written or sent (the embedded engine checks
//! each entity after merging a masked write with what is stored). A commit carries at most
//! 10 MiB of entities and keys (the service's limit on a request and on a transaction; its
//! current limits page sets no count of mutations), each entity at most once (R-A4), complete
//! keys where an entity is named (an update, a delete, every ancestor), and every entity
//! written follows the rules of `limits.rs`.

use crate::hash::Set;

use crate::error::{Error, cut};
use crate::model::key::{IdOrName, RawKey};
use crate::model::name::{MAX_NAME_BYTES, is_reserved_name};
use crate::model::stored::Writer;
use crate::query::write::Mutation;
use crate::rules::index_entries::CompositeIndex;
use crate::rules::limits::check_entity;

/// The largest commit the service takes, in bytes: "Maximum API request size: 10 MiB" and
/// "Maximum size for a transaction: 10 MiB"
/// (<https://cloud.google.com/datastore/docs/concepts/limits>), measured as the entities it
/// writes (each as [`MAX_ENTITY_BYTES`](crate::rules::limits::MAX_ENTITY_BYTES) measures one) and the keys
/// it deletes.
pub const MAX_COMMIT_BYTES: usize = 10 << 20;

/// How many bytes a mutation adds to its commit: the entity it writes, as the service
/// measures an entity, or the key it deletes.
pub fn mutation_bytes(mutation: &Mutation) -> usize {
    match mutation {
        Mutation::Insert(key, properties, _)
        | Mutation::Update(key, properties, _)
        | Mutation::Upsert(key, properties, _) => properties.entity_size(key),
        Mutation::Delete(key) => Writer::key_len(key),
    }
}

/// Every rule of a commit of `mutations`, each entity written checked with the composite
/// indexes `composites_of` gives for its mutation (the cloud backend's check; the embedded
/// engine checks the mutations first and each entity as it will store it).
pub fn check_commit<C: CompositeIndex>(
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

/// The rules of a commit that concern its mutations: its size, each entity at most once
/// (R-A4), and complete keys where an entity is named.
pub fn check_mutations<'m>(
    mutations: impl ExactSizeIterator<Item = &'m Mutation> + Clone,
) -> Result<(), Error> {
    let count = mutations.len();
    let bytes = mutations
        .clone()
        .fold(0_usize, |n, m| n.saturating_add(mutation_bytes(m)));
    if bytes > MAX_COMMIT_BYTES {
        return Err(Error::CommitTooLarge {
            mutations: count,
            bytes,
            max: MAX_COMMIT_BYTES,
        });
    }
    // A single mutation has nothing to be a duplicate of (and the set would allocate).
    let many = count > 1;
    let mut seen = Set::with_capacity_and_hasher(if many { count } else { 0 }, Default::default());
    for mutation in mutations {
        let key = mutation.key();
        check_ancestors(key)?;
        check_key(key)?;
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

/// The service's rules on the key of an entity written (stricter rules of the crate's own, such
/// as R-N2, are checked where its types write): each kind and name non-empty, at most 1,500
/// bytes, not reserved (`__.*__`). Negative ids are taken, as the service takes them. The
/// refusal says what the service says, the offending text cut.
pub fn check_key(key: &RawKey) -> Result<(), Error> {
    let refuse = |reason: String| Err(invalid_key(key, &reason));
    for element in key.path() {
        let kind = element.kind();
        if kind.is_empty() {
            return refuse("The kind is the empty string.".to_owned());
        }
        if kind.len() > MAX_NAME_BYTES {
            return refuse(format!("The kind is longer than {MAX_NAME_BYTES} bytes."));
        }
        if is_reserved_name(kind) {
            return refuse(format!("The kind \"{kind}\" is reserved."));
        }
        if let Some(IdOrName::Name(name)) = element.id_or_name() {
            let name = name.as_str();
            if name.is_empty() {
                return refuse("The key path element name is the empty string.".to_owned());
            }
            if name.len() > MAX_NAME_BYTES {
                return refuse(format!(
                    "The key path element name is longer than {MAX_NAME_BYTES} bytes."
                ));
            }
            if is_reserved_name(name) {
                return refuse(format!("The key path element name \"{name}\" is reserved."));
            }
        }
    }
    Ok(())
}

/// A key the service would accept: every ancestor has an id or a name.
pub fn check_ancestors(key: &RawKey) -> Result<(), Error> {
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

pub fn invalid_key(key: &RawKey, reason: &str) -> Error {
    Error::InvalidKey {
        key: cut(&format!("{key:?}")).into_owned(),
        reason: reason.to_owned(),
    }
}
