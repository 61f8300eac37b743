//! Writes as the backends receive them: a commit's [`Mutation`]s, and the [`Mask`] of stored
//! properties each one sets (the service's `Mutation.property_mask`), merged over what is
//! stored as the service merges it.

use std::borrow::Cow;

use crate::model::key::RawKey;
use crate::model::scalar::Timestamp;
use crate::model::schema::Schema;
use crate::model::value::{Property, PropertyMap, Value};
use crate::query::spec::Stamp;

/// One write of a commit.
#[derive(Debug, Clone, PartialEq)]
pub enum Mutation {
    /// Create; fails with [`Error::AlreadyExists`](crate::Error::AlreadyExists) if the key exists. An incomplete key gets an id.
    Insert(RawKey, PropertyMap, Mask),
    /// Change; fails with [`Error::NotFound`](crate::Error::NotFound) if the key does not exist.
    Update(RawKey, PropertyMap, Mask),
    /// Create or change. An incomplete key gets an id.
    Upsert(RawKey, PropertyMap, Mask),
    /// Remove (removing a missing key is not an error).
    Delete(RawKey),
}

impl Mutation {
    /// The key the mutation writes.
    pub fn key(&self) -> &RawKey {
        match self {
            Mutation::Insert(k, ..) | Mutation::Update(k, ..) | Mutation::Upsert(k, ..) => k,
            Mutation::Delete(k) => k,
        }
    }

    /// Which properties an insert, update or upsert sets; `None` for a delete.
    #[cfg(feature = "cloud")]
    pub(crate) fn mask(&self) -> Option<&Mask> {
        match self {
            Mutation::Insert(.., m) | Mutation::Update(.., m) | Mutation::Upsert(.., m) => Some(m),
            Mutation::Delete(_) => None,
        }
    }
}

/// The condition a mutation is applied under (the service's conflict detection): the entity
/// must still be as the caller read it, else the whole commit fails with
/// [`Error::Conflict`](crate::Error::Conflict) and writes nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Condition {
    /// The entity is at this version ([`Stamp::version`]; `0`: it does not exist).
    Version(u64),
    /// The entity was last written at this time ([`Stamp::update_time`]). The legacy
    /// Datastore emulator does not know this condition.
    UpdateTime(Timestamp),
}

/// One change of a commit: a mutation, and the condition it is applied under.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// What is written.
    pub mutation: Mutation,
    /// Applied only if this holds (none: always).
    pub condition: Option<Condition>,
}

impl From<Mutation> for Change {
    fn from(mutation: Mutation) -> Change {
        Change {
            mutation,
            condition: None,
        }
    }
}

/// What a commit did: each change's result, in order, and when it was applied.
#[derive(Debug, Clone, PartialEq)]
pub struct Committed {
    /// One result per change, in the order of the changes.
    pub results: Vec<ChangeResult>,
    /// When the commit was applied (where the backend says: not the legacy emulator).
    pub commit_time: Option<Timestamp>,
}

/// What one change did.
#[derive(Debug, Clone, PartialEq)]
pub struct ChangeResult {
    /// The entity's complete key (an allocated id filled in).
    pub key: RawKey,
    /// Its version and times after the change (after a delete: a version, no times).
    pub stamp: Stamp,
}

