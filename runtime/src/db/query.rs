//! Typed queries: `db.query::<Post>().filter(…).order(…).limit(20).fetch()`.
//!
//! There is no offset anywhere: a page carries an opaque cursor to the next one (R-Q3).

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;

use futures_core::Stream;
use futures_util::{StreamExt as _, TryStreamExt as _, stream};

use crate::backend::{BoxFuture, FoundEntity};
use datastore_entity_core::error::{Error, ServiceCode};
use datastore_entity_core::model::entity::{Entity, Projection};
use datastore_entity_core::model::key::{KEY_PROPERTY, Key, RawKey};
use datastore_entity_core::model::property_type::PropertyType;
use datastore_entity_core::model::schema::Direction;
use datastore_entity_core::model::value::{PropertyMap, Value};
use datastore_entity_core::query::descriptor::{
    Filter, NotExcluded, NotFlattened, NotInArray, Order, PropertyPath,
};
use datastore_entity_core::query::explain::Explanation;
use datastore_entity_core::query::spec::{
    Aggregation, Operator, PropertyFilter, PropertyOrder, QueryBatch, QuerySpec, ResultShape,
};
use datastore_entity_core::query::write::Mask;
use datastore_entity_core::query_rule::QueryRule;
use datastore_entity_core::rules::filter::check_query;

use datastore_entity_core::query::results::{Cursor, Numeric, Page};

use super::read::{entity_from, with_counters};
use super::scope::{Scope, TxRef};

/// How many results a stream asks for per page.
const STREAM_PAGE: usize = 300;

/// All results of a paged query as one stream: `fetch(query, page_size, cursor)` returns a
/// page, and the next page starts at its `next` cursor (`None` for the first page: the
/// query's own start). `total` caps the number of results.
pub(crate) fn paged<Q, T, F, Fut>(
    query: Q,
    total: Option<usize>,
    fetch: F,
) -> impl Stream<Item = Result<T, Error>> + Send + 'static
where
    Q: Clone + Send + 'static,
    T: Send + 'static,
    F: Fn(Q, usize, Option<Cursor>) -> Fut + Send + 'static,
    Fut: Future<Output = Result<Page<T>, Error>> + Send + 'static,
{
    let state = (query, fetch, None::<Cursor>, total, false);
    stream::try_unfold(
        state,
        |(query, fetch, cursor, remaining, done)| async move {
            if done || remaining == Some(0) {
                return Ok(None);
            }
            let size = remaining.map_or(STREAM_PAGE, |r| r.min(STREAM_PAGE));
            let page = fetch(query.clone(), size, cursor).await?;
            let remaining = remaining.map(|r| r.saturating_sub(page.items.len()));
            let done = page.next.is_none();
            Ok::<_, Error>(Some((
                page.items,
                (query, fetch, page.next, remaining, done),
            )))
        },
    )
    .map_ok(|items| stream::iter(items.into_iter().map(Ok)))
    .try_flatten()
    .boxed()
}

/// A query on kind `E::KIND`. Built by `Db::query`, run by [`fetch`](Query::fetch) or
/// [`stream`](Query::stream).
#[must_use = "a query does nothing until `fetch` or `stream` is called"]
pub struct Query<E> {
    pub(crate) scope: Scope,
    pub(crate) spec: QuerySpec,
    transaction: Option<TxRef>,
    /// A mistake found while building (a key of another partition), returned by `fetch`.
    pub(super) error: Option<Error>,
    entity: PhantomData<fn() -> E>,
}

impl<E> Clone for Query<E> {
    fn clone(&self) -> Self {
        Query {
            scope: self.scope.clone(),
            spec: self.spec.clone(),
            transaction: self.transaction.clone(),
            error: self.error.clone(),
            entity: PhantomData,
        }
    }
}

impl<E> fmt::Debug for Query<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Query").field("spec", &self.spec).finish()
    }
}

impl<E: Entity> Query<E> {
    pub(crate) fn new(scope: Scope, transaction: Option<TxRef>) -> Query<E> {
        let spec = QuerySpec {
            partition: scope.partition.clone(),
            kind: E::KIND.to_owned(),
            ..QuerySpec::default()
        };
        Query {
            scope,
            spec,
            transaction,
            error: None,
            entity: PhantomData,
        }
    }

