//! The executor: reads the entries a plan (`plan.rs`) names — only those of the page and
//! those its filters skip, from the cursor on, so a page costs what it holds, not what the
//! kind holds — and turns them into results; OR branches merged in order.

use std::borrow::Cow;
use std::ops::{Bound, Range};

use super::bounds::{Bounds, after_prefix, as_ref, encoded, narrow};
use super::candidates::{candidates, copy_stored, corrupt, load, other_plan, scanned};
use super::index::{self};
use super::plan::{Access, equality_properties, projected};
use super::scan::{Prepared, matches};
use super::store::Store;
use crate::backend::{FoundEntity, ReadResult};
use datastore_entity_core::error::Error;
use datastore_entity_core::format::file::{KINDS, PROPERTIES};
use datastore_entity_core::format::keycode::{self, Keys, Reader};
use datastore_entity_core::model::key::{PartitionId, RawKey};
use datastore_entity_core::model::schema::Direction;
use datastore_entity_core::model::value::{Property, PropertyMap, Value};
use datastore_entity_core::query::spec::{
    Operator, PropertyFilter, QueryBatch, QueryResult, ResultShape,
};

/// An index range read entry by entry: what each entry holds after its fixed head.
struct Entries<'q> {
    table: Cow<'q, str>,
    /// The length of the bytes every entry starts with (kind, property or ancestor, the
    /// equality filters' values).
    head: usize,
    /// The columns after the head, before the key path: property and whether inverted.
    columns: Vec<(&'q str, bool)>,
    path_inverted: bool,
    bounds: Bounds,
    reverse: bool,
    /// Filters checked on a column's value (range filters past the first column).
    residual: Vec<(usize, &'q PropertyFilter)>,
    /// Filters checked on the entity (a second equality filter on one property).
    on_entity: Vec<&'q PropertyFilter>,
    /// The column of each projected property.
    projected: Vec<usize>,
    /// Nothing can match (two equality filters on one property disagree).
    empty: bool,
}

/// One result a plan found: its position (the cursor's), its key path (encoded, ascending),
/// its values of the query's orders, and its projected values.
pub(super) struct Found {
    pub(super) position: Vec<u8>,
    /// The key path: the end of `position` from `path_at` on (one allocation for both), or
    /// its own copy where the position holds it inverted (a descending key order).
    inverted_path: Option<Vec<u8>>,
    path_at: usize,
    pub(super) sort: Vec<Value>,
    pub(super) projected: Vec<Value>,
    /// Where a query resumed after it starts, when not right after `position`: past every
    /// entry with its values of the query's `distinct_on` properties.
    pub(super) resume: Option<Vec<u8>>,
}

impl Found {
    /// The position a cursor after it names.
    pub(super) fn cursor_position(&self) -> &[u8] {
        self.resume.as_deref().unwrap_or(&self.position)
    }

    /// The key path, encoded ascending.
    pub(super) fn path(&self) -> &[u8] {
        match &self.inverted_path {
            Some(path) => path,
            None => self.position.get(self.path_at..).unwrap_or_default(),
        }
    }
}

/// Room for the results of a read of at most `limit`: all of them for a page, a bounded start
/// for a read without a limit (growing a vector of results one by one was 6 % of a page).
fn room(limit: usize) -> usize {
    limit.min(1_024)
}

/// The tag of a merged plan's cursors (an OR, IN, `!=` or NOT IN: several branches).
pub(super) const MERGED: u8 = 5;

/// What a query read before its results are made: a scan's results, evaluated whole, or the
/// entries a plan found, their entities still where they are stored.
pub(super) enum Hits {
    Scanned(QueryBatch),
    Entries {
        found: Vec<Found>,
        tag: u8,
        end_cursor: Vec<u8>,
        more_results: bool,
    },
}

/// A whole-entity query's results as their entities lie in the store: every key path and
/// stored form copied into one buffer (one allocation for the page, where a key and a map per
/// result are several each), each result its ranges of the buffer; no cursor but the batch's
/// end. The keys are read after the store's lock is let go, into one key ([`Keys`]).
pub(super) struct StoredBatch {
    partition: PartitionId,
    bytes: Vec<u8>,
    /// Each result's key path and stored form, as ranges of `bytes`.
    results: Vec<(Range<usize>, Range<usize>)>,
    pub(super) end_cursor: Vec<u8>,
    pub(super) more_results: bool,
}

impl StoredBatch {
    /// Hands each result to `read`, with its key.
    pub(super) fn hand_over(&self, read: &mut ReadResult<'_>) -> Result<(), Error> {
        let mut keys = Keys::in_partition(self.partition.clone());
        for (path, entity) in &self.results {
            let key = keys
                .read(&self.bytes[path.clone()])
                .map_err(|_| corrupt())?;
            read(key, FoundEntity::Stored(&self.bytes[entity.clone()]))?;
        }
        Ok(())
    }
}

/// A query's answer: its results with their properties and cursors, or as stored.
pub(super) enum Answered {
    Batch(QueryBatch),
    Stored(StoredBatch),
}

/// Runs `prepared` with `access` over `store`, from the start to the end cursor.
pub(super) fn run(
    store: &dyn Store,
    prepared: &Prepared<'_>,
    access: &Access,
) -> Result<Hits, Error> {
    let query = prepared.query;
    let cursor = |bytes: &Option<Vec<u8>>| -> Result<Option<Vec<u8>>, Error> {
        let Some(bytes) = bytes else { return Ok(None) };
        let (tag, position) = prepared.decode_cursor(bytes)?;
        if tag != access.tag() {
            return Err(other_plan());
        }
        Ok(Some(position.to_vec()))
    };
    let (start, end) = (cursor(&query.start_cursor)?, cursor(&query.end_cursor)?);
    if *access == Access::Scan {
        let (candidates, stamps) = candidates(store, prepared)?;
        return scanned(prepared, &candidates, stamps).map(Hits::Scanned);
    }
    let limit = query.limit.unwrap_or(usize::MAX);
    let start = start.filter(|p| !p.is_empty());
    let end = end.filter(|p| !p.is_empty());
    let (found, more_results) = find(store, prepared, access, start, end, limit, false)?;
    let tag = access.tag();
    let end_cursor = match (found.last(), &query.start_cursor) {
        (Some(last), _) => prepared.encode_cursor(tag, last.cursor_position()),
        (None, Some(start)) => start.clone(),
        (None, None) => prepared.encode_cursor(tag, &[]),
    };
    Ok(Hits::Entries {
        found,
        tag,
        end_cursor,
        more_results,
    })
}

impl Hits {
    /// The results, each with its properties and its cursor.
    pub(super) fn batch(
        self,
        store: &dyn Store,
        prepared: &Prepared<'_>,
    ) -> Result<QueryBatch, Error> {
        let (found, tag, end_cursor, more_results) = match self {
            Hits::Scanned(batch) => return Ok(batch),
            Hits::Entries {
                found,
                tag,
                end_cursor,
                more_results,
            } => (found, tag, end_cursor, more_results),
        };
        let found = found.into_iter().map(|found| {
            let cursor = prepared.encode_cursor(tag, found.cursor_position());
            (found, cursor)
        });
        Ok(QueryBatch {
            results: results(store, prepared, found)?,
            end_cursor,
            more_results,
        })
    }

    /// The results of a whole-entity query as their entities are stored (a scan's, already
    /// evaluated, as a batch).
    pub(super) fn stored(
        self,
        store: &dyn Store,
        prepared: &Prepared<'_>,
    ) -> Result<Answered, Error> {
        let (found, end_cursor, more_results) = match self {
            Hits::Scanned(batch) => return Ok(Answered::Batch(batch)),
            Hits::Entries {
                found,
                end_cursor,
                more_results,
                ..
            } => (found, end_cursor, more_results),
        };
        let query = prepared.query;
        let mut at = Vec::with_capacity(128);
        keycode::partition(&mut at, &query.partition);
        let partition = at.len();
        let mut bytes = Vec::new();
        let count = found.len();
        let mut results = Vec::with_capacity(count);
        for (i, found) in found.iter().enumerate() {
            at.truncate(partition);
            at.extend_from_slice(found.path());
            let path = bytes.len()..bytes.len() + found.path().len();
            bytes.extend_from_slice(found.path());
            let entity = copy_stored(store, &at, &mut bytes)?.ok_or_else(corrupt)?;
            if i == 0 {
                // Room for the rest, if they are about the size of the first.
                bytes.reserve(bytes.len() * (count - 1));
            }
            results.push((path, entity));
        }
        Ok(Answered::Stored(StoredBatch {
            partition: query.partition.clone(),
            bytes,
            results,
            end_cursor,
            more_results,
        }))
    }
}

/// The key of a result a plan found.
fn key_of(prepared: &Prepared<'_>, found: &Found) -> Result<RawKey, Error> {
    let path = Reader::new(found.path()).path().map_err(|_| corrupt())?;
    RawKey::new(Some(prepared.query.partition.clone()), path).map_err(|_| corrupt())
}

/// How many results a one-branch query without cursors has, up to `limit`, counted from the
/// index entries of its plan without decoding them — when every filter is met by the range
/// of entries itself. `None` when entries must be looked at (a filter checked on values or
/// entities, a zigzag join, a scan): count the query's results then.
pub(crate) fn count(
    store: &dyn Store,
    prepared: &Prepared<'_>,
    access: &Access,
    limit: usize,
) -> Result<Option<usize>, Error> {
    let mut counted = 0;
    if limit == 0 {
        return Ok(Some(counted));
    }
    match access {
        Access::Scan => return Ok(None),
        Access::Zigzag => {
            // One equality filter: its index range, counted by the store.
            let (streams, target) = streams(prepared, None);
            if let Some(((_, upper), lower)) = one_stream(&streams, &target) {
                let range = (Bound::Included(lower.as_slice()), as_ref(upper));
                return store.count(PROPERTIES, range, limit).map(Some);
            }
            leapfrog(store, prepared, None, &mut |_| {
                counted += 1;
                counted < limit
            })?;
            return Ok(Some(counted));
        }
        _ => {}
    }
    let entries = entries(prepared, access);
    if !entries.residual.is_empty() || !entries.on_entity.is_empty() {
        return Ok(None);
    }
    if entries.empty {
        return Ok(Some(counted));
    }
    store
        .count(&entries.table, entries.bounds.range(), limit)
        .map(Some)
}

/// Up to `limit` entries of one plan after `start` and up to `end` (positions of that plan),
/// and whether more follow; with `sorted`, each with its values of the query's orders (what
/// merging plans compares).
pub(super) fn find(
    store: &dyn Store,
    prepared: &Prepared<'_>,
    access: &Access,
    start: Option<Vec<u8>>,
    end: Option<Vec<u8>>,
    limit: usize,
    sorted: bool,
) -> Result<(Vec<Found>, bool), Error> {
    if *access == Access::Zigzag {
        return zigzag(store, prepared, start, end, limit);
    }
    let mut entries = entries(prepared, access);
    if let Some(start) = start {
        match entries.reverse {
            false => entries.bounds.raise(Bound::Excluded(start)),
            true => entries.bounds.lower_to(Bound::Excluded(start)),
        }
    }
    if let Some(end) = end {
        match entries.reverse {
            false => entries.bounds.lower_to(Bound::Included(end)),
            true => entries.bounds.raise(Bound::Included(end)),
        }
    }
    let distinct = distinct_columns(prepared, &entries).ok_or_else(not_distinct)?;
    read(store, &entries, limit, sorted, distinct)
}

/// How many of the columns `entries` reads are the query's `distinct_on` properties, which
/// lead them: `Some(0)` without any; `None` when they do not lead (or an equality filter fixes
/// one), so the entries cannot be read a combination at a time.
fn distinct_columns(prepared: &Prepared<'_>, entries: &Entries<'_>) -> Option<usize> {
    let distinct = &prepared.query.distinct_on;
    if distinct.is_empty() {
        return Some(0);
    }
    let fixed = equality_properties(prepared);
    if distinct.iter().any(|p| fixed.contains(&p.as_str())) {
        return None;
    }
    let leading = entries.columns.get(..distinct.len())?;
    leading
        .iter()
        .all(|(name, _)| distinct.iter().any(|p| p == name))
        .then_some(distinct.len())
}

/// Whether `access` reads `prepared`'s results a combination of its `distinct_on` values at a
/// time (an index whose first columns are those properties); otherwise the query's results
/// are grouped after they are read (`answer.rs`).
pub(super) fn reads_distinct(prepared: &Prepared<'_>, access: &Access) -> bool {
    !matches!(access, Access::Scan | Access::Zigzag)
        && distinct_columns(prepared, &entries(prepared, access)).is_some()
}

fn not_distinct() -> Error {
    Error::storage(
        "a distinct query reached a plan that does not read its properties first".to_owned(),
    )
}

/// The query results of found entries, each with its cursor.
pub(super) fn results(
    store: &dyn Store,
    prepared: &Prepared<'_>,
    found: impl Iterator<Item = (Found, Vec<u8>)>,
) -> Result<Vec<QueryResult>, Error> {
    let query = prepared.query;
    // The entities-table key of each result: the partition, then the result's path.
    let mut at = Vec::with_capacity(128);
    keycode::partition(&mut at, &query.partition);
    let partition = at.len();
    let mut results = Vec::with_capacity(found.size_hint().0);
    for (found, cursor) in found {
        let key = key_of(prepared, &found)?;
        let mut stamp = None;
        let properties = match &query.shape {
            ResultShape::KeysOnly => PropertyMap::new(),
            ResultShape::Full => {
                at.truncate(partition);
                at.extend_from_slice(found.path());
                let (properties, found) = load(store, &at)?.ok_or_else(corrupt)?;
                stamp = Some(found);
                properties
            }
            ResultShape::Projection(names) => names
                .iter()
                .cloned()
                .zip(found.projected.into_iter().map(Property::projected))
                .collect(),
        };
        results.push(QueryResult {
            cursor,
            key,
            properties,
            stamp,
        });
    }
    Ok(results)
}

/// The entries an index plan reads.
fn entries<'q>(prepared: &'q Prepared<'_>, access: &'q Access) -> Entries<'q> {
    let query = prepared.query;
    let filters_on = |p: &str| -> Vec<&PropertyFilter> {
        prepared
            .filters()
            .iter()
            .filter(|f| f.property == p)
            .collect()
    };
    let mut head = index::kind_prefix(&query.partition, &query.kind);
    let mut entries = Entries {
        table: Cow::Borrowed(KINDS),
        head: head.len(),
        columns: Vec::new(),
        path_inverted: false,
        bounds: Bounds::prefix(Vec::new()),
        reverse: false,
        residual: Vec::new(),
        on_entity: Vec::new(),
        projected: Vec::new(),
        empty: false,
    };
    match access {
        Access::Kind => {
            entries.reverse = prepared.key_direction == Direction::Descending;
            let (table, listed) = index::listing(&query.partition, &query.kind);
            entries.table = Cow::Borrowed(table);
            entries.head = listed.len();
            head = listed;
            let mut prefix = head.clone();
            if let Some(ancestor) = &query.ancestor {
                prefix.extend_from_slice(&index::path_prefix(ancestor));
            }
            entries.bounds = Bounds::prefix(prefix);
            for f in prepared.filters() {
                // `choose` picks this plan for key operands only.
                let Value::Key(key) = &f.value else { continue };
                let mut at = head.clone();
                keycode::path(&mut at, key.path());
                match f.op {
                    Operator::GreaterThan => entries.bounds.raise(Bound::Excluded(at)),
                    Operator::GreaterThanOrEqual => entries.bounds.raise(Bound::Included(at)),
                    Operator::LessThan => entries.bounds.lower_to(Bound::Excluded(at)),
                    Operator::LessThanOrEqual => entries.bounds.lower_to(Bound::Included(at)),
                    Operator::Equal => {
                        entries.bounds.raise(Bound::Included(at.clone()));
                        entries.bounds.lower_to(Bound::Included(at));
                    }
                    // Branches hold `=` and ranges only.
                    Operator::NotEqual | Operator::In | Operator::NotIn => {}
                }
            }
        }
        Access::Property { name, reverse } => {
            entries.table = Cow::Borrowed(PROPERTIES);
            entries.reverse = *reverse;
            keycode::bytes(&mut head, name.as_bytes());
            let filters = filters_on(name);
            match filters.iter().find(|f| f.op == Operator::Equal) {
                // The property's value is fixed: every filter on it must accept that value.
                Some(eq) => {
                    entries.empty = !filters.iter().all(|f| matches(&eq.value, f.op, &f.value));
                    head.extend_from_slice(&encoded(&eq.value, false));
                    entries.head = head.len();
                    entries.bounds = Bounds::prefix(head);
                }
                None => {
                    entries.head = head.len();
                    entries.columns.push((name, false));
                    entries.projected = projected(prepared).iter().map(|_| 0).collect();
                    let mut bounds = Bounds::prefix(head.clone());
                    narrow(&mut bounds, &head, false, &filters);
                    entries.bounds = bounds;
                }
            }
        }
        Access::Composite { index, reverse } => {
            entries.table = Cow::Borrowed(&index.table);
            entries.reverse = *reverse;
            entries.path_inverted = index.path_inverted();
            if let Some(ancestor) = &query.ancestor {
                keycode::path(&mut head, ancestor.path());
            }
            let equalities = equality_properties(prepared).len();
            let (fixed, free) = index.columns.split_at(equalities);
            for (name, direction) in fixed {
                let mut equal = filters_on(name)
                    .into_iter()
                    .filter(|f| f.op == Operator::Equal);
                if let Some(first) = equal.next() {
                    head.extend_from_slice(&encoded(
                        &first.value,
                        *direction == Direction::Descending,
                    ));
                }
                entries.on_entity.extend(equal);
            }
            entries.head = head.len();
            entries.columns = free
                .iter()
                .map(|(n, d)| (n.as_str(), *d == Direction::Descending))
                .collect();
            let mut bounds = Bounds::prefix(head.clone());
            if let Some((first, inverted)) = entries.columns.first() {
                narrow(&mut bounds, &head, *inverted, &filters_on(first));
            }
            entries.bounds = bounds;
            for (i, (name, _)) in entries.columns.iter().enumerate().skip(1) {
                entries
                    .residual
                    .extend(filters_on(name).into_iter().map(|f| (i, f)));
            }
            entries.projected = projected(prepared)
                .iter()
                .filter_map(|p| entries.columns.iter().position(|(n, _)| n == p))
                .collect();
        }
        Access::Zigzag | Access::Scan => {}
    }
    entries
}

