//! `#[sharded_index(n)]` (R-S3): a monotonic value (a timestamp) indexed behind a fixed-width
//! shard prefix, so new entities spread over `n` ranges of the index instead of all landing at
//! its end; queries run the `n` shard queries concurrently and merge them in order.
//!
//! The plain field is stored excluded from indexes; the companion property holds
//! `"{shard}:{sort key}"`, where the shard has a fixed number of digits and the sort key is
//! text whose byte order is the value's order. The shard is a hash of the entity's key (a
//! random one while the key is still incomplete), so writes at the same instant spread too.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};
use std::marker::PhantomData;

use futures_core::Stream;

use crate::backend::{PropertyFilter, QueryBatch, QueryResult};
use crate::codec::{Reader, Writer, fnv1a};
use crate::entity::ShardedIndexSchema;
use crate::property::{Direction, Operator};
use crate::query::{Cursor, Page, Query, paged};
use crate::value::{PropertyType, Timestamp, Value};
use crate::{Entity, Error, Filter, Key, RawKey};

/// A type whose values a `#[sharded_index(n)]` field can hold: timestamps, integers and strings.
#[diagnostic::on_unimplemented(
    message = "`#[sharded_index]` needs a timestamp, an integer or a string field, not `{Self}`",
    label = "cannot be sharded-indexed",
    note = "the companion property holds the value as text whose order is the value's order"
)]
pub trait ShardIndexable: PropertyType {
    /// The value as text whose byte order is the value's order; `None` leaves the entity out
    /// of the sharded index (an `Option` holding `None`).
    fn sort_key(&self) -> Option<String>;
}

/// Signed integers in offset binary, as 16 hex digits: byte order is numeric order.
fn sortable(n: i64) -> String {
    format!("{:016x}", n.cast_unsigned() ^ (1 << 63))
}

macro_rules! integer_sort_key {
    ($($t:ty),*) => {$(
        impl ShardIndexable for $t {
            fn sort_key(&self) -> Option<String> {
                Some(sortable(i64::from(*self)))
            }
        }
    )*};
}
integer_sort_key!(i8, i16, i32, i64, u8, u16, u32);

impl ShardIndexable for Timestamp {
    fn sort_key(&self) -> Option<String> {
        Some(sortable(self.as_micros()))
    }
}

impl ShardIndexable for String {
    fn sort_key(&self) -> Option<String> {
        Some(self.clone())
    }
}

impl<T: ShardIndexable> ShardIndexable for Option<T> {
    fn sort_key(&self) -> Option<String> {
        self.as_ref().and_then(T::sort_key)
    }
}

/// How many digits shard numbers of an index of `shards` shards take.
fn width(shards: u32) -> usize {
    shards.saturating_sub(1).max(1).to_string().len()
}

/// The companion value of `value` for the entity `key` (`None` while it is incomplete).
pub fn companion_value(index: &ShardedIndexSchema, key: Option<&RawKey>, sort_key: &str) -> Value {
    let shards = index.shards.max(1);
    let shard = match key.filter(|k| k.is_complete()) {
        Some(key) => {
            let mut w = Writer::default();
            w.path(key);
            u32::try_from(fnv1a(&w.bytes) % u64::from(shards)).unwrap_or(0)
        }
        None => fastrand::u32(..shards),
    };
    Value::String(format!("{shard:0w$}:{sort_key}", w = width(shards)))
}

/// The state of one shard in a sharded cursor.
#[derive(Debug, Clone, PartialEq, Eq)]
enum ShardState {
    /// Not read yet.
    Start,
    /// Resume after this backend cursor.
    After(Vec<u8>),
    /// No more results.
    Done,
}

const CURSOR_MAGIC: u8 = 0xE7;

/// A query through a `#[sharded_index(n)]` field: `n` shard queries, run concurrently and
/// merged in the field's order, with one cursor that resumes every shard (R-S3).
///
/// Built by the generated `E::query_by_<field>(&db)`.
#[must_use = "a query does nothing until `fetch` or `stream` is called"]
pub struct ShardedQuery<E, T> {
    query: Query<E>,
    index: &'static ShardedIndexSchema,
    direction: Direction,
    lower: Option<(String, bool)>,
    upper: Option<(String, bool)>,
    start: Option<Cursor>,
    value: PhantomData<fn() -> T>,
}

