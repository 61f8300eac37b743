//! The write pipeline of every entity: a user's entity or key becomes a [`Write`]; a commit
//! checks them all (R-A4, R-I5, the service's limits), completes the keys replicas need, adds
//! each write's companions (replicas, counter shards on delete: `format/companion.rs`), and
//! sends the mutations in one backend call.

use crate::backend::{
    Change, Committed, Condition, Mask, Mutation, OnConflict, PropertyTransform, TransactionId,
};
use datastore_entity_core::error::Error;
use datastore_entity_core::format::companion::{ENTITY, OWNER, companion_key, replica};
use datastore_entity_core::model::entity::Entity;
use datastore_entity_core::model::key::{Key, RawKey};
use datastore_entity_core::model::schema::Schema;
use datastore_entity_core::model::stored::Writer;
use datastore_entity_core::model::value::PropertyMap;
use datastore_entity_core::rules::commit::{MAX_COMMIT_BYTES, check_mutations};

use super::scope::Scope;

/// What a write does to the entity itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    Insert,
    Update,
    Upsert,
    Delete,
}

/// One write of a commit, before its companions are added: the entity (in the backend's
/// partition), which of its stored properties it sets, and the schema that says which
/// companions it has.
#[derive(Clone)]
pub(crate) struct Write {
    pub(crate) op: Op,
    pub(crate) key: RawKey,
    pub(crate) properties: PropertyMap,
    pub(crate) mask: Mask,
    pub(crate) schema: Option<&'static Schema>,
    /// Whether a delete takes the shards of the entity's counters with it (not when they
    /// were deleted before, in commits of their own).
    shards: bool,
    /// Applied only if this holds (`put_if_version`, `delete_if_version`).
    condition: Option<Condition>,
    /// Applied by the service after the write (`transform`, `put_transformed`).
    transforms: Vec<PropertyTransform>,
}

impl Write {
    /// How many mutations this write is, its replicas included (not the counter shards a
    /// delete takes with it).
    pub(crate) fn mutations(&self) -> usize {
        1 + self
            .schema
            .and_then(|s| s.replicas.as_ref())
            .map_or(0, |r| r.copies as usize)
    }

    /// How many bytes this write adds to its commit, its replicas included (not the counter
    /// shards a delete takes with it).
    pub(crate) fn bytes(&self) -> usize {
        let own = match self.op {
            Op::Delete => Writer::key_len(&self.key),
            _ => self.properties.entity_size(&self.key),
        };
        own.saturating_mul(self.mutations())
    }

    /// The write of `entity` in `scope`: the properties its type declares, the others left
    /// as stored.
    pub(crate) fn entity<E: Entity>(scope: &Scope, entity: &E, op: Op) -> Result<Write, Error> {
        let key = scope.outgoing(entity.entity_key()?.raw())?;
        key.check_writable()?;
        let properties = scope.outgoing_entity(entity)?;
        Ok(Write {
            op,
            key,
            properties,
            mask: Mask::declared(E::SCHEMA),
            schema: Some(E::SCHEMA),
            shards: true,
            condition: None,
            transforms: Vec::new(),
        })
    }

    /// `self`, replacing the stored entity whole: properties its type does not declare are
    /// removed.
    pub(crate) fn replacing(self) -> Write {
        Write {
            mask: Mask::Whole,
            ..self
        }
    }

    /// The delete of `key` in `scope`.
    pub(crate) fn delete<E: Entity>(scope: &Scope, key: &Key<E>) -> Result<Write, Error> {
        Ok(Write {
            op: Op::Delete,
            key: scope.outgoing(key.raw())?,
            properties: PropertyMap::new(),
            mask: Mask::Whole,
            schema: Some(E::SCHEMA),
            shards: true,
            condition: None,
            transforms: Vec::new(),
        })
    }

    /// `self`, a delete whose counter shards were deleted already.
    pub(crate) fn without_shards(self) -> Write {
        Write {
            shards: false,
            ..self
        }
    }

    /// A write of an entity without companions (counter shards themselves).
    pub(crate) fn raw(op: Op, key: RawKey, properties: PropertyMap) -> Write {
        Write {
            op,
            key,
            properties,
            mask: Mask::Whole,
            schema: None,
            shards: true,
            condition: None,
            transforms: Vec::new(),
        }
    }

    /// `self`, applied only if the entity is still at `version` (`0`: does not exist).
    pub(crate) fn if_version(self, version: u64) -> Write {
        Write {
            condition: Some(Condition::Version(version)),
            ..self
        }
    }

    /// `self`, followed by `transforms`.
    pub(crate) fn transformed(self, transforms: Vec<PropertyTransform>) -> Write {
        Write { transforms, ..self }
    }

    /// The update of `key` that writes nothing itself (an empty mask): what carries transforms
    /// alone.
    pub(crate) fn transforms_only<E: Entity>(
        scope: &Scope,
        key: &Key<E>,
        transforms: Vec<PropertyTransform>,
    ) -> Result<Write, Error> {
        Ok(Write {
            op: Op::Update,
            key: scope.outgoing(key.raw())?,
            properties: PropertyMap::new(),
            mask: Mask::Paths(Vec::new()),
            schema: Some(E::SCHEMA),
            shards: true,
            condition: None,
            transforms,
        })
    }

