//! Managed exports in and out: the files `gcloud datastore export` writes (and Google's
//! legacy Datastore emulator reads and writes over REST), imported into and exported from any
//! backend through the Datastore API's own calls ([`Service`]: commits of at most
//! [`BATCH_ENTITIES`] entities, queries a page at a time), in bounded memory whatever the
//! export's size.
//!
//! An export is a folder: `{name}.overall_export_metadata` (a LevelDB log of two records, the
//! version `"3"` and an `OverallExportMetadata` message pointing to each set),
//! and for each set of entities (one kind or all, one namespace or all) a folder
//! `{namespace}/{kind}/` with its `.export_metadata` (a `Backup` message naming its files) and
//! its `output-N` files (LevelDB logs of App Engine `EntityProto`s, one per record).
//!
//! The server serves this as the legacy emulator does (REST `POST
//! /v1/projects/{project}:export` with `{"outputUrlPrefix": "/abs/dir"}` and `:import` with
//! `{"inputUrl": "/abs/dir/…overall_export_metadata"}`), through the admin API's
//! `ExportEntities` and `ImportEntities`, and from its command line (`--import PATH`,
//! `datastore-entity-server export`). From Rust, into and out of any backend a [`Db`] uses:
//!
//! ```
//! use std::sync::Arc;
//! use datastore_entity::backend::Backend;
//! use datastore_entity::backend::embedded::Embedded;
//! use datastore_entity::{Db, PartitionId};
//! use datastore_entity_server::export::{Filter, export_from, import_into};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! # let folder = std::env::temp_dir().join(format!("export-doc-{}", std::process::id()));
//! let backend: Arc<dyn Backend> = Arc::new(Embedded::in_memory());
//! let project = PartitionId { project_id: "my-app".into(), ..PartitionId::default() };
//! let db = Db::with_backend_in(Arc::clone(&backend), project);
//! // … db.put(…) …
//! let exported = export_from(Arc::clone(&backend), "my-app", &folder, &Filter::default()).await?;
//! println!("{} entities in {}", exported.progress.entities, exported.overall.display());
//!
//! let copy: Arc<dyn Backend> = Arc::new(Embedded::in_memory());
//! let imported = import_into(copy, "my-app", &exported.overall, &Filter::default()).await?;
//! assert_eq!(imported.entities, exported.progress.entities);
//! # std::fs::remove_dir_all(&folder).ok();
//! # let _ = db;
//! # Ok::<(), datastore_entity_server::export::ExportError>(())
//! # }).unwrap();
//! ```
//!
//! A damaged file (a checksum that does not match, a record cut short, a record that is no
//! entity) is refused with the file, the record's number and its offset. An import commits
//! batch after batch as it reads, so one that fails leaves the batches committed before the
//! failure (each whole: [`ExportError::Refused`] and the progress reported say how many),
//! and nothing after it; importing the export again upserts the same entities.
//!
//! An export reads a page of [`BATCH_ENTITIES`] entities at a time, each at its own time, so
//! (as the service's managed exports) it is no snapshot: an entity written while it runs may
//! or may not be in it.
//!
//! Entity keys take the project imported into (a key value naming the export's own
//! application too); an export writes the project as the entities' application. An array
//! whose elements are indexed and excluded alike comes back with its indexed elements first:
//! the format keeps indexed and excluded values in two lists (the legacy emulator, which
//! holds entities in that form, answers such an array so even before an export).

mod entity;
mod job;
mod log;
mod proto;
mod read;
mod write;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::serve::Service;
use datastore_entity::backend::Backend;
use gcloud_sdk::google::datastore::v1 as pb;
use tokio::sync::mpsc;

use self::entity::Target;
pub use self::job::{ExportError, Filter, Progress};
use self::proto::EntitySet;
pub use self::read::{BATCH_BYTES, BATCH_ENTITIES};
pub use self::write::OUTPUT_FILE_BYTES;

#[cfg(doc)]
use datastore_entity::Db;

/// A finished export: its `.overall_export_metadata` (what an import names) and what it
/// wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exported {
    /// The overall metadata file.
    pub overall: PathBuf,
    /// The entities and bytes written.
    pub progress: Progress,
}

/// Imports the export `input` (its `.overall_export_metadata`, or the folder holding it) into
/// `project` of `backend`: the entities `filter` takes, upserted.
pub async fn import_into(
    backend: Arc<dyn Backend>,
    project: &str,
    input: &Path,
    filter: &Filter,
) -> Result<Progress, ExportError> {
    import(&Service::new(backend), project, input, filter, &mut |_| {}).await
}

