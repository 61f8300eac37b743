//! The composite indexes the engine keeps — declared, or built on a query's first use —
//! listed ([`Embedded::indexes`]) and as the `index.yaml` that declares them to Google Cloud
//! ([`Embedded::index_yaml`]); the partitions that hold data ([`Embedded::partitions`]); and
//! the step of the builds a query takes ([`building`]).

use super::building::{self, Building};
use super::index::Composite;
use super::metadata;
use super::{Embedded, IndexDefinition, State};
use crate::backend::QuerySpec;
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

impl State {
    /// Starts building the composite indexes `query` needs that nobody declared, when strict
    /// index mode is off and building them is on ([`Embedded::build_indexes`]), and backfills
    /// one slice of those being built ([`building`]): kept from their start, as declared ones
    /// are, planned with (and in a file recorded) once whole.
    pub(super) fn build_needed(&mut self, query: &QuerySpec) -> Result<(), Error> {
        if !self.build_indexes {
            return Ok(());
        }
        for index in self.answers().missing(query) {
            if !self.building.iter().any(|b| b.index == index) {
                tracing::debug!(kind = %index.kind, table = %index.table, "building a composite index");
                self.building.push(Building::new(index));
            }
        }
        let failures = self.store.failed_writes();
        if failures != self.failures_seen {
            // The file was opened again at its last durable commit: the slices written
            // without waiting for its disk since may be gone.
            self.failures_seen = failures;
            self.building.iter_mut().for_each(Building::restart);
        }
        let Some(build) = self.building.first_mut() else {
            return Ok(());
        };
        let slice = building::slice(&*self.store, build)?;
        match slice.done {
            // With the index's record: on disk with everything the build wrote before it.
            true => self.apply(slice.batch)?,
            // Not waiting for a file's disk: a build a crash interrupts is made again.
            false => self.store.apply_derived(slice.batch)?,
        }
        if slice.done {
            let built = self.building.remove(0).index;
            tracing::debug!(kind = %built.kind, table = %built.table, "composite index built");
            let kept = self.composites.entry(built.kind.clone()).or_default();
            if !kept.contains(&built) {
                kept.push(built);
            }
        }
        Ok(())
    }
}