    /// Only entities under `ancestor` (its entity group): strongly consistent (R-E1).
    pub fn ancestor<P>(mut self, ancestor: &Key<P>) -> Self {
        match self.scope.outgoing(ancestor.raw()) {
            Ok(ancestor) => self.spec.ancestor = Some(ancestor),
            Err(error) => {
                self.error.get_or_insert(error);
            }
        }
        self
    }

    /// Adds a filter; all filters must hold.
    pub fn filter(mut self, filter: Filter<E>) -> Self {
        let mut node = filter.into_node();
        let scope = &self.scope;
        node.leaves_mut(&mut |leaf| scope.outgoing_value(&mut leaf.value));
        self.spec.filters.push(node);
        self
    }

    /// Adds a sort order, after the ones already given.
    pub fn order(mut self, order: Order<E>) -> Self {
        self.spec.orders.push(PropertyOrder {
            property: order.property.into_owned(),
            direction: order.direction,
        });
        self
    }

    /// At most `limit` results per page.
    pub fn limit(mut self, limit: usize) -> Self {
        self.spec.limit = Some(limit);
        self
    }

    /// Starts after `cursor` (the `next` of a previous page); `None` starts at the beginning.
    pub fn start_after(mut self, cursor: impl Into<Option<Cursor>>) -> Self {
        self.spec.start_cursor = cursor.into().map(Cursor::into_bytes);
        self
    }

    /// Stops at `cursor`: results after it are not returned.
    pub fn end_at(mut self, cursor: impl Into<Option<Cursor>>) -> Self {
        self.spec.end_cursor = cursor.into().map(Cursor::into_bytes);
        self
    }

    /// Resumes after `last`, the last entity processed (R-Q4; call it after the orders): only entities after it in the
    /// query's order come back. A queue-like workload that deletes what it has processed
    /// starts each round from the last value it saw, rather than from the start of the
    /// index, where the service would step over every deleted entry again (and an offset
    /// would skip entries: deleted ones no longer count).
    ///
    /// The query is ordered by at most one property (then the key, added in that property's
    /// direction when not given); the resume is `p > v OR (p = v AND __key__ > k)` (`<` for a
    /// descending order), with `v` and `k` read from `last`. Another order, or a `last`
    /// holding no single value for the ordered property, is [`Error::InvalidQuery`] when the
    /// query runs. Needs `OR` (Firestore in Datastore mode and the embedded engine; the
    /// legacy Datastore emulator refuses it).
    ///
    /// ```
    /// # use datastore_entity::prelude::*;
    /// #[derive(Entity)]
    /// struct Task {
    ///     #[key]
    ///     id: KeyName,
    ///     priority: i64,
    /// }
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let db = Db::in_memory();
    /// for (id, priority) in [("a", 1), ("b", 1), ("c", 2), ("d", 3)] {
    ///     db.put(&Task { id: KeyName::new(id)?, priority }).await?;
    /// }
    /// let first = db.query::<Task>().order(Task::PRIORITY.asc()).limit(2).fetch().await?.items;
    /// let last = first.last().unwrap();
    /// for task in &first {
    ///     db.delete(&Task::key(task.id.clone())).await?; // processed
    /// }
    /// let next = db.query::<Task>().order(Task::PRIORITY.asc()).resume_after(last).fetch().await?;
    /// let ids: Vec<&str> = next.items.iter().map(|t| t.id.as_str()).collect();
    /// assert_eq!(ids, ["c", "d"]);
    /// # Ok::<(), Error>(())
    /// # }).unwrap();
    /// ```
    pub fn resume_after(mut self, last: &E) -> Self {
        match self.resume_filter(last) {
            Ok(filter) => self.filter(filter),
            Err(error) => {
                self.error.get_or_insert(error);
                self
            }
        }
    }

