//! The admin API (`google.datastore.admin.v1.DatastoreAdmin`): `ListIndexes`
//! and `GetIndex` answer the composite indexes the server keeps — those `--require-indexes`
//! declared, and those its queries built on their first use — as ready indexes, the same for
//! every project; `ExportEntities` and `ImportEntities` export and import through the
//! [`export`] module, on this machine's files, answered as finished operations.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use crate::serve::Service;
use datastore_entity::Direction;
use datastore_entity::backend::embedded::{Embedded, IndexDefinition};
use gcloud_sdk::google::datastore::admin::v1 as admin;
use gcloud_sdk::google::longrunning::{Operation, operation};
use gcloud_sdk::prost::Message;
use gcloud_sdk::prost_types::Any;
use tonic::Status;

use crate::export::{self, Filter};

/// `ListIndexes`: every index, `page_size` at a time (all of them for 0), from `page_token`.
pub(crate) fn list(
    engine: &Embedded,
    request: admin::ListIndexesRequest,
) -> Result<admin::ListIndexesResponse, Status> {
    if !request.filter.is_empty() {
        return Err(Status::invalid_argument(
            "This server answers ListIndexes without a filter.",
        ));
    }
    let all = engine.indexes();
    let start = match request.page_token.as_str() {
        "" => 0,
        token => token
            .parse::<usize>()
            .ok()
            .filter(|at| *at <= all.len())
            .ok_or_else(|| {
                Status::invalid_argument("The page_token is not one this server gave.")
            })?,
    };
    let size = match usize::try_from(request.page_size) {
        Ok(0) => all.len(),
        Ok(size) => size,
        Err(_) => return Err(Status::invalid_argument("The page_size is negative.")),
    };
    let end = start.saturating_add(size).min(all.len());
    Ok(admin::ListIndexesResponse {
        indexes: all[start..end]
            .iter()
            .map(|index| described(&request.project_id, index))
            .collect(),
        next_page_token: match end < all.len() {
            true => end.to_string(),
            false => String::new(),
        },
    })
}

/// `GetIndex`: the index of `index_id`.
pub(crate) fn get(
    engine: &Embedded,
    request: admin::GetIndexRequest,
) -> Result<admin::Index, Status> {
    engine
        .indexes()
        .iter()
        .find(|index| index.id == request.index_id)
        .map(|index| described(&request.project_id, index))
        .ok_or_else(|| Status::not_found(format!("No index has the id {:?}.", request.index_id)))
}

/// An index as the admin API describes it.
fn described(project: &str, index: &IndexDefinition) -> admin::Index {
    use admin::index::{AncestorMode, Direction as Order, IndexedProperty, State};
    admin::Index {
        project_id: project.to_owned(),
        index_id: index.id.clone(),
        kind: index.kind.clone(),
        ancestor: match index.ancestor {
            true => AncestorMode::AllAncestors,
            false => AncestorMode::None,
        } as i32,
        properties: index
            .properties
            .iter()
            .map(|(name, direction)| IndexedProperty {
                name: name.clone(),
                direction: match direction {
                    Direction::Ascending => Order::Ascending,
                    Direction::Descending => Order::Descending,
                } as i32,
            })
            .collect(),
        state: State::Ready as i32,
    }
}

/// `ExportEntities`: the entities of the request's project that its filter takes, exported
/// to a new folder under `output_url_prefix` (an absolute path on this machine), answered as
/// the legacy emulator answers it: a finished operation, its response naming the export's
/// `.overall_export_metadata` (what an import takes).
pub(crate) async fn export_entities(
    service: &Service,
    request: admin::ExportEntitiesRequest,
) -> Result<Operation, Status> {
    let started = SystemTime::now();
    let filter = request.entity_filter.clone().unwrap_or_default();
    let prefix = local_path(&request.output_url_prefix, "output_url_prefix")?;
    let exported = export::export(
        service,
        &request.project_id,
        &prefix,
        &filter_of(&filter),
        &mut |_| {},
    )
    .await
    .map_err(|error| error.status())?;
    let url = exported.overall.display().to_string();
    let metadata = admin::ExportEntitiesMetadata {
        common: Some(common(started, admin::OperationType::ExportEntities)),
        progress_entities: Some(done(exported.progress.entities)),
        progress_bytes: Some(done(exported.progress.bytes)),
        entity_filter: Some(filter),
        output_url_prefix: request.output_url_prefix,
    };
    let response = admin::ExportEntitiesResponse { output_url: url };
    Ok(finished(
        &request.project_id,
        any("ExportEntitiesMetadata", &metadata),
        any("ExportEntitiesResponse", &response),
    ))
}

