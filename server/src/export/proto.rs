//! The messages of a managed export, read and written by their descriptors
//! (`export/export_v3.bin`, written by `export/descriptors.py`): App Engine's `EntityProto`
//! (`storage_onestore_v3`, as Google's App Engine SDK for Python publishes it, strings as
//! bytes) in each record of an `output-N` file; `OverallExportMetadata` (the
//! `.overall_export_metadata` file, a log of two records: its version, `"3"`, then the
//! message) and `Backup` (each `.export_metadata` file, the bare message), as Google's legacy
//! Datastore emulator compiles them.

use std::sync::LazyLock;

use gcloud_sdk::prost::{DecodeError, Message};
use prost_reflect::{
    DescriptorError, DescriptorPool, DynamicMessage, MessageDescriptor, ReflectMessage,
    SetFieldError, Value,
};

/// The descriptors of the export's messages.
static POOL: LazyLock<Result<DescriptorPool, DescriptorError>> = LazyLock::new(|| {
    DescriptorPool::decode(include_bytes!("../../export/export_v3.bin").as_slice())
});

/// What an export's message could not be read or written as: a mistake in a file (or, for
/// the descriptors, a bug of the server), reported with its file and record by the caller.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum Malformed {
    /// The descriptors built into the server do not decode (a bug of the server).
    #[error("the export descriptors do not decode: {0}")]
    Descriptors(&'static DescriptorError),
    /// The descriptors built into the server lack a message (a bug of the server).
    #[error("no descriptor of {0}")]
    NoDescriptor(String),
    /// The bytes are not the message they should be.
    #[error("not {expected}: {source}")]
    NotA {
        /// The message expected.
        expected: &'static str,
        /// What decoding said.
        source: DecodeError,
    },
    /// A field refused a value (a bug of the server's writer).
    #[error("{field}: {source}")]
    Field {
        /// The message and field.
        field: String,
        /// What the descriptor said.
        source: SetFieldError,
    },
    /// A part the message needs is missing.
    #[error("{0}")]
    Missing(&'static str),
    /// A set of entities of a type this server does not know.
    #[error("an entity set of {field} {value}")]
    SetType {
        /// `kind_type` or `namespace_type`.
        field: &'static str,
        /// Its value.
        value: i64,
    },
    /// Embedded entities nested deeper than the server reads.
    #[error("embedded entities nested deeper than {0}")]
    TooDeep(usize),
    /// A key's path element with both an id and a name.
    #[error("a key's element with both an id and a name")]
    IdAndName,
    /// A property without its value.
    #[error("property {0:?} without its value")]
    NoValue(String),
    /// A timestamp outside the range the service stores.
    #[error("property {0:?}: a timestamp out of range")]
    TimestampOutOfRange(String),
    /// An array inside an array, which the format cannot hold.
    #[error("property {0:?}: an array inside an array")]
    ArrayInArray(String),
    /// An embedded entity's bytes that are not an entity.
    #[error("an embedded entity that is {0}")]
    Embedded(Box<Malformed>),
}

/// The package of the entity's messages.
pub(crate) const ENTITY: &str = "storage_onestore_v3_bytes";
/// The package of the overall metadata's messages.
const ADMIN_JOBS: &str = "apphosting.client.admin_jobs_v3";
/// The package of a set's metadata.
const DATASTORE_ADMIN: &str = "apphosting.ext.datastore_admin";

/// The version the overall metadata's first record holds (the legacy emulator's
/// `OVERALL_EXPORT_METADATA_VERSION`).
pub(crate) const OVERALL_VERSION: &[u8] = b"3";

/// The descriptor of message `name` (its full name).
pub(crate) fn message(name: &str) -> Result<MessageDescriptor, Malformed> {
    let pool = POOL.as_ref().map_err(Malformed::Descriptors)?;
    pool.get_message_by_name(name)
        .ok_or_else(|| Malformed::NoDescriptor(name.to_owned()))
}

/// A message's field `name`: its value, or `None` when it is not set.
pub(crate) fn field(message: &DynamicMessage, name: &str) -> Option<Value> {
    message
        .has_field_by_name(name)
        .then(|| message.get_field_by_name(name).map(|v| v.into_owned()))
        .flatten()
}

/// A message's string field `name` (`""` when not set).
pub(crate) fn text(message: &DynamicMessage, name: &str) -> String {
    match field(message, name) {
        Some(Value::String(text)) => text,
        _ => String::new(),
    }
}

/// A message's integer field `name` (0 when not set).
pub(crate) fn int(message: &DynamicMessage, name: &str) -> i64 {
    match field(message, name) {
        Some(Value::I64(n)) => n,
        Some(Value::I32(n) | Value::EnumNumber(n)) => i64::from(n),
        _ => 0,
    }
}

/// A message's repeated message field `name`.
pub(crate) fn messages(message: &DynamicMessage, name: &str) -> Vec<DynamicMessage> {
    match field(message, name) {
        Some(Value::List(values)) => values
            .into_iter()
            .filter_map(|v| match v {
                Value::Message(m) => Some(m),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// A new message of `name`.
pub(crate) fn new(name: &str) -> Result<DynamicMessage, Malformed> {
    message(name).map(DynamicMessage::new)
}

/// Sets field `name` of `message`, checked against its descriptor.
pub(crate) fn set(message: &mut DynamicMessage, name: &str, value: Value) -> Result<(), Malformed> {
    message
        .try_set_field_by_name(name, value)
        .map_err(|source| Malformed::Field {
            field: format!("{}.{name}", message.descriptor().full_name()),
            source,
        })
}

/// Which entities a set of an export holds: one kind or all, one namespace or all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EntitySet {
    /// `None`: every kind.
    pub kind: Option<String>,
    /// `None`: every namespace; `Some("")`: the default one.
    pub namespace: Option<String>,
}

impl EntitySet {
    /// The set's folder and its metadata's file name, as the legacy emulator names them:
    /// `all_namespaces/all_kinds/all_namespaces_all_kinds.export_metadata`,
    /// `namespace_ns1/kind_Task/namespace_ns1_kind_Task.export_metadata`, ….
    pub(crate) fn names(&self) -> (String, String) {
        let namespace = match self.namespace.as_deref() {
            None => "all_namespaces".to_owned(),
            Some("") => "default_namespace".to_owned(),
            Some(namespace) => format!("namespace_{namespace}"),
        };
        let kind = match &self.kind {
            None => "all_kinds".to_owned(),
            Some(kind) => format!("kind_{kind}"),
        };
        let folder = format!("{namespace}/{kind}");
        let file = format!("{namespace}_{kind}.export_metadata");
        (folder, file)
    }
}

/// One set of an export, as the overall metadata points to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pointer {
    pub set: EntitySet,
    /// The set's metadata file, relative to the overall metadata's folder.
    pub metadata_file: String,
    pub entities: i64,
    pub bytes: i64,
}

/// The overall metadata's message.
pub(crate) fn overall_to_bytes(pointers: &[Pointer]) -> Result<Vec<u8>, Malformed> {
    let mut overall = new(&format!("{ADMIN_JOBS}.OverallExportMetadata"))?;
    let mut list = Vec::new();
    for pointer in pointers {
        let mut spec = new(&format!("{ADMIN_JOBS}.EntitySetSpec"))?;
        let (kind_type, kind) = match &pointer.set.kind {
            Some(kind) => (1, kind.clone()),
            None => (2, String::new()),
        };
        let (namespace_type, namespace) = match pointer.set.namespace.as_deref() {
            Some("") => (1, String::new()),
            Some(namespace) => (2, namespace.to_owned()),
            None => (3, String::new()),
        };
        set(&mut spec, "kind_type", Value::EnumNumber(kind_type))?;
        set(&mut spec, "kind", Value::String(kind))?;
        set(
            &mut spec,
            "namespace_type",
            Value::EnumNumber(namespace_type),
        )?;
        set(&mut spec, "namespace", Value::String(namespace))?;
        let mut entry = new(&format!("{ADMIN_JOBS}.SingleExportMetadataPointer"))?;
        set(&mut entry, "entity_set_spec", Value::Message(spec))?;
        set(
            &mut entry,
            "export_metadata_file",
            Value::String(pointer.metadata_file.clone()),
        )?;
        set(&mut entry, "num_entities", Value::I64(pointer.entities))?;
        set(&mut entry, "num_bytes", Value::I64(pointer.bytes))?;
        list.push(Value::Message(entry));
    }
    set(&mut overall, "export_pointers", Value::List(list))?;
    Ok(overall.encode_to_vec())
}

/// The overall metadata's pointers, from its message.
pub(crate) fn overall_from_bytes(bytes: &[u8]) -> Result<Vec<Pointer>, Malformed> {
    let descriptor = message(&format!("{ADMIN_JOBS}.OverallExportMetadata"))?;
    let overall = DynamicMessage::decode(descriptor, bytes).map_err(|source| Malformed::NotA {
        expected: "an OverallExportMetadata",
        source,
    })?;
    messages(&overall, "export_pointers")
        .iter()
        .map(|entry| {
            let spec = match field(entry, "entity_set_spec") {
                Some(Value::Message(spec)) => spec,
                _ => return Err(Malformed::Missing("a pointer without its entity_set_spec")),
            };
            let kind = match int(&spec, "kind_type") {
                1 => Some(text(&spec, "kind")),
                2 => None,
                value => {
                    return Err(Malformed::SetType {
                        field: "kind_type",
                        value,
                    });
                }
            };
            let namespace = match int(&spec, "namespace_type") {
                1 => Some(String::new()),
                2 => Some(text(&spec, "namespace")),
                3 => None,
                value => {
                    return Err(Malformed::SetType {
                        field: "namespace_type",
                        value,
                    });
                }
            };
            Ok(Pointer {
                set: EntitySet { kind, namespace },
                metadata_file: text(entry, "export_metadata_file"),
                entities: int(entry, "num_entities"),
                bytes: int(entry, "num_bytes"),
            })
        })
        .collect()
}

/// A set's metadata (`Backup`): the export's name and times, and each kind's files (the
/// kind `""` for a set of every kind).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SetMetadata {
    pub name: String,
    pub start_micros: i64,
    pub end_micros: i64,
    pub kinds: Vec<(String, Vec<String>)>,
}

/// A set's metadata as its file's bytes.
pub(crate) fn set_to_bytes(metadata: &SetMetadata) -> Result<Vec<u8>, Malformed> {
    let mut backup = new(&format!("{DATASTORE_ADMIN}.Backup"))?;
    let mut info = new(&format!("{DATASTORE_ADMIN}.BackupInfo"))?;
    set(
        &mut info,
        "backup_name",
        Value::String(metadata.name.clone()),
    )?;
    set(
        &mut info,
        "start_timestamp",
        Value::I64(metadata.start_micros),
    )?;
    set(&mut info, "end_timestamp", Value::I64(metadata.end_micros))?;
    set(&mut backup, "backup_info", Value::Message(info))?;
    let mut kinds = Vec::new();
    for (kind, files) in &metadata.kinds {
        let mut entry = new(&format!("{DATASTORE_ADMIN}.KindBackupInfo"))?;
        set(&mut entry, "kind", Value::String(kind.clone()))?;
        let files = files.iter().cloned().map(Value::String).collect();
        set(&mut entry, "file", Value::List(files))?;
        kinds.push(Value::Message(entry));
    }
    set(&mut backup, "kind_info", Value::List(kinds))?;
    Ok(backup.encode_to_vec())
}

/// A set's metadata from its file's bytes.
pub(crate) fn set_from_bytes(bytes: &[u8]) -> Result<SetMetadata, Malformed> {
    let descriptor = message(&format!("{DATASTORE_ADMIN}.Backup"))?;
    let backup = DynamicMessage::decode(descriptor, bytes).map_err(|source| Malformed::NotA {
        expected: "an export_metadata (Backup) message",
        source,
    })?;
    let info = match field(&backup, "backup_info") {
        Some(Value::Message(info)) => info,
        _ => DynamicMessage::new(message(&format!("{DATASTORE_ADMIN}.BackupInfo"))?),
    };
    let kinds = messages(&backup, "kind_info")
        .iter()
        .map(|entry| {
            let files = match field(entry, "file") {
                Some(Value::List(files)) => files
                    .into_iter()
                    .filter_map(|f| match f {
                        Value::String(f) => Some(f),
                        _ => None,
                    })
                    .collect(),
                _ => Vec::new(),
            };
            (text(entry, "kind"), files)
        })
        .collect();
    Ok(SetMetadata {
        name: text(&info, "backup_name"),
        start_micros: int(&info, "start_timestamp"),
        end_micros: int(&info, "end_timestamp"),
        kinds,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The legacy emulator's files of an export of two sets (`kinds: [All, Nsk]`,
    /// `namespaceIds: ["", ns1]`), byte for byte.
    const OVERALL: &[u8] = b"\x0a\x59\x0a\x0b\x08\x01\x12\x03All\x18\x01\x22\x00\x12\x45\
        default_namespace/kind_All/default_namespace_kind_All.export_metadata\x18\x02\x20\xcb\
        \x15\x0a\x53\x0a\x0e\x08\x01\x12\x03Nsk\x18\x02\x22\x03ns1\x12\x3d\
        namespace_ns1/kind_Nsk/namespace_ns1_kind_Nsk.export_metadata\x18\x01\x20\x60";
    const SET: &[u8] = b"\x0a\x2b\x0a\x172026-11-28T11:28:36_014\x10\x8a\xf7\xe6\xd1\xc7\xaa\
        \x98\x03\x18\xd1\xfa\xe6\xd1\xc7\xaa\x98\x03\x12\x0f\x0a\x03All\x12\x08output-0";

    #[test]
    fn the_legacy_emulators_metadata_reads_and_writes_back_the_same() {
        let pointers = overall_from_bytes(OVERALL).unwrap();
        assert_eq!(pointers.len(), 2);
        assert_eq!(
            pointers[1],
            Pointer {
                set: EntitySet {
                    kind: Some("Nsk".into()),
                    namespace: Some("ns1".into())
                },
                metadata_file: "namespace_ns1/kind_Nsk/namespace_ns1_kind_Nsk.export_metadata"
                    .into(),
                entities: 1,
                bytes: 96,
            }
        );
        assert_eq!(
            pointers[0].set.names().1,
            "default_namespace_kind_All.export_metadata"
        );
        assert_eq!(overall_to_bytes(&pointers).unwrap(), OVERALL);
        let set = set_from_bytes(SET).unwrap();
        assert_eq!(set.name, "2026-11-28T11:28:36_014");
        assert_eq!(set.kinds, [("All".to_owned(), vec!["output-0".to_owned()])]);
        assert_eq!(set_to_bytes(&set).unwrap(), SET);
    }
}
