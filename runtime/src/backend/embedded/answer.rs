//! Answering a query: each branch of its filter planned (`plan.rs`), read by the executor
//! (`exec.rs`), branches merged in order; its count from index entries where the plan allows;
//! its explanation (`explain.rs`), and with analyze what it read (counted at the store).

use datastore_entity_core::hash::Map;

use super::candidates;
use super::exec::{self, Answered, Hits};
use super::explain;
use super::index::{self, Composite, of_kind};
use super::merge;
use super::metadata;
use super::plan;
use super::scan::Prepared;
use super::store::{Batch, Range, Store};
use datastore_entity_core::error::Error;
use datastore_entity_core::format::file::ENTITIES;
use datastore_entity_core::model::key::RawKey;
use datastore_entity_core::model::schema::{Direction, Schema, vector_index_command};
use datastore_entity_core::model::value::{Property, PropertyMap, Value};
use datastore_entity_core::model::views::{ValueView, find_property};
use datastore_entity_core::query::explain::{ExecutionStats, Explanation};
use datastore_entity_core::query::spec::{
    FilterNode, FindNearest, Operator, QueryBatch, QueryResult, QuerySpec, ResultShape, is_metadata,
};
use datastore_entity_core::query_rule::QueryRule;
use datastore_entity_core::rules::filter::check_nearest;

/// The distance of the entity stored as `value` (an entities-table value) from the search's
/// vector: `None` if its property is not a vector of the search's dimension.
fn measured(value: &[u8], nearest: &FindNearest, dimension: usize) -> Result<Option<f64>, Error> {
    let (form, _) = index::split_entity(value).ok_or_else(candidates::corrupt)?;
    let found = find_property(form, &nearest.property).map_err(|_| candidates::corrupt())?;
    let Some((_, ValueView::Vector(v))) = found else {
        return Ok(None);
    };
    let values = v.values();
    if values.len() != dimension {
        return Ok(None);
    }
    Ok(Some(
        nearest
            .measure
            .between_values(values, nearest.vector.as_slice()),
    ))
}

/// The declared indexes and the index mode: all a query's answer depends on
/// besides the store.
pub(super) struct Answers<'a> {
    pub(super) composites: &'a Map<String, Vec<Composite>>,
    /// The declared schemas, for their vector indexes.
    pub(super) declared: &'a Map<usize, &'static Schema>,
    pub(super) strict: bool,
}

