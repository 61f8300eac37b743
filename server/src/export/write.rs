//! An export's files written: a set's `output-N` files record by record (a new file past
//! [`OUTPUT_FILE_BYTES`]), its `.export_metadata`, and at the end the
//! `.overall_export_metadata` that points to every set, laid out as the legacy emulator lays
//! them out: `{prefix}/{name}/{name}.overall_export_metadata`,
//! `{prefix}/{name}/{namespace}/{kind}/output-N`, where `name` is the export's start
//! (`2026-01-31T12:00:00_123`).

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use gcloud_sdk::google::datastore::v1 as pb;

use super::entity::to_v3;
use super::job::{ExportError, Progress};
use super::log::LogWriter;
use super::proto::{
    EntitySet, OVERALL_VERSION, Pointer, SetMetadata, overall_to_bytes, set_to_bytes,
};

/// An `output-N` file grows to about this many bytes before the next one starts.
pub const OUTPUT_FILE_BYTES: u64 = 256 << 20;

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ExportError + '_ {
    move |source| ExportError::Io {
        path: path.to_owned(),
        source,
    }
}

/// An export being written.
pub(crate) struct Writer {
    /// `{prefix}/{name}`.
    folder: PathBuf,
    name: String,
    start_micros: i64,
    pointers: Vec<Pointer>,
    pub progress: Progress,
}

/// One set being written.
pub(crate) struct SetWriter {
    set: EntitySet,
    folder: PathBuf,
    files: Vec<String>,
    log: Option<LogWriter<BufWriter<File>>>,
    entities: i64,
    bytes: i64,
}

impl Writer {
    /// A new export under `prefix` (an absolute folder, created if missing), named by the
    /// time it starts.
    pub(crate) fn create(prefix: &Path) -> Result<Writer, ExportError> {
        if !prefix.is_absolute() {
            return Err(ExportError::Invalid {
                reason: format!(
                    "the output prefix {} is not an absolute path (this server writes exports \
                     to its own files)",
                    prefix.display()
                ),
            });
        }
        let now = datastore_entity::Timestamp::now();
        // `2026-01-31T12:00:00.123456Z` → `2026-01-31T12:00:00_123`.
        let text = now.to_string();
        let name = format!("{}_{}", &text[..19], &text[20..23]);
        let folder = prefix.join(&name);
        if folder.exists() {
            return Err(ExportError::Invalid {
                reason: format!("{} already exists", folder.display()),
            });
        }
        std::fs::create_dir_all(&folder).map_err(io(&folder))?;
        Ok(Writer {
            folder,
            name,
            start_micros: now.as_micros(),
            pointers: Vec::new(),
            progress: Progress::default(),
        })
    }

    /// Starts writing `set`.
    pub(crate) fn set(&self, set: EntitySet) -> Result<SetWriter, ExportError> {
        let (folder, _) = set.names();
        let folder = self.folder.join(folder);
        std::fs::create_dir_all(&folder).map_err(io(&folder))?;
        Ok(SetWriter {
            set,
            folder,
            files: Vec::new(),
            log: None,
            entities: 0,
            bytes: 0,
        })
    }

    /// Appends `entity` to `set`.
    pub(crate) fn append(
        &mut self,
        set: &mut SetWriter,
        entity: &pb::Entity,
    ) -> Result<(), ExportError> {
        let record = to_v3(entity).map_err(|reason| ExportError::Invalid {
            reason: format!(
                "an entity that cannot be exported ({:?}): {reason}",
                entity.key
            ),
        })?;
        if set
            .log
            .as_ref()
            .is_none_or(|l| l.written() >= OUTPUT_FILE_BYTES)
        {
            set.close()?;
            let name = format!("output-{}", set.files.len());
            let path = set.folder.join(&name);
            let file = File::create(&path).map_err(io(&path))?;
            set.files.push(name);
            set.log = Some(LogWriter::new(BufWriter::with_capacity(256 << 10, file)));
        }
        let Some(log) = set.log.as_mut() else {
            return Ok(());
        };
        let before = log.written();
        let path = set.folder.join(set.files.last().map_or("", String::as_str));
        log.append(&record).map_err(io(&path))?;
        let written = log.written() - before;
        set.entities += 1;
        set.bytes += written as i64;
        self.progress.entities += 1;
        self.progress.bytes += written;
        Ok(())
    }

    /// Ends `set`: its last file closed, its `.export_metadata` written.
    pub(crate) fn finish_set(&mut self, mut set: SetWriter) -> Result<(), ExportError> {
        set.close()?;
        let (folder, metadata_file) = set.set.names();
        let kind = set.set.kind.clone().unwrap_or_default();
        let metadata = SetMetadata {
            name: self.name.clone(),
            start_micros: self.start_micros,
            end_micros: datastore_entity::Timestamp::now().as_micros(),
            kinds: vec![(kind, std::mem::take(&mut set.files))],
        };
        let path = set.folder.join(&metadata_file);
        let bytes = set_to_bytes(&metadata).map_err(|reason| ExportError::Metadata {
            path: path.clone(),
            reason: reason.to_string(),
        })?;
        std::fs::write(&path, bytes).map_err(io(&path))?;
        self.pointers.push(Pointer {
            set: set.set,
            metadata_file: format!("{folder}/{metadata_file}"),
            entities: set.entities,
            bytes: set.bytes,
        });
        Ok(())
    }

    /// Ends the export: its `.overall_export_metadata`, whose path it answers.
    pub(crate) fn finish(self) -> Result<PathBuf, ExportError> {
        let path = self
            .folder
            .join(format!("{}.overall_export_metadata", self.name));
        let message = overall_to_bytes(&self.pointers).map_err(|reason| ExportError::Metadata {
            path: path.clone(),
            reason: reason.to_string(),
        })?;
        let file = File::create(&path).map_err(io(&path))?;
        let mut log = LogWriter::new(BufWriter::new(file));
        log.append(OVERALL_VERSION).map_err(io(&path))?;
        log.append(&message).map_err(io(&path))?;
        log.finish().map_err(io(&path))?;
        Ok(path)
    }
}

impl SetWriter {
    fn close(&mut self) -> Result<(), ExportError> {
        if let Some(log) = self.log.take() {
            let path = self
                .folder
                .join(self.files.last().map_or("", String::as_str));
            log.finish()
                .and_then(|file| file.into_inner().map_err(|e| e.into_error()))
                .and_then(|file| file.sync_all())
                .map_err(io(&path))?;
        }
        Ok(())
    }
}
