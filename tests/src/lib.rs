//! Shared fixtures for the integration tests: entity types and backend decorators that
//! count or fail calls, so tests can check how many backend calls an operation makes.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use datastore_entity::backend::calls::{begin_then_commit, begin_then_read};
use datastore_entity::backend::embedded::Embedded;
use datastore_entity::backend::{
    Aggregation, Backend, BoxFuture, Capabilities, Change, CommitAs, Committed, FoundStamped,
    Lookup, QueryBatch, QuerySpec, Read, ReadAs, TransactionId, TransactionMode, Wrapper,
};
use datastore_entity::prelude::*;
use datastore_entity::{PartitionId, Value};

pub mod conformance;
pub mod faults;
pub mod harness;
pub mod minimal;
pub mod recorder;
pub mod redis;
pub mod scripted;

/// A small entity the cache tests share with python-ndb (`tests/interop/ndb_cache.py`'s
/// `Item`: one integer property `v`).
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(kind = "Item")]
pub struct Item {
    /// Its name.
    #[key]
    pub name: KeyName,
    /// Its value.
    pub v: i64,
}

/// Item `name` with value `v`.
pub fn item(name: &str, v: i64) -> Item {
    Item {
        name: KeyName::new(name).unwrap(),
        v,
    }
}

/// The key of item `name`.
pub fn item_key(name: &str) -> Key<Item> {
    Item::key(KeyName::new(name).unwrap())
}

/// A blog account.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(kind = "Account")]
pub struct Account {
    /// The account's name.
    #[key]
    pub name: KeyName,
    /// Contact address.
    pub email: String,
    /// Free text, never queried.
    #[exclude_from_index]
    pub bio: String,
    /// A balance, for transactions.
    pub balance: i64,
}

/// A post under an account.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(
    projection(PostCard: title, author),
    projection(TagRow: tags, title),
    index(author, -published),
    index(author, tags, title),
    index(tags, title),
    index(-title, -tags),
    index(title, author),
    index(-title, -author),
    index(tags, title, author),
    index(tags, -title, -author),
    index(author, title),
    index(-author, published, title),
    ancestor_index(-published),
    ancestor_index(published),
    ancestor_index(tags, -published),
    ancestor_index(author, published)
)]
pub struct Post {
    /// The owning account.
    #[parent]
    pub account: Key<Account>,
    /// Allocated on put.
    #[key]
    pub id: Option<KeyId>,
    /// Title.
    pub title: String,
    /// Author name.
    pub author: String,
    /// Publication time: indexed, which a blog's write rate allows (R-I3).
    #[index(monotonic)]
    pub published: Timestamp,
    /// Tags; a filter matches any of them.
    pub tags: Vec<String>,
    /// Body, never queried.
    #[exclude_from_index]
    pub body: String,
    /// Where it was written.
    pub location: Option<Address>,
}

/// An embedded address.
#[derive(Entity, Debug, Clone, PartialEq)]
pub struct Address {
    /// City.
    pub city: String,
}

/// An account named `name`.
pub fn account(name: &str) -> Account {
    Account {
        name: KeyName::new(name).expect("valid test name"),
        email: format!("{name}@example.com"),
        bio: String::new(),
        balance: 0,
    }
}

/// The key of the account named `name`.
pub fn account_key(name: &str) -> Key<Account> {
    Account::key(KeyName::new(name).expect("valid test name"))
}

/// A post under `parent` titled `title`, its id left for the backend to allocate.
pub fn draft(parent: &Key<Account>, title: &str) -> Post {
    Post {
        account: parent.clone(),
        id: None,
        title: title.into(),
        author: "drafter".into(),
        published: Timestamp::from_micros(1),
        tags: vec![],
        body: String::new(),
        location: None,
    }
}

/// An article whose views and likes are sharded counters (R-S1).
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(projection(ArticleCard: title, status), index(status, title))]
pub struct Article {
    /// The article's slug.
    #[key]
    pub slug: KeyName,
    /// Title.
    pub title: String,
    /// Editorial state, stored as a string.
    pub status: Status,
    /// Priority, stored as its integer.
    pub priority: Priority,
    /// Page views: 20 shards.
    #[sharded(20)]
    pub views: i64,
    /// Likes: 4 shards, a narrower integer.
    #[sharded(4)]
    #[property(rename = "likeCount")]
    pub likes: i32,
}