impl<E, T> Clone for ShardedQuery<E, T> {
    fn clone(&self) -> Self {
        ShardedQuery {
            query: self.query.clone(),
            index: self.index,
            direction: self.direction,
            lower: self.lower.clone(),
            upper: self.upper.clone(),
            start: self.start.clone(),
            value: PhantomData,
        }
    }
}

impl<E, T> std::fmt::Debug for ShardedQuery<E, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShardedQuery")
            .field("index", &self.index.companion)
            .field("direction", &self.direction)
            .finish_non_exhaustive()
    }
}

impl<E, T> ShardedQuery<E, T> {
    /// A query of `E` ordered by the sharded field (used by the generated helper).
    pub fn new(query: Query<E>, index: &'static ShardedIndexSchema) -> Self {
        ShardedQuery {
            query,
            index,
            direction: Direction::Ascending,
            lower: None,
            upper: None,
            start: None,
            value: PhantomData,
        }
    }
}

impl<E: Entity, T: ShardIndexable> ShardedQuery<E, T> {
    /// Smallest first (the default).
    pub fn asc(mut self) -> Self {
        self.direction = Direction::Ascending;
        self
    }

    /// Largest first: newest first, for a timestamp.
    pub fn desc(mut self) -> Self {
        self.direction = Direction::Descending;
        self
    }

    fn bound(value: &T) -> String {
        // A `None` bound leaves the range open on that side.
        value.sort_key().unwrap_or_default()
    }

    /// Only values greater than `value`.
    pub fn gt(mut self, value: impl Into<T>) -> Self {
        self.lower = Some((Self::bound(&value.into()), false));
        self
    }

    /// Only values greater than or equal to `value`.
    pub fn ge(mut self, value: impl Into<T>) -> Self {
        self.lower = Some((Self::bound(&value.into()), true));
        self
    }

    /// Only values less than `value`.
    pub fn lt(mut self, value: impl Into<T>) -> Self {
        self.upper = Some((Self::bound(&value.into()), false));
        self
    }

    /// Only values less than or equal to `value`.
    pub fn le(mut self, value: impl Into<T>) -> Self {
        self.upper = Some((Self::bound(&value.into()), true));
        self
    }

    /// Adds an equality filter on another property. The service then needs a composite index
    /// of that property and this field, declared as `#[entity(index(other, field))]`.
    pub fn filter(mut self, filter: Filter<E>) -> Self {
        self.query = self.query.filter(filter);
        self
    }

    /// Only entities under `ancestor`.
    pub fn ancestor<P>(mut self, ancestor: &Key<P>) -> Self {
        self.query = self.query.ancestor(ancestor);
        self
    }

    /// At most `limit` results per page.
    pub fn limit(mut self, limit: usize) -> Self {
        self.query = self.query.limit(limit);
        self
    }

    /// Starts after `cursor` (the `next` of a previous page).
    pub fn start_after(mut self, cursor: impl Into<Option<Cursor>>) -> Self {
        self.start = cursor.into();
        self
    }

    /// What identifies this query in its cursors: the query without its positions.
    fn fingerprint(&self) -> u64 {
        let mut w = Writer::default();
        w.bytes.extend_from_slice(self.index.companion.as_bytes());
        w.u64(u64::from(self.index.shards));
        w.u8(self.direction as u8);
        for (bound, inclusive) in [&self.lower, &self.upper].into_iter().flatten() {
            w.value(&Value::String(bound.clone()));
            w.u8(u8::from(*inclusive));
        }
        let spec = &self.query.spec;
        w.bytes.extend_from_slice(spec.kind.as_bytes());
        if let Some(ancestor) = &spec.ancestor {
            w.key(ancestor);
        }
        for f in &spec.filters {
            w.bytes.extend_from_slice(f.property.as_bytes());
            w.u8(f.op as u8);
            w.value(&f.value);
        }
        fnv1a(&w.bytes)
    }

