//! [`Db`]: the typed handle users work with, built once above any [`Backend`].
//!
//! The handle (`mod.rs`) is a [`Scope`] — a backend bound to a partition — and a
//! retry policy. A write goes through `write.rs` (checks, companions, one commit), a read
//! through `read.rs` (one lookup with companions); `query.rs` holds the typed queries, `txn.rs`
//! the transactions, `cloud.rs` how a handle on Google Cloud is built.

pub(crate) mod caches;
#[cfg(feature = "cloud")]
pub(crate) mod cloud;
pub(crate) mod metadata;
pub(crate) mod nearest;
pub(crate) mod partial;
pub(crate) mod query;
pub(crate) mod read;
pub(crate) mod scope;
pub(crate) mod transform;
pub(crate) mod txn;
pub(crate) mod versioned;
pub(crate) mod write;

use std::fmt;
use std::sync::Arc;

use crate::backend::Backend;
use crate::backend::embedded::Embedded;
use crate::backend::retry::RetryPolicy;
use crate::watch::{Diagnostics, Finding, Watch};
use datastore_entity_core::error::Error;
use datastore_entity_core::format::companion::companion_key;
use datastore_entity_core::model::entity::Entity;
use datastore_entity_core::model::key::{Key, PartitionId, RawKey};
use datastore_entity_core::model::name::{NameRole, validate};
use datastore_entity_core::model::value::PropertyMap;

use self::query::Query;
use self::scope::Scope;
use self::write::{Op, Write};

/// A handle on a store: cheap to clone, `Send + Sync`; clones share one store.
///
/// A handle reads and writes one partition (namespace): keys built in code take it, keys a
/// handle returns carry it, and a key of another partition is refused (R-N8 tenants stay apart).
///
/// ```
/// # use datastore_entity::prelude::*;
/// #[derive(Entity, Debug, PartialEq)]
/// struct Account {
///     #[key]
///     name: KeyName,
///     email: String,
/// }
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let db = Db::in_memory();
/// let ann = Account { name: KeyName::new("ann")?, email: "ann@example.com".into() };
/// let key = db.put(&ann).await?;
/// assert_eq!(db.get(&key).await?, Some(ann));
/// # Ok::<(), Error>(())
/// # }).unwrap();
/// ```
#[derive(Clone)]
pub struct Db {
    pub(crate) scope: Scope,
    pub(crate) retry: RetryPolicy,
}

impl fmt::Debug for Db {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Db")
            .field("namespace", &self.scope.partition.namespace)
            .field("retry", &self.retry)
            .finish_non_exhaustive()
    }
}

/// What `allocate_ids` takes as the parent of the new keys: `()` for root entities,
/// or a `&Key<P>` / `&RawKey` to allocate keys under.
pub trait ParentKey {
    /// The parent key, if any.
    fn parent_key(&self) -> Option<&RawKey>;
}

impl ParentKey for () {
    fn parent_key(&self) -> Option<&RawKey> {
        None
    }
}

impl<P> ParentKey for &Key<P> {
    fn parent_key(&self) -> Option<&RawKey> {
        Some(self.raw())
    }
}

impl ParentKey for &RawKey {
    fn parent_key(&self) -> Option<&RawKey> {
        Some(self)
    }
}

impl Db {
    /// The embedded engine, in memory: nothing to install, nothing to configure.
    pub fn in_memory() -> Db {
        Db::with_backend(Arc::new(Embedded::new()))
    }

