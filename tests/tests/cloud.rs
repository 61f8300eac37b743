//! The Google Cloud backend's connection: it honours `DATASTORE_EMULATOR_HOST` (with or
//! without a scheme), connects nowhere but its configured endpoint (loopback here: no
//! credentials, no metadata server), and says clearly when that endpoint is unreachable.
//!
//! Environment variables are process-wide (and changing them is `unsafe` in this edition),
//! so the scenarios that need them run in a child process: this test binary, re-executed
//! with `--ignored --exact <scenario>` and the variables set.

use std::io::{Read as _, Write as _};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use datastore_entity::Error;
use datastore_entity::prelude::*;
use datastore_entity_tests::harness::{Backend, PROJECT, shared_emulator};
use datastore_entity_tests::{Account, account, account_key};

/// A loopback TCP proxy to `target` that counts the connections it accepts.
fn counting_proxy(target: u16) -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("a free port");
    let port = listener.local_addr().expect("bound").port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let counter = accepted.clone();
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            counter.fetch_add(1, Ordering::SeqCst);
            let Ok(server) = TcpStream::connect((Ipv4Addr::LOCALHOST, target)) else {
                continue;
            };
            let pipe = |mut from: TcpStream, mut to: TcpStream| {
                std::thread::spawn(move || {
                    let mut buffer = [0u8; 16 * 1024];
                    while let Ok(n) = from.read(&mut buffer) {
                        if n == 0 || to.write_all(&buffer[..n]).is_err() {
                            break;
                        }
                    }
                    let _ = to.shutdown(std::net::Shutdown::Write);
                });
            };
            if let (Ok(c2), Ok(s2)) = (client.try_clone(), server.try_clone()) {
                pipe(c2, server);
                pipe(s2, client);
            }
        }
    });
    (port, accepted)
}

