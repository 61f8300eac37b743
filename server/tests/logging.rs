//! The binary's log on standard error (`--log`): warnings by default (what a user must see, such
//! as a shutdown that closed requests still unfinished), each request with its status, gRPC
//! code and time at `debug`, nothing at `off`, and a filter that is not one refused.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use datastore_entity::prelude::*;
use gcloud_sdk::google::datastore::v1 as pb;
use pb::datastore_client::DatastoreClient;

#[derive(Entity, Debug, Clone, PartialEq)]
struct Note {
    #[key]
    name: KeyName,
    text: String,
}

/// The binary, started on a free port with `args`: the child, and the `host:port` it printed.
fn start(args: &[&str]) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_datastore-entity-server"))
        .args(["--port", "0"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the server starts");
    let mut lines = BufReader::new(child.stdout.take().expect("its output")).lines();
    let host = lines
        .by_ref()
        .map_while(Result::ok)
        .find_map(|line| {
            line.trim()
                .strip_prefix("export DATASTORE_EMULATOR_HOST=")
                .map(str::to_owned)
        })
        .expect("the server says where it listens");
    // The rest of its output is read (and dropped) so that it never blocks on a full pipe.
    std::thread::spawn(move || lines.for_each(drop));
    (child, host)
}

/// One HTTP/1.1 request on a new connection; the status line.
fn http(host: &str, method: &str, path: &str, body: &str) -> String {
    let mut stream = TcpStream::connect(host).expect("the server accepts");
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    response.lines().next().unwrap_or_default().to_owned()
}

/// Asks the server to stop and waits for it: what it printed on standard error.
fn stop(mut child: Child, host: &str) -> String {
    assert!(http(host, "POST", "/shutdown", "").contains("200"));
    let status = child.wait().expect("the server stops");
    assert!(status.success(), "the server stopped with {status}");
    let mut log = String::new();
    child
        .stderr
        .take()
        .expect("its standard error")
        .read_to_string(&mut log)
        .unwrap();
    log
}

/// A connection holding a REST call's body unfinished (10 of the 100 bytes it declares): the
/// server's shutdown waits for it, then closes it.
fn stalled(host: &str) -> TcpStream {
    let mut stream = TcpStream::connect(host).expect("the server accepts");
    write!(
        stream,
        "POST /v1/projects/p:lookup HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
         Content-Length: 100\r\n\r\n{{\"keys\": "
    )
    .unwrap();
    stream.flush().unwrap();
    // The server has read the head before the shutdown is asked.
    std::thread::sleep(Duration::from_millis(200));
    stream
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_log_debug_each_request_is_a_line_with_its_status_code_and_time() {
    let (child, host) = start(&["--log", "debug"]);
    let db = Db::cloud_builder("logged")
        .endpoint(format!("http://{host}"))
        .build()
        .await
        .expect("a handle on the server");
    let note = Note {
        name: KeyName::new("first").unwrap(),
        text: "kept".to_owned(),
    };
    db.put(&note).await.expect("a put over gRPC");
    // An entity of a reserved kind (`__x__`) written: INVALID_ARGUMENT, over gRPC.
    let mut client = DatastoreClient::connect(format!("http://{host}"))
        .await
        .expect("a gRPC channel");
    let reserved = pb::Key {
        partition_id: Some(pb::PartitionId {
            project_id: "logged".to_owned(),
            ..Default::default()
        }),
        path: vec![pb::key::PathElement {
            kind: "__x__".to_owned(),
            id_type: Some(pb::key::path_element::IdType::Name("a".to_owned())),
        }],
    };
    let refused = client
        .commit(pb::CommitRequest {
            project_id: "logged".to_owned(),
            mode: pb::commit_request::Mode::NonTransactional as i32,
            mutations: vec![pb::Mutation {
                operation: Some(pb::mutation::Operation::Upsert(pb::Entity {
                    key: Some(reserved),
                    properties: Default::default(),
                })),
                ..Default::default()
            }],
            ..Default::default()
        })
        .await
        .expect_err("a reserved kind is refused");
    assert_eq!(refused.code(), tonic::Code::InvalidArgument, "{refused:?}");
    // Over REST: a body that is not JSON (400), then GET / (200).
    assert!(http(&host, "POST", "/v1/projects/logged:lookup", "{not json").contains("400"));
    assert!(http(&host, "GET", "/", "").contains("200"));
    let log = stop(child, &host);

    let line = |needle: &str| {
        log.lines()
            .find(|line| line.contains(needle))
            .unwrap_or_else(|| panic!("no line with `{needle}` in the log:\n{log}"))
            .to_owned()
    };
    let commit = line("path=/google.datastore.v1.Datastore/Commit status=200 code=Ok micros=");
    assert!(commit.contains("DEBUG"), "{commit}");
    line("path=/google.datastore.v1.Datastore/Commit status=200 code=InvalidArgument micros=");
    line("method=POST path=/v1/projects/logged:lookup status=400 code=- micros=");
    assert!(line("method=GET path=/ ").contains("status=200"));
    assert!(
        !log.contains(" h2::") && !log.contains(" hyper"),
        "the libraries under the server stay at warn:\n{log}"
    );
    assert!(line("path=/shutdown").contains("status=200"));
    // The time is a number of microseconds.
    let micros: u64 = commit
        .rsplit("micros=")
        .next()
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or_else(|| panic!("no time in {commit}"));
    assert!(micros < 60_000_000, "{commit}");
}

#[test]
fn by_default_warnings_are_shown_and_requests_are_not() {
    let (child, host) = start(&[]);
    assert!(http(&host, "GET", "/", "").contains("200"));
    let _held = stalled(&host);
    let log = stop(child, &host);
    let warning = log
        .lines()
        .find(|line| line.contains("requests still unfinished after the shutdown grace"))
        .unwrap_or_else(|| panic!("no warning of the closed request in:\n{log}"));
    assert!(warning.contains("WARN"), "{warning}");
    assert!(warning.contains("connections=1"), "{warning}");
    assert!(
        !log.contains("request method="),
        "requests are logged only at debug:\n{log}"
    );
    assert!(
        !log.contains("listening"),
        "info is not shown by default:\n{log}"
    );
}

#[test]
fn with_log_off_nothing_is_printed_on_standard_error() {
    let (child, host) = start(&["--log=off"]);
    let _held = stalled(&host);
    let log = stop(child, &host);
    assert_eq!(log, "", "--log off printed");
}

#[test]
fn a_log_filter_that_is_not_one_is_refused_with_what_is() {
    let binary = env!("CARGO_BIN_EXE_datastore-entity-server");
    for args in [
        &["--log", "verbose"][..],
        &["--log", "datastore_entity="],
        &["--log", "warn,datastore_entity=loud"],
        &["export", "--log", "noisy"],
    ] {
        let out = Command::new(binary).args(args).output().unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {said}");
        let filter = args[args.len() - 1];
        assert!(
            said.starts_with(&format!("--log {filter}: not a filter (a level: off, error, warn, info, debug, trace; or module=level")),
            "{args:?}: {said}"
        );
    }
    // A filter by module is one.
    let (child, host) = start(&["--log", "warn,datastore_entity_server=info"]);
    let log = stop(child, &host);
    assert!(
        log.contains("INFO datastore_entity_server: datastore-entity-server listening"),
        "{log}"
    );
    assert!(!log.contains("request method="), "{log}");
}

#[test]
fn a_closed_standard_error_loses_the_lines_and_stops_nothing() {
    let (mut child, host) = start(&["--log", "debug"]);
    // Nobody reads the log any more: each line written gets a broken pipe.
    drop(child.stderr.take());
    for _ in 0..20 {
        assert!(http(&host, "GET", "/", "").contains("200"));
    }
    assert!(
        http(
            &host,
            "POST",
            "/v1/projects/closed:lookup",
            "{\"keys\": []}"
        )
        .contains("200"),
        "the server serves on"
    );
    assert!(http(&host, "POST", "/shutdown", "").contains("200"));
    let status = child.wait().expect("the server stops");
    assert!(status.success(), "the server stopped with {status}");
}
