//! Metadata queries over the REST form (issue #51), structured and in GQL, refereed by
//! Google's legacy emulator (the Firestore emulator refuses them); and GQL's queries and
//! aggregations over the REST form, refereed by the Firestore emulator, and what the legacy
//! one serves of them (no aggregations, nor `OR`, `IN` or `!=`) by it too: the same commits
//! and queries, as JSON, to the server and to the emulator, and the answers compared (times
//! and cursors aside).

use datastore_entity_server::{Options, Server};
use datastore_entity_tests::harness::{self, Backend};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// POSTs `body` to `host`'s `method` of project `project`: the HTTP status and the JSON.
async fn post(host: &str, project: &str, method: &str, body: &Value) -> (u16, Value) {
    let body = body.to_string();
    let mut stream = tokio::net::TcpStream::connect(host).await.unwrap();
    let request = format!(
        "POST /v1/projects/{project}:{method} HTTP/1.1\r\nHost: {host}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    // Read until the body is whole: the emulator may keep the connection open.
    let mut response = Vec::new();
    let mut buffer = [0; 8192];
    while !harness::http_response_whole(&response) {
        let n = stream.read(&mut buffer).await.unwrap();
        if n == 0 {
            break;
        }
        response.extend_from_slice(&buffer[..n]);
    }
    let response = String::from_utf8_lossy(&response);
    let status = response.split(' ').nth(1).unwrap().parse().unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    // The emulator answers in chunks.
    let body = match head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        true => unchunked(body),
        false => body.to_owned(),
    };
    (status, serde_json::from_str(&body).unwrap_or(Value::Null))
}

/// A chunked body's data.
fn unchunked(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let size = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if size == 0 {
            break;
        }
        out.push_str(&rest[..size]);
        body = &rest[size + 2..];
    }
    out
}

/// What differs between two answers to the same request, left out: times (the legacy
/// emulator gives none) and cursors; the structured query a GQL text became (the legacy
/// emulator leaves it out); whether more results come (the legacy emulator says
/// `MORE_RESULTS_AFTER_LIMIT` after every batch, the Firestore emulator nothing after an
/// aggregation; the server says what the service says, checked apart); and where the service
/// documents a field the Firestore emulator answers otherwise, as the server does: the
/// skipped results' cursor (set whenever results were skipped; the emulator leaves it out) and
/// a result's version (set for full entities; the emulator gives keys-only results one too).
fn stable(value: &mut Value) {
    const VOLATILE: [&str; 2] = ["endCursor", "cursor"];
    const LEFT_OUT: [&str; 7] = [
        "readTime",
        "createTime",
        "updateTime",
        "query",
        "moreResults",
        "skippedCursor",
        "version",
    ];
    match value {
        Value::Object(map) => {
            for name in LEFT_OUT {
                map.remove(name);
            }
            for (name, inner) in map.iter_mut() {
                match VOLATILE.contains(&name.as_str()) {
                    true => *inner = Value::Null,
                    false => stable(inner),
                }
            }
        }
        Value::Array(values) => values.iter_mut().for_each(stable),
        _ => {}
    }
}

fn key(namespace: &str, path: Value) -> Value {
    json!({"partitionId": {"namespaceId": namespace}, "path": path})
}

fn gql(namespace: &str, text: &str) -> Value {
    json!({
        "partitionId": {"namespaceId": namespace},
        "gqlQuery": {"queryString": text, "allowLiterals": true},
    })
}