impl<'a> Answers<'a> {
    /// The answers of these declared indexes and schemas, in this index mode.
    pub(super) fn of(
        composites: &'a Map<String, Vec<Composite>>,
        declared: &'a Map<usize, &'static Schema>,
        strict: bool,
    ) -> Answers<'a> {
        Answers {
            composites,
            declared,
            strict,
        }
    }

    /// How many results a one-branch query has, counted from its plan's index entries when
    /// the plan allows it ([`exec::count`]).
    pub(super) fn count(
        &self,
        store: &dyn Store,
        query: &QuerySpec,
    ) -> Result<Option<usize>, Error> {
        let query = &*query.answered();
        let prepared = Prepared::new(query)?;
        if prepared.branch_count() != 1 {
            return Ok(None);
        }
        let access = plan::choose(
            &prepared,
            of_kind(self.composites, &query.kind),
            self.strict,
        )?;
        let limit = query.limit.unwrap_or(usize::MAX);
        exec::count(store, &prepared, &access, limit)
    }

    /// Whether `query` is answered by reading every entity of its kind (no index serves a
    /// branch of it): what [`Embedded`](super::Embedded) reads in slices, the lock let go
    /// between them.
    pub(super) fn scans(&self, query: &QuerySpec) -> Result<bool, Error> {
        let query = &*query.answered();
        if query.find_nearest.is_some() || !query.distinct_on.is_empty() || is_metadata(&query.kind)
        {
            return Ok(false);
        }
        let prepared = Prepared::new(query)?;
        // One branch: the plan that answers it, a cursor's own when it resumes one.
        if prepared.branch_count() == 1 {
            return Ok(self.resuming(&prepared)? == plan::Access::Scan);
        }
        Ok(self
            .plans(&prepared)?
            .iter()
            .any(|(_, access)| *access == plan::Access::Scan))
    }

    /// Answers `query` from `store` (the engine's, or a view of it that counts what is read).
    pub(super) fn answer(&self, store: &dyn Store, query: &QuerySpec) -> Result<QueryBatch, Error> {
        self.answer_with(
            store,
            query,
            |hits, prepared| hits.batch(store, prepared),
            |b| b,
        )
    }

    /// Answers `query` from `store` as [`answer`](Answers::answer) does, but a whole-entity
    /// query's results read by one plan as their entities are stored, without a cursor each.
    pub(super) fn answer_stored(
        &self,
        store: &dyn Store,
        query: &QuerySpec,
    ) -> Result<Answered, Error> {
        let whole = query.shape == ResultShape::Full;
        self.answer_with(
            store,
            query,
            |hits, prepared| match whole {
                true => hits.stored(store, prepared),
                false => hits.batch(store, prepared).map(Answered::Batch),
            },
            Answered::Batch,
        )
    }

    /// Answers `query`: one branch's hits made into `T` by `made`, or a batch of several
    /// branches (or a nearest-neighbour search) made into `T` by `whole`.
    fn answer_with<T>(
        &self,
        store: &dyn Store,
        query: &QuerySpec,
        made: impl FnOnce(Hits, &Prepared<'_>) -> Result<T, Error>,
        whole: impl FnOnce(QueryBatch) -> T,
    ) -> Result<T, Error> {
        let query = &*query.answered();
        if let Some(answer) = metadata::answer(store, query) {
            return answer.map(whole);
        }
        if let Some(nearest) = &query.find_nearest {
            return self.nearest(store, query, nearest).map(whole);
        }
        let distinct = &query.distinct_on;
        let mut leading = query.orders.iter().take(distinct.len());
        if leading.len() < distinct.len() || !leading.all(|o| distinct.contains(&o.property)) {
            return Err(Error::InvalidQuery {
                kind: query.kind.clone(),
                rule: QueryRule::DistinctNotLeading,
            });
        }
        let fixed = query.filters.iter().flat_map(FilterNode::leaves).any(|f| {
            matches!(f.op, Operator::Equal | Operator::In) && distinct.contains(&f.property)
        });
        if fixed {
            return Err(Error::InvalidQuery {
                kind: query.kind.clone(),
                rule: QueryRule::DistinctFixed,
            });
        }
        let prepared = Prepared::new(query)?;
        if prepared.branch_count() == 1 {
            let access = self.resuming(&prepared)?;
            if query.distinct_on.is_empty() || exec::reads_distinct(&prepared, &access) {
                return made(exec::run(store, &prepared, &access)?, &prepared);
            }
        }
        if !query.distinct_on.is_empty() {
            return self.distinct(store, query).map(whole);
        }
        let plans = self.plans(&prepared)?;
        match plans
            .iter()
            .any(|(_, access)| *access == plan::Access::Scan)
        {
            // A branch no index serves: every entity of the kind is evaluated, once.
            true => made(exec::run(store, &prepared, &plan::Access::Scan)?, &prepared),
            false => merge::merged(store, &prepared, &plans).map(whole),
        }
    }

    /// A `distinct_on` query no one plan reads a combination of values at a time: all its
    /// results from its start cursor on, grouped into runs of the same values
    /// ([`distinct_runs`]), read with the distinct properties (a keys-only query as whole
    /// entities, a projection with them projected too) and given back in the query's shape.
    fn distinct(&self, store: &dyn Store, query: &QuerySpec) -> Result<QueryBatch, Error> {
        let shape = match &query.shape {
            ResultShape::Full | ResultShape::KeysOnly => ResultShape::Full,
            ResultShape::Projection(names) => {
                let mut names = names.clone();
                names.extend(
                    query
                        .distinct_on
                        .iter()
                        .filter(|p| !names.contains(p))
                        .cloned()
                        .collect::<Vec<_>>(),
                );
                ResultShape::Projection(names)
            }
        };
        let every = QuerySpec {
            distinct_on: Vec::new(),
            limit: None,
            shape,
            ..query.clone()
        };
        let limit = query.limit.unwrap_or(usize::MAX);
        let mut batch = distinct_runs(self.answer(store, &every)?, &query.distinct_on, limit);
        for result in &mut batch.results {
            match &query.shape {
                ResultShape::Full => {}
                ResultShape::KeysOnly => {
                    result.properties = PropertyMap::new();
                    result.stamp = None;
                }
                ResultShape::Projection(names) => {
                    let extra: Vec<String> = result
                        .properties
                        .iter()
                        .map(|(name, _)| name.to_owned())
                        .filter(|name| !names.contains(name))
                        .collect();
                    for name in extra {
                        result.properties.remove(&name);
                    }
                }
            }
        }
        Ok(batch)
    }

    /// Strict index mode: the service answers a nearest-neighbour search from a vector index
    /// of the vector's dimension on the property, pre-filtered on exactly the properties the
    /// query filters on.
    fn vector_index(&self, query: &QuerySpec, nearest: &FindNearest) -> Result<(), Error> {
        let mut filtered: Vec<&str> = Vec::new();
        for filter in query.filters.iter().flat_map(FilterNode::leaves) {
            if !filtered.contains(&filter.property.as_str()) {
                filtered.push(&filter.property);
            }
        }
        let dimension = nearest.vector.dimension();
        let declared = self.declared.values().any(|schema| {
            schema.kind == query.kind
                && schema
                    .vector_index(&nearest.property, &filtered)
                    .is_some_and(|index| usize::try_from(index.dimension) == Ok(dimension))
        });
        if declared {
            return Ok(());
        }
        let filters: Vec<(&str, Direction)> = filtered
            .iter()
            .map(|f| (*f, Direction::Ascending))
            .collect();
        let dimension = u64::try_from(dimension).unwrap_or(u64::MAX);
        let command = vector_index_command(&query.kind, &nearest.property, dimension, &filters);
        Err(Error::MissingIndex {
            message: format!(
                "no vector index of {dimension} dimensions on `{}` of kind `{}`{} (the embedded \
                 engine refuses, in strict index mode, what the service would refuse): declare \
                 `#[vector_index({dimension})]` on the field{}",
                nearest.property,
                query.kind,
                match filtered.is_empty() {
                    true => String::new(),
                    false => format!(", pre-filtered on {}", filtered.join(", ")),
                },
                match filtered.is_empty() {
                    true => String::new(),
                    false => format!(
                        " and `index({}, {})` on the entity",
                        filtered.join(", "),
                        nearest.property
                    ),
                },
            ),
            index_yaml: format!("# create it with:\n#   {command}\n"),
        })
    }

    /// A nearest-neighbour search: every entity the filters keep, measured against the vector
    /// (exactly: the engine reads them all, where the service reads its vector index), the
    /// nearest `limit` within the threshold, nearest first (then in key order), each with its
    /// distance where asked. There is no cursor: the results are one page.
    fn nearest(
        &self,
        store: &dyn Store,
        query: &QuerySpec,
        nearest: &FindNearest,
    ) -> Result<QueryBatch, Error> {
        let refuse = |rule: QueryRule| Error::InvalidQuery {
            kind: query.kind.clone(),
            rule,
        };
        check_nearest(nearest).map_err(refuse)?;
        if matches!(query.shape, ResultShape::Projection(_)) || !query.orders.is_empty() {
            return Err(refuse(QueryRule::NearestAlone));
        }
        if self.strict {
            self.vector_index(query, nearest)?;
        }
        // The keys the filters keep (from the indexes where a plan allows), then each one's
        // vector read where it lies, without decoding the entity; only the nearest are read.
        let candidates = QuerySpec {
            find_nearest: None,
            limit: None,
            start_cursor: None,
            end_cursor: None,
            orders: Vec::new(),
            shape: ResultShape::KeysOnly,
            property_mask: None,
            ..query.clone()
        };
        let dimension = nearest.vector.dimension();
        let mut scored: Vec<(f64, RawKey)> = Vec::new();
        for result in self.answer(store, &candidates)?.results {
            let at = index::entity_key(&result.key);
            let mut distance = Ok(None);
            store.get(ENTITIES, &at, &mut |value| {
                distance = measured(value, nearest, dimension);
            })?;
            let Some(d) = distance? else { continue };
            if nearest
                .threshold
                .is_none_or(|t| nearest.measure.within(d, t))
                && !d.is_nan()
            {
                scored.push((d, result.key));
            }
        }
        let nearer = |(d, a): &(f64, RawKey), (e, b): &(f64, RawKey)| {
            let order = match (
                nearest.measure.nearer(*d, *e),
                nearest.measure.nearer(*e, *d),
            ) {
                (true, _) => std::cmp::Ordering::Less,
                (_, true) => std::cmp::Ordering::Greater,
                _ => std::cmp::Ordering::Equal,
            };
            order.then_with(|| a.cmp(b))
        };
        // The nearest `limit` selected, then only they sorted.
        if scored.len() > nearest.limit {
            scored.select_nth_unstable_by(nearest.limit, nearer);
            scored.truncate(nearest.limit);
        }
        scored.sort_by(nearer);
        let keys_only = query.shape == ResultShape::KeysOnly;
        let mut results = Vec::with_capacity(scored.len());
        for (d, key) in scored {
            let (mut properties, stamp) = match keys_only {
                true => (PropertyMap::new(), None),
                false => {
                    let loaded = candidates::load(store, &index::entity_key(&key))?;
                    let (properties, stamp) = loaded.ok_or_else(candidates::corrupt)?;
                    (properties, Some(stamp))
                }
            };
            if let (Some(name), false) = (&nearest.distance_property, keys_only) {
                properties.insert(name, Property::indexed(Value::Double(d)));
            }
            results.push(QueryResult {
                key,
                properties,
                cursor: Vec::new(),
                stamp,
            });
        }
        Ok(QueryBatch {
            results,
            end_cursor: Vec::new(),
            more_results: false,
        })
    }

    /// The plan of one-branch `prepared`: the best its kind's indexes allow — or, resumed
    /// from a cursor that a plan needing no composite index made (before the index it now
    /// gets was built on first use, or declared), that plan, which answers the rest of the
    /// query the same: the cursors of a client paging through a query stay good.
    fn resuming(&self, prepared: &Prepared<'_>) -> Result<plan::Access, Error> {
        let access = plan::choose(
            prepared,
            of_kind(self.composites, &prepared.query.kind),
            self.strict,
        )?;
        let Some(cursor) = prepared.query.start_cursor.as_deref() else {
            return Ok(access);
        };
        let Ok((tag, _)) = prepared.decode_cursor(cursor) else {
            return Ok(access);
        };
        let composite = matches!(access, plan::Access::Composite { .. });
        if self.strict || !composite || tag == access.tag() {
            return Ok(access);
        }
        match plan::choose(prepared, &[], false) {
            Ok(before) if before.tag() == tag => Ok(before),
            _ => Ok(access),
        }
    }

    /// Each branch of `prepared`'s filter with the plan that answers it.
    fn plans<'q>(
        &self,
        prepared: &Prepared<'q>,
    ) -> Result<Vec<(Prepared<'q>, plan::Access)>, Error> {
        let composites = of_kind(self.composites, &prepared.query.kind);
        (0..prepared.branch_count())
            .map(|i| {
                let branch = prepared.branch(i);
                let access = plan::choose(&branch, composites, self.strict)?;
                Ok((branch, access))
            })
            .collect()
    }

    /// The composite indexes the branches of `query` need that none of those declared serves
    /// (each the one the service would read, [`plan::needed`]); none in strict index mode,
    /// which refuses such a query instead. A query that cannot be prepared needs none here:
    /// its answer says what is wrong with it.
    pub(super) fn missing(&self, query: &QuerySpec) -> Vec<Composite> {
        let query = &*query.answered();
        if self.strict || query.kind.is_empty() || is_metadata(&query.kind) {
            return Vec::new();
        }
        if query.find_nearest.is_some() || !query.distinct_on.is_empty() {
            return Vec::new();
        }
        let Ok(prepared) = Prepared::new(query) else {
            return Vec::new();
        };
        let composites = of_kind(self.composites, &query.kind);
        let mut missing: Vec<Composite> = Vec::new();
        for i in 0..prepared.branch_count() {
            let branch = prepared.branch(i);
            if let Err(Error::MissingIndex { .. }) = plan::choose(&branch, composites, true) {
                let index = plan::needed(&branch);
                if !missing.contains(&index) && !composites.contains(&index) {
                    missing.push(index);
                }
            }
        }
        missing
    }

    /// How `query` is answered: the plan of each branch of its filter, in words.
    pub(super) fn plan(&self, query: &QuerySpec) -> Result<Explanation, Error> {
        let query = &*query.answered();
        let prepared = Prepared::new(query)?;
        Ok(explain::explain(&prepared, &self.plans(&prepared)?))
    }
}

