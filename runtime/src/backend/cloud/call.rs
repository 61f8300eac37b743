//! One call to the service: its deadline, its retries, what its failure means, and its
//! `tracing` span.
//!
//! Every call has a deadline ([`Calls::timeout`], 60 s by default as in Google's clients),
//! sent to the service (`grpc-timeout`) and enforced here. Idempotent calls (lookups, queries,
//! aggregations, begin, rollback, id allocation) are retried on a transient failure — the
//! service's `UNAVAILABLE`, a broken or refused connection (the channel reconnects), a read's
//! `DEADLINE_EXCEEDED` — with jittered exponential backoff, within the deadline. A commit is
//! never sent twice: if its answer is lost it is [`Error::CommitOutcomeUnknown`].

use std::future::Future;
use std::time::{Duration, Instant};

use gcloud_sdk::GoogleAuthMiddleware;
use gcloud_sdk::google::datastore::v1::datastore_client::DatastoreClient;
use gcloud_sdk::tonic::transport::Channel;
use gcloud_sdk::tonic::{self, Code};
use tracing::Instrument as _;

use crate::backend::retry::RetryPolicy;
use datastore_entity_core::error::{Error, ServiceCode};

/// The gRPC client: authenticated for Google Cloud, or without credentials (an emulator).
#[derive(Clone)]
pub(super) enum Client {
    Google(DatastoreClient<GoogleAuthMiddleware>),
    Plain(DatastoreClient<Channel>),
}

/// Whether a call may be sent again when its outcome is unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Sending {
    /// Sending it twice does what sending it once does.
    Idempotent,
    /// A commit: applied at most once.
    Once,
    /// A commit in a transaction of its own: applied at most once, and, refused as ABORTED
    /// (contention), applied not at all, so it is sent again.
    Atomic,
}

/// What a call is about, for its span and its errors.
pub(super) struct About<'a> {
    /// The RPC (`lookup`, `commit`, …).
    pub(super) rpc: &'static str,
    pub(super) sending: Sending,
    pub(super) namespace: &'a str,
    /// The kind (of the first key, or the query's); empty when there is none.
    pub(super) kind: &'a str,
    /// Keys looked up, mutations committed, ids allocated.
    pub(super) count: usize,
}

/// How the backend makes its calls.
pub(super) struct Calls {
    pub(super) client: Client,
    /// `x-goog-request-params`: routes every call to the project and database.
    pub(super) routing: tonic::metadata::MetadataValue<tonic::metadata::Ascii>,
    pub(super) endpoint: String,
    pub(super) database: String,
    pub(super) timeout: Duration,
    pub(super) retry: RetryPolicy,
}

/// Why one attempt failed.
enum Failure {
    /// The service answered with this status.
    Service(tonic::Status),
    /// The connection failed; `sent` unless it failed before the request could leave.
    Connection { message: String, sent: bool },
    /// No answer before the deadline.
    Deadline,
}

impl Failure {
    fn of(status: tonic::Status) -> Failure {
        // A status the client made itself carries the error that caused it; the service's own
        // statuses carry none. A stream reset (`CANCELLED`) is the connection's doing too:
        // this client never cancels a call it still waits for.
        let mut timed_out = false;
        let mut connecting = false;
        let mut source = std::error::Error::source(&status);
        while let Some(error) = source {
            timed_out |= error.is::<tonic::TimeoutExpired>();
            connecting |= error.is::<tonic::ConnectError>();
            source = error.source();
        }
        if timed_out {
            return Failure::Deadline;
        }
        if std::error::Error::source(&status).is_some() || status.code() == Code::Cancelled {
            return Failure::Connection {
                message: error_chain(&status),
                // A request whose connection could not be made never left.
                sent: !connecting,
            };
        }
        Failure::Service(status)
    }

    /// Whether trying again may succeed.
    fn transient(&self) -> bool {
        match self {
            Failure::Service(status) => {
                matches!(status.code(), Code::Unavailable | Code::DeadlineExceeded)
            }
            Failure::Connection { .. } | Failure::Deadline => true,
        }
    }

    /// Whether the service refused with ABORTED (contention): a transaction's commit that
    /// applied nothing.
    fn aborted(&self) -> bool {
        matches!(self, Failure::Service(status) if status.code() == Code::Aborted)
    }

    fn code(&self) -> &'static str {
        match self {
            Failure::Service(status) => service_code(status.code()).name(),
            Failure::Connection { .. } => "CONNECTION",
            Failure::Deadline => "DEADLINE",
        }
    }
}

/// A status's message with the errors behind it.
fn error_chain(status: &tonic::Status) -> String {
    let mut text = status.message().to_owned();
    let mut source = std::error::Error::source(status);
    while let Some(error) = source {
        text.push_str(": ");
        text.push_str(&error.to_string());
        source = error.source();
    }
    text
}

