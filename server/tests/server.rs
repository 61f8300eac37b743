//! `datastore-entity-server` as a user meets it: the emulators' plain endpoints, bad requests
//! answered with the service's statuses (and the server still serving), data in a file that
//! outlives the server, projects isolated, many clients at once.

use std::collections::HashMap;
use std::time::Duration;

use datastore_entity::prelude::*;
use datastore_entity_server::{Options, Server};
use gcloud_sdk::google::datastore::v1 as pb;
use pb::datastore_client::DatastoreClient;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tonic::Code;
use tonic::transport::Channel;

#[derive(Entity, Debug, Clone, PartialEq)]
struct Counter {
    #[key]
    name: KeyName,
    n: i64,
}

fn counter(name: &str, n: i64) -> Counter {
    Counter {
        name: KeyName::new(name).unwrap(),
        n,
    }
}

async fn start(data: Option<std::path::PathBuf>) -> Server {
    Server::start(Options {
        port: 0,
        data,
        ..Options::default()
    })
    .await
    .expect("the server starts")
}

async fn db(server: &Server, project: &str) -> Db {
    Db::cloud_builder(project)
        .endpoint(format!("http://{}", server.emulator_host()))
        .build()
        .await
        .expect("a handle on the server")
}

/// One plain HTTP/1.1 request; the status line and the body.
async fn http(server: &Server, method: &str, path: &str) -> (String, String) {
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        server.emulator_host()
    );
    exchange(server, &request).await
}

/// Sends `request` (whole HTTP/1.1 text); the answer's status line and body.
async fn exchange(server: &Server, request: &str) -> (String, String) {
    let mut stream = tokio::net::TcpStream::connect(server.addr()).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response).await;
    let status = response.lines().next().unwrap_or_default().to_owned();
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

