//! Keys: validated ids, untyped [`RawKey`]s, and typed [`Key<E>`]s.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::marker::PhantomData;

use crate::error::Error;
use crate::model::name::{KeyName, NameRole, validate};

/// The most path elements a key may have (the entity and its ancestors).
pub const MAX_KEY_DEPTH: usize = 100;

/// A numeric key id: always in `1..=i64::MAX`, never zero or negative (R-K2).
///
/// ```
/// use datastore_entity::KeyId;
/// assert_eq!(KeyId::new(7).unwrap().get(), 7);
/// assert!(KeyId::new(0).is_err());
/// assert!(KeyId::new(-1).is_err());
/// ```
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KeyId(std::num::NonZeroI64);

impl KeyId {
    /// Validates an id.
    pub const fn new(id: i64) -> Result<KeyId, Error> {
        match std::num::NonZeroI64::new(id) {
            Some(id) if id.get() > 0 => Ok(KeyId(id)),
            _ => Err(Error::InvalidId { value: id as i128 }),
        }
    }

    /// An id as another client stored it: any id but 0, negative ones included (the service
    /// and its emulators accept them, discouraged). The crate's own writes check it again.
    pub fn stored(id: i64) -> Result<KeyId, Error> {
        match std::num::NonZeroI64::new(id) {
            Some(id) => Ok(KeyId(id)),
            None => Err(Error::InvalidId { value: 0 }),
        }
    }

    /// An id known to be positive (`key_id!` checks it during constant evaluation).
    pub const fn positive(id: i64) -> KeyId {
        match std::num::NonZeroI64::new(id) {
            Some(id) => KeyId(id),
            None => panic!("R-K2: numeric ids must be between 1 and i64::MAX"),
        }
    }

    /// Validates an unsigned id (it must also fit in an `i64`).
    pub fn from_u64(id: u64) -> Result<KeyId, Error> {
        i64::try_from(id)
            .map_err(|_| Error::InvalidId {
                value: i128::from(id),
            })
            .and_then(KeyId::new)
    }

    /// The id.
    pub const fn get(self) -> i64 {
        self.0.get()
    }
}

impl fmt::Debug for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.get(), f)
    }
}

impl fmt::Display for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.get(), f)
    }
}

impl TryFrom<i64> for KeyId {
    type Error = Error;
    fn try_from(id: i64) -> Result<Self, Error> {
        KeyId::new(id)
    }
}

/// The last part of a complete key: a numeric id or a custom name.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum IdOrName {
    /// A numeric id.
    Id(KeyId),
    /// A custom name.
    Name(KeyName),
}

impl From<KeyId> for IdOrName {
    fn from(id: KeyId) -> Self {
        IdOrName::Id(id)
    }
}

impl From<KeyName> for IdOrName {
    fn from(name: KeyName) -> Self {
        IdOrName::Name(name)
    }
}

impl Ord for IdOrName {
    /// The service's order: every id before every name; ids by value, names by bytes.
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (IdOrName::Id(a), IdOrName::Id(b)) => a.cmp(b),
            (IdOrName::Id(_), IdOrName::Name(_)) => Ordering::Less,
            (IdOrName::Name(_), IdOrName::Id(_)) => Ordering::Greater,
            (IdOrName::Name(a), IdOrName::Name(b)) => {
                a.as_str().as_bytes().cmp(b.as_str().as_bytes())
            }
        }
    }
}

impl PartialOrd for IdOrName {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// One element of a key's path: a kind and, unless the key is incomplete, an id or name.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PathElement {
    /// Borrowed for the kinds the derive checked (a typed key's kind costs no allocation).
    kind: Cow<'static, str>,
    id_or_name: Option<IdOrName>,
}

impl PathElement {
    /// Validates the kind (R-N2, R-N5, R-N7).
    pub fn new(kind: impl Into<String>, id_or_name: Option<IdOrName>) -> Result<Self, Error> {
        let kind = kind.into();
        validate(NameRole::Kind, &kind)?;
        Ok(PathElement {
            kind: Cow::Owned(kind),
            id_or_name,
        })
    }

    /// An element as another client stored it, its kind unchecked (reads are lenient).
    pub fn stored(kind: String, id_or_name: Option<IdOrName>) -> Self {
        PathElement {
            kind: Cow::Owned(kind),
            id_or_name,
        }
    }

    /// Makes this element `kind` with `id_or_name`, keeping its kind's allocation when the
    /// kind is the one it has (keys read one after another: [`crate::format::keycode::Keys`]).
    pub(crate) fn reuse(&mut self, kind: &str, id_or_name: Option<IdOrName>) {
        if self.kind != kind {
            self.kind = Cow::Owned(kind.to_owned());
        }
        self.id_or_name = id_or_name;
    }