/// An article's editorial state (a `PropertyValue` enum).
#[derive(PropertyValue, Debug, Clone, Copy, PartialEq, Eq)]
#[property(rename_all = "snake_case")]
pub enum Status {
    /// Being written.
    Draft,
    /// Waiting for an editor.
    InReview,
    /// Online.
    #[property(rename = "live")]
    Published,
}

/// A priority, stored as its inner integer (a `PropertyValue` newtype).
#[derive(PropertyValue, Debug, Clone, Copy, PartialEq, Eq)]
pub struct Priority(pub i64);

/// A hot configuration entity, read from 5 replicas (R-S2).
#[derive(Entity, Debug, Clone, PartialEq)]
#[replicated(5, unchecked)]
pub struct SiteConfig {
    /// The configuration's name.
    #[key]
    pub name: KeyName,
    /// The banner shown on every page.
    pub banner: String,
    /// Bumped on every change.
    pub version: i64,
}

/// A timeline event, ordered through a sharded timestamp index (R-S3).
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(index(topic, at), index(topic, -at))]
pub struct Event {
    /// Allocated on put.
    #[key]
    pub id: Option<KeyId>,
    /// What the event is about.
    pub topic: String,
    /// When it happened: indexed behind 8 shard prefixes.
    #[sharded_index(8)]
    pub at: Timestamp,
}

/// Which backend call was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    /// `lookup`
    Lookup,
    /// `commit`
    Commit,
    /// `run_query`
    RunQuery,
    /// `run_aggregation`
    RunAggregation,
    /// `begin_transaction`
    Begin,
    /// `rollback`
    Rollback,
    /// `allocate_ids` / `reserve_ids`
    Ids,
}

/// Wraps the embedded engine: counts calls, records the keys of lookups and commits, fails
/// the next `fail_commits` commits with `Error::Unavailable` (a transient outage) and the
/// next `abort_commits` with `Error::Aborted` (contention) before passing commits through,
/// and the next `fail_lookups` lookups with `Error::Aborted` (the contention a pessimistic
/// service reports on a read).
#[derive(Default)]
pub struct Instrumented {
    inner: Embedded,
    calls: std::sync::Mutex<Vec<Call>>,
    lookups: std::sync::Mutex<Vec<Vec<RawKey>>>,
    commits: std::sync::Mutex<Vec<Vec<RawKey>>>,
    /// Commits still to fail.
    pub fail_commits: AtomicUsize,
    /// Commits still to abort.
    pub abort_commits: AtomicUsize,
    /// Lookups still to fail.
    pub fail_lookups: AtomicUsize,
}

impl Instrumented {
    /// A fresh engine, and a `Db` on it.
    pub fn db() -> (Arc<Instrumented>, Db) {
        let backend = Arc::new(Instrumented::default());
        (backend.clone(), Db::with_backend(backend))
    }

    /// The calls made so far, in order.
    pub fn calls(&self) -> Vec<Call> {
        self.calls.lock().expect("not poisoned").clone()
    }

    /// How many calls of one kind were made.
    pub fn count(&self, call: Call) -> usize {
        self.calls().iter().filter(|c| **c == call).count()
    }

    /// The keys of each lookup so far, in order.
    pub fn lookups(&self) -> Vec<Vec<RawKey>> {
        self.lookups.lock().expect("not poisoned").clone()
    }

    /// The keys written or deleted by each commit so far, in order.
    pub fn commits(&self) -> Vec<Vec<RawKey>> {
        self.commits.lock().expect("not poisoned").clone()
    }

    /// The engine itself, for reads and writes that bypass the typed API (and this double's
    /// count).
    pub fn engine(&self) -> &dyn Backend {
        &self.inner
    }

    fn record(&self, call: Call) {
        self.calls.lock().expect("not poisoned").push(call);
    }
}

impl Wrapper for Instrumented {
    fn inner(&self) -> &dyn Backend {
        &self.inner
    }

