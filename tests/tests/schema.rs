//! What the derive generates beyond keys and conversions: projections (R-Q2), declared
//! indexes and the files that deploy them (R-I2), the index-entry limit (R-I5), and enums and
//! newtypes as property values.

use std::path::{Path, PathBuf};
use std::process::Command;

use datastore_entity::prelude::*;
use datastore_entity::{Direction, Error, MAX_INDEX_ENTRIES, MAX_INDEXED_VALUES, Value};
use datastore_entity_tests::{
    Account, Article, ArticleCard, Call, Instrumented, Post, PostCard, Priority, SiteConfig,
    Status, TagRow, account, account_key,
};

fn post(account: &Key<Account>, title: &str, author: &str, tags: &[&str]) -> Post {
    Post {
        account: account.clone(),
        id: None,
        title: title.into(),
        author: author.into(),
        published: Timestamp::from_micros(1),
        tags: tags.iter().map(|t| (*t).to_owned()).collect(),
        body: "…".into(),
        location: None,
    }
}

async fn blog(db: &Db) -> Key<Account> {
    let ann = db.put(&account("ann")).await.unwrap();
    db.put_many(&[
        post(&ann, "b-second", "ann", &["rust", "db"]),
        post(&ann, "a-first", "bob", &["go"]),
        post(&ann, "c-third", "ann", &[]),
    ])
    .await
    .unwrap();
    ann
}

#[tokio::test]
async fn projections_return_exactly_their_fields() {
    // R-Q2
    let db = Db::in_memory();
    blog(&db).await;
    let cards = db
        .query::<Post>()
        .project::<PostCard>()
        .order(Post::TITLE.asc())
        .fetch()
        .await
        .unwrap();
    assert_eq!(
        cards.items,
        [("a-first", "bob"), ("b-second", "ann"), ("c-third", "ann")]
            .map(|(title, author)| PostCard {
                title: title.into(),
                author: author.into()
            })
            .to_vec()
    );
    // Filters and orders are allowed; the page has a cursor like any other.
    let page = db
        .query::<Post>()
        .filter(Post::TITLE.gt("a-first"))
        .order(Post::TITLE.desc())
        .project::<PostCard>()
        .limit(1)
        .fetch()
        .await
        .unwrap();
    assert_eq!(page.items[0].title, "c-third");
    let rest: Vec<PostCard> = db
        .query::<Post>()
        .filter(Post::TITLE.gt("a-first"))
        .order(Post::TITLE.desc())
        .project::<PostCard>()
        .start_after(page.next)
        .stream()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(rest.len(), 1);
    assert_eq!(rest[0].title, "b-second");
}

#[tokio::test]
async fn projecting_an_array_gives_one_row_per_element() {
    let db = Db::in_memory();
    blog(&db).await;
    let rows: Vec<TagRow> = db
        .query::<Post>()
        .project::<TagRow>()
        .stream()
        .try_collect()
        .await
        .unwrap();
    // Ordered by the projected values; the post without tags has no row.
    let rows: Vec<(String, String)> = rows.into_iter().map(|r| (r.tags, r.title)).collect();
    assert_eq!(
        rows,
        [("db", "b-second"), ("go", "a-first"), ("rust", "b-second")]
            .map(|(t, p)| (t.to_owned(), p.to_owned()))
            .to_vec()
    );
}

#[tokio::test]
async fn streams_start_where_the_query_says() {
    let db = Db::in_memory();
    blog(&db).await;
    let first = db
        .query::<Post>()
        .order(Post::TITLE.asc())
        .limit(1)
        .fetch()
        .await
        .unwrap();
    let titles: Vec<String> = db
        .query::<Post>()
        .order(Post::TITLE.asc())
        .start_after(first.next.clone())
        .stream()
        .map_ok(|p| p.title)
        .try_collect()
        .await
        .unwrap();
    assert_eq!(titles, ["b-second", "c-third"]);
    let keys: Vec<Key<Post>> = db
        .query::<Post>()
        .order(Post::TITLE.asc())
        .start_after(first.next)
        .keys_only()
        .stream()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(keys.len(), 2);
}

