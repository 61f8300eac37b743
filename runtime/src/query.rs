//! Typed queries: `db.query::<Post>().filter(…).order(…).limit(20).fetch()`.
//!
//! There is no offset anywhere: a page carries an opaque cursor to the next one (R-Q3).

use std::fmt;
use std::marker::PhantomData;
use std::str::FromStr;

use base64::Engine as _;
use futures_core::Stream;
use futures_util::{StreamExt as _, TryStreamExt as _, stream};

use crate::backend::{PropertyFilter, PropertyOrder, QuerySpec, ResultShape, TransactionId};
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

/// How many results [`Query::stream`] asks for per page.
const STREAM_PAGE: usize = 300;

/// A query on kind `E::KIND`. Built by `Db::query`, run by [`fetch`](Query::fetch) or
/// [`stream`](Query::stream).
#[must_use = "a query does nothing until `fetch` or `stream` is called"]
pub struct Query<E> {
    db: Db,
    spec: QuerySpec,
    transaction: Option<TransactionId>,
    entity: PhantomData<fn() -> E>,
}

impl<E> Clone for Query<E> {
    fn clone(&self) -> Self {
        Query {
            db: self.db.clone(),
            spec: self.spec.clone(),
            transaction: self.transaction.clone(),
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
    pub(crate) fn new(db: Db, transaction: Option<TransactionId>) -> Query<E> {
        let spec = QuerySpec {
            partition: db.partition().clone(),
            kind: E::KIND.to_owned(),
            ..QuerySpec::default()
        };
        Query {
            db,
            spec,
            transaction,
            entity: PhantomData,
        }
    }

    /// Only entities under `ancestor` (its entity group): strongly consistent (R-E1).
    pub fn ancestor<P>(mut self, ancestor: &Key<P>) -> Self {
        self.spec.ancestor = Some(self.db.outgoing(ancestor.raw()));
        self
    }

    /// Adds a filter; all filters must hold.
    pub fn filter(mut self, filter: Filter<E>) -> Self {
        self.spec.filters.push(PropertyFilter {
            property: filter.property.into_owned(),
            op: filter.op,
            value: filter.value,
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

    /// Runs the query and returns one page.
    pub async fn fetch(self) -> Result<Page<E>, Error> {
        let db = self.db.clone();
        self.fetch_with(|key, properties| E::from_entity(&db.incoming(&key), properties))
            .await
    }

    async fn fetch_with<T>(
        self,
        convert: impl Fn(crate::RawKey, crate::PropertyMap) -> Result<T, Error>,
    ) -> Result<Page<T>, Error> {
        let batch = self
            .db
            .backend()
            .run_query(&self.spec, self.transaction.as_ref())
            .await?;
        let items = batch
            .results
            .into_iter()
            .map(|r| convert(r.key, r.properties))
            .collect::<Result<Vec<T>, Error>>()?;
        Ok(Page {
            items,
            next: batch.more_results.then_some(Cursor(batch.end_cursor)),
        })
    }

    /// All results as a stream, fetched page by page through cursors. The query's `limit`,
    /// if any, caps the total.
    pub fn stream(self) -> impl Stream<Item = Result<E, Error>> + Send + 'static {
        let total = self.spec.limit;
        let pages = stream::try_unfold(
            (self, total, false),
            |(query, remaining, done)| async move {
                if done || remaining == Some(0) {
                    return Ok(None);
                }
                let page_size = remaining.map_or(STREAM_PAGE, |r| r.min(STREAM_PAGE));
                let page = query.clone().limit(page_size).fetch().await?;
                let remaining = remaining.map(|r| r - page.items.len());
                let done = page.next.is_none();
                let next = query.start_after(page.next);
                Ok::<_, Error>(Some((page.items, (next, remaining, done))))
            },
        );
        pages
            .map_ok(|items| stream::iter(items.into_iter().map(Ok)))
            .try_flatten()
            .boxed()
    }
}

/// A keys-only query: [`fetch`](KeysOnlyQuery::fetch) returns typed keys (R-Q1).
#[must_use = "a query does nothing until `fetch` is called"]
#[derive(Debug, Clone)]
pub struct KeysOnlyQuery<E> {
    query: Query<E>,
}

impl<E: Entity> KeysOnlyQuery<E> {
    /// Runs the query and returns one page of keys.
    pub async fn fetch(self) -> Result<Page<Key<E>>, Error> {
        let db = self.query.db.clone();
        self.query
            .fetch_with(|key, _| Key::from_raw(db.incoming(&key)))
            .await
    }
}