    /// The embedded engine, persisted in the `redb` file at `path` (created if missing): one
    /// file, ACID. Every write acknowledged before a crash (even `kill -9`) is there after
    /// reopening; cursors stay valid across reopening. One process (and one `Db`) at a time
    /// may hold the file: a second `open` is [`Error::Storage`], never a corrupting share —
    /// clone the `Db` to share it.
    ///
    /// ```
    /// # use datastore_entity::prelude::*;
    /// #[derive(Entity, Debug, PartialEq)]
    /// struct Note {
    ///     #[key]
    ///     id: KeyId,
    ///     text: String,
    /// }
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// # let dir = std::env::temp_dir().join(format!("doc-open-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// let path = dir.join("notes.redb");
    /// let note = Note { id: KeyId::new(1)?, text: "kept".into() };
    /// {
    ///     let db = Db::open(&path)?;
    ///     db.put(&note).await?;
    /// }
    /// let db = Db::open(&path)?; // reopened: the note is there
    /// assert_eq!(db.get(&Note::key(KeyId::new(1)?)).await?, Some(note));
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), Error>(())
    /// # }).unwrap();
    /// ```
    pub fn open(path: impl AsRef<std::path::Path>) -> Result<Db, Error> {
        Ok(Db::with_backend(Arc::new(Embedded::open(path)?)))
    }

    /// A handle on any backend, in its default namespace.
    pub fn with_backend(backend: Arc<dyn Backend>) -> Db {
        Db::with_backend_in(backend, PartitionId::default())
    }

    /// A handle on any backend, reading and writing `partition`.
    pub fn with_backend_in(backend: Arc<dyn Backend>, partition: PartitionId) -> Db {
        Db {
            scope: Scope::new(backend, partition, Arc::new(Watch::new(Diagnostics::new()))),
            retry: RetryPolicy::default(),
        }
    }

    /// The same store, in namespace `namespace` (validated: `[0-9A-Za-z._-]{0,100}`, not
    /// `__.*__`). Namespaces are isolated from each other; `""` is the default namespace.
    pub fn namespace(&self, namespace: &str) -> Result<Db, Error> {
        validate(NameRole::Namespace, namespace)?;
        let mut db = self.clone();
        db.scope = self.scope.in_namespace(namespace);
        Ok(db)
    }

    /// The same store, its writes watched with `diagnostics` (thresholds, clock) from now on,
    /// by this handle and its clones ([`diagnostics`](crate::Diagnostics)). Every handle is
    /// watched with the defaults from the start.
    pub fn watch(mut self, diagnostics: Diagnostics) -> Db {
        self.scope.watch = Arc::new(Watch::new(diagnostics));
        self
    }

    /// What the scale rules no type can check (`R-K4`, `R-E2`, `R-S4`, `R-S6`) have found in
    /// the writes of this handle and its clones so far, oldest first; each is also logged once
    /// through `tracing` at `warn` ([`diagnostics`](crate::Diagnostics)).
    pub fn diagnostics(&self) -> Vec<Finding> {
        self.scope.watch.findings()
    }

    /// The same store, with another retry policy for [`transaction`](Db::transaction).
    pub fn with_retry(mut self, retry: RetryPolicy) -> Db {
        self.retry = retry;
        self
    }

    /// The partition (project, database, namespace) this handle reads and writes.
    pub fn partition(&self) -> &PartitionId {
        &self.scope.partition
    }

    /// `key` in this handle's partition: a key without a partition (from a generated
    /// builder) takes the handle's; a key of another partition is [`Error::WrongPartition`].
    /// A built key already equals the same key of the default namespace; in another namespace,
    /// this is how to compare a built key with the keys the handle returns.
    ///
    /// ```
    /// # use datastore_entity::prelude::*;
    /// #[derive(Entity, Debug, PartialEq)]
    /// struct Account {
    ///     #[key]
    ///     name: KeyName,
    /// }
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let tenant = Db::in_memory().namespace("tenant-a")?;
    /// let key = tenant.put(&Account { name: KeyName::new("ann")? }).await?;
    /// assert_eq!(key.namespace(), "tenant-a");
    /// assert_eq!(key, tenant.bind(&Account::key(KeyName::new("ann")?))?);
    /// # Ok::<(), Error>(())
    /// # }).unwrap();
    /// ```
    pub fn bind<E>(&self, key: &Key<E>) -> Result<Key<E>, Error> {
        self.scope.outgoing(key.raw()).map(Key::unchecked)
    }

    /// The backend, for the service's untyped calls (`Db` makes every typed one).
    pub fn backend(&self) -> &dyn Backend {
        &*self.scope.backend
    }

    /// A user's key as the backend sees it (see [`Scope::outgoing`]).
    pub(crate) fn outgoing(&self, key: &RawKey) -> Result<RawKey, Error> {
        self.scope.outgoing(key)
    }

    async fn commit_typed<E: Entity>(&self, writes: Vec<Write>) -> Result<Vec<Key<E>>, Error> {
        let keys = write::commit(&self.scope, writes, None).await?;
        keys.into_iter().map(Key::from_raw).collect()
    }

    async fn commit_one<E: Entity>(&self, write: Write) -> Result<Key<E>, Error> {
        let mut keys = self.commit_typed(vec![write]).await?;
        keys.pop().ok_or(Error::Internal {
            invariant: "the backend returns a key for each write",
        })
    }

    /// Writes `entity`, creating it or setting the properties its type declares; returns its
    /// complete key (an id is allocated for an `Option<KeyId>` key holding `None`). Stored
    /// properties the type does not declare (another program's, a newer version's) are left
    /// as they were, with their index entries: every write of an entity type does that
    /// ([`replace`](Db::replace) is the one that removes them). A `#[replicated]` entity is
    /// written with its replicas in the same commit; `#[sharded]` counters are not written
    /// (use the generated `increment_*`).
    pub async fn put<E: Entity>(&self, entity: &E) -> Result<Key<E>, Error> {
        self.commit_one(Write::entity(&self.scope, entity, Op::Upsert)?)
            .await
    }

    /// Writes `entity` as exactly the properties its type declares, creating or replacing
    /// it: stored properties the type does not declare are **removed** (what [`put`](Db::put)
    /// keeps). For a deliberate cleanup, once no program reads them any more.
    ///
    /// ```
    /// # use datastore_entity::prelude::*;
    /// #[derive(Entity, Debug, PartialEq)]
    /// struct Member { #[key] id: KeyName, email: String }
    ///
    /// #[derive(Entity)]
    /// #[entity(kind = "Member")]
    /// struct MemberV2 { #[key] id: KeyName, email: String, phone: Option<String> }
    ///
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let db = Db::in_memory();
    /// let id = KeyName::new("ann")?;
    /// db.put(&MemberV2 { id: id.clone(), email: "a@x".into(), phone: Some("555".into()) }).await?;
    /// db.put(&Member { id: id.clone(), email: "b@x".into() }).await?; // phone kept
    /// assert_eq!(db.get(&MemberV2::key(id.clone())).await?.unwrap().phone.as_deref(), Some("555"));
    /// db.replace(&Member { id: id.clone(), email: "c@x".into() }).await?; // phone removed
    /// assert_eq!(db.get(&MemberV2::key(id)).await?.unwrap().phone, None);
    /// # Ok::<(), Error>(())
    /// # }).unwrap();
    /// ```
    pub async fn replace<E: Entity>(&self, entity: &E) -> Result<Key<E>, Error> {
        self.commit_one(Write::entity(&self.scope, entity, Op::Upsert)?.replacing())
            .await
    }

    /// Writes all `entities` in one commit (R-A1): all or none. The same key twice is
    /// [`Error::DuplicateKey`] and nothing is sent (R-A4). Keys come back in input order.
    pub async fn put_many<E: Entity>(&self, entities: &[E]) -> Result<Vec<Key<E>>, Error> {
        let writes = entities
            .iter()
            .map(|e| Write::entity(&self.scope, e, Op::Upsert))
            .collect::<Result<Vec<_>, _>>()?;
        self.commit_typed(writes).await
    }

    /// Writes `entities` in as many commits as the service's limit of 10 MiB per commit
    /// needs ([`MAX_COMMIT_BYTES`](crate::MAX_COMMIT_BYTES), replicas included). **Not
    /// atomic**: each commit is all or nothing, but a failure leaves the earlier commits
    /// written, reported as [`Error::PartiallyWritten`] with how many entities (from the
    /// start) were written. Use [`put_many`](Db::put_many) when the entities must be written
    /// together.
    pub async fn put_chunked<E: Entity>(&self, entities: &[E]) -> Result<Vec<Key<E>>, Error> {
        let writes = entities
            .iter()
            .map(|e| Write::entity(&self.scope, e, Op::Upsert))
            .collect::<Result<Vec<_>, _>>()?;
        let runs = write::runs(&writes, usize::MAX);
        let mut writes = writes.into_iter();
        let mut keys = Vec::with_capacity(entities.len());
        for run in runs {
            let part = writes.by_ref().take(run.len()).collect();
            match self.commit_typed(part).await {
                Ok(written) => keys.extend(written),
                Err(error) if keys.is_empty() => return Err(error),
                Err(error) => {
                    return Err(Error::PartiallyWritten {
                        written: keys.len(),
                        source: Box::new(error),
                    });
                }
            }
        }
        Ok(keys)
    }

    /// Creates `entity`; [`Error::AlreadyExists`] if its key is taken.
    pub async fn insert<E: Entity>(&self, entity: &E) -> Result<Key<E>, Error> {
        self.commit_one(Write::entity(&self.scope, entity, Op::Insert)?)
            .await
    }

    /// Sets the properties `entity`'s type declares, leaving the others as stored (as
    /// [`put`](Db::put)); [`Error::NotFound`] if it does not exist.
    pub async fn update<E: Entity>(&self, entity: &E) -> Result<(), Error> {
        self.commit_one::<E>(Write::entity(&self.scope, entity, Op::Update)?)
            .await
            .map(drop)
    }

    /// Reads one entity by key (R-K5); `None` if it does not exist. `#[sharded]` counters
    /// hold their totals, read in the same lookup; a `#[replicated]` entity is read from one
    /// of its replicas, chosen at random.
    pub async fn get<E: Entity>(&self, key: &Key<E>) -> Result<Option<E>, Error> {
        read::load_one(&self.scope, key, None).await
    }

    /// Reads many entities in one lookup (R-A1): one slot per key, in the order of `keys`.
    pub async fn get_many<E: Entity>(&self, keys: &[Key<E>]) -> Result<Vec<Option<E>>, Error> {
        read::load(&self.scope, keys, None).await
    }

    /// Deletes one entity (deleting a missing entity is not an error), with its replicas and
    /// counter shards, in one commit.
    pub async fn delete<E: Entity>(&self, key: &Key<E>) -> Result<(), Error> {
        self.delete_many(std::slice::from_ref(key)).await
    }

    /// Deletes many entities in one commit (R-A1); the same key twice is [`Error::DuplicateKey`] (R-A4).
    ///
    /// The shards of `#[sharded]` counters go with them in that commit, unless they are more
    /// than one commit holds (10 MiB of keys, with the entities and their replicas): then the
    /// shards are deleted first, in as many commits as they need, and the entities last, so
    /// a failure on the way leaves entities that can be deleted again.
    pub async fn delete_many<E: Entity>(&self, keys: &[Key<E>]) -> Result<(), Error> {
        let writes: Vec<Write> = keys
            .iter()
            .map(|k| Write::delete(&self.scope, k))
            .collect::<Result<_, _>>()?;
        let schema = E::SCHEMA;
        let companions: Vec<Write> = writes
            .iter()
            .flat_map(|w| {
                schema.counters.iter().flat_map(|c| {
                    (0..c.shards).map(|s| {
                        let key = companion_key(&w.key, c.kind, s);
                        Write::raw(Op::Delete, key, PropertyMap::new())
                    })
                })
            })
            .collect();
        if write::runs(writes.iter().chain(&companions), usize::MAX).len() <= 1 {
            return self.commit_typed::<E>(writes).await.map(drop);
        }
        let runs = write::runs(&companions, usize::MAX);
        let mut companions = companions.into_iter();
        for run in runs {
            let chunk: Vec<Write> = companions.by_ref().take(run.len()).collect();
            write::commit(&self.scope, chunk, None).await?;
        }
        let owners = writes.into_iter().map(Write::without_shards).collect();
        self.commit_typed::<E>(owners).await.map(drop)
    }

    /// A query on kind `E`.
    pub fn query<E: Entity>(&self) -> Query<E> {
        Query::new(self.scope.clone(), None)
    }

    /// `count` new complete keys of kind `E` under `parent` (`()` for root entities), with
    /// ids from the backend's scattered allocator (R-K1).
    pub async fn allocate_ids<E: Entity>(
        &self,
        parent: impl ParentKey,
        count: usize,
    ) -> Result<Vec<Key<E>>, Error> {
        let template = self.outgoing(Key::<E>::new(parent.parent_key(), None).raw())?;
        let keys = self
            .scope
            .backend
            .allocate_ids(vec![template; count])
            .await?;
        keys.into_iter().map(Key::from_raw).collect()
    }

    /// Reserves the ids of `keys`, so the allocator never hands them out: do this before
    /// writing entities with ids you chose yourself (R-K3).
    pub async fn reserve_ids<E: Entity>(&self, keys: &[Key<E>]) -> Result<(), Error> {
        let keys = keys
            .iter()
            .map(|k| self.outgoing(k.raw()))
            .collect::<Result<_, _>>()?;
        self.scope.backend.reserve_ids(keys).await
    }
}