/// Reads up to `limit` entries (and whether more follow). With `distinct` (the query's
/// `distinct_on` properties, the first `distinct` columns), only the first entry of each
/// combination of their values: past it, the read seeks to the next combination, so a page
/// costs the combinations it returns, not the entries between them.
fn read(
    store: &dyn Store,
    entries: &Entries<'_>,
    limit: usize,
    sorted: bool,
    distinct: usize,
) -> Result<(Vec<Found>, bool), Error> {
    let mut found = Vec::with_capacity(room(limit));
    // The columns' values are built only for what reads them; otherwise each is checked and
    // passed over (a string is not copied, an inverted column not turned back).
    let decode = sorted || !entries.residual.is_empty() || !entries.projected.is_empty();
    let mut more = false;
    if entries.empty {
        return Ok((found, more));
    }
    let mut failure = None;
    let mut partition = Vec::new();
    let mut bounds = entries.bounds.clone();
    loop {
        // Where the next combination of the distinct columns' values starts.
        let mut seek: Option<Bound<Vec<u8>>> = None;
        store.scan(
            &entries.table,
            bounds.range(),
            entries.reverse,
            &mut |k, _| match accept(store, entries, k, decode, distinct, &mut partition) {
                Ok(None) => true,
                Ok(Some(_)) if found.len() == limit => {
                    more = true;
                    false
                }
                Ok(Some(f)) => {
                    seek = f.resume.clone().map(|at| match entries.reverse {
                        false => Bound::Included(at),
                        true => Bound::Excluded(at),
                    });
                    found.push(f);
                    // Distinct: the rest of these values are passed over by a seek (none
                    // past values that end the table).
                    distinct == 0
                }
                Err(e) => {
                    failure = Some(e);
                    false
                }
            },
        )?;
        let Some(next) = seek else { break };
        if failure.is_some() || more {
            break;
        }
        match entries.reverse {
            false => bounds.raise(next),
            true => bounds.lower_to(next),
        }
    }
    match failure {
        Some(e) => Err(e),
        None => Ok((found, more)),
    }
}

