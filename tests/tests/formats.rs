//! Golden tests of every byte format that names stored data (`core/src/format/`, and the
//! stored form of entities, `core/src/model/stored.rs`): fixed inputs are written through
//! the public API and what lands in storage — names, property layouts, cursor text, and every
//! table of a `Db::open` file — is compared with `tests/golden/formats.txt`.
//!
//! A difference here means data written by an earlier version is no longer found: each entry
//! says what it would orphan. Change a format only on purpose, with a migration (and a new
//! `FORMAT` marker for the file); then regenerate with `GOLDEN=overwrite cargo test -p
//! datastore-entity-tests --test formats` and review the diff.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use datastore_entity::backend::{Mask, Mutation, QuerySpec, ResultShape};
use datastore_entity::prelude::*;
use datastore_entity::{Annotations, PartitionId, Property, PropertyMap, Value};
use redb::{ReadableDatabase as _, ReadableTable as _, TableHandle as _};

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(index(author, -score))]
struct Article {
    #[key]
    slug: KeyName,
    author: String,
    score: i64,
    tags: Vec<String>,
    #[exclude_from_index]
    body: String,
    #[index(monotonic)]
    at: Timestamp,
    #[sharded(3)]
    likes: i64,
    #[sharded_index(4)]
    published: Timestamp,
    place: Option<Place>,
    link: Option<Key<Article>>,
    ratio: f64,
    flag: bool,
    raw: Blob,
    geo: GeoPoint,
}

#[derive(Entity, Debug, Clone, PartialEq)]
struct Place {
    city: String,
}

#[derive(Entity, Debug, Clone, PartialEq)]
struct Note {
    #[key]
    id: KeyId,
}

#[derive(Entity, Debug, Clone, PartialEq)]
#[replicated(2)]
struct Config {
    #[key]
    name: KeyName,
    banner: String,
}

/// What each golden entry orphans when it changes.
const MEANING: &[(&str, &str)] = &[
    (
        "scattered",
        "every key named with KeyName::scattered: the same natural name now makes another key",
    ),
    (
        "shard",
        "every #[sharded] counter: its shards are no longer found, its total reads 0",
    ),
    (
        "replica",
        "every #[replicated] entity's replicas: reads fall back to the entity, and the old replicas stay behind",
    ),
    (
        "companion",
        "every #[sharded_index] value: queries through it skip or misorder the entities written before",
    ),
    (
        "cursor",
        "every cursor users kept (web pages' next links): it is refused or resumes elsewhere",
    ),
    (
        "file",
        "every Db::open file: its entities, indexes or ids are unreadable or silently wrong",
    ),
];

