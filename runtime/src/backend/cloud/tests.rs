use super::call::status_error;
use super::connect::url_encode;
use super::*;
use gcloud_sdk::tonic;

#[test]
fn service_statuses_keep_their_code_and_message() {
    let error = status_error(tonic::Status::failed_precondition(
        "no matching index found. recommended index is:\n- kind: Post\n  properties:\n  - name: a\n  - name: b",
    ));
    match error {
        Error::MissingIndex {
            index_yaml,
            message,
        } => {
            assert!(index_yaml.starts_with("- kind: Post"), "{index_yaml}");
            assert!(message.contains("no matching index"));
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        status_error(tonic::Status::aborted("too much contention")),
        Error::Aborted { .. }
    ));
    assert!(status_error(tonic::Status::unavailable("down")).is_retryable());
    match status_error(tonic::Status::deadline_exceeded("slow")) {
        Error::Service { code, message } => {
            assert_eq!(
                (code.name(), message.as_str()),
                ("DEADLINE_EXCEEDED", "slow")
            );
        }
        other => panic!("{other:?}"),
    }
    // A deadline is not retried: a commit that timed out may have been applied.
    assert!(!status_error(tonic::Status::deadline_exceeded("slow")).is_retryable());
    assert!(matches!(
        query_error(
            "K",
            true,
            status_error(tonic::Status::invalid_argument("Invalid cursor."))
        ),
        Error::InvalidCursor { .. }
    ));
}

#[tokio::test]
async fn explain_sends_the_services_explain_options() {
    let cloud = connect::Settings::new("p".to_owned());
    let cloud = Cloud {
        calls: Calls {
            client: Client::Plain(
                gcloud_sdk::google::datastore::v1::datastore_client::DatastoreClient::new(
                    tonic::transport::Endpoint::from_static("http://127.0.0.1:9").connect_lazy(),
                ),
            ),
            routing: "project_id=p".parse().unwrap(),
            endpoint: "http://127.0.0.1:9".to_owned(),
            database: String::new(),
            timeout: cloud.timeout,
            retry: cloud.retry,
        },
        partitions: Arc::new(Partitions::new("p", "")),
        begin_with_reads: false,
        aggregations_begin: AtomicBool::new(true),
        indexes: std::sync::Mutex::default(),
        groups_limited: AtomicBool::new(false),
        newer_surface: std::sync::OnceLock::new(),
    };
    let spec = QuerySpec {
        kind: "Post".to_owned(),
        limit: Some(3),
        ..QuerySpec::default()
    };
    for analyze in [false, true] {
        let request = cloud.run_query_request(&spec, spec.limit, Reading::Outside, Some(analyze));
        assert_eq!(
            request.explain_options,
            Some(pb::ExplainOptions { analyze })
        );
    }
    let plain = cloud.run_query_request(&spec, spec.limit, Reading::Outside, None);
    assert_eq!(plain.explain_options, None);
}

#[test]
fn the_routing_header_names_project_and_database() {
    assert_eq!(url_encode("my-project"), "my-project");
    assert_eq!(url_encode("a b&c=d/é"), "a%20b%26c%3Dd%2F%C3%A9");
}
