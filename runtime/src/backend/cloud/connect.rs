//! Connecting: where (the endpoint: Google Cloud, `DATASTORE_EMULATOR_HOST`, or one given),
//! over what (TLS with rustls and Mozilla's roots — Google's among them — or given roots; plain
//! HTTP/2 for an `http://` emulator), and as whom (Application Default Credentials, given
//! credentials, or none). Credentials are checked before anything is sent to the service, so a
//! machine without them gets [`Error::Credentials`] at once, never a panic or a hang.

use std::sync::Arc;
use std::time::Duration;

use gcloud_sdk::google::datastore::v1::datastore_client::DatastoreClient;
use gcloud_sdk::google_cloud_auth::credentials::Credentials;
use gcloud_sdk::tonic;
use gcloud_sdk::tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};
use gcloud_sdk::{GoogleAuthHeaders, GoogleAuthMiddlewareLayer};
use tower_layer::Layer as _;

use super::call::{Calls, Client};
use crate::backend::cloud::wire::Partitions;
use crate::backend::retry::RetryPolicy;
use datastore_entity_core::error::Error;

/// The service's production endpoint.
const PRODUCTION_ENDPOINT: &str = "https://datastore.googleapis.com";

/// The OAuth scopes a Datastore client asks for.
const SCOPES: [&str; 2] = [
    "https://www.googleapis.com/auth/cloud-platform",
    "https://www.googleapis.com/auth/datastore",
];

/// How long establishing one connection may take (within the call's deadline).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The deadline of every call by default, as Google's clients have it.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// How calls are retried by default: Google's clients start at 100 ms and back off to
/// seconds, within the deadline.
pub(crate) const DEFAULT_RETRY: RetryPolicy = RetryPolicy {
    max_attempts: 8,
    initial_backoff: Duration::from_millis(100),
    max_backoff: Duration::from_secs(5),
};

/// What [`Settings::connect`] opened: the backend's calls and partitions.
pub(super) struct Connection {
    pub(super) calls: Calls,
    pub(super) partitions: Arc<Partitions>,
    /// Whether a transaction's first read begins it (one round trip less).
    pub(super) begin_with_reads: bool,
}

/// Where a Cloud backend connects, and how (set through the `Db`'s `CloudBuilder`).
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub(crate) project_id: String,
    pub(crate) database_id: String,
    pub(crate) endpoint: Option<String>,
    pub(crate) credentials: Option<Credentials>,
    /// Send no credentials, even over TLS.
    pub(crate) anonymous: bool,
    /// PEM roots to trust instead of Mozilla's.
    pub(crate) roots: Option<Vec<u8>>,
    pub(crate) timeout: Duration,
    pub(crate) retry: RetryPolicy,
    /// Whether a transaction's first read begins it; `None`: on Google Cloud (`https://`),
    /// not on emulators.
    pub(crate) begin_with_reads: Option<bool>,
}

/// The largest message the client sends or takes, as Google's own clients allow (tonic's
/// default of 4 MiB refused a query the Firestore emulator answered in one 12 MB batch, and a
/// lookup of 1,000 entities may be larger still).
const MAX_RESPONSE_BYTES: usize = i32::MAX as usize;

impl Settings {
    /// The settings of project `project_id`, with every default.
    pub(crate) fn new(project_id: String) -> Settings {
        Settings {
            project_id,
            database_id: String::new(),
            endpoint: None,
            credentials: None,
            anonymous: false,
            roots: None,
            timeout: DEFAULT_TIMEOUT,
            retry: DEFAULT_RETRY,
            begin_with_reads: None,
        }
    }

