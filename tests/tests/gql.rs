//! GQL over gRPC (issue #51): the server's answers to GQL texts against Google's two
//! emulators'. Each test writes one small data set through raw commits to each runner, in a
//! namespace of its own, then runs GQL texts on all three and compares the entities in order,
//! the structured query the text became (`RunQueryResponse.query`), aggregation values and, for
//! a mistake, the status code.
//!
//! The Firestore emulator is the referee: the server must answer as it does. The legacy
//! emulator is compared too where it agrees with the Firestore emulator; each case where it
//! does not is marked `firestore_only` with the reason. It serves no `RunAggregationQuery`, so
//! aggregations are compared with the Firestore emulator alone. Without the emulators the tests
//! are skipped (outside CI; in CI they fail).
//!
//! ```sh
//! cargo test -p datastore-entity-tests --test gql
//! ```

use std::collections::{BTreeMap, HashMap};

use datastore_entity_tests::harness::{self, Backend, PROJECT};
use gcloud_sdk::google::datastore::v1 as pb;
use pb::datastore_client::DatastoreClient;
use pb::gql_query_parameter::ParameterType;
use pb::key::path_element::IdType;
use pb::value::ValueType;
use tonic::Code;
use tonic::transport::Channel;

/// One of the three that answer.
struct Runner {
    name: &'static str,
    client: DatastoreClient<Channel>,
}

/// The server and both emulators, each connected; `None` when an emulator is missing outside CI.
async fn runners() -> Option<Vec<Runner>> {
    let emulator =
        |backend| harness::shared_emulator(backend).map(|e| format!("127.0.0.1:{}", e.port));
    let hosts = [
        ("server", Some(harness::server_host().to_owned())),
        ("Firestore emulator", emulator(Backend::Firestore)),
        ("legacy emulator", emulator(Backend::Datastore)),
    ];
    let mut runners = Vec::new();
    for (name, host) in hosts {
        let channel = Channel::from_shared(format!("http://{}", host?))
            .expect("an address")
            .connect()
            .await
            .expect("the runner answers");
        runners.push(Runner {
            name,
            client: DatastoreClient::new(channel),
        });
    }
    Some(runners)
}

fn partition(namespace: &str) -> pb::PartitionId {
    pb::PartitionId {
        project_id: PROJECT.to_owned(),
        namespace_id: namespace.to_owned(),
        ..pb::PartitionId::default()
    }
}

fn value(value_type: ValueType) -> pb::Value {
    pb::Value {
        value_type: Some(value_type),
        ..pb::Value::default()
    }
}

fn key(namespace: &str, path: &[(&str, &str)]) -> pb::Key {
    pb::Key {
        partition_id: Some(partition(namespace)),
        path: path
            .iter()
            .map(|(kind, name)| pb::key::PathElement {
                kind: (*kind).to_owned(),
                id_type: Some(IdType::Name((*name).to_owned())),
            })
            .collect(),
    }
}

