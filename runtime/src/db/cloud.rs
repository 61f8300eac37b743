//! A handle on Google Cloud: [`Db::cloud`] and [`CloudBuilder`] (feature `cloud`).

use std::sync::Arc;
use std::time::Duration;

use crate::backend::cloud::Cloud;
use crate::backend::cloud::connect::Settings;
use crate::backend::retry::RetryPolicy;
use datastore_entity_core::error::Error;
use datastore_entity_core::model::key::PartitionId;

use super::Db;

/// Where `Db::cloud` connects, and how it authenticates: see [`Db::cloud_builder`].
#[derive(Debug, Clone)]
#[must_use = "call `build().await` to connect"]
pub struct CloudBuilder {
    settings: Settings,
    #[cfg(feature = "redis")]
    global_cache: Option<crate::GlobalCache>,
}

impl CloudBuilder {
    /// The database (`""`, the default, is the project's `(default)` database).
    pub fn database(mut self, database_id: impl Into<String>) -> Self {
        self.settings.database_id = database_id.into();
        self
    }

    /// The endpoint: `https://…` is Google Cloud, with credentials; `http://host:port` (or
    /// `host:port`) is an emulator, over plain HTTP/2 without credentials. By default
    /// `DATASTORE_EMULATOR_HOST` when it is set, else `https://datastore.googleapis.com`.
    pub fn endpoint(mut self, endpoint: impl Into<String>) -> Self {
        self.settings.endpoint = Some(endpoint.into());
        self
    }

    /// Credentials other than the Application Default Credentials (a service account key,
    /// impersonation, workload identity federation), built with
    /// `gcloud_sdk::google_cloud_auth`.
    pub fn credentials(
        mut self,
        credentials: gcloud_sdk::google_cloud_auth::credentials::Credentials,
    ) -> Self {
        self.settings.credentials = Some(credentials);
        self
    }

    /// The deadline of every call (default 60 s, as Google's clients): a call, with its
    /// retries, that has no answer by then fails ([`Error::Unavailable`], or for a commit
    /// [`Error::CommitOutcomeUnknown`]) instead of waiting on a stalled connection for ever.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.settings.timeout = timeout;
        self
    }

    /// How calls are retried: lookups, queries, aggregations, begin, rollback and id
    /// allocation are retried on `UNAVAILABLE`, a broken connection or a read's
    /// `DEADLINE_EXCEEDED`, with full-jitter exponential backoff, within the deadline; a
    /// commit is never sent twice. Transactions retry their body with the same policy
    /// (R-A2). Default: 8 attempts, backoff from 100 ms up to 5 s.
    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.settings.retry = retry;
        self
    }

    /// Trusts these PEM root certificates for TLS instead of the default roots (Mozilla's,
    /// which hold Google's): for an endpoint behind a proxy with its own certificate
    /// authority.
    pub fn tls_roots(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.settings.roots = Some(pem.into());
        self
    }

    /// Sends no credentials, even over TLS: for an emulator or a proxy that authenticates
    /// the calls itself (an `http://` endpoint never sends any).
    pub fn without_credentials(mut self) -> Self {
        self.settings.anonymous = true;
        self
    }

    /// Whether a transaction's first lookup, query or aggregation begins it (the service's
    /// `new_transaction`), so begin, read and commit take two round trips instead of three; a
    /// transaction that reads nothing is committed in one (a single-use transaction) either
    /// way. Default: on for Google Cloud (`https://`), off for emulators (`http://`), because
    /// the Firestore emulator leaves a lock behind a lookup that begins a transaction, and the
    /// transaction then times out on it.
    pub fn begin_transactions_with_reads(mut self, on: bool) -> Self {
        self.settings.begin_with_reads = Some(on);
        self
    }

    /// A global cache in Redis in front of the database, shared with every process that uses
    /// the same Redis — python-ndb's `RedisCache` included (feature `redis`; see
    /// [`Db::with_global_cache`]).
    #[cfg(feature = "redis")]
    pub fn global_cache(mut self, cache: crate::GlobalCache) -> Self {
        self.global_cache = Some(cache);
        self
    }

    /// Connects, and returns a handle on the project's database in the default namespace.
    /// Missing or unusable credentials are [`Error::Credentials`] before anything is sent
    /// to the service; an unreachable endpoint is [`Error::Unavailable`].
    pub async fn build(self) -> Result<Db, Error> {
        let partition = PartitionId {
            project_id: self.settings.project_id.clone(),
            database_id: self.settings.database_id.clone(),
            namespace: String::new(),
        };
        let retry = self.settings.retry;
        let cloud = Cloud::connect(self.settings).await?;
        let partitions = cloud.partitions().clone();
        let mut db = Db::with_backend_in(Arc::new(cloud), partition).with_retry(retry);
        // The derive writes entities straight into the service's protocol buffers.
        db.scope = db.scope.writing_wire(&partitions);
        #[cfg(feature = "redis")]
        if let Some(cache) = self.global_cache {
            db = db.with_global_cache(cache);
        }
        Ok(db)
    }
}

impl Db {
    /// Google Cloud Firestore in Datastore mode, project `project_id`, default database, with
    /// the Application Default Credentials; an emulator when `DATASTORE_EMULATOR_HOST` is set.
    pub async fn cloud(project_id: impl Into<String>) -> Result<Db, Error> {
        Db::cloud_builder(project_id).build().await
    }

    /// A Google Cloud connection to configure: database, endpoint, credentials.
    ///
    /// ```no_run
    /// # async fn example() -> Result<(), datastore_entity::Error> {
    /// let db = datastore_entity::Db::cloud_builder("my-project")
    ///     .database("orders")
    ///     .endpoint("http://127.0.0.1:8081") // an emulator
    ///     .build()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn cloud_builder(project_id: impl Into<String>) -> CloudBuilder {
        CloudBuilder {
            settings: Settings::new(project_id.into()),
            #[cfg(feature = "redis")]
            global_cache: None,
        }
    }
}
