//! The embedded engine against SQLite, side by side in one process: in memory
//! (`Db::in_memory()` vs `:memory:`) and on disk (`Db::open` vs a WAL file with
//! `synchronous = FULL`). Same 12-field rows; SQLite has a secondary index on the queried
//! columns, prepared statements, and one transaction per batch.
//!
//! `cargo bench -p datastore-entity-benches --bench engine_vs_sqlite`
#![allow(missing_docs)]

use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

use datastore_entity::prelude::*;
use datastore_entity_benches::{CUSTOMERS, Order, declared, now, order, sqlite};
use divan::Bencher;
use divan::counter::ItemsCount;
use rusqlite::{Connection, params};

fn main() {
    divan::main();
    let _ = std::fs::remove_dir_all(scratch());
}

/// Where the on-disk stores go (removed at the end).
fn scratch() -> PathBuf {
    std::env::temp_dir().join(format!("datastore-entity-bench-{}", std::process::id()))
}

fn fresh_path(name: &str) -> PathBuf {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let dir = scratch();
    std::fs::create_dir_all(&dir).expect("scratch directory");
    dir.join(format!("{name}-{}", NEXT.fetch_add(1, Ordering::Relaxed)))
}

const BATCH: usize = 500;
const INSERTED: i64 = 100_000;
const PAGE: usize = 100;
const DEEP: usize = 10_000;

fn orders(n: i64) -> Vec<Order> {
    (1..=n).map(order).collect()
}

/// A store of each kind holding `n` orders, built once.
struct Stores {
    memory: Db,
    file: Db,
    sqlite_memory: Mutex<Connection>,
    sqlite_file: Mutex<Connection>,
}

fn stores(n: i64) -> &'static Stores {
    static SIZES: OnceLock<Mutex<Vec<(i64, &'static Stores)>>> = OnceLock::new();
    let sizes = SIZES.get_or_init(|| Mutex::new(Vec::new()));
    let mut sizes = sizes.lock().expect("not poisoned");
    if let Some((_, stores)) = sizes.iter().find(|(size, _)| *size == n) {
        return stores;
    }
    let rows = orders(n);
    let memory = declared(Db::in_memory());
    let file = declared(Db::open(fresh_path("engine.redb")).expect("file opens"));
    let mut sqlite_memory = sqlite::in_memory();
    let mut sqlite_file = sqlite::file(&fresh_path("sqlite.db"));
    for chunk in rows.chunks(BATCH) {
        now(memory.put_many(chunk)).expect("put");
        now(file.put_many(chunk)).expect("put");
        sqlite::insert(&mut sqlite_memory, chunk);
        sqlite::insert(&mut sqlite_file, chunk);
    }
    let stores: &'static Stores = Box::leak(Box::new(Stores {
        memory,
        file,
        sqlite_memory: Mutex::new(sqlite_memory),
        sqlite_file: Mutex::new(sqlite_file),
    }));
    sizes.push((n, stores));
    stores
}

/// 10,000 ids spread over the 100,000 orders, in a scattered order.
fn lookup_ids() -> Vec<i64> {
    (0..10_000_i64)
        .map(|i| (i * 7_919 + 13) % INSERTED + 1)
        .collect()
}

/// The keys of [`lookup_ids`].
fn lookup_keys() -> Vec<Key<Order>> {
    lookup_ids()
        .into_iter()
        .map(|i| Order::key(KeyId::new(i).expect("positive")))
        .collect()
}

/// The engine's page: `customer = ? ORDER BY total DESC LIMIT 100`, after `cursor`.
fn page(db: &Db, customer: String, cursor: Option<Cursor>) -> Page<Order> {
    let page = now(db
        .query::<Order>()
        .filter(Order::CUSTOMER.eq(customer))
        .order(Order::TOTAL_CENTS.desc())
        .start_after(cursor)
        .limit(PAGE)
        .fetch())
    .expect("query");
    assert_eq!(page.items.len(), PAGE);
    page
}

