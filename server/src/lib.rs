//! Google's Datastore API (`google.datastore.v1.Datastore`, over gRPC, and its REST form,
//! `POST /v1/projects/{project}:{method}`, on the same port) answered by the embedded engine
//! of `datastore-entity`, in memory or in a file, with the emulators' conventions: `GET /`
//! answers `Ok`, `POST /reset` drops all data, `POST /shutdown` stops the server. Every client written for the service or its emulators — Google's Python, Node,
//! Go and Java clients, NDB, this crate's cloud backend — points `DATASTORE_EMULATOR_HOST` at
//! it, and several processes share one file's data through it.
//!
//! ```no_run
//! use datastore_entity_server::{Options, Server};
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let server = Server::start(Options { port: 0, ..Options::default() }).await?;
//! println!("export DATASTORE_EMULATOR_HOST={}", server.emulator_host());
//! // … run the clients …
//! server.stop().await;
//! # Ok::<(), datastore_entity::Error>(())
//! # });
//! ```

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use crate::serve::Service;
use bytes::Bytes;
use datastore_entity::backend::Backend;
use datastore_entity::backend::embedded::Embedded;
use datastore_entity::{Error, Schema};
use gcloud_sdk::google::datastore::admin::v1 as admin_pb;
use gcloud_sdk::google::datastore::v1 as pb;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tonic::Status;
use tonic::body::Body;
use tonic::server::{Grpc, UnaryService};

mod admin;
mod body;
mod console;
pub mod export;
mod index_yaml;
mod rest;
/// The Datastore API answered by any backend: the calls both transports (gRPC and REST) reach,
/// and GQL. Not a public API (public for the tests that drive it without a socket).
#[doc(hidden)]
pub mod serve;

pub use body::{BODY_STALL, MAX_BODIES_BYTES, MAX_JSON_BYTES, MAX_REQUEST_BYTES, ROOM_WAIT};

/// The page cache of a file's store by default: 64 MiB.
pub const DEFAULT_CACHE_BYTES: usize = 64 << 20;

/// The memory past versions take at most by default: 64 MiB.
pub const DEFAULT_VERSIONS_BYTES: usize = 64 << 20;

/// How long a stopping server lets the requests in flight finish before it closes their
/// connections.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Where and how to serve.
#[derive(Debug, Clone)]
pub struct Options {
    /// The address to listen on (`127.0.0.1` by default).
    pub host: String,
    /// The port (`8081` by default, the emulators'; `0` picks a free one).
    pub port: u16,
    /// Keep the data in this file (`Db::open`'s format), created if missing; in memory,
    /// compressed ([`Embedded::in_memory_compressed`]), when `None`.
    pub data: Option<PathBuf>,
    /// How long past versions are kept for reads at a `read_time`
    /// ([`Embedded::keep_versions`]); the engine's default (an hour) when `None`. Past
    /// versions are held in memory, in at most `versions_bytes`.
    pub keep_versions: Option<Duration>,
    /// The most memory past versions take ([`Embedded::keep_versions_bytes`]): 64 MiB by
    /// default. Past it the oldest go first, and a transaction whose snapshot needs more
    /// aborts.
    pub versions_bytes: usize,
    /// Serve only the queries the composite indexes of this `index.yaml` serve, as the
    /// service does (and the legacy emulator with `--require_indexes`): another is refused
    /// with `FAILED_PRECONDITION` and the index it needs. `None`: every query is served, as
    /// on the Firestore emulator.
    pub require_indexes: Option<PathBuf>,
    /// Without `require_indexes`, build the composite index a query needs on its first use
    /// ([`Embedded::build_indexes`]), so that it and the next ones cost what they return:
    /// the build reads the kind's entities a slice per query, writes keeping the index from
    /// its start (at 30,000 entities whole after 59 queries, the slices adding about 2 ms
    /// to each in memory: `benches/benches/composite_queries.rs`); on a file, a slice does
    /// not wait for the disk. On by default; off, such a query evaluates entities until its
    /// page fills.
    pub build_indexes: bool,
    /// The page cache of a file's store, in bytes ([`Embedded::open_with_cache`]): what the
    /// server holds of the file in memory. 64 MiB by default; `None`: redb's default (1 GiB).
    pub cache_bytes: Option<usize>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            host: "127.0.0.1".to_owned(),
            port: 8081,
            data: None,
            keep_versions: None,
            versions_bytes: DEFAULT_VERSIONS_BYTES,
            require_indexes: None,
            build_indexes: true,
            cache_bytes: Some(DEFAULT_CACHE_BYTES),
        }
    }
}

