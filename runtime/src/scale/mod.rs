//! The scale patterns of Google's pages, built on companion entities (R-S1, R-S2, R-S3):
//! counter shards and read replicas live beside the entity they serve, and every write,
//! read and delete of the entity takes them along.
//!
//! Companions are root entities (never in the owner's entity group, R-E2) of their own kind
//! (`Post.likes.shard`, `SiteConfig.replica`), so queries of the owner's kind never see them.
//! Their names are scattered (R-K4) and spell the owner's path, so the companions of two
//! owners never collide; each also stores its owner's key, which is checked when it is read.

pub mod counter;
pub(crate) mod replica;
pub mod sharded_index;

use base64::Engine as _;

use crate::backend::{Mutation, TransactionId};
use crate::codec::{Writer, fnv1a_128};
use crate::entity::{CounterSchema, Schema};
use crate::index_config::check_index_entries;
use crate::key::IdOrName;
use crate::value::{Property, PropertyMap, Value};
use crate::{Db, Entity, Error, Key, KeyName, RawKey};

/// The most mutations the service takes in one commit.
pub const MAX_MUTATIONS: usize = 500;

/// The property of a companion entity that holds its owner's key.
pub(crate) const OWNER: &str = "owner";

/// The name of companion `slot` of `owner`: a scattered prefix, then the owner's path.
fn companion_name(owner: &RawKey, slot: u32) -> KeyName {
    let mut path = Writer::default();
    path.path(owner);
    let spelled = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&path.bytes);
    // Key names hold at most 1,500 bytes: a very deep or long-named owner is spelled by a
    // 128-bit hash instead (and the stored owner key still guards against a collision).
    let natural = if spelled.len() <= 1_400 {
        format!("{spelled}.{slot}")
    } else {
        format!("h{:032x}.{slot}", fnv1a_128(&path.bytes))
    };
    // The natural name is base64url, digits, `.` and `h`: always a valid key name.
    KeyName::scattered(natural).unwrap_or_else(|_| KeyName::trusted(format!("{slot}")))
}

/// The key of companion `slot` of `owner`, in the owner's partition.
pub(crate) fn companion_key(owner: &RawKey, kind: &str, slot: u32) -> RawKey {
    RawKey::child(
        None,
        kind,
        Some(IdOrName::Name(companion_name(owner, slot))),
    )
    .with_partition(owner.partition().cloned().unwrap_or_default())
}

/// Checks that a companion read for `owner` really belongs to it.
fn check_owner(owner: &RawKey, key: &RawKey, properties: &PropertyMap) -> Result<(), Error> {
    match properties.get(OWNER).map(|p| &p.value) {
        Some(Value::Key(stored)) if stored.path() == owner.path() => Ok(()),
        other => Err(Error::Decode {
            kind: key.kind().to_owned(),
            property: OWNER.to_owned(),
            expected: format!("the owner key {owner:?}"),
            found: match other {
                Some(Value::Key(stored)) => format!("{stored:?}"),
                Some(value) => value.type_name().to_owned(),
                None => "no owner".to_owned(),
            },
        }),
    }
}

/// What a write does to the entity itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    Insert,
    Update,
    Upsert,
    Delete,
}

/// One write of a commit, before its companions are added: the entity (in the backend's
/// partition) and the schema that says which companions it has.
pub(crate) struct Write {
    pub(crate) op: Op,
    pub(crate) key: RawKey,
    pub(crate) properties: PropertyMap,
    pub(crate) schema: Option<&'static Schema>,
}

impl Write {
    /// The write of `entity` through `db`.
    pub(crate) fn entity<E: Entity>(db: &Db, entity: &E, op: Op) -> Result<Write, Error> {
        let key = db.outgoing(entity.entity_key()?.raw())?;
        let mut properties = entity.to_properties();
        db.outgoing_properties(&mut properties);
        Ok(Write {
            op,
            key,
            properties,
            schema: Some(E::SCHEMA),
        })
    }

    /// The delete of `key` through `db`.
    pub(crate) fn delete<E: Entity>(db: &Db, key: &Key<E>) -> Result<Write, Error> {
        Ok(Write {
            op: Op::Delete,
            key: db.outgoing(key.raw())?,
            properties: PropertyMap::new(),
            schema: Some(E::SCHEMA),
        })
    }

    /// A write of an entity without companions (counter shards themselves).
    pub(crate) fn raw(op: Op, key: RawKey, properties: PropertyMap) -> Write {
        Write {
            op,
            key,
            properties,
            schema: None,
        }
    }

