//! Interop with a client no one here wrote (issue #16): Google's Python `google-cloud-ndb`
//! (from the Python registry, in `target/ndb-venv`) and typed Rust structs share the
//! Firestore emulator in Datastore mode. NDB writes (`tests/interop/ndb_side.py write`):
//! repeated, Text, Json, GeoPt, Key, DateTime and Integer properties, legacy dotted
//! StructuredProperties (one and repeated, read with `#[property(flatten)]`) and an Expando
//! property the Rust struct does not declare. Rust reads them through NDB's URL-safe keys (an
//! integer read as `f64` too), changes an entity and adds one; NDB then reads everything back
//! (`ndb_side.py check`): nothing lost, nothing altered.
//!
//! In CI (`CI` set) a missing Python client or emulator fails the test; elsewhere it is
//! skipped with the reason.

use std::process::Command;

use datastore_entity::prelude::*;
use datastore_entity_tests::harness::{self, Backend};

/// The Rust side's view of NDB's `Member` (an Expando): what it declares.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(kind = "Member")]
struct Member {
    #[key]
    id: KeyName,
    email: String,
    #[property(default)]
    tags: Vec<String>,
    #[exclude_from_index]
    #[property(default)]
    bio: String,
    /// NDB's JsonProperty: the JSON text as bytes, excluded from indexes.
    #[blob]
    #[property(default)]
    prefs: Vec<u8>,
    home: Option<GeoPoint>,
    friend: Option<Key<Member>>,
    #[index(monotonic)]
    joined: Option<Timestamp>,
    #[property(default)]
    visits: i64,
    /// NDB's legacy StructuredProperty: `address.city`, `address.zip`.
    #[property(flatten)]
    address: Option<Place>,
    /// A repeated one: one array per sub-property.
    #[property(flatten)]
    addresses: Vec<Place>,
}

/// NDB's `Address` model, embedded.
#[derive(Entity, Debug, Clone, PartialEq)]
struct Place {
    city: String,
    zip: Option<String>,
}

fn place(city: &str, zip: &str) -> Place {
    Place {
        city: city.into(),
        zip: Some(zip.into()),
    }
}

/// With the `serde` feature, NDB's JsonProperty read and written as `#[property(json)]`.
#[cfg(feature = "serde")]
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(kind = "Member")]
struct MemberJson {
    #[key]
    id: KeyName,
    #[property(json)]
    prefs: serde_json::Value,
}

/// Another program's view: `visits` as a double (NDB stored an integer).
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(kind = "Member")]
struct Visits {
    #[key]
    id: KeyName,
    visits: f64,
}

fn skip_or_fail(reason: String) -> Option<std::convert::Infallible> {
    if std::env::var_os("CI").is_some() {
        panic!("CI runs the NDB interop suite, but: {reason}");
    }
    eprintln!("skipping the NDB interop suite: {reason}");
    None
}

