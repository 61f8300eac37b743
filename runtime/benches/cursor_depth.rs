//! The next page costs the same however deep its cursor is (R-Q3): the embedded engine
//! resumes from the cursor's position instead of skipping the rows before it.
//!
//! `cargo bench -p datastore-entity --bench cursor_depth` prints one row per depth, all in
//! one process; compare them as ratios against depth 0.
#![allow(missing_docs)]

use datastore_entity::prelude::*;

#[derive(Entity, Clone)]
struct Item {
    #[key]
    id: KeyId,
    rank: i64,
}

const ENTITIES: i64 = 10_000;
const PAGE: usize = 20;

fn main() {
    divan::main();
}

/// One page of 20 after a cursor that sits `depth` results into a 10,000-entity query.
#[divan::bench(args = [0, 1_000, 5_000, 9_900])]
fn page_after_cursor(bencher: divan::Bencher, depth: usize) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let db = Db::in_memory();
    let items: Vec<Item> = (1..=ENTITIES)
        .map(|i| Item {
            id: KeyId::new(i).expect("positive"),
            rank: (i * 7919) % ENTITIES,
        })
        .collect();
    let query = || db.query::<Item>().order(Item::RANK.asc());
    let cursor = runtime.block_on(async {
        db.put_chunked(&items).await.expect("put");
        if depth == 0 {
            return None;
        }
        query()
            .limit(depth)
            .keys_only()
            .fetch()
            .await
            .expect("skip")
            .next
    });
    bencher.bench_local(|| {
        runtime.block_on(async {
            let page = query()
                .start_after(cursor.clone())
                .limit(PAGE)
                .fetch()
                .await
                .expect("page");
            assert_eq!(page.items.len(), PAGE);
            page
        })
    });
}
