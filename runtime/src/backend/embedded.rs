//! The embedded engine: the default backend, in memory, modelled on the service.
//!
//! - Entities are kept per (partition, kind), ordered by key.
//! - Every indexed property is queryable ascending and descending; excluded properties
//!   (and everything inside them) are invisible to filters, orders and projections;
//!   entities without a property are not returned by filters or orders on it; array
//!   properties match on any element; values of different types follow the service's order
//!   (checked against Google's Datastore emulator, which is the reference where they differ).
//! - Commits are atomic: every mutation is validated before the first is applied.
//! - Transactions are optimistic: a commit fails with [`Error::Aborted`] when an entity the
//!   transaction read was changed by another commit since, or when one of its queries would
//!   now return other keys (a phantom). Blind writes (of entities it did not read) do not
//!   conflict, as in Google's emulators.
//! - Allocated ids are scattered over `[2^52, 2^53)` (R-K1); reserved ids are never handed out
//!   (ids written without being reserved may be, as by the service: R-K3).

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Mutex, MutexGuard};

use super::{
    Backend, BoxFuture, Mutation, PropertyFilter, PropertyOrder, QueryBatch, QueryResult,
    QuerySpec, ResultShape, TransactionId, TransactionMode,
};
use crate::codec::{Reader, Writer, fnv1a};
use crate::key::IdOrName;
use crate::name::{NameRole, validate};
use crate::property::{Direction, Operator};
use crate::value::{Property, PropertyMap, Value, compare_values};
use crate::{Error, KeyId, PartitionId, RawKey};

pub use crate::limits::MAX_INDEXED_BYTES;

/// The in-memory engine. Cheap to share behind an `Arc`; all calls are serialised by one lock.
#[derive(Default)]
pub struct Embedded {
    state: Mutex<State>,
}

type Table = BTreeMap<RawKey, PropertyMap>;

#[derive(Default)]
struct State {
    tables: HashMap<(PartitionId, String), Table>,
    /// The commit that last wrote each key; kept after a delete so transactions see it.
    versions: HashMap<RawKey, u64>,
    version: u64,
    transactions: HashMap<u64, Transaction>,
    next_transaction: u64,
    allocations: u64,
    /// Ids that must never be allocated: reserved or allocated (as in the service, an id
    /// written without being reserved may be allocated later: R-K3).
    used_ids: HashSet<i64>,
}

struct Transaction {
    /// Version of each key when the transaction first read it (0: never written).
    reads: HashMap<RawKey, u64>,
    /// The queries it ran, with the keys they returned: at commit each must return the same
    /// keys again, or an entity was written into (or out of) a range it scanned (a phantom).
    queries: Vec<(QuerySpec, Vec<RawKey>)>,
}

