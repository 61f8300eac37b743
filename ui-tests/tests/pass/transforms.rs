// Issue #29: every transform compiles on the property types it allows, and one array of them
// mixes kinds and properties.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Doc {
    #[key]
    id: KeyName,
    count: i64,
    ratio: f64,
    maybe: Option<i64>,
    numbers: Vec<i64>,
    words: Vec<String>,
    #[exclude_from_index]
    at: Timestamp,
    #[exclude_from_index]
    seen: Option<Timestamp>,
}

async fn all(db: &Db, key: &Key<Doc>) -> Result<Vec<Value>, Error> {
    db.transform(
        key,
        [
            Doc::COUNT.increment(1),
            Doc::COUNT.maximum(10),
            Doc::RATIO.minimum(0.5),
            Doc::MAYBE.increment(-1),
            Doc::NUMBERS.append_missing(vec![1, 2]),
            Doc::WORDS.remove_all(vec!["x".to_owned()]),
            Doc::AT.request_time(),
            Doc::SEEN.request_time(),
        ],
    )
    .await
}

use datastore_entity::Value;

fn main() {
    let _ = all;
}
