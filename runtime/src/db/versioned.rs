//! Versions and times: entities read with the version they are at ([`Versioned`]), writes that
//! report the version they made ([`Written`]), and writes applied only if the entity is still
//! at the version the caller read (optimistic concurrency in one round trip, without a
//! transaction).

use crate::backend::Committed;
use datastore_entity_core::error::Error;
use datastore_entity_core::model::entity::Entity;
use datastore_entity_core::model::key::Key;
use datastore_entity_core::model::scalar::Timestamp;
use datastore_entity_core::query::results::Page;

use super::Db;
use super::query::{Query, next_cursor};
use super::read::stamped;
use super::write::{self, Op, Write};

/// An entity with the version it was read at, and its times.
///
/// The version changes with every write of the entity and only grows; hand it back to
/// [`Db::put_if_version`] or [`Db::delete_if_version`] to write only if nobody wrote since.
/// (A `#[sharded]` counter's increments write its shards, not the entity: they do not change
/// its version.)
#[derive(Debug, Clone, PartialEq)]
pub struct Versioned<E> {
    /// The entity.
    pub entity: E,
    /// Its version.
    pub version: u64,
    /// When it was created (`None` where the backend does not say: the legacy Datastore
    /// emulator).
    pub create_time: Option<Timestamp>,
    /// When it was last written (`None` where the backend does not say).
    pub update_time: Option<Timestamp>,
}

/// What a write did: the entity's complete key and the version it is at now.
#[derive(Debug, Clone, PartialEq)]
pub struct Written<E> {
    /// The complete key (an allocated id filled in).
    pub key: Key<E>,
    /// The entity's version after the write (after a delete, the delete's).
    pub version: u64,
    /// When it was written (`None` after a delete, and where the backend does not say).
    pub update_time: Option<Timestamp>,
    /// When the commit was applied (`None` where the backend does not say).
    pub commit_time: Option<Timestamp>,
}

impl Db {
    /// Reads one entity by key with its version and times; `None` if it does not exist.
    /// What [`get`](Db::get) reads, from the entity itself (never a replica), with the
    /// version to write it back under with [`put_if_version`](Db::put_if_version).
    ///
    /// ```
    /// # use datastore_entity::prelude::*;
    /// #[derive(Entity, Debug, Clone, PartialEq)]
    /// struct Account { #[key] id: KeyName, balance: i64 }
    ///
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let db = Db::in_memory();
    /// let key = db.put(&Account { id: KeyName::new("ann")?, balance: 10 }).await?;
    ///
    /// // Read, change, write back only if nobody wrote in between: no transaction.
    /// let mut read = db.get_versioned(&key).await?.expect("just written");
    /// read.entity.balance += 5;
    /// let written = db.put_if_version(&read.entity, read.version).await?;
    /// assert!(written.version > read.version);
    ///
    /// // The version read before is stale now: the write is refused, nothing is written.
    /// let stale = db.put_if_version(&Account { id: KeyName::new("ann")?, balance: 0 }, read.version).await;
    /// assert!(matches!(stale, Err(Error::Conflict { .. })));
    /// assert_eq!(db.get(&key).await?.unwrap().balance, 15);
    /// # Ok::<(), Error>(())
    /// # }).unwrap();
    /// ```
    pub async fn get_versioned<E: Entity>(
        &self,
        key: &Key<E>,
    ) -> Result<Option<Versioned<E>>, Error> {
        let mut found = self.get_many_versioned(std::slice::from_ref(key)).await?;
        Ok(found.pop().flatten())
    }

    /// Reads many entities by key with their versions and times, in one lookup: one slot per
    /// key, in the order of `keys`.
    pub async fn get_many_versioned<E: Entity>(
        &self,
        keys: &[Key<E>],
    ) -> Result<Vec<Option<Versioned<E>>>, Error> {
        let owners = self.owners(keys)?;
        let found = self.scope.backend.lookup_stamped(&owners, None).await?;
        let read = stamped::<E>(&self.scope, owners, found).await?;
        Ok(read
            .into_iter()
            .map(|slot| {
                slot.map(|(entity, stamp)| Versioned {
                    entity,
                    version: stamp.version,
                    create_time: stamp.create_time,
                    update_time: stamp.update_time,
                })
            })
            .collect())
    }

    /// Writes `entity` as [`put`](Db::put) does, and reports the version it made and when.
    pub async fn put_versioned<E: Entity>(&self, entity: &E) -> Result<Written<E>, Error> {
        let write = Write::entity(&self.scope, entity, Op::Upsert)?;
        self.commit_versioned(vec![write])
            .await?
            .pop()
            .ok_or_else(no_result)
    }

    /// Writes `entity` as [`put`](Db::put) does, only if it is still at `version` (read with
    /// [`get_versioned`](Db::get_versioned); `0`: only if it does not exist, a deleted entity
    /// included, on every backend). If someone wrote it since (or deleted or created it),
    /// [`Error::Conflict`] and nothing is written.
    /// Optimistic concurrency in one round trip, without a transaction.
    pub async fn put_if_version<E: Entity>(
        &self,
        entity: &E,
        version: u64,
    ) -> Result<Written<E>, Error> {
        let write = Write::entity(&self.scope, entity, Op::Upsert)?.if_version(version);
        self.commit_versioned(vec![write])
            .await?
            .pop()
            .ok_or_else(no_result)
    }