/// Exports the entities of `project` of `backend` that `filter` takes into a new folder under
/// `prefix` (absolute; created if missing).
pub async fn export_from(
    backend: Arc<dyn Backend>,
    project: &str,
    prefix: &Path,
    filter: &Filter,
) -> Result<Exported, ExportError> {
    export(&Service::new(backend), project, prefix, filter, &mut |_| {}).await
}

/// The project the export `input` was taken from (the application its first entity's key
/// names, without a `s~` prefix): where an import goes unless told otherwise. `None` for an
/// export of no entity.
pub fn project_of_export(input: &Path) -> Result<Option<String>, ExportError> {
    read::first_project(&read::overall_file(input)?)
}

/// [`import_into`] through `service`, telling `progress` after each commit.
pub async fn import(
    service: &Service,
    project: &str,
    input: &Path,
    filter: &Filter,
    progress: &mut (dyn FnMut(Progress) + Send),
) -> Result<Progress, ExportError> {
    let overall = read::overall_file(input)?;
    let (sender, mut batches) = mpsc::channel(2);
    let reader = {
        let (project, filter) = (project.to_owned(), filter.clone());
        tokio::task::spawn_blocking(move || {
            let target = Target {
                project: &project,
                database: "",
            };
            read::read_export(&overall, &target, &filter, &sender);
        })
    };
    let mut done = Progress::default();
    let outcome = async {
        while let Some(batch) = batches.recv().await {
            let batch = batch?;
            let count = batch.entities.len() as u64;
            let request = pb::CommitRequest {
                project_id: project.to_owned(),
                mode: pb::commit_request::Mode::NonTransactional as i32,
                mutations: batch
                    .entities
                    .into_iter()
                    .map(|entity| pb::Mutation {
                        operation: Some(pb::mutation::Operation::Upsert(entity)),
                        ..pb::Mutation::default()
                    })
                    .collect(),
                ..pb::CommitRequest::default()
            };
            service
                .commit(request)
                .await
                .map_err(|status| ExportError::Refused {
                    source_name: batch.source,
                    status,
                    committed: done,
                })?;
            done.entities += count;
            done.bytes = batch.bytes_read;
            progress(done);
        }
        Ok(done)
    }
    .await;
    // The reader stops at its next batch once the receiver is gone.
    drop(batches);
    let _ = reader.await;
    outcome
}

/// [`export_from`] through `service`, telling `progress` after each page.
pub async fn export(
    service: &Service,
    project: &str,
    prefix: &Path,
    filter: &Filter,
    progress: &mut (dyn FnMut(Progress) + Send),
) -> Result<Exported, ExportError> {
    let writer = write::Writer::create(prefix)?;
    let sets = sets(service, project, filter).await?;
    let shared = Arc::new(Mutex::new(Progress::default()));
    let (sender, mut pages) = mpsc::channel::<Page>(2);
    let writing = {
        let shared = Arc::clone(&shared);
        tokio::task::spawn_blocking(move || write_pages(writer, &mut pages, &shared))
    };
    let queried = async {
        for (set, namespaces) in sets {
            if sender.send(Page::Set(set.clone())).await.is_err() {
                return Ok(());
            }
            for namespace in namespaces {
                let mut cursor = Vec::new();
                loop {
                    let (entities, next) =
                        page(service, project, &namespace, set.kind.as_deref(), cursor).await?;
                    if !entities.is_empty() && sender.send(Page::Entities(entities)).await.is_err()
                    {
                        return Ok(());
                    }
                    let now = shared.lock().map(|p| *p).unwrap_or_default();
                    progress(now);
                    match next {
                        Some(next) => cursor = next,
                        None => break,
                    }
                }
            }
            if sender.send(Page::EndSet).await.is_err() {
                return Ok(());
            }
        }
        let _ = sender.send(Page::Done).await;
        Ok(())
    }
    .await;
    drop(sender);
    let written = writing.await.map_err(|e| ExportError::Invalid {
        reason: format!("the export's writer stopped: {e}"),
    })?;
    queried?;
    let exported = written?;
    progress(exported.progress);
    Ok(exported)
}

/// What the querying side hands the writing side.
enum Page {
    Set(EntitySet),
    Entities(Vec<pb::Entity>),
    EndSet,
    /// Every set was read: the overall metadata may be written.
    Done,
}

