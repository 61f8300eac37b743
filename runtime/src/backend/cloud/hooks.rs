//! What a commit or a lookup is on the wire, built and read as the backend builds and reads
//! it: for the benchmarks and tools (`bench_hooks`).

use std::sync::Arc;

use gcloud_sdk::google::datastore::v1 as pb;

use crate::backend::cloud::wire::Partitions;
use crate::backend::cloud::wire_form::{WireForm, from_wire};
use crate::backend::{Mask, Mutation};
use datastore_entity_core::error::Error;
use datastore_entity_core::model::entity::Entity;
use datastore_entity_core::model::key::PartitionId;
use datastore_entity_core::model::sink::Form;
use datastore_entity_core::rules::commit::check_commit;

/// The `CommitRequest` a `put_many` of `entities` sends to project `project_id`'s default
/// database and namespace (upserts, outside a transaction), built as the backend builds it:
/// each entity written by the derive straight into the wire form, then checked as the write
/// pipeline checks it (the service's limits, R-I5, the 10 MiB of a commit; entity types with
/// replicas or counters also get companions from `Db::put_many`, not here). For benchmarks,
/// and tools that look at what goes on the wire.
///
/// ```
/// # use datastore_entity::prelude::*;
/// #[derive(Entity, Debug, PartialEq)]
/// struct Note {
///     #[key]
///     id: KeyId,
///     text: String,
/// }
///
/// let notes = [Note { id: KeyId::new(1)?, text: "hello".into() }];
/// let request = datastore_entity::bench_hooks::commit_request("my-project", &notes)?;
/// assert_eq!(request.mutations.len(), 1);
/// let back: Vec<Note> = datastore_entity::bench_hooks::entities_from_lookup(
///     "my-project",
///     gcloud_sdk::google::datastore::v1::LookupResponse {
///         found: request
///             .mutations
///             .into_iter()
///             .filter_map(|m| match m.operation {
///                 Some(gcloud_sdk::google::datastore::v1::mutation::Operation::Upsert(e)) => {
///                     Some(gcloud_sdk::google::datastore::v1::EntityResult {
///                         entity: Some(e),
///                         ..Default::default()
///                     })
///                 }
///                 _ => None,
///             })
///             .collect(),
///         ..Default::default()
///     },
/// )?;
/// assert_eq!(back, notes);
/// # Ok::<(), Error>(())
/// ```
pub(crate) fn commit_request<E: Entity>(
    project_id: &str,
    entities: &[E],
) -> Result<pb::CommitRequest, Error> {
    let partition = PartitionId {
        project_id: project_id.to_owned(),
        ..PartitionId::default()
    };
    let partitions = Arc::new(Partitions::new(project_id, "").writing_into(&partition));
    let form = WireForm(Arc::clone(&partitions));
    // The entities as the derive writes them, straight into the wire form, and the checks
    // the backend's commit runs on them.
    let mutations = entities
        .iter()
        .map(|entity| {
            let key = entity
                .entity_key()?
                .into_raw()
                .with_partition(partition.clone());
            let properties = entity.properties_in(Form::foreign(&form))?;
            Ok(Mutation::Upsert(key, properties, Mask::declared(E::SCHEMA)))
        })
        .collect::<Result<Vec<_>, Error>>()?;
    check_commit(&mutations, |_| E::SCHEMA.indexes.iter().collect())?;
    let mutations = partitions.mutations(mutations);
    Ok(pb::CommitRequest {
        project_id: project_id.to_owned(),
        mode: pb::commit_request::Mode::NonTransactional as i32,
        mutations,
        ..pb::CommitRequest::default()
    })
}

/// The entities a `LookupResponse` of project `project_id` holds, read as the backend reads
/// them (for benchmarks and tools; see [`commit_request`]).
pub(crate) fn entities_from_lookup<E: Entity>(
    project_id: &str,
    response: pb::LookupResponse,
) -> Result<Vec<E>, Error> {
    let partitions = Arc::new(Partitions::new(project_id, ""));
    response
        .found
        .into_iter()
        .filter_map(|found| found.entity)
        .filter_map(|entity| Some((entity.key?, entity.properties)))
        .map(|(key, properties)| {
            let key = partitions.raw_key(key)?;
            E::from_entity(&key, from_wire(properties, &partitions)?)
        })
        .collect()
}