/// `ndb_side.py` with `args`, against the emulator; its standard output.
fn ndb(python: &std::path::Path, host: &str, args: &[&str]) -> String {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/interop/ndb_side.py");
    let output = Command::new(python)
        .arg(script)
        .args(args)
        .env("DATASTORE_EMULATOR_HOST", host)
        .env("DATASTORE_PROJECT_ID", harness::PROJECT)
        .output()
        .expect("python runs");
    assert!(
        output.status.success(),
        "ndb_side.py {} failed:\n{}",
        args[0],
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("UTF-8")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ndb_and_typed_rust_structs_share_entities_without_loss() {
    share_without_loss(Backend::Firestore).await;
}

/// The same through `datastore-entity-server`: NDB's compressed properties (meaning 22) and
/// its user (meaning 20) come back as NDB wrote them, after a Rust read-modify-write too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ndb_and_typed_rust_structs_share_entities_without_loss_on_the_server() {
    share_without_loss(Backend::Server).await;
}

async fn share_without_loss(backend: Backend) {
    let python = match harness::ndb_python() {
        Ok(python) => python,
        Err(reason) => {
            skip_or_fail(reason);
            return;
        }
    };
    let Some(db) = harness::db(backend, "ndb_interop").await else {
        return;
    };
    let host = match backend {
        Backend::Server => harness::server_host().to_owned(),
        emulated => harness::emulator_host(emulated).expect("the emulator is up"),
    };
    let namespace = db.partition().namespace.clone();

    // NDB writes; its URL-safe keys lead the Rust side to the entities.
    let written: serde_json::Value =
        serde_json::from_str(&ndb(&python, &host, &["write", &namespace])).expect("JSON");
    let ann_key = Key::<Member>::from_urlsafe(written["ann"].as_str().unwrap()).unwrap();
    let bob_key = Key::<Member>::from_urlsafe(written["bob"].as_str().unwrap()).unwrap();
    assert_eq!(
        ann_key,
        db.bind(&Member::key(KeyName::new("ann").unwrap())).unwrap()
    );

    let mut ann = db.get(&ann_key).await.unwrap().expect("NDB wrote ann");
    assert_eq!(ann.email, "ann@example.com");
    assert_eq!(ann.tags, ["admin", "early"]);
    assert_eq!(ann.bio, "Writes long ".repeat(200));
    let prefs: serde_json::Value = serde_json::from_slice(&ann.prefs).unwrap();
    assert_eq!(
        prefs,
        serde_json::json!({ "theme": "dark", "langs": ["fr", "en"] })
    );
    let home = ann.home.unwrap();
    assert_eq!((home.latitude(), home.longitude()), (48.8566, 2.3522));
    assert_eq!(ann.friend.as_ref(), Some(&bob_key));
    let joined: Timestamp = "2019-05-17T08:30:15.123456Z".parse().unwrap();
    assert_eq!(ann.joined, Some(joined));
    assert_eq!(ann.visits, 41);
    assert_eq!(ann.address, Some(place("Paris", "75001")));
    assert_eq!(
        ann.addresses,
        [place("Lyon", "69001"), place("Nice", "06000")]
    );
    let visits = Visits::key(KeyName::new("ann").unwrap());
    assert_eq!(db.get(&visits).await.unwrap().unwrap().visits, 41.0);

    // Rust changes ann (NDB's Expando `nickname` is not declared here) …
    ann.email = "ann@rust.example".into();
    ann.visits += 1;
    db.put(&ann).await.unwrap();
    // … and adds cy, which NDB finds through the URL-safe key Rust gives it.
    let cy = Member {
        id: KeyName::new("cy").unwrap(),
        email: "cy@example.com".into(),
        tags: vec!["new".into()],
        bio: String::new(),
        prefs: br#"{"theme": "light"}"#.to_vec(),
        home: Some(GeoPoint::new(45.764, 4.8357).unwrap()),
        friend: Some(ann_key.clone()),
        joined: Some("2024-01-02T03:04:05.678901Z".parse().unwrap()),
        visits: 0,
        address: Some(place("Lyon", "69002")),
        addresses: vec![],
    };
    let cy_key = db.put(&cy).await.unwrap();
    #[allow(unused_mut)]
    let mut rust = serde_json::json!({
        "email": ann.email,
        "cy": cy_key.to_urlsafe(harness::PROJECT),
    });
    // With `serde`: NDB's JsonProperty as `#[property(json)]`, read, and written with text
    // outside ASCII (NDB decodes the bytes as ASCII: they must be escaped).
    #[cfg(feature = "serde")]
    {
        let key = MemberJson::key(KeyName::new("ann").unwrap());
        let as_json = db.get(&key).await.unwrap().unwrap();
        assert_eq!(as_json.prefs, prefs);
        let dee = MemberJson {
            id: KeyName::new("dee").unwrap(),
            prefs: serde_json::json!({ "theme": "Zoë ✓ 🎉", "langs": [] }),
        };
        let dee_key = db.put(&dee).await.unwrap();
        rust["dee"] = dee_key.to_urlsafe(harness::PROJECT).into();
    }
    ndb(&python, &host, &["check", &namespace, &rust.to_string()]);
}