#[tokio::test]
async fn enums_and_newtypes_are_stored_as_their_values_and_filter_by_type() {
    let db = Db::in_memory();
    let articles = [
        ("draft", Status::Draft, 1),
        ("review", Status::InReview, 2),
        ("live", Status::Published, 3),
    ];
    for (slug, status, priority) in articles {
        db.put(&Article {
            slug: KeyName::new(slug).unwrap(),
            title: slug.into(),
            status,
            priority: Priority(priority),
            views: 0,
            likes: 0,
        })
        .await
        .unwrap();
    }
    let stored = db
        .query::<Article>()
        .order(Article::TITLE.asc())
        .fetch()
        .await
        .unwrap()
        .items;
    assert_eq!(
        stored.iter().map(|a| a.status).collect::<Vec<_>>(),
        [Status::Draft, Status::Published, Status::InReview]
    );
    // The stored form: strings by `rename_all` or `rename`, the newtype's integer.
    let entity = stored[1].to_properties().unwrap();
    assert_eq!(entity["status"].value, Value::String("live".into()));
    assert_eq!(entity["priority"].value, Value::Integer(3));
    assert_eq!(
        stored[2].to_properties().unwrap()["status"].value,
        Value::String("in_review".into())
    );
    // Filters take the enum and the newtype.
    let in_review = db
        .query::<Article>()
        .filter(Article::STATUS.eq(Status::InReview))
        .fetch()
        .await
        .unwrap()
        .items;
    assert_eq!(in_review.len(), 1);
    assert_eq!(in_review[0].title, "review");
    let urgent = db
        .query::<Article>()
        .filter(Article::PRIORITY.ge(Priority(2)))
        .fetch()
        .await
        .unwrap()
        .items;
    assert_eq!(urgent.len(), 2);
    // Projections hold them too.
    let cards: Vec<ArticleCard> = db
        .query::<Article>()
        .project::<ArticleCard>()
        .stream()
        .try_collect()
        .await
        .unwrap();
    assert!(cards.contains(&ArticleCard {
        title: "draft".into(),
        status: Status::Draft
    }));
}

