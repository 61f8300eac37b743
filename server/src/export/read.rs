//! An import: the export's files read on a thread of their own, a record at a time, each
//! entity converted and filtered there, and handed over in batches (at most
//! [`BATCH_ENTITIES`] entities and [`BATCH_BYTES`] bytes) to the caller, which commits each
//! through the Datastore API while the next is read. At most two batches wait, so memory
//! stays bounded whatever the export's size.

use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};

use gcloud_sdk::google::datastore::v1 as pb;
use gcloud_sdk::prost::Message;
use tokio::sync::mpsc;

use super::entity::{Target, application, from_v3};
use super::job::{ExportError, Filter};
use super::log::{LogError, LogReader};
use super::proto::{EntitySet, OVERALL_VERSION, Pointer, overall_from_bytes, set_from_bytes};

/// The most entities one commit of an import holds (the service's limit on a commit).
pub const BATCH_ENTITIES: usize = 500;
/// The most bytes of entities one commit of an import holds: under the service's 10 MiB.
pub const BATCH_BYTES: usize = 8 << 20;

/// Entities read, to commit together.
pub(crate) struct Batch {
    pub entities: Vec<pb::Entity>,
    /// Bytes of the export's files read up to this batch's last record.
    pub bytes_read: u64,
    /// Which records they are, for an error: `path, records a..b`.
    pub source: String,
}

/// The overall metadata file `input` names: the file, or the one `.overall_export_metadata`
/// in the folder it names.
pub(crate) fn overall_file(input: &Path) -> Result<PathBuf, ExportError> {
    if !input.is_dir() {
        return Ok(input.to_owned());
    }
    let io = |source| ExportError::Io {
        path: input.to_owned(),
        source,
    };
    let mut found = Vec::new();
    for entry in std::fs::read_dir(input).map_err(io)? {
        let path = entry.map_err(io)?.path();
        if path
            .extension()
            .is_some_and(|e| e == "overall_export_metadata")
        {
            found.push(path);
        }
    }
    match found.len() {
        1 => Ok(found.remove(0)),
        n => Err(ExportError::Metadata {
            path: input.to_owned(),
            reason: format!(
                "a folder with {n} .overall_export_metadata files: name the one to import"
            ),
        }),
    }
}

/// Reads the export of `overall` (its entities in `target`, those `filter` takes), sending
/// batches to `batches` until done, an error (sent last) or the receiver gone.
pub(crate) fn read_export(
    overall: &Path,
    target: &Target<'_>,
    filter: &Filter,
    batches: &mpsc::Sender<Result<Batch, ExportError>>,
) {
    let mut reading = Reading {
        target,
        filter,
        batches,
        pending: Vec::new(),
        pending_bytes: 0,
        bytes_read: 0,
        source: String::new(),
    };
    let outcome = reading.export(overall).and_then(|()| reading.flush());
    if let Err(Stop::Failed(error)) = outcome {
        let _ = batches.blocking_send(Err(error));
    }
}

/// Why reading stopped early.
enum Stop {
    Failed(ExportError),
    /// The receiver is gone: nothing more is wanted.
    Abandoned,
}

impl From<ExportError> for Stop {
    fn from(error: ExportError) -> Stop {
        Stop::Failed(error)
    }
}

struct Reading<'a> {
    target: &'a Target<'a>,
    filter: &'a Filter,
    batches: &'a mpsc::Sender<Result<Batch, ExportError>>,
    pending: Vec<pb::Entity>,
    pending_bytes: usize,
    bytes_read: u64,
    source: String,
}

impl Reading<'_> {
    fn export(&mut self, overall: &Path) -> Result<(), Stop> {
        for pointer in pointers(overall)? {
            if !self.may_take(&pointer.set) {
                continue;
            }
            let mut records = 0u64;
            for file in output_files(overall, &pointer)? {
                records += self.output_file(&file)?;
            }
            if pointer.entities > 0 && records != pointer.entities as u64 {
                return Err(ExportError::Metadata {
                    path: overall.to_owned(),
                    reason: format!(
                        "the set {} holds {records} entities where the metadata says {} \
                         (a file cut short or missing)",
                        pointer.metadata_file, pointer.entities
                    ),
                }
                .into());
            }
        }
        Ok(())
    }

    /// Whether some entity of `set` may pass the filter.
    fn may_take(&self, set: &EntitySet) -> bool {
        let kinds = &self.filter.kinds;
        let namespaces = &self.filter.namespaces;
        set.kind
            .as_ref()
            .is_none_or(|k| kinds.is_empty() || kinds.contains(k))
            && set
                .namespace
                .as_ref()
                .is_none_or(|n| namespaces.is_empty() || namespaces.contains(n))
    }

    /// Reads one `output-N` file: its number of records.
    fn output_file(&mut self, path: &Path) -> Result<u64, Stop> {
        let file = File::open(path).map_err(|source| ExportError::Io {
            path: path.to_owned(),
            source,
        })?;
        let mut reader = LogReader::new(BufReader::with_capacity(64 << 10, file));
        let mut record = Vec::new();
        let mut index = 0u64;
        let mut first_pending = 0u64;
        loop {
            let offset = match reader.next_into(&mut record) {
                Ok(Some(offset)) => offset,
                Ok(None) => break,
                Err(LogError::Io(source)) => {
                    return Err(ExportError::Io {
                        path: path.to_owned(),
                        source,
                    }
                    .into());
                }
                Err(LogError::Damaged { offset, reason }) => {
                    return Err(ExportError::Damaged {
                        path: path.to_owned(),
                        record: index,
                        offset,
                        reason,
                    }
                    .into());
                }
            };
            let entity = from_v3(&record, self.target).map_err(|reason| ExportError::Damaged {
                path: path.to_owned(),
                record: index,
                offset,
                reason: reason.to_string(),
            })?;
            self.bytes_read += record.len() as u64;
            index += 1;
            if !self.takes(&entity) {
                continue;
            }
            let size = entity.encoded_len();
            if self.pending.len() >= super::read::BATCH_ENTITIES
                || self.pending_bytes + size > BATCH_BYTES
            {
                self.source = format!("{}, records {first_pending}..{}", path.display(), index - 1);
                self.flush()?;
                first_pending = index - 1;
            }
            self.pending_bytes += size;
            self.pending.push(entity);
        }
        self.source = format!("{}, records {first_pending}..{index}", path.display());
        Ok(index)
    }

    fn takes(&self, entity: &pb::Entity) -> bool {
        let Some(key) = &entity.key else {
            return false;
        };
        let kind = key.path.last().map_or("", |e| e.kind.as_str());
        let namespace = key
            .partition_id
            .as_ref()
            .map_or("", |p| p.namespace_id.as_str());
        self.filter.takes(kind, namespace)
    }

    /// Sends the entities read since the last batch.
    fn flush(&mut self) -> Result<(), Stop> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let batch = Batch {
            entities: std::mem::take(&mut self.pending),
            bytes_read: self.bytes_read,
            source: std::mem::take(&mut self.source),
        };
        self.pending_bytes = 0;
        self.batches
            .blocking_send(Ok(batch))
            .map_err(|_| Stop::Abandoned)
    }
}