    /// The filter of [`resume_after`](Query::resume_after) (after it has added the key order).
    fn resume_filter(&mut self, last: &E) -> Result<Filter<E>, Error> {
        let refuse = |rule: QueryRule| Error::InvalidQuery {
            kind: E::KIND.to_owned(),
            rule,
        };
        let is_key = |o: &PropertyOrder| o.property == KEY_PROPERTY;
        let key = Value::Key(last.entity_key()?.into_raw());
        let orders = &self.spec.orders;
        let (first, key_order) = match orders.as_slice() {
            [] => (None, None),
            [o] if is_key(o) => (None, Some(o.direction)),
            [o] => (Some(o.clone()), None),
            [o, k] if !is_key(o) && is_key(k) => (Some(o.clone()), Some(k.direction)),
            _ => {
                return Err(refuse(QueryRule::ResumeOrders {
                    orders: orders.len(),
                }));
            }
        };
        let after = |direction: Direction| match direction {
            Direction::Ascending => Operator::GreaterThan,
            Direction::Descending => Operator::LessThan,
        };
        let leaf = |property: &str, op, value| {
            Filter::leaf(PropertyFilter {
                property: property.to_owned(),
                op,
                value,
            })
        };
        let Some(first) = first else {
            let direction = key_order.unwrap_or(Direction::Ascending);
            return Ok(leaf(KEY_PROPERTY, after(direction), key));
        };
        let key_direction = key_order.unwrap_or(first.direction);
        if key_order.is_none() {
            self.spec.orders.push(PropertyOrder {
                property: KEY_PROPERTY.to_owned(),
                direction: key_direction,
            });
        }
        let properties = last.to_properties()?;
        let value = match lookup(&properties, &first.property) {
            Some(Value::Array(_)) | None => {
                return Err(refuse(QueryRule::ResumeValue {
                    property: first.property.clone(),
                }));
            }
            Some(value) => value.clone(),
        };
        Ok(
            leaf(&first.property, after(first.direction), value.clone()).or(leaf(
                &first.property,
                Operator::Equal,
                value,
            )
            .and(leaf(KEY_PROPERTY, after(key_direction), key))),
        )
    }

    /// Reads only the properties `E` declares (the service's property mask): a narrower struct
    /// of a kind with large properties it does not need leaves them on the server. The
    /// entities are what [`fetch`](Query::fetch) returns.
    pub fn partial(mut self) -> Self {
        self.spec.property_mask = Some(Mask::read_paths(E::SCHEMA));
        self
    }

    /// Returns typed keys instead of entities, which is cheaper (R-Q1).
    pub fn keys_only(mut self) -> KeysOnlyQuery<E> {
        self.spec.shape = ResultShape::KeysOnly;
        KeysOnlyQuery { query: self }
    }

    /// Returns only the properties of projection `P` (declared with
    /// `#[entity(projection(P: a, b))]`), read from the index: cheaper than whole entities (R-Q2).
    /// An array property gives one row per element.
    pub fn project<P: Projection<Entity = E>>(mut self) -> ProjectionQuery<E, P> {
        self.spec.shape =
            ResultShape::Projection(P::PROPERTIES.iter().map(|p| (*p).to_owned()).collect());
        ProjectionQuery {
            query: self,
            projection: PhantomData,
        }
    }

    /// The mistake found while building, or a rule of the service the filters break: refused
    /// before anything is sent.
    fn checked(&self) -> Result<(), Error> {
        if let Some(error) = &self.error {
            return Err(error.clone());
        }
        if self.spec.find_nearest.is_some()
            && (self.spec.limit.is_some() || !self.spec.orders.is_empty())
        {
            return Err(Error::InvalidQuery {
                kind: E::KIND.to_owned(),
                rule: QueryRule::NearestAlone,
            });
        }
        check_query(&self.spec).map_err(|rule| Error::InvalidQuery {
            kind: E::KIND.to_owned(),
            rule,
        })
    }

    /// Records `rule` as the query's mistake (the first one is kept), returned by `fetch`.
    pub(super) fn refuse(&mut self, rule: QueryRule) {
        self.error.get_or_insert(Error::InvalidQuery {
            kind: E::KIND.to_owned(),
            rule,
        });
    }

    /// One batch from the backend.
    pub(crate) async fn run(&self) -> Result<QueryBatch, Error> {
        self.checked()?;
        self.scope.declare(E::SCHEMA).await?;
        let backend = &*self.scope.backend;
        let spec = &self.spec;
        match &self.transaction {
            None => backend.run_query(spec, None).await,
            Some(tx) => {
                tx.read(
                    |id| async move { backend.run_query(spec, Some(&id)).await },
                    |mode| async move { backend.begin_with_query(spec, &mode).await },
                )
                .await
            }
        }
    }

    /// Entities from query rows, their counters filled with one lookup (R-S1): each row's
    /// own outcome, a decode error naming the entity's key.
    pub(crate) async fn entities(
        &self,
        mut rows: Vec<(RawKey, PropertyMap)>,
    ) -> Result<Vec<Result<E, Error>>, Error> {
        with_counters(&self.scope, E::SCHEMA, &mut rows, self.transaction.as_ref()).await?;
        Ok(rows
            .into_iter()
            .map(|(key, properties)| E::from_entity(&key, properties))
            .collect())
    }