/// The entry `k` as a result of the read of `entries`, if it is one (its columns' values
/// decoded where `decode`; `partition` the entities' partition, found once).
fn accept(
    store: &dyn Store,
    entries: &Entries<'_>,
    k: &[u8],
    decode: bool,
    distinct: usize,
    partition: &mut Vec<u8>,
) -> Result<Option<Found>, Error> {
    let mut r = Reader::new(k.get(entries.head..).ok_or_else(corrupt)?);
    let mut values = Vec::with_capacity(if decode { entries.columns.len() } else { 0 });
    let mut distinct_end = entries.head;
    for (i, &(_, inverted)) in entries.columns.iter().enumerate() {
        match decode {
            false => r.skip_value(inverted).map_err(|_| corrupt())?,
            true => values.push(
                match inverted {
                    true => r.inverted_value(),
                    false => r.value(),
                }
                .map_err(|_| corrupt())?,
            ),
        }
        if i + 1 == distinct {
            distinct_end = k.len() - r.rest().len();
        }
    }
    if !entries
        .residual
        .iter()
        .all(|(i, f)| matches(&values[*i], f.op, &f.value))
    {
        return Ok(None);
    }
    let path_at = k.len() - r.rest().len();
    let inverted_path = entries
        .path_inverted
        .then(|| r.rest().iter().map(|b| !b).collect::<Vec<u8>>());
    if !entries.on_entity.is_empty() {
        if partition.is_empty() {
            let mut reader = Reader::new(k);
            reader.partition().map_err(|_| corrupt())?;
            *partition = k[..k.len() - reader.rest().len()].to_vec();
        }
        let path = inverted_path.as_deref().unwrap_or(&k[path_at..]);
        let (entity, _) =
            load(store, &[partition.as_slice(), path].concat())?.ok_or_else(corrupt)?;
        if !entries.on_entity.iter().all(|f| {
            let mut any = false;
            super::scan::visit_indexed(&entity, &f.property, &mut |v| {
                any = any || matches(v, f.op, &f.value);
            });
            any
        }) {
            return Ok(None);
        }
    }
    // Past every entry with these values: after them going up, before them going down.
    let values_end = &k[..distinct_end];
    let resume = match (distinct, entries.reverse) {
        (0, _) => None,
        (_, false) => keycode::prefix_end(values_end),
        (_, true) => Some(values_end.to_vec()),
    };
    Ok(Some(Found {
        position: k.to_vec(),
        inverted_path,
        path_at,
        projected: entries
            .projected
            .iter()
            .map(|&i| values[i].clone())
            .collect(),
        sort: values,
        resume,
    }))
}

