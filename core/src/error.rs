//! The one error type of the crate.

use datastore_entity_names::{NameRole, NameViolation};

use crate::query_rule::QueryRule;

/// Everything that can go wrong, each variant saying what, which value, and how to fix it.
///
/// A refusal by this crate names its rule ([`Error::InvalidQuery`]'s [`QueryRule`], the
/// rule-specific variants). What Google Cloud (or an emulator) answers with a gRPC status
/// becomes:
///
/// | gRPC status | Variant | [`is_retryable`](Error::is_retryable) |
/// | --- | --- | --- |
/// | `ABORTED` | [`Error::Aborted`] (contention; `Db::transaction` retries) | yes |
/// | `UNAVAILABLE` | [`Error::Unavailable`] (a transient outage) | yes |
/// | `ALREADY_EXISTS` | [`Error::AlreadyExists`] (an insert of a key that exists) | no |
/// | `NOT_FOUND` | [`Error::NotFound`] (an update of a key that does not) | no |
/// | `INVALID_ARGUMENT`, "transaction … expired or is invalid" | [`Error::TransactionClosed`] | no |
/// | `FAILED_PRECONDITION` naming an index | [`Error::MissingIndex`], with the `index.yaml` to add | no |
/// | every other status (`INVALID_ARGUMENT`, `DEADLINE_EXCEEDED`, `PERMISSION_DENIED`, `RESOURCE_EXHAUSTED`, …) | [`Error::Service`] with its [`ServiceCode`] and message | no |
///
/// The embedded engine answers with the same variants where the service would answer the
/// status; `datastore-entity-server` maps each variant back to the status.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A kind, property, key name or namespace breaks a naming rule (R-N1..R-N7).
    #[error("the {} `{}` {violation}{}", role.noun(), cut(.value), fix_hint(.role, .value))]
    InvalidName {
        /// What the name was for.
        role: NameRole,
        /// The rejected name (lossily decoded when it was not UTF-8).
        value: String,
        /// The rule it breaks.
        violation: NameViolation,
    },

    /// A numeric id outside `1..=i64::MAX` (R-K2).
    #[error(
        "the id {value} is not valid: numeric ids must be between 1 and {} [R-K2]; \
         leave the id empty (`Option<KeyId>` = None) to let the service allocate one",
        i64::MAX
    )]
    InvalidId {
        /// The rejected id.
        value: i128,
    },

    /// A geo point outside latitude `-90..=90` / longitude `-180..=180`.
    #[error(
        "the geo point ({lat}, {lng}) is out of range: latitude must be in -90..=90 and longitude in -180..=180"
    )]
    InvalidGeoPoint {
        /// The latitude given.
        lat: f64,
        /// The longitude given.
        lng: f64,
    },

    /// A vector that cannot be stored: no dimension, more than 2,048, or a value that is not a
    /// finite number.
    #[error("invalid vector: {reason}")]
    InvalidVector {
        /// What is wrong.
        reason: String,
    },

    /// A key that cannot be used as given.
    #[error("invalid key {key}: {reason}")]
    InvalidKey {
        /// The key, in the `Kind:id/Kind:"name"` notation.
        key: String,
        /// What is wrong with it and how to fix it.
        reason: String,
    },

    /// A key of another partition (namespace or database) than the handle's. Nothing was read
    /// or written: one tenant's key never reads or writes another tenant's entity.
    #[error(
        "the key {key} belongs to {found}, but this handle reads and writes {expected}; \
         nothing was read or written. Use the key with the handle of its own namespace \
         (`db.namespace(...)`), or build a new key with the generated key builder"
    )]
    WrongPartition {
        /// The key.
        key: String,
        /// The handle's partition.
        expected: String,
        /// The key's partition.
        found: String,
    },

    /// A stored property could not be turned into the field's Rust type.
    #[error(
        "cannot load property `{property}` of kind `{kind}`{}: expected {expected}, found \
         {found}; the stored data and the struct disagree, fix the field's type or the data",
        .key.as_ref().map(|k| format!(" (entity {k})")).unwrap_or_default()
    )]
    Decode {
        /// The key of the entity being loaded, where it is known (as `{:?}` shows it).
        key: Option<Box<str>>,
        /// The kind being loaded.
        kind: String,
        /// The property (dotted path for embedded entities, `[i]` for array elements).
        property: String,
        /// The type the field expects.
        expected: String,
        /// What the store holds.
        found: String,
    },

    /// A cursor that was not produced by this query, was altered, or is not a cursor at all (R-Q3).
    #[error(
        "invalid cursor: {reason}; use the `next` cursor of a page of the same query, unchanged"
    )]
    InvalidCursor {
        /// What is wrong with it.
        reason: String,
    },

    /// The query cannot be run as written: it breaks `rule`.
    #[error("invalid query on kind `{kind}`: {rule}")]
    InvalidQuery {
        /// The kind queried.
        kind: String,
        /// The rule it breaks, with what breaks it (its message says how to fix it).
        rule: QueryRule,
    },

    /// The same entity appears twice in one commit (R-A4). Nothing was written.
    #[error(
        "the key {key} appears more than once in one commit [R-A4]; nothing was written. \
         Write each entity at most once per commit: merge the changes first"
    )]
    DuplicateKey {
        /// The repeated key.
        key: String,
    },

    /// An indexed string or byte string is longer than the service indexes (R-I4). Nothing was written.
    #[error(
        "property `{property}` of kind `{kind}` is indexed and {len} bytes long, more than the \
         {max} bytes an index entry can hold [R-I4]; nothing was written. Mark the field \
         `#[exclude_from_index]` (large values are never queried)"
    )]
    IndexedValueTooLarge {
        /// The kind written.
        kind: String,
        /// The property (dotted path inside embedded entities).
        property: String,
        /// The value's length in bytes.
        len: usize,
        /// The limit in bytes.
        max: usize,
    },

    /// An entity would have more index entries than the service allows (R-I5). Nothing was written.
    #[error(
        "the entity {key} of kind `{kind}` would have {entries} index entries, more than the \
         {max} the service allows for one entity [R-I5]; nothing was written. Property \
         `{property}` contributes the most ({contribution} entries): mark it \
         `#[exclude_from_index]` if it is never queried, store fewer values in it, or drop \
         a composite index that multiplies it"
    )]
    TooManyIndexEntries {
        /// The kind written.
        kind: String,
        /// The entity's key.
        key: String,
        /// Its index entries: built-in plus composite.
        entries: usize,
        /// The limit.
        max: usize,
        /// The property that contributes the most entries.
        property: String,
        /// How many entries that property contributes.
        contribution: usize,
    },

    /// One entity, or one embedded entity value in it, would index more values than Firestore
    /// in Datastore mode takes (R-I5): each indexed value counts, each element of an indexed
    /// array too (duplicates and nulls included), an embedded entity value as one in its
    /// parent, its own properties in its own count. Nothing was written.
    #[error(
        "the entity {key} of kind `{kind}` would index {values} values in {}, more than          the {max} Firestore in Datastore mode takes in one entity (\"Too many indexed          properties\") [R-I5]; nothing was written. Property `{property}` holds the most          ({contribution}): mark it `#[exclude_from_index]` if it is never queried, or store          fewer values in it", if .within.is_empty() { "the entity".to_owned() } else { format!("its embedded entity `{}`", .within) }
    )]
    TooManyIndexedValues {
        /// The kind written.
        kind: String,
        /// The entity's key.
        key: Box<str>,
        /// The embedded entity value counted (its dotted path), empty for the entity itself.
        within: Box<str>,
        /// The indexed values counted there.
        values: usize,
        /// The limit.
        max: usize,
        /// The property (dotted path) holding the most of them.
        property: String,
        /// How many values that property holds.
        contribution: usize,
    },

    /// A `#[sharded]` counter would leave the range of an `i64` (each of its `n` shards holds
    /// at most `i64::MAX / n` either way, so that its total always fits). Nothing was written.
    #[error(
        "the counter `{field}` (shards of kind `{kind}`) cannot take this increment: its total \
         would leave a 64-bit integer, or the increment is more than one of its n shards holds \
         (i64::MAX / n); nothing was written"
    )]
    CounterOverflow {
        /// The kind of the counter's shards.
        kind: String,
        /// The counter's field.
        field: String,
    },

    /// A commit larger than the service takes: its entities (replicas included) and the
    /// keys it deletes over the 10 MiB of a request and of a transaction. Nothing was written.
    #[error(
        "one commit would carry {bytes} bytes of entities and keys ({mutations} mutations, \
         replicas and counter shards included), more than the service's limit of {max} for a \
         request and for a transaction; nothing was written. Write fewer entities per call, or \
         use `Db::put_chunked`, which commits them in as many commits as they need (not \
         atomically)"
    )]
    CommitTooLarge {
        /// The mutations the commit would hold.
        mutations: usize,
        /// Its size: each entity's, as the service measures it, and each deleted key's.
        bytes: usize,
        /// The limit.
        max: usize,
    },

    /// A value the service cannot store (an array directly inside an array). Nothing was written.
    #[error("property `{property}` of kind `{kind}` holds {reason}; nothing was written")]
    InvalidValue {
        /// The kind written.
        kind: String,
        /// The property (dotted path inside embedded entities).
        property: String,
        /// What is wrong and how to fix it.
        reason: String,
    },

    /// An entity larger than the service stores. Nothing was written.
    #[error(
        "the entity {key} is {size} bytes, more than the {max} bytes the service stores in one \
         entity; nothing was written. Move large values to another entity or to Cloud Storage"
    )]
    EntityTooLarge {
        /// The entity's key.
        key: String,
        /// Its encoded size, in bytes.
        size: usize,
        /// The limit, in bytes.
        max: usize,
    },

    /// A query needs a composite index that does not exist (R-I2).
    #[error(
        "{message}; declare it with `#[entity(index(...))]` and deploy index.yaml:\n{index_yaml}"
    )]
    MissingIndex {
        /// What the backend said.
        message: String,
        /// The `index.yaml` entry to add.
        index_yaml: String,
    },

    /// `Db::put_chunked` wrote some chunks, then one failed.
    #[error("{written} entities were written (in earlier commits), then a commit failed: {source}")]
    PartiallyWritten {
        /// How many entities were written, from the start of the slice.
        written: usize,
        /// Why the next commit failed.
        source: Box<Error>,
    },

    /// The service refused a call for a reason none of the other variants describes.
    #[error("the service refused the call ({code}): {message}")]
    Service {
        /// The gRPC status code (`INVALID_ARGUMENT`, `DEADLINE_EXCEEDED`, ...).
        code: ServiceCode,
        /// The service's message.
        message: String,
    },

    /// `insert` of a key that already exists. Nothing was written.
    #[error("the entity {key} already exists; use `put` to overwrite it")]
    AlreadyExists {
        /// The existing key.
        key: String,
    },

    /// `update` of a key that does not exist. Nothing was written.
    #[error("the entity {key} does not exist; use `put` to create it")]
    NotFound {
        /// The missing key.
        key: String,
    },

    /// A conditional write (`put_if_version`, `delete_if_version`) found the entity at another
    /// version than the one it was read at: someone wrote it since (or it was deleted, or
    /// created). Nothing of the commit was written; read it again and decide.
    #[error(
        "the entity {key} is at version {stored}, not {expected}: it changed since it was read; nothing was written"
    )]
    Conflict {
        /// The entity's key.
        key: String,
        /// The version the write expected (`0`: that it did not exist).
        expected: u64,
        /// The version it is at (`0`: it does not exist), where the backend says.
        stored: u64,
    },

    /// The transaction lost a race with another commit (contention). Retrying may succeed (R-A2).
    #[error("transaction aborted: {reason}; it was rolled back and can be retried")]
    Aborted {
        /// Which entity changed under the transaction.
        reason: String,
    },

    /// The embedded engine's file cannot be used: it is open elsewhere, unreadable, or not
    /// written by this crate. Nothing was written.
    #[error("storage error: {reason}")]
    Storage {
        /// What failed, with the file's path.
        reason: String,
        /// The error of the storage engine or the operating system that caused it, if one did
        /// (also `std::error::Error::source`).
        #[source]
        source: Option<StorageSource>,
    },

    /// An invariant of this crate failed: a bug, never the caller's mistake nor a passing
    /// condition, so never retried. Please report it.
    #[error("an invariant of datastore-entity failed: {invariant}; please report this bug")]
    Internal {
        /// What should have held.
        invariant: &'static str,
    },

    /// A setting of the handle cannot be used as given (an endpoint's scheme, an id that cannot
    /// go in a request header): fix the configuration; retrying cannot help.
    #[error("the {setting} `{value}` cannot be used: {expected}")]
    InvalidSetting {
        /// The setting.
        setting: &'static str,
        /// Its value.
        value: String,
        /// What it must be.
        expected: &'static str,
    },

    /// The backend is not reachable right now; retrying later may succeed.
    #[error("the backend is unavailable: {reason}")]
    Unavailable {
        /// What failed.
        reason: String,
    },

    /// A commit was sent but its answer was lost (the connection broke, or the deadline passed
    /// first): it may or may not have been applied. It is not retried blindly: an upsert
    /// (`put`) can safely be sent again, an `insert` would then meet its own entity
    /// (`AlreadyExists`), and a transaction's body would run twice — read the entities back to
    /// learn what happened.
    #[error(
        "the commit's outcome is unknown: it was sent to {endpoint}, but {reason}; it may have \
         been applied — read the entities back before writing them again (a `put` is safe to \
         repeat, an `insert` is not)"
    )]
    CommitOutcomeUnknown {
        /// Where the commit was sent.
        endpoint: String,
        /// What happened to its answer.
        reason: String,
    },

    /// Text that is not what it should be (a timestamp, a key).
    #[error("`{text}` is not {what}: {reason}")]
    Parse {
        /// What the text should have been.
        what: &'static str,
        /// The text.
        text: String,
        /// What is wrong with it.
        reason: String,
    },

    /// No credentials could be found or used to call Google Cloud. Nothing was sent to the
    /// service.
    #[error(
        "no usable Google Cloud credentials: {reason}; run `gcloud auth application-default \
         login`, set GOOGLE_APPLICATION_CREDENTIALS to a key file, run on Google Cloud with a \
         service account, or give `CloudBuilder::credentials` (an emulator needs none: set \
         DATASTORE_EMULATOR_HOST)"
    )]
    Credentials {
        /// What was missing or failed.
        reason: String,
    },

    /// The backend cannot do this at all (the embedded engine keeps no past versions to
    /// read at a `read_time`); nothing was sent.
    #[error("not supported by this backend: {reason}")]
    Unsupported {
        /// What was asked, why it cannot be done, and where it can.
        reason: String,
    },

    /// A transaction handle was used after its transaction ended.
    #[error(
        "the transaction has already ended; use the `Tx` only inside the transaction's closure"
    )]
    TransactionClosed,
}

