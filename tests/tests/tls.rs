//! The Google Cloud backend over TLS, as it reaches Google: a loopback TLS server of the
//! test's own (`tests/tls/`: a test certificate authority and a server certificate for
//! `localhost` and 127.0.0.1) in front of the Firestore emulator; the client trusts that
//! authority through `CloudBuilder::tls_roots`, with the crate's own rustls crypto provider
//! (nothing installed by the test). And without an emulator or credentials, `Db::cloud` is an
//! error, never a panic, and sends nothing anywhere.

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use datastore_entity::Error;
use datastore_entity::prelude::*;
use datastore_entity_tests::harness::{Backend, Emulator, PROJECT};
use datastore_entity_tests::{Account, account};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::pki_types::pem::PemObject as _;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

const CA: &[u8] = include_bytes!("../tls/ca.pem");
const CERT: &[u8] = include_bytes!("../tls/server.pem");
const KEY: &[u8] = include_bytes!("../tls/server.key");

/// A TLS server on a free loopback port, passing the decrypted stream to `target`.
async fn tls_terminator(target: u16) -> u16 {
    let certs = vec![CertificateDer::from_pem_slice(CERT).expect("the test certificate")];
    let key = PrivateKeyDer::from_pem_slice(KEY).expect("the test key");
    // The server side picks its provider explicitly: the client side must manage alone.
    let provider = Arc::new(tokio_rustls::rustls::crypto::aws_lc_rs::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .expect("a valid certificate and key");
    config.alpn_protocols = vec![b"h2".to_vec()];
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(client).await else {
                    return;
                };
                let Ok(mut server) = TcpStream::connect((Ipv4Addr::LOCALHOST, target)).await else {
                    return;
                };
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut server).await;
            });
        }
    });
    port
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cloud_backend_works_over_tls() {
    let emulator = match Emulator::start(Backend::Firestore) {
        Ok(emulator) => emulator,
        Err(reason) if std::env::var_os("CI").is_some() => panic!("CI needs it: {reason}"),
        Err(reason) => return eprintln!("skipped: {reason}"),
    };
    let port = tls_terminator(emulator.port).await;
    let db = Db::cloud_builder(PROJECT)
        .endpoint(format!("https://localhost:{port}"))
        .tls_roots(CA)
        .without_credentials()
        .build()
        .await
        .unwrap()
        .namespace("tls")
        .unwrap();
    let key = db.put(&account("ann")).await.unwrap();
    assert_eq!(
        db.get(&key).await.unwrap().unwrap().email,
        "ann@example.com"
    );
    assert_eq!(db.query::<Account>().count().await.unwrap(), 1);

    // The same server, not trusted: the handshake fails, clearly.
    let untrusted = Db::cloud_builder(PROJECT)
        .endpoint(format!("https://localhost:{port}"))
        .without_credentials()
        .timeout(Duration::from_secs(5))
        .build()
        .await;
    match untrusted {
        Err(Error::Unavailable { reason }) => {
            assert!(reason.contains(&format!("localhost:{port}")), "{reason}");
            assert!(reason.to_lowercase().contains("certificate"), "{reason}");
        }
        other => panic!("an untrusted certificate is refused, found {other:?}"),
    }
}

/// `Db::cloud` on a machine with no emulator set and no credentials: an error saying what to
/// do, quickly, and no panic. Run in a child process whose environment has no way to reach
/// Google (no credentials file, the metadata server on a closed loopback port).
#[test]
fn without_an_emulator_or_credentials_db_cloud_is_a_clear_error() {
    let exe = std::env::current_exe().unwrap();
    let home = std::env::temp_dir().join(format!("no-credentials-{}", std::process::id()));
    std::fs::create_dir_all(&home).unwrap();
    let output = std::process::Command::new(exe)
        .args([
            "--ignored",
            "--exact",
            "scenario_db_cloud_without_anything",
            "--nocapture",
        ])
        .env_remove("DATASTORE_EMULATOR_HOST")
        .env_remove("GOOGLE_APPLICATION_CREDENTIALS")
        .env("HOME", &home)
        .env("CLOUDSDK_CONFIG", home.join("gcloud"))
        .env("GCE_METADATA_HOST", "127.0.0.1:9")
        .env("GCE_METADATA_IP", "127.0.0.1:9")
        .output()
        .unwrap();
    std::fs::remove_dir_all(&home).unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("Credentials"), "{stdout}");
}

/// A credentials file that is not one (`GOOGLE_APPLICATION_CREDENTIALS` naming garbage):
/// `Error::Credentials`, before anything is sent.
#[test]
fn an_unusable_credentials_file_is_a_clear_error() {
    let exe = std::env::current_exe().unwrap();
    let home = std::env::temp_dir().join(format!("bad-credentials-{}", std::process::id()));
    std::fs::create_dir_all(&home).unwrap();
    let file = home.join("credentials.json");
    std::fs::write(
        &file,
        "{ \"type\": \"service_account\", \"private_key\": \"nope\"",
    )
    .unwrap();
    let output = std::process::Command::new(exe)
        .args([
            "--ignored",
            "--exact",
            "scenario_db_cloud_with_bad_credentials",
            "--nocapture",
        ])
        .env_remove("DATASTORE_EMULATOR_HOST")
        .env("GOOGLE_APPLICATION_CREDENTIALS", &file)
        .env("HOME", &home)
        .env("CLOUDSDK_CONFIG", home.join("gcloud"))
        .env("GCE_METADATA_HOST", "127.0.0.1:9")
        .env("GCE_METADATA_IP", "127.0.0.1:9")
        .output()
        .unwrap();
    std::fs::remove_dir_all(&home).unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("Credentials"), "{stdout}");
}

#[tokio::test]
#[ignore = "a scenario run in a child process by the test above"]
async fn scenario_db_cloud_with_bad_credentials() {
    let error = Db::cloud("my-project").await.unwrap_err();
    println!("{error:?}\n{error}");
    assert!(matches!(error, Error::Credentials { .. }), "{error:?}");
}

#[tokio::test]
#[ignore = "a scenario run in a child process by the test above"]
async fn scenario_db_cloud_without_anything() {
    let started = Instant::now();
    let error = Db::cloud("my-project").await.unwrap_err();
    println!("{error:?}\n{error}");
    assert!(matches!(error, Error::Credentials { .. }), "{error:?}");
    assert!(
        error
            .to_string()
            .contains("gcloud auth application-default login")
    );
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );
}