impl Embedded {
    /// An empty engine.
    pub fn new() -> Embedded {
        Embedded::default()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // No code path panics while holding the lock, so a poisoned lock still holds
        // consistent state.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

fn ready<'a, T: Send + 'a>(value: T) -> BoxFuture<'a, T> {
    Box::pin(std::future::ready(value))
}

impl Backend for Embedded {
    fn lookup<'a>(
        &'a self,
        keys: &'a [RawKey],
        transaction: Option<&'a TransactionId>,
    ) -> BoxFuture<'a, Result<Vec<Option<PropertyMap>>, Error>> {
        ready(self.state().lookup(keys, transaction))
    }

    fn commit<'a>(
        &'a self,
        mutations: Vec<Mutation>,
        transaction: Option<&'a TransactionId>,
    ) -> BoxFuture<'a, Result<Vec<RawKey>, Error>> {
        ready(self.state().commit(mutations, transaction))
    }

    fn run_query<'a>(
        &'a self,
        query: &'a QuerySpec,
        transaction: Option<&'a TransactionId>,
    ) -> BoxFuture<'a, Result<QueryBatch, Error>> {
        ready(self.state().run_query(query, transaction))
    }

    fn begin_transaction<'a>(
        &'a self,
        _partition: &'a PartitionId,
        _mode: &'a TransactionMode,
    ) -> BoxFuture<'a, Result<TransactionId, Error>> {
        let mut state = self.state();
        state.next_transaction += 1;
        let id = state.next_transaction;
        state.transactions.insert(
            id,
            Transaction {
                reads: HashMap::new(),
                queries: Vec::new(),
            },
        );
        ready(Ok(TransactionId(id.to_le_bytes().to_vec())))
    }

    fn rollback<'a>(&'a self, transaction: &'a TransactionId) -> BoxFuture<'a, Result<(), Error>> {
        // Rolling back a transaction that already ended is not an error (as in Firestore in
        // Datastore mode; the legacy emulator refused it).
        let mut state = self.state();
        let result = transaction_number(transaction).map(|id| {
            state.transactions.remove(&id);
        });
        ready(result)
    }

    fn allocate_ids<'a>(&'a self, keys: Vec<RawKey>) -> BoxFuture<'a, Result<Vec<RawKey>, Error>> {
        let mut state = self.state();
        let result = keys
            .iter()
            .find(|k| k.is_complete())
            .map_or(Ok(()), |k| {
                Err(invalid_key(k, "allocate_ids takes incomplete keys"))
            })
            .map(|()| {
                keys.into_iter()
                    .map(|k| {
                        let id = state.allocate_id();
                        k.completed(IdOrName::Id(id))
                    })
                    .collect()
            });
        ready(result)
    }

    fn reserve_ids<'a>(&'a self, keys: Vec<RawKey>) -> BoxFuture<'a, Result<(), Error>> {
        let mut state = self.state();
        // Named keys have no id to reserve: accepted and ignored, as by the service.
        let result = match keys.iter().find(|k| !k.is_complete()) {
            Some(k) => Err(invalid_key(k, "reserve_ids takes complete keys")),
            None => {
                state
                    .used_ids
                    .extend(keys.iter().filter_map(|k| k.id()).map(KeyId::get));
                Ok(())
            }
        };
        ready(result)
    }
}

/// A key the service would accept: every ancestor has an id or a name.
fn check_ancestors(key: &RawKey) -> Result<(), Error> {
    let path = key.path();
    match path[..path.len().saturating_sub(1)]
        .iter()
        .any(|e| e.id_or_name().is_none())
    {
        true => Err(invalid_key(
            key,
            "an ancestor has no id or name; put the parent first and use the key it returns",
        )),
        false => Ok(()),
    }
}

fn invalid_key(key: &RawKey, reason: &str) -> Error {
    Error::InvalidKey {
        key: format!("{key:?}"),
        reason: reason.to_owned(),
    }
}

fn transaction_number(transaction: &TransactionId) -> Result<u64, Error> {
    <[u8; 8]>::try_from(transaction.0.as_slice())
        .map(u64::from_le_bytes)
        .map_err(|_| Error::TransactionClosed)
}

impl State {
    fn table(&self, key: &RawKey) -> Option<&Table> {
        self.tables.get(&(
            key.partition().cloned().unwrap_or_default(),
            key.kind().to_owned(),
        ))
    }

    fn get(&self, key: &RawKey) -> Option<&PropertyMap> {
        self.table(key).and_then(|t| t.get(key))
    }

    fn transaction(
        &mut self,
        transaction: Option<&TransactionId>,
    ) -> Result<Option<&mut Transaction>, Error> {
        match transaction {
            None => Ok(None),
            Some(t) => {
                let id = transaction_number(t)?;
                self.transactions
                    .get_mut(&id)
                    .map(Some)
                    .ok_or(Error::TransactionClosed)
            }
        }
    }