/// The first result of each run of `batch`'s results with the same values of `distinct`
/// (the order leads with them), each carrying the cursor of its run's last result, so a query
/// resumed from it starts at the next run; then at most `limit` runs, `more_results` if runs
/// remain. An entity's value of a property is the whole of it (an array's elements together).
fn distinct_runs(batch: QueryBatch, distinct: &[String], limit: usize) -> QueryBatch {
    let values = |r: &QueryResult| -> Vec<Option<Value>> {
        distinct
            .iter()
            .map(|p| r.properties.get(p).map(|p| p.value.clone()))
            .collect()
    };
    let mut runs: Vec<(Vec<Option<Value>>, QueryResult)> = Vec::new();
    let mut more_results = batch.more_results;
    for result in batch.results {
        let these = values(&result);
        let full = runs.len() == limit;
        match runs.last_mut() {
            Some((last, first)) if *last == these => first.cursor = result.cursor,
            _ if full => {
                more_results = true;
                break;
            }
            _ => runs.push((these, result)),
        }
    }
    QueryBatch {
        end_cursor: runs
            .last()
            .map_or(batch.end_cursor, |(_, r)| r.cursor.clone()),
        results: runs.into_iter().map(|(_, r)| r).collect(),
        more_results,
    }
}

/// What a query read (for Query Explain): index entries (every entry scanned in a table other
/// than the entities one) and entities (read by key).
#[derive(Default)]
pub(super) struct Tally {
    entries: std::cell::Cell<u64>,
    entities: std::cell::Cell<u64>,
}