/// The sets the overall metadata `overall` points to.
fn pointers(overall: &Path) -> Result<Vec<Pointer>, ExportError> {
    let metadata = |reason: String| ExportError::Metadata {
        path: overall.to_owned(),
        reason,
    };
    let records = records_of(overall, 2)?;
    match records.as_slice() {
        [version, message] if version == OVERALL_VERSION => {
            overall_from_bytes(message).map_err(|reason| metadata(reason.to_string()))
        }
        [version, _] => Err(metadata(format!(
            "an overall metadata of version {:?}; this server reads version 3",
            String::from_utf8_lossy(version)
        ))),
        _ => Err(metadata(format!(
            "{} records where an overall metadata holds 2 (its version, its message)",
            records.len()
        ))),
    }
}

/// The `output-N` files of the set `pointer` names, as its `.export_metadata` lists them.
fn output_files(overall: &Path, pointer: &Pointer) -> Result<Vec<PathBuf>, ExportError> {
    let folder = overall.parent().unwrap_or(Path::new("."));
    let set_file = folder.join(&pointer.metadata_file);
    let bytes = std::fs::read(&set_file).map_err(|source| ExportError::Io {
        path: set_file.clone(),
        source,
    })?;
    let set = set_from_bytes(&bytes).map_err(|reason| ExportError::Metadata {
        path: set_file.clone(),
        reason: reason.to_string(),
    })?;
    let set_folder = set_file.parent().unwrap_or(folder);
    Ok(set
        .kinds
        .iter()
        .flat_map(|(_, files)| files.iter().map(|file| set_folder.join(file)))
        .collect())
}

/// The project the export's first entity names (its application without a `s~` prefix);
/// `None` for an export of no entity.
pub(crate) fn first_project(overall: &Path) -> Result<Option<String>, ExportError> {
    for pointer in pointers(overall)? {
        for path in output_files(overall, &pointer)? {
            let file = File::open(&path).map_err(|source| ExportError::Io {
                path: path.clone(),
                source,
            })?;
            let mut reader = LogReader::new(BufReader::new(file));
            let mut record = Vec::new();
            let damaged = |offset, reason| ExportError::Damaged {
                path: path.clone(),
                record: 0,
                offset,
                reason,
            };
            match reader.next_into(&mut record) {
                Ok(Some(offset)) => {
                    return application(&record)
                        .map(Some)
                        .map_err(|r| damaged(offset, r.to_string()));
                }
                Ok(None) => {}
                Err(LogError::Io(source)) => {
                    return Err(ExportError::Io {
                        path: path.clone(),
                        source,
                    });
                }
                Err(LogError::Damaged { offset, reason }) => return Err(damaged(offset, reason)),
            }
        }
    }
    Ok(None)
}

/// Every record of a small log file (the overall metadata).
fn records_of(path: &Path, most: usize) -> Result<Vec<Vec<u8>>, ExportError> {
    let file = File::open(path).map_err(|source| ExportError::Io {
        path: path.to_owned(),
        source,
    })?;
    let mut reader = LogReader::new(BufReader::new(file));
    let mut records = Vec::new();
    let mut record = Vec::new();
    loop {
        match reader.next_into(&mut record) {
            Ok(Some(_)) if records.len() < most => records.push(std::mem::take(&mut record)),
            Ok(Some(offset)) => {
                return Err(ExportError::Metadata {
                    path: path.to_owned(),
                    reason: format!("more than {most} records (one at byte {offset})"),
                });
            }
            Ok(None) => return Ok(records),
            Err(LogError::Io(source)) => {
                return Err(ExportError::Io {
                    path: path.to_owned(),
                    source,
                });
            }
            Err(LogError::Damaged { offset, reason }) => {
                return Err(ExportError::Damaged {
                    path: path.to_owned(),
                    record: records.len() as u64,
                    offset,
                    reason,
                });
            }
        }
    }
}