    /// For kinds checked at compile time by the derive.
    pub fn trusted(kind: &'static str, id_or_name: Option<IdOrName>) -> Self {
        debug_assert!(validate(NameRole::Kind, kind).is_ok());
        PathElement {
            kind: Cow::Borrowed(kind),
            id_or_name,
        }
    }

    /// The kind.
    pub fn kind(&self) -> &str {
        &self.kind
    }

    /// The id or name; `None` for the last element of an incomplete key.
    pub fn id_or_name(&self) -> Option<&IdOrName> {
        self.id_or_name.as_ref()
    }
}

impl fmt::Debug for PathElement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.id_or_name {
            Some(IdOrName::Id(id)) => write!(f, "{}:{id}", self.kind),
            Some(IdOrName::Name(name)) => write!(f, "{}:{name:?}", self.kind),
            None => write!(f, "{}:?", self.kind),
        }
    }
}

/// Which project, database and namespace a key belongs to: its partition. Empty fields are
/// the default database and the default namespace.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Debug)]
pub struct PartitionId {
    /// The Google Cloud project id (R-N8: no sensitive data here).
    pub project_id: String,
    /// The database id; empty is the default database.
    pub database_id: String,
    /// The namespace; empty is the default namespace.
    pub namespace: String,
}

impl fmt::Display for PartitionId {
    /// `namespace "a" of database "b"`, the defaults spelled out.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.namespace.as_str() {
            "" => f.write_str("the default namespace")?,
            namespace => write!(f, "namespace {namespace:?}")?,
        }
        match self.database_id.as_str() {
            "" => f.write_str(" of the default database"),
            database => write!(f, " of database {database:?}"),
        }
    }
}

/// An untyped key: a path of up to 100 `(kind, id | name)` elements, ancestors first (only
/// the last may lack its id or name: an incomplete key), and the partition it belongs to.
///
/// A key built in code (by the generated builders) has no partition until a `Db` uses it,
/// and then takes that handle's; a key a `Db` returns carries its partition, and a handle of
/// another partition refuses it ([`Error::WrongPartition`]), so one tenant's key never
/// reads another tenant's entity.
///
/// Two keys are equal (and hash alike) when their paths, databases and namespaces are: a key
/// without a partition counts as the default database and namespace, so a key built in code
/// equals the same key a `Db` of the default namespace returns, and keys of different
/// namespaces are never equal. (The project is not compared: a handle reads one project.)
#[derive(Clone)]
pub struct RawKey {
    partition: Option<PartitionId>,
    path: Vec<PathElement>,
}

impl RawKey {
    /// Whether this crate may write an entity at this key: every kind, name and id follows
    /// the rules for new keys (R-K2, R-N2, R-N5…R-N7). A key read from data other clients
    /// wrote may not (reads are lenient); writing under it is refused.
    pub fn check_writable(&self) -> Result<(), Error> {
        for element in &self.path {
            validate(NameRole::Kind, &element.kind)?;
            match &element.id_or_name {
                Some(IdOrName::Id(id)) => {
                    KeyId::new(id.get())?;
                }
                Some(IdOrName::Name(name)) => validate(NameRole::KeyName, name.as_str())?,
                None => {}
            }
        }
        Ok(())
    }

    /// Builds a key from its path, checking depth and that only the last element is
    /// incomplete; `None` leaves it without a partition.
    pub fn new(partition: Option<PartitionId>, path: Vec<PathElement>) -> Result<RawKey, Error> {
        let key = RawKey { partition, path };
        key.check_shape()?;
        Ok(key)
    }

    /// What [`RawKey::new`] checks: the path's depth, that only its last element is
    /// incomplete, and the namespace.
    pub(crate) fn check_shape(&self) -> Result<(), Error> {
        if self.path.is_empty() || self.path.len() > MAX_KEY_DEPTH {
            return Err(self.invalid(format!(
                "a key path has 1 to {MAX_KEY_DEPTH} elements, this one has {}",
                self.path.len()
            )));
        }
        if self.path[..self.path.len() - 1]
            .iter()
            .any(|e| e.id_or_name.is_none())
        {
            return Err(self.invalid(
                "an ancestor has no id or name; put the parent first and use the key it returns"
                    .into(),
            ));
        }
        if let Some(partition) = &self.partition
            && !partition.namespace.is_empty()
        {
            validate(NameRole::Namespace, &partition.namespace)?;
        }
        Ok(())
    }

