//! Typed queries: `db.query::<Post>().filter(…).order(…).limit(20).fetch()`.
//!
//! There is no offset anywhere: a page carries an opaque cursor to the next one (R-Q3).

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::str::FromStr;

use base64::Engine as _;
use futures_core::Stream;
use futures_util::{StreamExt as _, TryStreamExt as _, stream};

use crate::backend::{PropertyFilter, PropertyOrder, QueryBatch, QuerySpec, ResultShape};
use crate::entity::Projection;
use crate::txn::TxRef;
use crate::{Db, Entity, Error, Filter, Key, Order};

/// An opaque position in a query's results (R-Q3).
///
/// It round-trips through `to_string()` / `parse()` (URL-safe text), so it can go into a
/// web page's "next" link. A cursor that was altered, or that belongs to another query,
/// is [`Error::InvalidCursor`] when used.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Cursor(Vec<u8>);

impl Cursor {
    /// The cursor's bytes, as the backend produced them.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// A cursor from bytes a backend (or a sharded query) produced.
    pub(crate) fn from_bytes(bytes: Vec<u8>) -> Cursor {
        Cursor(bytes)
    }
}

impl fmt::Display for Cursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&self.0))
    }
}

impl fmt::Debug for Cursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Cursor({self})")
    }
}

impl FromStr for Cursor {
    type Err = Error;
    fn from_str(text: &str) -> Result<Cursor, Error> {
        base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(text)
            .map(Cursor)
            .map_err(|_| Error::InvalidCursor {
                reason: "it is not cursor text (URL-safe base64)".to_owned(),
            })
    }
}

/// One page of results and the cursor to the next page (`None`: there are no more).
#[derive(Debug, Clone, PartialEq)]
pub struct Page<T> {
    /// The results, in order.
    pub items: Vec<T>,
    /// Where the next page starts; `None` when this is the last page.
    pub next: Option<Cursor>,
}

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
    pub(crate) db: Db,
    pub(crate) spec: QuerySpec,
    transaction: Option<TxRef>,
    /// A mistake found while building (a key of another partition), returned by `fetch`.
    error: Option<Error>,
    entity: PhantomData<fn() -> E>,
}

impl<E> Clone for Query<E> {
    fn clone(&self) -> Self {
        Query {
            db: self.db.clone(),
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
    pub(crate) fn new(db: Db, transaction: Option<TxRef>) -> Query<E> {
        let spec = QuerySpec {
            partition: db.partition().clone(),
            kind: E::KIND.to_owned(),
            ..QuerySpec::default()
        };
        Query {
            db,
            spec,
            transaction,
            error: None,
            entity: PhantomData,
        }
    }

    /// Only entities under `ancestor` (its entity group): strongly consistent (R-E1).
    pub fn ancestor<P>(mut self, ancestor: &Key<P>) -> Self {
        match self.db.outgoing(ancestor.raw()) {
            Ok(ancestor) => self.spec.ancestor = Some(ancestor),
            Err(error) => {
                self.error.get_or_insert(error);
            }
        }
        self
    }

    /// Adds a filter; all filters must hold.
    pub fn filter(mut self, filter: Filter<E>) -> Self {
        let mut value = filter.value;
        if matches!(value, crate::Value::Entity(_)) {
            // The service refuses it ("An entity value is not allowed"): say why first.
            self.error.get_or_insert(Error::InvalidQuery {
                kind: E::KIND.to_owned(),
                reason: format!(
                    "the filter on `{}` compares a whole embedded entity, which is not indexed \
                     as a value; filter on its properties instead (`.dot(...)`, R-P2)",
                    filter.property
                ),
            });
        }
        self.db.outgoing_value(&mut value);
        self.spec.filters.push(PropertyFilter {
            property: filter.property.into_owned(),
            op: filter.op,
            value,
        });
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
        self.spec.start_cursor = cursor.into().map(|c| c.0);
        self
    }

    /// Stops at `cursor`: results after it are not returned.
    pub fn end_at(mut self, cursor: impl Into<Option<Cursor>>) -> Self {
        self.spec.end_cursor = cursor.into().map(|c| c.0);
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

    /// One batch from the backend.
    pub(crate) async fn run(&self) -> Result<QueryBatch, Error> {
        if let Some(error) = &self.error {
            return Err(error.clone());
        }
        self.db.backend().declare(E::SCHEMA).await?;
        let transaction = self.transaction.as_ref();
        let batch = self
            .db
            .backend()
            .run_query(&self.spec, transaction.map(TxRef::id))
            .await;
        match transaction {
            Some(tx) => tx.note(batch),
            None => batch,
        }
    }

    /// Entities from query rows, their counters filled with one lookup (R-S1).
    pub(crate) async fn entities(
        &self,
        mut rows: Vec<(crate::RawKey, crate::PropertyMap)>,
    ) -> Result<Vec<E>, Error> {
        let transaction = self.transaction.as_ref();
        let filled =
            crate::scale::with_counters(&self.db, E::SCHEMA, &mut rows, transaction.map(TxRef::id))
                .await;
        match transaction {
            Some(tx) => tx.note(filled),
            None => filled,
        }?;
        rows.into_iter()
            .map(|(key, properties)| E::from_entity(&key, properties))
            .collect()
    }

    /// Runs the query and returns one page.
    pub async fn fetch(self) -> Result<Page<E>, Error> {
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

    /// All results as a stream, fetched page by page through cursors. The query's `limit`,
    /// if any, caps the total.
    pub fn stream(self) -> impl Stream<Item = Result<E, Error>> + Send + 'static {
        let total = self.spec.limit;
        paged(self, total, |query, size, cursor| {
            query.limit(size).resume(cursor).fetch()
        })
    }

    /// Continues after `cursor`; `None` keeps the query's own start.
    pub(crate) fn resume(self, cursor: Option<Cursor>) -> Self {
        match cursor {
            Some(cursor) => self.start_after(cursor),
            None => self,
        }
    }
}

fn next_cursor(batch: &QueryBatch) -> Option<Cursor> {
    batch.more_results.then(|| Cursor(batch.end_cursor.clone()))
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
                query: q.query.limit(size).resume(cursor),
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
                query: q.query.limit(size).resume(cursor),
                projection: PhantomData,
            }
            .fetch()
        })
    }
}