/// A running server; [`stop`](Server::stop) it to end it gracefully (requests in flight are
/// answered, every acknowledged write is in the file).
pub struct Server {
    addr: SocketAddr,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
    /// What the connections share (held by them; gone once the server stopped).
    shared: std::sync::Weak<Shared>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

/// What every connection shares: the API over the current backend, and how to start over.
struct Shared {
    api: RwLock<Api>,
    /// The room requests' bodies share.
    room: body::Room,
    store: Store,
    stop: watch::Sender<bool>,
    /// Set once the shutdown grace is over: the calls still unfinished give up.
    abandon: watch::Sender<bool>,
    /// The console's pages (`/console`).
    console: console::Console,
}

/// The API over the engine, and the engine itself (for the admin calls).
#[derive(Clone)]
struct Api {
    service: Service,
    engine: Arc<Embedded>,
}

impl Api {
    fn new(engine: Arc<Embedded>) -> Api {
        Api {
            service: Service::new(Arc::clone(&engine) as Arc<dyn Backend>),
            engine,
        }
    }
}

/// How the store is opened (again, after a reset).
#[derive(Clone)]
struct Store {
    data: Option<PathBuf>,
    keep_versions: Option<Duration>,
    versions_bytes: usize,
    cache_bytes: Option<usize>,
    /// The schemas of `index.yaml`'s indexes, with strict index mode; none: every query.
    required: Option<Vec<&'static Schema>>,
    /// Whether queries build the composite indexes they need.
    build_indexes: bool,
}

impl Server {
    /// Opens the store and listens on `options.host:options.port`.
    pub async fn start(options: Options) -> Result<Server, Error> {
        let store = Store {
            data: options.data,
            keep_versions: options.keep_versions,
            versions_bytes: options.versions_bytes,
            cache_bytes: options.cache_bytes,
            build_indexes: options.build_indexes,
            required: options
                .require_indexes
                .as_deref()
                .map(index_yaml::schemas)
                .transpose()?,
        };
        let backend = store.open().await?;
        let listener = TcpListener::bind((options.host.as_str(), options.port))
            .await
            .map_err(|e| Error::Unavailable {
                reason: format!("cannot listen on {}:{}: {e}", options.host, options.port),
            })?;
        let addr = listener.local_addr().map_err(|e| Error::Unavailable {
            reason: e.to_string(),
        })?;
        let (stop, stopped) = watch::channel(false);
        let shared = Arc::new(Shared {
            api: RwLock::new(Api::new(backend)),
            room: body::Room::default(),
            store,
            stop: stop.clone(),
            abandon: watch::Sender::new(false),
            console: console::Console::new(addr.port()),
        });
        let weak = Arc::downgrade(&shared);
        let task = tokio::spawn(accept(listener, shared, stopped));
        tracing::info!(%addr, "datastore-entity-server listening");
        Ok(Server {
            addr,
            stop,
            task,
            shared: weak,
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// What `DATASTORE_EMULATOR_HOST` should be set to: `host:port`.
    pub fn emulator_host(&self) -> String {
        self.addr.to_string()
    }

    /// Imports the export `input` (its `.overall_export_metadata`, or its folder) into
    /// `project`, through the API the server serves (clients see the entities as each batch
    /// commits), telling `progress` after each batch: [`export::import`].
    pub async fn import(
        &self,
        project: &str,
        input: &std::path::Path,
        filter: &export::Filter,
        progress: &mut (dyn FnMut(export::Progress) + Send),
    ) -> Result<export::Progress, export::ExportError> {
        let service = self
            .shared
            .upgrade()
            .and_then(|shared| shared.api.read().ok().map(|api| api.service.clone()))
            .ok_or_else(|| export::ExportError::Invalid {
                reason: "the server has stopped".to_owned(),
            })?;
        export::import(&service, project, input, filter, progress).await
    }

    /// Resolves when the server was asked to stop (`POST /shutdown`, or [`stop`](Server::stop)).
    pub async fn stopping(&self) {
        until_stopped(&mut self.stop.subscribe()).await;
    }

    /// Stops listening, lets the requests in flight finish (for [`SHUTDOWN_GRACE`] at most:
    /// then their connections are closed, their calls unanswered), and closes the store.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

impl Store {
    /// The store: the file's, or a new one in memory (compressed); in strict index mode with the required
    /// indexes declared, or serving every query as the Firestore emulator does.
    async fn open(&self) -> Result<Arc<Embedded>, Error> {
        let engine = match &self.data {
            Some(path) => Embedded::open_with_cache(path, self.cache_bytes)?,
            None => Embedded::in_memory_compressed(),
        };
        let engine = match self.keep_versions {
            Some(retention) => engine.keep_versions(retention),
            None => engine,
        };
        let engine = engine
            .keep_versions_bytes(self.versions_bytes)
            .strict_indexes(self.required.is_some())
            .build_indexes(self.build_indexes);
        for schema in self.required.iter().flatten() {
            engine.declare(schema).await?;
        }
        Ok(Arc::new(engine))
    }
}

/// Accepts connections until told to stop, then waits for each to end gracefully.
async fn accept(listener: TcpListener, shared: Arc<Shared>, mut stopped: watch::Receiver<bool>) {
    let mut connections = JoinSet::new();
    let each = stopped.clone();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let _ = stream.set_nodelay(true);
                    connections.spawn(connection(stream, Arc::clone(&shared), each.clone()));
                }
                Err(error) => {
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            () = until_stopped(&mut stopped) => break,
        }
        while connections.try_join_next().is_some() {}
    }
    drop(listener);
    let finished = async { while connections.join_next().await.is_some() {} };
    if tokio::time::timeout(SHUTDOWN_GRACE, finished)
        .await
        .is_err()
    {
        // A client holds a request unfinished (a body that never ends): its call is dropped
        // unanswered, so nothing it asked is acknowledged, and every write acknowledged is in
        // the store already.
        tracing::warn!(
            connections = connections.len(),
            "requests still unfinished after the shutdown grace: closing their connections"
        );
        let _ = shared.abandon.send(true);
        connections.abort_all();
        while connections.join_next().await.is_some() {}
        // The calls abandoned let go of the store (their tasks are hyper's, not these).
        for _ in 0..200 {
            if Arc::strong_count(&shared) == 1 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// Serves one connection (HTTP/2 for gRPC, HTTP/1.1 for the emulators' plain endpoints).
async fn connection(
    stream: tokio::net::TcpStream,
    shared: Arc<Shared>,
    mut stopped: watch::Receiver<bool>,
) {
    let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    let service = hyper::service::service_fn(move |request: Request<Incoming>| {
        let shared = Arc::clone(&shared);
        async move { Ok::<_, Infallible>(handle(&shared, request).await) }
    });
    let connection = builder.serve_connection(TokioIo::new(stream), service);
    tokio::pin!(connection);
    tokio::select! {
        _ = connection.as_mut() => {}
        () = until_stopped(&mut stopped) => {
            connection.as_mut().graceful_shutdown();
            let _ = connection.await;
        }
    }
}

/// Resolves once the server is told to stop.
async fn until_stopped(stopped: &mut watch::Receiver<bool>) {
    let _ = stopped.wait_for(|s| *s).await;
}

/// One request, answered; logged at the debug level (the binary's `--log debug`) with its
/// status and time.
async fn handle(shared: &Shared, request: Request<Incoming>) -> Response<Body> {
    if !tracing::enabled!(tracing::Level::DEBUG) {
        return answer(shared, request).await;
    }
    let (method, path) = (request.method().clone(), request.uri().path().to_owned());
    let started = std::time::Instant::now();
    let response = answer(shared, request).await;
    // A gRPC call that failed says so in its headers; one that succeeded, in its trailers.
    let code = is_grpc(response.headers()).then(|| {
        response
            .headers()
            .get("grpc-status")
            .map_or(tonic::Code::Ok, |code| {
                tonic::Code::from_bytes(code.as_bytes())
            })
    });
    let code = code.map_or_else(|| "-".to_owned(), |code| format!("{code:?}"));
    tracing::debug!(
        %method,
        %path,
        status = response.status().as_u16(),
        %code,
        micros = started.elapsed().as_micros() as u64,
        "request"
    );
    response
}

/// Whether a request or an answer with these `headers` is gRPC's (by its content type).
fn is_grpc(headers: &hyper::HeaderMap) -> bool {
    headers
        .get(hyper::header::CONTENT_TYPE)
        .is_some_and(|t| t.as_bytes().starts_with(b"application/grpc"))
}

/// A request's answer: a gRPC call, or one of the emulators' plain endpoints. Each kind is
/// answered by a future of its own, boxed: hyper moves the whole of a request's future as it
/// spawns it, which would otherwise be as large as the largest kind's.
async fn answer(shared: &Shared, request: Request<Incoming>) -> Response<Body> {
    if is_grpc(request.headers()) {
        return Box::pin(grpc_call(shared, request)).await;
    }
    if request.method() == Method::POST
        && let Some((project, method)) = rest::route(request.uri().path())
    {
        let (project, method) = (project.to_owned(), method.to_owned());
        return Box::pin(rest_call(shared, project, method, request)).await;
    }
    if console::is_console(request.uri().path()) {
        let api = shared.api.read().map(|s| s.clone()).ok();
        let Some(api) = api else {
            return plain(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the server's state is poisoned\n",
            );
        };
        return Box::pin(console::handle(
            &shared.console,
            api.service,
            &api.engine,
            &shared.room,
            request,
        ))
        .await;
    }
    match (request.method(), request.uri().path()) {
        (&Method::GET, "/") => plain(StatusCode::OK, "Ok\n"),
        (&Method::POST, "/reset") => match Box::pin(reset(shared)).await {
            Ok(()) => plain(StatusCode::OK, "Resetting...\n"),
            Err(error) => plain(StatusCode::INTERNAL_SERVER_ERROR, &format!("{error}\n")),
        },
        (&Method::POST, "/shutdown") => {
            let _ = shared.stop.send(true);
            plain(StatusCode::OK, "Shutting down...\n")
        }
        _ => plain(
            StatusCode::NOT_FOUND,
            "Not found: this server answers gRPC, REST (POST /v1/projects/{project}:{method}), GET /, \
             POST /reset, POST /shutdown and its console (GET /console)\n",
        ),
    }
}

/// A gRPC call, answered within its deadline, or `UNAVAILABLE` once the server gives up on
/// the calls still unfinished at its stop.
async fn grpc_call(shared: &Shared, request: Request<Incoming>) -> Response<Body> {
    let api = shared.api.read().map(|s| s.clone()).ok();
    let Some(api) = api else {
        return Status::internal("the server's state is poisoned").into_http();
    };
    let room = &shared.room;
    let answer = async {
        match deadline(&request) {
            Ok(None) => call(api, room, request).await,
            Ok(Some(deadline)) => within(deadline, call(api, room, request)).await,
            Err(status) => status.into_http(),
        }
    };
    let mut abandoned = shared.abandon.subscribe();
    tokio::select! {
        response = answer => response,
        () = until_stopped(&mut abandoned) => {
            Status::unavailable("The server stopped before the request was whole.").into_http()
        }
    }
}

/// A call of Google's REST form of the API (`POST /v1/projects/{project}:{method}`).
async fn rest_call(
    shared: &Shared,
    project: String,
    method: String,
    request: Request<Incoming>,
) -> Response<Body> {
    let api = shared.api.read().map(|s| s.clone()).ok();
    let Some(Api { service, .. }) = api else {
        return rest::error(&Status::internal("the server's state is poisoned"));
    };
    let declared = request
        .headers()
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse().ok());
    let read = match shared.room.read_json(request.into_body(), declared).await {
        Ok(read) => read,
        Err(status) => return rest::error(&status),
    };
    rest::call(service, &project, &method, &read.bytes).await
}

fn plain(status: StatusCode, text: &str) -> Response<Body> {
    let mut response = Response::new(Body::new(Full::new(Bytes::from(text.to_owned()))));
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// Drops all data: a new store in memory, or the file removed and created anew once the
/// requests that use the old one are done.
async fn reset(shared: &Shared) -> Result<(), Error> {
    let memory = Store {
        data: None,
        ..shared.store.clone()
    };
    let fresh = memory.open().await?;
    let old = {
        let mut api = shared.api.write().map_err(|_| poisoned())?;
        // The old engine is held by its service alone from here.
        std::mem::replace(&mut *api, Api::new(fresh)).service
    };
    let Some(path) = &shared.store.data else {
        return Ok(());
    };
    let mut old = Some(old);
    for _ in 0..200 {
        if old
            .as_ref()
            .is_some_and(|s| Arc::strong_count(s.backend()) == 1)
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(old.take());
    std::fs::remove_file(path).map_err(|e| Error::Storage {
        reason: format!("cannot remove {}: {e}", path.display()),
        source: Some(datastore_entity::StorageSource::new(e)),
    })?;
    let backend = shared.store.open().await?;
    *shared.api.write().map_err(|_| poisoned())? = Api::new(backend);
    Ok(())
}

fn poisoned() -> Error {
    Error::Internal {
        invariant: "no call panics while it holds the server's state",
    }
}

/// When the call's client stops waiting (its `grpc-timeout` header: digits and a unit, `H`,
/// `M`, `S`, `m`, `u` or `n`), as the service honours it; `None` without one.
fn deadline(request: &Request<Incoming>) -> Result<Option<tokio::time::Instant>, Status> {
    let Some(header) = request.headers().get("grpc-timeout") else {
        return Ok(None);
    };
    let malformed = || Status::invalid_argument("The grpc-timeout header is malformed.");
    let text = header.to_str().map_err(|_| malformed())?;
    let (digits, unit) = text.split_at(text.len().saturating_sub(1));
    // gRPC's timeouts hold at most 8 digits.
    if digits.is_empty() || digits.len() > 8 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(malformed());
    }
    let n: u64 = digits.parse().map_err(|_| malformed())?;
    let timeout = match unit {
        "H" => Duration::from_secs(n * 3600),
        "M" => Duration::from_secs(n * 60),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return Err(malformed()),
    };
    Ok(Some(tokio::time::Instant::now() + timeout))
}

/// `answer`, or `DEADLINE_EXCEEDED` once `deadline` passes (an answer ready only after it
/// too: its client stopped waiting, as gRPC's own servers answer it).
async fn within(
    deadline: tokio::time::Instant,
    answer: impl Future<Output = Response<Body>>,
) -> Response<Body> {
    let exceeded = || Status::deadline_exceeded("Deadline exceeded.").into_http();
    if tokio::time::Instant::now() >= deadline {
        return exceeded();
    }
    match tokio::time::timeout_at(deadline, answer).await {
        Ok(_) if tokio::time::Instant::now() > deadline => exceeded(),
        Ok(response) => response,
        Err(_) => exceeded(),
    }
}

/// A unary call handled once by `F`.
struct Unary<F>(Option<F>);

impl<Req, Res, F, Fut> UnaryService<Req> for Unary<F>
where
    F: FnOnce(Req) -> Fut,
    Fut: Future<Output = Result<Res, Status>> + Send + 'static,
{
    type Response = Res;
    type Future = Pin<Box<dyn Future<Output = Result<tonic::Response<Res>, Status>> + Send>>;

    fn call(&mut self, request: tonic::Request<Req>) -> Self::Future {
        match self.0.take() {
            Some(handle) => {
                let answer = handle(request.into_inner());
                Box::pin(async move { answer.await.map(tonic::Response::new) })
            }
            None => Box::pin(async { Err(Status::internal("a unary call was answered twice")) }),
        }
    }
}

/// Routes a gRPC call to the method its path names, its one message read first, within the
/// room requests share ([`body`]).
async fn call(api: Api, room: &body::Room, request: Request<Incoming>) -> Response<Body> {
    let (parts, body) = request.into_parts();
    let read = match room.read(body).await {
        Ok(read) => read,
        Err(status) => return status.into_http(),
    };
    let request = Request::from_parts(parts, Full::new(read.bytes.clone()));
    let Api { service, engine } = api;
    let (exports, imports) = (service.clone(), service.clone());
    macro_rules! routes {
        ($($path:literal, $req:ty => $res:ty, $handle:expr;)*) => {
            match request.uri().path() {
                $($path => {
                    let mut grpc = Grpc::new(body::Checked::<$res, $req>::default())
                        .max_decoding_message_size(usize::MAX)
                        .max_encoding_message_size(usize::MAX);
                    // Boxed: a call's future is as large as its method's alone, not as the
                    // largest method's (hyper moves the whole of it as it spawns the call).
                    Box::pin(grpc.unary(Unary(Some($handle)), request)).await
                })*
                path => Status::unimplemented(format!(
                    "{path} is not a method this server serves (google.datastore.v1.Datastore, \
                     and google.datastore.admin.v1.DatastoreAdmin's indexes, exports and imports)"
                ))
                .into_http(),
            }
        };
    }
    routes! {
        "/google.datastore.v1.Datastore/Lookup", pb::LookupRequest => pb::LookupResponse,
            move |r| async move { service.lookup(r).await };
        "/google.datastore.v1.Datastore/RunQuery", pb::RunQueryRequest => pb::RunQueryResponse,
            move |r| async move { service.run_query(r).await };
        "/google.datastore.v1.Datastore/RunAggregationQuery",
            pb::RunAggregationQueryRequest => pb::RunAggregationQueryResponse,
            move |r| async move { service.run_aggregation_query(r).await };
        "/google.datastore.v1.Datastore/BeginTransaction",
            pb::BeginTransactionRequest => pb::BeginTransactionResponse,
            move |r| async move { service.begin_transaction(r).await };
        "/google.datastore.v1.Datastore/Commit", pb::CommitRequest => pb::CommitResponse,
            move |r| async move { service.commit(r).await };
        "/google.datastore.v1.Datastore/Rollback", pb::RollbackRequest => pb::RollbackResponse,
            move |r| async move { service.rollback(r).await };
        "/google.datastore.v1.Datastore/AllocateIds",
            pb::AllocateIdsRequest => pb::AllocateIdsResponse,
            move |r| async move { service.allocate_ids(r).await };
        "/google.datastore.v1.Datastore/ReserveIds",
            pb::ReserveIdsRequest => pb::ReserveIdsResponse,
            move |r| async move { service.reserve_ids(r).await };
        "/google.datastore.admin.v1.DatastoreAdmin/ExportEntities",
            admin_pb::ExportEntitiesRequest => gcloud_sdk::google::longrunning::Operation,
            move |r| async move { admin::export_entities(&exports, r).await };
        "/google.datastore.admin.v1.DatastoreAdmin/ImportEntities",
            admin_pb::ImportEntitiesRequest => gcloud_sdk::google::longrunning::Operation,
            move |r| async move { admin::import_entities(&imports, r).await };
        "/google.datastore.admin.v1.DatastoreAdmin/ListIndexes",
            admin_pb::ListIndexesRequest => admin_pb::ListIndexesResponse,
            move |r| async move { admin::list(&engine, r) };
        "/google.datastore.admin.v1.DatastoreAdmin/GetIndex",
            admin_pb::GetIndexRequest => admin_pb::Index,
            move |r| async move { admin::get(&engine, r) };
    }
}
