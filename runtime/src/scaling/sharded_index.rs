//! `#[sharded_index(n)]` (R-S3): a monotonic value (a timestamp) indexed behind a fixed-width
//! shard prefix, so new entities spread over `n` ranges of the index instead of all landing at
//! its end; queries run the `n` shard queries concurrently and merge them in order.
//!
//! The plain field is stored excluded from indexes; the companion property holds
//! `"{shard}:{value}:{tiebreak}"`: the shard with a fixed number of digits, the value as 16
//! hex digits whose byte order is numeric order, and 16 hex digits of a hash of the entity's
//! key (random while the key is still incomplete) from which the shard is also taken. Every
//! companion is distinct, so the merged order is total and a position is one string: a
//! query resumes every shard after it with a range filter, the same on every backend.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};
use std::marker::PhantomData;

use futures_core::Stream;
use futures_util::StreamExt as _;

use crate::db::query::{Query, paged};
use datastore_entity_core::error::Error;
use datastore_entity_core::format::companion::{sortable, width};
use datastore_entity_core::format::cursor::{self, SHARDED, write_filter};
use datastore_entity_core::hash::fnv1a;
use datastore_entity_core::model::codec::Reader;
use datastore_entity_core::model::entity::Entity;
use datastore_entity_core::model::key::Key;
use datastore_entity_core::model::schema::{Direction, ShardedIndexSchema};
use datastore_entity_core::model::stored::Writer;
use datastore_entity_core::model::value::Value;
use datastore_entity_core::query::descriptor::Filter;
use datastore_entity_core::query::results::{Cursor, Page};
use datastore_entity_core::query::spec::{
    FilterNode, Operator, PropertyFilter, PropertyOrder, QueryBatch, QueryResult,
};

/// The companion value of a sharded index's value (its layout is a stored format).
/// What a `#[sharded_index(n)]` field can hold.
pub use datastore_entity_core::model::property_type::ShardIndexable;

/// A query through a `#[sharded_index(n)]` field: `n` shard queries, run concurrently and
/// merged in the field's order, with one cursor that resumes every shard (R-S3).
///
/// Built by the generated `E::query_by_<field>(&db)`.
#[must_use = "a query does nothing until `fetch` or `stream` is called"]
pub struct ShardedQuery<E, T> {
    query: Query<E>,
    index: &'static ShardedIndexSchema,
    direction: Direction,
    lower: Option<(i64, bool)>,
    upper: Option<(i64, bool)>,
    start: Option<Cursor>,
    value: PhantomData<fn() -> T>,
}

