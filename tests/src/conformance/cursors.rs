//! Cursors (R-Q3): paging, text round trips, resuming after writes, end cursors, bad
//! cursors, limits and streams.

use datastore_entity::prelude::*;
use datastore_entity::{Error, Query};

use super::{Row, ids, row};
use crate::harness::{Backend, Ctx};

#[macro_export]
macro_rules! cursors_tests {
    ($backend:expr) => {
        $crate::conformance!($backend;
            cursor_paging_through_120_rows_returns_each_once_in_order,
            cursor_next_is_none_on_the_last_page,
            cursor_round_trips_through_text,
            cursor_resuming_after_concurrent_writes,
            cursor_end_at_stops_the_query,
            cursor_an_altered_cursor_is_invalid,
            cursor_of_another_query,
            cursor_limits,
            cursor_stream_with_and_without_a_limit,
        );
    };
}

/// Rows 1 to 10, ranked 10 to 100.
async fn ten_rows(t: &Ctx) {
    let rows: Vec<Row> = (1..=10)
        .map(|i| row(i, i * 10, if i % 2 == 0 { "even" } else { "odd" }))
        .collect();
    t.db.put_many(&rows).await.unwrap();
}

fn by_rank(t: &Ctx) -> Query<Row> {
    t.db.query::<Row>().order(Row::RANK.asc())
}

/// The ids a query returns, or its error.
async fn run(query: Query<Row>) -> Result<Vec<i64>, Error> {
    query.fetch().await.map(|page| ids(&page.items))
}

pub async fn cursor_paging_through_120_rows_returns_each_once_in_order(t: Ctx) {
    // 37 and 120 are coprime: every rank in 0..120 once, in no relation to the ids.
    let rows: Vec<Row> = (1..=120)
        .map(|i| row(i, (i * 37) % 120, if i % 3 == 0 { "a" } else { "b" }))
        .collect();
    t.db.put_many(&rows).await.unwrap();
    let mut seen = Vec::new();
    let mut sizes = Vec::new();
    let mut cursor: Option<Cursor> = None;
    loop {
        let page =
            t.db.query::<Row>()
                .order(Row::RANK.desc())
                .limit(25)
                .start_after(cursor)
                .fetch()
                .await
                .unwrap();
        sizes.push(page.items.len());
        seen.extend(page.items.iter().map(|r| r.rank));
        cursor = page.next;
        if cursor.is_none() {
            break;
        }
        assert!(sizes.len() < 10, "paging does not end: {sizes:?}");
    }
    assert_eq!(sizes, [25, 25, 25, 25, 20]);
    assert_eq!(seen, (0..120).rev().collect::<Vec<i64>>());
}

pub async fn cursor_next_is_none_on_the_last_page(t: Ctx) {
    ten_rows(&t).await;
    // Exactly two pages of 5: the second is full, and still the last.
    let first = by_rank(&t).limit(5).fetch().await.unwrap();
    assert_eq!(ids(&first.items), [1, 2, 3, 4, 5]);
    let second = by_rank(&t)
        .limit(5)
        .start_after(first.next.expect("five more rows"))
        .fetch()
        .await
        .unwrap();
    assert_eq!(ids(&second.items), [6, 7, 8, 9, 10]);
    assert_eq!(second.next, None);
    // Without a limit, one page holds everything.
    let all = by_rank(&t).fetch().await.unwrap();
    assert_eq!(all.items.len(), 10);
    assert_eq!(all.next, None);
    // A query that matches nothing.
    let none =
        t.db.query::<Row>()
            .filter(Row::GROUP.eq("none"))
            .limit(5)
            .fetch()
            .await
            .unwrap();
    assert!(none.items.is_empty());
    assert_eq!(none.next, None);
}

pub async fn cursor_round_trips_through_text(t: Ctx) {
    ten_rows(&t).await;
    let first = by_rank(&t).limit(3).fetch().await.unwrap();
    let next = first.next.unwrap();
    let text = next.to_string();
    assert!(
        text.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
        "{text}"
    );
    let parsed: Cursor = text.parse().unwrap();
    assert_eq!(parsed, next);
    assert_eq!(parsed.as_bytes(), next.as_bytes());
    assert_eq!(
        run(by_rank(&t).limit(3).start_after(parsed)).await.unwrap(),
        [4, 5, 6]
    );
    assert!(matches!(
        "not a cursor!".parse::<Cursor>(),
        Err(Error::InvalidCursor { .. })
    ));
}