/// Up to `limit` results of equality filters answered together ([`leapfrog`]), after `start`
/// and up to `end` (key paths), and whether more follow.
fn zigzag(
    store: &dyn Store,
    prepared: &Prepared<'_>,
    start: Option<Vec<u8>>,
    end: Option<Vec<u8>>,
    limit: usize,
) -> Result<(Vec<Found>, bool), Error> {
    let mut found = Vec::with_capacity(room(limit));
    let mut more = false;
    leapfrog(store, prepared, start, &mut |path| {
        if end.as_deref().is_some_and(|end| path > end) {
            return false;
        }
        if found.len() == limit {
            more = true;
            return false;
        }
        found.push(Found {
            position: path.to_vec(),
            inverted_path: None,
            path_at: 0,
            sort: Vec::new(),
            projected: Vec::new(),
            resume: None,
        });
        true
    })?;
    Ok((found, more))
}

/// Equality filters answered together: each filter's index entries (property, value) are in
/// key order, so the keys in all of them are found by leapfrogging — each index seeks to the
/// largest key another has reached — without reading the entries between. One filter is one
/// range of its index, read straight through. Calls `visit` with each key path (after
/// `start`'s), in key order, until it returns `false`.
fn leapfrog(
    store: &dyn Store,
    prepared: &Prepared<'_>,
    start: Option<Vec<u8>>,
    visit: &mut dyn FnMut(&[u8]) -> bool,
) -> Result<(), Error> {
    let (streams, mut target) = streams(prepared, start);
    if let Some(((base, upper), lower)) = one_stream(&streams, &target) {
        let range = (Bound::Included(lower.as_slice()), as_ref(upper));
        return store.scan(PROPERTIES, range, false, &mut |k, _| {
            visit(&k[base.len()..])
        });
    }
    loop {
        let mut agreed = 0;
        let mut i = 0;
        while agreed < streams.len() {
            let (base, upper) = &streams[i];
            let lower = [base.as_slice(), &target].concat();
            let mut next = None;
            store.scan(
                PROPERTIES,
                (Bound::Included(&lower), as_ref(upper)),
                false,
                &mut |k, _| {
                    next = Some(k[base.len()..].to_vec());
                    false
                },
            )?;
            let Some(path) = next else { return Ok(()) };
            if path == target {
                agreed += 1;
            } else {
                target = path;
                agreed = 1;
            }
            i = (i + 1) % streams.len();
        }
        if !visit(&target) {
            return Ok(());
        }
        target.push(0);
    }
}