/// The four contenders of one measurement, side by side: `$engine` on `Db::in_memory()`
/// and `Db::open`, `$sql` on SQLite in memory and on a file, each on the stores of
/// `stores(n)` for every `n` in `$sizes`.
macro_rules! four_ways {
    ($engine:ident, $sql:ident, sizes = $sizes:expr) => {
        #[divan::bench(args = $sizes)]
        fn engine_memory(bencher: Bencher, n: i64) {
            $engine(bencher, &stores(n).memory);
        }

        #[divan::bench(args = $sizes)]
        fn sqlite_memory(bencher: Bencher, n: i64) {
            $sql(bencher, &stores(n).sqlite_memory);
        }

        #[divan::bench(args = $sizes)]
        fn engine_file(bencher: Bencher, n: i64) {
            $engine(bencher, &stores(n).file);
        }

        #[divan::bench(args = $sizes)]
        fn sqlite_file(bencher: Bencher, n: i64) {
            $sql(bencher, &stores(n).sqlite_file);
        }
    };
}

mod insert_100k_in_batches_of_500 {
    use super::*;

    fn engine(bencher: Bencher, open: fn() -> Db) {
        bencher
            .counter(ItemsCount::new(INSERTED as usize))
            .with_inputs(|| (open(), orders(INSERTED)))
            .bench_local_values(|(db, rows)| {
                for chunk in rows.chunks(BATCH) {
                    now(db.put_many(chunk)).expect("put");
                }
                db
            });
    }

    fn sql(bencher: Bencher, open: fn() -> Connection) {
        bencher
            .counter(ItemsCount::new(INSERTED as usize))
            .with_inputs(|| (open(), orders(INSERTED)))
            .bench_local_values(|(mut c, rows)| {
                for chunk in rows.chunks(BATCH) {
                    sqlite::insert(&mut c, chunk);
                }
                c
            });
    }

    #[divan::bench(sample_count = 5, sample_size = 1)]
    fn engine_memory(bencher: Bencher) {
        engine(bencher, || declared(Db::in_memory()));
    }

    #[divan::bench(sample_count = 5, sample_size = 1)]
    fn sqlite_memory(bencher: Bencher) {
        sql(bencher, sqlite::in_memory);
    }

    #[divan::bench(sample_count = 5, sample_size = 1)]
    fn engine_file(bencher: Bencher) {
        engine(bencher, || {
            declared(Db::open(fresh_path("insert.redb")).expect("opens"))
        });
    }

    #[divan::bench(sample_count = 5, sample_size = 1)]
    fn sqlite_file(bencher: Bencher) {
        sql(bencher, || sqlite::file(&fresh_path("insert.db")));
    }
}

/// 10,000 lookups of one order, by key / by primary key, on 100,000 orders.
mod get_one {
    use super::*;

    fn engine(bencher: Bencher, db: &Db) {
        let keys = lookup_keys();
        let mut next = keys.iter().cycle();
        bencher.bench_local(|| {
            let key = next.next().expect("cycles");
            now(db.get(key)).expect("get").expect("found")
        });
    }

    fn sql(bencher: Bencher, c: &Mutex<Connection>) {
        let c = c.lock().expect("not poisoned");
        let ids = lookup_ids();
        let mut next = ids.iter().cycle();
        let mut get = c.prepare_cached(sqlite::GET).expect("prepare");
        bencher.bench_local(|| {
            let id = next.next().expect("cycles");
            get.query_row(params![id], sqlite::row).expect("found")
        });
    }

    four_ways!(engine, sql, sizes = [INSERTED]);
}

/// Batches of 100 lookups (`get_many` / the prepared lookup 100 times), on 100,000 orders.
mod get_many_100 {
    use super::*;

    fn engine(bencher: Bencher, db: &Db) {
        let keys = lookup_keys();
        let mut next = keys.chunks(100).cycle();
        bencher.counter(ItemsCount::new(100_usize)).bench_local(|| {
            let batch = next.next().expect("cycles");
            now(db.get_many(batch)).expect("get")
        });
    }

    fn sql(bencher: Bencher, c: &Mutex<Connection>) {
        let c = c.lock().expect("not poisoned");
        let ids = lookup_ids();
        let mut next = ids.chunks(100).cycle();
        let mut get = c.prepare_cached(sqlite::GET).expect("prepare");
        bencher.counter(ItemsCount::new(100_usize)).bench_local(|| {
            let batch = next.next().expect("cycles");
            batch
                .iter()
                .map(|id| get.query_row(params![id], sqlite::row).expect("found"))
                .collect::<Vec<Order>>()
        });
    }

    four_ways!(engine, sql, sizes = [INSERTED]);
}

