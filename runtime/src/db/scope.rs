//! What every call of the `Db` layer runs against: a backend bound to one partition
//! ([`Scope`]), and, inside a transaction, the transaction's handle ([`TxRef`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::backend::{Backend, TransactionId};
use crate::error::Error;
use crate::model::key::{PartitionId, RawKey};
use crate::model::stored::lacks_partition;
use crate::model::value::{PropertyMap, Value};

/// A backend and the partition (namespace) a handle reads and writes: keys built in code take
/// it, keys of another partition are refused before anything is sent.
#[derive(Clone)]
pub(crate) struct Scope {
    pub(crate) backend: Arc<dyn Backend>,
    pub(crate) partition: PartitionId,
}

impl Scope {
    /// A user's key as the backend sees it: in this partition, which a key without one takes;
    /// a key of another partition is refused before anything is sent.
    pub(crate) fn outgoing(&self, key: &RawKey) -> Result<RawKey, Error> {
        match key.partition() {
            None => Ok(key.clone().with_partition(self.partition.clone())),
            Some(partition) if *partition == self.partition => Ok(key.clone()),
            Some(partition) => Err(Error::WrongPartition {
                key: format!("{key:?}"),
                expected: self.partition.to_string(),
                found: partition.to_string(),
            }),
        }
    }

    /// An entity's properties as the backend stores them: keys held in properties take this
    /// partition unless they carry one (a reference to another namespace is valid).
    pub(crate) fn outgoing_properties(&self, properties: &mut PropertyMap) {
        // Most entities hold no key without a partition: then there is nothing to change
        // (and a map in the stored form stays as it is).
        if properties.view().any(|(_, _, v)| lacks_partition(v)) {
            properties
                .values_mut()
                .for_each(|p| self.outgoing_value(&mut p.value));
        }
    }

    /// A value as the backend sees it: keys in it take this partition unless they carry one.
    pub(crate) fn outgoing_value(&self, value: &mut Value) {
        match value {
            Value::Key(key) if key.partition().is_none() => {
                *key = key.clone().with_partition(self.partition.clone());
            }
            Value::Array(values) => values.iter_mut().for_each(|v| self.outgoing_value(v)),
            Value::Entity(inner) => self.outgoing_properties(inner),
            _ => {}
        }
    }
}

/// A transaction as the calls made inside it see it: its handle, and whether one of them met
/// contention (the attempt is then retried, whatever the body made of the error).
#[derive(Clone, Debug)]
pub(crate) struct TxRef {
    id: TransactionId,
    contended: Arc<AtomicBool>,
}

impl TxRef {
    /// The handle of transaction `id`, which no call has met contention in yet.
    pub(crate) fn new(id: TransactionId) -> TxRef {
        TxRef {
            id,
            contended: Arc::new(AtomicBool::new(false)),
        }
    }

    pub(crate) fn id(&self) -> &TransactionId {
        &self.id
    }

    /// Whether a call inside the transaction met contention.
    pub(crate) fn contended(&self) -> bool {
        self.contended.load(Ordering::Relaxed)
    }

    /// Passes `result` through, noting contention.
    pub(crate) fn note<T>(&self, result: Result<T, Error>) -> Result<T, Error> {
        if let Err(error) = &result
            && error.is_retryable()
        {
            self.contended.store(true, Ordering::Relaxed);
        }
        result
    }
}

/// Passes the result of a call made inside `transaction` (if any) through, noting contention.
pub(crate) fn noted<T>(transaction: Option<&TxRef>, result: Result<T, Error>) -> Result<T, Error> {
    match transaction {
        Some(tx) => tx.note(result),
        None => result,
    }
}