pub async fn cursor_resuming_after_concurrent_writes(t: Ctx) {
    ten_rows(&t).await;
    let first = by_rank(&t).limit(4).fetch().await.unwrap();
    assert_eq!(ids(&first.items), [1, 2, 3, 4]);
    // Behind the cursor: a new row ranked 15, and row 8 moved to 5: neither is returned.
    // Ahead of it: a new row ranked 45, row 2 moved to 55 (returned a second time), and row
    // 6 deleted.
    t.db.put_many(&[row(11, 15, "new"), row(12, 45, "new"), row(8, 5, "moved")])
        .await
        .unwrap();
    t.db.put(&row(2, 55, "moved")).await.unwrap();
    t.db.delete(&Row::key(KeyId::new(6).unwrap()))
        .await
        .unwrap();
    let rest = run(by_rank(&t).start_after(first.next)).await.unwrap();
    assert_eq!(rest, [12, 5, 2, 7, 9, 10]);
}

pub async fn cursor_end_at_stops_the_query(t: Ctx) {
    ten_rows(&t).await;
    let first = by_rank(&t).limit(4).fetch().await.unwrap();
    let after_4 = first.next.unwrap();
    let second = by_rank(&t)
        .limit(3)
        .start_after(after_4.clone())
        .fetch()
        .await
        .unwrap();
    assert_eq!(ids(&second.items), [5, 6, 7]);
    let after_7 = second.next.unwrap();
    assert_eq!(
        run(by_rank(&t).end_at(after_4.clone())).await.unwrap(),
        [1, 2, 3, 4]
    );
    assert_eq!(
        run(by_rank(&t)
            .start_after(after_4.clone())
            .end_at(after_7.clone()))
        .await
        .unwrap(),
        [5, 6, 7]
    );
    // A limit inside the window still applies.
    let limited = by_rank(&t).end_at(after_7).limit(2).fetch().await.unwrap();
    assert_eq!(ids(&limited.items), [1, 2]);
    assert!(limited.next.is_some());
    // Rows written inside the window are returned, after it not.
    t.db.put_many(&[row(11, 25, "new"), row(12, 75, "new")])
        .await
        .unwrap();
    assert_eq!(
        run(by_rank(&t).end_at(after_4)).await.unwrap(),
        [1, 2, 11, 3, 4]
    );
}