    fn lookup_as<'a>(
        &'a self,
        lookup: Lookup<'a>,
    ) -> BoxFuture<'a, Result<Read<FoundStamped>, Error>> {
        // A read that begins its transaction begins it here, so that `Call::Begin` counts it.
        Box::pin(begin_then_read(
            self,
            lookup.read,
            async move |transaction| {
                self.record(Call::Lookup);
                self.lookups
                    .lock()
                    .expect("not poisoned")
                    .push(lookup.keys.to_vec());
                if take_one(&self.fail_lookups) {
                    return Err(Error::Aborted {
                        reason: "injected contention".into(),
                    });
                }
                let read = ReadAs::of(transaction);
                Ok(self
                    .inner
                    .lookup_as(Lookup { read, ..lookup })
                    .await?
                    .answer)
            },
        ))
    }

    fn commit_as<'a>(
        &'a self,
        changes: Vec<Change>,
        how: CommitAs<'a>,
    ) -> BoxFuture<'a, Result<Committed, Error>> {
        Box::pin(begin_then_commit(
            self,
            changes,
            how,
            async move |changes, transaction| {
                self.record(Call::Commit);
                self.commits
                    .lock()
                    .expect("not poisoned")
                    .push(changes.iter().map(|c| c.mutation.key().clone()).collect());
                let failure = match (take_one(&self.fail_commits), take_one(&self.abort_commits)) {
                    (true, _) => Some(Error::Unavailable {
                        reason: "injected outage".into(),
                    }),
                    (false, true) => Some(Error::Aborted {
                        reason: "injected contention".into(),
                    }),
                    (false, false) => None,
                };
                if let Some(failure) = failure {
                    if let Some(transaction) = transaction {
                        let _ = self.inner.rollback(transaction).await;
                    }
                    return Err(failure);
                }
                self.inner
                    .commit_as(changes, CommitAs::of(transaction))
                    .await
            },
        ))
    }

    fn query_as<'a>(
        &'a self,
        query: &'a QuerySpec,
        read: ReadAs<'a>,
    ) -> BoxFuture<'a, Result<Read<QueryBatch>, Error>> {
        Box::pin(begin_then_read(self, read, async move |transaction| {
            self.record(Call::RunQuery);
            let read = ReadAs::of(transaction);
            Ok(self.inner.query_as(query, read).await?.answer)
        }))
    }

    fn aggregate_as<'a>(
        &'a self,
        query: &'a QuerySpec,
        aggregation: &'a Aggregation,
        read: ReadAs<'a>,
    ) -> BoxFuture<'a, Result<Read<Value>, Error>> {
        Box::pin(begin_then_read(self, read, async move |transaction| {
            self.record(Call::RunAggregation);
            let read = ReadAs::of(transaction);
            Ok(self
                .inner
                .aggregate_as(query, aggregation, read)
                .await?
                .answer)
        }))
    }

    fn begin_transaction<'a>(
        &'a self,
        partition: &'a PartitionId,
        mode: &'a TransactionMode,
    ) -> BoxFuture<'a, Result<TransactionId, Error>> {
        self.record(Call::Begin);
        self.inner.begin_transaction(partition, mode)
    }

    fn rollback<'a>(&'a self, transaction: &'a TransactionId) -> BoxFuture<'a, Result<(), Error>> {
        self.record(Call::Rollback);
        self.inner.rollback(transaction)
    }

    fn allocate_ids<'a>(&'a self, keys: Vec<RawKey>) -> BoxFuture<'a, Result<Vec<RawKey>, Error>> {
        self.record(Call::Ids);
        self.inner.allocate_ids(keys)
    }

    fn reserve_ids<'a>(&'a self, keys: Vec<RawKey>) -> BoxFuture<'a, Result<(), Error>> {
        self.record(Call::Ids);
        self.inner.reserve_ids(keys)
    }

    fn capabilities(&self) -> Capabilities<'_> {
        // The engine's name in a shared cache; neither Explain nor its stored reads, so that
        // every read is a call this double counts.
        Capabilities {
            identity: self.inner.capabilities().identity,
            ..Capabilities::default()
        }
    }
}

/// Takes one from `counter` if it is not zero: whether a failure is still to inject.
fn take_one(counter: &AtomicUsize) -> bool {
    counter
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok()
}

/// Wraps the embedded engine and adds a fixed round trip to every call, as a network would:
/// the window in which concurrent transactions conflict grows with it.
/// Counts the transactions begun (one per attempt).
pub struct Latency {
    inner: Embedded,
    round_trip: std::time::Duration,
    begun: AtomicUsize,
}

impl Latency {
    /// A fresh engine behind a `round_trip` delay, and a `Db` on it.
    pub fn db(round_trip: std::time::Duration) -> Db {
        Latency::new(round_trip).1
    }

    /// A fresh engine behind a `round_trip` delay, and a `Db` on it.
    pub fn new(round_trip: std::time::Duration) -> (Arc<Latency>, Db) {
        let backend = Arc::new(Latency {
            inner: Embedded::new(),
            round_trip,
            begun: AtomicUsize::new(0),
        });
        (backend.clone(), Db::with_backend(backend))
    }

    /// How many transactions were begun so far: one per attempt.
    pub fn transactions_begun(&self) -> usize {
        self.begun.load(Ordering::Relaxed)
    }
}