    fn encode(&self, states: &[ShardState]) -> Cursor {
        let mut w = Writer::default();
        w.u8(CURSOR_MAGIC);
        w.u64(self.fingerprint());
        for state in states {
            match state {
                ShardState::Start => w.u8(0),
                ShardState::After(bytes) => {
                    w.u8(1);
                    w.value(&Value::Blob(bytes.clone().into()));
                }
                ShardState::Done => w.u8(2),
            }
        }
        let checksum = fnv1a(&w.bytes);
        w.u64(checksum);
        Cursor::from_bytes(w.bytes)
    }

    fn decode(&self, cursor: Option<&Cursor>) -> Result<Vec<ShardState>, Error> {
        let shards = self.index.shards as usize;
        let Some(cursor) = cursor else {
            return Ok(vec![ShardState::Start; shards]);
        };
        let invalid = |reason: &str| Error::InvalidCursor {
            reason: reason.to_owned(),
        };
        let bytes = cursor.as_bytes();
        if bytes.len() < 17 || bytes[0] != CURSOR_MAGIC {
            return Err(invalid("it is not a cursor of a sharded-index query"));
        }
        let (body, checksum) = bytes.split_at(bytes.len() - 8);
        if fnv1a(body).to_le_bytes() != checksum {
            return Err(invalid("it was altered (checksum mismatch)"));
        }
        let mut r = Reader::new(&body[1..]);
        let corrupt = |_| invalid("it is corrupt");
        if r.u64().map_err(corrupt)? != self.fingerprint() {
            return Err(invalid("it belongs to a different query"));
        }
        let states = (0..shards)
            .map(|_| match r.u8().map_err(corrupt)? {
                0 => Ok(ShardState::Start),
                1 => match r.value().map_err(corrupt)? {
                    Value::Blob(b) => Ok(ShardState::After(b.into_vec())),
                    _ => Err(invalid("it is corrupt")),
                },
                2 => Ok(ShardState::Done),
                _ => Err(invalid("it is corrupt")),
            })
            .collect::<Result<Vec<_>, Error>>()?;
        if !r.is_empty() {
            return Err(invalid("it has trailing bytes"));
        }
        Ok(states)
    }

    /// The query of shard `shard`, resuming at `state`.
    fn shard_query(&self, shard: u32, state: &ShardState, limit: usize) -> Query<E> {
        let width = width(self.index.shards);
        let prefix = format!("{shard:0width$}:");
        let companion = self.index.companion;
        let filter = |op, text: String| PropertyFilter {
            property: companion.to_owned(),
            op,
            value: Value::String(text),
        };
        let mut query = self.query.clone().limit(limit);
        let spec = &mut query.spec;
        spec.filters.push(match &self.lower {
            Some((bound, true)) => filter(Operator::GreaterThanOrEqual, format!("{prefix}{bound}")),
            Some((bound, false)) => filter(Operator::GreaterThan, format!("{prefix}{bound}")),
            None => filter(Operator::GreaterThanOrEqual, prefix.clone()),
        });
        spec.filters.push(match &self.upper {
            Some((bound, true)) => filter(Operator::LessThanOrEqual, format!("{prefix}{bound}")),
            Some((bound, false)) => filter(Operator::LessThan, format!("{prefix}{bound}")),
            // `;` follows `:`: every value of the shard sorts before it.
            None => filter(Operator::LessThan, format!("{shard:0width$};")),
        });
        spec.orders.push(crate::backend::PropertyOrder {
            property: companion.to_owned(),
            direction: self.direction,
        });
        spec.start_cursor = match state {
            ShardState::After(bytes) => Some(bytes.clone()),
            _ => None,
        };
        query
    }