    fn record_reads<'k>(
        &mut self,
        transaction: Option<&TransactionId>,
        keys: impl IntoIterator<Item = &'k RawKey>,
    ) -> Result<(), Error> {
        let versions: Vec<(RawKey, u64)> = keys
            .into_iter()
            .map(|k| (k.clone(), self.versions.get(k).copied().unwrap_or(0)))
            .collect();
        if let Some(t) = self.transaction(transaction)? {
            for (key, version) in versions {
                t.reads.entry(key).or_insert(version);
            }
        }
        Ok(())
    }

    fn lookup(
        &mut self,
        keys: &[RawKey],
        transaction: Option<&TransactionId>,
    ) -> Result<Vec<Option<PropertyMap>>, Error> {
        if let Some(k) = keys.iter().find(|k| !k.is_complete()) {
            return Err(invalid_key(k, "a lookup needs complete keys"));
        }
        keys.iter().try_for_each(check_ancestors)?;
        self.record_reads(transaction, keys)?;
        Ok(keys.iter().map(|k| self.get(k).cloned()).collect())
    }

    fn allocate_id(&mut self) -> KeyId {
        loop {
            self.allocations += 1;
            // Bit-reverse a counter into the low 52 bits: consecutive allocations differ in
            // the highest of them, so ids are never adjacent and spread over the whole range.
            let scattered = (1_i64 << 52) | (self.allocations.reverse_bits() >> 12).cast_signed();
            if self.used_ids.insert(scattered)
                && let Ok(id) = KeyId::new(scattered)
            {
                return id;
            }
        }
    }

    fn commit(
        &mut self,
        mutations: Vec<Mutation>,
        transaction: Option<&TransactionId>,
    ) -> Result<Vec<RawKey>, Error> {
        // A transaction ends with its commit, whatever the outcome.
        let ended = match transaction {
            Some(t) => {
                let id = transaction_number(t)?;
                Some(
                    self.transactions
                        .remove(&id)
                        .ok_or(Error::TransactionClosed)?,
                )
            }
            None => None,
        };
        if let Some(t) = &ended {
            self.check_conflicts(t)?;
        }
        self.validate(&mutations)?;
        // Everything is valid: allocate ids, then apply all mutations.
        let mutations: Vec<Mutation> = mutations
            .into_iter()
            .map(|m| match m {
                Mutation::Insert(k, p) if !k.is_complete() => {
                    Mutation::Insert(k.completed(IdOrName::Id(self.allocate_id())), p)
                }
                Mutation::Upsert(k, p) if !k.is_complete() => {
                    Mutation::Upsert(k.completed(IdOrName::Id(self.allocate_id())), p)
                }
                other => other,
            })
            .collect();
        self.version += 1;
        let version = self.version;
        let mut keys = Vec::with_capacity(mutations.len());
        for mutation in mutations {
            let key = mutation.key().clone();
            tracing::debug!(key = ?key, "commit");
            self.versions.insert(key.clone(), version);
            let table = self
                .tables
                .entry((
                    key.partition().cloned().unwrap_or_default(),
                    key.kind().to_owned(),
                ))
                .or_default();
            match mutation {
                Mutation::Insert(k, p) | Mutation::Update(k, p) | Mutation::Upsert(k, p) => {
                    table.insert(k, p);
                }
                Mutation::Delete(k) => {
                    table.remove(&k);
                }
            }
            keys.push(key);
        }
        Ok(keys)
    }

    /// Optimistic concurrency: nothing the transaction read may have changed since. Blind
    /// writes do not conflict (Google's emulator commits them).
    fn check_conflicts(&self, t: &Transaction) -> Result<(), Error> {
        let version = |k: &RawKey| self.versions.get(k).copied().unwrap_or(0);
        if let Some((key, _)) = t.reads.iter().find(|(k, v)| version(k) != **v) {
            return Err(Error::Aborted {
                reason: format!(
                    "{key:?} was changed by another commit after this transaction read it"
                ),
            });
        }
        for (query, keys) in &t.queries {
            let now = self.evaluate(query)?;
            if !now.results.iter().map(|r| &r.key).eq(keys.iter()) {
                return Err(Error::Aborted {
                    reason: format!(
                        "another commit wrote an entity of kind `{}` into a range this \
                         transaction's query scanned",
                        query.kind
                    ),
                });
            }
        }
        Ok(())
    }

    /// Every check of a commit, before anything is written.
    fn validate(&self, mutations: &[Mutation]) -> Result<(), Error> {
        let mut seen = HashSet::new();
        for mutation in mutations {
            let key = mutation.key();
            check_ancestors(key)?;
            // R-A4: one entity at most once per commit.
            if key.is_complete() && !seen.insert(key) {
                return Err(Error::DuplicateKey {
                    key: format!("{key:?}"),
                });
            }
            match mutation {
                Mutation::Insert(k, p) | Mutation::Upsert(k, p) => {
                    crate::limits::check_entity(k, p)?;
                    if matches!(mutation, Mutation::Insert(..)) && self.get(k).is_some() {
                        return Err(Error::AlreadyExists {
                            key: format!("{k:?}"),
                        });
                    }
                }
                Mutation::Update(k, _) if !k.is_complete() => {
                    return Err(invalid_key(k, "an update needs a complete key"));
                }
                Mutation::Update(k, p) => {
                    crate::limits::check_entity(k, p)?;
                    if self.get(k).is_none() {
                        return Err(Error::NotFound {
                            key: format!("{k:?}"),
                        });
                    }
                }
                Mutation::Delete(k) if !k.is_complete() => {
                    return Err(invalid_key(k, "a delete needs a complete key"));
                }
                Mutation::Delete(_) => {}
            }
        }
        Ok(())
    }

    fn run_query(
        &mut self,
        query: &QuerySpec,
        transaction: Option<&TransactionId>,
    ) -> Result<QueryBatch, Error> {
        let batch = self.evaluate(query)?;
        self.record_reads(transaction, batch.results.iter().map(|r| &r.key))?;
        if let Some(t) = self.transaction(transaction)? {
            let keys = batch.results.iter().map(|r| r.key.clone()).collect();
            t.queries.push((query.clone(), keys));
        }
        Ok(batch)
    }

    /// The answer to a query, recording nothing.
    fn evaluate(&self, query: &QuerySpec) -> Result<QueryBatch, Error> {
        let plan = Plan::new(query)?;
        let start = plan.decode_cursor(query.start_cursor.as_deref())?;
        let end = plan.decode_cursor(query.end_cursor.as_deref())?;
        let empty = Table::new();
        let table = self
            .tables
            .get(&(query.partition.clone(), query.kind.clone()))
            .unwrap_or(&empty);
        let mut rows: Vec<Row<'_>> = Vec::new();
        for (key, properties) in table {
            if query
                .ancestor
                .as_ref()
                .is_some_and(|a| !key.has_ancestor(a))
            {
                continue;
            }
            plan.rows(key, properties, &mut rows);
        }
        rows.retain(|row| {
            start
                .as_ref()
                .is_none_or(|s| plan.compare(row, s) == Ordering::Greater)
                && end
                    .as_ref()
                    .is_none_or(|e| plan.compare(row, e) != Ordering::Greater)
        });
        let limit = query.limit.unwrap_or(usize::MAX);
        let more_results = rows.len() > limit;
        if more_results {
            // Only the first `limit` rows are needed: select them, then sort only those.
            rows.select_nth_unstable_by(limit, |a, b| plan.compare_rows(a, b));
            rows.truncate(limit);
        }
        rows.sort_by(|a, b| plan.compare_rows(a, b));
        let end_cursor = match rows.last() {
            Some(last) => plan.encode_cursor(&last.position()),
            None => match (&start, query.start_cursor.as_ref()) {
                (Some(_), Some(bytes)) => bytes.clone(),
                _ => plan.encode_cursor(&Position::default()),
            },
        };
        let results: Vec<QueryResult> = rows
            .into_iter()
            .map(|row| QueryResult {
                cursor: plan.encode_cursor(&row.position()),
                key: row.key.clone(),
                properties: match &query.shape {
                    ResultShape::Full => row.properties.clone(),
                    ResultShape::KeysOnly => PropertyMap::new(),
                    ResultShape::Projection(names) => names
                        .iter()
                        .cloned()
                        .zip(
                            row.projected
                                .iter()
                                .map(|v| Property::indexed((*v).clone())),
                        )
                        .collect(),
                },
            })
            .collect();
        Ok(QueryBatch {
            results,
            end_cursor,
            more_results,
        })
    }
}