/// Sleeps for the round trip, then makes the call (the engine answers when called).
macro_rules! after_round_trip {
    ($self:ident, $call:expr) => {{
        let round_trip = $self.round_trip;
        Box::pin(async move {
            tokio::time::sleep(round_trip).await;
            $call.await
        })
    }};
}

impl Wrapper for Latency {
    fn inner(&self) -> &dyn Backend {
        &self.inner
    }

    fn lookup_as<'a>(
        &'a self,
        lookup: Lookup<'a>,
    ) -> BoxFuture<'a, Result<Read<FoundStamped>, Error>> {
        // A read that begins its transaction begins it with a round trip of its own.
        Box::pin(begin_then_read(
            self,
            lookup.read,
            async move |transaction| {
                let read = ReadAs::of(transaction);
                let found =
                    after_round_trip!(self, self.inner.lookup_as(Lookup { read, ..lookup }));
                Ok(found.await?.answer)
            },
        ))
    }

    fn commit_as<'a>(
        &'a self,
        changes: Vec<Change>,
        how: CommitAs<'a>,
    ) -> BoxFuture<'a, Result<Committed, Error>> {
        Box::pin(begin_then_commit(
            self,
            changes,
            how,
            async move |changes, transaction| {
                let how = CommitAs::of(transaction);
                let committed = after_round_trip!(self, self.inner.commit_as(changes, how));
                committed.await
            },
        ))
    }

    fn query_as<'a>(
        &'a self,
        query: &'a QuerySpec,
        read: ReadAs<'a>,
    ) -> BoxFuture<'a, Result<Read<QueryBatch>, Error>> {
        Box::pin(begin_then_read(self, read, async move |transaction| {
            let read = ReadAs::of(transaction);
            let batch = after_round_trip!(self, self.inner.query_as(query, read));
            Ok(batch.await?.answer)
        }))
    }

    fn aggregate_as<'a>(
        &'a self,
        query: &'a QuerySpec,
        aggregation: &'a Aggregation,
        read: ReadAs<'a>,
    ) -> BoxFuture<'a, Result<Read<Value>, Error>> {
        Box::pin(begin_then_read(self, read, async move |transaction| {
            let read = ReadAs::of(transaction);
            let value = after_round_trip!(self, self.inner.aggregate_as(query, aggregation, read));
            Ok(value.await?.answer)
        }))
    }

    fn begin_transaction<'a>(
        &'a self,
        partition: &'a PartitionId,
        mode: &'a TransactionMode,
    ) -> BoxFuture<'a, Result<TransactionId, Error>> {
        self.begun.fetch_add(1, Ordering::Relaxed);
        after_round_trip!(self, self.inner.begin_transaction(partition, mode))
    }

    fn rollback<'a>(&'a self, transaction: &'a TransactionId) -> BoxFuture<'a, Result<(), Error>> {
        after_round_trip!(self, self.inner.rollback(transaction))
    }

    fn allocate_ids<'a>(&'a self, keys: Vec<RawKey>) -> BoxFuture<'a, Result<Vec<RawKey>, Error>> {
        after_round_trip!(self, self.inner.allocate_ids(keys))
    }

    fn reserve_ids<'a>(&'a self, keys: Vec<RawKey>) -> BoxFuture<'a, Result<(), Error>> {
        after_round_trip!(self, self.inner.reserve_ids(keys))
    }

    fn capabilities(&self) -> Capabilities<'_> {
        Capabilities {
            identity: self.inner.capabilities().identity,
            ..Capabilities::default()
        }
    }
}

/// A numbered note, for the persistence tests (`Db::open`).
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(index(way, -n))]
pub struct Note {
    /// Its number.
    #[key]
    pub id: KeyId,
    /// Its number again, indexed: found by a property query too.
    pub n: i64,
    /// Which kind of write wrote it: 0 a put, 1 a batch, 2 a transaction.
    pub way: i64,
    /// Some text.
    pub text: String,
}

impl Note {
    /// Note number `n` (from 1), written `way`.
    pub fn numbered(n: i64, way: i64) -> Note {
        Note {
            id: KeyId::new(n).expect("notes are numbered from 1"),
            n,
            way,
            text: format!("note {n}"),
        }
    }
}

/// How many notes transactions wrote: each transaction writes a note and counts it here, in
/// one commit.
#[derive(Entity, Debug, Clone, PartialEq)]
pub struct Ledger {
    /// Always `ledger`.
    #[key]
    pub name: KeyName,
    /// The notes written by transactions.
    pub notes: i64,
}