/// Writes the pages received until the sender is done. An export stopped before its end (a
/// query refused, its caller gone) writes no overall metadata: no import takes it for whole.
fn write_pages(
    mut writer: write::Writer,
    pages: &mut mpsc::Receiver<Page>,
    shared: &Mutex<Progress>,
) -> Result<Exported, ExportError> {
    let mut current = None;
    while let Some(page) = pages.blocking_recv() {
        match page {
            Page::Set(set) => current = Some(writer.set(set)?),
            Page::Entities(entities) => {
                if let Some(set) = current.as_mut() {
                    for entity in &entities {
                        writer.append(set, entity)?;
                    }
                }
                if let Ok(mut shared) = shared.lock() {
                    *shared = writer.progress;
                }
            }
            Page::EndSet => {
                if let Some(set) = current.take() {
                    writer.finish_set(set)?;
                }
            }
            Page::Done => {
                let progress = writer.progress;
                return Ok(Exported {
                    overall: writer.finish()?,
                    progress,
                });
            }
        }
    }
    Err(ExportError::Invalid {
        reason: "the export stopped before its end; its files are incomplete".to_owned(),
    })
}

/// The sets an export of `filter` writes, each with the namespaces it reads: one set of
/// everything without a filter; else one for each namespace and kind named (all of one when
/// the filter names none of it), as the legacy emulator lays them out.
async fn sets(
    service: &Service,
    project: &str,
    filter: &Filter,
) -> Result<Vec<(EntitySet, Vec<String>)>, ExportError> {
    let every = match filter.namespaces.is_empty() {
        true => namespaces(service, project).await?,
        false => Vec::new(),
    };
    let kinds: Vec<Option<String>> = match filter.kinds.is_empty() {
        true => vec![None],
        false => filter.kinds.iter().cloned().map(Some).collect(),
    };
    let spaces: Vec<Option<String>> = match filter.namespaces.is_empty() {
        true => vec![None],
        false => filter.namespaces.iter().cloned().map(Some).collect(),
    };
    let mut sets = Vec::new();
    for namespace in &spaces {
        for kind in &kinds {
            let read = match namespace {
                Some(namespace) => vec![namespace.clone()],
                None => every.clone(),
            };
            let set = EntitySet {
                kind: kind.clone(),
                namespace: namespace.clone(),
            };
            sets.push((set, read));
        }
    }
    Ok(sets)
}

/// Every namespace of `project` that holds an entity (`__namespace__`).
async fn namespaces(service: &Service, project: &str) -> Result<Vec<String>, ExportError> {
    let mut found = Vec::new();
    let mut cursor = Vec::new();
    loop {
        let (keys, next) = page(service, project, "", Some("__namespace__"), cursor).await?;
        for entity in keys {
            let element = entity.key.and_then(|k| k.path.into_iter().last());
            found.push(match element.and_then(|e| e.id_type) {
                Some(pb::key::path_element::IdType::Name(name)) => name,
                _ => String::new(),
            });
        }
        match next {
            Some(next) => cursor = next,
            None => return Ok(found),
        }
    }
}

/// One page of the entities of `kind` (all kinds for `None`) in `namespace`, from `cursor`,
/// and the cursor of the next page (`None` after the last).
async fn page(
    service: &Service,
    project: &str,
    namespace: &str,
    kind: Option<&str>,
    cursor: Vec<u8>,
) -> Result<(Vec<pb::Entity>, Option<Vec<u8>>), ExportError> {
    use pb::query_result_batch::MoreResultsType;
    let request = pb::RunQueryRequest {
        project_id: project.to_owned(),
        partition_id: Some(pb::PartitionId {
            namespace_id: namespace.to_owned(),
            ..pb::PartitionId::default()
        }),
        query_type: Some(pb::run_query_request::QueryType::Query(pb::Query {
            kind: kind
                .map(|name| pb::KindExpression {
                    name: name.to_owned(),
                })
                .into_iter()
                .collect(),
            start_cursor: cursor,
            limit: Some(BATCH_ENTITIES as i32),
            ..pb::Query::default()
        })),
        ..pb::RunQueryRequest::default()
    };
    let answer = service
        .run_query(request)
        .await
        .map_err(|status| ExportError::Refused {
            source_name: format!("a query of namespace {namespace:?}, kind {kind:?}"),
            status,
            committed: Progress::default(),
        })?;
    let batch = answer.batch.unwrap_or_default();
    let more = matches!(
        MoreResultsType::try_from(batch.more_results),
        Ok(MoreResultsType::NotFinished | MoreResultsType::MoreResultsAfterLimit)
    );
    let entities: Vec<pb::Entity> = batch
        .entity_results
        .into_iter()
        .filter_map(|result| result.entity)
        .collect();
    let next = (more && !entities.is_empty()).then_some(batch.end_cursor);
    Ok((entities, next))
}