    fn replicated(&self) -> bool {
        self.schema.is_some_and(|s| s.replicas.is_some())
    }
}

/// Commits `writes` and their companions in one commit: all or none. Returns the complete
/// key of each write, in order, in the backend's partition.
pub(crate) async fn commit(
    db: &Db,
    writes: Vec<Write>,
    transaction: Option<&TransactionId>,
) -> Result<Vec<RawKey>, Error> {
    let (mutations, primaries) = prepare(db, writes).await?;
    let mut keys = db.backend().commit(mutations, transaction).await?;
    keys.truncate(primaries);
    Ok(keys)
}

/// Every check of a commit (R-A4, R-I5, the 500-mutation limit), done before anything is sent, then the mutations
/// of the writes (first, in order) and of their companions; and how many writes there were.
pub(crate) async fn prepare(
    db: &Db,
    mut writes: Vec<Write>,
) -> Result<(Vec<Mutation>, usize), Error> {
    for write in &writes {
        if let (Some(schema), Op::Insert | Op::Update | Op::Upsert) = (write.schema, write.op) {
            check_index_entries(schema, &write.key, &write.properties)?;
        }
    }
    crate::db::check_unique(writes.iter().map(|w| &w.key))?;
    // The service refuses these with INVALID_ARGUMENT: there is no entity to name.
    if let Some(write) = writes
        .iter()
        .find(|w| matches!(w.op, Op::Update | Op::Delete) && !w.key.is_complete())
    {
        return Err(Error::InvalidKey {
            key: format!("{:?}", write.key),
            reason: "an update or a delete needs a complete key (with its id or name)".into(),
        });
    }
    // Replicas are keyed by the entity's complete key: allocate the missing ids first.
    let incomplete: Vec<usize> = (0..writes.len())
        .filter(|&i| writes[i].replicated() && !writes[i].key.is_complete())
        .collect();
    if !incomplete.is_empty() {
        let templates = incomplete.iter().map(|&i| writes[i].key.clone()).collect();
        let allocated = db.backend().allocate_ids(templates).await?;
        for (&i, key) in incomplete.iter().zip(allocated) {
            writes[i].key = key;
        }
    }
    let primaries = writes.len();
    let mut mutations = Vec::with_capacity(primaries);
    let mut companions = Vec::new();
    for write in writes {
        expand(write, &mut mutations, &mut companions);
    }
    mutations.append(&mut companions);
    for mutation in &mutations {
        if let Mutation::Insert(key, properties)
        | Mutation::Update(key, properties)
        | Mutation::Upsert(key, properties) = mutation
        {
            crate::limits::check_entity(key, properties)?;
        }
    }
    if mutations.len() > MAX_MUTATIONS {
        return Err(Error::TooManyMutations {
            count: mutations.len(),
            max: MAX_MUTATIONS,
        });
    }
    Ok((mutations, primaries))
}

/// The mutation of one write, and the mutations of its companions.
fn expand(write: Write, primary: &mut Vec<Mutation>, companions: &mut Vec<Mutation>) {
    let Write {
        op,
        key,
        properties,
        schema,
    } = write;
    if let Some(schema) = schema {
        for slot in 0..schema.replicas.as_ref().map_or(0, |r| r.copies) {
            let replica = companion_key(&key, replica::kind(schema), slot);
            companions.push(match op {
                Op::Delete => Mutation::Delete(replica),
                _ => Mutation::Upsert(replica, replica::encode(&key, &properties)),
            });
        }
        if op == Op::Delete {
            for counter in schema.counters {
                companions.extend(
                    (0..counter.shards)
                        .map(|s| Mutation::Delete(companion_key(&key, counter.kind, s))),
                );
            }
        }
    }
    primary.push(match op {
        Op::Insert => Mutation::Insert(key, properties),
        Op::Update => Mutation::Update(key, properties),
        Op::Upsert => Mutation::Upsert(key, properties),
        Op::Delete => Mutation::Delete(key),
    });
}

/// The keys of every shard of every counter of `owner`.
fn shard_keys<'s>(schema: &'s Schema, owner: &'s RawKey) -> impl Iterator<Item = RawKey> + 's {
    schema
        .counters
        .iter()
        .flat_map(move |c| (0..c.shards).map(move |s| companion_key(owner, c.kind, s)))
}