    /// Runs an aggregation over the query's rows (its `limit`, if any, caps them).
    async fn aggregate(&self, aggregation: Aggregation) -> Result<Value, Error> {
        self.checked()?;
        self.scope.declare(E::SCHEMA).await?;
        let backend = &*self.scope.backend;
        let (spec, aggregation) = (&self.spec, &aggregation);
        match &self.transaction {
            None => backend.run_aggregation(spec, aggregation, None).await,
            Some(tx) => {
                tx.read(
                    |id| async move { backend.run_aggregation(spec, aggregation, Some(&id)).await },
                    |mode| async move {
                        backend
                            .begin_with_aggregation(spec, aggregation, &mode)
                            .await
                    },
                )
                .await
            }
        }
    }

    /// How the query would be answered — its plan and the indexes it reads — without running
    /// it (Query Explain). On Google Cloud it is the service's plan; on the embedded engine its
    /// own planner's choice: the kind's keys, a built-in index, a zigzag merge of equality
    /// filters' indexes, a declared composite index, merged branches, or every entity of the
    /// kind.
    pub async fn explain(self) -> Result<Explanation, Error> {
        Ok(self.explain_run(false).await?.1)
    }

    /// Runs the query (one page) and says how it was answered and what it read: the results,
    /// index entries and entities it read (and, on Google Cloud, the read operations billed
    /// and the time taken).
    pub async fn explain_analyze(self) -> Result<(Page<E>, Explanation), Error> {
        let (batch, explanation) = self.explain_run(true).await?;
        let batch = batch.ok_or_else(|| Error::Service {
            code: ServiceCode::Internal,
            message: "an analyzed query came back without its results".to_owned(),
        })?;
        let next = next_cursor(&batch);
        let rows = batch
            .results
            .into_iter()
            .map(|r| (r.key, r.properties))
            .collect();
        let page = Page {
            items: self.entities(rows).await?,
            next,
        };
        Ok((page.transpose()?, explanation))
    }

    async fn explain_run(&self, analyze: bool) -> Result<(Option<QueryBatch>, Explanation), Error> {
        self.checked()?;
        self.scope.declare(E::SCHEMA).await?;
        let backend = &*self.scope.backend;
        if self.transaction.is_some() {
            return Err(Error::Unsupported {
                reason: "Query Explain runs outside transactions; explain the query on the `Db`"
                    .to_owned(),
            });
        }
        backend.explain(&self.spec, analyze, None).await
    }

    /// How many results the query has (a COUNT aggregation: the service counts index entries,
    /// no entity is read). Like the query, an entity with several matching values of an ordered
    /// array property counts once per value.
    pub async fn count(self) -> Result<u64, Error> {
        let value = self.aggregate(Aggregation::Count { up_to: None }).await?;
        count_of(value)
    }

    /// Like [`count`](Query::count), but stops counting at `up_to`: a cheap "are there at
    /// least n" (the service reads at most `up_to` index entries).
    pub async fn count_up_to(self, up_to: u64) -> Result<u64, Error> {
        let value = self
            .aggregate(Aggregation::Count { up_to: Some(up_to) })
            .await?;
        count_of(value)
    }

    /// The sum of a numeric property over the query's results (a SUM aggregation): an `i64`
    /// for an integer property, an `f64` for a double one. Every element of an array counts
    /// (each distinct value once; where an `eq` or `is_in` filter on the same property
    /// fixes it, each counts as the value the filter fixed, as the service reads it from
    /// that index); entities without the property count nothing; an empty result sums to
    /// zero.
    pub fn sum<T, I>(
        self,
        property: PropertyPath<E, T, I>,
    ) -> BoxFuture<'static, Result<<T::Operand as Numeric>::Sum, Error>>
    where
        T: PropertyType,
        T::Operand: Numeric,
        I: NotExcluded + NotInArray + NotFlattened,
    {
        let name = property.name().to_owned();
        Box::pin(async move {
            let value = self.aggregate(Aggregation::Sum(name.clone())).await?;
            <T::Operand as Numeric>::sum(value).map_err(|found| Error::InvalidValue {
                kind: E::KIND.to_owned(),
                property: name,
                reason: format!("its sum is not a number of the property's type ({found})"),
            })
        })
    }

