//! What every call of the `Db` layer runs against: a backend bound to one partition
//! ([`Scope`]), and, inside a transaction, the transaction's handle ([`TxRef`]).

use std::borrow::Cow;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

#[cfg(feature = "cloud")]
use crate::backend::cloud::wire::Partitions;
#[cfg(feature = "cloud")]
use crate::backend::cloud::wire_form::WireForm;
use crate::backend::{Backend, TransactionId, TransactionMode};
use crate::cache::Caching;
use crate::watch::Watch;
use datastore_entity_core::error::Error;
use datastore_entity_core::model::entity::Entity;
use datastore_entity_core::model::key::{PartitionId, RawKey};
use datastore_entity_core::model::schema::Schema;
#[cfg(feature = "cloud")]
use datastore_entity_core::model::sink::Form;
use datastore_entity_core::model::value::{PropertyMap, Value};
use datastore_entity_core::model::views::lacks_partition;

/// A backend and the partition (namespace) a handle reads and writes: keys built in code take
/// it, keys of another partition are refused before anything is sent.
#[derive(Clone)]
pub(crate) struct Scope {
    pub(crate) backend: Arc<dyn Backend>,
    pub(crate) partition: PartitionId,
    /// What watches this handle's writes for the scale rules (shared by its clones).
    pub(crate) watch: Arc<Watch>,
    /// The entity types declared to the backend already (`Backend::declare`), by the
    /// address of their schema (shared by its clones).
    declared: Arc<std::sync::Mutex<std::collections::HashSet<usize>>>,
    /// On Google Cloud, the wire form entities are written in (key values without a
    /// partition take `partition`); the stored form otherwise.
    #[cfg(feature = "cloud")]
    pub(crate) wire: Option<WireForm>,
    /// The caches in front of the backend, if any (then `backend` is they).
    pub(crate) caching: Option<Caching>,
}

impl Scope {
    /// A scope of `backend` in `partition`, writing entities in the stored form.
    pub(crate) fn new(
        backend: Arc<dyn Backend>,
        partition: PartitionId,
        watch: Arc<Watch>,
    ) -> Self {
        Scope {
            backend,
            partition,
            watch,
            declared: Arc::default(),
            #[cfg(feature = "cloud")]
            wire: None,
            caching: None,
        }
    }

    /// The same scope, its caches changed by `change` (made, in front of the backend, if there
    /// were none).
    pub(crate) fn caching(&self, change: impl FnOnce(Caching) -> Caching) -> Scope {
        let mut scope = self.clone();
        let caching = match &self.caching {
            Some(caching) => caching.clone(),
            None => Caching::new(Arc::clone(&self.backend)),
        };
        let caching = change(caching);
        scope.backend = Arc::new(caching.clone());
        scope.caching = Some(caching);
        // Kinds are declared again, so that the caches learn each kind's policy.
        scope.declared = Arc::default();
        scope
    }

    /// Declares `schema` to the backend (its composite indexes, which the backend maintains
    /// and counts against R-I5), once per handle and its clones: writes, reads and queries
    /// all declare through here, so a kind's schema reaches the backend once.
    pub(crate) async fn declare(&self, schema: &'static Schema) -> Result<(), Error> {
        let address = std::ptr::from_ref(schema).addr();
        let known = |d: &Self| {
            d.declared
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .contains(&address)
        };
        if !known(self) {
            self.backend.declare(schema).await?;
            self.declared
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(address);
        }
        Ok(())
    }

    /// The same scope in namespace `namespace`.
    pub(crate) fn in_namespace(&self, namespace: &str) -> Scope {
        let mut scope = self.clone();
        scope.partition.namespace = namespace.to_owned();
        #[cfg(feature = "cloud")]
        if let Some(wire) = &self.wire {
            scope.wire = Some(WireForm(Arc::new(wire.0.writing_into(&scope.partition))));
        }
        scope
    }

    /// The same scope, writing entities in the wire form of `partitions`' database.
    #[cfg(feature = "cloud")]
    pub(crate) fn writing_wire(mut self, partitions: &Partitions) -> Scope {
        self.wire = Some(WireForm(Arc::new(partitions.writing_into(&self.partition))));
        self
    }

    /// `entity`'s properties, in the form this scope's backend takes best, with key values
    /// in this partition unless they carry one.
    pub(crate) fn outgoing_entity<E: Entity>(&self, entity: &E) -> Result<PropertyMap, Error> {
        #[cfg(feature = "cloud")]
        if let Some(wire) = &self.wire {
            // The sink wrote key values in this partition already.
            return entity.properties_in(Form::foreign(wire));
        }
        let mut properties = entity.to_properties()?;
        self.outgoing_properties(&mut properties);
        Ok(properties)
    }

    /// A user's key as the backend sees it: in this partition, which a key without one takes;
    /// a key of another partition is refused before anything is sent.
    ///
    /// The project: a key read from text may name none (it belongs to this handle's), or the
    /// one NDB's URL-safe text carries. The embedded engine has no project (its handles' is
    /// empty): there a key of any project is this handle's. On Google Cloud a key of another
    /// project is refused, as the service refuses it ("mismatched databases").
    pub(crate) fn outgoing(&self, key: &RawKey) -> Result<RawKey, Error> {
        Ok(match self.outgoing_ref(key)? {
            Cow::Borrowed(key) if key.partition().is_none() => {
                key.clone().with_partition(self.partition.clone())
            }
            key => key.into_owned(),
        })
    }