/// `ImportEntities`: the export `input_url` names (its `.overall_export_metadata`, an
/// absolute path on this machine) imported into the request's project, the entities its
/// filter takes upserted; answered as the legacy emulator answers it, a finished operation.
/// A failure answers its error; the batches committed before it stay.
pub(crate) async fn import_entities(
    service: &Service,
    request: admin::ImportEntitiesRequest,
) -> Result<Operation, Status> {
    let started = SystemTime::now();
    let filter = request.entity_filter.clone().unwrap_or_default();
    let input = local_path(&request.input_url, "input_url")?;
    let imported = export::import(
        service,
        &request.project_id,
        &input,
        &filter_of(&filter),
        &mut |_| {},
    )
    .await
    .map_err(|error| error.status())?;
    let metadata = admin::ImportEntitiesMetadata {
        common: Some(common(started, admin::OperationType::ImportEntities)),
        progress_entities: Some(done(imported.entities)),
        progress_bytes: Some(done(imported.bytes)),
        entity_filter: Some(filter),
        input_url: request.input_url,
    };
    Ok(finished(
        &request.project_id,
        any("ImportEntitiesMetadata", &metadata),
        Any {
            type_url: "type.googleapis.com/google.protobuf.Empty".to_owned(),
            value: Vec::new(),
        },
    ))
}

/// The admin API's entity filter as the exports take it.
fn filter_of(filter: &admin::EntityFilter) -> Filter {
    Filter {
        kinds: filter.kinds.clone(),
        namespaces: filter.namespace_ids.clone(),
    }
}

/// A path on this machine from a URL of the admin API: an absolute path, or a `file://` URL
/// of one (a `gs://` bucket is Google Cloud's).
fn local_path(url: &str, field: &str) -> Result<PathBuf, Status> {
    let path = Path::new(url.strip_prefix("file://").unwrap_or(url));
    match path.is_absolute() {
        true => Ok(path.to_owned()),
        false => Err(Status::invalid_argument(format!(
            "The {field} {url:?} is not an absolute path: this server reads and writes exports \
             on its own machine."
        ))),
    }
}

fn common(started: SystemTime, kind: admin::OperationType) -> admin::CommonMetadata {
    admin::CommonMetadata {
        start_time: Some(started.into()),
        end_time: Some(SystemTime::now().into()),
        operation_type: kind as i32,
        labels: Default::default(),
        state: admin::common_metadata::State::Successful as i32,
    }
}

fn done(work: u64) -> admin::Progress {
    let work = i64::try_from(work).unwrap_or(i64::MAX);
    admin::Progress {
        work_completed: work,
        work_estimated: work,
    }
}

fn any(name: &str, message: &impl Message) -> Any {
    Any {
        type_url: format!("type.googleapis.com/google.datastore.admin.v1.{name}"),
        value: message.encode_to_vec(),
    }
}

/// A finished operation of `project`, named as the service names them.
fn finished(project: &str, metadata: Any, response: Any) -> Operation {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let id = format!("{nanos:x}{:08x}", NEXT.fetch_add(1, Ordering::Relaxed));
    Operation {
        name: format!("projects/{project}/operations/{id}"),
        metadata: Some(metadata),
        done: true,
        result: Some(operation::Result::Response(response)),
    }
}