    /// The mean of a numeric property over the query's results (an AVG aggregation); `None`
    /// when no result holds the property.
    pub fn avg<T, I>(
        self,
        property: PropertyPath<E, T, I>,
    ) -> BoxFuture<'static, Result<Option<f64>, Error>>
    where
        T: PropertyType,
        T::Operand: Numeric,
        I: NotExcluded + NotInArray + NotFlattened,
    {
        let name = property.name().to_owned();
        Box::pin(async move {
            match self.aggregate(Aggregation::Avg(name.clone())).await? {
                Value::Null => Ok(None),
                Value::Double(d) => Ok(Some(d)),
                Value::Integer(i) => Ok(Some(i as f64)),
                other => Err(Error::InvalidValue {
                    kind: E::KIND.to_owned(),
                    property: name,
                    reason: format!("its average came back as {other:?}"),
                }),
            }
        })
    }

    /// Runs the query and returns one page. An entity that does not decode fails the page,
    /// naming its key ([`stream`](Query::stream) yields it as that item's error instead).
    pub async fn fetch(self) -> Result<Page<E>, Error> {
        self.fetch_each().await?.transpose()
    }

    /// One page, each entity with its own outcome.
    async fn fetch_each(self) -> Result<Page<Result<E, Error>>, Error> {
        if self.transaction.is_none() && E::SCHEMA.counters.is_empty() {
            return self.read_each().await;
        }
        let batch = self.run().await?;
        let next = next_cursor(&batch);
        let rows = batch
            .results
            .into_iter()
            .map(|r| (r.key, r.properties))
            .collect();
        Ok(Page {
            items: self.entities(rows).await?,
            next,
        })
    }

    /// One page outside a transaction, of an entity without counters: each result read as
    /// the backend hands it over (the embedded engine's stored form read straight into the
    /// entity, as a `get` reads it).
    async fn read_each(self) -> Result<Page<Result<E, Error>>, Error> {
        self.checked()?;
        self.scope.declare(E::SCHEMA).await?;
        let backend = &*self.scope.backend;
        let mut items = Vec::with_capacity(self.spec.limit.map_or(0, |limit| limit.min(1_024)));
        let mut read = |key: &RawKey, found: FoundEntity<'_>| {
            items.push(entity_from(key, found));
            Ok(())
        };
        let end = backend.run_query_each(&self.spec, &mut read).await?;
        Ok(Page {
            items,
            next: end.more_results.then(|| Cursor::from_bytes(end.end_cursor)),
        })
    }

    /// All results as a stream, fetched page by page through cursors. The query's `limit`,
    /// if any, caps the total. An entity that does not decode is that item's error (naming
    /// its key), and the stream goes on with the next; a failed call ends the stream.
    pub fn stream(self) -> impl Stream<Item = Result<E, Error>> + Send + 'static {
        let total = self.spec.limit;
        // A page's items each carry their own outcome: one that fails is that item's error.
        paged(self, total, |query, size, cursor| {
            query.page(size, cursor).fetch_each()
        })
        .map(Result::flatten)
    }

    /// The page of `size` results after `cursor` (`None`: from the query's own start). A
    /// nearest-neighbour search is one page, limited by its own `limit`.
    pub(crate) fn page(self, size: usize, cursor: Option<Cursor>) -> Self {
        let query = match self.spec.find_nearest {
            Some(_) => self,
            None => self.limit(size),
        };
        match cursor {
            Some(cursor) => query.start_after(cursor),
            None => query,
        }
    }
}

fn count_of(value: Value) -> Result<u64, Error> {
    match value {
        Value::Integer(n) if n >= 0 => Ok(n as u64),
        other => Err(Error::Service {
            code: ServiceCode::Internal,
            message: format!("a count came back as {other:?}"),
        }),
    }
}

pub(crate) fn next_cursor(batch: &QueryBatch) -> Option<Cursor> {
    batch
        .more_results
        .then(|| Cursor::from_bytes(batch.end_cursor.clone()))
}