    /// [`Scope::outgoing`], without a copy where the backend reads `key` as it is: a key in
    /// this partition, or a key without one on a handle of the default partition (the
    /// embedded engine reads a key without a partition as one of the default partition; a
    /// handle on Google Cloud always names its project).
    pub(crate) fn outgoing_ref<'k>(&self, key: &'k RawKey) -> Result<Cow<'k, RawKey>, Error> {
        let mine = &self.partition;
        let Some(partition) = key.partition() else {
            return Ok(match *mine == PartitionId::default() {
                true => Cow::Borrowed(key),
                false => Cow::Owned(key.clone().with_partition(mine.clone())),
            });
        };
        if partition == mine {
            return Ok(Cow::Borrowed(key));
        }
        let project = partition.project_id.is_empty()
            || mine.project_id.is_empty()
            || partition.project_id == mine.project_id;
        if project
            && partition.database_id == mine.database_id
            && partition.namespace == mine.namespace
        {
            return Ok(Cow::Owned(key.clone().with_partition(mine.clone())));
        }
        // Named by what differs: the project only when it does.
        let shown = |p: &PartitionId| match project {
            true => p.to_string(),
            false => format!("{p} of project {:?}", p.project_id),
        };
        Err(Error::WrongPartition {
            key: format!("{key:?}"),
            expected: shown(mine),
            found: shown(partition),
        })
    }

    /// An entity's properties as the backend stores them: keys held in properties take this
    /// partition unless they carry one (a reference to another namespace is valid).
    pub(crate) fn outgoing_properties(&self, properties: &mut PropertyMap) {
        // Most entities hold no key without a partition: then there is nothing to change
        // (and a map in the stored form stays as it is).
        if properties.facts().keys && properties.view().any(|(_, _, v, _)| lacks_partition(v)) {
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

/// A transaction as the calls made inside it see it: its mode, whether it has begun (the
/// first read begins it, in the same call where the backend allows: `begin_with_*` (`ReadAs::Begin`)),
/// and whether a call inside it met contention (the attempt is then retried, whatever the
/// body made of the error).
#[derive(Clone, Debug)]
pub(crate) struct TxRef {
    shared: Arc<TxShared>,
}

#[derive(Debug)]
struct TxShared {
    mode: TransactionMode,
    partition: PartitionId,
    id: tokio::sync::OnceCell<TransactionId>,
    contended: AtomicBool,
}

impl TxRef {
    /// A transaction of `mode` in `partition`, not begun yet.
    pub(crate) fn new(mode: TransactionMode, partition: PartitionId) -> TxRef {
        TxRef {
            shared: Arc::new(TxShared {
                mode,
                partition,
                id: tokio::sync::OnceCell::new(),
                contended: AtomicBool::new(false),
            }),
        }
    }

    /// Records the handle of a transaction begun on its own.
    pub(crate) fn set_begun(&self, id: TransactionId) {
        let _ = self.shared.id.set(id);
    }

    /// The transaction's handle, once a call has begun it.
    pub(crate) fn begun(&self) -> Option<&TransactionId> {
        self.shared.id.get()
    }

    pub(crate) fn mode(&self) -> &TransactionMode {
        &self.shared.mode
    }

    pub(crate) fn partition(&self) -> &PartitionId {
        &self.shared.partition
    }

    /// Whether a call inside the transaction met contention.
    pub(crate) fn contended(&self) -> bool {
        self.shared.contended.load(Ordering::Relaxed)
    }

    /// Passes `result` through, noting contention.
    pub(crate) fn note<T>(&self, result: Result<T, Error>) -> Result<T, Error> {
        if let Err(error) = &result
            && error.is_retryable()
        {
            self.shared.contended.store(true, Ordering::Relaxed);
        }
        result
    }

    /// Makes a read inside the transaction: `read` with its handle once it has begun, else
    /// `begin` (the read that begins it, returning the handle too). Reads made at the same time
    /// before it has begun wait for the one that begins it.
    pub(crate) async fn read<T, R, RF, B, BF>(&self, read: R, begin: B) -> Result<T, Error>
    where
        R: FnOnce(TransactionId) -> RF,
        RF: Future<Output = Result<T, Error>>,
        B: FnOnce(TransactionMode) -> BF,
        BF: Future<Output = Result<(TransactionId, T), Error>>,
    {
        let result = async {
            if let Some(id) = self.begun() {
                return read(id.clone()).await;
            }
            let mut first = None;
            let id = self
                .shared
                .id
                .get_or_try_init(|| async {
                    let (id, value) = begin(self.shared.mode.clone()).await?;
                    first = Some(value);
                    Ok::<_, Error>(id)
                })
                .await?;
            match first {
                Some(value) => Ok(value),
                None => read(id.clone()).await,
            }
        }
        .await;
        self.note(result)
    }
}

/// Looks `keys` up, inside `transaction` if any (beginning it if this is its first read).
pub(crate) async fn lookup(
    scope: &Scope,
    keys: &[RawKey],
    transaction: Option<&TxRef>,
) -> Result<Vec<Option<PropertyMap>>, Error> {
    let backend = &*scope.backend;
    match transaction {
        None => backend.lookup(keys, None).await,
        Some(tx) => {
            tx.read(
                |id| async move { backend.lookup(keys, Some(&id)).await },
                |mode| async move { backend.begin_with_lookup(keys, tx.partition(), &mode).await },
            )
            .await
        }
    }
}