    fn replicated(&self) -> bool {
        self.schema.is_some_and(|s| s.replicas.is_some())
    }
}

/// Commits `writes` and their companions in one commit: all or none. Returns the complete
/// key of each write, in order, in the backend's partition.
pub(crate) async fn commit(
    scope: &Scope,
    writes: Vec<Write>,
    transaction: Option<&TransactionId>,
) -> Result<Vec<RawKey>, Error> {
    let committed = commit_stamped(scope, writes, transaction).await?;
    Ok(committed.results.into_iter().map(|r| r.key).collect())
}

/// Commits `writes` and their companions in one commit: all or none. Returns each write's
/// result (its complete key in the backend's partition, its new version), in order, and the
/// commit's time.
pub(crate) async fn commit_stamped(
    scope: &Scope,
    writes: Vec<Write>,
    transaction: Option<&TransactionId>,
) -> Result<Committed, Error> {
    let mut attempt = 1;
    loop {
        let (changes, primaries, guarded) = prepare(scope, writes.clone(), transaction).await?;
        match scope.backend.commit_changes(changes, transaction).await {
            Ok(mut committed) => {
                committed.results.truncate(primaries);
                return Ok(committed);
            }
            // An entity the flattened-array guard read changed before the write: read again.
            Err(Error::Conflict { .. }) if guarded && attempt < GUARD_ATTEMPTS => attempt += 1,
            Err(error) => return Err(error),
        }
    }
}

/// How many times a write whose flattened arrays were checked (`guard_flattened`) is tried
/// when the entity changes between the check and the write.
const GUARD_ATTEMPTS: u32 = 5;

/// Refuses a write of some of an entity's flattened arrays that leaves others in place
/// (issue #48): a type that knows `sku` of a flattened `Vec<Item { sku, qty }>` writes
/// `lines.sku` alone, and `lines.qty` would keep its old length and order — one element's
/// quantity paired with another's sku. Each such write (an upsert or update that keeps what
/// its type does not declare) looks its entity up first (one lookup, in the transaction if
/// there is one) and is refused, nothing written, if the entity holds a `lines.*` array its
/// type does not declare; outside a transaction the write is then made on the condition that
/// the entity is still as read. Returns whether it added such conditions.
async fn guard_flattened(
    scope: &Scope,
    writes: &mut [Write],
    transaction: Option<&TransactionId>,
) -> Result<bool, Error> {
    let guarded: Vec<usize> = (0..writes.len())
        .filter(|&i| {
            let w = &writes[i];
            matches!(w.op, Op::Upsert | Op::Update)
                && matches!(w.mask, Mask::Declared(_))
                && w.key.is_complete()
                && w.schema
                    .is_some_and(|s| flattened_arrays(s).next().is_some())
        })
        .collect();
    if guarded.is_empty() {
        return Ok(false);
    }
    let keys: Vec<RawKey> = guarded.iter().map(|&i| writes[i].key.clone()).collect();
    let found = scope.backend.lookup_stamped(&keys, transaction).await?;
    let mut conditioned = false;
    for (&i, found) in guarded.iter().zip(found) {
        let write = &mut writes[i];
        let Some(schema) = write.schema else { continue };
        if let Some((stored, _)) = &found {
            for (name, declared) in flattened_arrays(schema) {
                let unknown = stored.keys().find(|stored_name| {
                    stored_name
                        .strip_prefix(name)
                        .and_then(|rest| rest.strip_prefix('.'))
                        .is_some_and(|sub| !declared.properties.iter().any(|p| p.name == sub))
                });
                if let Some(unknown) = unknown {
                    return Err(Error::InvalidValue {
                        kind: write.key.kind().to_owned(),
                        property: unknown.to_owned(),
                        reason: format!(
                            "one of the flattened arrays of `{name}`, which `{}` does not \
                             declare: writing the arrays it declares alone would pair their \
                             elements with the old elements of `{unknown}`. Declare every \
                             property of the flattened type, or write with `replace` (which \
                             removes what the type does not declare)",
                            schema.kind
                        ),
                    });
                }
            }
        }
        if transaction.is_none() && write.condition.is_none() {
            let version = found.as_ref().map_or(0, |(_, stamp)| stamp.version);
            write.condition = Some(Condition::Version(version));
            conditioned = true;
        }
    }
    Ok(conditioned)
}

/// The `#[property(flatten)]` arrays of `schema`: each one's name and its element's type.
fn flattened_arrays(
    schema: &'static Schema,
) -> impl Iterator<Item = (&'static str, &'static Schema)> {
    schema.properties.iter().filter_map(|p| {
        let inner = p.embedded().filter(|_| p.flatten && p.repeated())?;
        Some((p.name, inner))
    })
}