    /// A key of `partition` whose path is still to be read in place
    /// ([`crate::format::keycode::Keys`]); not a key until it is.
    pub(crate) fn unread(partition: PartitionId) -> RawKey {
        RawKey {
            partition: Some(partition),
            path: Vec::new(),
        }
    }

    /// The path, to be read in place ([`crate::format::keycode::Keys`]).
    pub(crate) fn path_mut(&mut self) -> &mut Vec<PathElement> {
        &mut self.path
    }

    /// A root key (no parent) or a child of `parent`, of a kind already validated.
    pub fn child(
        parent: Option<&RawKey>,
        kind: &'static str,
        id_or_name: Option<IdOrName>,
    ) -> RawKey {
        let element = PathElement::trusted(kind, id_or_name);
        match parent {
            Some(parent) => {
                let mut path = Vec::with_capacity(parent.path.len() + 1);
                path.extend_from_slice(&parent.path);
                path.push(element);
                RawKey {
                    partition: parent.partition.clone(),
                    path,
                }
            }
            None => RawKey {
                partition: None,
                path: vec![element],
            },
        }
    }

    /// The partition, `None` for a key no `Db` has used yet.
    pub fn partition(&self) -> Option<&PartitionId> {
        self.partition.as_ref()
    }

    /// The namespace; `""` for the default namespace, and for a key without a partition.
    pub fn namespace(&self) -> &str {
        self.partition.as_ref().map_or("", |p| p.namespace.as_str())
    }

    /// The database; `""` for the default database, and for a key without a partition.
    pub fn database(&self) -> &str {
        self.partition
            .as_ref()
            .map_or("", |p| p.database_id.as_str())
    }

    /// The same key, in `partition`.
    pub fn with_partition(mut self, partition: PartitionId) -> RawKey {
        self.partition = Some(partition);
        self
    }

    /// The same key, without a partition (as the generated builders make them).
    pub fn without_partition(mut self) -> RawKey {
        self.partition = None;
        self
    }

    /// The path, root first.
    pub fn path(&self) -> &[PathElement] {
        &self.path
    }

    fn last(&self) -> &PathElement {
        // Every constructor guarantees at least one element.
        &self.path[self.path.len() - 1]
    }

    /// The kind of the entity (the last path element's kind).
    pub fn kind(&self) -> &str {
        &self.last().kind
    }

    /// The id or name; `None` when the key is incomplete.
    pub fn id_or_name(&self) -> Option<&IdOrName> {
        self.last().id_or_name.as_ref()
    }

    /// The numeric id, if the key has one.
    pub fn id(&self) -> Option<KeyId> {
        match self.id_or_name() {
            Some(IdOrName::Id(id)) => Some(*id),
            _ => None,
        }
    }

    /// The custom name, if the key has one.
    pub fn name(&self) -> Option<&str> {
        match self.id_or_name() {
            Some(IdOrName::Name(name)) => Some(name.as_str()),
            _ => None,
        }
    }

    /// Whether the key has an id or a name.
    pub fn is_complete(&self) -> bool {
        self.id_or_name().is_some()
    }

    /// The parent key, if any.
    pub fn parent(&self) -> Option<RawKey> {
        (self.path.len() > 1).then(|| RawKey {
            partition: self.partition.clone(),
            path: self.path[..self.path.len() - 1].to_vec(),
        })
    }

    /// The root of the key's entity group.
    pub fn root(&self) -> RawKey {
        RawKey {
            partition: self.partition.clone(),
            path: vec![self.path[0].clone()],
        }
    }

    /// Whether `ancestor` is this key or one of its ancestors (same partition, path prefix).
    pub fn has_ancestor(&self, ancestor: &RawKey) -> bool {
        self.partition == ancestor.partition && self.path.starts_with(&ancestor.path)
    }

    /// This key, completed with `id_or_name`.
    pub fn completed(mut self, id_or_name: IdOrName) -> RawKey {
        let last = self.path.len() - 1;
        self.path[last].id_or_name = Some(id_or_name);
        self
    }

    pub fn invalid(&self, reason: String) -> Error {
        Error::InvalidKey {
            key: format!("{self:?}"),
            reason,
        }
    }
}

impl RawKey {
    /// What identifies the key for equality, hashing and order: database, namespace, path.
    fn identity(&self) -> (&str, &str, &[PathElement]) {
        (self.database(), self.namespace(), &self.path)
    }
}

impl PartialEq for RawKey {
    fn eq(&self, other: &RawKey) -> bool {
        self.identity() == other.identity()
    }
}

impl Eq for RawKey {}

impl Hash for RawKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.identity().hash(state);
    }
}