/// Sums the shards of `counter` found by a lookup.
fn sum_shards(
    owner: &RawKey,
    counter: &CounterSchema,
    shards: impl Iterator<Item = (RawKey, Option<PropertyMap>)>,
) -> Result<i64, Error> {
    let mut total: i64 = 0;
    for (key, found) in shards {
        let Some(properties) = found else { continue };
        check_owner(owner, &key, &properties)?;
        let count = counter::shard_count(&key, &properties)?;
        total = total
            .checked_add(count)
            .ok_or_else(|| counter::overflow(counter))?;
    }
    Ok(total)
}

/// Reads entities by key, with their companions, in one lookup: a random replica of each
/// replicated entity, and every shard of every counter (R-S1, R-S2). A replicated entity whose
/// replica is missing (written before `#[replicated]` was added, or never written) is read
/// from its own key in a second lookup.
pub(crate) async fn load<E: Entity>(
    db: &Db,
    keys: &[Key<E>],
    transaction: Option<&TransactionId>,
) -> Result<Vec<Option<E>>, Error> {
    let schema = E::SCHEMA;
    let owners: Vec<RawKey> = keys
        .iter()
        .map(|k| db.outgoing(k.raw()))
        .collect::<Result<_, _>>()?;
    let shards_each: usize = schema.counters.iter().map(|c| c.shards as usize).sum();
    let mut lookup = Vec::with_capacity(owners.len() * (1 + shards_each));
    for owner in &owners {
        lookup.push(match &schema.replicas {
            None => owner.clone(),
            Some(r) => companion_key(owner, r.kind, fastrand::u32(..r.copies.max(1))),
        });
    }
    for owner in &owners {
        lookup.extend(shard_keys(schema, owner));
    }
    let mut found = db.backend().lookup(&lookup, transaction).await?;
    let shard_results = found.split_off(owners.len());
    let mut entities: Vec<Option<PropertyMap>> = Vec::with_capacity(owners.len());
    let mut missing = Vec::new();
    for (i, (slot, owner)) in found.into_iter().zip(&owners).enumerate() {
        entities.push(match (&schema.replicas, slot) {
            (None, slot) => slot,
            (_, Some(replica)) => Some(replica::decode(owner, &lookup[i], replica)?),
            (_, None) => {
                missing.push(i);
                None
            }
        });
    }
    if !missing.is_empty() {
        let originals: Vec<RawKey> = missing.iter().map(|&i| owners[i].clone()).collect();
        let again = db.backend().lookup(&originals, transaction).await?;
        for (i, slot) in missing.into_iter().zip(again) {
            entities[i] = slot;
        }
    }
    let mut shard_results = lookup[owners.len()..].iter().cloned().zip(shard_results);
    owners
        .iter()
        .zip(entities)
        .map(|(owner, slot)| {
            // Consume this owner's shards whether or not the entity exists.
            let totals = schema
                .counters
                .iter()
                .map(|c| sum_shards(owner, c, shard_results.by_ref().take(c.shards as usize)))
                .collect::<Result<Vec<i64>, Error>>()?;
            slot.map(|mut properties| {
                fill_counters(schema, &mut properties, &totals);
                E::from_entity(owner, properties)
            })
            .transpose()
        })
        .collect()
}

/// Puts each counter's total where the entity's field reads it from.
fn fill_counters(schema: &Schema, properties: &mut PropertyMap, totals: &[i64]) {
    for (counter, total) in schema.counters.iter().zip(totals) {
        properties.insert(counter.name, Property::excluded(Value::Integer(*total)));
    }
}

/// Fills the counters of entities a query returned, with one lookup for the whole page.
pub(crate) async fn with_counters(
    db: &Db,
    schema: &'static Schema,
    rows: &mut [(RawKey, PropertyMap)],
    transaction: Option<&TransactionId>,
) -> Result<(), Error> {
    if schema.counters.is_empty() || rows.is_empty() {
        return Ok(());
    }
    let lookup: Vec<RawKey> = rows
        .iter()
        .flat_map(|(owner, _)| shard_keys(schema, owner))
        .collect();
    let found = db.backend().lookup(&lookup, transaction).await?;
    let mut shard_results = lookup.into_iter().zip(found);
    for (owner, properties) in rows {
        let totals = schema
            .counters
            .iter()
            .map(|c| sum_shards(owner, c, shard_results.by_ref().take(c.shards as usize)))
            .collect::<Result<Vec<i64>, Error>>()?;
        fill_counters(schema, properties, &totals);
    }
    Ok(())
}