/// `bytes` as cursor text (URL-safe base64 without padding).
fn cursor_of(bytes: &[u8]) -> Cursor {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut text = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..=chunk.len() {
            text.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    text.parse().unwrap()
}

pub async fn cursor_an_altered_cursor_is_invalid(t: Ctx) {
    ten_rows(&t).await;
    let next = by_rank(&t).limit(3).fetch().await.unwrap().next.unwrap();
    let bytes = next.as_bytes();
    // Cut in half, and a few bytes that are no cursor at all: the service cannot read them
    // ("Error parsing protocol message"), which is a bad cursor, not a bad query.
    let mut results = Vec::new();
    for altered in [cursor_of(&bytes[..bytes.len() / 2]), cursor_of(&[0, 0, 0])] {
        results.push(run(by_rank(&t).start_after(altered.clone())).await);
        results.push(run(by_rank(&t).end_at(altered)).await);
    }
    assert!(
        results
            .iter()
            .all(|r| matches!(r, Err(Error::InvalidCursor { .. }))),
        "{:?}: {results:?}",
        t.backend
    );
}

pub async fn cursor_of_another_query(t: Ctx) {
    ten_rows(&t).await;
    // After rows 1, 2, 3 (ranks 10, 20, 30) of the query ordered by rank.
    let next = by_rank(&t).limit(3).fetch().await.unwrap().next.unwrap();
    let descending = t.db.query::<Row>().order(Row::RANK.desc());
    let descending = run(descending.start_after(next.clone())).await;
    let filtered = by_rank(&t).filter(Row::GROUP.eq("even"));
    let filtered = run(filtered.start_after(next.clone())).await;
    let by_key = run(t.db.query::<Row>().start_after(next.clone())).await;
    let by_group = t.db.query::<Row>().order(Row::GROUP.asc());
    let by_group = run(by_group.start_after(next.clone())).await;
    let other =
        t.db.namespace(&format!("{}.other", t.db.partition().namespace))
            .unwrap();
    other
        .put_many(&[
            row(1, 10, "g"),
            row(2, 20, "g"),
            row(3, 30, "g"),
            row(4, 40, "g"),
        ])
        .await
        .unwrap();
    let other_namespace = other.query::<Row>().order(Row::RANK.asc());
    let other_namespace = run(other_namespace.start_after(next.clone())).await;
    // The keys-only form of the same query shares its cursors, everywhere.
    let keys = by_rank(&t)
        .keys_only()
        .start_after(next.clone())
        .fetch()
        .await
        .unwrap();
    assert_eq!(keys.items.len(), 7);
    assert_eq!(keys.items[0].id().unwrap().get(), 4);
    // A cursor without the query's sort value is refused by all.
    assert!(
        matches!(by_key, Err(Error::InvalidCursor { .. })),
        "{:?}: {by_key:?}",
        t.backend
    );
    match t.backend {
        // Stricter than the service, deliberately (R-Q3): a cursor belongs to its query, so
        // one of another query (or namespace) is refused instead of resuming somewhere.
        Backend::Embedded | Backend::File | Backend::Server => {
            for other in [&descending, &filtered, &by_group, &other_namespace] {
                assert!(
                    matches!(other, Err(Error::InvalidCursor { .. })),
                    "{other:?}"
                );
            }
        }
        // The emulators' cursors hold a position (rank 30, row 3), not the query: another
        // direction or another filter resumes from that position (descending, row 3
        // included). The legacy emulator refuses an order on another property, and ignores
        // the namespace the cursor came from.
        Backend::Datastore => {
            assert_eq!(descending.unwrap(), [3, 2, 1]);
            assert_eq!(filtered.unwrap(), [4, 6, 8, 10]);
            assert!(
                matches!(by_group, Err(Error::InvalidCursor { .. })),
                "{by_group:?}"
            );
            assert_eq!(other_namespace.unwrap(), [3, 4]);
        }
        // Firestore in Datastore mode returns every row for an order on another property,
        // and refuses a cursor of another namespace.
        Backend::Firestore => {
            assert_eq!(descending.unwrap(), [3, 2, 1]);
            assert_eq!(filtered.unwrap(), [4, 6, 8, 10]);
            assert_eq!(by_group.unwrap(), [2, 4, 6, 8, 10, 1, 3, 5, 7, 9]);
            assert!(
                matches!(other_namespace, Err(Error::InvalidCursor { .. })),
                "{other_namespace:?}"
            );
        }
    }
}

pub async fn cursor_limits(t: Ctx) {
    ten_rows(&t).await;
    // A limit of 0: no rows, and a cursor that resumes where the page started.
    let zero = by_rank(&t).limit(0).fetch().await.unwrap();
    assert!(zero.items.is_empty());
    let resume = zero.next.expect("more rows follow an empty page");
    assert_eq!(
        run(by_rank(&t).start_after(resume)).await.unwrap(),
        (1..=10).collect::<Vec<_>>()
    );
    // A limit of exactly the rows, and one larger: one page, the last.
    for limit in [10, 11, 1_000] {
        let page = by_rank(&t).limit(limit).fetch().await.unwrap();
        assert_eq!(ids(&page.items), (1..=10).collect::<Vec<_>>());
        assert_eq!(page.next, None, "limit {limit}");
    }
    let one = by_rank(&t).limit(1).fetch().await.unwrap();
    assert_eq!(ids(&one.items), [1]);
    assert!(one.next.is_some());
}

pub async fn cursor_stream_with_and_without_a_limit(t: Ctx) {
    // More rows than a stream asks for per page (300).
    let rows: Vec<Row> = (1..=350).map(|i| row(i, (i * 11) % 350, "g")).collect();
    t.db.put_many(&rows).await.unwrap();
    let all: Vec<Row> = by_rank(&t).stream().try_collect().await.unwrap();
    assert_eq!(
        all.iter().map(|r| r.rank).collect::<Vec<_>>(),
        (0..350).collect::<Vec<i64>>()
    );
    let capped: Vec<Row> = by_rank(&t).limit(320).stream().try_collect().await.unwrap();
    assert_eq!(
        capped.iter().map(|r| r.rank).collect::<Vec<_>>(),
        (0..320).collect::<Vec<i64>>()
    );
    let few: Vec<Row> =
        t.db.query::<Row>()
            .limit(7)
            .stream()
            .try_collect()
            .await
            .unwrap();
    assert_eq!(ids(&few), [1, 2, 3, 4, 5, 6, 7]);
    // A stream starting after a cursor.
    let first = by_rank(&t).limit(340).fetch().await.unwrap();
    let tail: Vec<Row> = by_rank(&t)
        .start_after(first.next)
        .stream()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(
        tail.iter().map(|r| r.rank).collect::<Vec<_>>(),
        (340..350).collect::<Vec<i64>>()
    );
}