impl PartialOrd for RawKey {
    fn partial_cmp(&self, other: &RawKey) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// By database, then namespace, then path (the service's order of keys within a namespace:
/// element by element, a parent before its children, ids before names).
impl Ord for RawKey {
    fn cmp(&self, other: &RawKey) -> Ordering {
        self.identity().cmp(&other.identity())
    }
}

impl fmt::Debug for RawKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // A key with a partition shows it in brackets (`[]` for the default namespace,
        // `[database/namespace]` outside the default database); one without shows none.
        if let Some(partition) = &self.partition {
            match partition.database_id.as_str() {
                "" => write!(f, "[{}]", partition.namespace)?,
                database => write!(f, "[{database}/{}]", partition.namespace)?,
            }
        }
        for (i, element) in self.path.iter().enumerate() {
            if i > 0 {
                f.write_str("/")?;
            }
            write!(f, "{element:?}")?;
        }
        Ok(())
    }
}

/// The name of the key as a property, in filters and orders (`__key__`); and, in an embedded
/// entity's properties, the property that holds the entity's own key where it has one.
///
/// The service's entity values may carry a key (NDB's `LocalStructuredProperty(keep_keys=True)`,
/// an entity Google's clients embed whole). Read from the service, that key is this property of
/// the [`Value::Entity`](crate::model::value::Value::Entity), excluded from indexes; a
/// [`Value::Key`](crate::model::value::Value::Key) under this name in an embedded entity is sent as the
/// entity's key. A rewrite loses nothing.
///
/// ```
/// use datastore_entity::{KEY_PROPERTY, PathElement, Property, PropertyMap, RawKey, Value};
/// let owner = RawKey::new(None, vec![PathElement::new("Person", None)?])?;
/// let mut home = PropertyMap::new();
/// home.insert("city", Property::indexed(Value::String("Lyon".into())));
/// home.insert(KEY_PROPERTY, Property::excluded(Value::Key(owner)));
/// let embedded = Value::Entity(home);
/// # let _ = embedded;
/// # Ok::<(), datastore_entity::Error>(())
/// ```
pub const KEY_PROPERTY: &str = "__key__";

/// The key of an entity of type `E`: its kind is always `E::KIND` (the methods that need the
/// kind, [`Key::from_raw`] and [`Key::new`], are in `entity.rs`, beside [`Entity`](crate::model::entity::Entity)).
///
/// Built with the derive's key builders (`Account::key(name)`, `Post::key(&parent, id)`)
/// or returned by the `Db`.
pub struct Key<E> {
    raw: RawKey,
    entity: PhantomData<fn() -> E>,
}

impl<E> Key<E> {
    /// A raw key already known to be of kind `E::KIND`.
    pub fn unchecked(raw: RawKey) -> Key<E> {
        Key {
            raw,
            entity: PhantomData,
        }
    }
}

impl<E> Key<E> {
    /// The kind.
    pub fn kind(&self) -> &str {
        self.raw.kind()
    }

    /// The numeric id, if the key has one.
    pub fn id(&self) -> Option<KeyId> {
        self.raw.id()
    }

    /// The custom name, if the key has one.
    pub fn name(&self) -> Option<&str> {
        self.raw.name()
    }

    /// The parent key, if any.
    pub fn parent(&self) -> Option<RawKey> {
        self.raw.parent()
    }

    /// The namespace; `""` for the default one, and for a key no `Db` has used yet.
    pub fn namespace(&self) -> &str {
        self.raw.namespace()
    }

    /// The partition, `None` for a key no `Db` has used yet.
    pub fn partition(&self) -> Option<&PartitionId> {
        self.raw.partition()
    }

    /// Whether the key has an id or a name.
    pub fn is_complete(&self) -> bool {
        self.raw.is_complete()
    }

    /// The untyped key.
    pub fn raw(&self) -> &RawKey {
        &self.raw
    }

    /// The untyped key, by value.
    pub fn into_raw(self) -> RawKey {
        self.raw
    }
}

impl<E> Clone for Key<E> {
    fn clone(&self) -> Self {
        Key {
            raw: self.raw.clone(),
            entity: PhantomData,
        }
    }
}

impl<E> PartialEq for Key<E> {
    fn eq(&self, other: &Self) -> bool {
        self.raw == other.raw
    }
}

impl<E> Eq for Key<E> {}

impl<E> Hash for Key<E> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.raw.hash(state);
    }
}

impl<E> PartialOrd for Key<E> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<E> Ord for Key<E> {
    fn cmp(&self, other: &Self) -> Ordering {
        self.raw.cmp(&other.raw)
    }
}

impl<E> fmt::Debug for Key<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Key({:?})", self.raw)
    }
}

impl<E> From<Key<E>> for RawKey {
    fn from(key: Key<E>) -> RawKey {
        key.raw
    }
}