/// `customer = ? ORDER BY total DESC LIMIT 100`, on stores of 1,000 to 100,000 orders.
mod filter_order_page_100 {
    use super::*;

    fn engine(bencher: Bencher, db: &Db) {
        let mut customer = (0..CUSTOMERS).cycle();
        bencher.bench_local(|| {
            let c = format!("customer-{}", customer.next().expect("cycles"));
            page(db, c, None)
        });
    }

    fn sql(bencher: Bencher, c: &Mutex<Connection>) {
        let c = c.lock().expect("not poisoned");
        let mut page = c.prepare_cached(sqlite::PAGE).expect("prepare");
        let mut customer = (0..CUSTOMERS).cycle();
        bencher.bench_local(|| {
            let name = format!("customer-{}", customer.next().expect("cycles"));
            sqlite::page(&mut page, params![name, PAGE as i64], PAGE)
        });
    }

    four_ways!(engine, sql, sizes = [1_000, 10_000, 100_000]);
}

/// The same query's page after 10,000 results, on 100,000 orders: the engine resumes from a
/// cursor; SQLite from the last row's (total, id) (keyset paging, what a cursor is), or by
/// skipping rows (OFFSET, how SQL usually pages). Compare with `filter_order_page_100` at
/// 100,000.
mod page_100_after_10000 {
    use super::*;

    fn engine(bencher: Bencher, db: &Db) {
        let cursor = now(db
            .query::<Order>()
            .filter(Order::CUSTOMER.eq("customer-1"))
            .order(Order::TOTAL_CENTS.desc())
            .limit(DEEP)
            .keys_only()
            .fetch())
        .expect("skip")
        .next
        .expect("deeper results");
        bencher.bench_local(|| page(db, "customer-1".to_owned(), Some(cursor.clone())));
    }

    /// Keyset paging: after the (total, id) of the 10,000th row.
    fn sql(bencher: Bencher, c: &Mutex<Connection>) {
        let c = c.lock().expect("not poisoned");
        let (total, id) = c
            .query_row(
                "SELECT total_cents, id FROM orders WHERE customer = 'customer-1' \
                 ORDER BY total_cents DESC, id DESC LIMIT 1 OFFSET ?1",
                params![DEEP as i64 - 1],
                |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)),
            )
            .expect("deep row");
        let mut page = c.prepare_cached(sqlite::PAGE_AFTER).expect("prepare");
        bencher.bench_local(|| {
            sqlite::page(
                &mut page,
                params!["customer-1", total, id, PAGE as i64],
                PAGE,
            )
        });
    }

    four_ways!(engine, sql, sizes = [INSERTED]);

    /// OFFSET paging, how SQL usually pages: skips 10,000 rows.
    fn sql_offset(bencher: Bencher, c: &Mutex<Connection>) {
        let c = c.lock().expect("not poisoned");
        let mut page = c.prepare_cached(sqlite::PAGE_OFFSET).expect("prepare");
        bencher.bench_local(|| {
            sqlite::page(
                &mut page,
                params!["customer-1", PAGE as i64, DEEP as i64],
                PAGE,
            )
        });
    }

    #[divan::bench]
    fn sqlite_memory_offset(bencher: Bencher) {
        sql_offset(bencher, &stores(INSERTED).sqlite_memory);
    }

    #[divan::bench]
    fn sqlite_file_offset(bencher: Bencher) {
        sql_offset(bencher, &stores(INSERTED).sqlite_file);
    }
}

/// `customer IN (3 customers) ORDER BY total DESC LIMIT 100` on 100,000 orders (60,000
/// match): the engine merges three index scans and stops after 100 rows; SQLite reads the
/// same index once per value.
mod in_3_customers_order_page_100 {
    use super::*;

    fn engine(bencher: Bencher, db: &Db) {
        let customers = ["customer-1", "customer-2", "customer-3"];
        bencher.bench_local(|| {
            let page = now(db
                .query::<Order>()
                .filter(Order::CUSTOMER.is_in(customers))
                .order(Order::TOTAL_CENTS.desc())
                .limit(PAGE)
                .fetch())
            .expect("query");
            assert_eq!(page.items.len(), PAGE);
            page
        });
    }

