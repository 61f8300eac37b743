//! The backends the conformance suite runs on: the embedded engine, and Google's two
//! emulators, each started by this harness on a free loopback port, in its own process
//! group, once per test binary, and killed when the test process ends (even after a panic).
//! Each test gets a fresh namespace. The legacy emulator runs with `--require_indexes` and
//! the suite's declared indexes as its `index.yaml`, so it refuses, as the service does, the
//! queries that need an undeclared composite index: the embedded engine's strict index mode
//! is checked against it.
//!
//! In CI (`CI` set) a missing emulator fails loudly; elsewhere its tests are skipped with a
//! printed reason.

use std::io::{Read as _, Write as _};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt as _;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use datastore_entity::Db;

/// Which store a conformance test runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// `Db::in_memory()`.
    Embedded,
    /// `Db::open(path)`: the embedded engine in a `redb` file.
    File,
    /// Google's Datastore emulator (legacy Cloud Datastore, `CloudDatastore.jar`).
    Datastore,
    /// Google's Firestore emulator in Datastore mode: today's production service.
    Firestore,
    /// The cloud backend talking to `datastore-entity-server` (the embedded engine in memory,
    /// behind Google's gRPC API), started in this test binary.
    Server,
}

/// The project the emulators are asked about.
pub const PROJECT: &str = "datastore-entity-test";

impl Backend {
    /// The Debian package that ships the emulator, and its launcher's file name.
    fn package(self) -> Option<(&'static str, &'static str)> {
        match self {
            Backend::Embedded | Backend::File | Backend::Server => None,
            Backend::Datastore => Some((
                "google-cloud-cli-datastore-emulator",
                "cloud_datastore_emulator",
            )),
            Backend::Firestore => Some((
                "google-cloud-cli-firestore-emulator",
                "cloud_firestore_emulator",
            )),
        }
    }

    /// Whether this is one of Google's emulators.
    pub fn is_emulator(self) -> bool {
        matches!(self, Backend::Datastore | Backend::Firestore)
    }

    /// Whether this is the embedded engine (in memory or in a file).
    pub fn is_embedded(self) -> bool {
        matches!(self, Backend::Embedded | Backend::File)
    }
}

/// A running emulator: its port and its process group.
#[derive(Debug)]
pub struct Emulator {
    /// The loopback port it serves gRPC and REST on.
    pub port: u16,
    child: Child,
    /// Its log and scratch directory, removed when it stops.
    leftovers: [std::path::PathBuf; 2],
}

impl Emulator {
    /// The last `lines` lines of the emulator's output, to explain a failure.
    pub fn log_tail(&self, lines: usize) -> String {
        let output = std::fs::read_to_string(&self.leftovers[0]).unwrap_or_default();
        let all: Vec<&str> = output.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        kill_group(self.child.id());
        let _ = self.child.wait();
        let [log, scratch] = &self.leftovers;
        let _ = std::fs::remove_file(log);
        let _ = std::fs::remove_dir_all(scratch);
    }
}

fn kill_group(pgid: u32) {
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{pgid}")])
        .stderr(Stdio::null())
        .status();
}

/// The emulator's launcher, found through its Debian package.
fn launcher(package: &str, file: &str) -> Result<String, String> {
    let out = Command::new("dpkg")
        .args(["-L", package])
        .output()
        .map_err(|e| format!("cannot run dpkg to find {package}: {e}"))?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find(|line| line.ends_with(&format!("/{file}")))
        .map(str::to_owned)
        .ok_or_else(|| format!("the Debian package {package} (with {file}) is not installed"))
}

/// What the emulators print when their port was taken between [`free_port`] and their bind.
const PORT_TAKEN: &str = "Address already in use";

/// Whether the HTTP/1.1 `response` read so far holds its whole body (by its
/// `Content-Length`, or its last chunk): Google's emulators keep the connection open after
/// answering, so reading until it closes would wait for their timeout.
pub fn http_response_whole(response: &[u8]) -> bool {
    let text = String::from_utf8_lossy(response);
    let Some((head, body)) = text.split_once("\r\n\r\n") else {
        return false;
    };
    let head = head.to_ascii_lowercase();
    match head.split("content-length:").nth(1) {
        Some(rest) => {
            let length: usize = rest
                .lines()
                .next()
                .and_then(|line| line.trim().parse().ok())
                .unwrap_or(0);
            body.len() >= length
        }
        None => body.ends_with("0\r\n\r\n"),
    }
}

