//! Thirty clients at once against `datastore-entity-server` and the other local Datastores,
//! over gRPC, each server in a process of its own and started as its users start it: the
//! other Rust emulator (`datastore-emulator` on crates.io, in memory), Google's Firestore
//! emulator in Datastore mode and Google's legacy Datastore emulator (without
//! `--require_indexes`, so that it builds the indexes queries need). Four workloads, a bench
//! per server each:
//!
//! - `single_inserts`: each client puts 20 orders, one call each;
//! - `lookups`: each client gets 20 orders by key, one call each, of 10,000 stored;
//! - `batch_writes`: each client puts 4 batches of 50;
//! - `composite_queries`: each client runs 10 `customer = ? ORDER BY total_cents DESC LIMIT
//!   20` over 10,000 orders of 5 customers, the query production serves from a composite
//!   index (none declared to any server).
//!
//! Divan times one round of the 30 clients (the same operations on every server: the ratio of
//! two times is the inverse ratio of their throughputs). After the rounds each bench prints
//! the server's own processor time per operation (user + system, from `/proc`, the client's
//! not included), counted in ticks of 10 ms: 30 rounds for the two Rust servers (whose round
//! costs them tens of milliseconds), 5 for Google's emulators. One round runs before the
//! measured ones (the emulators' JIT warms up; the server builds the composite index the
//! query needs on its first use).
//!
//! ```sh
//! cargo build --release -p datastore-entity-server
//! cargo install datastore-emulator --version 0.1.14 --locked --root target/peers   # needs protoc (protobuf-compiler)
//! cargo bench -p datastore-entity-benches --bench servers_under_load
//! ```
#![allow(missing_docs)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use datastore_entity::prelude::*;
use datastore_entity_benches::process::{self, Stopped, cpu_seconds};
use datastore_entity_benches::{CUSTOMERS, Order, order, runtime};
use datastore_entity_tests::harness::{self, Backend, Emulator};
use divan::Bencher;
use futures_util::future::try_join_all;

fn main() {
    divan::main();
}

const CLIENTS: usize = 30;
/// Orders stored before the lookups and the queries.
const STORED: i64 = 10_000;
const SINGLE_PUTS: i64 = 20;
const LOOKUPS: i64 = 20;
const BATCHES: i64 = 4;
const BATCH: i64 = 50;
const QUERIES: i64 = 10;
const PAGE: usize = 20;

/// A server under test, stopped when dropped.
struct Running {
    host: String,
    /// Whose processor time counts: a process of ours, or the processes that name the port
    /// (an emulator's launcher and its `java`).
    pid: Option<u32>,
    port: u16,
    _process: Process,
}