    /// Writes all `entities` in one commit, each only if it is still at the version given
    /// with it: if any one changed since, [`Error::Conflict`] names it and nothing is
    /// written. The results come back in input order.
    ///
    /// ```
    /// # use datastore_entity::prelude::*;
    /// #[derive(Entity, Debug, Clone, PartialEq)]
    /// struct Seat { #[key] id: KeyName, taken: bool }
    ///
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let db = Db::in_memory();
    /// let keys = db.put_many(&[
    ///     Seat { id: KeyName::new("1A")?, taken: false },
    ///     Seat { id: KeyName::new("1B")?, taken: false },
    /// ]).await?;
    /// let mut read: Vec<_> = db.get_many_versioned(&keys).await?.into_iter().flatten().collect();
    /// for seat in &mut read {
    ///     seat.entity.taken = true;
    /// }
    /// db.put_many_if_version(read.iter().map(|s| (&s.entity, s.version))).await?;
    /// // Both again, with the versions read before: refused whole.
    /// let again = db.put_many_if_version(read.iter().map(|s| (&s.entity, s.version))).await;
    /// assert!(matches!(again, Err(Error::Conflict { .. })));
    /// # Ok::<(), Error>(())
    /// # }).unwrap();
    /// ```
    pub async fn put_many_if_version<'e, E: Entity>(
        &self,
        entities: impl IntoIterator<Item = (&'e E, u64)>,
    ) -> Result<Vec<Written<E>>, Error> {
        let writes = entities
            .into_iter()
            .map(|(e, version)| Ok(Write::entity(&self.scope, e, Op::Upsert)?.if_version(version)))
            .collect::<Result<Vec<_>, Error>>()?;
        self.commit_versioned(writes).await
    }

    /// Deletes the entity at `key` (with its replicas and counter shards, in one commit) only
    /// if it is still at `version`: else [`Error::Conflict`] and nothing is deleted.
    pub async fn delete_if_version<E: Entity>(
        &self,
        key: &Key<E>,
        version: u64,
    ) -> Result<(), Error> {
        let write = Write::delete(&self.scope, key)?.if_version(version);
        self.commit_versioned::<E>(vec![write]).await.map(drop)
    }

    async fn commit_versioned<E: Entity>(
        &self,
        writes: Vec<Write>,
    ) -> Result<Vec<Written<E>>, Error> {
        let Committed {
            results,
            commit_time,
        } = write::commit_stamped(&self.scope, writes, None).await?;
        results
            .into_iter()
            .map(|r| {
                Ok(Written {
                    key: Key::from_raw(r.key)?,
                    version: r.stamp.version,
                    update_time: r.stamp.update_time,
                    commit_time,
                })
            })
            .collect()
    }
}

impl<E: Entity> Query<E> {
    /// Runs the query and returns one page of entities, each with the version it is at and
    /// its times (to write back with [`Db::put_many_if_version`]). An entity that does not
    /// decode fails the page, naming its key.
    ///
    /// ```
    /// # use datastore_entity::prelude::*;
    /// #[derive(Entity, Debug, Clone, PartialEq)]
    /// struct Task { #[key] id: KeyName, done: bool }
    ///
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let db = Db::in_memory();
    /// db.put(&Task { id: KeyName::new("a")?, done: false }).await?;
    /// let page = db.query::<Task>().filter(Task::DONE.eq(false)).fetch_versioned().await?;
    /// let mut open = page.items;
    /// for task in &mut open {
    ///     task.entity.done = true;
    /// }
    /// // Closed only if nobody changed them since the query read them.
    /// db.put_many_if_version(open.iter().map(|t| (&t.entity, t.version))).await?;
    /// # Ok::<(), Error>(())
    /// # }).unwrap();
    /// ```
    pub async fn fetch_versioned(self) -> Result<Page<Versioned<E>>, Error> {
        let batch = self.run().await?;
        let next = next_cursor(&batch);
        let mut rows = Vec::with_capacity(batch.results.len());
        let mut stamps = Vec::with_capacity(batch.results.len());
        for result in batch.results {
            let stamp = result.stamp.ok_or_else(|| Error::Unsupported {
                reason: format!("the backend did not report the version of {:?}", result.key),
            })?;
            rows.push((result.key, result.properties));
            stamps.push(stamp);
        }
        let entities = self.entities(rows).await?;
        let items = entities
            .into_iter()
            .zip(stamps)
            .map(|(entity, stamp)| {
                Ok(Versioned {
                    entity: entity?,
                    version: stamp.version,
                    create_time: stamp.create_time,
                    update_time: stamp.update_time,
                })
            })
            .collect::<Result<_, Error>>()?;
        Ok(Page { items, next })
    }
}

fn no_result() -> Error {
    Error::Internal {
        invariant: "the backend returns a result for each write",
    }
}