/// Six tasks `t0`…`t5` (`n` = i, `parity`, `tags`, `score` = i / 2, `done` every third) and
/// a `Note` under `t1`, written to `namespace` on every runner.
async fn write_data(runners: &mut [Runner], namespace: &str) {
    let mut entities: Vec<pb::Entity> = (0..6_i64)
        .map(|i| {
            let parity = ["even", "odd"][usize::try_from(i % 2).unwrap()];
            let tags = [parity, "all"].map(|t| value(ValueType::StringValue(t.to_owned())));
            let properties = [
                ("n", value(ValueType::IntegerValue(i))),
                ("parity", value(ValueType::StringValue(parity.to_owned()))),
                (
                    "tags",
                    value(ValueType::ArrayValue(pb::ArrayValue {
                        values: tags.to_vec(),
                    })),
                ),
                ("score", value(ValueType::DoubleValue(i as f64 / 2.0))),
                ("done", value(ValueType::BooleanValue(i % 3 == 0))),
            ];
            pb::Entity {
                key: Some(key(namespace, &[("Task", &format!("t{i}"))])),
                properties: properties
                    .into_iter()
                    .map(|(n, v)| (n.to_owned(), v))
                    .collect(),
            }
        })
        .collect();
    entities.push(pb::Entity {
        key: Some(key(namespace, &[("Task", "t1"), ("Note", "first")])),
        properties: HashMap::from([("n".to_owned(), value(ValueType::IntegerValue(10)))]),
    });
    for runner in runners {
        let request = pb::CommitRequest {
            project_id: PROJECT.to_owned(),
            mode: pb::commit_request::Mode::NonTransactional as i32,
            mutations: entities
                .iter()
                .map(|e| pb::Mutation {
                    operation: Some(pb::mutation::Operation::Upsert(e.clone())),
                    ..pb::Mutation::default()
                })
                .collect(),
            ..pb::CommitRequest::default()
        };
        runner
            .client
            .commit(request)
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", runner.name));
    }
}

/// The runners, the data set written to `namespace` on each; `None` when an emulator is
/// missing outside CI.
async fn with_data(namespace: &str) -> Option<Vec<Runner>> {
    let mut runners = runners().await?;
    write_data(&mut runners, namespace).await;
    Some(runners)
}

/// A GQL request: its text and bindings.
#[derive(Clone, Default)]
struct Gql {
    text: String,
    named: Vec<(&'static str, ParameterType)>,
    positional: Vec<ParameterType>,
    no_literals: bool,
}

fn gql(text: &str) -> Gql {
    Gql {
        text: text.to_owned(),
        ..Gql::default()
    }
}

impl Gql {
    fn named(mut self, name: &'static str, value: ParameterType) -> Gql {
        self.named.push((name, value));
        self
    }

    fn positional(mut self, value: ParameterType) -> Gql {
        self.positional.push(value);
        self
    }

    fn no_literals(mut self) -> Gql {
        self.no_literals = true;
        self
    }