/// Calls `visit` with each indexed value of `path` (dotted into embedded entities), array
/// elements flattened. Nothing when the entity lacks the property or it is excluded.
fn visit_indexed<'p>(properties: &'p PropertyMap, path: &str, visit: &mut dyn FnMut(&'p Value)) {
    let (head, rest) = match path.split_once('.') {
        Some((head, rest)) => (head, Some(rest)),
        None => (path, None),
    };
    let Some(property) = properties.get(head) else {
        return;
    };
    if property.excluded {
        return;
    }
    fn descend<'p>(value: &'p Value, rest: Option<&str>, visit: &mut dyn FnMut(&'p Value)) {
        match (value, rest) {
            // The elements of an array are indexed; the properties of embedded entities inside
            // an array are not (Firestore in Datastore mode finds nothing through them).
            (Value::Array(values), None) => values.iter().for_each(|v| descend(v, None, visit)),
            (Value::Array(_), Some(_)) => {}
            (Value::Entity(inner), Some(rest)) => visit_indexed(inner, rest, visit),
            (value, None) => visit(value),
            (_, Some(_)) => {}
        }
    }
    descend(&property.value, rest, visit);
}

/// Filters compare in the index order, across types, as the service's index scans do: a
/// range filter on a number also returns the property's booleans and strings (which sort
/// after numbers), exactly as Google's emulator does.
fn matches(value: &Value, op: Operator, operand: &Value) -> bool {
    let ordering = compare_values(value, operand);
    match op {
        Operator::Equal => ordering == Ordering::Equal,
        Operator::LessThan => ordering == Ordering::Less,
        Operator::LessThanOrEqual => ordering != Ordering::Greater,
        Operator::GreaterThan => ordering == Ordering::Greater,
        Operator::GreaterThanOrEqual => ordering != Ordering::Less,
    }
}