    fn sql(bencher: Bencher, c: &Mutex<Connection>) {
        let c = c.lock().expect("not poisoned");
        let mut page = c.prepare_cached(sqlite::PAGE_IN).expect("prepare");
        bencher.bench_local(|| {
            let customers = ["customer-1", "customer-2", "customer-3"];
            sqlite::page(
                &mut page,
                params![customers[0], customers[1], customers[2], PAGE as i64],
                PAGE,
            )
        });
    }

    four_ways!(engine, sql, sizes = [INSERTED]);
}

/// `COUNT(*) WHERE customer = ?` on 100,000 orders (20,000 per customer): counted from index
/// entries on both sides, no row read.
mod count_one_customer {
    use super::*;

    const PER_CUSTOMER: u64 = (INSERTED / CUSTOMERS) as u64;

    fn engine(bencher: Bencher, db: &Db) {
        let mut customer = (0..CUSTOMERS).cycle();
        bencher.bench_local(|| {
            let c = format!("customer-{}", customer.next().expect("cycles"));
            let count = now(db.query::<Order>().filter(Order::CUSTOMER.eq(c)).count());
            assert_eq!(count.expect("count"), PER_CUSTOMER);
        });
    }

    fn sql(bencher: Bencher, c: &Mutex<Connection>) {
        let c = c.lock().expect("not poisoned");
        let mut count = c.prepare_cached(sqlite::COUNT).expect("prepare");
        let mut customer = (0..CUSTOMERS).cycle();
        bencher.bench_local(|| {
            let name = format!("customer-{}", customer.next().expect("cycles"));
            let n: i64 = count.query_row(params![name], |r| r.get(0)).expect("count");
            assert_eq!(n as u64, PER_CUSTOMER);
        });
    }

    four_ways!(engine, sql, sizes = [INSERTED]);
}

/// One entity with an indexed array of 5,000 distinct values (the most one entity level may
/// index, as the Firestore emulator counts R-I5), put and then put again with every value
/// changed, against SQLite inserting (then replacing) the same 5,000 values as rows of an
/// indexed table in one transaction.
mod array_of_5k {
    use super::*;

    #[derive(Entity)]
    struct Bag {
        #[key]
        id: KeyId,
        values: Vec<i64>,
    }

    const VALUES: i64 = datastore_entity::MAX_INDEXED_VALUES as i64;

    fn bag(offset: i64) -> Bag {
        Bag {
            id: KeyId::new(1).expect("valid"),
            values: (0..VALUES).map(|v| v + offset).collect(),
        }
    }

    fn engine(bencher: Bencher, open: fn() -> Db) {
        bencher
            .with_inputs(|| (open(), bag(0), bag(VALUES)))
            .bench_local_values(|(db, first, second)| {
                now(db.put(&first)).expect("put");
                now(db.put(&second)).expect("re-put");
                db
            });
    }

    fn sql(bencher: Bencher, open: fn() -> Connection) {
        bencher
            .with_inputs(|| {
                let c = open();
                c.execute_batch(
                    "CREATE TABLE bag_values (bag INTEGER, value INTEGER);
                     CREATE INDEX bag_values_by_value ON bag_values (value, bag);",
                )
                .expect("schema");
                c
            })
            .bench_local_values(|mut c| {
                for offset in [0, VALUES] {
                    let tx = c.transaction().expect("begins");
                    tx.execute("DELETE FROM bag_values WHERE bag = 1", [])
                        .expect("deletes");
                    {
                        let mut insert = tx
                            .prepare_cached("INSERT INTO bag_values VALUES (1, ?1)")
                            .expect("prepares");
                        for v in 0..VALUES {
                            insert.execute(params![v + offset]).expect("inserts");
                        }
                    }
                    tx.commit().expect("commits");
                }
                c
            });
    }

    #[divan::bench(sample_count = 10, sample_size = 1)]
    fn engine_memory(bencher: Bencher) {
        engine(bencher, Db::in_memory);
    }

    #[divan::bench(sample_count = 10, sample_size = 1)]
    fn sqlite_memory(bencher: Bencher) {
        sql(bencher, sqlite::in_memory);
    }

    #[divan::bench(sample_count = 10, sample_size = 1)]
    fn engine_file(bencher: Bencher) {
        engine(bencher, || Db::open(fresh_path("bag.redb")).expect("opens"));
    }

    #[divan::bench(sample_count = 10, sample_size = 1)]
    fn sqlite_file(bencher: Bencher) {
        sql(bencher, || sqlite::file(&fresh_path("bag.db")));
    }
}