/// Which stored properties an insert, update or upsert sets (the service's
/// `Mutation.property_mask`). What a mask leaves out stays as it was stored, with its index
/// entries: that is how a struct that does not declare a property leaves it alone.
#[derive(Debug, Clone)]
pub enum Mask {
    /// Every property: the stored entity becomes exactly the written one.
    Whole,
    /// Only these paths, each a property name followed by names inside embedded entities.
    /// A path the written entity lacks is removed from the stored one.
    Paths(Vec<Vec<Cow<'static, str>>>),
    /// The properties an entity type writes ([`Mask::declared`]): its paths, named without
    /// building them for every write.
    Declared(&'static Schema),
}

impl Mask {
    /// The properties an entity type writes: every stored property it declares, and the
    /// former names of its properties (a write removes those).
    pub fn declared(schema: &'static Schema) -> Mask {
        Mask::Declared(schema)
    }

    /// The paths of a declared mask, each one name long.
    pub fn declared_names(schema: &'static Schema) -> impl Iterator<Item = Cow<'static, str>> {
        schema.properties.iter().flat_map(|property| {
            let flattened = property.embedded().filter(|_| property.flatten);
            // `#[property(flatten)]`: its `name.sub` properties.
            let subs = flattened.into_iter().flat_map(move |inner| {
                inner
                    .properties
                    .iter()
                    .map(move |sub| Cow::Owned(format!("{}.{}", property.name, sub.name)))
            });
            let own = flattened.is_none().then_some(Cow::Borrowed(property.name));
            own.into_iter()
                .chain(subs)
                .chain(property.aliases.iter().map(|&alias| Cow::Borrowed(alias)))
        })
    }

    /// The paths, `None` for the whole entity.
    pub fn paths(&self) -> Option<Cow<'_, [Vec<Cow<'static, str>>]>> {
        match self {
            Mask::Whole => None,
            Mask::Paths(paths) => Some(Cow::Borrowed(paths)),
            Mask::Declared(schema) => Some(Cow::Owned(
                Mask::declared_names(schema).map(|n| vec![n]).collect(),
            )),
        }
    }

    /// `self`, each path behind `name` (the mask of an entity embedded as property `name`).
    pub(crate) fn inside(&self, name: &'static str) -> Mask {
        match self.paths() {
            None => Mask::Paths(vec![vec![Cow::Borrowed(name)]]),
            Some(paths) => Mask::Paths(
                paths
                    .iter()
                    .map(|path| {
                        std::iter::once(Cow::Borrowed(name))
                            .chain(path.iter().cloned())
                            .collect()
                    })
                    .collect(),
            ),
        }
    }

    /// `self` and `other`'s paths.
    pub(crate) fn with(self, other: Mask) -> Mask {
        match (self.paths(), other.paths()) {
            (Some(a), Some(b)) => Mask::Paths(a.iter().chain(b.iter()).cloned().collect()),
            _ => Mask::Whole,
        }
    }

    /// `written` laid over `stored` as this mask says: the entity the write leaves.
    pub(crate) fn merge(&self, stored: Option<PropertyMap>, written: PropertyMap) -> PropertyMap {
        // Nothing stored (most writes): the written entity, without naming the mask's paths.
        let Some(mut stored) = stored else {
            return written;
        };
        match self.paths() {
            None => written,
            Some(paths) => {
                for path in paths.iter() {
                    overlay(&mut stored, &written, path);
                }
                stored
            }
        }
    }
}

/// Masks are equal when they keep the same paths.
impl PartialEq for Mask {
    fn eq(&self, other: &Mask) -> bool {
        self.paths() == other.paths()
    }
}

impl Eq for Mask {}

/// Sets `path` of `stored` to what `written` holds there (removes it when `written` has none).
fn overlay(stored: &mut PropertyMap, written: &PropertyMap, path: &[Cow<'static, str>]) {
    let Some((name, rest)) = path.split_first() else {
        return;
    };
    let name = name.as_ref();
    let source = written.get(name);
    if rest.is_empty() {
        match source {
            Some(property) => {
                stored.insert(name, property.clone());
            }
            None => {
                stored.remove(name);
            }
        }
        return;
    }
    let empty = PropertyMap::new();
    let inner_written = match source.map(|p| &p.value) {
        Some(Value::Entity(inner)) => inner,
        _ => &empty,
    };
    let (mut inner, excluded) = match stored.remove(name) {
        Some(Property { value, excluded }) if matches!(value, Value::Entity(_)) => {
            (value.into_entity().unwrap_or_default(), excluded)
        }
        // Nothing to remove a path from, and nothing to write.
        other if source.is_none() => {
            if let Some(other) = other {
                stored.insert(name, other);
            }
            return;
        }
        _ => (PropertyMap::new(), false),
    };
    overlay(&mut inner, inner_written, rest);
    let excluded = source.map_or(excluded, |p| p.excluded);
    stored.insert(
        name,
        Property {
            value: Value::Entity(inner),
            excluded,
        },
    );
}