/// A query, checked and ready to run.
struct Plan<'q> {
    query: &'q QuerySpec,
    /// The orders applied: the given ones, then the range property if not among them.
    orders: Vec<PropertyOrder>,
    /// Ties after the last order go by key, in that order's direction (Firestore in
    /// Datastore mode; the legacy emulator always breaks them ascending).
    key_direction: Direction,
    /// The properties whose index the query scans: the ordered ones, then the projected ones.
    /// An entity gives one row per combination of their distinct matching values, as an index
    /// scan does (Firestore in Datastore mode; the legacy emulator returned an entity once).
    scanned: Vec<String>,
    /// Where each order's value is in a row's scanned values.
    order_slots: Vec<usize>,
    /// Where each projected property's value is.
    projected_slots: Vec<usize>,
    fingerprint: u64,
}

/// One result row: an entity (or, for projections of arrays, one combination of elements).
struct Row<'s> {
    key: &'s RawKey,
    properties: &'s PropertyMap,
    sort: Vec<&'s Value>,
    projected: Vec<&'s Value>,
}

impl Row<'_> {
    fn position(&self) -> Position {
        Position {
            at: Some((
                self.sort.iter().map(|v| (*v).clone()).collect(),
                self.key.clone(),
                self.projected.iter().map(|v| (*v).clone()).collect(),
            )),
        }
    }
}

/// Where a cursor points: after this row (`None`: before the first).
#[derive(Default)]
struct Position {
    at: Option<(Vec<Value>, RawKey, Vec<Value>)>,
}

const CURSOR_MAGIC: u8 = 0xD5;