/// A port nothing listens on now.
pub fn free_port() -> Result<u16, String> {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("no free port: {e}"))
}

/// Whether the emulator answers its health check (`GET /` → `Ok`).
fn healthy(port: u16) -> bool {
    let address = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let Ok(mut stream) = TcpStream::connect_timeout(&address, Duration::from_millis(200)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let request = format!("GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    response.starts_with("HTTP/1.1 200") && response.trim_end().ends_with("Ok")
}

impl Emulator {
    /// Starts the emulator of `backend` on a free loopback port and waits until it answers.
    ///
    /// A port free when chosen can be taken before the emulator binds it (by another
    /// process, or by the emulator's own WebSocket server): then it starts again on another.
    pub fn start(backend: Backend) -> Result<Emulator, String> {
        Emulator::start_free(backend, true)
    }

    /// Starts the emulator of `backend` as its users run it: the legacy one without
    /// `--require_indexes` (a query that needs a composite index gets it, as
    /// `gcloud beta emulators datastore start` runs it), for the benchmarks.
    pub fn start_as_users_run_it(backend: Backend) -> Result<Emulator, String> {
        Emulator::start_free(backend, false)
    }

    fn start_free(backend: Backend, strict: bool) -> Result<Emulator, String> {
        let mut attempt = 1;
        loop {
            match Emulator::launch(backend, free_port()?, strict) {
                Err(reason) if attempt < 5 && reason.contains(PORT_TAKEN) => attempt += 1,
                started => return started,
            }
        }
    }

    /// Starts the emulator of `backend` on loopback port `port` (to restart one where a
    /// client expects it) and waits until it answers.
    pub fn start_on(backend: Backend, port: u16) -> Result<Emulator, String> {
        Emulator::launch(backend, port, true)
    }

    /// Starts the emulator of `backend` on `port`: with `strict`, the legacy one refuses the
    /// queries the suite's `index.yaml` does not serve, as the service does.
    fn launch(backend: Backend, port: u16, strict: bool) -> Result<Emulator, String> {
        let (package, file) = backend
            .package()
            .ok_or_else(|| "the embedded engine is not an emulator".to_owned())?;
        let launcher = launcher(package, file)?;
        let mut scratch = String::new();
        let command = match backend {
            // In memory, strongly consistent (as `--testing`), and (`strict`) refusing queries
            // that need a composite index the suite's entities do not declare, as the service
            // does.
            Backend::Datastore => {
                // Its own directory: a test may run an emulator of its own beside the shared
                // one, and must not remove the shared one's index file.
                let project = std::env::temp_dir().join(format!(
                    "datastore-entity-emulator-{}-{port}",
                    std::process::id()
                ));
                let _ = std::fs::remove_dir_all(&project);
                scratch = project.display().to_string();
                let index_file = project.join("index.yaml");
                std::fs::create_dir_all(&project)
                    .and_then(|()| {
                        // Lenient, the emulator adds the indexes queries need below this line.
                        let declared = match strict {
                            true => crate::conformance::index_yaml(),
                            false => "indexes:\n\n# AUTOGENERATED\n".to_owned(),
                        };
                        std::fs::write(&index_file, declared)
                    })
                    .map_err(|e| format!("cannot write {}: {e}", index_file.display()))?;
                let project = project.join("project");
                format!(
                    "'{launcher}' create '{dir}' >/dev/null 2>&1 && \
                     '{launcher}' start --host=127.0.0.1 --port={port} --consistency=1.0 \
                     --store_on_disk=false --store_index_configuration_on_disk=false \
                     {strict} --index_file='{index}' '{dir}'",
                    dir = project.display(),
                    index = index_file.display(),
                    strict = if strict { "--require_indexes" } else { "" },
                )
            }
            _ => format!(
                "'{launcher}' --host=127.0.0.1 --port={port} --database-mode=datastore-mode"
            ),
        };
        // The launcher forks a `java` child that would outlive it. Both run in this shell's
        // process group, which the shell kills as soon as the test process is gone, removing
        // the emulator's scratch directory and log.
        let script = format!(
            "{command} >\"$LOG\" 2>&1 &\n\
             while kill -0 \"$TEST_PID\" 2>/dev/null; do sleep 0.5; done\n\
             [ -n \"$SCRATCH\" ] && rm -rf \"$SCRATCH\"\n\
             rm -f \"$LOG\"\n\
             kill -9 -$$"
        );
        let log = std::env::temp_dir().join(format!(
            "datastore-entity-{backend:?}-{}-{port}.log",
            std::process::id()
        ));
        let child = Command::new("sh")
            .arg("-c")
            .arg(script)
            .env("TEST_PID", std::process::id().to_string())
            .env("LOG", &log)
            .env("SCRATCH", &scratch)
            .stdin(Stdio::null())
            .process_group(0)
            .spawn()
            .map_err(|e| format!("cannot start {file}: {e}"))?;
        let emulator = Emulator {
            port,
            child,
            leftovers: [log, scratch.into()],
        };
        let started = Instant::now();
        while !healthy(port) {
            let output = std::fs::read_to_string(&emulator.leftovers[0]).unwrap_or_default();
            if output.contains(PORT_TAKEN) {
                return Err(format!("{file} could not bind port {port}:\n{output}"));
            }
            if started.elapsed() > Duration::from_secs(90) {
                return Err(format!(
                    "{file} did not answer on port {port} within 90 s; its output:\n{output}"
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        eprintln!(
            "{file} is up on 127.0.0.1:{port} after {:.1} s",
            started.elapsed().as_secs_f64()
        );
        Ok(emulator)
    }
}

/// The emulator of `backend` for this test binary, started on first use.
fn emulator(backend: Backend) -> &'static Result<Emulator, String> {
    static DATASTORE: OnceLock<Result<Emulator, String>> = OnceLock::new();
    static FIRESTORE: OnceLock<Result<Emulator, String>> = OnceLock::new();
    let cell = match backend {
        Backend::Firestore => &FIRESTORE,
        _ => &DATASTORE,
    };
    cell.get_or_init(|| Emulator::start(backend))
}

/// The emulator of `backend` for this test binary, started on first use; `None` when it is
/// not installed and this is not CI (the reason printed), a panic in CI, which must have it.
pub fn shared_emulator(backend: Backend) -> Option<&'static Emulator> {
    match emulator(backend) {
        Ok(emulator) => Some(emulator),
        Err(reason) if std::env::var_os("CI").is_some() => {
            panic!("CI needs the {backend:?} emulator: {reason}")
        }
        Err(reason) => {
            eprintln!("skipped: {reason}");
            None
        }
    }
}

/// The address (`127.0.0.1:PORT`) of `datastore-entity-server` for this test binary: the
/// embedded engine in memory, served on a free loopback port from a thread of its own (each
/// test has its own runtime; the server outlives them all).
pub fn server_host() -> &'static str {
    static HOST: OnceLock<String> = OnceLock::new();
    HOST.get_or_init(|| {
        let (sender, receiver) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("a runtime for the server");
            runtime.block_on(async {
                let options = datastore_entity_server::Options {
                    port: 0,
                    ..Default::default()
                };
                let server = datastore_entity_server::Server::start(options)
                    .await
                    .expect("the server starts");
                sender
                    .send(server.emulator_host())
                    .expect("the harness waits");
                server.stopping().await;
            });
        });
        receiver.recv().expect("the server's address")
    })
}

/// The loopback address of `backend`'s emulator for this test binary (`127.0.0.1:PORT`), as
/// other clients take it in `DATASTORE_EMULATOR_HOST`.
pub fn emulator_host(backend: Backend) -> Result<String, String> {
    Ok(format!("127.0.0.1:{}", emulator(backend).as_ref()?.port))
}

/// Google's Python clients (`google-cloud-ndb`, `google-cloud-datastore`, `google-api-python-client`, from the Python
/// registry) and Selenium (the console's browser tests), in a virtualenv under
/// `target/ndb-venv`, installed on first use: the path of its `python`. An error says why they are not there (no `python3`, no registry).
pub fn ndb_python() -> Result<std::path::PathBuf, String> {
    static PYTHON: OnceLock<Result<std::path::PathBuf, String>> = OnceLock::new();
    PYTHON
        .get_or_init(|| {
            let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(
                || std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"),
                std::path::PathBuf::from,
            );
            let venv = target.join("ndb-venv");
            let python = venv.join("bin/python");
            let ready = |python: &std::path::Path| {
                Command::new(python)
                    .args([
                        "-c",
                        "import google.cloud.ndb, google.cloud.datastore, googleapiclient, selenium",
                    ])
                    .stderr(Stdio::null())
                    .status()
                    .is_ok_and(|s| s.success())
            };
            if ready(&python) {
                return Ok(python);
            }
            let run = |program: &std::path::Path, args: &[&str]| {
                let output = Command::new(program)
                    .args(args)
                    .output()
                    .map_err(|e| format!("cannot run {}: {e}", program.display()))?;
                if output.status.success() {
                    Ok(())
                } else {
                    Err(format!(
                        "{} {} failed: {}",
                        program.display(),
                        args.join(" "),
                        String::from_utf8_lossy(&output.stderr)
                    ))
                }
            };
            eprintln!("installing google-cloud-ndb into {}", venv.display());
            let venv_arg = venv.to_string_lossy().into_owned();
            run("python3".as_ref(), &["-m", "venv", &venv_arg])?;
            run(
                &venv.join("bin/pip"),
                &[
                    "install",
                    "--quiet",
                    "google-cloud-ndb==2.7.1",
                    "google-cloud-datastore==2.27.0",
                    "google-api-python-client==2.202.0",
                    "selenium==4.50.0",
                ],
            )?;
            if ready(&python) {
                Ok(python)
            } else {
                Err("google-cloud-ndb does not import after installing it".to_owned())
            }
        })
        .clone()
}

/// Debian's Chromium and its driver (`/usr/bin/chromium`, `/usr/bin/chromedriver`; `.ci/run`
/// installs them where they are missing, as it installs Redis), for the console's browser
/// tests: the browser's path, or why it is not there.
pub fn chromium() -> Result<std::path::PathBuf, String> {
    for path in ["/usr/bin/chromium", "/usr/bin/chromedriver"] {
        if !std::path::Path::new(path).exists() {
            return Err(format!(
                "{path} is missing: apt-get install chromium chromium-driver"
            ));
        }
    }
    Ok("/usr/bin/chromium".into())
}

/// Google's Node client (`@google-cloud/datastore`, pinned by `server/clients/package.json`
/// and its lock file), installed with `npm ci` under `target/node-clients` on first use: the
/// directory to run `node` in. An error says why it is not there (no `npm`, no registry).
pub fn node_clients() -> Result<std::path::PathBuf, String> {
    static DIR: OnceLock<Result<std::path::PathBuf, String>> = OnceLock::new();
    DIR.get_or_init(|| {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map_or_else(|| root.join("target"), std::path::PathBuf::from);
        let dir = target.join("node-clients");
        let pinned = root.join("server/clients");
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        for file in ["package.json", "package-lock.json"] {
            let wanted = std::fs::read(pinned.join(file)).map_err(|e| format!("{file}: {e}"))?;
            if std::fs::read(dir.join(file)).ok().as_ref() != Some(&wanted) {
                std::fs::write(dir.join(file), &wanted).map_err(|e| format!("{file}: {e}"))?;
                let _ = std::fs::remove_dir_all(dir.join("node_modules"));
            }
        }
        if !dir.join("node_modules/@google-cloud/datastore").exists() {
            eprintln!("installing @google-cloud/datastore into {}", dir.display());
            let output = Command::new("npm")
                .args(["ci", "--no-audit", "--no-fund", "--ignore-scripts"])
                .current_dir(&dir)
                .output()
                .map_err(|e| format!("cannot run npm: {e}"))?;
            if !output.status.success() {
                return Err(format!(
                    "npm ci failed: {}",
                    String::from_utf8_lossy(&output.stderr)
                ));
            }
        }
        Ok(dir)
    })
    .clone()
}

/// The environment a client no one here wrote runs in, against `host`: the emulator variable,
/// and no lookup of Google's metadata server (nothing leaves the machine).
pub fn client_env(host: &str) -> [(&'static str, String); 3] {
    [
        ("DATASTORE_EMULATOR_HOST", host.to_owned()),
        ("METADATA_SERVER_DETECTION", "none".to_owned()),
        ("GCE_METADATA_HOST", "127.0.0.1:9".to_owned()),
    ]
}

/// Another client's write: `mutations` (the REST API's JSON) committed straight to the
/// emulator of `backend` over HTTP, bypassing this crate and its rules (the data other
/// programs leave behind). Returns the response body.
pub fn foreign_commit(backend: Backend, mutations: serde_json::Value) -> Result<String, String> {
    let port = emulator(backend).as_ref()?.port;
    let body = serde_json::json!({ "mode": "NON_TRANSACTIONAL", "mutations": mutations });
    let body = body.to_string();
    let address = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let mut stream = TcpStream::connect_timeout(&address, Duration::from_secs(2))
        .map_err(|e| format!("cannot reach the emulator: {e}"))?;
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let request = format!(
        "POST /v1/projects/{PROJECT}:commit HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream
        .write_all(request.as_bytes())
        .map_err(|e| format!("cannot send the commit: {e}"))?;
    let response = read_response(&mut stream);
    match response.split_once("\r\n\r\n") {
        Some((head, body)) if head.starts_with("HTTP/1.1 200") => Ok(body.to_owned()),
        _ => Err(format!("the emulator refused the commit: {response}")),
    }
}

/// An HTTP response, read up to the end of its body (by its `Content-Length`, or until the
/// server closes: the Firestore emulator keeps the connection open despite `close`).
fn read_response(stream: &mut TcpStream) -> String {
    let mut bytes = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        let text = String::from_utf8_lossy(&bytes);
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length = head.lines().find_map(|line| {
                let (name, value) = line.split_once(':')?;
                name.eq_ignore_ascii_case("content-length")
                    .then(|| value.trim().parse::<usize>().ok())?
            });
            if length.is_some_and(|n| body.len() >= n) {
                return text.into_owned();
            }
        }
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return String::from_utf8_lossy(&bytes).into_owned(),
            Ok(n) => bytes.extend_from_slice(&buf[..n]),
        }
    }
}