#[test]
fn an_unknown_stored_string_is_a_decode_error_naming_the_choices() {
    let article = Article {
        slug: KeyName::new("x").unwrap(),
        title: "x".into(),
        status: Status::Draft,
        priority: Priority(0),
        views: 0,
        likes: 0,
    };
    let mut properties = article.to_properties().unwrap();
    properties.get_mut("status").unwrap().value = Value::String("archived".into());
    properties.insert(
        "views",
        datastore_entity::Property::indexed(Value::Integer(0)),
    );
    properties.insert(
        "likeCount",
        datastore_entity::Property::indexed(Value::Integer(0)),
    );
    let error = Article::from_entity(article.entity_key().unwrap().raw(), properties).unwrap_err();
    match error {
        Error::Decode {
            property,
            expected,
            found,
            ..
        } => {
            assert_eq!(property, "status");
            assert!(
                expected.contains(r#""draft", "in_review", "live""#),
                "{expected}"
            );
            assert!(found.contains("archived"), "{found}");
        }
        other => panic!("{other:?}"),
    }
}

/// The declarations the index-file tests render, on the kinds of the shared fixtures (whose
/// own declarations serve the conformance suite's queries).
#[derive(Entity)]
#[entity(kind = "Post", index(author, -published), ancestor_index(-published))]
struct BlogPost {
    #[parent]
    account: Key<Account>,
    #[key]
    id: Option<KeyId>,
    author: String,
    #[index(monotonic)]
    published: Timestamp,
    #[exclude_from_index]
    body: String,
}

/// A timeline event with a sharded timestamp index, and one composite index over it.
#[derive(Entity)]
#[entity(kind = "Event", index(topic, at))]
struct TimelineEvent {
    #[key]
    id: Option<KeyId>,
    topic: String,
    #[sharded_index(8)]
    at: Timestamp,
}

#[test]
fn declared_indexes_are_in_the_schema() {
    // R-I2
    let _ = |p: BlogPost, e: TimelineEvent| {
        (
            p.account,
            p.id,
            p.author,
            p.published,
            p.body,
            e.id,
            e.topic,
            e.at,
        )
    };
    let indexes = BlogPost::SCHEMA.indexes;
    assert_eq!(indexes.len(), 2);
    assert!(!indexes[0].ancestor);
    assert_eq!(
        indexes[0]
            .properties
            .iter()
            .map(|p| (p.name, p.direction))
            .collect::<Vec<_>>(),
        [
            ("author", Direction::Ascending),
            ("published", Direction::Descending)
        ]
    );
    assert!(indexes[1].ancestor);
    assert_eq!(indexes[1].properties[0].name, "published");
}

const EXPECTED_YAML: &str = "\
# Composite indexes declared with #[entity(index(...))] and #[entity(ancestor_index(...))].
# Generated by datastore-entity: gcloud datastore indexes create index.yaml
indexes:

- kind: Post
  ancestor: no
  properties:
  - name: author
  - name: published
    direction: desc

- kind: Post
  ancestor: yes
  properties:
  - name: published
    direction: desc

- kind: Event
  ancestor: no
  properties:
  - name: topic
  - name: at_sharded
";

#[test]
fn index_yaml_renders_every_declared_index() {
    let yaml =
        datastore_entity::index_yaml(&[Account::SCHEMA, BlogPost::SCHEMA, TimelineEvent::SCHEMA]);
    assert_eq!(yaml, EXPECTED_YAML);
    assert!(datastore_entity::index_yaml(&[Account::SCHEMA]).ends_with("indexes: []\n"));
}

/// The Google Cloud SDK's own parser for `index.yaml`, which `gcloud datastore indexes
/// create` runs before it sends anything: `None` when the SDK is not installed.
fn gcloud_index_parser() -> Option<(PathBuf, PathBuf)> {
    let gcloud = std::fs::canonicalize(Path::new("/usr/bin/gcloud"))
        .ok()
        .or_else(|| {
            let out = Command::new("which").arg("gcloud").output().ok()?;
            std::fs::canonicalize(String::from_utf8(out.stdout).ok()?.trim()).ok()
        })?;
    let root = gcloud.parent()?.parent()?.to_path_buf();
    let bundled = root.join("platform/bundledpythonunix/bin/python3");
    let python = if bundled.exists() {
        bundled
    } else {
        PathBuf::from("python3")
    };
    root.join("lib/googlecloudsdk/appengine/datastore/datastore_index.py")
        .exists()
        .then_some((python, root.join("lib")))
}

#[test]
fn gcloud_accepts_the_generated_index_yaml() {
    let Some((python, lib)) = gcloud_index_parser() else {
        assert!(
            std::env::var("CI").is_err(),
            "CI has the Google Cloud SDK: its index.yaml parser must be found"
        );
        eprintln!("skipped: the Google Cloud SDK (gcloud) is not installed");
        return;
    };
    let dir = std::env::temp_dir().join(format!("datastore-entity-yaml-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("index.yaml");
    std::fs::write(
        &file,
        datastore_entity::index_yaml(&[BlogPost::SCHEMA, TimelineEvent::SCHEMA]),
    )
    .unwrap();
    let script = r"
import sys
from googlecloudsdk.appengine.datastore import datastore_index
defs = datastore_index.ParseIndexDefinitions(open(sys.argv[1]))
for i in defs.indexes:
    print(i.kind, bool(i.ancestor), [(p.name, p.direction or 'asc') for p in i.properties])
";
    let out = Command::new(python)
        .arg("-c")
        .arg(script)
        .arg(&file)
        .env("PYTHONPATH", format!("{0}:{0}/third_party", lib.display()))
        .output()
        .unwrap();
    std::fs::remove_dir_all(&dir).ok();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "gcloud's parser refused the file: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        stdout,
        "Post False [('author', 'asc'), ('published', 'desc')]\n\
         Post True [('published', 'desc')]\n\
         Event False [('topic', 'asc'), ('at_sharded', 'asc')]\n"
    );
}

#[test]
fn firestore_indexes_json_carries_indexes_exclusions_and_ttl() {
    #[derive(Entity)]
    struct Session {
        #[key]
        id: Option<KeyId>,
        #[ttl]
        expires: Timestamp,
        #[exclude_from_index]
        #[property(rename = "user-agent")]
        user_agent: String,
        home: Home,
    }
    #[derive(Entity)]
    struct Home {
        city: String,
        #[exclude_from_index]
        notes: String,
    }
    let _ = |s: Session| (s.id, s.expires, s.user_agent, s.home.city, s.home.notes);
    let json = datastore_entity::firestore_indexes_json(&[
        BlogPost::SCHEMA,
        Session::SCHEMA,
        Article::SCHEMA,
        SiteConfig::SCHEMA,
    ]);
    let parsed: serde_json::Value = serde_json::from_str(&json).unwrap();
    let indexes = parsed["indexes"].as_array().unwrap();
    // BlogPost's two, then Article's index(status, title).
    assert_eq!(indexes.len(), 3);
    assert_eq!(indexes[2]["collectionGroup"], "Article");
    assert_eq!(indexes[0]["collectionGroup"], "Post");
    assert_eq!(indexes[0]["queryScope"], "COLLECTION");
    assert_eq!(indexes[0]["apiScope"], "DATASTORE_MODE_API");
    assert_eq!(
        indexes[0]["fields"],
        serde_json::json!([
            { "fieldPath": "author", "order": "ASCENDING" },
            { "fieldPath": "published", "order": "DESCENDING" }
        ])
    );
    assert_eq!(indexes[1]["queryScope"], "COLLECTION_RECURSIVE");
    let overrides: Vec<(String, String, bool)> = parsed["fieldOverrides"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            assert_eq!(o["indexes"], serde_json::json!([]));
            (
                o["collectionGroup"].as_str().unwrap().to_owned(),
                o["fieldPath"].as_str().unwrap().to_owned(),
                o["ttl"].as_bool().unwrap_or(false),
            )
        })
        .collect();
    let expected = [
        ("Post", "body", false),
        ("Session", "expires", true),
        ("Session", "`user-agent`", false),
        ("Session", "home.notes", false),
        ("Article.views.shard", "count", false),
        ("Article.views.shard", "owner", false),
        ("Article.likeCount.shard", "count", false),
        ("Article.likeCount.shard", "owner", false),
        ("SiteConfig.replica", "owner", false),
        ("SiteConfig.replica", "entity", false),
    ];
    assert_eq!(
        overrides,
        expected
            .map(|(g, f, t)| (g.to_owned(), f.to_owned(), t))
            .to_vec()
    );
}

/// Two arrays, indexed together by a composite index.
#[derive(Entity, Debug, Clone)]
#[entity(index(left, right))]
struct Wide {
    #[key]
    id: KeyId,
    left: Vec<String>,
    right: Vec<String>,
    #[exclude_from_index]
    notes: Vec<String>,
}

fn wide(left: usize, right: usize, notes: usize) -> Wide {
    let words = |n: usize, p: &str| (0..n).map(|i| format!("{p}{i}")).collect();
    Wide {
        id: KeyId::new(1).unwrap(),
        left: words(left, "l"),
        right: words(right, "r"),
        notes: words(notes, "n"),
    }
}

#[tokio::test]
async fn too_many_index_entries_fail_before_anything_is_written() {
    // R-I5: built-in entries (one per indexed value) plus composite ones (the product of
    // the indexed properties' value counts).
    let (backend, db) = Instrumented::db();
    // 5,001 values of one property: more than one entity indexes (as Firestore counts).
    match db
        .put(&wide(MAX_INDEXED_VALUES + 1, 0, 0))
        .await
        .unwrap_err()
    {
        Error::TooManyIndexedValues {
            values,
            max,
            property,
            contribution,
            within,
            ..
        } => assert_eq!(
            (values, max, property.as_str(), contribution, &*within),
            (5_001, 5_000, "left", 5_001, "")
        ),
        other => panic!("{other:?}"),
    }
    let cases = [
        // 150 + 140 built-in, and 150 × 140 = 21,000 in the composite index.
        (wide(150, 140, 0), "left", 290 + 21_000),
        (wide(20, 1_000, 0), "right", 1_020 + 20_000),
    ];
    for (entity, property, entries) in cases {
        match db.put(&entity).await.unwrap_err() {
            Error::TooManyIndexEntries {
                property: p,
                entries: e,
                max,
                ..
            } => {
                assert_eq!((p.as_str(), e, max), (property, entries, MAX_INDEX_ENTRIES));
            }
            other => panic!("{other:?}"),
        }
    }
    // The backend's commit refused each (`rules::commit`): nothing was written.
    let refused = backend.count(Call::Commit);
    assert!(
        db.get(&Wide::key(KeyId::new(1).unwrap()))
            .await
            .unwrap()
            .is_none()
    );

    // Exactly the limits are allowed, and excluded values do not count.
    db.put(&wide(MAX_INDEXED_VALUES, 0, 0)).await.unwrap();
    db.put(&wide(100, 100, 50_000)).await.unwrap();
    // 99 + 200 built-in, 99 × 200 = 19,800 composite: 20,099 is over; 98 × 200 + 298 is not.
    assert!(matches!(
        db.put(&wide(99, 200, 0)).await,
        Err(Error::TooManyIndexEntries {
            entries: 20_099,
            ..
        })
    ));
    db.put(&wide(98, 200, 0)).await.unwrap();
    assert_eq!(backend.count(Call::Commit), refused + 4);
    // In a transaction too, with nothing committed.
    let error = db
        .transaction(|tx| async move {
            tx.put(&wide(150, 140, 0)).await?;
            Ok(())
        })
        .await
        .unwrap_err();
    assert!(
        matches!(error, Error::TooManyIndexEntries { .. }),
        "{error}"
    );
    let kept = db
        .get(&Wide::key(KeyId::new(1).unwrap()))
        .await
        .unwrap()
        .unwrap();
    assert_eq!((kept.left.len(), kept.right.len()), (98, 200));
}

#[tokio::test]
async fn the_engine_enforces_r_i5_on_any_caller_of_backend_commit() {
    // R-I5 below the typed path: a `Backend::commit` of raw properties is refused too, with
    // the widest property named and nothing written.
    use datastore_entity::backend::{Mask, Mutation};
    use datastore_entity::{Property, PropertyMap};
    let (backend, db) = Instrumented::db();
    let engine = backend.engine();
    let key = db
        .bind(&Wide::key(KeyId::new(7).unwrap()))
        .unwrap()
        .into_raw();
    let values = |n: usize| Value::Array((0..n).map(|i| Value::Integer(i as i64)).collect());
    let mut properties = PropertyMap::new();
    properties.insert("left", Property::indexed(values(MAX_INDEXED_VALUES)));
    properties.insert("right", Property::indexed(values(1)));
    let refused = engine
        .commit(
            vec![Mutation::Upsert(key.clone(), properties, Mask::Whole)],
            None,
        )
        .await;
    match refused {
        Err(Error::TooManyIndexedValues {
            values,
            property,
            contribution,
            ..
        }) => assert_eq!(
            (values, property.as_str(), contribution),
            (MAX_INDEXED_VALUES + 1, "left", MAX_INDEXED_VALUES)
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        engine
            .lookup(std::slice::from_ref(&key), None)
            .await
            .unwrap(),
        vec![None]
    );
    // Repeated values count each, as Firestore in Datastore mode counts them: 5,001 copies
    // of one value are refused, 5,000 are not.
    for (copies, ok) in [(MAX_INDEXED_VALUES + 1, false), (MAX_INDEXED_VALUES, true)] {
        let mut properties = PropertyMap::new();
        let same = Value::Array(vec![Value::Integer(7); copies]);
        properties.insert("left", Property::indexed(same));
        let result = engine
            .commit(
                vec![Mutation::Upsert(key.clone(), properties, Mask::Whole)],
                None,
            )
            .await;
        assert_eq!(result.is_ok(), ok, "{copies}: {result:?}");
    }
}

#[tokio::test]
async fn ancestor_indexes_count_once_per_ancestor() {
    #[derive(Entity)]
    #[entity(ancestor_index(tags, labels))]
    struct Note {
        #[parent]
        account: Key<Account>,
        #[key]
        id: KeyId,
        tags: Vec<String>,
        labels: Vec<String>,
    }
    let note = |n: usize, m: usize| Note {
        account: account_key("ann"),
        id: KeyId::new(1).unwrap(),
        tags: (0..n).map(|i| i.to_string()).collect(),
        labels: (0..m).map(|i| i.to_string()).collect(),
    };
    // 100 tags, 100 labels: 200 built-in + 100 × 100 × 2 (the note and its account) = 20,200.
    let db = Db::in_memory();
    assert!(matches!(
        db.put(&note(100, 100)).await,
        Err(Error::TooManyIndexEntries {
            entries: 20_200,
            ..
        })
    ));
    // 100 × 99: 199 + 19,800 = 19,999.
    db.put(&note(100, 99)).await.unwrap();
}

/// Issue #29: vector indexes — `#[vector_index(n)]` alone, and an `index(...)` that ends with
/// the vector for a pre-filtered search — in the schema, in `firestore.indexes.json` with their
/// `vectorConfig`, and in `index.yaml` as the `gcloud` commands that create them (the file
/// cannot hold them, and gcloud's parser still accepts it).
#[test]
fn vector_indexes_are_declared_in_the_schema_and_the_index_files() {
    use datastore_entity::{Direction, IndexedProperty, Vector, VectorIndexSchema};

    #[derive(Entity)]
    #[entity(kind = "Doc", index(topic, -year, emb))]
    struct Doc {
        #[key]
        id: KeyName,
        topic: String,
        year: i64,
        #[vector_index(768)]
        emb: Vector,
        other: Option<Vector>,
    }
    let _ = |d: Doc| (d.id, d.topic, d.year, d.emb, d.other);
    assert!(
        Doc::SCHEMA.indexes.is_empty(),
        "no composite index of its own"
    );
    assert_eq!(
        Doc::SCHEMA.vector_indexes,
        &[
            VectorIndexSchema {
                property: "emb",
                dimension: 768,
                filters: &[
                    IndexedProperty {
                        name: "topic",
                        direction: Direction::Ascending
                    },
                    IndexedProperty {
                        name: "year",
                        direction: Direction::Descending
                    },
                ],
            },
            VectorIndexSchema {
                property: "emb",
                dimension: 768,
                filters: &[],
            },
        ]
    );
    let json = datastore_entity::firestore_indexes_json(&[Doc::SCHEMA]);
    let parsed: serde_json::Value = serde_json::from_str(&json).unwrap();
    let indexes = parsed["indexes"].as_array().unwrap();
    assert_eq!(indexes.len(), 2);
    assert_eq!(
        indexes[0]["fields"],
        serde_json::json!([
            { "fieldPath": "topic", "order": "ASCENDING" },
            { "fieldPath": "year", "order": "DESCENDING" },
            { "fieldPath": "emb", "vectorConfig": { "dimension": 768, "flat": {} } }
        ])
    );
    assert_eq!(
        indexes[1]["fields"],
        serde_json::json!([{ "fieldPath": "emb", "vectorConfig": { "dimension": 768, "flat": {} } }])
    );
    assert_eq!(indexes[1]["apiScope"], "DATASTORE_MODE_API");
    let yaml = datastore_entity::index_yaml(&[Doc::SCHEMA]);
    assert!(yaml.ends_with("indexes: []\n"), "{yaml}");
    let commands: Vec<&str> = yaml
        .lines()
        .filter_map(|l| l.strip_prefix("#   "))
        .collect();
    assert_eq!(
        commands,
        [
            "gcloud firestore indexes composite create --database='(default)' \
             --collection-group='Doc' --query-scope=collection --api-scope=datastore-mode-api \
             --field-config='field-path=topic,order=ascending' \
             --field-config='field-path=year,order=descending' \
             --field-config='field-path=emb,vector-config={\"dimension\":\"768\",\"flat\":\"{}\"}'",
            "gcloud firestore indexes composite create --database='(default)' \
             --collection-group='Doc' --query-scope=collection --api-scope=datastore-mode-api \
             --field-config='field-path=emb,vector-config={\"dimension\":\"768\",\"flat\":\"{}\"}'",
        ]
    );
    let Some((python, lib)) = gcloud_index_parser() else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("datastore-entity-vyaml-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("index.yaml");
    std::fs::write(&file, &yaml).unwrap();
    let out = Command::new(python)
        .arg("-c")
        .arg("import sys\nfrom googlecloudsdk.appengine.datastore import datastore_index\nprint(datastore_index.ParseIndexDefinitions(open(sys.argv[1])).indexes)")
        .arg(&file)
        .env("PYTHONPATH", format!("{0}:{0}/third_party", lib.display()))
        .output()
        .unwrap();
    std::fs::remove_dir_all(&dir).ok();
    assert!(
        out.status.success(),
        "gcloud's parser refused the file: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Issue #29: the `gcloud` command `index_yaml` writes for a vector index, run as written by a
/// shell, sends the service the index `firestore_indexes_json` declares — gcloud's own parser
/// checked, its request caught by a server on loopback (nothing leaves the machine).
#[test]
fn gcloud_sends_the_vector_index_the_json_declares() {
    use std::io::{BufRead, BufReader, Read, Write};

    #[derive(Entity)]
    #[entity(kind = "Doc", index(topic, emb))]
    struct Doc {
        #[key]
        id: KeyName,
        topic: String,
        #[vector_index(3)]
        emb: datastore_entity::Vector,
    }
    let _ = |d: Doc| (d.id, d.topic, d.emb);
    if gcloud_index_parser().is_none() {
        assert!(std::env::var("CI").is_err(), "CI has the Google Cloud SDK");
        eprintln!("skipped: the Google Cloud SDK (gcloud) is not installed");
        return;
    }
    let json = datastore_entity::firestore_indexes_json(&[Doc::SCHEMA]);
    let declared: serde_json::Value = serde_json::from_str(&json).unwrap();
    let yaml = datastore_entity::index_yaml(&[Doc::SCHEMA]);
    let commands: Vec<&str> = yaml
        .lines()
        .filter_map(|l| l.strip_prefix("#   "))
        .collect();
    assert_eq!(commands.len(), 2);
    for (i, command) in commands.into_iter().enumerate() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        // gcloud connects within a minute, or its error is shown below.
        listener.set_nonblocking(true).unwrap();
        let server = std::thread::spawn(move || {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
            let stream = loop {
                match listener.accept() {
                    Ok((stream, _)) => break stream,
                    Err(_) if std::time::Instant::now() < deadline => {
                        std::thread::sleep(std::time::Duration::from_millis(20));
                    }
                    Err(_) => return Vec::new(),
                }
            };
            stream.set_nonblocking(false).unwrap();
            let mut reader = BufReader::new(stream);
            let mut length = 0;
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                if let Some(n) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = n.trim().parse().unwrap();
                }
                if line.trim().is_empty() {
                    break;
                }
            }
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap();
            let answer = r#"{"name":"operations/o","done":true,"response":{}}"#;
            let _ = write!(
                reader.get_mut(),
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
                 connection: close\r\n\r\n{answer}",
                answer.len()
            );
            body
        });
        let out = Command::new("sh")
            .arg("-c")
            .arg(command)
            .env("CLOUDSDK_CORE_PROJECT", "p")
            .env("CLOUDSDK_AUTH_DISABLE_CREDENTIALS", "true")
            .env("CLOUDSDK_CORE_DISABLE_PROMPTS", "1")
            .env(
                "CLOUDSDK_API_ENDPOINT_OVERRIDES_FIRESTORE",
                format!("http://127.0.0.1:{port}/"),
            )
            .output()
            .unwrap();
        let body = server.join().unwrap();
        let sent: serde_json::Value = serde_json::from_slice(&body).unwrap_or_else(|e| {
            panic!("{e}: {}", String::from_utf8_lossy(&out.stderr));
        });
        let expected = &declared["indexes"][i];
        assert_eq!(sent["fields"], expected["fields"], "{command}");
        assert_eq!(sent["apiScope"], expected["apiScope"]);
        assert_eq!(sent["queryScope"], expected["queryScope"]);
    }
}
