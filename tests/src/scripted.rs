//! A Datastore server of the tests' own, in front of an emulator, that answers as Google
//! Cloud may and Google's emulators never do: a lookup that defers keys, a query answer cut
//! into batches that are not finished (some of them empty), a status (`UNAVAILABLE`,
//! `DEADLINE_EXCEEDED`, `ABORTED`…) answered instead of forwarding a call, and Google's limit
//! of 1,000 keys a lookup. Everything else is forwarded to the emulator as it came, and every
//! call is counted by method. Loopback only; the server ends with its value.

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::future::Future;
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use gcloud_sdk::google::datastore::v1 as pb;
use pb::datastore_client::DatastoreClient;
use pb::query_result_batch::MoreResultsType;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tonic::body::Body;
use tonic::codegen::{BoxFuture, Service, http};
use tonic::transport::Channel;
use tonic::{Code, Request, Response, Status};

/// What the server does to the calls it receives; every field off by default.
#[derive(Debug, Default)]
pub struct Script {
    /// A lookup answers at most this many of its keys (found or missing) and defers the rest.
    pub answered_per_lookup: Option<usize>,
    /// A query's batch holds at most this many results, `NOT_FINISHED` when more remain.
    pub results_per_batch: Option<usize>,
    /// Every other query is answered with an empty batch, `NOT_FINISHED`, that ends where
    /// the query starts (the service may stop before finding anything).
    pub empty_batches: bool,
    /// Google Cloud's plan and statistics, sent with every query asked to be explained
    /// (Google's emulators ignore the request).
    pub explain_metrics: Option<pb::ExplainMetrics>,
    failures: HashMap<String, VecDeque<Code>>,
    calls: Vec<String>,
    queries: usize,
}

/// The server: `127.0.0.1:port` answers for the emulator on `127.0.0.1:target`.
pub struct Scripted {
    /// Where clients connect.
    pub port: u16,
    script: Arc<Mutex<Script>>,
    server: JoinHandle<()>,
}

impl Drop for Scripted {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl Scripted {
    /// A server for the emulator on `target`, on a free loopback port, forwarding everything.
    pub async fn start(target: u16) -> Scripted {
        let channel = Channel::from_shared(format!("http://127.0.0.1:{target}"))
            .expect("a loopback endpoint")
            .connect_lazy();
        let upstream = DatastoreClient::new(channel)
            .max_decoding_message_size(usize::MAX)
            .max_encoding_message_size(usize::MAX);
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .await
            .expect("a free port");
        let port = listener.local_addr().expect("bound").port();
        let script = Arc::new(Mutex::new(Script::default()));
        let service = Forward {
            upstream,
            script: script.clone(),
        };
        let server = tokio::spawn(async move {
            let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
            let served = tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming(incoming)
                .await;
            if let Err(error) = served {
                eprintln!("the scripted server stopped: {error}");
            }
        });
        Scripted {
            port,
            script,
            server,
        }
    }

    /// The endpoint to give `CloudBuilder::endpoint`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Changes what the server does from the next call on.
    pub fn set(&self, change: impl FnOnce(&mut Script)) {
        change(&mut self.lock());
    }

    /// The next calls of `method` (`"Lookup"`, `"Commit"`, … as in the service's definition)
    /// are answered with these statuses, one each, before calls are forwarded again.
    pub fn fail(&self, method: &str, codes: &[Code]) {
        let mut script = self.lock();
        script
            .failures
            .entry(method.to_owned())
            .or_default()
            .extend(codes.iter().copied());
    }

    /// How many calls of `method` the server has received (answered or failed).
    pub fn calls(&self, method: &str) -> usize {
        self.lock().calls.iter().filter(|m| *m == method).count()
    }