/// The builder methods of [`Query`], on a keys-only or projection query built from one.
macro_rules! forward_builders {
    () => {
        /// Only entities under `ancestor` (its entity group): strongly consistent (R-E1).
        pub fn ancestor<A>(mut self, ancestor: &Key<A>) -> Self {
            self.query = self.query.ancestor(ancestor);
            self
        }

        /// Adds a filter; all filters must hold.
        pub fn filter(mut self, filter: Filter<E>) -> Self {
            self.query = self.query.filter(filter);
            self
        }

        /// Adds a sort order, after the ones already given.
        pub fn order(mut self, order: Order<E>) -> Self {
            self.query = self.query.order(order);
            self
        }

        /// At most `limit` results per page.
        pub fn limit(mut self, limit: usize) -> Self {
            self.query = self.query.limit(limit);
            self
        }

        /// Starts after `cursor` (the `next` of a previous page); `None` starts at the beginning.
        pub fn start_after(mut self, cursor: impl Into<Option<Cursor>>) -> Self {
            self.query = self.query.start_after(cursor);
            self
        }

        /// Stops at `cursor`: results after it are not returned.
        pub fn end_at(mut self, cursor: impl Into<Option<Cursor>>) -> Self {
            self.query = self.query.end_at(cursor);
            self
        }
    };
}

/// A keys-only query: [`fetch`](KeysOnlyQuery::fetch) returns typed keys (R-Q1).
#[must_use = "a query does nothing until `fetch` or `stream` is called"]
pub struct KeysOnlyQuery<E> {
    query: Query<E>,
}

impl<E> Clone for KeysOnlyQuery<E> {
    fn clone(&self) -> Self {
        KeysOnlyQuery {
            query: self.query.clone(),
        }
    }
}

impl<E> fmt::Debug for KeysOnlyQuery<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeysOnlyQuery")
            .field("spec", &self.query.spec)
            .finish()
    }
}

impl<E: Entity> KeysOnlyQuery<E> {
    forward_builders!();

    /// Runs the query and returns one page of keys.
    pub async fn fetch(self) -> Result<Page<Key<E>>, Error> {
        let batch = self.query.run().await?;
        Ok(Page {
            next: next_cursor(&batch),
            items: batch
                .results
                .into_iter()
                .map(|r| Key::from_raw(r.key))
                .collect::<Result<_, _>>()?,
        })
    }

    /// All keys as a stream, fetched page by page; the query's `limit`, if any, caps the total.
    pub fn stream(self) -> impl Stream<Item = Result<Key<E>, Error>> + Send + 'static {
        let total = self.query.spec.limit;
        paged(self, total, |q, size, cursor| {
            KeysOnlyQuery {
                query: q.query.page(size, cursor),
            }
            .fetch()
        })
    }
}

/// A projection query: [`fetch`](ProjectionQuery::fetch) returns rows of `P` (R-Q2).
#[must_use = "a query does nothing until `fetch` or `stream` is called"]
pub struct ProjectionQuery<E, P> {
    query: Query<E>,
    projection: PhantomData<fn() -> P>,
}

impl<E, P> Clone for ProjectionQuery<E, P> {
    fn clone(&self) -> Self {
        ProjectionQuery {
            query: self.query.clone(),
            projection: PhantomData,
        }
    }
}

impl<E, P> fmt::Debug for ProjectionQuery<E, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProjectionQuery")
            .field("spec", &self.query.spec)
            .finish()
    }
}

impl<E: Entity, P: Projection<Entity = E>> ProjectionQuery<E, P> {
    forward_builders!();

    /// Runs the query and returns one page of projected rows.
    pub async fn fetch(self) -> Result<Page<P>, Error> {
        let batch = self.query.run().await?;
        Ok(Page {
            next: next_cursor(&batch),
            items: batch
                .results
                .into_iter()
                .map(|r| P::from_properties(r.properties))
                .collect::<Result<_, _>>()?,
        })
    }

    /// All rows as a stream, fetched page by page; the query's `limit`, if any, caps the total.
    pub fn stream(self) -> impl Stream<Item = Result<P, Error>> + Send + 'static {
        let total = self.query.spec.limit;
        paged(self, total, |q, size, cursor| {
            ProjectionQuery::<E, P> {
                query: q.query.page(size, cursor),
                projection: PhantomData,
            }
            .fetch()
        })
    }
}

/// The value at `path` in `properties`: a property's name, or a dotted path into embedded
/// entities (or a flattened property's dotted name).
fn lookup<'m>(properties: &'m PropertyMap, path: &str) -> Option<&'m Value> {
    if let Some(property) = properties.get(path) {
        return Some(&property.value);
    }
    let (outer, inner) = path.split_once('.')?;
    match &properties.get(outer)?.value {
        Value::Entity(embedded) => lookup(embedded, inner),
        _ => None,
    }
}
