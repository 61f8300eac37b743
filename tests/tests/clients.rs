//! Issue #30: clients no one here wrote, against `datastore-entity-server` — Google's Python
//! client (`server/clients/datastore_app.py`), NDB (`ndb_app.py`), the Node client
//! (`node_app.js`) and, over the API's REST form, google-api-python-client (`rest_app.py`,
//! issue #51), each doing what an application does and checking the exact answers (the same
//! scripts pass against the Firestore emulator: `rest_app.py` is run on it here) — on a server
//! in memory and on one over a file.
//!
//! In CI (`CI` set) a missing client fails the test; elsewhere it is skipped with the reason.

use std::path::{Path, PathBuf};
use std::process::Command;

use datastore_entity_server::{Options, Server};
use datastore_entity_tests::harness;

fn scripts() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../server/clients")
}

/// A client, or why there is none (a panic in CI).
fn client(found: Result<PathBuf, String>) -> Option<PathBuf> {
    match found {
        Ok(path) => Some(path),
        Err(reason) if std::env::var_os("CI").is_some() => panic!("CI needs the client: {reason}"),
        Err(reason) => {
            eprintln!("skipped: {reason}");
            None
        }
    }
}

/// Runs `program args` in `dir` against `host`; it must print `ok`.
fn run(program: &Path, args: &[&Path], arg: &str, dir: &Path, host: &str) {
    let output = Command::new(program)
        .args(args)
        .arg(arg)
        .current_dir(dir)
        .envs(harness::client_env(host))
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", program.display()));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.trim_end().ends_with("ok"),
        "{} {:?} {arg} failed:\n{stdout}\n{}",
        program.display(),
        args,
        String::from_utf8_lossy(&output.stderr)
    );
}

async fn every_client(data: Option<PathBuf>, project: &str) {
    let server = Server::start(Options {
        port: 0,
        data,
        ..Options::default()
    })
    .await
    .expect("the server starts");
    let host = server.emulator_host();
    let dir = scripts();
    if let Some(python) = client(harness::ndb_python()) {
        run(
            &python,
            &[&dir.join("datastore_app.py")],
            &format!("{project}-py"),
            &dir,
            &host,
        );
        run(
            &python,
            &[&dir.join("ndb_app.py")],
            &format!("{project}-ndb"),
            &dir,
            &host,
        );
        run(
            &python,
            &[&dir.join("rest_app.py")],
            &format!("{project}-rest"),
            &dir,
            &host,
        );
    }
    if let Some(node) = client(harness::node_clients()) {
        let script = node.join("node_app.js");
        std::fs::copy(dir.join("node_app.js"), &script).expect("the Node script");
        run(
            Path::new("node"),
            &[&script],
            &format!("{project}-node"),
            &node,
            &host,
        );
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn googles_clients_work_against_the_server_in_memory() {
    every_client(None, "memory").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn googles_clients_work_against_the_server_on_a_file() {
    let dir = std::env::temp_dir().join(format!("datastore-entity-clients-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    every_client(Some(dir.join("data.redb")), "file").await;
    std::fs::remove_dir_all(&dir).ok();
}

/// The console in a real browser (issue #52): Debian's Chromium, headless, driven by Selenium
/// (`server/clients/console_browser.py`) — each page, an edit read back through Google's
/// Python client with the rest of the entity unchanged, a delete, a query with a binding, a
/// malformed one's position, markup shown as text, an export followed to its end, a write from
/// another origin refused. With
/// `CONSOLE_SCREENSHOTS=DIR` it saves the README's screenshots there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_works_in_a_real_browser() {
    let Some(python) = client(harness::ndb_python()) else {
        return;
    };
    if client(harness::chromium()).is_none() {
        return;
    }
    let server = Server::start(Options {
        port: 0,
        ..Options::default()
    })
    .await
    .expect("the server starts");
    let dir = scripts();
    run(
        &python,
        &[&dir.join("console_browser.py")],
        "console-app",
        &dir,
        &server.emulator_host(),
    );
    server.stop().await;
}

/// The REST application passes against the Firestore emulator's REST form too: its answers
/// are the service's.
#[test]
fn the_rest_application_passes_against_the_firestore_emulator() {
    let Some(python) = client(harness::ndb_python()) else {
        return;
    };
    let host = match harness::emulator_host(harness::Backend::Firestore) {
        Ok(host) => host,
        Err(reason) if std::env::var_os("CI").is_some() => {
            panic!("CI needs the emulator: {reason}")
        }
        Err(reason) => return eprintln!("skipped: {reason}"),
    };
    let dir = scripts();
    run(
        &python,
        &[&dir.join("rest_app.py")],
        "rest-referee",
        &dir,
        &host,
    );
}
