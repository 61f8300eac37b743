//! What the benchmarks share: the entity they store (12 fields, the same struct for the
//! engine, SQLite and serde_json), its rows, and SQLite set up the way a careful user would
//! (secondary index on the queried columns, prepared statements, one transaction per batch).
//!
//! Run them all with `cargo bench -p datastore-entity-benches`; `BENCHMARKS.md` has the
//! commands, the machine and the ratios.
#![allow(missing_docs)]

pub mod wire;

use std::future::Future;

use datastore_entity::prelude::*;
use futures_util::FutureExt as _;
use serde::{Deserialize, Serialize};

/// An order: 12 fields. Following R-I1, only the properties its queries use are indexed
/// (customer, status, total); SQLite gets a secondary index on the same columns.
#[derive(Entity, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[entity(index(customer, -total_cents))]
pub struct Order {
    #[key]
    #[serde(with = "key_id")]
    pub id: KeyId,
    pub customer: String,
    pub status: String,
    pub total_cents: i64,
    #[exclude_from_index]
    pub currency: String,
    #[exclude_from_index]
    pub items: i64,
    #[exclude_from_index]
    pub discount: f64,
    #[exclude_from_index]
    pub paid: bool,
    #[exclude_from_index]
    #[serde(with = "micros")]
    pub created: Timestamp,
    #[exclude_from_index]
    pub note: String,
    #[exclude_from_index]
    pub tags: Vec<String>,
    #[exclude_from_index]
    pub shipping: Option<String>,
}

