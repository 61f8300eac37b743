//! What a database holds, from its metadata queries (`__namespace__`, `__kind__`,
//! `__property__`): the embedded engine answers them from its tables, Google Cloud and its
//! legacy emulator from theirs. (The Firestore emulator refuses them.)

use datastore_entity_core::error::Error;
use datastore_entity_core::model::key::{IdOrName, PathElement, RawKey};
use datastore_entity_core::model::name::KeyName;
use datastore_entity_core::model::value::Value;
use datastore_entity_core::query::spec::{
    KIND_KIND, NAMESPACE_KIND, PROPERTY_KIND, QueryBatch, QuerySpec, REPRESENTATION, ResultShape,
};

use super::Db;

/// An indexed property of a kind, as `__property__` describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PropertyInfo {
    /// The property's name (dotted for a property of an embedded entity's).
    pub name: String,
    /// How its values are represented in the index, as the service names them: `INT64`
    /// (integers and timestamps), `DOUBLE`, `BOOLEAN`, `STRING` (strings and blobs), `NULL`,
    /// `POINT`, `REFERENCE` (keys).
    pub representations: Vec<String>,
}

impl Db {
    /// Every namespace of this handle's database that holds an entity, in order; the default
    /// namespace is `""`.
    ///
    /// ```
    /// # use datastore_entity::prelude::*;
    /// #[derive(Entity, Debug, Clone, PartialEq)]
    /// struct Note { #[key] id: KeyName, text: String }
    ///
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let db = Db::in_memory();
    /// db.put(&Note { id: KeyName::new("a")?, text: "hi".into() }).await?;
    /// db.namespace("tenant-1")?.put(&Note { id: KeyName::new("b")?, text: "yo".into() }).await?;
    /// assert_eq!(db.namespaces().await?, ["", "tenant-1"]);
    /// assert_eq!(db.kinds().await?, ["Note"]);
    /// let text = &db.properties("Note").await?[0];
    /// assert_eq!((text.name.as_str(), text.representations.as_slice()), ("text", &["STRING".to_owned()][..]));
    /// # Ok::<(), datastore_entity::Error>(())
    /// # }).unwrap();
    /// ```
    pub async fn namespaces(&self) -> Result<Vec<String>, Error> {
        let keys = self
            .metadata(NAMESPACE_KIND, None, ResultShape::KeysOnly)
            .await?;
        Ok(keys
            .into_iter()
            .map(
                |(key, _)| match key.path().last().and_then(|e| e.id_or_name()) {
                    Some(IdOrName::Name(name)) => name.as_str().to_owned(),
                    _ => String::new(),
                },
            )
            .collect())
    }

    /// Every kind of this handle's namespace that has an entity, in order.
    pub async fn kinds(&self) -> Result<Vec<String>, Error> {
        let keys = self
            .metadata(KIND_KIND, None, ResultShape::KeysOnly)
            .await?;
        Ok(keys
            .into_iter()
            .filter_map(|(key, _)| last_name(&key))
            .collect())
    }

    /// Every indexed property of `kind` in this handle's namespace, in order, with the
    /// representations of its values. Properties excluded from indexes are not listed.
    pub async fn properties(&self, kind: &str) -> Result<Vec<PropertyInfo>, Error> {
        let ancestor = RawKey::new(
            Some(self.partition().clone()),
            vec![PathElement::stored(
                KIND_KIND.to_owned(),
                Some(IdOrName::Name(KeyName::new(kind)?)),
            )],
        )?;
        let found = self
            .metadata(PROPERTY_KIND, Some(ancestor), ResultShape::Full)
            .await?;
        Ok(found
            .into_iter()
            .filter_map(|(key, representations)| {
                Some(PropertyInfo {
                    name: last_name(&key)?,
                    representations,
                })
            })
            .collect())
    }

    /// Every result of a metadata query of `kind`, page by page: its key, and the
    /// representations a whole `__property__` result holds.
    async fn metadata(
        &self,
        kind: &str,
        ancestor: Option<RawKey>,
        shape: ResultShape,
    ) -> Result<Vec<(RawKey, Vec<String>)>, Error> {
        let mut spec = QuerySpec {
            partition: self.partition().clone(),
            kind: kind.to_owned(),
            ancestor,
            shape,
            ..QuerySpec::default()
        };
        let mut found = Vec::new();
        loop {
            let QueryBatch {
                results,
                end_cursor,
                more_results,
            } = self.backend().run_query(&spec, None).await?;
            let read = results.len();
            for result in results {
                let representations = match result.properties.get(REPRESENTATION) {
                    Some(property) => strings(&property.value),
                    None => Vec::new(),
                };
                found.push((result.key, representations));
            }
            if !more_results || read == 0 {
                return Ok(found);
            }
            spec.start_cursor = Some(end_cursor);
        }
    }
}

/// The name of a key's last element.
fn last_name(key: &RawKey) -> Option<String> {
    match key.path().last()?.id_or_name()? {
        IdOrName::Name(name) => Some(name.as_str().to_owned()),
        IdOrName::Id(_) => None,
    }
}

/// The strings of an array value (or of one string).
fn strings(value: &Value) -> Vec<String> {
    match value {
        Value::Array(values) => values.iter().flat_map(strings).collect(),
        Value::String(s) => vec![s.clone()],
        _ => Vec::new(),
    }
}
