//! The global cache's Redis: entities kept for every process that reads the same database —
//! this crate's, and python-ndb's on the same Redis ([`ndb`](super::ndb) is the protocol).
//! Redis being down or slow never fails a read: past a short timeout the read goes to the
//! database, and the bypass is counted. A write that cannot lock its keys fails, unwritten.

use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use super::ndb;
use datastore_entity_core::error::Error;

/// A global cache in Redis, shared by every handle it is given to (a clone is the same cache),
/// and with python-ndb's `RedisCache` on the same Redis: the same keys, values, locks and
/// expiries (feature `redis`).
///
/// ```no_run
/// # async fn example() -> Result<(), datastore_entity::Error> {
/// use datastore_entity::{Db, GlobalCache};
/// let cache = GlobalCache::redis("redis://127.0.0.1:6379/0")?;
/// let db = Db::cloud_builder("my-project").global_cache(cache).build().await?;
/// # let _ = db; Ok(()) }
/// ```
#[derive(Clone)]
pub struct GlobalCache {
    shared: Arc<Shared>,
    timeout: Duration,
    lock_time: Duration,
}

struct Shared {
    client: redis::Client,
    /// Where, for messages (without a password).
    address: String,
    /// The connection, once made; when it could not be, since when.
    connection: tokio::sync::Mutex<Connection>,
    scripts: Scripts,
}

enum Connection {
    None,
    Up(ConnectionManager),
    Down(Instant),
}

struct Scripts {
    read_lock: redis::Script,
    fill: redis::Script,
    write_lock: redis::Script,
    write_unlock: redis::Script,
}

/// After a failed connection, how long reads go around the cache before it is tried again.
const RECONNECT_AFTER: Duration = Duration::from_secs(1);

impl std::fmt::Debug for GlobalCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GlobalCache")
            .field("address", &self.shared.address)
            .field("timeout", &self.timeout)
            .field("lock_time", &self.lock_time)
            .finish_non_exhaustive()
    }
}

/// The cache could not answer in time (or at all): the caller goes around it.
#[derive(Debug)]
pub(crate) struct Bypass(pub(crate) String);

impl GlobalCache {
    /// A cache in the Redis at `url` (`redis://[[user]:password@]host[:port][/database]`, as
    /// python-ndb's `REDIS_CACHE_URL`). Nothing is connected yet: the first call connects, and a
    /// Redis that is not there is gone around until it is.
    pub fn redis(url: &str) -> Result<GlobalCache, Error> {
        let client = redis::Client::open(url).map_err(|e| Error::Parse {
            what: "a Redis URL (redis://host:port/database)",
            text: url.to_owned(),
            reason: e.to_string(),
        })?;
        let info = client.get_connection_info();
        let address = format!("redis://{}/{}", info.addr(), info.redis_settings().db());
        Ok(GlobalCache {
            shared: Arc::new(Shared {
                client,
                address,
                connection: tokio::sync::Mutex::new(Connection::None),
                scripts: Scripts {
                    read_lock: redis::Script::new(ndb::READ_LOCK),
                    fill: redis::Script::new(ndb::FILL),
                    write_lock: redis::Script::new(ndb::WRITE_LOCK),
                    write_unlock: redis::Script::new(ndb::WRITE_UNLOCK),
                },
            }),
            timeout: Duration::from_millis(100),
            lock_time: ndb::LOCK_TIME,
        })
    }

    /// How long one call to Redis may take before a read goes around the cache (100 ms by
    /// default); a write that cannot lock its keys within it fails.
    pub fn timeout(mut self, timeout: Duration) -> GlobalCache {
        self.timeout = timeout;
        self
    }

    /// How long a lock lives if its holder never removes it (a writer killed between its lock
    /// and its commit): NDB's 64 s by default, at least a second. Every process on one Redis
    /// must use the same.
    pub fn lock_time(mut self, lock_time: Duration) -> GlobalCache {
        self.lock_time = lock_time.max(Duration::from_secs(1));
        self
    }

    /// Where the cache is.
    pub fn address(&self) -> &str {
        &self.shared.address
    }

