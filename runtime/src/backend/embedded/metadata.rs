//! Metadata queries, as the service answers them: `__namespace__` (the namespaces that hold
//! entities), `__kind__` (a namespace's kinds) and `__property__` (each kind's indexed
//! properties, with the representations of their values). Each is read from the tables' keys
//! by skipping: the first entry past a namespace, kind or property names the next one, so a
//! query costs one seek per result, not one per entity.
//!
//! They take filters on `__key__` (`=`, `<`, `<=`, `>`, `>=`), an ancestor (a `__kind__` key
//! narrows `__property__` to one kind), the key order, a limit and cursors; keys only or
//! whole results (a `__property__` result holds `property_representation`).

use datastore_entity_core::error::Error;
use datastore_entity_core::format::cursor::{self, METADATA};
use datastore_entity_core::format::file::{KINDS, PROPERTIES};
use datastore_entity_core::format::keycode::{self, Reader};
use datastore_entity_core::hash::fnv1a;
use datastore_entity_core::model::key::{
    IdOrName, KEY_PROPERTY, KeyId, PartitionId, PathElement, RawKey,
};
use datastore_entity_core::model::name::KeyName;
use datastore_entity_core::model::schema::Direction;
use datastore_entity_core::model::stored::Writer;
use datastore_entity_core::model::value::{Property, PropertyMap, Value};
use datastore_entity_core::query::spec::{
    FilterNode, KIND_KIND, NAMESPACE_KIND, Operator, PROPERTY_KIND, QueryBatch, QueryResult,
    QuerySpec, REPRESENTATION, ResultShape,
};
use datastore_entity_core::query_rule::QueryRule;

use super::index;
use super::store::Store;

/// Which metadata a query asks for.
#[derive(Clone, Copy)]
enum Asked {
    Namespaces,
    Kinds,
    Properties,
}

/// The answer to `query` if it is a metadata query; `None` for any other.
pub(super) fn answer(store: &dyn Store, query: &QuerySpec) -> Option<Result<QueryBatch, Error>> {
    let asked = match query.kind.as_str() {
        NAMESPACE_KIND => Asked::Namespaces,
        KIND_KIND => Asked::Kinds,
        PROPERTY_KIND => Asked::Properties,
        _ => return None,
    };
    Some(Metadata::new(asked, query).and_then(|m| m.answer(store)))
}

/// A metadata query, checked: its `__key__` bounds (encoded, as the tables order keys).
struct Metadata<'q> {
    asked: Asked,
    query: &'q QuerySpec,
    bounds: Vec<(Operator, Vec<u8>)>,
    ancestor: Option<Vec<u8>>,
    fingerprint: u64,
}

