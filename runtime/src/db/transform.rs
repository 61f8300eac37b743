//! Server-side transforms ([`Transform`]): `db.transform(&key, [..])` changes stored properties
//! without reading them — a counter without a transaction, a set without a read — and
//! `put_transformed` writes an entity and transforms it in one mutation.

use crate::backend::PropertyTransform;
use datastore_entity_core::error::Error;
use datastore_entity_core::model::entity::Entity;
use datastore_entity_core::model::key::Key;
use datastore_entity_core::model::value::Value;
use datastore_entity_core::query::transform::Transform;

use super::Db;
use super::txn::Tx;
use super::write::{self, Op, Write};

/// The transforms of `E`, checked: the first refused one's reason as an error.
fn checked<E: Entity>(
    transforms: impl IntoIterator<Item = Transform<E>>,
) -> Result<Vec<PropertyTransform>, Error> {
    if E::SCHEMA.replicas.is_some() {
        return Err(Error::InvalidValue {
            kind: E::KIND.to_owned(),
            property: String::new(),
            reason: "a `#[replicated]` entity cannot be transformed on the server: its \
                     replicas hold copies the transform would not change; read, change and \
                     put it instead"
                .to_owned(),
        });
    }
    transforms
        .into_iter()
        .map(|t| {
            t.transform.map_err(|path| Error::InvalidValue {
                kind: E::KIND.to_owned(),
                property: path.0.clone(),
                reason: path.to_string(),
            })
        })
        .collect()
}

impl Db {
    /// Applies `transforms` to the stored entity at `key`, on the server, in order: no read,
    /// no transaction, one call. Returns each transform's result, in order (the new value of
    /// a numeric transform and of `request_time`, null for the array transforms).
    /// [`Error::NotFound`] if the entity does not exist (nothing is created).
    ///
    /// The properties transformed are written indexed (as the service writes them), even a
    /// field declared `#[exclude_from_index]`; the next `put` of the entity writes them as
    /// declared again.
    ///
    /// ```
    /// # use datastore_entity::prelude::*;
    /// use datastore_entity::Value;
    ///
    /// #[derive(Entity, Debug, Clone, PartialEq)]
    /// struct Account {
    ///     #[key]
    ///     id: KeyName,
    ///     balance: i64,
    ///     tags: Vec<String>,
    ///     #[exclude_from_index]
    ///     seen: Option<Timestamp>,
    /// }
    ///
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let db = Db::in_memory();
    /// let key = db.put(&Account { id: KeyName::new("ann")?, balance: 10, tags: vec![], seen: None }).await?;
    /// let results = db
    ///     .transform(&key, [
    ///         Account::BALANCE.increment(5),
    ///         Account::TAGS.append_missing(vec!["new".to_owned()]),
    ///         Account::SEEN.request_time(),
    ///     ])
    ///     .await?;
    /// assert_eq!(results[0], Value::Integer(15));
    /// let account = db.get(&key).await?.unwrap();
    /// assert_eq!((account.balance, account.tags), (15, vec!["new".to_owned()]));
    /// assert!(account.seen.is_some());
    /// # Ok::<(), Error>(())
    /// # }).unwrap();
    /// ```
    pub async fn transform<E: Entity>(
        &self,
        key: &Key<E>,
        transforms: impl IntoIterator<Item = Transform<E>>,
    ) -> Result<Vec<Value>, Error> {
        let transforms = checked(transforms)?;
        if transforms.is_empty() {
            return Ok(Vec::new());
        }
        let write = Write::transforms_only(&self.scope, key, transforms)?;
        self.commit_transformed(write).await
    }

    /// Writes `entity` as [`put`](Db::put) does, then applies `transforms` to it, in the same
    /// mutation: the transforms see the written values. Returns each transform's result.
    pub async fn put_transformed<E: Entity>(
        &self,
        entity: &E,
        transforms: impl IntoIterator<Item = Transform<E>>,
    ) -> Result<Vec<Value>, Error> {
        let transforms = checked(transforms)?;
        let write = Write::entity(&self.scope, entity, Op::Upsert)?.transformed(transforms);
        self.commit_transformed(write).await
    }

    async fn commit_transformed(&self, write: Write) -> Result<Vec<Value>, Error> {
        let committed = write::commit_stamped(&self.scope, vec![write], None).await?;
        let result = committed.results.into_iter().next();
        Ok(result.map(|r| r.transform_results).unwrap_or_default())
    }
}

impl Tx {
    /// Buffers `transforms` of the entity at `key`, applied by the commit, in order, as
    /// [`Db::transform`] applies them (the commit fails with [`Error::NotFound`], writing
    /// nothing, if the entity does not exist by then). Their results are not returned inside a
    /// transaction: read the entity after the commit.
    pub async fn transform<E: Entity>(
        &self,
        key: &Key<E>,
        transforms: impl IntoIterator<Item = Transform<E>>,
    ) -> Result<(), Error> {
        let write = checked(transforms)
            .and_then(|transforms| Write::transforms_only(self.scope(), key, transforms));
        self.buffer_write(write)
    }
}