    /// The connection, made now if there is none (at most once a second after a failure or a
    /// call that timed out).
    async fn connection(&self) -> Result<ConnectionManager, Bypass> {
        let shared = &*self.shared;
        let mut connection = shared.connection.lock().await;
        match &*connection {
            Connection::Up(c) => return Ok(c.clone()),
            Connection::Down(since) if since.elapsed() < RECONNECT_AFTER => {
                return Err(Bypass(format!("{} was unreachable", shared.address)));
            }
            _ => {}
        }
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(self.timeout))
            .set_number_of_retries(1);
        // Bounded by the caller's timeout (`call`), which marks Redis unreachable if it passes.
        match ConnectionManager::new_with_config(shared.client.clone(), config).await {
            Ok(c) => {
                *connection = Connection::Up(c.clone());
                Ok(c)
            }
            Err(e) => {
                *connection = Connection::Down(Instant::now());
                Err(Bypass(format!("{}: {e}", shared.address)))
            }
        }
    }

    /// Runs one call: connecting if need be, and the call, within the timeout. A call that
    /// does not answer in time marks Redis unreachable for a second: the reads meanwhile go
    /// around it at once, rather than each waiting out the timeout.
    async fn call<T: redis::FromRedisValue>(
        &self,
        call: impl AsyncFnOnce(&mut ConnectionManager) -> redis::RedisResult<T>,
    ) -> Result<T, Bypass> {
        let timed_out = || {
            Bypass(format!(
                "{} did not answer within {:?}",
                self.shared.address, self.timeout
            ))
        };
        let answered = tokio::time::timeout(self.timeout, async {
            let mut connection = self.connection().await?;
            call(&mut connection)
                .await
                .map_err(|e| Bypass(format!("{}: {e}", self.shared.address)))
        })
        .await;
        match answered {
            Ok(answer) => answer,
            Err(_) => {
                *self.shared.connection.lock().await = Connection::Down(Instant::now());
                Err(timed_out())
            }
        }
    }

    /// The values under `keys`.
    pub(crate) async fn get(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, Bypass> {
        self.call(async |c| redis::cmd("MGET").arg(keys).query_async(c).await)
            .await
    }

    /// Takes `lock`, a reader's, on each of `keys` that holds nothing known: per key, whether
    /// it did.
    pub(crate) async fn read_lock(
        &self,
        keys: &[Vec<u8>],
        lock: &[u8],
    ) -> Result<Vec<bool>, Bypass> {
        let seconds = self.lock_time.as_secs();
        let taken: Vec<i64> = self
            .call(async |c| {
                let mut call = self.shared.scripts.read_lock.prepare_invoke();
                call.key(keys).arg(lock).arg(seconds);
                call.invoke_async(c).await
            })
            .await?;
        Ok(taken.into_iter().map(|t| t == 1).collect())
    }

    /// Replaces `lock` on each of `keys` with its entity (encoded; empty: none, the lock is
    /// released), kept for `expires` (none: for good). Returns how many were cached.
    pub(crate) async fn fill(
        &self,
        keys: &[Vec<u8>],
        lock: &[u8],
        entities: &[Vec<u8>],
        expires: Option<Duration>,
    ) -> Result<u64, Bypass> {
        // No time, or none, keeps it for good (NDB's `if expires:`).
        let seconds = expires
            .filter(|e| !e.is_zero())
            .map_or(0, |e| e.as_secs().max(1));
        self.call(async |c| {
            let mut call = self.shared.scripts.fill.prepare_invoke();
            call.key(keys).arg(lock).arg(seconds).arg(entities);
            call.invoke_async(c).await
        })
        .await
    }

    /// Adds `token`, a writer's, to the writers' lock on each of `keys`.
    pub(crate) async fn write_lock(&self, keys: &[Vec<u8>], token: &[u8]) -> Result<(), Bypass> {
        self.writers(&self.shared.scripts.write_lock, keys, token)
            .await
    }

    /// Removes `token` from the writers' lock on each of `keys`.
    pub(crate) async fn write_unlock(&self, keys: &[Vec<u8>], token: &[u8]) -> Result<(), Bypass> {
        self.writers(&self.shared.scripts.write_unlock, keys, token)
            .await
    }

    async fn writers(
        &self,
        script: &redis::Script,
        keys: &[Vec<u8>],
        token: &[u8],
    ) -> Result<(), Bypass> {
        if keys.is_empty() {
            return Ok(());
        }
        let seconds = self.lock_time.as_secs();
        let _: i64 = self
            .call(async |c| {
                let mut call = script.prepare_invoke();
                call.key(keys).arg(token).arg(seconds);
                call.invoke_async(c).await
            })
            .await?;
        Ok(())
    }
}
