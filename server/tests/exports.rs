//! Managed exports against their referee, Google's legacy Datastore emulator (issue #51): what
//! it exports (every value type, namespaces, ancestors, excluded and nested values, meanings)
//! imports into the server with every entity equal and queryable; what the server exports,
//! it imports with every entity equal. Also the admin API's calls over gRPC, and damaged files
//! refused with the file and the record named.
//!
//! The emulator comes from Debian's `google-cloud-cli-datastore-emulator`; without it these
//! tests are skipped with the reason printed, except in CI (`CI` set), where they fail.

use std::collections::BTreeMap;
use std::io::{Read as _, Write as _};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use datastore_entity_server::export::{ExportError, Filter, export, import};
use datastore_entity_server::{Options, Server};
use gcloud_sdk::google::datastore::admin::v1 as admin;
use gcloud_sdk::google::datastore::v1 as pb;
use pb::datastore_client::DatastoreClient;
use pb::key::path_element::IdType;
use pb::value::ValueType;
use tonic::transport::Channel;

/// Google's legacy Datastore emulator on a free loopback port, in its own process group
/// (its launcher forks a `java` that outlives it), killed with it.
struct Legacy {
    port: u16,
    child: Child,
    dir: PathBuf,
}

impl Drop for Legacy {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.child.id())])
            .stderr(Stdio::null())
            .status();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Legacy {
    /// The emulator, started; `None` (the reason printed) when it is not installed outside CI.
    fn start() -> Option<Legacy> {
        // A port free when chosen can be taken before the emulator binds it: another then.
        let mut started = Legacy::try_start();
        for _ in 0..4 {
            match &started {
                Err(reason) if reason.contains("Address already in use") => {
                    started = Legacy::try_start();
                }
                _ => break,
            }
        }
        match started {
            Ok(legacy) => Some(legacy),
            Err(reason) if std::env::var_os("CI").is_some() => {
                panic!("CI needs the legacy Datastore emulator: {reason}")
            }
            Err(reason) => {
                eprintln!("skipped: {reason}");
                None
            }
        }
    }

    fn try_start() -> Result<Legacy, String> {
        let listing = Command::new("dpkg")
            .args(["-L", "google-cloud-cli-datastore-emulator"])
            .output()
            .map_err(|e| format!("cannot run dpkg: {e}"))?;
        let launcher = String::from_utf8_lossy(&listing.stdout)
            .lines()
            .find(|line| line.ends_with("/cloud_datastore_emulator"))
            .map(str::to_owned)
            .ok_or("google-cloud-cli-datastore-emulator is not installed")?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| e.to_string())?
            .port();
        let dir = std::env::temp_dir().join(format!(
            "datastore-entity-exports-{}-{port}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let project = dir.join("project");
        let script = format!(
            "'{launcher}' create '{p}' >/dev/null 2>&1; exec '{launcher}' start \
             --host=127.0.0.1 --port={port} --testing --store_on_disk=false '{p}' \
             >'{log}' 2>&1",
            p = project.display(),
            log = dir.join("log").display(),
        );
        let child = Command::new("sh")
            .arg("-c")
            .arg(script)
            .stdin(Stdio::null())
            .process_group(0)
            .spawn()
            .map_err(|e| format!("cannot start the emulator: {e}"))?;
        let legacy = Legacy { port, child, dir };
        let started = Instant::now();
        while !matches!(get(port, "/"), Some(ref body) if body.trim() == "Ok") {
            let log = std::fs::read_to_string(legacy.dir.join("log")).unwrap_or_default();
            if log.contains("Address already in use") || started.elapsed() > Duration::from_secs(90)
            {
                return Err(format!(
                    "the emulator did not answer on port {port}:\n{log}"
                ));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        Ok(legacy)
    }
}

/// `GET path` on a loopback port: the body, or `None` when nothing answers.
fn get(port: u16, path: &str) -> Option<String> {
    let request = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    exchange(port, &request).map(|(_, body)| body)
}

/// `POST path` with a JSON body on a loopback port: the HTTP status and the JSON answered.
fn post(port: u16, path: &str, body: &serde_json::Value) -> (u16, serde_json::Value) {
    let body = body.to_string();
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let (status, body) = exchange(port, &request).expect("an HTTP answer");
    (
        status,
        serde_json::from_str(&body).unwrap_or(serde_json::Value::Null),
    )
}

/// Sends one HTTP/1.1 request; the answer's status and body, read as far as its
/// `Content-Length` or its last chunk says (the legacy emulator keeps the connection open).
fn exchange(port: u16, request: &str) -> Option<(u16, String)> {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(600)))
        .ok()?;
    stream.write_all(request.as_bytes()).ok()?;
    let mut answer = Vec::new();
    let mut buffer = [0u8; 64 << 10];
    loop {
        if let Some(whole) = parsed(&answer) {
            return Some(whole);
        }
        match stream.read(&mut buffer) {
            Ok(0) | Err(_) => return parsed(&answer),
            Ok(n) => answer.extend_from_slice(&buffer[..n]),
        }
    }
}

/// An HTTP/1.1 answer's status and body, once it has come whole.
fn parsed(answer: &[u8]) -> Option<(u16, String)> {
    let text = String::from_utf8_lossy(answer);
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status = head.split(' ').nth(1)?.parse().ok()?;
    let head = head.to_ascii_lowercase();
    if let Some(length) = head
        .lines()
        .find_map(|line| line.strip_prefix("content-length:"))
    {
        let length: usize = length.trim().parse().ok()?;
        return (body.len() >= length).then(|| (status, body[..length].to_owned()));
    }
    if !head.contains("transfer-encoding: chunked") {
        return None;
    }
    let (mut out, mut rest) = (String::new(), body);
    loop {
        let (size, after) = rest.split_once("\r\n")?;
        let size = usize::from_str_radix(size.trim(), 16).ok()?;
        if size == 0 {
            return Some((status, out));
        }
        out.push_str(after.get(..size)?);
        rest = after.get(size + 2..)?;
    }
}

async fn client(port: u16) -> DatastoreClient<Channel> {
    DatastoreClient::connect(format!("http://127.0.0.1:{port}"))
        .await
        .unwrap()
}

fn key(namespace: &str, path: &[(&str, IdType)]) -> pb::Key {
    pb::Key {
        partition_id: Some(pb::PartitionId {
            namespace_id: namespace.to_owned(),
            ..pb::PartitionId::default()
        }),
        path: path
            .iter()
            .map(|(kind, id)| pb::key::PathElement {
                kind: (*kind).to_owned(),
                id_type: Some(id.clone()),
            })
            .collect(),
    }
}

fn name(n: &str) -> IdType {
    IdType::Name(n.to_owned())
}

fn value(value_type: ValueType) -> pb::Value {
    pb::Value {
        meaning: 0,
        exclude_from_indexes: false,
        value_type: Some(value_type),
    }
}

fn excluded(mut v: pb::Value) -> pb::Value {
    v.exclude_from_indexes = true;
    v
}

fn with_meaning(mut v: pb::Value, meaning: i32) -> pb::Value {
    v.meaning = meaning;
    v
}

fn entity(key: Option<pb::Key>, properties: Vec<(&str, pb::Value)>) -> pb::Entity {
    pb::Entity {
        key,
        properties: properties
            .into_iter()
            .map(|(n, v)| (n.to_owned(), v))
            .collect(),
    }
}

fn array(values: Vec<pb::Value>) -> pb::Value {
    value(ValueType::ArrayValue(pb::ArrayValue { values }))
}

/// Every value type, meanings the legacy format carries, namespaces, ancestors, excluded and
/// nested values; and enough small entities to fill several batches and pages.
fn entities() -> Vec<pb::Entity> {
    use ValueType::*;
    let other = key("", &[("Other", IdType::Id(7))]);
    let nested = entity(
        None,
        vec![
            ("deep", value(StringValue("deepest".into()))),
            (
                "arr",
                array(vec![
                    value(IntegerValue(1)),
                    value(StringValue("two".into())),
                ]),
            ),
        ],
    );
    let inner = entity(
        Some(key("", &[("Emb", IdType::Id(5))])),
        vec![
            ("s", value(StringValue("inner".into()))),
            ("blob", excluded(value(BlobValue(vec![0, 1])))),
            ("nested", value(EntityValue(nested))),
        ],
    );
    let all = entity(
        Some(key("", &[("All", name("a"))])),
        vec![
            ("null", value(NullValue(0))),
            ("t", value(BooleanValue(true))),
            ("f", value(BooleanValue(false))),
            ("imax", value(IntegerValue(i64::MAX))),
            ("imin", value(IntegerValue(i64::MIN))),
            ("zero", value(IntegerValue(0))),
            ("d", value(DoubleValue(1.25))),
            ("nan", value(DoubleValue(f64::NAN))),
            ("inf", value(DoubleValue(f64::INFINITY))),
            ("ninf", value(DoubleValue(f64::NEG_INFINITY))),
            ("negzero", value(DoubleValue(-0.0))),
            ("s", value(StringValue("héllo".into()))),
            ("empty_s", value(StringValue(String::new()))),
            ("b", value(BlobValue(vec![0, 0xff, b' ', b'x']))),
            ("bx", excluded(value(BlobValue(vec![9; 3000])))),
            (
                "ts",
                value(TimestampValue(gcloud_sdk::prost_types::Timestamp {
                    seconds: 1_577_934_245,
                    nanos: 123_456_000,
                })),
            ),
            (
                "old",
                value(TimestampValue(gcloud_sdk::prost_types::Timestamp {
                    seconds: -62_135_596_800,
                    nanos: 0,
                })),
            ),
            (
                "geo",
                value(GeoPointValue(gcloud_sdk::google::r#type::LatLng {
                    latitude: 51.5,
                    longitude: -0.12,
                })),
            ),
            ("k", value(KeyValue(other))),
            (
                "kanc",
                value(KeyValue(key(
                    "ns1",
                    &[("P", name("x")), ("C", IdType::Id(3))],
                ))),
            ),
            ("e", value(EntityValue(inner))),
            (
                "arr",
                array(vec![
                    value(IntegerValue(1)),
                    value(StringValue("a".into())),
                    value(NullValue(0)),
                    value(DoubleValue(2.5)),
                ]),
            ),
            ("earr", array(Vec::new())),
            (
                "exarr",
                array(vec![
                    excluded(value(IntegerValue(1))),
                    excluded(value(IntegerValue(2))),
                ]),
            ),
            ("long", excluded(value(StringValue("x".repeat(2000))))),
            // Text as App Engine wrote it, and a compressed blob as NDB writes one.
            (
                "text",
                with_meaning(excluded(value(StringValue("t".into()))), 15),
            ),
            (
                "zlib",
                with_meaning(excluded(value(BlobValue(vec![120, 156]))), 22),
            ),
            ("rating", with_meaning(value(IntegerValue(42)), 13)),
            // A user (App Engine's `users.User`), a byte string indexed. (A point of meaning
            // 23, one not written as a GeoPt, the server refuses as the service does.)
            (
                "user",
                with_meaning(
                    value(EntityValue(entity(
                        None,
                        vec![
                            (
                                "email",
                                excluded(value(StringValue("a@example.com".into()))),
                            ),
                            (
                                "auth_domain",
                                excluded(value(StringValue("gmail.com".into()))),
                            ),
                            ("user_id", excluded(value(StringValue("1234".into())))),
                        ],
                    ))),
                    20,
                ),
            ),
            ("bytes16", with_meaning(value(BlobValue(vec![1, 2, 3])), 16)),
        ],
    );
    let mut all_entities = vec![
        all,
        entity(
            Some(key(
                "",
                &[("Parent", name("p1")), ("Child", IdType::Id(42))],
            )),
            vec![("v", value(IntegerValue(1)))],
        ),
        entity(
            Some(key(
                "",
                &[
                    ("Parent", name("p1")),
                    ("Child", IdType::Id(42)),
                    ("Grand", name("g")),
                ],
            )),
            vec![("v", value(IntegerValue(2)))],
        ),
        entity(
            Some(key("ns1", &[("Nsk", name("n1"))])),
            vec![
                ("v", value(StringValue("in ns1".into()))),
                ("k", value(KeyValue(key("ns1", &[("Z", IdType::Id(1))])))),
            ],
        ),
        entity(
            Some(key("ns2", &[("Nsk", IdType::Id((1 << 53) + 1))])),
            vec![("v", value(StringValue("in ns2".into())))],
        ),
    ];
    for i in 0..1200 {
        all_entities.push(entity(
            Some(key("", &[("Many", IdType::Id(i + 1))])),
            vec![
                ("i", value(IntegerValue(i))),
                ("pad", excluded(value(StringValue("p".repeat(200))))),
            ],
        ));
    }
    all_entities
}

