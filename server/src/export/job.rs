//! What an import or an export is asked and answers: the entities it takes (the admin API's
//! `EntityFilter`), how far it has got, and what stops it.

use std::path::PathBuf;

/// Which entities an import or an export takes, as the admin API's `EntityFilter` names
/// them: the kinds (none: every kind) and the namespaces (none: every namespace; `""` is the
/// default one).
///
/// ```
/// use datastore_entity_server::export::Filter;
///
/// let tasks = Filter { kinds: vec!["Task".into()], namespaces: vec!["".into()] };
/// assert!(tasks.takes("Task", ""));
/// assert!(!tasks.takes("Task", "tenant-a"));
/// assert!(Filter::default().takes("Anything", "anywhere"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    /// The kinds taken; empty: every kind.
    pub kinds: Vec<String>,
    /// The namespaces taken (`""`: the default one); empty: every namespace.
    pub namespaces: Vec<String>,
}

impl Filter {
    /// Whether an entity of `kind` in `namespace` is taken.
    pub fn takes(&self, kind: &str, namespace: &str) -> bool {
        (self.kinds.is_empty() || self.kinds.iter().any(|k| k == kind))
            && (self.namespaces.is_empty() || self.namespaces.iter().any(|n| n == namespace))
    }
}

/// How far an import or an export has got: the entities committed (or written) and the
/// bytes of their records read (or, with the records' headers, written) so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Progress {
    /// Entities committed by an import, written by an export.
    pub entities: u64,
    /// Bytes of the `output-N` files' records read (their entities), or of the files
    /// written.
    pub bytes: u64,
}

/// Why an import or an export stopped. An import commits in batches as it reads, so one that
/// fails has committed what `committed` says (the batches before the failure, each whole),
/// and nothing of the rest; importing the same export again upserts the same entities.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// A file could not be read, written or created.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// A record of an `output-N` file is damaged (a checksum that does not match, a record
    /// cut short) or holds no entity that can be read.
    #[error("{}: record {record} (at byte {offset}): {reason}", path.display())]
    Damaged {
        /// The file.
        path: PathBuf,
        /// The record's number in the file, from 0.
        record: u64,
        /// Its offset in the file.
        offset: u64,
        /// What is wrong with it.
        reason: String,
    },
    /// A metadata file is missing, damaged or names what this server cannot read.
    #[error("{}: {reason}", path.display())]
    Metadata {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The request itself cannot be served (a path that is not absolute, a filter of names
    /// the service refuses).
    #[error("{reason}")]
    Invalid {
        /// Why.
        reason: String,
    },
    /// The Datastore API refused a call the import or export made: a commit of entities read
    /// from `source`, or a query.
    #[error("{source_name}: {status}")]
    Refused {
        /// What was being read or committed.
        source_name: String,
        /// The API's answer.
        status: tonic::Status,
        /// What was committed or written before.
        committed: Progress,
    },
}

impl ExportError {
    /// The status the API answers this with: `INVALID_ARGUMENT` for what the request or its
    /// files hold, `NOT_FOUND` for a missing file, the refusal's own status otherwise.
    pub fn status(&self) -> tonic::Status {
        use tonic::{Code, Status};
        match self {
            ExportError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
                Status::not_found(self.to_string())
            }
            ExportError::Io { .. } => Status::internal(self.to_string()),
            ExportError::Damaged { .. }
            | ExportError::Metadata { .. }
            | ExportError::Invalid { .. } => Status::invalid_argument(self.to_string()),
            ExportError::Refused { status, .. } => Status::new(
                match status.code() {
                    Code::Ok => Code::Internal,
                    code => code,
                },
                self.to_string(),
            ),
        }
    }
}