fn query(namespace: &str, query: Value) -> Value {
    json!({"partitionId": {"namespaceId": namespace}, "query": query})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_queries_over_rest_answer_as_the_legacy_emulator() {
    let Some((server, hosts)) = beside(Backend::Datastore).await else {
        return;
    };
    let project = format!("rest-metadata-{}", std::process::id());
    let mutations = json!([
        {"upsert": {"key": key("m1", json!([{"kind": "Alpha", "name": "a"}])), "properties": {
            "n": {"integerValue": "1"}, "s": {"stringValue": "x"},
            "when": {"timestampValue": "2024-01-02T03:04:05Z"},
            "e": {"entityValue": {"properties": {"x": {"doubleValue": 1.5}}}},
            "hidden": {"stringValue": "h", "excludeFromIndexes": true}}}},
        {"upsert": {"key": key("m1", json!([{"kind": "Beta", "name": "b"}])), "properties": {
            "n": {"stringValue": "one"}, "k": {"keyValue": key("m1", json!([{"kind": "Alpha", "name": "a"}]))}}}},
        {"upsert": {"key": key("m2", json!([{"kind": "Gamma", "id": "7"}])), "properties": {
            "g": {"geoPointValue": {"latitude": 1.0, "longitude": 2.0}}, "z": {"nullValue": null}}}},
        {"upsert": {"key": key("", json!([{"kind": "Delta", "name": "d"}])), "properties": {}}}
    ]);
    let kind_key = |name: &str| key("m1", json!([{"kind": "__kind__", "name": name}]));
    let requests = [
        query("m1", json!({"kind": [{"name": "__kind__"}]})),
        query("m2", json!({"kind": [{"name": "__kind__"}]})),
        query("", json!({"kind": [{"name": "__namespace__"}]})),
        query(
            "",
            json!({"kind": [{"name": "__namespace__"}],
            "projection": [{"property": {"name": "__key__"}}]}),
        ),
        query("m1", json!({"kind": [{"name": "__property__"}]})),
        query(
            "m1",
            json!({"kind": [{"name": "__property__"}],
            "projection": [{"property": {"name": "__key__"}}]}),
        ),
        query(
            "m1",
            json!({"kind": [{"name": "__property__"}], "filter": {"propertyFilter": {
            "property": {"name": "__key__"}, "op": "HAS_ANCESTOR", "value": {"keyValue": kind_key("Beta")}}}}),
        ),
        query(
            "m1",
            json!({"kind": [{"name": "__kind__"}], "filter": {"propertyFilter": {
            "property": {"name": "__key__"}, "op": "GREATER_THAN", "value": {"keyValue": kind_key("Alpha")}}}}),
        ),
        query("m1", json!({"kind": [{"name": "__kind__"}], "limit": 1})),
        // The same through GQL.
        gql("m1", "SELECT * FROM __kind__"),
        gql(
            "m1",
            "SELECT __key__ FROM __property__ WHERE __key__ HAS ANCESTOR KEY(__kind__, 'Alpha')",
        ),
        gql("", "SELECT * FROM __namespace__"),
        gql("m1", "SELECT * FROM Alpha WHERE n = 1"),
    ];
    let mut answers: Vec<Vec<Value>> = Vec::new();
    for host in &hosts {
        let body = json!({"mode": "NON_TRANSACTIONAL", "mutations": mutations});
        let (status, answer) = post(host, &project, "commit", &body).await;
        assert_eq!(status, 200, "{host}: {answer}");
        let mut each = Vec::new();
        for request in &requests {
            let (status, mut answer) = post(host, &project, "runQuery", request).await;
            assert_eq!(status, 200, "{host}: {request} → {answer}");
            if *host == hosts[1] {
                let more = match request.get("query").and_then(|q| q.get("limit")) {
                    Some(_) => "MORE_RESULTS_AFTER_LIMIT",
                    None => "NO_MORE_RESULTS",
                };
                assert_eq!(answer["batch"]["moreResults"], more, "{request}");
            }
            stable(&mut answer);
            each.push(answer);
        }
        answers.push(each);
    }
    same(&answers, &requests.iter().collect::<Vec<_>>());
    server.stop().await;
}

/// The emulator's answers (`answers[0]`) and the server's (`answers[1]`) to `requests` are
/// the same, one by one.
fn same(answers: &[Vec<Value>], requests: &[&Value]) {
    for (i, (emulator, ours)) in answers[0].iter().zip(&answers[1]).enumerate() {
        assert_eq!(
            ours, emulator,
            "request {i}: {}\nthe server, then the emulator",
            requests[i]
        );
    }
}

/// The emulator of `backend`, or `None` when it is missing outside CI (skipped, said why).
fn referee(backend: Backend) -> Option<String> {
    match harness::emulator_host(backend) {
        Ok(host) => Some(host),
        Err(reason) if std::env::var_os("CI").is_some() => {
            panic!("CI needs the emulator: {reason}")
        }
        Err(reason) => {
            eprintln!("skipped: {reason}");
            None
        }
    }
}

/// A server in this process beside the emulator of `backend`: the server, and both hosts
/// (the emulator's first); `None` when the emulator is missing outside CI.
async fn beside(backend: Backend) -> Option<(Server, [String; 2])> {
    let emulator = referee(backend)?;
    let server = Server::start(Options {
        port: 0,
        ..Options::default()
    })
    .await
    .unwrap();
    let hosts = [emulator, server.emulator_host()];
    Some((server, hosts))
}

fn gql_bound(namespace: &str, text: &str, named: Value) -> Value {
    json!({
        "partitionId": {"namespaceId": namespace},
        "gqlQuery": {"queryString": text, "allowLiterals": true, "namedBindings": named},
    })
}

/// The items the GQL tests query, in namespace `g`.
fn items() -> Vec<Value> {
    (1..=12)
        .map(|i| {
            let color = ["red", "green", "blue"][i as usize % 3];
            json!({"upsert": {"key": key("g", json!([{"kind": "Item", "name": format!("i{i:02}")}])),
            "properties": {
                "n": {"integerValue": i.to_string()},
                "price": {"doubleValue": f64::from(i) * 1.5},
                "color": {"stringValue": color},
                "tags": {"arrayValue": {"values": [{"stringValue": format!("t{}", i % 4)}]}},
            }}})
        })
        .collect()
}

/// GQL both emulators serve without a composite index: a range with `LIMIT` and `OFFSET`,
/// keys only in key order, `DISTINCT`.
fn served_by_both(namespace: &str) -> [Value; 3] {
    [
        gql(
            namespace,
            "SELECT * FROM Item WHERE n > 3 AND n <= 8 ORDER BY n LIMIT 3 OFFSET 1",
        ),
        gql(
            namespace,
            "SELECT __key__ FROM Item WHERE tags = 't1' ORDER BY __key__",
        ),
        gql(namespace, "SELECT DISTINCT color FROM Item ORDER BY color"),
    ]
}

/// The GQL `requests` (`runQuery`) and `aggregations` (`runAggregationQuery`), and a
/// malformed one, sent as JSON to the server and to the emulator of `backend` over the items:
/// the same answers.
async fn gql_over_rest(backend: Backend, requests: &[Value], aggregations: &[Value]) {
    let Some((server, hosts)) = beside(backend).await else {
        return;
    };
    let project = format!(
        "rest-gql-{}-{}",
        format!("{backend:?}").to_lowercase(),
        std::process::id()
    );
    let namespace = "g";
    let mutations = items();
    let mut answers: Vec<Vec<Value>> = Vec::new();
    for host in &hosts {
        let body = json!({"mode": "NON_TRANSACTIONAL", "mutations": mutations});
        let (status, answer) = post(host, &project, "commit", &body).await;
        assert_eq!(status, 200, "{host}: {answer}");
        let mut each = Vec::new();
        let calls = requests
            .iter()
            .map(|r| ("runQuery", r))
            .chain(aggregations.iter().map(|r| ("runAggregationQuery", r)));
        for (method, request) in calls {
            let (status, mut answer) = post(host, &project, method, request).await;
            assert_eq!(status, 200, "{host}: {request} → {answer}");
            stable(&mut answer);
            each.push(answer);
        }
        // A mistake: refused by both, as INVALID_ARGUMENT.
        let (status, answer) = post(
            host,
            &project,
            "runQuery",
            &gql(namespace, "SELECT * FRM Item"),
        )
        .await;
        assert_eq!(status, 400, "{host}: {answer}");
        assert_eq!(
            answer["error"]["status"], "INVALID_ARGUMENT",
            "{host}: {answer}"
        );
        answers.push(each);
    }
    same(
        &answers,
        &requests.iter().chain(aggregations).collect::<Vec<_>>(),
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gql_queries_and_aggregations_over_rest_answer_as_the_firestore_emulator() {
    let namespace = "g";
    let requests = [
        gql(
            namespace,
            "SELECT * FROM Item WHERE color = 'red' ORDER BY n DESC",
        ),
        gql(
            namespace,
            "SELECT * FROM Item WHERE color = 'red' OR n = 2 ORDER BY n",
        ),
        gql(
            namespace,
            "SELECT * FROM Item WHERE color IN ARRAY('red', 'blue') AND n != 3 ORDER BY n",
        ),
        gql(
            namespace,
            "SELECT * FROM Item WHERE color NOT IN ARRAY('red') ORDER BY n",
        ),
        gql_bound(
            namespace,
            "SELECT * FROM Item WHERE color = @c AND n >= @least ORDER BY n",
            json!({"c": {"value": {"stringValue": "green"}}, "least": {"value": {"integerValue": "4"}}}),
        ),
    ];
    let aggregations = [
        gql(namespace, "SELECT COUNT(*) FROM Item"),
        gql(
            namespace,
            "SELECT COUNT(*) AS total, SUM(n) AS s, AVG(price) AS a FROM Item WHERE color = 'blue'",
        ),
        gql(
            namespace,
            "AGGREGATE COUNT_UP_TO(5) OVER (SELECT * FROM Item WHERE n > 2)",
        ),
        gql(
            namespace,
            "AGGREGATE SUM(price), AVG(n) OVER (SELECT * FROM Item WHERE color IN ARRAY('red', 'green'))",
        ),
    ];
    let requests: Vec<Value> = requests
        .into_iter()
        .chain(served_by_both(namespace))
        .collect();
    gql_over_rest(Backend::Firestore, &requests, &aggregations).await;
}

/// What the legacy emulator serves of GQL (no `OR`, `IN`, `!=`, aggregations), with the
/// composite indexes its `--require_indexes` knows (none of this kind's): the same answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gql_queries_over_rest_answer_as_the_legacy_emulator() {
    let namespace = "g";
    let requests = [
        gql(namespace, "SELECT * FROM Item WHERE color = 'red'"),
        gql_bound(
            namespace,
            "SELECT * FROM Item WHERE color = @c AND tags = @t",
            json!({"c": {"value": {"stringValue": "green"}}, "t": {"value": {"stringValue": "t1"}}}),
        ),
    ];
    let requests: Vec<Value> = requests
        .into_iter()
        .chain(served_by_both(namespace))
        .collect();
    gql_over_rest(Backend::Datastore, &requests, &[]).await;
}