    /// Connects to the endpoint the settings name (or `DATASTORE_EMULATOR_HOST`, or Google
    /// Cloud) with their credentials: the calls, the partitions, and whether a transaction's
    /// first read begins it.
    pub(super) async fn connect(self) -> Result<Connection, Error> {
        if self.project_id.is_empty() {
            return Err(Error::InvalidKey {
                key: String::new(),
                reason: "the project id is empty; give the Google Cloud project to connect to"
                    .into(),
            });
        }
        let emulator = std::env::var("DATASTORE_EMULATOR_HOST")
            .ok()
            .filter(|h| !h.trim().is_empty());
        let endpoint = self
            .endpoint
            .clone()
            .or(emulator)
            .unwrap_or_else(|| PRODUCTION_ENDPOINT.to_owned());
        let endpoint = if endpoint.contains("://") {
            endpoint
        } else {
            format!("http://{endpoint}")
        };
        let secure = match endpoint.split_once("://") {
            Some(("https", _)) => true,
            Some(("http", _)) => false,
            _ => {
                return Err(Error::InvalidSetting {
                    setting: "endpoint",
                    value: endpoint.to_owned(),
                    expected: "https:// (Google Cloud, TLS) or http:// (an emulator)",
                });
            }
        };
        // Credentials first: without them nothing is sent anywhere.
        let explicit = self.credentials.is_some();
        let auth = match (secure && !self.anonymous, self.credentials) {
            (false, _) => None,
            (true, Some(credentials)) => Some(GoogleAuthHeaders::from(credentials)),
            (true, None) => Some(
                GoogleAuthHeaders::from_adc_with_scopes(SCOPES.map(str::to_owned).to_vec())
                    .await
                    .map_err(|e| Error::Credentials {
                        reason: e.to_string(),
                    })?,
            ),
        };
        if let Some(auth) = &auth {
            // A token now, so missing or broken credentials are an error here.
            let failed = match tokio::time::timeout(self.timeout, auth.headers()).await {
                Ok(Ok(_)) => None,
                Ok(Err(e)) => Some(e.to_string()),
                Err(_) => Some(format!("no token came within {:?}", self.timeout)),
            };
            if let Some(failure) = failed {
                let reason = match (explicit, adc_file()) {
                    (true, _) => format!("the credentials given could not make a token: {failure}"),
                    (false, Some(file)) => format!("{file} could not make a token: {failure}"),
                    (false, None) => format!(
                        "there is no credentials file (GOOGLE_APPLICATION_CREDENTIALS, or \
                         gcloud's application_default_credentials.json), and no metadata \
                         server of Google Cloud gave a token: {failure}"
                    ),
                };
                return Err(Error::Credentials { reason });
            }
        }
        let channel = channel(&endpoint, secure, self.roots.as_deref(), self.timeout).await?;
        let client = match auth {
            Some(auth) => {
                let layer =
                    GoogleAuthMiddlewareLayer::new(auth, None).map_err(|e| Error::Credentials {
                        reason: e.to_string(),
                    })?;
                Client::Google(
                    DatastoreClient::new(layer.layer(channel))
                        .max_decoding_message_size(MAX_RESPONSE_BYTES)
                        .max_encoding_message_size(MAX_RESPONSE_BYTES),
                )
            }
            None => Client::Plain(
                DatastoreClient::new(channel)
                    .max_decoding_message_size(MAX_RESPONSE_BYTES)
                    .max_encoding_message_size(MAX_RESPONSE_BYTES),
            ),
        };
        let routing = format!(
            "project_id={}&database_id={}",
            url_encode(&self.project_id),
            url_encode(&self.database_id)
        );
        let routing = routing.parse().map_err(|_| Error::InvalidSetting {
            setting: "project and database ids",
            value: routing.clone(),
            expected: "characters a request header can carry",
        })?;
        tracing::debug!(%endpoint, database = %self.database_id, secure, "connected to Datastore");
        Ok(Connection {
            // The Firestore emulator mishandles a lookup that begins a transaction (the read
            // locks in a transaction other than the one it returns: tests/tests/rpcs.rs), so
            // emulators begin transactions on their own unless told otherwise.
            begin_with_reads: self.begin_with_reads.unwrap_or(secure),
            calls: Calls {
                client,
                routing,
                endpoint,
                database: self.database_id.clone(),
                timeout: self.timeout,
                retry: self.retry,
            },
            partitions: Arc::new(Partitions::new(self.project_id, self.database_id)),
        })
    }
}

/// The Application Default Credentials file, if there is one: `GOOGLE_APPLICATION_CREDENTIALS`,
/// else gcloud's `application_default_credentials.json`.
fn adc_file() -> Option<String> {
    if let Some(path) = std::env::var_os("GOOGLE_APPLICATION_CREDENTIALS") {
        return Some(format!(
            "GOOGLE_APPLICATION_CREDENTIALS ({})",
            path.to_string_lossy()
        ));
    }
    let config = std::env::var_os("CLOUDSDK_CONFIG")
        .map(std::path::PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| std::path::Path::new(&h).join(".config/gcloud"))
        })?;
    let file = config.join("application_default_credentials.json");
    file.exists().then(|| file.display().to_string())
}

/// The HTTP/2 channel to `endpoint`: TLS when `secure` (with `roots`, else Mozilla's), kept
/// alive with pings so a dead connection is noticed, re-established on the next call after it
/// breaks.
async fn channel(
    endpoint: &str,
    secure: bool,
    roots: Option<&[u8]>,
    timeout: Duration,
) -> Result<Channel, Error> {
    let failed = |e: &dyn std::fmt::Display| Error::Unavailable {
        reason: format!("cannot connect to {endpoint}: {e}"),
    };
    let mut channel = Endpoint::from_shared(endpoint.to_owned())
        .map_err(|e| failed(&e))?
        .connect_timeout(CONNECT_TIMEOUT.min(timeout))
        .tcp_keepalive(Some(Duration::from_secs(60)))
        .http2_keep_alive_interval(Duration::from_secs(30))
        .keep_alive_timeout(Duration::from_secs(10))
        .keep_alive_while_idle(true);
    if secure {
        let host = channel.uri().host().unwrap_or_default().to_owned();
        let tls = ClientTlsConfig::new().domain_name(host);
        let tls = match roots {
            Some(pem) => tls.ca_certificate(Certificate::from_pem(pem)),
            None => tls.with_webpki_roots(),
        };
        channel = channel.tls_config(tls).map_err(|e| failed(&e))?;
    }
    channel.connect().await.map_err(|e| failed(&chain(&e)))
}

/// An error with the errors behind it.
fn chain(error: &tonic::transport::Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(e) = source {
        text.push_str(": ");
        text.push_str(&e.to_string());
        source = e.source();
    }
    text
}

/// Percent-encodes what a routing header value must not hold raw.
pub(super) fn url_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                char::from(b).to_string()
            }
            other => format!("%{other:02X}"),
        })
        .collect()
}
