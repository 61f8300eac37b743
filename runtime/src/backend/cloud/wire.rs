//! The service's partitions and keys in its protocol buffers, both ways: the lowest part of
//! the wire form (feature `cloud`), which maps in the wire form (`value.rs`), their views
//! (`stored.rs`) and the sink the derive writes into (`sink.rs`) build on.

use gcloud_sdk::google::datastore::v1 as pb;
use gcloud_sdk::prost_types;

use datastore_entity_core::error::Error;
use datastore_entity_core::model::key::{IdOrName, KeyId, PartitionId, PathElement, RawKey};
use datastore_entity_core::model::name::KeyName;
use datastore_entity_core::model::scalar::Timestamp;

/// How the service's partitions map to ours: the database and project of the handle fill
/// in what a response leaves empty; `outgoing`, when writing, is the partition a key value
/// without one takes (the writing handle's).
#[derive(Debug, Clone, Default)]
pub struct Partitions {
    pub project_id: String,
    pub database_id: String,
    pub outgoing: Option<PartitionId>,
}

impl Partitions {
    /// The partitions of project `project_id`, database `database_id`, for reading.
    pub fn new(project_id: impl Into<String>, database_id: impl Into<String>) -> Self {
        Partitions {
            project_id: project_id.into(),
            database_id: database_id.into(),
            outgoing: None,
        }
    }

    /// The same, writing key values without a partition into `partition`.
    pub fn writing_into(&self, partition: &PartitionId) -> Partitions {
        Partitions {
            outgoing: Some(partition.clone()),
            ..self.clone()
        }
    }

    /// A key as the service takes it; a key without a partition takes `outgoing`'s.
    pub fn key(&self, key: &RawKey) -> pb::Key {
        let partition = key.partition().or(self.outgoing.as_ref());
        pb::Key {
            partition_id: Some(pb::PartitionId {
                project_id: partition
                    .map(|p| p.project_id.as_str())
                    .filter(|p| !p.is_empty())
                    .unwrap_or(&self.project_id)
                    .to_owned(),
                database_id: partition.map(|p| p.database_id.clone()).unwrap_or_default(),
                namespace_id: partition.map(|p| p.namespace.clone()).unwrap_or_default(),
            }),
            path: key
                .path()
                .iter()
                .map(|e| pb::key::PathElement {
                    kind: e.kind().to_owned(),
                    id_type: e.id_or_name().map(|id| match id {
                        IdOrName::Id(id) => pb::key::path_element::IdType::Id(id.get()),
                        IdOrName::Name(name) => {
                            pb::key::path_element::IdType::Name(name.as_str().to_owned())
                        }
                    }),
                })
                .collect(),
        }
    }

    pub fn partition(&self, partition: &PartitionId) -> pb::PartitionId {
        pb::PartitionId {
            project_id: if partition.project_id.is_empty() {
                self.project_id.clone()
            } else {
                partition.project_id.clone()
            },
            database_id: partition.database_id.clone(),
            namespace_id: partition.namespace.clone(),
        }
    }

    /// A key from the service. Reading is lenient about what other clients wrote: kinds,
    /// names and ids the rules forbid for new keys are kept as they are (a write of such a
    /// key is refused: `RawKey::check_writable`); the depth and the path's shape are checked.
    pub fn raw_key(&self, key: pb::Key) -> Result<RawKey, Error> {
        let partition = key.partition_id.unwrap_or_default();
        let partition = PartitionId {
            project_id: if partition.project_id.is_empty() {
                self.project_id.clone()
            } else {
                partition.project_id
            },
            database_id: if partition.database_id.is_empty() {
                self.database_id.clone()
            } else {
                partition.database_id
            },
            namespace: partition.namespace_id,
        };
        let path = key
            .path
            .into_iter()
            .map(|e| {
                let id_or_name = match e.id_type {
                    Some(pb::key::path_element::IdType::Id(id)) => {
                        Some(IdOrName::Id(KeyId::stored(id)?))
                    }
                    Some(pb::key::path_element::IdType::Name(name)) => {
                        Some(IdOrName::Name(KeyName::stored(name)))
                    }
                    None => None,
                };
                Ok(PathElement::stored(e.kind, id_or_name))
            })
            .collect::<Result<Vec<_>, Error>>()?;
        RawKey::new(Some(partition), path)
    }
}

/// A timestamp as the service takes it.
pub fn timestamp(t: Timestamp) -> prost_types::Timestamp {
    let micros = t.as_micros();
    prost_types::Timestamp {
        seconds: micros.div_euclid(1_000_000),
        nanos: i32::try_from(micros.rem_euclid(1_000_000) * 1_000).unwrap_or(0),
    }
}

/// A timestamp from the service (to the microsecond, as the service keeps it), saturating at
/// the ends of the range: a received entity is checked first ([`checked_timestamp`]).
pub fn from_timestamp(t: &prost_types::Timestamp) -> Timestamp {
    Timestamp::from_micros(
        t.seconds
            .saturating_mul(1_000_000)
            .saturating_add(i64::from(t.nanos / 1_000)),
    )
}

/// A timestamp from the service, if it is one the service stores (what a buggy or hostile
/// endpoint could send otherwise: nanoseconds out of their range, a year past 9999).
pub fn checked_timestamp(t: &prost_types::Timestamp) -> Option<Timestamp> {
    if !(0..1_000_000_000).contains(&t.nanos) {
        return None;
    }
    Timestamp::checked(
        t.seconds
            .checked_mul(1_000_000)?
            .checked_add(i64::from(t.nanos / 1_000))?,
    )
}