/// A non-transactional commit upserting `entities` into `project`.
fn upserts(project: &str, entities: &[pb::Entity]) -> pb::CommitRequest {
    pb::CommitRequest {
        project_id: project.to_owned(),
        mode: pb::commit_request::Mode::NonTransactional as i32,
        mutations: entities
            .iter()
            .map(|e| pb::Mutation {
                operation: Some(pb::mutation::Operation::Upsert(e.clone())),
                ..pb::Mutation::default()
            })
            .collect(),
        ..pb::CommitRequest::default()
    }
}

/// Writes `entities` into `project` through gRPC, 500 at a time.
async fn write(port: u16, project: &str, entities: &[pb::Entity]) {
    let mut client = client(port).await;
    for chunk in entities.chunks(500) {
        client.commit(upserts(project, chunk)).await.unwrap();
    }
}

/// The entities of `keys` in `project` as the server on `port` holds them, each in a form
/// that compares (properties sorted, doubles by their bits), the project renamed `P`.
async fn lookup(port: u16, project: &str, keys: &[pb::Key]) -> Vec<String> {
    let mut client = client(port).await;
    let mut found = Vec::new();
    for chunk in keys.chunks(300) {
        let answer = client
            .lookup(pb::LookupRequest {
                project_id: project.to_owned(),
                keys: chunk.to_vec(),
                ..pb::LookupRequest::default()
            })
            .await
            .unwrap()
            .into_inner();
        assert!(answer.deferred.is_empty());
        found.extend(
            answer
                .found
                .into_iter()
                .filter_map(|r| r.entity)
                .map(|e| canonical_entity(&e).to_string().replace(project, "P")),
        );
    }
    found.sort();
    found
}