impl<E, T> Clone for ShardedQuery<E, T> {
    fn clone(&self) -> Self {
        ShardedQuery {
            query: self.query.clone(),
            index: self.index,
            direction: self.direction,
            lower: self.lower,
            upper: self.upper,
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

    /// Only values greater than `value` (a `None` bound leaves the range open).
    pub fn gt(mut self, value: impl Into<T>) -> Self {
        self.lower = value.into().sort_value().map(|v| (v, false));
        self
    }

    /// Only values greater than or equal to `value`.
    pub fn ge(mut self, value: impl Into<T>) -> Self {
        self.lower = value.into().sort_value().map(|v| (v, true));
        self
    }

    /// Only values less than `value`.
    pub fn lt(mut self, value: impl Into<T>) -> Self {
        self.upper = value.into().sort_value().map(|v| (v, false));
        self
    }

    /// Only values less than or equal to `value`.
    pub fn le(mut self, value: impl Into<T>) -> Self {
        self.upper = value.into().sort_value().map(|v| (v, true));
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
        for (i, bound) in [&self.lower, &self.upper].into_iter().enumerate() {
            if let Some((value, inclusive)) = bound {
                w.u8(u8::try_from(i).unwrap_or(0));
                w.u64(value.cast_unsigned());
                w.u8(u8::from(*inclusive));
            }
        }
        let spec = &self.query.spec;
        w.partition(Some(&spec.partition));
        w.bytes.extend_from_slice(spec.kind.as_bytes());
        if let Some(ancestor) = &spec.ancestor {
            w.key(ancestor);
        }
        for f in &spec.filters {
            write_filter(&mut w, f);
        }
        fnv1a(&w.bytes)
    }

    /// A cursor after the row whose companion, without its shard, is `position`.
    fn encode(&self, position: &str) -> Cursor {
        let mut w = Writer::default();
        w.value(&Value::String(position.to_owned()));
        Cursor::from_bytes(cursor::seal(SHARDED, self.fingerprint(), &w.bytes))
    }

    fn decode(&self, cursor: &Cursor) -> Result<String, Error> {
        let maker = "a sharded-index query";
        let bytes = cursor::open(SHARDED, self.fingerprint(), cursor.as_bytes(), maker)?;
        let mut r = Reader::new(bytes);
        match r.value().map(Value::into_string) {
            Ok(Some(position)) if r.is_empty() => Ok(position),
            _ => Err(Error::InvalidCursor {
                reason: "it is corrupt".to_owned(),
            }),
        }
    }

    /// The query of shard `shard`, after `position` if the query resumes: rows written
    /// since behind the position are not returned, as in a query on one index.
    fn shard_query(&self, shard: u32, position: Option<&str>, limit: usize) -> Query<E> {
        let width = width(self.index.shards);
        let prefix = format!("{shard:0width$}:");
        let companion = self.index.companion;
        let filter = |op, text: String| {
            FilterNode::Property(PropertyFilter {
                property: companion.to_owned(),
                op,
                value: Value::String(text),
            })
        };
        let mut query = self.query.clone().limit(limit);
        let spec = &mut query.spec;
        // `~` sorts after every hex digit: `v:~` is after every tiebreak of the value `v`.
        spec.filters.push(match self.lower {
            Some((v, true)) => filter(
                Operator::GreaterThanOrEqual,
                format!("{prefix}{}", sortable(v)),
            ),
            Some((v, false)) => filter(Operator::GreaterThan, format!("{prefix}{}:~", sortable(v))),
            None => filter(Operator::GreaterThanOrEqual, prefix.clone()),
        });
        spec.filters.push(match self.upper {
            Some((v, true)) => filter(
                Operator::LessThanOrEqual,
                format!("{prefix}{}:~", sortable(v)),
            ),
            Some((v, false)) => filter(Operator::LessThan, format!("{prefix}{}", sortable(v))),
            // `;` follows `:`: every value of the shard sorts before it.
            None => filter(Operator::LessThan, format!("{shard:0width$};")),
        });
        if let Some(position) = position {
            let op = match self.direction {
                Direction::Ascending => Operator::GreaterThan,
                Direction::Descending => Operator::LessThan,
            };
            spec.filters.push(filter(op, format!("{prefix}{position}")));
        }
        spec.orders.push(PropertyOrder {
            property: companion.to_owned(),
            direction: self.direction,
        });
        query
    }

    /// Runs the shard queries concurrently and returns one merged page. An entity that does
    /// not decode fails the page, naming its key ([`stream`](ShardedQuery::stream) yields it
    /// as that item's error instead).
    pub async fn fetch(self) -> Result<Page<E>, Error> {
        self.fetch_each().await?.transpose()
    }

    /// One merged page, each entity with its own outcome.
    async fn fetch_each(self) -> Result<Page<Result<E, Error>>, Error> {
        let limit = self.query.spec.limit.unwrap_or(usize::MAX);
        let position = self.start.as_ref().map(|c| self.decode(c)).transpose()?;
        let runs = (0..self.index.shards).map(|shard| {
            let query = self.shard_query(shard, position.as_deref(), limit);
            async move { query.run().await }
        });
        let batches: Vec<QueryBatch> = futures_util::future::try_join_all(runs).await?;
        let (rows, consumed) = merge(&batches, self.index.companion, self.direction, limit);
        let exhausted = batches
            .iter()
            .zip(&consumed)
            .all(|(batch, taken)| *taken == batch.results.len() && !batch.more_results);
        let next = match rows.last() {
            _ if exhausted => None,
            Some(last) => Some(self.encode(position_of(last, self.index.companion))),
            // Nothing returned, yet more may come (a limit of 0): stay where the query started.
            None => self.start.clone(),
        };
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
            .fetch_each()
        })
        .map(Result::flatten)
    }
}

/// A row's position in the merged order: its companion value without the shard prefix.
fn position_of<'r>(row: &'r QueryResult, companion: &str) -> &'r str {
    match row.properties.get(companion).map(|p| &p.value) {
        Some(Value::String(s)) => s.split_once(':').map_or(s.as_str(), |(_, key)| key),
        _ => "",
    }
}

/// A k-way merge of the shards' results in the index's order: at most `limit` rows, and how
/// many rows of each shard were taken.
fn merge<'b>(
    batches: &'b [QueryBatch],
    companion: &str,
    direction: Direction,
    limit: usize,
) -> (Vec<&'b QueryResult>, Vec<usize>) {
    /// One shard's next row, ordered by its position.
    struct Head<'b> {
        position: &'b str,
        shard: usize,
        direction: Direction,
    }
    impl Ord for Head<'_> {
        fn cmp(&self, other: &Self) -> Ordering {
            let order = self.position.cmp(other.position);
            // `BinaryHeap` pops the largest: the smallest first when ascending.
            match self.direction {
                Direction::Ascending => order.reverse(),
                Direction::Descending => order,
            }
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

    let mut queues: Vec<VecDeque<&'b QueryResult>> =
        batches.iter().map(|b| b.results.iter().collect()).collect();
    let mut heap = BinaryHeap::with_capacity(queues.len());
    for (shard, queue) in queues.iter().enumerate() {
        if let Some(row) = queue.front() {
            heap.push(Head {
                position: position_of(row, companion),
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
                position: position_of(row, companion),
                ..head
            });
        }
    }
    (rows, consumed)
}