impl<'q> Plan<'q> {
    fn new(query: &'q QuerySpec) -> Result<Plan<'q>, Error> {
        let invalid = |reason: String| Error::InvalidQuery {
            kind: query.kind.clone(),
            reason,
        };
        validate(NameRole::Kind, &query.kind)?;
        if let Some(ancestor) = &query.ancestor {
            if !ancestor.is_complete() || check_ancestors(ancestor).is_err() {
                return Err(invalid("the ancestor key is incomplete".into()));
            }
            if ancestor.partition() != Some(&query.partition) {
                return Err(invalid("the ancestor key is in another namespace".into()));
            }
        }
        let names = query
            .filters
            .iter()
            .map(|f| &f.property)
            .chain(query.orders.iter().map(|o| &o.property));
        let projected: &[String] = match &query.shape {
            ResultShape::Projection(names) => names,
            _ => &[],
        };
        for name in names.chain(projected) {
            for segment in name.split('.') {
                validate(NameRole::Property, segment)?;
            }
        }
        let mut inequalities: Vec<&str> = query
            .filters
            .iter()
            .filter(|f| f.op.is_inequality())
            .map(|f| f.property.as_str())
            .collect();
        inequalities.dedup();
        let mut orders = query.orders.clone();
        match inequalities.as_slice() {
            [] => {}
            // As in Firestore in Datastore mode: a range property that is not ordered
            // explicitly is ordered after the explicit orders, in the direction of the last
            // one. (The legacy emulator refused a first order on another property.)
            [property] => {
                if !orders.iter().any(|o| o.property == *property) {
                    let direction = orders.last().map_or(Direction::Ascending, |o| o.direction);
                    orders.push(PropertyOrder {
                        property: (*property).to_owned(),
                        direction,
                    });
                }
            }
            several => {
                return Err(invalid(format!(
                    "range filters on several properties ({}); a query may have range \
                     filters on one property only: filter the others in code",
                    several.join(", ")
                )));
            }
        }
        // Without an order, a projection reads its properties' index: results come in the
        // order of the projected values, the properties taken by name, as in the service.
        if orders.is_empty() {
            let mut by_name: Vec<&String> = projected.iter().collect();
            by_name.sort();
            orders.extend(by_name.into_iter().map(|p| PropertyOrder {
                property: p.clone(),
                direction: Direction::Ascending,
            }));
        }
        if projected.is_empty() && matches!(query.shape, ResultShape::Projection(_)) {
            return Err(invalid("a projection needs at least one property".into()));
        }
        if let Some(p) = projected.iter().find(|p| {
            query
                .filters
                .iter()
                .any(|f| f.op == Operator::Equal && &f.property == *p)
        }) {
            return Err(invalid(format!(
                "`{p}` is both projected and filtered by equality; its value is already known, \
                 remove it from the projection"
            )));
        }
        let mut w = Writer::default();
        // A cursor of one namespace's query does not resume another's.
        w.partition(Some(&query.partition));
        w.bytes.extend_from_slice(query.kind.as_bytes());
        if let Some(a) = &query.ancestor {
            w.key(a);
        }
        for f in &query.filters {
            w.bytes.extend_from_slice(f.property.as_bytes());
            w.u8(f.op as u8);
            w.value(&f.value);
        }
        for o in &orders {
            w.bytes.extend_from_slice(o.property.as_bytes());
            w.u8(o.direction as u8);
        }
        // Full and keys-only queries walk the same rows, so they share cursors; a projection
        // walks one row per combination of projected array elements, so it does not.
        w.u8(u8::from(matches!(query.shape, ResultShape::Projection(_))));
        for p in projected {
            w.bytes.extend_from_slice(p.as_bytes());
        }
        let mut scanned: Vec<String> = Vec::new();
        let mut slot = |name: &String| match scanned.iter().position(|s| s == name) {
            Some(i) => i,
            None => {
                scanned.push(name.clone());
                scanned.len() - 1
            }
        };
        let order_slots = orders.iter().map(|o| slot(&o.property)).collect();
        let projected_slots = projected.iter().map(&mut slot).collect();
        Ok(Plan {
            query,
            key_direction: orders.last().map_or(Direction::Ascending, |o| o.direction),
            orders,
            scanned,
            order_slots,
            projected_slots,
            fingerprint: fnv1a(&w.bytes),
        })
    }

    fn filters_on<'a>(&'a self, property: &'a str) -> impl Iterator<Item = &'a PropertyFilter> {
        self.query
            .filters
            .iter()
            .filter(move |f| f.property == property)
    }

    /// The distinct indexed values of `property` that pass every filter on it.
    fn candidates<'s>(&self, properties: &'s PropertyMap, property: &str) -> Vec<&'s Value> {
        let mut values = Vec::new();
        visit_indexed(properties, property, &mut |v| {
            if self
                .filters_on(property)
                .all(|f| matches(v, f.op, &f.value))
            {
                values.push(v);
            }
        });
        values.sort_by(|a, b| compare_values(a, b));
        values.dedup_by(|a, b| compare_values(a, b) == Ordering::Equal);
        values
    }

    /// The rows of one entity, none if it does not match.
    fn rows<'s>(&self, key: &'s RawKey, properties: &'s PropertyMap, rows: &mut Vec<Row<'s>>) {
        // Every filter must hold for some indexed value. Equality filters on an array may be
        // met by different elements; range filters on one property by one element.
        for filter in &self.query.filters {
            let mut found = false;
            visit_indexed(properties, &filter.property, &mut |v| {
                found = found
                    || if filter.op == Operator::Equal {
                        matches(v, filter.op, &filter.value)
                    } else {
                        self.filters_on(&filter.property)
                            .filter(|f| f.op.is_inequality())
                            .all(|f| matches(v, f.op, &f.value))
                    };
            });
            if !found {
                return;
            }
        }
        // One row per combination of the scanned properties' matching values (an entity
        // without one of them has no index entry there, so no row).
        let mut combinations: Vec<Vec<&'s Value>> = vec![Vec::new()];
        for property in &self.scanned {
            let values = self.candidates(properties, property);
            if values.is_empty() {
                return;
            }
            combinations = combinations
                .into_iter()
                .flat_map(|prefix| {
                    values.iter().map(move |v| {
                        let mut c = prefix.clone();
                        c.push(*v);
                        c
                    })
                })
                .collect();
        }
        for values in combinations {
            rows.push(Row {
                key,
                properties,
                sort: self.order_slots.iter().map(|&i| values[i]).collect(),
                projected: self.projected_slots.iter().map(|&i| values[i]).collect(),
            });
        }
    }

    /// The order of rows: sort values in their directions, then key, then projected values.
    fn compare(&self, row: &Row<'_>, position: &Position) -> Ordering {
        match &position.at {
            None => Ordering::Greater,
            Some((sort, key, projected)) => self.compare_parts(
                &row.sort,
                row.key,
                &row.projected,
                sort.iter(),
                key,
                projected.iter(),
            ),
        }
    }

    fn compare_rows(&self, a: &Row<'_>, b: &Row<'_>) -> Ordering {
        self.compare_parts(
            &a.sort,
            a.key,
            &a.projected,
            b.sort.iter().copied(),
            b.key,
            b.projected.iter().copied(),
        )
    }

    fn compare_parts<'a>(
        &self,
        sort: &[&Value],
        key: &RawKey,
        projected: &[&Value],
        other_sort: impl Iterator<Item = &'a Value>,
        other_key: &RawKey,
        other_projected: impl Iterator<Item = &'a Value>,
    ) -> Ordering {
        for ((a, b), order) in sort.iter().zip(other_sort).zip(&self.orders) {
            let o = compare_values(a, b);
            let o = match order.direction {
                Direction::Ascending => o,
                Direction::Descending => o.reverse(),
            };
            if o.is_ne() {
                return o;
            }
        }
        // The key, then the projected values (rows of one entity), in the last order's direction.
        let tie = key.cmp(other_key).then_with(|| {
            projected
                .iter()
                .zip(other_projected)
                .map(|(a, b)| compare_values(a, b))
                .find(|o| o.is_ne())
                .unwrap_or(Ordering::Equal)
        });
        match self.key_direction {
            Direction::Ascending => tie,
            Direction::Descending => tie.reverse(),
        }
    }

    fn encode_cursor(&self, position: &Position) -> Vec<u8> {
        let mut w = Writer::default();
        w.u8(CURSOR_MAGIC);
        w.u64(self.fingerprint);
        match &position.at {
            None => w.u8(0),
            Some((sort, key, projected)) => {
                w.u8(1);
                w.value(&Value::Array(sort.clone()));
                w.key(key);
                w.value(&Value::Array(projected.clone()));
            }
        }
        let checksum = fnv1a(&w.bytes);
        w.u64(checksum);
        w.bytes
    }

    fn decode_cursor(&self, bytes: Option<&[u8]>) -> Result<Option<Position>, Error> {
        let Some(bytes) = bytes else { return Ok(None) };
        let invalid = |reason: &str| Error::InvalidCursor {
            reason: reason.to_owned(),
        };
        if bytes.len() < 18 || bytes[0] != CURSOR_MAGIC {
            return Err(invalid("it is not a cursor of this engine"));
        }
        let (body, checksum) = bytes.split_at(bytes.len() - 8);
        if fnv1a(body).to_le_bytes() != checksum {
            return Err(invalid("it was altered (checksum mismatch)"));
        }
        let mut r = Reader::new(&body[1..]);
        let corrupt = |_| invalid("it is corrupt");
        if r.u64().map_err(corrupt)? != self.fingerprint {
            return Err(invalid("it belongs to a different query"));
        }
        let position = match r.u8().map_err(corrupt)? {
            0 => Position::default(),
            1 => {
                let sort = r.value().map_err(corrupt)?;
                let key = r.key().map_err(corrupt)?;
                let projected = r.value().map_err(corrupt)?;
                match (sort, projected) {
                    (Value::Array(sort), Value::Array(projected))
                        if sort.len() == self.orders.len() =>
                    {
                        Position {
                            at: Some((sort, key, projected)),
                        }
                    }
                    _ => return Err(invalid("it is corrupt")),
                }
            }
            _ => return Err(invalid("it is corrupt")),
        };
        if !r.is_empty() {
            return Err(invalid("it has trailing bytes"));
        }
        Ok(Some(position))
    }
}