    /// Runs the shard queries concurrently and returns one merged page.
    pub async fn fetch(self) -> Result<Page<E>, Error> {
        let limit = self.query.spec.limit.unwrap_or(usize::MAX);
        let mut states = self.decode(self.start.as_ref())?;
        let runs = states.iter().enumerate().map(|(shard, state)| {
            let query = (*state != ShardState::Done)
                .then(|| self.shard_query(u32::try_from(shard).unwrap_or(u32::MAX), state, limit));
            async move {
                match query {
                    Some(query) => query.run().await.map(Some),
                    None => Ok(None),
                }
            }
        });
        let batches: Vec<Option<QueryBatch>> = futures_util::future::try_join_all(runs).await?;
        let (rows, consumed) = merge(&batches, self.index.companion, self.direction, limit);
        for (state, (batch, taken)) in states.iter_mut().zip(batches.iter().zip(&consumed)) {
            let Some(batch) = batch else { continue };
            if *taken > 0 {
                *state = ShardState::After(batch.results[*taken - 1].cursor.clone());
            }
            if *taken == batch.results.len() && !batch.more_results {
                *state = ShardState::Done;
            }
        }
        let next = states
            .iter()
            .any(|s| *s != ShardState::Done)
            .then(|| self.encode(&states));
        let rows = rows
            .into_iter()
            .map(|r| (r.key.clone(), r.properties.clone()))
            .collect();
        let items = self.query.entities(rows).await?;
        Ok(Page { items, next })
    }

    /// All results, page by page; the query's `limit`, if any, caps the total.
    pub fn stream(self) -> impl Stream<Item = Result<E, Error>> + Send + 'static
    where
        T: 'static,
    {
        let total = self.query.spec.limit;
        paged(self, total, |query, size, cursor| {
            let query = query.limit(size);
            match cursor {
                Some(cursor) => query.start_after(cursor),
                None => query,
            }
            .fetch()
        })
    }
}

/// A k-way merge of the shards' results in the index's order: at most `limit` rows, and how
/// many rows of each shard were taken.
fn merge<'b>(
    batches: &'b [Option<QueryBatch>],
    companion: &str,
    direction: Direction,
    limit: usize,
) -> (Vec<&'b QueryResult>, Vec<usize>) {
    /// One shard's next row, ordered by its sort key (then shard, for a total order).
    struct Head<'b> {
        key: &'b str,
        shard: usize,
        direction: Direction,
    }
    impl Ord for Head<'_> {
        fn cmp(&self, other: &Self) -> Ordering {
            let by_value = self.key.cmp(other.key);
            // `BinaryHeap` pops the largest: the smallest first when ascending.
            let by_value = match self.direction {
                Direction::Ascending => by_value.reverse(),
                Direction::Descending => by_value,
            };
            by_value.then_with(|| other.shard.cmp(&self.shard))
        }
    }
    impl PartialOrd for Head<'_> {
        fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
            Some(self.cmp(other))
        }
    }
    impl PartialEq for Head<'_> {
        fn eq(&self, other: &Self) -> bool {
            self.cmp(other) == Ordering::Equal
        }
    }
    impl Eq for Head<'_> {}

    let sort_key = |row: &'b QueryResult| -> &'b str {
        match row.properties.get(companion).map(|p| &p.value) {
            Some(Value::String(s)) => s.split_once(':').map_or(s.as_str(), |(_, key)| key),
            _ => "",
        }
    };
    let mut queues: Vec<VecDeque<&'b QueryResult>> = batches
        .iter()
        .map(|b| b.iter().flat_map(|b| &b.results).collect())
        .collect();
    let mut heap = BinaryHeap::with_capacity(queues.len());
    for (shard, queue) in queues.iter().enumerate() {
        if let Some(row) = queue.front() {
            heap.push(Head {
                key: sort_key(row),
                shard,
                direction,
            });
        }
    }
    let mut consumed = vec![0; queues.len()];
    let mut rows = Vec::new();
    while rows.len() < limit {
        let Some(head) = heap.pop() else { break };
        let queue = &mut queues[head.shard];
        if let Some(row) = queue.pop_front() {
            rows.push(row);
            consumed[head.shard] += 1;
        }
        if let Some(row) = queue.front() {
            heap.push(Head {
                key: sort_key(row),
                ..head
            });
        }
    }
    (rows, consumed)
}