/// The test binary's `Db::open` store: one file, shared by its tests (each in a namespace of
/// its own), unlinked as soon as it is open so nothing is left behind.
fn file_db() -> &'static Db {
    static FILE: OnceLock<Db> = OnceLock::new();
    FILE.get_or_init(|| {
        let path = std::env::temp_dir().join(format!(
            "datastore-entity-conformance-{}.redb",
            std::process::id()
        ));
        let _ = std::fs::remove_file(&path);
        // Commits reach the file's tables every 4 KiB logged, not every 16 MiB: the suite
        // reads the tables and the log together (`backend/embedded/logged.rs`).
        let engine =
            datastore_entity::backend::embedded::Embedded::open_checkpointing_every(&path, 4096)
                .expect("a new file opens");
        let db = Db::with_backend(std::sync::Arc::new(engine));
        std::fs::remove_file(&path).expect("the open file can be unlinked");
        db
    })
}

/// A handle on `backend`, in a namespace of its own for the test `test`; `None` when the
/// backend's emulator is not installed and this is not CI (the reason is printed).
pub async fn db(backend: Backend, test: &str) -> Option<Db> {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let mut namespace: String = test
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
        .take(80)
        .collect();
    namespace = format!("{namespace}-{n}");
    let root = match backend {
        Backend::Embedded => Db::in_memory(),
        Backend::File => file_db().clone(),
        Backend::Server => Db::cloud_builder(PROJECT)
            .endpoint(format!("http://{}", server_host()))
            .build()
            .await
            .expect("the server is up"),
        emulated => match emulator(emulated) {
            Ok(emulator) => Db::cloud_builder(PROJECT)
                .endpoint(format!("http://127.0.0.1:{}", emulator.port))
                .build()
                .await
                .expect("the emulator is up"),
            Err(reason) if std::env::var_os("CI").is_some() => {
                panic!("CI runs every conformance test on {emulated:?}, but: {reason}")
            }
            Err(reason) => {
                static SAID: OnceLock<()> = OnceLock::new();
                SAID.get_or_init(|| {
                    eprintln!("skipping the {emulated:?} conformance tests: {reason}")
                });
                return None;
            }
        },
    };
    Some(root.namespace(&namespace).expect("a valid namespace"))
}

/// One conformance test's context: the handle, in the test's namespace, and which backend
/// it is (for the few answers where Google's two emulators differ).
#[derive(Debug, Clone)]
pub struct Ctx {
    /// The handle.
    pub db: Db,
    /// The backend.
    pub backend: Backend,
}

/// Declares every conformance test of `$suite` for one backend: `conformance!(Backend::X)`.
#[macro_export]
macro_rules! conformance {
    ($backend:expr; $($test:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $test() {
                if let Some(db) = $crate::harness::db($backend, stringify!($test)).await {
                    $crate::conformance::$test($crate::harness::Ctx { db, backend: $backend }).await;
                }
            }
        )*
    };
}
