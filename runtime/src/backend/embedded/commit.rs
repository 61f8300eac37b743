//! A commit's batch: every entity as the commit leaves it checked once (`rules::limits`),
//! then what exists (an insert of an entity that does, an update of one that does not), ids
//! allocated, and only the index entries that change.

use datastore_entity_core::hash::Map;

use super::candidates;
use super::history::Undo;
use super::ids::Ids;
use super::index::{
    self, Composite, TableName, decode_entity, entity_value, split_entity, version_at,
};
use super::store::{Batch, Key, Store};
use crate::backend::{Change, ChangeResult, Condition, Mask, Mutation, OnConflict, Stamp};
use datastore_entity_core::error::{Error, ServiceCode};
use datastore_entity_core::format::file::ENTITIES;
use datastore_entity_core::model::key::{IdOrName, RawKey};
use datastore_entity_core::model::scalar::Timestamp;
use datastore_entity_core::model::value::{Annotations, MAX_NESTING, Property, PropertyMap, Value};
use datastore_entity_core::model::views::{ValueView, Viewed};
use datastore_entity_core::rules::limits::check_entity;

/// The batch that applies `mutations` (their own rules checked) at `time`, each under its
/// condition: every entity as the commit leaves it checked, then the conditions, the inserts
/// and the updates against what exists (as the service orders its refusals), ids allocated,
/// the index entries that change. Returns the batch, what it replaces (when `recording`: for
/// the history) and each mutation's result.
pub(super) fn write(
    store: &dyn Store,
    composites: &Map<String, Vec<Composite>>,
    ids: &mut Ids,
    mutations: Vec<Change>,
    time: Timestamp,
    recording: bool,
) -> Result<(Batch, Undo, Vec<ChangeResult>), Error> {
    let mut batch = Batch::default();
    let mut results = Vec::with_capacity(mutations.len());
    let mut undo = Undo::new();
    // First every entity as the commit leaves it, checked (`rules::commit`, once each):
    // the service refuses an invalid argument before it looks at what exists.
    let mut staged = Vec::with_capacity(mutations.len());
    let mut checks = Vec::with_capacity(mutations.len());
    for Change {
        mutation,
        condition,
        on_conflict,
        transforms,
    } in mutations
    {
        if !transforms.is_empty() && matches!(mutation, Mutation::Delete(_)) {
            return Err(Error::Service {
                code: ServiceCode::InvalidArgument,
                message: "property transforms can be set only on an insert, update or upsert"
                    .to_owned(),
            });
        }
        let insert = matches!(mutation, Mutation::Insert(..));
        let update = matches!(mutation, Mutation::Update(..));
        let (key, properties) = match mutation {
            Mutation::Insert(k, p, m) | Mutation::Upsert(k, p, m) if !k.is_complete() => {
                let id = ids.next_id(&mut batch);
                (k.completed(IdOrName::Id(id)), Some((p, m)))
            }
            Mutation::Insert(k, p, m) | Mutation::Update(k, p, m) | Mutation::Upsert(k, p, m) => {
                (k, Some((p, m)))
            }
            Mutation::Delete(k) => (k, None),
        };
        let at = index::entity_key(&key);
        let mut before = None;
        store.get(ENTITIES, &at, &mut |v| before = Some(v.to_vec()))?;
        let (stored, stamp) = match &before {
            Some(bytes) => {
                let decoded = decode_entity(bytes.clone(), store.written_here());
                let (stored, stamp) = decoded.ok_or_else(candidates::corrupt)?;
                (Some(stored), Some(stamp))
            }
            None => (None, None),
        };
        let composites = index::of_kind(composites, key.kind());
        let old = match &stored {
            Some(old) => index::entries(&key, old, composites),
            None => Vec::new(),
        };
        // What the mask leaves out stays as stored, as the service does; then the
        // transforms, in order, whatever the mask.
        let mut properties = match properties {
            Some((written, Mask::Whole)) => Some(written),
            // What a mask leaves out is still checked as the service checks a request: a
            // value it refuses is refused, kept or not.
            Some((written, mask @ Mask::Paths(_))) => {
                check_entity(&key, &written, composites)?;
                Some(mask.merge(stored, written))
            }
            Some((written, mask)) => Some(mask.merge(stored, written)),
            None => None,
        };
        let mut transform_results = Vec::with_capacity(transforms.len());
        if let Some(entity) = properties.as_mut() {
            for transform in &transforms {
                transform_results.push(transform.apply(entity, time));
            }
        }
        if let Some(entity) = properties.as_mut() {
            stored_meanings(entity);
        }
        if let Some(entity) = &properties {
            check_entity(&key, entity, composites)?;
            // The memory store reads its entities back unchecked (`Store::written_here`):
            // what it keeps must read back.
            if let Some(property) = entity.unreadable() {
                return Err(Error::InvalidValue {
                    kind: key.kind().to_owned(),
                    property,
                    reason: "its stored form does not read back: a `PropertyType::write_value` \
                             wrote fewer or more values than the array it announced (a bug in \
                             that implementation); nothing was written"
                        .to_owned(),
                });
            }
        }
        staged.push(Staged {
            key,
            at,
            before,
            stamp,
            old,
            properties,
            transform_results,
            conflicted: false,
        });
        checks.push((condition, on_conflict, insert, update));
    }
    // Then what exists: a condition that does not hold (failing the commit, or skipping its
    // change), an insert of an entity that does, an update of one that does not.
    for (s, (condition, on_conflict, insert, update)) in staged.iter_mut().zip(checks) {
        let key = &s.key;
        match (
            check_condition(key, s.stamp.as_ref(), condition),
            on_conflict,
        ) {
            (Ok(()), _) => {}
            // A base version greater than the stored one is no version the entity had: the
            // service refuses the commit whatever the strategy.
            (
                Err(Error::Conflict {
                    expected, stored, ..
                }),
                OnConflict::KeepStored,
            ) if stored == 0 || expected <= stored => {
                s.conflicted = true;
                continue;
            }
            (Err(conflict), _) => return Err(conflict),
        }
        match (s.before.is_some(), insert, update) {
            (true, true, _) => {
                return Err(Error::AlreadyExists {
                    key: format!("{key:?}"),
                });
            }
            (false, _, true) => {
                return Err(Error::NotFound {
                    key: format!("{key:?}"),
                });
            }
            _ => {}
        }
    }
    for Staged {
        key,
        at,
        before,
        stamp,
        old,
        properties,
        transform_results,
        conflicted,
    } in staged
    {
        if conflicted {
            // Skipped: the stored entity stays, at its version (a missing one at 0).
            results.push(ChangeResult {
                key,
                stamp: stamp.unwrap_or(Stamp {
                    version: 0,
                    create_time: None,
                    update_time: None,
                }),
                transform_results: Vec::new(),
                conflict_detected: true,
            });
            continue;
        }
        tracing::debug!(key = ?key, "commit");
        let composites = index::of_kind(composites, key.kind());
        let new = match &properties {
            Some(p) => index::entries(&key, p, composites),
            None => Vec::new(),
        };
        let form = properties.map(PropertyMap::into_stored_bytes);
        // A write that leaves the entity as it is changes nothing, not even its version and
        // update time (as the service).
        let unchanged = match (&form, &before, &stamp) {
            (Some(form), Some(before), Some(stamp)) => split_entity(before)
                .is_some_and(|(stored, _)| stored == form.as_slice())
                .then_some(*stamp),
            _ => None,
        };
        if let Some(stamp) = unchanged {
            results.push(ChangeResult {
                key,
                stamp,
                transform_results,
                conflict_detected: false,
            });
            continue;
        }
        // Only what changed (the entries of the old version the new one has not are
        // deleted, the new one's that the old one had not are written).
        changed_entries(old, new, &mut batch);
        if recording {
            undo.push((at.clone(), before));
        }
        let stamp = match form {
            Some(form) => {
                let created = stamp.and_then(|s| s.create_time).unwrap_or(time);
                batch.put(ENTITIES, at, entity_value(form, created, time));
                Stamp {
                    version: version_at(time),
                    create_time: Some(created),
                    update_time: Some(time),
                }
            }
            None => {
                batch.delete(ENTITIES, at);
                Stamp {
                    version: version_at(time),
                    create_time: None,
                    update_time: None,
                }
            }
        };
        results.push(ChangeResult {
            key,
            stamp,
            transform_results,
            conflict_detected: false,
        });
    }
    Ok((batch, undo, results))
}

