//! The composite indexes the engine keeps — declared, or built on a query's first use —
//! listed ([`Embedded::indexes`]) and as the `index.yaml` that declares them to Google Cloud
//! ([`Embedded::index_yaml`]); and the partitions that hold data ([`Embedded::partitions`]).

use super::index::Composite;
use super::metadata;
use super::{Embedded, IndexDefinition};
use datastore_entity_core::error::Error;
use datastore_entity_core::model::key::PartitionId;

impl Embedded {
    /// Every composite index the engine keeps — declared, or built on a query's first use
    /// ([`Embedded::build_indexes`]) — by kind, then id.
    pub fn indexes(&self) -> Vec<IndexDefinition> {
        let state = self.state();
        let mut indexes: Vec<IndexDefinition> = state
            .composites
            .values()
            .flatten()
            .map(|index| IndexDefinition {
                id: index
                    .table
                    .rsplit(':')
                    .next()
                    .unwrap_or(&index.table)
                    .to_owned(),
                kind: index.kind.clone(),
                ancestor: index.ancestor,
                properties: index.columns.clone(),
            })
            .collect();
        indexes.sort_by(|a, b| (&a.kind, &a.id).cmp(&(&b.kind, &b.id)));
        indexes
    }

    /// The composite indexes the engine keeps, as the `index.yaml` that declares them to
    /// Google Cloud (`gcloud datastore indexes create index.yaml`): what the queries that
    /// built theirs on first use need in production.
    ///
    /// ```
    /// # use datastore_entity::backend::embedded::Embedded;
    /// assert_eq!(Embedded::in_memory().index_yaml(), "indexes:\n");
    /// ```
    pub fn index_yaml(&self) -> String {
        let state = self.state();
        let mut kept: Vec<&Composite> = state.composites.values().flatten().collect();
        kept.sort_by(|a, b| (&a.kind, &a.table).cmp(&(&b.kind, &b.table)));
        let mut yaml = "indexes:\n".to_owned();
        for index in kept {
            yaml.push_str(&index.yaml());
        }
        yaml
    }
}

impl Embedded {
    /// Every partition (project, database, namespace) that holds an entity now, in order:
    /// what a console lists before it asks each partition for its kinds.
    ///
    /// ```
    /// # use datastore_entity::backend::embedded::Embedded;
    /// assert!(Embedded::in_memory().partitions().unwrap().is_empty());
    /// ```
    pub fn partitions(&self) -> Result<Vec<PartitionId>, Error> {
        let state = self.state();
        let mut found = Vec::new();
        metadata::partitions(&*state.store, &mut |partition| {
            found.push(partition.clone());
            Ok(())
        })?;
        Ok(found)
    }
}