impl Calls {
    /// Sends `request` with `send` (one attempt), retrying as the call allows, within the
    /// deadline.
    pub(super) async fn run<Req, Resp, F, Fut>(
        &self,
        about: About<'_>,
        request: Req,
        send: F,
    ) -> Result<Resp, Error>
    where
        Req: Clone,
        F: Fn(Client, tonic::Request<Req>) -> Fut,
        Fut: Future<Output = Result<tonic::Response<Resp>, tonic::Status>>,
    {
        let span = tracing::debug_span!(
            "datastore",
            rpc = about.rpc,
            database = %self.database,
            namespace = about.namespace,
            kind = about.kind,
            count = about.count,
            attempts = tracing::field::Empty,
            code = tracing::field::Empty,
            elapsed_ms = tracing::field::Empty,
        );
        let started = Instant::now();
        let deadline = started + self.timeout;
        let attempts = self.retry.max_attempts.max(1);
        let mut attempt = 0;
        let result = async {
            loop {
                attempt += 1;
                let remaining = deadline.saturating_duration_since(Instant::now());
                let mut call = tonic::Request::new(request.clone());
                call.set_timeout(remaining);
                call.metadata_mut()
                    .insert("x-goog-request-params", self.routing.clone());
                let failure =
                    match tokio::time::timeout(remaining, send(self.client.clone(), call)).await {
                        Ok(Ok(response)) => return Ok(response.into_inner()),
                        Ok(Err(status)) => Failure::of(status),
                        Err(_) => Failure::Deadline,
                    };
                let backoff = self.retry.backoff(attempt);
                let resend = match about.sending {
                    Sending::Idempotent => failure.transient(),
                    Sending::Atomic => failure.aborted(),
                    Sending::Once => false,
                };
                let retry = resend && attempt < attempts && Instant::now() + backoff < deadline;
                if !retry {
                    return Err(failure);
                }
                tracing::debug!(
                    attempt,
                    code = failure.code(),
                    backoff_ms = backoff.as_millis() as u64,
                    "datastore call failed, retrying"
                );
                tokio::time::sleep(backoff).await;
            }
        }
        .instrument(span.clone())
        .await;
        span.record("attempts", attempt);
        span.record("elapsed_ms", started.elapsed().as_millis() as u64);
        match result {
            Ok(response) => {
                span.record("code", "OK");
                Ok(response)
            }
            Err(failure) => {
                span.record("code", failure.code());
                let error = self.error(&about, failure, attempt);
                tracing::debug!(parent: &span, %error, "datastore call failed");
                Err(error)
            }
        }
    }

    /// The error of a call whose last attempt failed so.
    fn error(&self, about: &About<'_>, failure: Failure, attempts: u32) -> Error {
        let endpoint = &self.endpoint;
        let tries = match attempts {
            1 => String::new(),
            n => format!(" (after {n} attempts)"),
        };
        let once = about.sending != Sending::Idempotent;
        match failure {
            Failure::Deadline if once => Error::CommitOutcomeUnknown {
                endpoint: endpoint.clone(),
                reason: format!("no answer came within the deadline of {:?}", self.timeout),
            },
            Failure::Deadline => Error::Unavailable {
                reason: format!(
                    "{} to {endpoint} got no answer within the deadline of {:?}{tries} \
                     (`CloudBuilder::timeout`)",
                    about.rpc, self.timeout
                ),
            },
            Failure::Connection { message, sent } if once && sent => Error::CommitOutcomeUnknown {
                endpoint: endpoint.clone(),
                reason: format!("the connection failed before its answer came ({message})"),
            },
            Failure::Connection { message, .. } => Error::Unavailable {
                reason: format!("{} to {endpoint} failed{tries}: {message}", about.rpc),
            },
            Failure::Service(status)
                if once && matches!(status.code(), Code::Unavailable | Code::DeadlineExceeded) =>
            {
                Error::CommitOutcomeUnknown {
                    endpoint: endpoint.clone(),
                    reason: format!(
                        "the service answered {} ({})",
                        service_code(status.code()).name(),
                        status.message()
                    ),
                }
            }
            Failure::Service(status) => match status_error(status) {
                Error::Unavailable { reason } => Error::Unavailable {
                    reason: format!("{} to {endpoint}{tries}: {reason}", about.rpc),
                },
                other => other,
            },
        }
    }
}

/// A service status as our error, keeping the code and the message (a missing composite
/// index keeps the service's recommended index).
pub(super) fn status_error(status: tonic::Status) -> Error {
    let message = status.message().to_owned();
    match status.code() {
        Code::Aborted => Error::Aborted { reason: message },
        Code::Unavailable => Error::Unavailable { reason: message },
        Code::AlreadyExists => Error::AlreadyExists { key: message },
        Code::NotFound => Error::NotFound { key: message },
        // The legacy emulator's message, and Firestore's (and this crate's server's).
        Code::InvalidArgument
            if message.contains("transaction has expired or is invalid")
                || message.starts_with("Transaction is invalid or") =>
        {
            Error::TransactionClosed
        }
        Code::FailedPrecondition if message.contains("index") => {
            let index_yaml = message
                .split_once("recommended index is:")
                .map_or_else(String::new, |(_, index)| index.trim().to_owned());
            Error::MissingIndex {
                message,
                index_yaml,
            }
        }
        code => Error::Service {
            code: service_code(code),
            message,
        },
    }
}

/// A gRPC status code as the crate's [`ServiceCode`].
pub(super) fn service_code(code: Code) -> ServiceCode {
    match code {
        Code::Ok => ServiceCode::Ok,
        Code::Cancelled => ServiceCode::Cancelled,
        Code::Unknown => ServiceCode::Unknown,
        Code::InvalidArgument => ServiceCode::InvalidArgument,
        Code::DeadlineExceeded => ServiceCode::DeadlineExceeded,
        Code::NotFound => ServiceCode::NotFound,
        Code::AlreadyExists => ServiceCode::AlreadyExists,
        Code::PermissionDenied => ServiceCode::PermissionDenied,
        Code::ResourceExhausted => ServiceCode::ResourceExhausted,
        Code::FailedPrecondition => ServiceCode::FailedPrecondition,
        Code::Aborted => ServiceCode::Aborted,
        Code::OutOfRange => ServiceCode::OutOfRange,
        Code::Unimplemented => ServiceCode::Unimplemented,
        Code::Internal => ServiceCode::Internal,
        Code::Unavailable => ServiceCode::Unavailable,
        Code::DataLoss => ServiceCode::DataLoss,
        Code::Unauthenticated => ServiceCode::Unauthenticated,
    }
}