/// The meanings of `entity` as the service stores them: an indexed byte string's meaning 16 (a
/// short byte string, which an indexed one is) is not kept.
fn stored_meanings(entity: &mut PropertyMap) {
    // Most entities carry no annotations: they are looked for where the values lie, and
    // nothing is decoded; not past the nesting the service takes (the entity's check then
    // refuses it, and no walk here recurses deeper).
    fn annotated<'a>(mut properties: impl Iterator<Item = Viewed<'a>>, depth: usize) -> bool {
        properties.any(|(_, _, value, a)| !a.is_none() || nested(value, depth))
    }
    fn nested(value: ValueView<'_>, depth: usize) -> bool {
        match value {
            _ if depth > MAX_NESTING => false,
            ValueView::Entity(inner) => annotated(inner.iter(), depth + 1),
            ValueView::Array(values) => values.iter().any(|v| nested(v, depth + 1)),
            _ => false,
        }
    }
    if !annotated(entity.view(), 0) {
        return;
    }
    inner_meanings(entity, false, 0);
}

/// [`stored_meanings`] of one property, inside an excluded value or not (`excluded`),
/// `depth` array and entity values deep.
fn stored_meaning(property: &mut Property, excluded: bool, depth: usize) {
    if depth > MAX_NESTING {
        return;
    }
    let excluded = excluded || property.excluded;
    let short = |value: &Value, meaning: i32, excluded: bool| {
        meaning == 16 && !excluded && matches!(value, Value::Blob(_))
    };
    match (&mut property.value, &mut property.annotations) {
        (value, Annotations::Meaning(meaning)) if short(value, *meaning, excluded) => {
            property.annotations = Annotations::None;
        }
        (Value::Array(values), Annotations::Elements(elements)) => {
            for (value, (meaning, own)) in values.iter_mut().zip(elements.iter_mut()) {
                if short(value, *meaning, excluded || *own) {
                    *meaning = 0;
                }
                if let Value::Entity(inner) = value {
                    inner_meanings(inner, excluded || *own, depth + 2);
                }
            }
            let (annotations, all) = Annotations::of_elements(elements.to_vec());
            if !excluded {
                property.excluded = all;
            }
            property.annotations = annotations;
        }
        (Value::Array(values), _) => {
            for value in values {
                if let Value::Entity(inner) = value {
                    inner_meanings(inner, excluded, depth + 2);
                }
            }
        }
        (Value::Entity(inner), _) => inner_meanings(inner, excluded, depth + 1),
        _ => {}
    }
}