/// One REST call (`POST path` with `body`, declaring `declared` bytes): the status line and
/// the body.
async fn rest(server: &Server, path: &str, body: &str, declared: usize) -> (String, String) {
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
         Content-Length: {declared}\r\nConnection: close\r\n\r\n{body}",
        server.emulator_host()
    );
    exchange(server, &request).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rest_calls_answer_what_grpc_answers_and_bound_their_bodies() {
    let server = start(None).await;
    let db = db(&server, "p").await;
    db.put(&counter("a", 9_007_199_254_740_993)).await.unwrap();
    let lookup = r#"{"keys": [{"path": [{"kind": "Counter", "name": "a"}]}]}"#;
    let (status, body) = rest(&server, "/v1/projects/p:lookup", lookup, lookup.len()).await;
    assert!(status.contains("200"), "{status} {body}");
    let answer: serde_json::Value = serde_json::from_str(&body).unwrap();
    let entity = &answer["found"][0]["entity"];
    assert_eq!(entity["key"]["path"][0]["name"], "a");
    assert_eq!(
        entity["properties"]["n"]["integerValue"], "9007199254740993",
        "a 64-bit integer as a string: {body}"
    );
    // Another project's data is not this one's.
    let (_, body) = rest(&server, "/v1/projects/q:lookup", lookup, lookup.len()).await;
    assert!(body.contains("\"missing\""), "{body}");
    let error = |body: &str| -> (u64, String) {
        let error: serde_json::Value = serde_json::from_str(body).unwrap();
        let error = &error["error"];
        (
            error["code"].as_u64().unwrap(),
            error["status"].as_str().unwrap().to_owned(),
        )
    };
    let (status, body) = rest(&server, "/v1/projects/p:lookUp", "{}", 2).await;
    assert!(status.contains("404"), "{status}");
    assert_eq!(error(&body), (404, "NOT_FOUND".to_owned()));
    let (status, body) = rest(&server, "/v1/projects/p:lookup", "{\"keys\": 3}", 11).await;
    assert!(status.contains("400"), "{status}");
    assert_eq!(error(&body), (400, "INVALID_ARGUMENT".to_owned()));
    // A body past the bound is refused before it is read.
    let past = datastore_entity_server::MAX_JSON_BYTES + 1;
    let (status, body) = rest(&server, "/v1/projects/p:commit", "", past).await;
    assert!(status.contains("429"), "{status}");
    assert_eq!(error(&body), (429, "RESOURCE_EXHAUSTED".to_owned()));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_plain_endpoints_answer_as_the_emulators_do() {
    let server = start(None).await;
    let (status, body) = http(&server, "GET", "/").await;
    assert!(status.contains("200"), "{status}");
    assert_eq!(body, "Ok\n");
    let (status, _) = http(&server, "GET", "/elsewhere").await;
    assert!(status.contains("404"), "{status}");
    let db = db(&server, "p").await;
    let key = db.put(&counter("a", 1)).await.unwrap();
    assert!(db.get(&key).await.unwrap().is_some());
    let (status, _) = http(&server, "POST", "/reset").await;
    assert!(status.contains("200"), "{status}");
    assert_eq!(
        db.get(&key).await.unwrap(),
        None,
        "reset dropped everything"
    );
    db.put(&counter("a", 2)).await.unwrap();
    assert_eq!(db.get(&key).await.unwrap(), Some(counter("a", 2)));
    let (status, _) = http(&server, "POST", "/shutdown").await;
    assert!(status.contains("200"), "{status}");
    tokio::time::timeout(Duration::from_secs(10), server.stopping())
        .await
        .expect("POST /shutdown stops the server");
    server.stop().await;
}

fn key(kind: &str, name: &str) -> pb::Key {
    pb::Key {
        partition_id: None,
        path: vec![pb::key::PathElement {
            kind: kind.into(),
            id_type: Some(pb::key::path_element::IdType::Name(name.into())),
        }],
    }
}

fn lookup(keys: Vec<pb::Key>) -> pb::LookupRequest {
    pb::LookupRequest {
        project_id: "p".into(),
        keys,
        ..pb::LookupRequest::default()
    }
}

/// One property `name` of this type (none: a value of no type).
fn one(name: &str, value_type: Option<pb::value::ValueType>) -> HashMap<String, pb::Value> {
    let value = pb::Value {
        value_type,
        exclude_from_indexes: false,
        meaning: 0,
    };
    HashMap::from([(name.to_owned(), value)])
}

/// A non-transactional upsert of `K:name` with `properties`.
fn upsert(
    name: &str,
    properties: std::collections::HashMap<String, pb::Value>,
) -> pb::CommitRequest {
    pb::CommitRequest {
        project_id: "p".into(),
        mode: pb::commit_request::Mode::NonTransactional as i32,
        mutations: vec![pb::Mutation {
            operation: Some(pb::mutation::Operation::Upsert(pb::Entity {
                key: Some(key("K", name)),
                properties,
            })),
            ..pb::Mutation::default()
        }],
        ..pb::CommitRequest::default()
    }
}

/// The call was refused with `code`, its message saying `text`.
fn refused<T>(result: Result<tonic::Response<T>, tonic::Status>, code: Code, text: &str) {
    let status = result.map(|_| ()).expect_err("refused");
    assert_eq!(status.code(), code, "{status:?}");
    assert!(status.message().contains(text), "{text} in {status:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_the_services_status_and_the_server_keeps_serving() {
    let server = start(None).await;
    let channel = Channel::from_shared(format!("http://{}", server.emulator_host()))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut client = DatastoreClient::new(channel).max_encoding_message_size(64 << 20);
    // No project.
    let mut request = lookup(vec![key("K", "a")]);
    request.project_id.clear();
    refused(
        client.lookup(request).await,
        Code::InvalidArgument,
        "project_id",
    );
    // A key without a path, an incomplete key, a key of another project.
    let empty = pb::Key::default();
    refused(
        client.lookup(lookup(vec![empty])).await,
        Code::InvalidArgument,
        "at least one path element",
    );
    let mut incomplete = key("K", "a");
    incomplete.path[0].id_type = None;
    refused(
        client.lookup(lookup(vec![incomplete])).await,
        Code::InvalidArgument,
        "incomplete",
    );
    let mut foreign = key("K", "a");
    foreign.partition_id = Some(pb::PartitionId {
        project_id: "other".into(),
        ..pb::PartitionId::default()
    });
    refused(
        client.lookup(lookup(vec![foreign])).await,
        Code::InvalidArgument,
        "mismatched partition",
    );
    // A value of no known type.
    let unknown = upsert("v", one("x", None));
    refused(
        client.commit(unknown).await,
        Code::InvalidArgument,
        "does not contain a value",
    );
    // A transaction that does not exist.
    let mut request = lookup(vec![key("K", "a")]);
    request.read_options = Some(pb::ReadOptions {
        consistency_type: Some(pb::read_options::ConsistencyType::Transaction(
            b"nope".to_vec(),
        )),
    });
    refused(
        client.lookup(request).await,
        Code::InvalidArgument,
        "transaction",
    );
    let rollback = pb::RollbackRequest {
        project_id: "p".into(),
        transaction: vec![1, 2, 3],
        ..pb::RollbackRequest::default()
    };
    assert!(client.rollback(rollback).await.is_err());
    // GQL that does not read: where, and what was expected.
    let gql = pb::RunQueryRequest {
        project_id: "p".into(),
        query_type: Some(pb::run_query_request::QueryType::GqlQuery(pb::GqlQuery {
            query_string: "SELECT * FROM".into(),
            ..pb::GqlQuery::default()
        })),
        ..pb::RunQueryRequest::default()
    };
    refused(
        client.run_query(gql).await,
        Code::InvalidArgument,
        "GQL query error at 1:14: expected a kind",
    );
    // A 20 MiB message.
    let text = Some(pb::value::ValueType::StringValue("x".repeat(20 << 20)));
    let huge = upsert("big", one("blob", text));
    refused(
        client.commit(huge).await,
        Code::ResourceExhausted,
        "larger than the",
    );
    // Still serving, and nothing of the refused writes was kept.
    let found = client
        .lookup(lookup(vec![
            key("K", "v"),
            key("K", "big"),
            key("K", "keyed"),
        ]))
        .await
        .expect("the server still serves")
        .into_inner();
    assert_eq!((found.found.len(), found.missing.len()), (0, 3));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_in_a_file_outlives_the_server_and_projects_are_isolated() {
    let dir = std::env::temp_dir().join(format!("datastore-entity-server-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("data.redb");
    let server = start(Some(path.clone())).await;
    let (a, b) = (
        db(&server, "project-a").await,
        db(&server, "project-b").await,
    );
    let key = a.put(&counter("shared-name", 1)).await.unwrap();
    b.put(&counter("shared-name", 2)).await.unwrap();
    let key_b = b
        .bind(&Counter::key(KeyName::new("shared-name").unwrap()))
        .unwrap();
    assert_eq!(a.get(&key).await.unwrap(), Some(counter("shared-name", 1)));
    assert_eq!(
        b.get(&key_b).await.unwrap(),
        Some(counter("shared-name", 2))
    );
    server.stop().await;
    let server = start(Some(path)).await;
    let a = db(&server, "project-a").await;
    assert_eq!(
        a.get(&key).await.unwrap(),
        Some(counter("shared-name", 1)),
        "acknowledged before the stop, there after it"
    );
    server.stop().await;
    std::fs::remove_dir_all(&dir).ok();
}

/// An entity value with a key of its own (NDB's `LocalStructuredProperty(keep_keys=True)`, an
/// entity Google's clients embed whole) keeps its key, in memory and in a file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_entity_values_own_key_is_kept_in_memory_and_in_a_file() {
    let dir = std::env::temp_dir().join(format!("datastore-entity-keyed-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("data.redb");
    let text = |s: &str| pb::Value {
        value_type: Some(pb::value::ValueType::StringValue(s.into())),
        ..pb::Value::default()
    };
    let inner = pb::Entity {
        key: Some(key("Inner", "k")),
        properties: HashMap::from([("city".to_owned(), text("Lyon"))]),
    };
    let nested = Some(pb::value::ValueType::EntityValue(inner));
    let embedded = |response: pb::LookupResponse| -> pb::Entity {
        let entity = response.found[0].entity.clone().unwrap();
        match entity.properties["nested"].value_type.clone() {
            Some(pb::value::ValueType::EntityValue(e)) => e,
            other => panic!("an entity value, not {other:?}"),
        }
    };
    for data in [None, Some(path.clone())] {
        let server = start(data.clone()).await;
        let mut client = DatastoreClient::connect(format!("http://{}", server.emulator_host()))
            .await
            .unwrap();
        client
            .commit(upsert("keyed", one("nested", nested.clone())))
            .await
            .unwrap();
        let mut reads = vec![embedded(
            client
                .lookup(lookup(vec![key("K", "keyed")]))
                .await
                .unwrap()
                .into_inner(),
        )];
        if data.is_some() {
            server.stop().await;
            let server = start(data).await;
            let mut client = DatastoreClient::connect(format!("http://{}", server.emulator_host()))
                .await
                .unwrap();
            let found = client.lookup(lookup(vec![key("K", "keyed")])).await;
            reads.push(embedded(found.unwrap().into_inner()));
            server.stop().await;
        } else {
            server.stop().await;
        }
        for read in reads {
            let kept = read.key.expect("the embedded entity's key is kept");
            assert_eq!(kept.path, key("Inner", "k").path);
            assert_eq!(
                read.properties,
                HashMap::from([("city".to_owned(), text("Lyon"))])
            );
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_clients_at_once_lose_no_increment() {
    let server = start(None).await;
    let key = db(&server, "p").await.put(&counter("c", 0)).await.unwrap();
    let mut tasks = Vec::new();
    for _ in 0..6 {
        let db = db(&server, "p").await;
        let key = key.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..10 {
                db.transaction(async |tx| {
                    let mut c = tx.get(&key).await?.expect("created");
                    c.n += 1;
                    tx.put(&c).await?;
                    Ok::<_, Error>(())
                })
                .await
                .expect("a transaction commits, retried on contention");
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let db = db(&server, "p").await;
    assert_eq!(db.get(&key).await.unwrap().map(|c| c.n), Some(60));
    server.stop().await;
}

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(kind = "Post")]
struct Post {
    #[key]
    id: KeyName,
    author: String,
    topic: String,
    rank: i64,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_an_index_yaml_only_the_queries_it_serves_are_answered() {
    let dir = std::env::temp_dir().join(format!("datastore-entity-indexes-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let yaml = dir.join("index.yaml");
    std::fs::write(
        &yaml,
        "indexes:\n- kind: Post\n  ancestor: no\n  properties:\n  - name: author\n  - name: rank\n    direction: desc\n",
    )
    .unwrap();
    let server = Server::start(Options {
        port: 0,
        require_indexes: Some(yaml),
        ..Options::default()
    })
    .await
    .expect("the server starts");
    let db = db(&server, "p").await;
    for (id, author, rank) in [("a", "ann", 1), ("b", "ann", 3), ("c", "bob", 2)] {
        db.put(&Post {
            id: KeyName::new(id).unwrap(),
            author: author.into(),
            topic: "t".into(),
            rank,
        })
        .await
        .unwrap();
    }
    let served = db
        .query::<Post>()
        .filter(Post::AUTHOR.eq("ann"))
        .order(Post::RANK.desc())
        .fetch()
        .await
        .unwrap();
    assert_eq!(
        served.items.iter().map(|p| p.rank).collect::<Vec<_>>(),
        [3, 1],
        "the declared index serves it"
    );
    let refused = db
        .query::<Post>()
        .filter(Post::TOPIC.eq("t"))
        .order(Post::RANK.desc())
        .fetch()
        .await;
    match refused {
        Err(Error::MissingIndex { index_yaml, .. }) => {
            assert!(index_yaml.contains("name: topic"), "{index_yaml}");
        }
        other => panic!("expected the missing index, got {other:?}"),
    }
    server.stop().await;
    // A file that is not an index.yaml: the server does not start, and says why.
    std::fs::write(dir.join("bad.yaml"), "- kind: Post\n  colour: red\n").unwrap();
    let refused = Server::start(Options {
        port: 0,
        require_indexes: Some(dir.join("bad.yaml")),
        ..Options::default()
    })
    .await;
    assert!(
        matches!(&refused, Err(Error::Storage { reason, .. }) if reason.contains("not part of an index.yaml")),
        "{refused:?}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_api_lists_the_indexes_declared_and_built() {
    use admin::datastore_admin_client::DatastoreAdminClient;
    use gcloud_sdk::google::datastore::admin::v1 as admin;
    let server = Server::start(Options {
        port: 0,
        build_indexes: true,
        ..Options::default()
    })
    .await
    .unwrap();
    let db = db(&server, "p").await;
    for (id, author, rank) in [("a", "ann", 1), ("b", "ann", 3), ("c", "bob", 2)] {
        let topic = "t".into();
        let post = Post {
            id: KeyName::new(id).unwrap(),
            author: author.into(),
            topic,
            rank,
        };
        db.put(&post).await.unwrap();
    }
    let channel = Channel::from_shared(format!("http://{}", server.emulator_host()))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut client = DatastoreAdminClient::new(channel);
    let list = |page_size: i32, page_token: String| admin::ListIndexesRequest {
        project_id: "p".into(),
        page_size,
        page_token,
        ..admin::ListIndexesRequest::default()
    };
    let none = client
        .list_indexes(list(0, String::new()))
        .await
        .unwrap()
        .into_inner();
    assert!(none.indexes.is_empty(), "{none:?}");
    // Two queries that need composite indexes build them on their first use.
    for query in [
        db.query::<Post>()
            .filter(Post::AUTHOR.eq("ann"))
            .order(Post::RANK.desc()),
        db.query::<Post>()
            .filter(Post::TOPIC.eq("t"))
            .order(Post::RANK.asc())
            .limit(2),
    ] {
        assert_eq!(query.fetch().await.unwrap().items.len(), 2);
    }
    let all = client
        .list_indexes(list(0, String::new()))
        .await
        .unwrap()
        .into_inner();
    type Described = (String, Vec<(String, i32)>, i32, i32);
    let described: Vec<Described> = all
        .indexes
        .iter()
        .map(|i| {
            let properties = i
                .properties
                .iter()
                .map(|p| (p.name.clone(), p.direction))
                .collect();
            (i.kind.clone(), properties, i.ancestor, i.state)
        })
        .collect();
    use admin::index::{AncestorMode, Direction, State};
    let (asc, desc) = (Direction::Ascending as i32, Direction::Descending as i32);
    let expected = [
        vec![("author".to_owned(), asc), ("rank".to_owned(), desc)],
        vec![("topic".to_owned(), asc), ("rank".to_owned(), asc)],
    ];
    assert_eq!(described.len(), 2, "{described:?}");
    for (kind, properties, ancestor, state) in &described {
        assert_eq!(kind, "Post");
        assert!(expected.contains(properties), "{properties:?}");
        assert_eq!(
            (*ancestor, *state),
            (AncestorMode::None as i32, State::Ready as i32)
        );
    }
    // Page by page, and one by its id.
    let first = client
        .list_indexes(list(1, String::new()))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(first.indexes.len(), 1);
    let second = client
        .list_indexes(list(1, first.next_page_token))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (second.indexes.len(), second.next_page_token.as_str()),
        (1, "")
    );
    assert_ne!(first.indexes[0].index_id, second.indexes[0].index_id);
    let get = |index_id: &str| admin::GetIndexRequest {
        project_id: "p".into(),
        index_id: index_id.into(),
    };
    let one = client
        .get_index(get(&second.indexes[0].index_id))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(one, second.indexes[0]);
    refused(
        client.get_index(get("nothing")).await,
        Code::NotFound,
        "No index",
    );
    server.stop().await;
}