impl<'q> Metadata<'q> {
    fn new(asked: Asked, query: &'q QuerySpec) -> Result<Metadata<'q>, Error> {
        let refuse = |rule: QueryRule| Error::InvalidQuery {
            kind: query.kind.clone(),
            rule,
        };
        let mut bounds = Vec::new();
        for leaf in query.filters.iter().flat_map(FilterNode::leaves) {
            let key = match &leaf.value {
                Value::Key(key) if leaf.property == KEY_PROPERTY => key,
                _ => {
                    return Err(refuse(QueryRule::MetadataFilter {
                        property: leaf.property.clone(),
                    }));
                }
            };
            match leaf.op {
                Operator::Equal
                | Operator::LessThan
                | Operator::LessThanOrEqual
                | Operator::GreaterThan
                | Operator::GreaterThanOrEqual => bounds.push((leaf.op, index::entity_key(key))),
                _ => {
                    return Err(refuse(QueryRule::MetadataFilter {
                        property: leaf.property.clone(),
                    }));
                }
            }
        }
        if query.filters.iter().any(|f| matches!(f, FilterNode::Or(_))) {
            return Err(refuse(QueryRule::MetadataFilter {
                property: KEY_PROPERTY.to_owned(),
            }));
        }
        if let Some(order) = query
            .orders
            .iter()
            .find(|o| o.property != KEY_PROPERTY || o.direction != Direction::Ascending)
        {
            return Err(refuse(QueryRule::MetadataOrder {
                property: order.property.clone(),
            }));
        }
        let shaped = matches!(query.shape, ResultShape::Full | ResultShape::KeysOnly);
        if !shaped || !query.distinct_on.is_empty() || query.find_nearest.is_some() {
            return Err(refuse(QueryRule::MetadataShape));
        }
        let mut w = Writer::default();
        w.bytes(query.kind.as_bytes());
        keycode::partition(&mut w.bytes, &query.partition);
        for (op, key) in &bounds {
            w.u8(*op as u8);
            w.bytes(key);
        }
        let ancestor = query.ancestor.as_ref().map(index::path_prefix);
        if let Some(prefix) = &ancestor {
            w.bytes(prefix);
        }
        w.u8(u8::from(query.shape == ResultShape::KeysOnly));
        Ok(Metadata {
            asked,
            query,
            bounds,
            ancestor,
            fingerprint: fnv1a(&w.bytes),
        })
    }

    fn answer(&self, store: &dyn Store) -> Result<QueryBatch, Error> {
        let start = self.position(self.query.start_cursor.as_deref())?;
        let end = self.position(self.query.end_cursor.as_deref())?;
        let limit = self.query.limit.unwrap_or(usize::MAX);
        let mut results = Vec::new();
        let mut more_results = false;
        let mut visit = |key: RawKey, properties: PropertyMap| {
            let at = index::entity_key(&key);
            if start.as_ref().is_some_and(|s| at <= *s)
                || !self.within(&key, &at)
                || end.as_ref().is_some_and(|e| at > *e)
            {
                return true;
            }
            if results.len() == limit {
                more_results = true;
                return false;
            }
            let properties = match self.query.shape {
                ResultShape::KeysOnly => PropertyMap::new(),
                _ => properties,
            };
            results.push(QueryResult {
                cursor: cursor::seal(METADATA, self.fingerprint, &at),
                key,
                properties,
                stamp: None,
            });
            true
        };
        let partition = &self.query.partition;
        match self.asked {
            Asked::Namespaces => namespaces(store, partition, &mut |namespace| {
                let id_or_name = match namespace.is_empty() {
                    // The default namespace is the one with id 1.
                    true => IdOrName::Id(KeyId::stored(1)?),
                    false => IdOrName::Name(KeyName::stored(namespace)),
                };
                let path = vec![PathElement::stored(NAMESPACE_KIND.into(), Some(id_or_name))];
                Ok(visit(meta_key(partition, path)?, PropertyMap::new()))
            })?,
            Asked::Kinds => kinds(store, partition, &mut |kind| {
                let path = vec![kind_element(kind)];
                Ok(visit(meta_key(partition, path)?, PropertyMap::new()))
            })?,
            Asked::Properties => {
                let mut kinds_of = Vec::new();
                kinds(store, partition, &mut |kind| {
                    kinds_of.push(kind);
                    Ok(true)
                })?;
                'kinds: for kind in kinds_of {
                    let mut going = true;
                    properties(store, partition, &kind, &mut |property, representations| {
                        let path = vec![
                            kind_element(kind.clone()),
                            PathElement::stored(
                                PROPERTY_KIND.into(),
                                Some(IdOrName::Name(KeyName::stored(property))),
                            ),
                        ];
                        let values = representations
                            .into_iter()
                            .map(|r| Value::String(r.to_owned()))
                            .collect();
                        let held = PropertyMap::from([(
                            REPRESENTATION,
                            Property::indexed(Value::Array(values)),
                        )]);
                        going = visit(meta_key(partition, path)?, held);
                        Ok(going)
                    })?;
                    if !going {
                        break 'kinds;
                    }
                }
            }
        }
        let end_cursor = match (results.last(), &self.query.start_cursor) {
            (Some(last), _) => last.cursor.clone(),
            (None, Some(start)) => start.clone(),
            (None, None) => cursor::seal(METADATA, self.fingerprint, &[]),
        };
        Ok(QueryBatch {
            results,
            end_cursor,
            more_results,
        })
    }

    /// The key position a cursor of this query holds.
    fn position(&self, cursor: Option<&[u8]>) -> Result<Option<Vec<u8>>, Error> {
        cursor
            .map(|c| cursor::open(METADATA, self.fingerprint, c, "this engine").map(<[u8]>::to_vec))
            .transpose()
            .map(|p| p.filter(|p| !p.is_empty()))
    }

    /// Whether a result (its key, and `at`, the key encoded) passes the query's filters and
    /// is under its ancestor.
    fn within(&self, key: &RawKey, at: &[u8]) -> bool {
        let under = self.ancestor.as_ref().is_none_or(|prefix| {
            let mut path = Vec::new();
            keycode::path(&mut path, key.path());
            path.starts_with(prefix)
        });
        under
            && self.bounds.iter().all(|(op, bound)| match op {
                Operator::Equal => at == bound.as_slice(),
                Operator::LessThan => at < bound.as_slice(),
                Operator::LessThanOrEqual => at <= bound.as_slice(),
                Operator::GreaterThan => at > bound.as_slice(),
                _ => at >= bound.as_slice(),
            })
    }
}