/// The changes of the writes (first, in order, each under its condition) and of their
/// companions; and how many writes there were. The backend's commit checks them all (`rules::commit`: R-A4, R-I5, the limits,
/// the 10 MiB of a commit) before anything is written or sent; the types written are declared to
/// it first, so it counts their composite indexes.
pub(crate) async fn prepare(
    scope: &Scope,
    mut writes: Vec<Write>,
    transaction: Option<&TransactionId>,
) -> Result<(Vec<Change>, usize, bool), Error> {
    let mut schemas: Vec<&'static Schema> = Vec::new();
    for schema in writes.iter().filter_map(|w| w.schema) {
        if !schemas.iter().any(|s| std::ptr::eq(*s, schema)) {
            schemas.push(schema);
        }
    }
    for schema in schemas {
        scope.declare(schema).await?;
    }

    // Replicas are keyed by the entity's complete key: allocate the missing ids first (an
    // update or a delete needs a complete key; the check refuses it).
    let incomplete: Vec<usize> = (0..writes.len())
        .filter(|&i| {
            let w = &writes[i];
            // Transforms too: the service answers no transform result for an entity whose
            // id it allocated in the commit (the Firestore emulator, probed).
            let keyed = w.replicated() || !w.transforms.is_empty();
            keyed && !w.key.is_complete() && matches!(w.op, Op::Insert | Op::Upsert)
        })
        .collect();
    if !incomplete.is_empty() {
        let templates = incomplete.iter().map(|&i| writes[i].key.clone()).collect();
        let allocated = scope.backend.allocate_ids(templates).await?;
        for (&i, key) in incomplete.iter().zip(allocated) {
            writes[i].key = key;
        }
    }
    let guarded = guard_flattened(scope, &mut writes, transaction).await?;
    let primaries = writes.len();
    let mut mutations = Vec::with_capacity(primaries);
    let mut extras = Vec::with_capacity(primaries);
    let mut companions = Vec::new();
    for mut write in writes {
        extras.push((write.condition, std::mem::take(&mut write.transforms)));
        expand(write, &mut mutations, &mut companions);
    }
    mutations.append(&mut companions);
    // The rules of the mutations themselves (how many, R-A4, complete keys) are refused here,
    // before the backend is called; the backend checks them again with the entities
    // (`rules::commit`), whoever calls it.
    check_mutations(mutations.iter())?;
    scope.watch.observe(&mutations);
    let extras = extras
        .into_iter()
        .chain(std::iter::repeat_with(|| (None, Vec::new())));
    let changes = mutations
        .into_iter()
        .zip(extras)
        .map(|(mutation, (condition, transforms))| Change {
            mutation,
            condition,
            on_conflict: OnConflict::Fail,
            transforms,
        })
        .collect();
    Ok((changes, primaries, guarded))
}

/// `writes` cut, in order, into the runs that fit one commit each: at most `mutations`
/// mutations (replicas count) and a sixteenth under [`MAX_COMMIT_BYTES`] (room for the
/// replicas' longer keys); a write larger than that is a run of its own (its commit then says
/// why it is refused).
pub(crate) fn runs<'w>(
    writes: impl IntoIterator<Item = &'w Write>,
    mutations: usize,
) -> Vec<std::ops::Range<usize>> {
    let budget = MAX_COMMIT_BYTES - MAX_COMMIT_BYTES / 16;
    let mut runs = Vec::new();
    let (mut start, mut end, mut count, mut bytes) = (0, 0, 0, 0_usize);
    for write in writes {
        let (more, size) = (write.mutations(), write.bytes());
        if end > start && (count + more > mutations || bytes.saturating_add(size) > budget) {
            runs.push(start..end);
            (start, count, bytes) = (end, 0, 0);
        }
        (end, count, bytes) = (end + 1, count + more, bytes.saturating_add(size));
    }
    if end > start {
        runs.push(start..end);
    }
    runs
}

/// The mutation of one write, and the mutations of its companions.
fn expand(write: Write, primary: &mut Vec<Mutation>, companions: &mut Vec<Mutation>) {
    let Write {
        op,
        key,
        properties,
        mask,
        schema,
        shards,
        condition: _,
        transforms: _,
    } = write;
    if let Some(schema) = schema {
        if let Some(replicas) = &schema.replicas {
            for slot in 0..replicas.copies {
                let at = companion_key(&key, replicas.kind, slot);
                // A replica holds the entity as one embedded property: the mask reaches into it.
                companions.push(match op {
                    Op::Delete => Mutation::Delete(at),
                    _ => Mutation::Upsert(
                        at,
                        replica(&key, &properties),
                        Mask::Paths(vec![vec![OWNER.into()]]).with(mask.inside(ENTITY)),
                    ),
                });
            }
        }
        if op == Op::Delete && shards {
            for counter in schema.counters {
                companions.extend(
                    (0..counter.shards)
                        .map(|s| Mutation::Delete(companion_key(&key, counter.kind, s))),
                );
            }
        }
    }
    primary.push(match op {
        Op::Insert => Mutation::Insert(key, properties, mask),
        Op::Update => Mutation::Update(key, properties, mask),
        Op::Upsert => Mutation::Upsert(key, properties, mask),
        Op::Delete => Mutation::Delete(key),
    });
}