impl Tally {
    /// What was read, for a query that returned `results` results.
    pub(super) fn stats(&self, results: usize) -> ExecutionStats {
        ExecutionStats {
            results_returned: results as u64,
            index_entries_scanned: self.entries.get(),
            entities_scanned: self.entities.get(),
            read_operations: None,
            execution_duration: None,
        }
    }
}

/// A view of a store that counts what is read through it in a [`Tally`]. It writes nothing.
pub(super) struct Counting<'s> {
    inner: &'s dyn Store,
    tally: &'s Tally,
}

impl<'s> Counting<'s> {
    pub(super) fn new(inner: &'s dyn Store, tally: &'s Tally) -> Counting<'s> {
        Counting { inner, tally }
    }

    fn count(&self, table: &str) {
        let counter = match table {
            ENTITIES => &self.tally.entities,
            _ => &self.tally.entries,
        };
        counter.set(counter.get() + 1);
    }
}

impl Store for Counting<'_> {
    fn written_here(&self) -> bool {
        self.inner.written_here()
    }

    fn get(&self, table: &str, key: &[u8], visit: &mut dyn FnMut(&[u8])) -> Result<bool, Error> {
        let found = self.inner.get(table, key, visit)?;
        if found {
            self.count(table);
        }
        Ok(found)
    }

    fn scan(
        &self,
        table: &str,
        range: Range<'_>,
        reverse: bool,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), Error> {
        self.inner.scan(table, range, reverse, &mut |k, v| {
            self.count(table);
            visit(k, v)
        })
    }

    fn apply(&mut self, _: Batch) -> Result<(), Error> {
        Err(Error::storage(
            "a query's counting view of the store writes nothing".to_owned(),
        ))
    }
}