fn article(slug: &str, author: &str, score: i64) -> Article {
    Article {
        slug: KeyName::new(slug).unwrap(),
        author: author.into(),
        score,
        tags: vec!["a".into(), "b".into()],
        body: "text".into(),
        at: Timestamp::from_micros(1_700_000_000_000_000),
        likes: 0,
        published: Timestamp::from_micros(1_700_000_000_000_000 + score),
        place: Some(Place {
            city: "Paris".into(),
        }),
        link: Some(Article::key(KeyName::new("other").unwrap())),
        ratio: 0.5,
        flag: true,
        raw: Blob::from(vec![0, 255]),
        geo: GeoPoint::new(48.85, 2.35).unwrap(),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// The key names of every entity of `kind` in `db`'s default namespace, by the raw backend.
async fn names_of(db: &Db, kind: &str) -> Vec<String> {
    let spec = QuerySpec {
        partition: PartitionId::default(),
        kind: kind.to_owned(),
        shape: ResultShape::KeysOnly,
        ..QuerySpec::default()
    };
    let batch = db.backend().run_query(&spec, None).await.unwrap();
    batch
        .results
        .iter()
        .map(|r| r.key.name().unwrap_or_default().to_owned())
        .collect()
}

/// Everything the fixed inputs store, as `name = value` entries.
async fn observed(dir: &std::path::Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    out.insert(
        "scattered Customer1".into(),
        KeyName::scattered("Customer1").unwrap().as_str().to_owned(),
    );

    // Names, companion values and cursors, in memory (counter shards hold random counts).
    let db = Db::in_memory();
    let articles = [article("intro", "ann", 3), article("next", "ann", 5)];
    db.put_many(&articles).await.unwrap();
    let key = Article::key(KeyName::new("intro").unwrap());
    // Increments pick a shard at random: go on until each of the 3 exists.
    for _ in 0..200 {
        Article::increment_likes(&db, &key, 1).await.unwrap();
        if names_of(&db, "Article.likes.shard").await.len() == 3 {
            break;
        }
    }
    for (i, name) in names_of(&db, "Article.likes.shard")
        .await
        .iter()
        .enumerate()
    {
        out.insert(format!("shard {i}"), name.clone());
    }
    let config = Config {
        name: KeyName::new("site").unwrap(),
        banner: "hello".into(),
    };
    db.put(&config).await.unwrap();
    for (i, name) in names_of(&db, "Config.replica").await.iter().enumerate() {
        out.insert(format!("replica {i}"), name.clone());
    }
    let raw = key.raw().clone().with_partition(PartitionId::default());
    let stored = db.backend().lookup(&[raw], None).await.unwrap();
    let properties = stored[0].as_ref().expect("the article is stored");
    match &properties["published_sharded"].value {
        Value::String(s) => out.insert("companion published_sharded".into(), s.clone()),
        other => panic!("a companion value is a string, found {other:?}"),
    };
    let page = db.query::<Article>().limit(1).fetch().await.unwrap();
    out.insert("cursor kind scan".into(), page.next.unwrap().to_string());
    let page = db
        .query::<Article>()
        .filter(Article::AUTHOR.eq("ann"))
        .order(Article::SCORE.desc())
        .limit(1)
        .fetch()
        .await
        .unwrap();
    out.insert(
        "cursor composite index".into(),
        page.next.unwrap().to_string(),
    );
    let page = db
        .query::<Article>()
        .filter(Article::TAGS.is_in(["a", "b"]))
        .limit(1)
        .fetch()
        .await
        .unwrap();
    out.insert(
        "cursor merged branches".into(),
        page.next.unwrap().to_string(),
    );
    let page = Article::query_by_published(&db)
        .limit(1)
        .fetch()
        .await
        .unwrap();
    out.insert(
        "cursor sharded index".into(),
        page.next.unwrap().to_string(),
    );

    // A file written by fixed, deterministic calls.
    let path = dir.join("golden.redb");
    {
        let db = Db::open(&path).unwrap();
        db.put_many(&articles).await.unwrap();
        db.put(&config).await.unwrap();
        db.put(&Note {
            id: KeyId::new(7).unwrap(),
        })
        .await
        .unwrap();
        db.reserve_ids(&[Note::key(KeyId::new(9).unwrap())])
            .await
            .unwrap();
        // What another client wrote beside values: a meaning, an array's elements' own.
        let annotated = PropertyMap::from([
            (
                "z",
                Property {
                    value: Value::Blob(b"x\x9c".to_vec().into()),
                    excluded: true,
                    annotations: Annotations::Meaning(22),
                },
            ),
            (
                "lines",
                Property {
                    value: Value::Array(vec![Value::String("a".into()), Value::String("b".into())]),
                    excluded: false,
                    annotations: Annotations::Elements(vec![(15, true), (0, false)].into()),
                },
            ),
        ]);
        let raw = Note::key(KeyId::new(8).unwrap())
            .into_raw()
            .with_partition(PartitionId::default());
        let mutation = Mutation::Upsert(raw, annotated, Mask::Whole);
        db.backend().commit(vec![mutation], None).await.unwrap();
        // The first query of a type declares its composite index: a table, and a meta entry.
        db.query::<Article>()
            .filter(Article::AUTHOR.eq("ann"))
            .order(Article::SCORE.desc())
            .fetch()
            .await
            .unwrap();
    }

    // Every table of the file, entry by entry.
    let file = redb::Database::open(&path).unwrap();
    let read = file.begin_read().unwrap();
    let mut tables: Vec<String> = read
        .list_tables()
        .unwrap()
        .map(|t| t.name().to_owned())
        .collect();
    tables.sort();
    for name in tables {
        let definition = redb::TableDefinition::<&[u8], &[u8]>::new(&name);
        let table = read.open_table(definition).unwrap();
        let mut entries = String::new();
        for entry in table.iter().unwrap() {
            let (k, v) = entry.unwrap();
            let _ = write!(entries, "\n    {}", rendered(&name, k.value(), v.value()));
        }
        out.insert(format!("file table {name}"), entries);
    }
    out
}

fn render(entries: &BTreeMap<String, String>) -> String {
    entries
        .iter()
        .map(|(k, v)| format!("{k} = {v}\n"))
        .collect()
}

#[tokio::test]
async fn stored_formats_match_their_golden_bytes() {
    let dir = std::env::temp_dir().join(format!("formats-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let observed = observed(&dir).await;
    std::fs::remove_dir_all(&dir).unwrap();
    let golden_path = concat!(env!("CARGO_MANIFEST_DIR"), "/golden/formats.txt");
    if std::env::var("GOLDEN").as_deref() == Ok("overwrite") {
        std::fs::write(golden_path, render(&observed)).unwrap();
        return;
    }
    let golden = std::fs::read_to_string(golden_path).expect("tests/golden/formats.txt");
    let mut expected = BTreeMap::new();
    let mut current: Option<(String, String)> = None;
    for line in golden.lines() {
        if let Some(entry) = line.strip_prefix("    ") {
            if let Some((_, value)) = current.as_mut() {
                value.push_str("\n    ");
                value.push_str(entry);
            }
            continue;
        }
        if let Some((k, v)) = current.take() {
            expected.insert(k, v);
        }
        if let Some((k, v)) = line
            .split_once(" = ")
            .or_else(|| line.strip_suffix(" =").map(|k| (k, "")))
        {
            current = Some((k.to_owned(), v.to_owned()));
        }
    }
    if let Some((k, v)) = current {
        expected.insert(k, v);
    }
    let mut changed = Vec::new();
    for name in expected.keys().chain(observed.keys()) {
        if expected.get(name) != observed.get(name) && !changed.contains(name) {
            changed.push(name.clone());
        }
    }
    let report: Vec<String> = changed
        .iter()
        .map(|name| {
            let meaning = MEANING
                .iter()
                .find(|(prefix, _)| name.starts_with(prefix))
                .map_or("stored data", |(_, m)| m);
            format!(
                "- `{name}` changed; this orphans {meaning}\n  expected: {}\n  found:    {}",
                expected.get(name).map_or("(nothing)", String::as_str),
                observed.get(name).map_or("(nothing)", String::as_str),
            )
        })
        .collect();
    assert!(
        changed.is_empty(),
        "a stored format changed:\n{}\n(regenerate with GOLDEN=overwrite only if the change is \
         deliberate and migrated)",
        report.join("\n")
    );
    assert!(
        expected.len() > 15,
        "the golden file holds too little to guard anything"
    );
}

/// An entry of a file's table as the golden file pins it: `key => value` in hex, except what
/// a write's time decides, checked here and named instead — an entity's times (after its
/// stored form: created, then updated, microseconds) with the checksum sealing them, and the
/// last commit's time in the meta table.
fn rendered(table: &str, key: &[u8], value: &[u8]) -> String {
    let plausible = |micros: i64| {
        let now = Timestamp::now().as_micros();
        (now - 86_400_000_000..=now + 60_000_000).contains(&micros)
    };
    let micros = |b: &[u8]| i64::from_le_bytes(b.try_into().unwrap());
    let value = match table {
        "entities" => {
            let form = &value[..value.len() - 20];
            let times = &value[value.len() - 20..value.len() - 4];
            let (created, updated) = (micros(&times[..8]), micros(&times[8..]));
            assert!(
                plausible(created) && plausible(updated) && created <= updated,
                "the times of entity {}: {created}, {updated}",
                hex(key)
            );
            format!("{} +times +checksum", hex(form))
        }
        "meta" if key == b"clock" => {
            let clock = i64::from_be_bytes(value.try_into().unwrap());
            assert!(plausible(clock), "the last commit's time: {clock}");
            "+time".to_owned()
        }
        // The file's identity: 16 random bytes, written when it is first opened.
        "meta" if key == b"identity" => {
            assert_eq!(value.len(), 16, "an identity of 16 bytes");
            "+random".to_owned()
        }
        _ => hex(value),
    };
    format!("{} => {value}", hex(key))
}

/// A table's entries: (key, value) pairs, in bytes.
type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// The `file table` sections of a golden file: table name → entries.
fn file_tables(golden: &str) -> BTreeMap<String, Entries> {
    let unhex = |s: &str| -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    };
    let mut tables = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in golden.lines() {
        if let Some(name) = line.strip_prefix("file table ") {
            let name = name.trim_end().trim_end_matches(" =").to_owned();
            tables.insert(name.clone(), Vec::new());
            current = Some(name);
        } else if let Some(entry) = line.strip_prefix("    ")
            && let Some(table) = &current
        {
            let (k, v) = entry.split_once(" =>").unwrap();
            let entries: &mut Entries = tables.get_mut(table).unwrap();
            entries.push((unhex(k.trim()), unhex(v.trim())));
        } else {
            current = None;
        }
    }
    tables
}

/// A file of an earlier format — before checksums (format 1, `tests/golden/format1.txt`), or
/// before entities kept their times (format 2, `tests/golden/format2.txt`) — is migrated when
/// it is opened, and then reads as before; its tables become exactly today's golden ones.
#[tokio::test]
async fn a_file_of_an_earlier_format_is_migrated_on_open_and_reads_as_before() {
    for (format, golden) in [
        (1, include_str!("../golden/format1.txt")),
        (2, include_str!("../golden/format2.txt")),
    ] {
        migrated(format, golden).await;
    }
}

async fn migrated(format: u8, golden: &str) {
    let dir = std::env::temp_dir().join(format!(
        "datastore-entity-format{format}-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("old.redb");
    let _ = std::fs::remove_file(&path);
    let old = file_tables(golden);
    assert!(
        old.len() >= 5,
        "the format-{format} golden tables are there"
    );
    {
        let file = redb::Database::create(&path).unwrap();
        let write = file.begin_write().unwrap();
        for (name, entries) in &old {
            let mut table = write
                .open_table(redb::TableDefinition::<&[u8], &[u8]>::new(name))
                .unwrap();
            for (k, v) in entries {
                table.insert(k.as_slice(), v.as_slice()).unwrap();
            }
        }
        write.commit().unwrap();
    }
    {
        let db = Db::open(&path).unwrap();
        let intro = db
            .get_versioned(&Article::key(KeyName::new("intro").unwrap()))
            .await
            .unwrap()
            .expect("kept");
        assert_eq!(intro.entity.author, "ann");
        assert_eq!(intro.entity.score, 3);
        // Migrated entities take the migration's time as their create and update time.
        assert!(intro.version > 0 && intro.create_time == intro.update_time);
        let config = db
            .get(&Config::key(KeyName::new("site").unwrap()))
            .await
            .unwrap()
            .expect("kept");
        assert_eq!(config.banner, "hello");
        assert!(
            db.get(&Note::key(KeyId::new(7).unwrap()))
                .await
                .unwrap()
                .is_some()
        );
        // The composite index table, migrated too, still answers.
        assert_eq!(scores_of_ann(&db).await, [5, 3]);
    }
    let now = include_str!("../golden/formats.txt");
    let file = redb::Database::open(&path).unwrap();
    let read = file.begin_read().unwrap();
    let names = now
        .lines()
        .filter_map(|line| line.strip_prefix("file table "))
        .map(|header| header.trim_end().trim_end_matches(" ="));
    for name in names {
        let table = match read.open_table(redb::TableDefinition::<&[u8], &[u8]>::new(name)) {
            Ok(table) => table,
            // A table is made by its first write: the log, empty today, by the first commit.
            Err(redb::TableError::TableDoesNotExist(_)) => {
                assert!(table_lines(now, name).is_empty(), "table {name} is missing");
                continue;
            }
            Err(e) => panic!("table {name}: {e}"),
        };
        let found: Vec<String> = table
            .iter()
            .unwrap()
            .map(|e| {
                let (k, v) = e.unwrap();
                rendered(name, k.value(), v.value())
            })
            .collect();
        let expected: Vec<&str> = table_lines(now, name)
            .into_iter()
            // The last commit's time: written by the first commit, and none was made here.
            .filter(|line| !line.starts_with("636c6f636b =>"))
            // Note 8, with annotations, which earlier formats could not hold.
            .filter(|line| !line.contains(ANNOTATED_NOTE))
            .collect();
        let found: Vec<&str> = found.iter().map(String::as_str).collect();
        assert_eq!(
            found, expected,
            "table {name} of a format-{format} file after migration"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A file of format 3 (before commits were logged) or 4 (before annotations) has the tables of
/// format 5 with nothing logged and no annotation: opening it marks it format 5 and reads
/// everything as before; a binary of format 3 or 4 refuses a file of format 5 by the same mark,
/// since its log may hold commits its tables do not have yet, and its stored forms annotations
/// it would read as corrupt.
#[tokio::test]
async fn a_file_of_format_3_or_4_is_marked_on_open_and_reads_as_before() {
    for format in [3, 4] {
        marked(format).await;
    }
}

async fn marked(old: u8) {
    let dir = std::env::temp_dir().join(format!(
        "datastore-entity-format{old}-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("three.redb");
    let _ = std::fs::remove_file(&path);
    let meta = redb::TableDefinition::<&[u8], &[u8]>::new("meta");
    let mark = |path: &std::path::Path, format: &[u8]| {
        let file = redb::Database::create(path).unwrap();
        let write = file.begin_write().unwrap();
        write
            .open_table(meta)
            .unwrap()
            .insert(&b"format"[..], format)
            .unwrap();
        write.commit().unwrap();
    };
    {
        let db = Db::open(&path).unwrap();
        db.put_many(&[article("intro", "ann", 3), article("next", "ann", 5)])
            .await
            .unwrap();
    }
    mark(&path, format!("datastore-entity embedded {old}").as_bytes());
    {
        let db = Db::open(&path).unwrap();
        assert_eq!(scores_of_ann(&db).await, [5, 3]);
    }
    let file = redb::Database::open(&path).unwrap();
    let read = file.begin_read().unwrap();
    let format = read
        .open_table(meta)
        .unwrap()
        .get(&b"format"[..])
        .unwrap()
        .unwrap()
        .value()
        .to_vec();
    assert_eq!(format, b"datastore-entity embedded 5");
    drop((read, file));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Ann's articles' scores, read through the composite index `(author, -score)`.
async fn scores_of_ann(db: &Db) -> Vec<i64> {
    db.query::<Article>()
        .filter(Article::AUTHOR.eq("ann"))
        .order(Article::SCORE.desc())
        .fetch()
        .await
        .unwrap()
        .items
        .iter()
        .map(|a| a.score)
        .collect()
}

/// The entry lines of table `name` in a golden file, as written.
/// The key path of the entity with annotations in the golden file (`Note` 8), in hex.
const ANNOTATED_NOTE: &str = "4e6f7465000110800000000000000800";

fn table_lines<'g>(golden: &'g str, name: &str) -> Vec<&'g str> {
    let header = format!("file table {name} =");
    golden
        .lines()
        .skip_while(|line| line.trim_end() != header)
        .skip(1)
        .map_while(|line| line.strip_prefix("    "))
        .collect()
}

/// An existing file of 0 bytes (a truncated database) is an error, not a new, empty database.
#[test]
fn an_empty_file_is_refused_not_taken_for_a_new_database() {
    let path = std::env::temp_dir().join(format!("datastore-entity-empty-{}", std::process::id()));
    std::fs::write(&path, b"").unwrap();
    match Db::open(&path) {
        Err(datastore_entity::Error::Storage { reason, .. }) => {
            assert!(reason.contains("empty (0 bytes)"), "{reason}")
        }
        other => panic!("{:?}", other.map(|_| ())),
    }
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 0, "left as it was");
    std::fs::remove_file(&path).unwrap();
    // A path where no file exists is a new database.
    Db::open(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
}