fn inner_meanings(entity: &mut PropertyMap, excluded: bool, depth: usize) {
    let names: Vec<String> = entity.keys().map(str::to_owned).collect();
    for name in names {
        if let Some(property) = entity.get_mut(&name) {
            stored_meaning(property, excluded, depth);
        }
    }
}

/// One mutation of a commit, checked, before what exists is looked at.
struct Staged {
    key: RawKey,
    /// Its entities-table key.
    at: Vec<u8>,
    /// What is stored there (sealed with its times).
    before: Option<Vec<u8>>,
    /// The stored entity's stamp.
    stamp: Option<Stamp>,
    /// The stored entity's index entries.
    old: Vec<(TableName, Key)>,
    /// The entity the commit leaves (`None`: deleted).
    properties: Option<PropertyMap>,
    /// What its transforms gave, in order.
    transform_results: Vec<datastore_entity_core::model::value::Value>,
    /// Its condition did not hold, and it is skipped ([`OnConflict::KeepStored`]).
    conflicted: bool,
}

/// Whether `condition` holds for the entity `key` at `stamp` (`None`: it does not exist), as
/// the service checks a mutation's base version or update time: [`Error::Conflict`] if not.
fn check_condition(
    key: &RawKey,
    stamp: Option<&Stamp>,
    condition: Option<Condition>,
) -> Result<(), Error> {
    let stored = stamp.map_or(0, |s| s.version);
    let expected = match condition {
        None => return Ok(()),
        Some(Condition::Version(version)) => version,
        Some(Condition::UpdateTime(time)) => version_at(time),
    };
    match expected == stored {
        true => Ok(()),
        false => Err(Error::Conflict {
            key: format!("{key:?}"),
            expected,
            stored,
        }),
    }
}

/// Writes into `batch` what turns the index entries `old` into `new`: the old ones the new
/// version has not are deleted, the new ones the old version had not are written.
fn changed_entries(
    mut old: Vec<(TableName, Key)>,
    mut new: Vec<(TableName, Key)>,
    batch: &mut Batch,
) {
    if old.is_empty() {
        for (table, entry) in new {
            batch.put(table, entry, Vec::new());
        }
        return;
    }
    old.sort_unstable();
    new.sort_unstable();
    let (mut o, mut n) = (old.into_iter().peekable(), new.into_iter().peekable());
    loop {
        let order = match (o.peek(), n.peek()) {
            (None, None) => break,
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (Some(a), Some(b)) => a.cmp(b),
        };
        match order {
            std::cmp::Ordering::Less => {
                if let Some((table, entry)) = o.next() {
                    batch.delete(table, entry);
                }
            }
            std::cmp::Ordering::Greater => {
                if let Some((table, entry)) = n.next() {
                    batch.put(table, entry, Vec::new());
                }
            }
            std::cmp::Ordering::Equal => {
                o.next();
                n.next();
            }
        }
    }
}
