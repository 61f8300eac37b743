//! Partial reads: entities read through the service's property mask, only the properties a
//! type declares (a narrower struct of the kind, or a projection struct), indexed or not.

use std::borrow::Cow;

use crate::backend::FoundStamped;
use datastore_entity_core::error::Error;
use datastore_entity_core::model::entity::{Entity, Projection};
use datastore_entity_core::model::key::{Key, RawKey};
use datastore_entity_core::query::write::Mask;

use super::Db;
use super::read::stamped;

impl Db {
    /// Reads one entity by key, only the properties its type declares: the others (another
    /// program's, a wider struct's) stay on the server, unread and unsent. For a large entity
    /// read through a narrower struct of its kind, less to transfer and decode; the result is
    /// what [`get`](Db::get) returns.
    ///
    /// ```
    /// # use datastore_entity::prelude::*;
    /// #[derive(Entity, Debug, Clone, PartialEq)]
    /// struct Article {
    ///     #[key]
    ///     id: KeyName,
    ///     title: String,
    ///     #[exclude_from_index]
    ///     body: String,
    /// }
    ///
    /// /// The same kind, without its body.
    /// #[derive(Entity, Debug, Clone, PartialEq)]
    /// #[entity(kind = "Article")]
    /// struct Headline {
    ///     #[key]
    ///     id: KeyName,
    ///     title: String,
    /// }
    ///
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let db = Db::in_memory();
    /// let id = KeyName::new("a")?;
    /// db.put(&Article { id: id.clone(), title: "Hi".into(), body: "x".repeat(100_000) }).await?;
    /// let headline = db.get_partial(&Headline::key(id)).await?.unwrap();
    /// assert_eq!(headline.title, "Hi");
    /// # Ok::<(), Error>(())
    /// # }).unwrap();
    /// ```
    pub async fn get_partial<E: Entity>(&self, key: &Key<E>) -> Result<Option<E>, Error> {
        let mut found = self.get_many_partial(std::slice::from_ref(key)).await?;
        Ok(found.pop().flatten())
    }

    /// Reads many entities by key, only the properties their type declares, in one lookup:
    /// one slot per key, in the order of `keys`.
    pub async fn get_many_partial<E: Entity>(
        &self,
        keys: &[Key<E>],
    ) -> Result<Vec<Option<E>>, Error> {
        let owners = self.owners(keys)?;
        let paths = Mask::read_paths(E::SCHEMA);
        let found = self.scope.backend.lookup_masked(&owners, &paths).await?;
        let read = stamped::<E>(&self.scope, owners, found).await?;
        Ok(read.into_iter().map(|slot| slot.map(|(e, _)| e)).collect())
    }

    /// Reads the properties of a projection struct (`#[entity(projection(Card: a, b))]`) of
    /// one entity by key: only those, through the service's property mask — excluded ones too,
    /// unlike a projection query, which reads the index. `None` if the entity does not exist.
    pub async fn get_projected<P: Projection>(
        &self,
        key: &Key<P::Entity>,
    ) -> Result<Option<P>, Error> {
        let owners = self.owners(std::slice::from_ref(key))?;
        let paths: Vec<Vec<Cow<'static, str>>> = P::PROPERTIES
            .iter()
            .map(|&name| vec![Cow::Borrowed(name)])
            .collect();
        let found: FoundStamped = self.scope.backend.lookup_masked(&owners, &paths).await?;
        found
            .into_iter()
            .next()
            .flatten()
            .map(|(properties, _)| P::from_properties(properties))
            .transpose()
    }

    pub(super) fn owners<E>(&self, keys: &[Key<E>]) -> Result<Vec<RawKey>, Error> {
        keys.iter().map(|k| self.scope.outgoing(k.raw())).collect()
    }
}