/// Runs scenario `name` of this binary in a child process with `env` set.
fn run_child(name: &str, env: &[(&str, String)], wrapper: Option<&[&str]>) -> std::process::Output {
    let exe = std::env::current_exe().expect("the test binary");
    let mut command = match wrapper {
        Some(wrapper) => {
            let mut c = Command::new(wrapper[0]);
            c.args(&wrapper[1..]).arg(&exe);
            c
        }
        None => Command::new(&exe),
    };
    command
        .args([
            "--ignored",
            "--exact",
            name,
            "--nocapture",
            "--test-threads=1",
        ])
        .env_remove("DATASTORE_EMULATOR_HOST")
        // Poison every other way to reach Google: no credentials file, no metadata server.
        .env(
            "GOOGLE_APPLICATION_CREDENTIALS",
            "/nonexistent/credentials.json",
        )
        .env("GCE_METADATA_HOST", "127.0.0.1:9")
        .env("GCE_METADATA_IP", "127.0.0.1:9");
    static RUN: AtomicUsize = AtomicUsize::new(0);
    command.env(
        "SCENARIO_NAMESPACE",
        format!("scenario-{}", RUN.fetch_add(1, Ordering::SeqCst)),
    );
    for (key, value) in env {
        command.env(key, value);
    }
    let output = command.output().expect("the child runs");
    assert!(
        output.status.success(),
        "scenario {name} failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// Puts, gets, queries and runs a transaction through `Db::cloud`, which finds its
/// endpoint in `DATASTORE_EMULATOR_HOST` (set by the parent).
#[tokio::test]
#[ignore = "a scenario run in a child process by the tests above it"]
async fn scenario_work_through_the_emulator_host() {
    let namespace = std::env::var("SCENARIO_NAMESPACE").expect("set by the parent");
    let db = Db::cloud(PROJECT)
        .await
        .unwrap()
        .namespace(&namespace)
        .unwrap();
    let key = db.put(&account("ann")).await.unwrap();
    assert_eq!(
        db.get(&key).await.unwrap().unwrap().email,
        "ann@example.com"
    );
    assert_eq!(db.query::<Account>().fetch().await.unwrap().items.len(), 1);
    let balance = db
        .transaction(|tx| async move {
            let mut a = tx.get(&account_key("ann")).await?.unwrap();
            a.balance += 3;
            tx.put(&a).await?;
            Ok::<_, Error>(a.balance)
        })
        .await
        .unwrap();
    assert_eq!(balance, 3);
    db.delete(&key).await.unwrap();
}

#[test]
fn emulator_host_is_honoured_with_and_without_a_scheme() {
    let Some(emulator) = shared_emulator(Backend::Firestore) else {
        return;
    };
    for host in [
        format!("127.0.0.1:{}", emulator.port),
        format!("http://127.0.0.1:{}", emulator.port),
    ] {
        run_child(
            "scenario_work_through_the_emulator_host",
            &[("DATASTORE_EMULATOR_HOST", host)],
            None,
        );
    }
}

#[test]
fn the_cloud_backend_connects_nowhere_but_its_endpoint() {
    let Some(emulator) = shared_emulator(Backend::Firestore) else {
        return;
    };
    // Through a counting proxy: every connection the client makes to its endpoint is seen.
    let (proxy, accepted) = counting_proxy(emulator.port);
    run_child(
        "scenario_work_through_the_emulator_host",
        &[("DATASTORE_EMULATOR_HOST", format!("127.0.0.1:{proxy}"))],
        None,
    );
    assert!(
        accepted.load(Ordering::SeqCst) >= 1,
        "the endpoint was not used"
    );

    // Under strace, every TCP connection the process opens goes to that endpoint.
    let strace = Command::new("strace").arg("-V").output();
    if strace.is_err() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI audits every connect() with strace, which is not installed"
        );
        eprintln!("strace is not installed: the connect() audit is skipped (the proxy check ran)");
        return;
    }
    let trace = std::env::temp_dir().join(format!("connect-{}.trace", std::process::id()));
    let trace_arg = trace.display().to_string();
    run_child(
        "scenario_work_through_the_emulator_host",
        &[("DATASTORE_EMULATOR_HOST", format!("127.0.0.1:{proxy}"))],
        Some(&["strace", "-f", "-e", "trace=connect", "-o", &trace_arg]),
    );
    let calls = std::fs::read_to_string(&trace).expect("strace wrote its trace");
    std::fs::remove_file(&trace).ok();
    let inet: Vec<&str> = calls
        .lines()
        .filter(|l| l.contains("connect(") && (l.contains("AF_INET") || l.contains("AF_INET6")))
        .collect();
    assert!(!inet.is_empty(), "strace saw no TCP connection:\n{calls}");
    let expected_port = format!("sin_port=htons({proxy})");
    for line in &inet {
        assert!(
            line.contains(&expected_port) && line.contains("inet_addr(\"127.0.0.1\")"),
            "a connection elsewhere than 127.0.0.1:{proxy}: {line}"
        );
    }
}

#[tokio::test]
async fn an_unreachable_endpoint_is_a_clear_error() {
    // A port nothing listens on. Another test of this binary may start an emulator on a
    // port it found the same way meanwhile: then that one is taken, try another.
    let mut attempts = 0;
    let (closed, error) = loop {
        let closed = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let built = Db::cloud_builder(PROJECT)
            .endpoint(format!("http://127.0.0.1:{closed}"))
            .build()
            .await;
        attempts += 1;
        match built {
            Err(error) => break (closed, error),
            Ok(_) if attempts < 5 => continue,
            Ok(_) => panic!("5 free ports in a row were listened on by the time we connected"),
        }
    };
    match error {
        Error::Unavailable { reason } => {
            assert!(reason.contains(&format!("127.0.0.1:{closed}")), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    let error = Db::cloud_builder("").build().await.unwrap_err();
    assert!(error.to_string().contains("project id is empty"), "{error}");
}
