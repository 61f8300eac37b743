//! A test suite's workload through Google's Python client (`server/clients/bench_workload.py`:
//! 1,000 puts, 1,000 gets, 100 queries), start-up included, against `datastore-entity-server`
//! (in memory, started in this process) and against Google's two emulators (started by the
//! conformance harness: free loopback port, own process group, killed after each run). And
//! the memory each holds after one million small entities (written through this crate's
//! cloud backend in batches of 500): the server's process against the Firestore emulator's.
//!
//! `cargo bench -p datastore-entity-benches --bench server_vs_emulators` (needs Python's
//! clients in `target/ndb-venv`, which the tests install, and both emulators).
#![allow(missing_docs)]

use std::path::Path;
use std::process::Command;

use datastore_entity::prelude::*;
use datastore_entity_benches::process::{cpu_seconds, resident_mib};
use datastore_entity_benches::{order, process, runtime};
use datastore_entity_server::{Options, Server};
use datastore_entity_tests::harness::{self, Backend, Emulator};
use divan::Bencher;

fn main() {
    divan::main();
}

/// The Python workload against `host`.
fn workload(host: &str) {
    let python = harness::ndb_python().expect("Python's clients (target/ndb-venv)");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../server/clients/bench_workload.py");
    let output = Command::new(python)
        .arg(script)
        .arg("bench")
        .envs(harness::client_env(host))
        .output()
        .expect("python runs");
    assert!(
        output.status.success(),
        "the workload failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[divan::bench(sample_count = 5, sample_size = 1)]
fn server(bencher: Bencher) {
    let runtime = runtime();
    bencher.bench_local(|| {
        let before = cpu_seconds(0, Some(std::process::id()));
        let server = runtime.block_on(Server::start(Options {
            port: 0,
            ..Options::default()
        }));
        let server = server.expect("the server starts");
        workload(&server.emulator_host());
        runtime.block_on(server.stop());
        let spent = cpu_seconds(0, Some(std::process::id())) - before;
        eprintln!("the server's processor time: {spent:.2} s");
    });
}

fn emulator(bencher: Bencher, backend: Backend) {
    bencher.bench_local(|| {
        let emulator = Emulator::start(backend).expect("the emulator starts");
        workload(&format!("127.0.0.1:{}", emulator.port));
        let spent = cpu_seconds(emulator.port, None);
        eprintln!("the emulator's processor time: {spent:.2} s");
        drop(emulator);
    });
}

#[divan::bench(sample_count = 3, sample_size = 1)]
fn firestore_emulator(bencher: Bencher) {
    emulator(bencher, Backend::Firestore);
}

#[divan::bench(sample_count = 3, sample_size = 1)]
fn datastore_emulator(bencher: Bencher) {
    emulator(bencher, Backend::Datastore);
}

/// Small entities written for the memory measurement.
const MILLION: i64 = 1_000_000;

/// One million small orders through the cloud backend, in batches of 500.
async fn load(host: &str) {
    let db = Db::cloud_builder("memory")
        .endpoint(format!("http://{host}"))
        .build()
        .await
        .expect("the target answers");
    let mut batch = Vec::with_capacity(500);
    for i in 1..=MILLION {
        batch.push(order(i));
        if batch.len() == 500 {
            db.put_many(&batch).await.expect("put_many");
            batch.clear();
        }
    }
}

#[divan::bench(sample_count = 1, sample_size = 1)]
fn million_into_the_server(bencher: Bencher) {
    million_into_a_server(bencher, None, &[]);
}

#[divan::bench(sample_count = 1, sample_size = 1)]
fn million_into_the_server_keeping_no_versions(bencher: Bencher) {
    million_into_a_server(bencher, None, &["--keep-versions", "0"]);
}

#[divan::bench(sample_count = 1, sample_size = 1)]
fn million_into_the_server_on_a_file(bencher: Bencher) {
    on_a_file(bencher, &[]);
}

#[divan::bench(sample_count = 1, sample_size = 1)]
fn million_into_the_server_on_a_file_keeping_no_versions(bencher: Bencher) {
    on_a_file(bencher, &["--keep-versions", "0"]);
}

/// A million entities into a server over a new file (its page cache 64 MiB by default).
fn on_a_file(bencher: Bencher, args: &[&str]) {
    let dir = std::env::temp_dir().join(format!("server-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    million_into_a_server(bencher, Some(dir.join("data.redb")), args);
    std::fs::remove_dir_all(&dir).ok();
}

/// A million entities into the server's own process, in memory or over `data`, started with
/// `args`.
fn million_into_a_server(bencher: Bencher, data: Option<std::path::PathBuf>, args: &[&str]) {
    let runtime = runtime();
    bencher.bench_local(|| {
        if let Some(data) = &data {
            let _ = std::fs::remove_file(data);
        }
        let mut flags: Vec<&std::ffi::OsStr> = args.iter().map(std::ffi::OsStr::new).collect();
        if let Some(data) = &data {
            flags.extend([std::ffi::OsStr::new("--data"), data.as_os_str()]);
        }
        let (mut child, host) = process::server(&flags);
        runtime.block_on(load(&host));
        let file = data
            .as_ref()
            .and_then(|d| std::fs::metadata(d).ok())
            .map(|m| format!(", the file {:.0} MiB", m.len() as f64 / 1048576.0))
            .unwrap_or_default();
        eprintln!(
            "\nthe server's resident size after {MILLION} entities ({} {}): {:.0} MiB{file}",
            if data.is_some() {
                "on a file"
            } else {
                "in memory"
            },
            args.join(" "),
            resident_mib(0, Some(child.id()))
        );
        let _ = child.kill();
        let _ = child.wait();
    });
}

#[divan::bench(sample_count = 1, sample_size = 1)]
fn million_into_the_firestore_emulator(bencher: Bencher) {
    let runtime = runtime();
    bencher.bench_local(|| {
        let emulator = Emulator::start(Backend::Firestore).expect("the emulator starts");
        runtime.block_on(load(&format!("127.0.0.1:{}", emulator.port)));
        eprintln!(
            "\nthe Firestore emulator's resident size after {MILLION} entities: {:.0} MiB",
            resident_mib(emulator.port, None)
        );
        drop(emulator);
    });
}

/// Start-up alone: listening (the server, in this process), or answering `GET /` (an
/// emulator, as the harness waits for it), then stopped.
#[divan::bench(sample_count = 20, sample_size = 1)]
fn start_the_server(bencher: Bencher) {
    let runtime = runtime();
    bencher.bench_local(|| {
        let server = runtime.block_on(Server::start(Options {
            port: 0,
            ..Options::default()
        }));
        runtime.block_on(server.expect("the server starts").stop());
    });
}

#[divan::bench(sample_count = 3, sample_size = 1)]
fn start_the_firestore_emulator(bencher: Bencher) {
    bencher.bench_local(|| drop(Emulator::start(Backend::Firestore).expect("the emulator starts")));
}