    /// Forgets the calls counted so far.
    pub fn forget_calls(&self) {
        self.lock().calls.clear();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Script> {
        self.script.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The gRPC service: each call counted, failed as scripted, or forwarded and its answer
/// changed as scripted.
#[derive(Clone)]
struct Forward {
    upstream: DatastoreClient<Channel>,
    script: Arc<Mutex<Script>>,
}

impl tonic::server::NamedService for Forward {
    const NAME: &'static str = "google.datastore.v1.Datastore";
}

impl Service<http::Request<Body>> for Forward {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Infallible>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let this = self.clone();
        Box::pin(async move {
            let method = request
                .uri()
                .path()
                .rsplit('/')
                .next()
                .unwrap_or_default()
                .to_owned();
            let failure = this.receive(&method);
            // A call forwarded as it came.
            macro_rules! forward {
                ($request:ty, $call:ident) => {{
                    let mut up = this.upstream.clone();
                    let forwarded =
                        move |r: $request| async move { Ok(up.$call(r).await?.into_inner()) };
                    unary(request, failure, forwarded).await
                }};
            }
            let answer = match method.as_str() {
                "Lookup" => unary(request, failure, move |r| this.lookup(r)).await,
                "RunQuery" => unary(request, failure, move |r| this.run_query(r)).await,
                "Commit" => unary(request, None, move |r| this.commit(r, failure)).await,
                "RunAggregationQuery" => {
                    forward!(pb::RunAggregationQueryRequest, run_aggregation_query)
                }
                "BeginTransaction" => forward!(pb::BeginTransactionRequest, begin_transaction),
                "Rollback" => forward!(pb::RollbackRequest, rollback),
                "AllocateIds" => forward!(pb::AllocateIdsRequest, allocate_ids),
                "ReserveIds" => forward!(pb::ReserveIdsRequest, reserve_ids),
                _ => Status::unimplemented(format!("no method {method}")).into_http(),
            };
            Ok(answer)
        })
    }
}

impl Forward {
    fn lock(&self) -> std::sync::MutexGuard<'_, Script> {
        self.script.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Counts a call of `method`; the status to answer it with, if one is scripted.
    fn receive(&self, method: &str) -> Option<Status> {
        let mut script = self.lock();
        script.calls.push(method.to_owned());
        let code = script.failures.get_mut(method)?.pop_front()?;
        Some(Status::new(code, format!("scripted {code:?}")))
    }

    /// A lookup as Google Cloud answers it: at most 1,000 keys, and (as scripted) some of
    /// them deferred.
    async fn lookup(self, request: pb::LookupRequest) -> Result<pb::LookupResponse, Status> {
        if request.keys.len() > 1000 {
            return Err(Status::invalid_argument(
                "cannot get more than 1000 keys in a single call",
            ));
        }
        let mut response = self.upstream.clone().lookup(request).await?.into_inner();
        let Some(answered) = self.lock().answered_per_lookup else {
            return Ok(response);
        };
        let mut results: Vec<(bool, pb::EntityResult)> = std::mem::take(&mut response.found)
            .into_iter()
            .map(|r| (true, r))
            .chain(
                std::mem::take(&mut response.missing)
                    .into_iter()
                    .map(|r| (false, r)),
            )
            .collect();
        let deferred = results.split_off(answered.min(results.len()));
        response.deferred.extend(
            deferred
                .into_iter()
                .filter_map(|(_, result)| result.entity.and_then(|e| e.key)),
        );
        for (found, result) in results {
            match found {
                true => response.found.push(result),
                false => response.missing.push(result),
            }
        }
        Ok(response)
    }

    /// A commit, or `failure` instead; a transaction's commit that fails ends the transaction
    /// (rolled back at the emulator), as a commit Google Cloud refuses does.
    async fn commit(
        self,
        request: pb::CommitRequest,
        failure: Option<Status>,
    ) -> Result<pb::CommitResponse, Status> {
        use pb::commit_request::TransactionSelector;
        let mut up = self.upstream.clone();
        let Some(failure) = failure else {
            return Ok(up.commit(request).await?.into_inner());
        };
        if let Some(TransactionSelector::Transaction(transaction)) = request.transaction_selector {
            let rollback = pb::RollbackRequest {
                project_id: request.project_id,
                database_id: request.database_id,
                transaction,
                ..pb::RollbackRequest::default()
            };
            up.rollback(rollback).await?;
        }
        Err(failure)
    }

    /// A query as Google Cloud may answer it: (as scripted) in batches of a few results, or
    /// none, `NOT_FINISHED`.
    async fn run_query(self, request: pb::RunQueryRequest) -> Result<pb::RunQueryResponse, Status> {
        let (per_batch, empty, metrics) = {
            let mut script = self.lock();
            script.queries += 1;
            let empty = script.empty_batches && script.queries % 2 == 1;
            (
                script.results_per_batch,
                empty,
                script.explain_metrics.clone(),
            )
        };
        let start = match &request.query_type {
            Some(pb::run_query_request::QueryType::Query(query)) => query.start_cursor.clone(),
            _ => Vec::new(),
        };
        let explaining = request.explain_options.is_some();
        let mut response = self.upstream.clone().run_query(request).await?.into_inner();
        if explaining {
            response.explain_metrics = metrics;
            return Ok(response);
        }
        let Some(batch) = response.batch.as_mut() else {
            return Ok(response);
        };
        let keep = match (empty, per_batch) {
            (true, _) => 0,
            (false, Some(n)) => n,
            (false, None) => return Ok(response),
        };
        if batch.entity_results.len() <= keep {
            return Ok(response);
        }
        batch.entity_results.truncate(keep);
        batch.end_cursor = match batch.entity_results.last() {
            Some(last) => last.cursor.clone(),
            None => start,
        };
        batch.more_results = MoreResultsType::NotFinished as i32;
        Ok(response)
    }
}

/// Answers one unary call with `answer`, or with `failure` without calling it.
async fn unary<Req, Resp, F, Fut>(
    request: http::Request<Body>,
    failure: Option<Status>,
    answer: F,
) -> http::Response<Body>
where
    Req: gcloud_sdk::prost::Message + Default + Send + 'static,
    Resp: gcloud_sdk::prost::Message + Send + 'static,
    F: FnOnce(Req) -> Fut,
    Fut: Future<Output = Result<Resp, Status>> + Send + 'static,
{
    let codec = tonic_prost::ProstCodec::<Resp, Req>::default();
    let mut grpc = tonic::server::Grpc::new(codec)
        .max_decoding_message_size(usize::MAX)
        .max_encoding_message_size(usize::MAX);
    grpc.unary(Once(Some((failure, answer))), request).await
}

/// A unary call's handler, called once.
struct Once<F>(Option<(Option<Status>, F)>);

impl<Req, Resp, F, Fut> Service<Request<Req>> for Once<F>
where
    F: FnOnce(Req) -> Fut,
    Fut: Future<Output = Result<Resp, Status>> + Send + 'static,
{
    type Response = Response<Resp>;
    type Error = Status;
    type Future = BoxFuture<Response<Resp>, Status>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Status>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Req>) -> Self::Future {
        let answer = match self.0.take() {
            Some((Some(failure), _)) => Err(failure),
            Some((None, answer)) => Ok(answer(request.into_inner())),
            None => Err(Status::internal("a unary call answered twice")),
        };
        Box::pin(async move { answer?.await.map(Response::new) })
    }
}