mod key_id {
    use datastore_entity::KeyId;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(crate) fn serialize<S: Serializer>(id: &KeyId, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_i64(id.get())
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<KeyId, D::Error> {
        KeyId::new(i64::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

mod micros {
    use datastore_entity::Timestamp;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(crate) fn serialize<S: Serializer>(t: &Timestamp, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_i64(t.as_micros())
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Timestamp, D::Error> {
        Ok(Timestamp::from_micros(i64::deserialize(d)?))
    }
}

/// How many customers the orders belong to: each has a fifth of them.
pub const CUSTOMERS: i64 = 5;

/// Order number `i` (from 1): customer `i % 5`, a total that does not follow the id.
pub fn order(i: i64) -> Order {
    Order {
        id: KeyId::new(i).expect("orders are numbered from 1"),
        customer: format!("customer-{}", i % CUSTOMERS),
        status: ["new", "paid", "shipped"][(i % 3) as usize].to_owned(),
        total_cents: (i * 7_919) % 100_000,
        currency: "EUR".to_owned(),
        items: i % 7 + 1,
        discount: (i % 10) as f64 / 100.0,
        paid: i % 2 == 0,
        created: Timestamp::from_micros(1_700_000_000_000_000 + i * 1_000_000),
        note: format!("order number {i}, leave at the door"),
        tags: vec!["gift".to_owned(), format!("batch-{}", i % 13)],
        shipping: (i % 4 == 0).then(|| "express".to_owned()),
    }
}

/// Runs a future of the embedded engine, which answers when called: no runtime is needed
/// (as in an application, where `.await` costs one poll), so none is measured.
pub fn now<F: Future>(future: F) -> F::Output {
    future
        .now_or_never()
        .expect("the embedded engine answers without waiting")
}

/// A `Db` that knows `Order`'s declared composite index before the first write, as an
/// application's does after its first query: every write then maintains it, as SQLite's
/// writes maintain its index.
pub fn declared(db: Db) -> Db {
    now(db.query::<Order>().limit(1).keys_only().fetch()).expect("a first query");
    db
}

/// A tokio runtime on the machine's two cores, for the benchmarks that wait on a network or
/// on injected latency.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime")
}

/// SQLite, set up for the same data.
pub mod sqlite {
    use super::Order;
    use rusqlite::{Connection, params};

    /// The table and the secondary index on the queried columns.
    pub const SCHEMA: &str = "
        CREATE TABLE orders (
            id INTEGER PRIMARY KEY,
            customer TEXT NOT NULL,
            status TEXT NOT NULL,
            total_cents INTEGER NOT NULL,
            currency TEXT NOT NULL,
            items INTEGER NOT NULL,
            discount REAL NOT NULL,
            paid INTEGER NOT NULL,
            created INTEGER NOT NULL,
            note TEXT NOT NULL,
            tags TEXT NOT NULL,
            shipping TEXT
        );
        CREATE INDEX orders_customer_total ON orders (customer, total_cents DESC);
        CREATE INDEX orders_status ON orders (status);";

    pub const INSERT: &str =
        "INSERT OR REPLACE INTO orders VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)";
    pub const GET: &str = "SELECT * FROM orders WHERE id = ?1";
    pub const PAGE: &str =
        "SELECT * FROM orders WHERE customer = ?1 ORDER BY total_cents DESC, id DESC LIMIT ?2";
    /// The first page of three customers' orders, largest first.
    pub const PAGE_IN: &str = "SELECT * FROM orders WHERE customer IN (?1, ?2, ?3) \
        ORDER BY total_cents DESC, id DESC LIMIT ?4";
    /// How many orders one customer has.
    pub const COUNT: &str = "SELECT COUNT(*) FROM orders WHERE customer = ?1";
    /// The next page after (total, id): keyset paging, what a cursor is.
    pub const PAGE_AFTER: &str = "SELECT * FROM orders WHERE customer = ?1 \
        AND (total_cents < ?2 OR (total_cents = ?2 AND id < ?3)) \
        ORDER BY total_cents DESC, id DESC LIMIT ?4";
    /// The next page after skipping rows: how SQL usually pages.
    pub const PAGE_OFFSET: &str = "SELECT * FROM orders WHERE customer = ?1 \
        ORDER BY total_cents DESC, id DESC LIMIT ?2 OFFSET ?3";

    /// An in-memory database with the schema.
    pub fn in_memory() -> Connection {
        let c = Connection::open_in_memory().expect("sqlite opens");
        c.execute_batch(SCHEMA).expect("schema");
        c
    }

    /// A database in `path` (WAL, and `synchronous = FULL`: a commit is on disk when it
    /// returns, as a `Db::open` commit is).
    pub fn file(path: &std::path::Path) -> Connection {
        let _ = std::fs::remove_file(path);
        let c = Connection::open(path).expect("sqlite opens");
        c.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;")
            .expect("pragmas");
        c.execute_batch(SCHEMA).expect("schema");
        c
    }

    /// Inserts `orders` in one transaction, with the prepared insert.
    pub fn insert(c: &mut Connection, orders: &[Order]) {
        let tx = c.transaction().expect("begin");
        {
            let mut insert = tx.prepare_cached(INSERT).expect("prepare");
            for o in orders {
                insert
                    .execute(params![
                        o.id.get(),
                        o.customer,
                        o.status,
                        o.total_cents,
                        o.currency,
                        o.items,
                        o.discount,
                        o.paid,
                        o.created.as_micros(),
                        o.note,
                        o.tags.join("\u{1f}"),
                        o.shipping,
                    ])
                    .expect("insert");
            }
        }
        tx.commit().expect("commit");
    }

    /// Runs a prepared page query: exactly `expected` rows, each read back as an `Order`.
    pub fn page(
        statement: &mut rusqlite::CachedStatement<'_>,
        params: impl rusqlite::Params,
        expected: usize,
    ) -> Vec<Order> {
        let rows: Vec<Order> = statement
            .query_map(params, row)
            .expect("query")
            .map(|r| r.expect("row"))
            .collect();
        assert_eq!(rows.len(), expected);
        rows
    }

    /// A row back as an `Order`, every column read.
    pub fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Order> {
        Ok(Order {
            id: datastore_entity::KeyId::new(r.get(0)?).expect("positive"),
            customer: r.get(1)?,
            status: r.get(2)?,
            total_cents: r.get(3)?,
            currency: r.get(4)?,
            items: r.get(5)?,
            discount: r.get(6)?,
            paid: r.get(7)?,
            created: datastore_entity::Timestamp::from_micros(r.get(8)?),
            note: r.get(9)?,
            tags: r
                .get::<_, String>(10)?
                .split('\u{1f}')
                .map(str::to_owned)
                .collect(),
            shipping: r.get(11)?,
        })
    }
}

/// The servers the benchmarks start as processes of their own, and what those processes
/// spend (read from `/proc`).
pub mod process {
    use std::io::{BufRead, BufReader};
    use std::path::Path;
    use std::process::{Child, Command, Stdio};

    /// `datastore-entity-server`'s release binary started with `--port 0` and `args`, and
    /// the `host:port` it says it listens on.
    pub fn server(args: &[&std::ffi::OsStr]) -> (Child, String) {
        let binary =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/release/datastore-entity-server");
        assert!(
            binary.exists(),
            "build the server first: cargo build --release -p datastore-entity-server"
        );
        let mut child = Command::new(&binary)
            .args(["--port", "0"])
            .args(args)
            .stdout(Stdio::piped())
            .spawn()
            .expect("the server starts");
        let stdout = child.stdout.take().expect("its output");
        let mut lines = BufReader::new(stdout).lines();
        let host = lines
            .by_ref()
            .map_while(Result::ok)
            .find_map(|l| {
                l.split("DATASTORE_EMULATOR_HOST=")
                    .nth(1)
                    .map(str::to_owned)
            })
            .expect("the server says where it listens");
        // Read on, so the server's later lines have somewhere to go.
        std::thread::spawn(move || lines.for_each(drop));
        (child, host)
    }

    /// A child process, killed when dropped.
    pub struct Stopped(pub Child);

    impl Drop for Stopped {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    /// POSTs `body` (JSON) to `path` on loopback port `port` and reads the whole answer: its
    /// HTTP status and text.
    pub fn post_json(port: u16, path: &str, body: &str) -> (u16, String) {
        use std::io::{Read, Write};
        let mut stream =
            std::net::TcpStream::connect(("127.0.0.1", port)).expect("the server listens");
        let request = format!(
            "POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(request.as_bytes()).expect("sent");
        // Read until the body is whole (by its length, or its last chunk): the legacy
        // emulator keeps the connection open.
        let mut bytes = Vec::new();
        let mut buffer = [0; 8192];
        while !datastore_entity_tests::harness::http_response_whole(&bytes) {
            match stream.read(&mut buffer) {
                Ok(0) | Err(_) => break,
                Ok(n) => bytes.extend_from_slice(&buffer[..n]),
            }
        }
        let answer = String::from_utf8_lossy(&bytes).into_owned();
        let status = answer
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        (status, answer)
    }

    /// The peak resident size, in MiB, of `pid`, or of every process whose command line
    /// names `--port=PORT` (the largest of them: an emulator's `java`).
    pub fn peak_mib(port: u16, pid: Option<u32>) -> f64 {
        let kib = processes(port, pid)
            .iter()
            .map(|path| {
                let status = std::fs::read_to_string(path.join("status")).unwrap_or_default();
                status
                    .lines()
                    .find_map(|l| l.strip_prefix("VmHWM:"))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
                    .unwrap_or(0)
            })
            .max()
            .unwrap_or(0);
        kib as f64 / 1024.0
    }

    /// Processor time (user and system, in seconds) of `pid`, or of every process whose command
    /// line names `--port=PORT` (an emulator's wrapper and its `java`).
    pub fn cpu_seconds(port: u16, pid: Option<u32>) -> f64 {
        processes(port, pid)
            .iter()
            .map(|path| {
                let stat = std::fs::read_to_string(path.join("stat")).unwrap_or_default();
                // After the command's closing parenthesis: state, then fields 4…; utime and
                // stime are fields 14 and 15, in clock ticks (100 a second on Linux).
                let fields: Vec<&str> = stat
                    .rsplit_once(')')
                    .map_or(Vec::new(), |(_, rest)| rest.split_whitespace().collect());
                let tick = |i: usize| {
                    fields
                        .get(i)
                        .and_then(|f| f.parse::<f64>().ok())
                        .unwrap_or(0.0)
                };
                (tick(11) + tick(12)) / 100.0
            })
            .sum()
    }

    /// The `/proc` directories of `pid`, or of the processes whose command line names
    /// `--port=PORT` or `--port PORT`.
    fn processes(port: u16, pid: Option<u32>) -> Vec<std::path::PathBuf> {
        let mut found = Vec::new();
        for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
            let path = entry.path();
            let Some(this) = path
                .file_name()
                .and_then(|n| n.to_str()?.parse::<u32>().ok())
            else {
                continue;
            };
            let cmdline = std::fs::read(path.join("cmdline")).unwrap_or_default();
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            let named = cmdline.contains(&format!("--port={port}"))
                || cmdline.contains(&format!("--port {port}"));
            if pid == Some(this) || (pid.is_none() && named) {
                found.push(path);
            }
        }
        found
    }

    /// The resident size, in MiB, of `pid`, or of every process whose command line names
    /// `--port=PORT` (an emulator's wrapper and its `java`).
    pub fn resident_mib(port: u16, pid: Option<u32>) -> f64 {
        let kib: u64 = processes(port, pid)
            .iter()
            .map(|path| {
                let status = std::fs::read_to_string(path.join("status")).unwrap_or_default();
                status
                    .lines()
                    .find_map(|l| l.strip_prefix("VmRSS:"))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
                    .unwrap_or(0)
            })
            .sum();
        kib as f64 / 1024.0
    }
}