enum Process {
    Child(#[allow(dead_code)] Stopped),
    Emulator(#[allow(dead_code)] Emulator),
}

#[derive(Debug, Clone, Copy)]
enum Target {
    Server,
    OtherRustEmulator,
    FirestoreEmulator,
    LegacyEmulator,
}

impl Running {
    fn start(target: Target) -> Running {
        match target {
            Target::Server => {
                // As its users start it: it builds the composite indexes queries need (the
                // Firestore emulator answers them without one declared).
                let (child, host) = process::server(&[]);
                let port = host.rsplit(':').next().and_then(|p| p.parse().ok());
                Running {
                    pid: Some(child.id()),
                    port: port.expect("a port"),
                    host,
                    _process: Process::Child(Stopped(child)),
                }
            }
            Target::OtherRustEmulator => {
                let binary = Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("../target/peers/bin/datastore-emulator");
                assert!(
                    binary.exists(),
                    "install the other Rust emulator first: cargo install datastore-emulator \
                     --version 0.1.14 --locked --root target/peers (it needs protoc)"
                );
                let port = harness::free_port().expect("a free port");
                let host = format!("127.0.0.1:{port}");
                let child = Command::new(binary)
                    .args(["--host-port", &host])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .expect("the other Rust emulator starts");
                let started = Instant::now();
                while std::net::TcpStream::connect(&host).is_err() {
                    assert!(started.elapsed() < Duration::from_secs(30), "it listens");
                    std::thread::sleep(Duration::from_millis(20));
                }
                Running {
                    pid: Some(child.id()),
                    port,
                    host,
                    _process: Process::Child(Stopped(child)),
                }
            }
            Target::FirestoreEmulator | Target::LegacyEmulator => {
                let backend = match target {
                    Target::FirestoreEmulator => Backend::Firestore,
                    _ => Backend::Datastore,
                };
                let emulator =
                    Emulator::start_as_users_run_it(backend).expect("the emulator starts");
                Running {
                    host: format!("127.0.0.1:{}", emulator.port),
                    pid: None,
                    port: emulator.port,
                    _process: Process::Emulator(emulator),
                }
            }
        }
    }

    fn cpu_seconds(&self) -> f64 {
        cpu_seconds(self.port, self.pid)
    }
}

#[derive(Debug, Clone, Copy)]
enum Workload {
    SingleInserts,
    Lookups,
    BatchWrites,
    CompositeQueries,
}

impl Workload {
    fn needs_stored(self) -> bool {
        matches!(self, Workload::Lookups | Workload::CompositeQueries)
    }

    /// The calls one round makes.
    fn operations(self) -> u64 {
        let each = match self {
            Workload::SingleInserts => SINGLE_PUTS,
            Workload::Lookups => LOOKUPS,
            Workload::BatchWrites => BATCHES,
            Workload::CompositeQueries => QUERIES,
        };
        (CLIENTS as i64 * each) as u64
    }

    /// One round: every client's calls, the clients at once.
    async fn round(self, clients: &[Db], next_id: &AtomicI64) -> Result<(), Error> {
        let each = clients.iter().enumerate().map(|(c, db)| async move {
            match self {
                Workload::SingleInserts => {
                    for _ in 0..SINGLE_PUTS {
                        db.put(&order(next_id.fetch_add(1, Ordering::Relaxed)))
                            .await?;
                    }
                }
                Workload::Lookups => {
                    for j in 0..LOOKUPS {
                        let id = (c as i64 * 7_919 + j * 104_729) % STORED + 1;
                        let key = Order::key(KeyId::new(id).expect("positive"));
                        db.get(&key).await?.expect("stored");
                    }
                }
                Workload::BatchWrites => {
                    for _ in 0..BATCHES {
                        let first = next_id.fetch_add(BATCH, Ordering::Relaxed);
                        let batch: Vec<Order> = (first..first + BATCH).map(order).collect();
                        db.put_many(&batch).await?;
                    }
                }
                Workload::CompositeQueries => {
                    for j in 0..QUERIES {
                        let customer = format!("customer-{}", (c as i64 + j) % CUSTOMERS);
                        let page = db
                            .query::<Order>()
                            .filter(Order::CUSTOMER.eq(customer))
                            .order(Order::TOTAL_CENTS.desc())
                            .limit(PAGE)
                            .fetch()
                            .await?;
                        assert_eq!(page.items.len(), PAGE);
                        assert!(
                            page.items
                                .windows(2)
                                .all(|w| w[0].total_cents >= w[1].total_cents),
                            "in order"
                        );
                    }
                }
            }
            Ok::<(), Error>(())
        });
        try_join_all(each).await.map(drop)
    }
}

/// Thirty clients of `host`, each with a connection of its own.
async fn clients(host: &str) -> Vec<Db> {
    let mut clients = Vec::with_capacity(CLIENTS);
    for _ in 0..CLIENTS {
        let db = Db::cloud_builder("bench")
            .endpoint(format!("http://{host}"))
            .build()
            .await
            .expect("the server answers");
        clients.push(db);
    }
    clients
}

/// The stored orders, in batches of 500.
async fn store(db: &Db) {
    let orders: Vec<Order> = (1..=STORED).map(order).collect();
    for batch in orders.chunks(500) {
        db.put_many(batch).await.expect("stored");
    }
}

fn run(bencher: Bencher, target: Target, workload: Workload) {
    let runtime = runtime();
    let running = Running::start(target);
    let clients = runtime.block_on(clients(&running.host));
    if workload.needs_stored() {
        runtime.block_on(store(&clients[0]));
    }
    let next_id = AtomicI64::new(STORED + 1);
    runtime
        .block_on(workload.round(&clients, &next_id))
        .expect("a first round");
    let rounds = AtomicU64::new(0);
    let before = running.cpu_seconds();
    bencher.bench_local(|| {
        runtime
            .block_on(workload.round(&clients, &next_id))
            .expect("a round");
        rounds.fetch_add(1, Ordering::Relaxed);
    });
    let spent = running.cpu_seconds() - before;
    let operations = rounds.load(Ordering::Relaxed) * workload.operations();
    eprintln!(
        "\n{target:?} {workload:?}: the server's processor time {:.1} µs per operation \
         ({spent:.2} s over {operations} operations)",
        spent * 1e6 / operations.max(1) as f64
    );
    drop(clients);
    drop(running);
}

macro_rules! servers {
    ($($module:ident: $workload:expr;)*) => {
        $(
            mod $module {
                use super::*;

                #[divan::bench(sample_count = 30, sample_size = 1)]
                fn server(bencher: Bencher) {
                    run(bencher, Target::Server, $workload);
                }

                #[divan::bench(sample_count = 30, sample_size = 1)]
                fn other_rust_emulator(bencher: Bencher) {
                    run(bencher, Target::OtherRustEmulator, $workload);
                }

                #[divan::bench(sample_count = 5, sample_size = 1)]
                fn firestore_emulator(bencher: Bencher) {
                    run(bencher, Target::FirestoreEmulator, $workload);
                }

                #[divan::bench(sample_count = 5, sample_size = 1)]
                fn legacy_emulator(bencher: Bencher) {
                    run(bencher, Target::LegacyEmulator, $workload);
                }
            }
        )*
    };
}

servers! {
    single_inserts: Workload::SingleInserts;
    lookups: Workload::Lookups;
    batch_writes: Workload::BatchWrites;
    composite_queries: Workload::CompositeQueries;
}