    fn message(&self) -> pb::GqlQuery {
        let parameter = |p: &ParameterType| pb::GqlQueryParameter {
            parameter_type: Some(p.clone()),
        };
        pb::GqlQuery {
            query_string: self.text.clone(),
            allow_literals: !self.no_literals,
            named_bindings: self
                .named
                .iter()
                .map(|(n, p)| ((*n).to_owned(), parameter(p)))
                .collect(),
            positional_bindings: self.positional.iter().map(parameter).collect(),
        }
    }
}

fn int(n: i64) -> ParameterType {
    ParameterType::Value(value(ValueType::IntegerValue(n)))
}

fn text(s: &str) -> ParameterType {
    ParameterType::Value(value(ValueType::StringValue(s.to_owned())))
}

/// A query's answer as compared: each result's key path and properties, the structured
/// query (cursors taken out: each runner's are its own), whether it held a cursor; or the code.
#[derive(Debug, PartialEq)]
enum Answer {
    Rows {
        rows: Vec<(String, BTreeMap<String, String>)>,
        query: Option<Box<pb::Query>>,
        cursors: (bool, bool),
    },
    Refused(Code),
}

fn path(key: &pb::Key) -> String {
    let element = |e: &pb::key::PathElement| match &e.id_type {
        Some(IdType::Name(name)) => format!("{}:{name}", e.kind),
        other => format!("{}:{other:?}", e.kind),
    };
    key.path.iter().map(element).collect::<Vec<_>>().join("/")
}

async fn run(runner: &mut Runner, namespace: &str, request: &Gql) -> (Answer, Vec<u8>) {
    let asked = pb::RunQueryRequest {
        project_id: PROJECT.to_owned(),
        partition_id: Some(partition(namespace)),
        query_type: Some(pb::run_query_request::QueryType::GqlQuery(
            request.message(),
        )),
        ..pb::RunQueryRequest::default()
    };
    let response = match runner.client.run_query(asked).await {
        Ok(response) => response.into_inner(),
        Err(status) => return (Answer::Refused(status.code()), Vec::new()),
    };
    let batch = response.batch.unwrap_or_default();
    let rows = batch
        .entity_results
        .iter()
        .map(|r| {
            let entity = r.entity.clone().unwrap_or_default();
            let properties = entity
                .properties
                .iter()
                .map(|(name, v)| (name.clone(), format!("{:?}", v.value_type)))
                .collect();
            (path(&entity.key.unwrap_or_default()), properties)
        })
        .collect();
    let mut query = response.query;
    let mut cursors = (false, false);
    if let Some(query) = &mut query {
        cursors = (!query.start_cursor.is_empty(), !query.end_cursor.is_empty());
        query.start_cursor.clear();
        query.end_cursor.clear();
    }
    let answer = Answer::Rows {
        rows,
        query: query.map(Box::new),
        cursors,
    };
    (answer, batch.end_cursor)
}

/// Runs `request` on every runner (`cursor` binds `@c` to each runner's own cursor): the
/// server must answer as the Firestore emulator, and as the legacy emulator unless
/// `firestore_only`. Returns the server's answer.
async fn same(
    runners: &mut [Runner],
    namespace: &str,
    request: &Gql,
    cursors: Option<&[Vec<u8>]>,
    firestore_only: bool,
) -> Answer {
    let mut answers = Vec::new();
    for (i, runner) in runners.iter_mut().enumerate() {
        let mut request = request.clone();
        if let Some(cursors) = cursors {
            request = request.named("c", ParameterType::Cursor(cursors[i].clone()));
        }
        answers.push(run(runner, namespace, &request).await.0);
    }
    let legacy = answers.pop().expect("three runners");
    let firestore = answers.pop().expect("three runners");
    let server = answers.pop().expect("three runners");
    assert_eq!(
        server, firestore,
        "{}: the server against the Firestore emulator",
        request.text
    );
    if !firestore_only {
        assert_eq!(
            server, legacy,
            "{}: the server against the legacy emulator",
            request.text
        );
    }
    server
}

fn rows(answer: &Answer) -> Vec<&str> {
    match answer {
        Answer::Rows { rows, .. } => rows.iter().map(|(path, _)| path.as_str()).collect(),
        Answer::Refused(code) => panic!("refused: {code:?}"),
    }
}

#[tokio::test]
async fn queries_answer_as_the_emulators() {
    let ns = "gql-queries";
    let Some(mut runners) = with_data(ns).await else {
        return;
    };
    let both = [
        "SELECT * FROM Task",
        "select * from Task where n >= 2 and n < 5 order by n desc",
        "SELECT * FROM Task WHERE parity = 'odd' AND done = TRUE",
        "SELECT __key__ FROM Task WHERE n > 3",
        "SELECT DISTINCT parity FROM Task",
        "SELECT * FROM Task WHERE missing IS NULL",
        "SELECT * FROM Task WHERE score = 1.5",
        "SELECT * FROM Task WHERE score = .5e1 AND n = +2",
        "SELECT * FROM Task WHERE score = -1.5e-3",
        "SELECT * FROM Task WHERE n = 01 AND done = fAlSe",
        "SELECT * FROM Task WHERE missing = NULL",
        "SELECT * FROM Task WHERE parity = 'it''s' AND tags = \"say \"\"x\"\"\"",
        "SELECT * FROM Task WHERE parity = 'tab\\t'",
        "SELECT * FROM Task WHERE when = DATETIME('2013-09-29T09:30:20.00002-08:00')",
        "SELECT * FROM Task WHERE data = BLOB('aGVsbG8_-w')",
        "SELECT * FROM Task WHERE ref = KEY(Task, 1, Note, 'x')",
        "SELECT * FROM Task WHERE ref = KEY(NAMESPACE('other'), Task, -1)",
        "SELECT * WHERE __key__ = KEY(PROJECT('datastore-entity-test'), Task, 't2')",
        "SELECT * WHERE __key__ HAS ANCESTOR KEY(Task, 't1')",
        "SELECT * FROM Note WHERE KEY(Task, 't1') HAS DESCENDANT __key__",
        "SELECT * FROM Task WHERE __key__ > KEY(Task, 't3')",
        "SELECT *",
        "SELECT * FROM Task LIMIT 0",
    ];
    for text in both {
        same(&mut runners, ns, &gql(text), None, false).await;
    }
    // Where the legacy emulator differs, the Firestore emulator answers as the service: the
    // legacy one refuses OR ("unsupported composite property operator"), IN and NOT IN
    // (INVALID_ARGUMENT), `!=` (UNKNOWN), a descending `__key__` order after a range
    // (INVALID_ARGUMENT), and wants a composite index (FAILED_PRECONDITION) for an equality
    // or a projection beside an order, or an array's value beside an order.
    let firestore_only = [
        "SELECT * FROM Task WHERE parity = \"even\" ORDER BY score DESC LIMIT 2 OFFSET 1",
        "SELECT n, parity FROM Task ORDER BY n",
        "SELECT DISTINCT ON (parity) parity, n FROM Task ORDER BY parity, n",
        "SELECT * FROM Task WHERE 'odd' IN tags ORDER BY n",
        "SELECT * FROM Task WHERE n IN ARRAY(1, 3, 99)",
        "SELECT * FROM Task WHERE n NOT IN ARRAY(1, 3)",
        "SELECT * FROM Task WHERE n != 2",
        "SELECT * FROM `Task` WHERE `n` <= 1 ORDER BY __key__ DESC",
        "SELECT * FROM Task WHERE n = 1 OR n = 4 AND parity = 'even' ORDER BY n",
        "SELECT * FROM Task WHERE (n = 1 OR n = 2) AND parity = 'odd'",
        "SELECT * FROM Task WHERE n IN ARRAY(1, 2) AND parity IN ARRAY('odd')",
    ];
    for text in firestore_only {
        same(&mut runners, ns, &gql(text), None, true).await;
    }
    let precedence = same(
        &mut runners,
        ns,
        &gql("SELECT * FROM Task WHERE n = 1 OR n = 4 AND parity = 'even' ORDER BY n"),
        None,
        true,
    )
    .await;
    assert_eq!(rows(&precedence), ["Task:t1", "Task:t4"]);
}

#[tokio::test]
async fn bindings_and_cursors_answer_as_the_emulators() {
    let ns = "gql-bindings";
    let Some(mut runners) = with_data(ns).await else {
        return;
    };
    let request = gql("SELECT * FROM Task WHERE parity = @1 AND done = @done LIMIT @2")
        .named(
            "done",
            ParameterType::Value(value(ValueType::BooleanValue(false))),
        )
        .positional(text("even"))
        .positional(int(1));
    let answer = same(&mut runners, ns, &request, None, false).await;
    assert_eq!(rows(&answer), ["Task:t2"]);
    let range = gql("SELECT * FROM Task WHERE n >= @min ORDER BY n LIMIT 2").named("min", int(3));
    assert_eq!(
        rows(&same(&mut runners, ns, &range, None, false).await),
        ["Task:t3", "Task:t4"]
    );
    // Without literals, bindings alone are taken; any literal is refused.
    same(
        &mut runners,
        ns,
        &request.clone().no_literals(),
        None,
        false,
    )
    .await;
    let literal = gql("SELECT * FROM Task WHERE n >= @min LIMIT 2").named("min", int(1));
    assert_eq!(
        same(&mut runners, ns, &literal.no_literals(), None, false).await,
        Answer::Refused(Code::InvalidArgument)
    );
    let null = gql("SELECT * FROM Task WHERE missing IS NULL").no_literals();
    same(&mut runners, ns, &null, None, false).await;
    // Each runner's own cursor, after the first two tasks.
    let mut cursors = Vec::new();
    for runner in &mut runners {
        let first = gql("SELECT * FROM Task ORDER BY n LIMIT 2");
        cursors.push(run(runner, ns, &first).await.1);
    }
    let with_cursor = [
        "SELECT * FROM Task ORDER BY n OFFSET @c",
        "SELECT * FROM Task ORDER BY n OFFSET @c + 1",
        "SELECT * FROM Task ORDER BY n OFFSET @c + @skip",
        "SELECT * FROM Task ORDER BY n LIMIT @c",
        "SELECT * FROM Task ORDER BY n LIMIT FIRST(@c, 1)",
        "SELECT * FROM Task ORDER BY n LIMIT FIRST(5, @c)",
    ];
    for text in with_cursor {
        let mut request = gql(text);
        if text.contains("@skip") {
            request = request.named("skip", int(2));
        }
        let answer = same(&mut runners, ns, &request, Some(&cursors), false).await;
        if text == with_cursor[0] {
            assert_eq!(rows(&answer), ["Task:t2", "Task:t3", "Task:t4", "Task:t5"]);
        }
    }
    // An unused named binding passes; an unused positional one is refused.
    let named = gql("SELECT * FROM Task WHERE n = 1").named("x", int(1));
    assert_eq!(
        rows(&same(&mut runners, ns, &named, None, false).await),
        ["Task:t1"]
    );
    let unused = gql("SELECT * FROM Task WHERE n = @2")
        .positional(int(1))
        .positional(int(2));
    let absent = gql("SELECT * FROM Task WHERE n = @2 OR n = @x")
        .positional(int(1))
        .positional(int(2));
    let cursor_as_value = gql("SELECT * FROM Task WHERE n = @c");
    for request in [unused, absent] {
        assert_eq!(
            same(&mut runners, ns, &request, None, false).await,
            Answer::Refused(Code::InvalidArgument)
        );
    }
    same(&mut runners, ns, &cursor_as_value, Some(&cursors), false).await;
}

#[tokio::test]
async fn malformed_texts_are_refused_as_the_emulators_refuse_them() {
    let ns = "gql-errors";
    let Some(mut runners) = with_data(ns).await else {
        return;
    };
    let malformed = [
        "",
        "SELECT",
        "SELECT FROM Task",
        "SELECT * FROM",
        "SELECT * FROM Task WHERE",
        "SELECT * FROM Task WHERE n = 1 AND",
        "SELECT * FROM Task WHERE n == 1",
        "SELECT * FROM Task WHERE n <> 1",
        "SELECT * FROM 'Task'",
        "SELECT * FROM Task WHERE n = 'open",
        "SELECT * FROM Task LIMIT 2, 5",
        "SELECT * FROM Task LIMIT -1",
        "SELECT * FROM Task LIMIT 2147483648",
        "SELECT * FROM Task OFFSET 1 + 2",
        "SELECT * FROM Task LIMIT FIRST(2, 5)",
        "SELECT DISTINCT * FROM Task",
        "SELECT * FROM Task WHERE n = 9223372036854775808",
        "SELECT * FROM Task WHERE k = KEY(Task, 0)",
        "SELECT * FROM Task WHERE k = KEY('Task', 'a')",
        "SELECT * FROM Task WHERE b = BLOB('aGVsbG8=')",
        "SELECT * FROM Task WHERE d = DATETIME('2013-09-29')",
        "SELECT * FROM Task WHERE n = 1 -- comment",
        "SELECT * FROM Task trailing",
        "SELECT * FROM Task WHERE n IN ARRAY()",
        "SELECT * FROM Task WHERE n = ARRAY(1, 2)",
        "SELECT * WHERE n = 1",
        "SELECT * FROM Task WHERE (n = 1",
    ];
    for text in malformed {
        let answer = same(&mut runners, ns, &gql(text), None, false).await;
        assert_eq!(answer, Answer::Refused(Code::InvalidArgument), "{text}");
    }
    let deep = format!(
        "SELECT * FROM Task WHERE {}n = 1{}",
        "(".repeat(300),
        ")".repeat(300)
    );
    let mut server = runners.remove(0);
    assert_eq!(
        run(&mut server, ns, &gql(&deep)).await.0,
        Answer::Refused(Code::InvalidArgument)
    );
}

/// An aggregation's results as compared: alias to value.
async fn aggregate(
    runner: &mut Runner,
    namespace: &str,
    request: &Gql,
) -> Result<BTreeMap<String, String>, Code> {
    let asked = pb::RunAggregationQueryRequest {
        project_id: PROJECT.to_owned(),
        partition_id: Some(partition(namespace)),
        query_type: Some(pb::run_aggregation_query_request::QueryType::GqlQuery(
            request.message(),
        )),
        ..pb::RunAggregationQueryRequest::default()
    };
    let response = runner
        .client
        .run_aggregation_query(asked)
        .await
        .map_err(|s| s.code())?;
    let batch = response.into_inner().batch.unwrap_or_default();
    Ok(batch
        .aggregation_results
        .iter()
        .flat_map(|r| r.aggregate_properties.iter())
        .map(|(alias, v)| (alias.clone(), format!("{:?}", v.value_type)))
        .collect())
}

#[tokio::test]
async fn aggregations_answer_as_the_firestore_emulator() {
    let ns = "gql-aggregations";
    let Some(mut runners) = with_data(ns).await else {
        return;
    };
    // The legacy emulator serves no RunAggregationQuery (UNIMPLEMENTED): the Firestore
    // emulator alone is compared.
    let [server, firestore, _legacy] = &mut runners[..] else {
        panic!("three runners")
    };
    let texts = [
        "SELECT COUNT(*) FROM Task",
        "select count(*) as total from Task where n > 1",
        "SELECT COUNT_UP_TO(4) AS up FROM Task",
        "SELECT SUM(n), AVG(score) FROM Task WHERE parity = 'odd'",
        "AGGREGATE COUNT(*), SUM(n), AVG(n) OVER (SELECT * FROM Task WHERE n >= 1)",
        "AGGREGATE COUNT(*) AS c, SUM(n) AS s, AVG(n) OVER (SELECT * FROM Task)",
        "AGGREGATE COUNT(*) AS property_2, SUM(n) OVER (SELECT * FROM Task)",
        "AGGREGATE COUNT(*) OVER (SELECT * FROM Task ORDER BY n LIMIT 2)",
        "AGGREGATE COUNT(*) AS property_1, SUM(n) OVER (SELECT * FROM Task)",
        "AGGREGATE COUNT(*) OVER SELECT * FROM Task",
        "AGGREGATE SUM(n) OVER (SELECT * FROM Task) LIMIT 2",
        "AGGREGATE COUNT(n) OVER (SELECT * FROM Task)",
        "SELECT COUNT(*), n FROM Task",
        "SELECT COUNT_UP_TO(0) FROM Task",
        "SELECT COUNT_UP_TO(-1) FROM Task",
        "SELECT COUNT_UP_TO(@1) FROM Task",
    ];
    for text in texts {
        let ours = aggregate(server, ns, &gql(text)).await;
        let theirs = aggregate(firestore, ns, &gql(text)).await;
        assert_eq!(ours, theirs, "{text}");
    }
    let bound = gql("AGGREGATE COUNT_UP_TO(2) AS c OVER (SELECT * FROM Task WHERE parity = @p)")
        .named("p", text("even"));
    let ours = aggregate(server, ns, &bound).await;
    assert_eq!(ours, aggregate(firestore, ns, &bound).await);
    assert_eq!(
        ours.unwrap().get("c").map(String::as_str),
        Some("Some(IntegerValue(2))")
    );
}