/// The error that caused an [`Error::Storage`]: the storage engine's (redb's) or the operating
/// system's, shared so that the error stays cheap to clone; compared by its message.
#[derive(Clone)]
pub struct StorageSource(std::sync::Arc<dyn std::error::Error + Send + Sync>);

impl StorageSource {
    /// `cause`, kept as the source of an [`Error::Storage`].
    pub fn new(cause: impl std::error::Error + Send + Sync + 'static) -> StorageSource {
        StorageSource(std::sync::Arc::new(cause))
    }

    /// The cause, as it was returned.
    pub fn get(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        &*self.0
    }
}

impl std::fmt::Debug for StorageSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&*self.0, f)
    }
}

impl std::fmt::Display for StorageSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&*self.0, f)
    }
}

impl std::error::Error for StorageSource {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

impl PartialEq for StorageSource {
    fn eq(&self, other: &StorageSource) -> bool {
        self.0.to_string() == other.0.to_string()
    }
}

impl Error {
    /// [`Error::Storage`] without a cause of another library's.
    pub fn storage(reason: impl Into<String>) -> Error {
        Error::Storage {
            reason: reason.into(),
            source: None,
        }
    }

    /// [`Error::Storage`] caused by `source` (redb's or the operating system's error).
    pub fn storage_caused(
        reason: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Error {
        Error::Storage {
            reason: reason.into(),
            source: Some(StorageSource::new(source)),
        }
    }

    /// Whether retrying the same operation may succeed (contention or a transient outage), as
    /// `Db::transaction` does (R-A2).
    pub fn is_retryable(&self) -> bool {
        matches!(self, Error::Aborted { .. } | Error::Unavailable { .. })
    }
}

/// A `; use ... instead` suffix when the name can be fixed mechanically.
fn fix_hint(role: &NameRole, value: &str) -> String {
    match datastore_entity_names::suggest(*role, value) {
        Some(fixed) => format!("; use `{}` instead", cut(&fixed)),
        None => String::new(),
    }
}

impl Error {
    /// Builds [`Error::InvalidName`].
    pub fn name(role: NameRole, value: impl Into<String>, violation: NameViolation) -> Self {
        Error::InvalidName {
            role,
            value: value.into(),
            violation,
        }
    }
}

/// A gRPC status code, as the service (or the embedded engine, speaking as it) answers a
/// call it refuses: [`Error::Service`]'s `code`.
///
/// Compares equal to its canonical name, so `code == "INVALID_ARGUMENT"` reads as it did when
/// the code was a string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ServiceCode {
    /// `OK`: Not an error (never in an `Error`).
    Ok,
    /// `CANCELLED`: The call was cancelled, usually by the caller.
    Cancelled,
    /// `UNKNOWN`: An error the service could not describe.
    Unknown,
    /// `INVALID_ARGUMENT`: The request is invalid whatever the state of the data.
    InvalidArgument,
    /// `DEADLINE_EXCEEDED`: The deadline passed before the call completed (it may have been applied).
    DeadlineExceeded,
    /// `NOT_FOUND`: Something the request names does not exist.
    NotFound,
    /// `ALREADY_EXISTS`: Something the request creates exists already.
    AlreadyExists,
    /// `PERMISSION_DENIED`: The caller may not do this.
    PermissionDenied,
    /// `RESOURCE_EXHAUSTED`: A quota or a limit was reached.
    ResourceExhausted,
    /// `FAILED_PRECONDITION`: The data is not in the state the request needs (a missing index, a read time too old).
    FailedPrecondition,
    /// `ABORTED`: Contention: the call may succeed if retried.
    Aborted,
    /// `OUT_OF_RANGE`: A value past the range the service accepts.
    OutOfRange,
    /// `UNIMPLEMENTED`: The server does not offer this call (an emulator, for some).
    Unimplemented,
    /// `INTERNAL`: The server broke one of its own invariants.
    Internal,
    /// `UNAVAILABLE`: The server cannot be reached for now: retry.
    Unavailable,
    /// `DATA_LOSS`: Data was lost or corrupted.
    DataLoss,
    /// `UNAUTHENTICATED`: The call carries no valid credentials.
    Unauthenticated,
}

impl ServiceCode {
    /// The code's canonical name: `"INVALID_ARGUMENT"`, `"DEADLINE_EXCEEDED"`, …
    pub const fn name(self) -> &'static str {
        match self {
            ServiceCode::Ok => "OK",
            ServiceCode::Cancelled => "CANCELLED",
            ServiceCode::Unknown => "UNKNOWN",
            ServiceCode::InvalidArgument => "INVALID_ARGUMENT",
            ServiceCode::DeadlineExceeded => "DEADLINE_EXCEEDED",
            ServiceCode::NotFound => "NOT_FOUND",
            ServiceCode::AlreadyExists => "ALREADY_EXISTS",
            ServiceCode::PermissionDenied => "PERMISSION_DENIED",
            ServiceCode::ResourceExhausted => "RESOURCE_EXHAUSTED",
            ServiceCode::FailedPrecondition => "FAILED_PRECONDITION",
            ServiceCode::Aborted => "ABORTED",
            ServiceCode::OutOfRange => "OUT_OF_RANGE",
            ServiceCode::Unimplemented => "UNIMPLEMENTED",
            ServiceCode::Internal => "INTERNAL",
            ServiceCode::Unavailable => "UNAVAILABLE",
            ServiceCode::DataLoss => "DATA_LOSS",
            ServiceCode::Unauthenticated => "UNAUTHENTICATED",
        }
    }
}

impl std::fmt::Display for ServiceCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl PartialEq<str> for ServiceCode {
    fn eq(&self, name: &str) -> bool {
        self.name() == name
    }
}

impl PartialEq<&str> for ServiceCode {
    fn eq(&self, name: &&str) -> bool {
        self.name() == *name
    }
}

/// `text` as an error message quotes it: whole when short, else its first 100 characters and
/// how long it is (a message echoing a 100 KB name would be refused by clients as metadata).
pub fn cut(text: &str) -> std::borrow::Cow<'_, str> {
    const SHOWN: usize = 100;
    match text.char_indices().nth(SHOWN) {
        None => std::borrow::Cow::Borrowed(text),
        Some((at, _)) => {
            std::borrow::Cow::Owned(format!("{}… ({} bytes)", &text[..at], text.len()))
        }
    }
}