fn canonical_entity(entity: &pb::Entity) -> serde_json::Value {
    let properties: BTreeMap<&String, serde_json::Value> = entity
        .properties
        .iter()
        .map(|(n, v)| (n, canonical(v)))
        .collect();
    serde_json::json!({ "key": format!("{:?}", entity.key), "properties": properties })
}

fn canonical(v: &pb::Value) -> serde_json::Value {
    let inner = match &v.value_type {
        Some(ValueType::DoubleValue(d)) => serde_json::json!({ "double": d.to_bits() }),
        Some(ValueType::EntityValue(e)) => serde_json::json!({ "entity": canonical_entity(e) }),
        Some(ValueType::ArrayValue(a)) => {
            serde_json::json!({ "array": a.values.iter().map(canonical).collect::<Vec<_>>() })
        }
        other => serde_json::json!(format!("{other:?}")),
    };
    serde_json::json!({ "v": inner, "meaning": v.meaning, "excluded": v.exclude_from_indexes })
}

/// The keys of `entities`.
fn keys(entities: &[pb::Entity]) -> Vec<pb::Key> {
    entities.iter().filter_map(|e| e.key.clone()).collect()
}

/// The one `.overall_export_metadata` under `folder`.
fn overall_under(folder: &Path) -> PathBuf {
    let mut found = Vec::new();
    let mut stack = vec![folder.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            match path.is_dir() {
                true => stack.push(path),
                false if path.to_string_lossy().ends_with(".overall_export_metadata") => {
                    found.push(path)
                }
                false => {}
            }
        }
    }
    assert_eq!(found.len(), 1, "{found:?}");
    found.remove(0)
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("exports-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

async fn start() -> Server {
    Server::start(Options {
        port: 0,
        ..Options::default()
    })
    .await
    .unwrap()
}

/// How many entities of `kind` in the default namespace of `project` a query with `filter`
/// returns from the server on `port`, page by page.
async fn count(port: u16, project: &str, kind: &str, filter: Option<pb::Filter>) -> usize {
    let mut client = client(port).await;
    let (mut total, mut cursor) = (0, Vec::new());
    loop {
        let batch = client
            .run_query(pb::RunQueryRequest {
                project_id: project.to_owned(),
                query_type: Some(pb::run_query_request::QueryType::Query(pb::Query {
                    kind: vec![pb::KindExpression { name: kind.into() }],
                    filter: filter.clone(),
                    start_cursor: cursor,
                    ..pb::Query::default()
                })),
                ..pb::RunQueryRequest::default()
            })
            .await
            .unwrap()
            .into_inner()
            .batch
            .unwrap();
        total += batch.entity_results.len();
        if batch.more_results != pb::query_result_batch::MoreResultsType::NotFinished as i32 {
            return total;
        }
        cursor = batch.end_cursor;
    }
}

fn equals(property: &str, v: ValueType) -> pb::Filter {
    compare(property, pb::property_filter::Operator::Equal, v)
}

fn compare(property: &str, op: pb::property_filter::Operator, v: ValueType) -> pb::Filter {
    pb::Filter {
        filter_type: Some(pb::filter::FilterType::PropertyFilter(pb::PropertyFilter {
            property: Some(pb::PropertyReference {
                name: property.into(),
            }),
            op: op as i32,
            value: Some(value(v)),
        })),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_legacy_emulators_export_imports_equal_and_queryable() {
    let Some(legacy) = Legacy::start() else {
        return;
    };
    let mut entities = entities();
    // An array of indexed and excluded values: the legacy emulator holds (and answers) its
    // indexed ones first, as the format keeps them.
    entities.push(entity(
        Some(key("", &[("Mixed", name("m"))])),
        vec![(
            "a",
            array(vec![
                value(ValueType::IntegerValue(1)),
                excluded(value(ValueType::IntegerValue(2))),
                value(ValueType::IntegerValue(3)),
            ]),
        )],
    ));
    write(legacy.port, "exp", &entities).await;
    let folder = scratch("legacy-out");
    let (status, answer) = post(
        legacy.port,
        "/v1/projects/exp:export",
        &serde_json::json!({ "outputUrlPrefix": folder }),
    );
    assert_eq!(status, 200, "{answer}");
    let overall = overall_under(&folder);

    let server = start().await;
    let port = server.addr().port();
    let (status, answer) = post(
        port,
        "/v1/projects/exp:import",
        &serde_json::json!({ "inputUrl": overall }),
    );
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["done"], true, "{answer}");
    assert_eq!(
        answer["metadata"]["@type"],
        "type.googleapis.com/google.datastore.admin.v1.ImportEntitiesMetadata"
    );
    assert_eq!(
        answer["metadata"]["progressEntities"]["workCompleted"],
        entities.len().to_string()
    );

    let keys = keys(&entities);
    let theirs = lookup(legacy.port, "exp", &keys).await;
    let ours = lookup(port, "exp", &keys).await;
    assert_eq!(theirs.len(), entities.len());
    assert_eq!(ours, theirs);

    // Queryable: indexed values are indexed, excluded ones are not.
    assert_eq!(
        count(
            port,
            "exp",
            "All",
            Some(equals("s", ValueType::StringValue("héllo".into())))
        )
        .await,
        1
    );
    assert_eq!(
        count(
            port,
            "exp",
            "All",
            Some(equals("long", ValueType::StringValue("x".repeat(2000))))
        )
        .await,
        0
    );
    let at_least = compare(
        "i",
        pb::property_filter::Operator::GreaterThanOrEqual,
        ValueType::IntegerValue(700),
    );
    assert_eq!(count(port, "exp", "Many", Some(at_least)).await, 500);
    assert_eq!(count(port, "exp", "Many", None).await, 1200);
    server.stop().await;
    let _ = std::fs::remove_dir_all(&folder);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_servers_export_imports_into_the_legacy_emulator_equal() {
    let Some(legacy) = Legacy::start() else {
        return;
    };
    let entities = entities();
    let server = start().await;
    let port = server.addr().port();
    write(port, "back", &entities).await;
    let folder = scratch("server-out");
    let (status, answer) = post(
        port,
        "/v1/projects/back:export",
        &serde_json::json!({ "outputUrlPrefix": folder }),
    );
    assert_eq!(status, 200, "{answer}");
    let url = answer["response"]["outputUrl"].as_str().unwrap().to_owned();
    assert_eq!(PathBuf::from(&url), overall_under(&folder));
    let (status, answer) = post(
        legacy.port,
        "/v1/projects/back:import",
        &serde_json::json!({ "inputUrl": url }),
    );
    assert_eq!(status, 200, "{answer}");
    let keys = keys(&entities);
    let theirs = lookup(legacy.port, "back", &keys).await;
    let ours = lookup(port, "back", &keys).await;
    assert_eq!(ours.len(), entities.len());
    assert_eq!(theirs, ours);
    server.stop().await;
    let _ = std::fs::remove_dir_all(&folder);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_api_exports_and_imports_with_entity_filters() {
    use admin::datastore_admin_client::DatastoreAdminClient;
    let entities = entities();
    let (from, into) = (start().await, start().await);
    write(from.addr().port(), "adm", &entities).await;
    let folder = scratch("admin-out");
    let mut exporting = DatastoreAdminClient::connect(format!("http://{}", from.emulator_host()))
        .await
        .unwrap();
    let operation = exporting
        .export_entities(admin::ExportEntitiesRequest {
            project_id: "adm".into(),
            output_url_prefix: folder.display().to_string(),
            entity_filter: Some(admin::EntityFilter {
                kinds: vec!["Nsk".into(), "All".into()],
                namespace_ids: vec!["".into(), "ns1".into()],
            }),
            ..admin::ExportEntitiesRequest::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(operation.done);
    let Some(gcloud_sdk::google::longrunning::operation::Result::Response(response)) =
        operation.result
    else {
        panic!("{operation:?}");
    };
    let response: admin::ExportEntitiesResponse =
        gcloud_sdk::prost::Message::decode(response.value.as_slice()).unwrap();
    // One set per namespace and kind, as the legacy emulator lays them out.
    let set = Path::new(&response.output_url).parent().unwrap();
    assert!(set.join("namespace_ns1/kind_Nsk/output-0").exists());
    assert!(set.join("default_namespace/kind_All/output-0").exists());

    let mut importing = DatastoreAdminClient::connect(format!("http://{}", into.emulator_host()))
        .await
        .unwrap();
    importing
        .import_entities(admin::ImportEntitiesRequest {
            project_id: "adm".into(),
            input_url: response.output_url.clone(),
            entity_filter: Some(admin::EntityFilter {
                kinds: vec![],
                namespace_ids: vec!["ns1".into()],
            }),
            ..admin::ImportEntitiesRequest::default()
        })
        .await
        .unwrap();
    // Only ns1's entity passed both filters.
    let wanted: Vec<pb::Entity> = entities
        .iter()
        .filter(|e| {
            let key = e.key.as_ref().unwrap();
            key.partition_id.as_ref().unwrap().namespace_id == "ns1"
        })
        .cloned()
        .collect();
    assert_eq!(wanted.len(), 1);
    let all_keys = keys(&entities);
    let ours = lookup(into.addr().port(), "adm", &all_keys).await;
    assert_eq!(
        ours,
        lookup(from.addr().port(), "adm", &keys(&wanted)).await
    );

    let refused = importing
        .import_entities(admin::ImportEntitiesRequest {
            project_id: "adm".into(),
            input_url: "relative/x.overall_export_metadata".into(),
            ..admin::ImportEntitiesRequest::default()
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::InvalidArgument);
    from.stop().await;
    into.stop().await;
    let _ = std::fs::remove_dir_all(&folder);
}

/// The `output-0` of an export of `entities`, and its overall metadata.
async fn exported(name: &str, entities: &[pb::Entity]) -> (PathBuf, PathBuf) {
    let server = start().await;
    write(server.addr().port(), "dmg", entities).await;
    let folder = scratch(name);
    let mut exporting = admin::datastore_admin_client::DatastoreAdminClient::connect(format!(
        "http://{}",
        server.emulator_host()
    ))
    .await
    .unwrap();
    exporting
        .export_entities(admin::ExportEntitiesRequest {
            project_id: "dmg".into(),
            output_url_prefix: folder.display().to_string(),
            ..admin::ExportEntitiesRequest::default()
        })
        .await
        .unwrap();
    server.stop().await;
    let overall = overall_under(&folder);
    let output = overall
        .parent()
        .unwrap()
        .join("all_namespaces/all_kinds/output-0");
    (overall, output)
}

/// Imports `overall` into a new in-memory engine through the API: the outcome, and how many
/// `Many` entities it then holds.
async fn import_fresh(overall: &Path) -> (Result<u64, ExportError>, usize) {
    let backend: std::sync::Arc<dyn datastore_entity::backend::Backend> =
        std::sync::Arc::new(datastore_entity::backend::embedded::Embedded::in_memory());
    let service = datastore_entity_server::serve::Service::new(backend);
    let outcome = import(&service, "dmg", overall, &Filter::default(), &mut |_| {})
        .await
        .map(|p| p.entities);
    let mut held = 0;
    let mut cursor = Vec::new();
    loop {
        let batch = service
            .run_query(pb::RunQueryRequest {
                project_id: "dmg".into(),
                query_type: Some(pb::run_query_request::QueryType::Query(pb::Query {
                    kind: vec![pb::KindExpression {
                        name: "Many".into(),
                    }],
                    start_cursor: cursor,
                    ..pb::Query::default()
                })),
                ..pb::RunQueryRequest::default()
            })
            .await
            .unwrap()
            .batch
            .unwrap();
        held += batch.entity_results.len();
        if batch.more_results != pb::query_result_batch::MoreResultsType::NotFinished as i32 {
            return (outcome, held);
        }
        cursor = batch.end_cursor;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_export_is_refused_with_the_file_and_record_named() {
    let entities: Vec<pb::Entity> = entities()
        .into_iter()
        .filter(|e| e.key.as_ref().unwrap().path[0].kind == "Many")
        .collect();
    let (overall, output) = exported("damaged", &entities).await;
    let intact = std::fs::read(&output).unwrap();
    assert_eq!(import_fresh(&overall).await.0.unwrap(), 1200);

    // A flipped byte in the 700th record or so: its checksum no longer matches. The first
    // batch (500 entities) was committed before; nothing after it.
    let mut flipped = intact.clone();
    let at = intact.len() * 700 / 1200;
    flipped[at] ^= 0x40;
    std::fs::write(&output, &flipped).unwrap();
    let (outcome, held) = import_fresh(&overall).await;
    match outcome {
        Err(ExportError::Damaged {
            path,
            record,
            reason,
            ..
        }) => {
            assert_eq!(path, output);
            assert!((650..750).contains(&record), "{record}");
            assert!(reason.contains("checksum"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(held, 500);

    // Cut short inside a record.
    std::fs::write(&output, &intact[..intact.len() - 100]).unwrap();
    let (outcome, _) = import_fresh(&overall).await;
    let error = outcome.unwrap_err();
    assert!(
        error.to_string().contains("output-0: record 1199"),
        "{error}"
    );

    // Cut short between records: fewer entities than the metadata counts.
    let mut reader_end = 0;
    let mut at = 0;
    while at + 7 <= intact.len() {
        let length = u16::from_le_bytes([intact[at + 4], intact[at + 5]]) as usize;
        if at + 7 + length > intact.len() - 300 || (at % 32768) + 7 + length > 32768 {
            break;
        }
        at += 7 + length;
        reader_end = at;
    }
    std::fs::write(&output, &intact[..reader_end]).unwrap();
    let error = import_fresh(&overall).await.0.unwrap_err();
    assert!(
        error.to_string().contains("where the metadata says 1200"),
        "{error}"
    );

    // A whole, checksummed record that holds no entity.
    let garbage = b"\xff\xff\xff not an entity";
    let crc = crc32c::crc32c_append(crc32c::crc32c(&[1]), garbage)
        .rotate_right(15)
        .wrapping_add(0xa282_ead8);
    let mut record = crc.to_le_bytes().to_vec();
    record.extend_from_slice(&(garbage.len() as u16).to_le_bytes());
    record.push(1);
    record.extend_from_slice(garbage);
    std::fs::write(&output, &record).unwrap();
    match import_fresh(&overall).await.0 {
        Err(ExportError::Damaged { record, offset, .. }) => assert_eq!((record, offset), (0, 0)),
        other => panic!("{other:?}"),
    }

    // The REST answer names them too.
    let server = start().await;
    let (status, answer) = post(
        server.addr().port(),
        "/v1/projects/dmg:import",
        &serde_json::json!({ "inputUrl": overall }),
    );
    assert_eq!(status, 400);
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("output-0: record 0"),
        "{answer}"
    );
    server.stop().await;
    let _ = std::fs::remove_dir_all(overall.parent().unwrap().parent().unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_export_through_the_rust_api_reads_back_the_same() {
    let entities = entities();
    let server = start().await;
    write(server.addr().port(), "rs", &entities).await;
    let backend: std::sync::Arc<dyn datastore_entity::backend::Backend> =
        std::sync::Arc::new(datastore_entity::backend::embedded::Embedded::in_memory());
    let service = datastore_entity_server::serve::Service::new(std::sync::Arc::clone(&backend));
    write_service(&service, "rs", &entities).await;
    let folder = scratch("rust-api");
    let mut seen = Vec::new();
    let exported = export(&service, "rs", &folder, &Filter::default(), &mut |p| {
        seen.push(p)
    })
    .await
    .unwrap();
    assert_eq!(exported.progress.entities, entities.len() as u64);
    assert!(seen.windows(2).all(|w| w[0].entities <= w[1].entities));
    let copy = start().await;
    copy.import("rs", &exported.overall, &Filter::default(), &mut |_| {})
        .await
        .unwrap();
    let keys = keys(&entities);
    assert_eq!(
        lookup(copy.addr().port(), "rs", &keys).await,
        lookup(server.addr().port(), "rs", &keys).await
    );
    server.stop().await;
    copy.stop().await;
    let _ = std::fs::remove_dir_all(&folder);
}

async fn write_service(
    service: &datastore_entity_server::serve::Service,
    project: &str,
    entities: &[pb::Entity],
) {
    for chunk in entities.chunks(500) {
        service.commit(upserts(project, chunk)).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_command_line_exports_a_file_and_imports_at_start() {
    use std::io::BufRead as _;
    let entities = entities();
    let folder = scratch("cli");
    std::fs::create_dir_all(&folder).unwrap();
    let data = folder.join("data.db");
    let server = Server::start(Options {
        port: 0,
        data: Some(data.clone()),
        ..Options::default()
    })
    .await
    .unwrap();
    write(server.addr().port(), "cli", &entities).await;
    let expected = lookup(server.addr().port(), "cli", &keys(&entities)).await;
    server.stop().await;

    let binary = env!("CARGO_BIN_EXE_datastore-entity-server");
    let out = Command::new(binary)
        .args(["export", "--data"])
        .arg(&data)
        .arg("--to")
        .arg(folder.join("out"))
        .args(["--project", "cli"])
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{printed}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        printed.contains(&format!("exported {} entities", entities.len())),
        "{printed}"
    );
    let overall = overall_under(&folder.join("out"));
    assert!(
        printed.contains(&overall.display().to_string()),
        "{printed}"
    );

    // Imported at start into the export's own project, the progress printed.
    let mut child = Command::new(binary)
        .args(["--port", "0", "--import"])
        .arg(overall.parent().unwrap())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut port = None;
    let done = format!("imported {} entities", entities.len());
    for line in lines.by_ref() {
        let line = line.unwrap();
        if let Some(at) = line.find("http://127.0.0.1:") {
            port = line[at + 17..].trim().parse::<u16>().ok();
        }
        if line.contains(&done) {
            break;
        }
    }
    let port = port.expect("the server said where it listens");
    assert_eq!(lookup(port, "cli", &keys(&entities)).await, expected);
    let _ = post(port, "/shutdown", &serde_json::json!({}));
    assert!(child.wait().unwrap().success());
    let _ = std::fs::remove_dir_all(&folder);
}