fn meta_key(partition: &PartitionId, path: Vec<PathElement>) -> Result<RawKey, Error> {
    RawKey::new(Some(partition.clone()), path)
}

fn kind_element(kind: String) -> PathElement {
    PathElement::stored(
        KIND_KIND.into(),
        Some(IdOrName::Name(KeyName::stored(kind))),
    )
}

/// The first entry of `table` at or after `from` and before `end`, if any.
fn first_from(
    store: &dyn Store,
    table: &str,
    from: &[u8],
    end: Option<&[u8]>,
) -> Result<Option<Vec<u8>>, Error> {
    use std::ops::Bound;
    let upper = end.map_or(Bound::Unbounded, Bound::Excluded);
    let mut found = None;
    store.scan(table, (Bound::Included(from), upper), false, &mut |k, _| {
        found = Some(k.to_vec());
        false
    })?;
    Ok(found)
}

/// Calls `each` with every name that follows `prefix` in `table` (escaped, as the tables
/// write names), in order, one seek each, while it returns `true`.
fn names_under(
    store: &dyn Store,
    table: &str,
    prefix: &[u8],
    each: &mut dyn FnMut(String) -> Result<bool, Error>,
) -> Result<(), Error> {
    let end = keycode::prefix_end(prefix);
    let mut from = prefix.to_vec();
    while let Some(entry) = first_from(store, table, &from, end.as_deref())? {
        let mut reader = Reader::new(&entry[prefix.len()..]);
        let name = reader.string().map_err(|_| corrupt(table))?;
        if !each(name)? {
            return Ok(());
        }
        let read = entry.len() - reader.rest().len();
        match keycode::prefix_end(&entry[..read]) {
            Some(next) => from = next,
            None => return Ok(()),
        }
    }
    Ok(())
}

fn corrupt(table: &str) -> Error {
    Error::storage(format!("an entry of the {table} table is corrupt"))
}

/// Every partition (project, database, namespace) that holds an entity, in order: three
/// nested walks of the kinds table, one seek per name.
pub(super) fn partitions(
    store: &dyn Store,
    each: &mut dyn FnMut(&PartitionId) -> Result<(), Error>,
) -> Result<(), Error> {
    let mut partition = PartitionId::default();
    names_under(store, KINDS, &[], &mut |project| {
        partition.project_id = project;
        let mut databases = Vec::new();
        keycode::bytes(&mut databases, partition.project_id.as_bytes());
        names_under(store, KINDS, &databases, &mut |database| {
            partition.database_id = database;
            namespaces(store, &partition.clone(), &mut |namespace| {
                partition.namespace = namespace;
                each(&partition)?;
                Ok(true)
            })?;
            Ok(true)
        })?;
        Ok(true)
    })
}

/// Every namespace of `partition`'s database that holds an entity.
fn namespaces(
    store: &dyn Store,
    partition: &PartitionId,
    each: &mut dyn FnMut(String) -> Result<bool, Error>,
) -> Result<(), Error> {
    let mut prefix = Vec::new();
    keycode::bytes(&mut prefix, partition.project_id.as_bytes());
    keycode::bytes(&mut prefix, partition.database_id.as_bytes());
    names_under(store, KINDS, &prefix, each)
}

/// Every kind of `partition` that has an entity.
fn kinds(
    store: &dyn Store,
    partition: &PartitionId,
    each: &mut dyn FnMut(String) -> Result<bool, Error>,
) -> Result<(), Error> {
    let mut prefix = Vec::new();
    keycode::partition(&mut prefix, partition);
    names_under(store, KINDS, &prefix, each)
}

/// Every indexed property of `kind`, with the representations of its values.
fn properties(
    store: &dyn Store,
    partition: &PartitionId,
    kind: &str,
    each: &mut dyn FnMut(String, Vec<&'static str>) -> Result<bool, Error>,
) -> Result<(), Error> {
    let prefix = index::kind_prefix(partition, kind);
    names_under(store, PROPERTIES, &prefix, &mut |property| {
        let mut under = prefix.clone();
        keycode::bytes(&mut under, property.as_bytes());
        let end = keycode::prefix_end(&under);
        let mut representations = Vec::new();
        let mut from = under.clone();
        while let Some(entry) = first_from(store, PROPERTIES, &from, end.as_deref())? {
            let tag = *entry.get(under.len()).ok_or_else(|| corrupt(PROPERTIES))?;
            let name = keycode::representation(tag).ok_or_else(|| corrupt(PROPERTIES))?;
            if !representations.contains(&name) {
                representations.push(name);
            }
            from.truncate(under.len());
            match tag.checked_add(1) {
                Some(next) => from.push(next),
                None => break,
            }
        }
        representations.sort_unstable();
        each(property, representations)
    })
}
