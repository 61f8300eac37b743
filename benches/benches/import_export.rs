//! Loading a managed export (what `gcloud datastore export` writes) into a local Datastore:
//! `datastore-entity-server` against Google's legacy Datastore emulator, the one of Google's
//! that imports (`POST /v1/projects/{p}:import` with the export's `inputUrl`), each in a
//! process of its own. The export — `ENTITIES` orders of 12 properties, 100,000 unless
//! `IMPORT_ENTITIES` says — is written once by the server's own export and read by both.
//! Divan times the import call; each run prints the server's peak resident size (`VmHWM`).
//!
//! ```sh
//! cargo build --release -p datastore-entity-server
//! IMPORT_ENTITIES=100000 cargo bench -p datastore-entity-benches --bench import_export
//! ```
#![allow(missing_docs)]

use std::path::PathBuf;
use std::sync::OnceLock;

use datastore_entity::prelude::*;
use datastore_entity_benches::process::{self, Stopped, peak_mib, post_json};
use datastore_entity_benches::{order, runtime};
use datastore_entity_server::{Options, Server};
use datastore_entity_tests::harness::{Backend, Emulator};
use divan::Bencher;

fn main() {
    divan::main();
    let _ = std::fs::remove_dir_all(scratch());
}

fn scratch() -> PathBuf {
    std::env::temp_dir().join(format!("import-bench-{}", std::process::id()))
}

fn entities() -> i64 {
    std::env::var("IMPORT_ENTITIES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(100_000)
}

/// The export's overall metadata file, written once: the orders put into a server in this
/// process, exported with `:export`.
fn export() -> &'static str {
    static OVERALL: OnceLock<String> = OnceLock::new();
    OVERALL.get_or_init(|| {
        let runtime = runtime();
        runtime.block_on(async {
            let server = Server::start(Options {
                port: 0,
                ..Options::default()
            })
            .await
            .expect("the server starts");
            let db = Db::cloud_builder("source")
                .endpoint(format!("http://{}", server.emulator_host()))
                .build()
                .await
                .expect("a handle");
            let orders: Vec<_> = (1..=entities()).map(order).collect();
            for batch in orders.chunks(500) {
                db.put_many(batch).await.expect("stored");
            }
            let prefix = scratch();
            std::fs::create_dir_all(&prefix).expect("a scratch directory");
            let body = serde_json::json!({ "outputUrlPrefix": prefix }).to_string();
            let port = server.addr().port();
            let (status, answer) = tokio::task::spawn_blocking(move || {
                post_json(port, "/v1/projects/source:export", &body)
            })
            .await
            .expect("the export call");
            assert_eq!(status, 200, "{answer}");
            server.stop().await;
            let json = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b);
            let answer: serde_json::Value = serde_json::from_str(json).expect("JSON");
            let url = answer["response"]["outputUrl"]
                .as_str()
                .expect("its metadata");
            let bytes: u64 = walk(&prefix);
            eprintln!(
                "\nthe export: {} entities, {:.0} MiB",
                entities(),
                bytes as f64 / 1048576.0
            );
            url.to_owned()
        })
    })
}

/// The bytes of the files under `dir`.
fn walk(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| match e.path().is_dir() {
            true => walk(&e.path()),
            false => e.metadata().map_or(0, |m| m.len()),
        })
        .sum()
}

fn import(port: u16) {
    let body = serde_json::json!({ "inputUrl": export() }).to_string();
    let (status, answer) = post_json(port, "/v1/projects/target:import", &body);
    assert_eq!(status, 200, "{answer}");
}

#[divan::bench(sample_count = 3, sample_size = 1)]
fn server_in_memory(bencher: Bencher) {
    export();
    bencher
        .with_inputs(|| process::server(&[]))
        .bench_local_values(|(child, host)| {
            let port = host.rsplit(':').next().and_then(|p| p.parse().ok());
            import(port.expect("a port"));
            eprintln!(
                "\nthe server's peak resident size: {:.0} MiB",
                peak_mib(0, Some(child.id()))
            );
            // Stopped after the measurement, when divan drops it.
            Stopped(child)
        });
}

#[divan::bench(sample_count = 3, sample_size = 1)]
fn legacy_emulator(bencher: Bencher) {
    export();
    bencher
        .with_inputs(|| Emulator::start_as_users_run_it(Backend::Datastore).expect("it starts"))
        .bench_local_values(|emulator| {
            import(emulator.port);
            eprintln!(
                "\nthe legacy emulator's peak resident size: {:.0} MiB",
                peak_mib(emulator.port, None)
            );
            // Stopped after the measurement, when divan drops it.
            emulator
        });
}