/// The index range of a zigzag plan of one equality filter, read straight through (`None`
/// with several): where its entries start (each key path follows it), from `target` on.
fn one_stream<'s>(streams: &'s [Stream], target: &[u8]) -> Option<(&'s Stream, Vec<u8>)> {
    let [stream] = streams else {
        return None;
    };
    Some((stream, [stream.0.as_slice(), target].concat()))
}

/// An equality filter's index entries: the start they share, and the bound just past them.
type Stream = (Vec<u8>, Bound<Vec<u8>>);

/// The index range of each equality filter of a zigzag plan (from the entries' shared start
/// to just past them), and the smallest key path still possible: just past `start`'s, or the
/// ancestor's path (empty without one).
fn streams(prepared: &Prepared<'_>, start: Option<Vec<u8>>) -> (Vec<Stream>, Vec<u8>) {
    let query = prepared.query;
    let head = index::kind_prefix(&query.partition, &query.kind);
    let within = query
        .ancestor
        .as_ref()
        .map(index::path_prefix)
        .unwrap_or_default();
    let streams: Vec<Stream> = prepared
        .filters()
        .iter()
        .map(|f| {
            let mut base = head.clone();
            keycode::bytes(&mut base, f.property.as_bytes());
            base.extend_from_slice(&encoded(&f.value, false));
            let upper = after_prefix(&[base.as_slice(), &within].concat());
            (base, upper)
        })
        .collect();
    let target = match start {
        Some(mut path) => {
            path.push(0);
            path
        }
        None => within,
    };
    (streams, target)
}
