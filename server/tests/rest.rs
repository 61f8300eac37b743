//! REST and gRPC give the same answers (issue #51): the same requests — every call, every
//! value type, refusals — sent over gRPC to one server and over the REST form to another (as
//! proto3's JSON), and the answers compared, times, versions and transaction ids aside.

use std::collections::HashMap;

use datastore_entity_server::{Options, Server};
use gcloud_sdk::google::datastore::v1 as pb;
use gcloud_sdk::prost::Message;
use pb::datastore_client::DatastoreClient;
use prost_reflect::{DescriptorPool, DynamicMessage, SerializeOptions};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tonic::transport::Channel;

fn pool() -> DescriptorPool {
    DescriptorPool::decode(include_bytes!("../rest/datastore_v1.bin").as_slice()).unwrap()
}

/// `message` (of the API's message `name`) as proto3's JSON.
fn json<T: Message>(name: &str, message: &T) -> serde_json::Value {
    let descriptor = pool()
        .get_message_by_name(&format!("google.datastore.v1.{name}"))
        .unwrap();
    let dynamic = DynamicMessage::decode(descriptor, message.encode_to_vec().as_slice()).unwrap();
    let mut out = serde_json::Serializer::new(Vec::new());
    dynamic
        .serialize_with_options(&mut out, &SerializeOptions::new())
        .unwrap();
    serde_json::from_slice(&out.into_inner()).unwrap()
}

/// The API's message `name` read from its JSON.
fn from_json<T: Message + Default>(name: &str, json: &serde_json::Value) -> T {
    let descriptor = pool()
        .get_message_by_name(&format!("google.datastore.v1.{name}"))
        .unwrap();
    let dynamic = DynamicMessage::deserialize(descriptor, json).unwrap();
    T::decode(dynamic.encode_to_vec().as_slice()).unwrap()
}

/// What differs between two servers answering the same requests: times, versions (times
/// too), transaction ids and allocated ids (random), cursors (they hold versions).
fn stable(value: &mut serde_json::Value) {
    const VOLATILE: [&str; 8] = [
        "readTime",
        "commitTime",
        "createTime",
        "updateTime",
        "version",
        "transaction",
        "cursor",
        "endCursor",
    ];
    match value {
        serde_json::Value::Object(map) => {
            for (name, inner) in map.iter_mut() {
                match VOLATILE.contains(&name.as_str()) {
                    true => *inner = serde_json::Value::String("~".into()),
                    false => stable(inner),
                }
            }
        }
        serde_json::Value::Array(values) => values.iter_mut().for_each(stable),
        _ => {}
    }
}

/// One server reached over gRPC, another over REST.
struct Both {
    servers: [Server; 2],
    grpc: DatastoreClient<Channel>,
}

impl Both {
    async fn start() -> Both {
        let start = || async {
            Server::start(Options {
                port: 0,
                ..Options::default()
            })
            .await
            .unwrap()
        };
        let servers = [start().await, start().await];
        let channel = Channel::from_shared(format!("http://{}", servers[0].emulator_host()))
            .unwrap()
            .connect()
            .await
            .unwrap();
        Both {
            servers,
            grpc: DatastoreClient::new(channel),
        }
    }

    /// POSTs `body` to the REST server's `method`: the HTTP status and the JSON answer.
    async fn rest(&self, method: &str, body: &serde_json::Value) -> (u16, serde_json::Value) {
        let body = body.to_string();
        let mut stream = tokio::net::TcpStream::connect(self.servers[1].addr())
            .await
            .unwrap();
        let request = format!(
            "POST /v1/projects/p:{method} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).await.unwrap();
        let status = response.split(' ').nth(1).unwrap().parse().unwrap();
        let (_, body) = response.split_once("\r\n\r\n").unwrap();
        (status, serde_json::from_str(body).unwrap())
    }
}

/// Sends `request` both ways and compares the answers; returns both answers (gRPC's, REST's)
/// as JSON, for the ids a later request needs.
macro_rules! same {
    ($both:expr, $method:ident, $rest:literal, $request:expr, $req:literal, $res:literal) => {{
        let request = $request;
        let mut body = json($req, &request);
        body.as_object_mut().unwrap().remove("projectId");
        let grpc = $both.grpc.$method(request).await;
        let (status, rest) = $both.rest($rest, &body).await;
        let grpc = match grpc {
            Ok(answer) => {
                assert_eq!(status, 200, "{}: REST refused what gRPC answered: {rest}", $rest);
                json($res, &answer.into_inner())
            }
            Err(refused) => {
                let error = &rest["error"];
                assert_eq!(
                    error["message"].as_str(),
                    Some(refused.message()),
                    "{}: the refusals' messages",
                    $rest
                );
                assert_eq!(error["code"].as_u64(), Some(u64::from(status)));
                serde_json::json!({"refused": format!("{:?}", refused.code())})
            }
        };
        let (mut a, mut b) = (grpc.clone(), rest.clone());
        stable(&mut a);
        stable(&mut b);
        if a.get("refused").is_none() {
            assert_eq!(a, b, "{}: gRPC's answer, then REST's", $rest);
        }
        (grpc, rest)
    }};
}

fn key(kind: &str, name: &str) -> pb::Key {
    pb::Key {
        partition_id: Some(pb::PartitionId {
            project_id: "p".into(),
            namespace_id: "ns".into(),
            ..pb::PartitionId::default()
        }),
        path: vec![pb::key::PathElement {
            kind: kind.into(),
            id_type: Some(pb::key::path_element::IdType::Name(name.into())),
        }],
    }
}

fn value(value_type: pb::value::ValueType) -> pb::Value {
    pb::Value {
        value_type: Some(value_type),
        ..pb::Value::default()
    }
}

/// An entity with every value type, at the limits JSON has trouble with.
fn every_type(name: &str, n: i64) -> pb::Entity {
    use pb::value::ValueType as V;
    let inner = pb::Entity {
        key: None,
        properties: HashMap::from([("x".to_owned(), value(V::IntegerValue(n)))]),
    };
    let properties = HashMap::from([
        ("n".to_owned(), value(V::IntegerValue(n))),
        ("big".to_owned(), value(V::IntegerValue(i64::MIN + n))),
        ("nan".to_owned(), value(V::DoubleValue(f64::NAN))),
        ("inf".to_owned(), value(V::DoubleValue(f64::NEG_INFINITY))),
        ("half".to_owned(), value(V::DoubleValue(n as f64 / 2.0))),
        ("yes".to_owned(), value(V::BooleanValue(n % 2 == 0))),
        ("none".to_owned(), value(V::NullValue(0))),
        (
            "text".to_owned(),
            value(V::StringValue(format!("é \" \\ {n}"))),
        ),
        (
            "bytes".to_owned(),
            value(V::BlobValue(vec![0, 255, n as u8])),
        ),
        (
            "when".to_owned(),
            value(V::TimestampValue(gcloud_sdk::prost_types::Timestamp {
                seconds: 1_700_000_000 + n,
                nanos: 123_456_000,
            })),
        ),
        (
            "place".to_owned(),
            value(V::GeoPointValue(gcloud_sdk::google::r#type::LatLng {
                latitude: -33.5,
                longitude: 151.25,
            })),
        ),
        ("owner".to_owned(), value(V::KeyValue(key("User", "u")))),
        (
            "tags".to_owned(),
            value(V::ArrayValue(pb::ArrayValue {
                values: vec![value(V::StringValue("a".into())), value(V::IntegerValue(n))],
            })),
        ),
        ("inner".to_owned(), value(V::EntityValue(inner))),
        (
            "zipped".to_owned(),
            pb::Value {
                value_type: Some(V::BlobValue(vec![120, 156])),
                meaning: 22,
                exclude_from_indexes: true,
            },
        ),
    ]);
    pb::Entity {
        key: Some(key("Thing", name)),
        properties,
    }
}

fn upsert(entity: pb::Entity) -> pb::Mutation {
    pb::Mutation {
        operation: Some(pb::mutation::Operation::Upsert(entity)),
        ..pb::Mutation::default()
    }
}

fn commit(mutations: Vec<pb::Mutation>, transaction: Option<Vec<u8>>) -> pb::CommitRequest {
    use pb::commit_request::{Mode, TransactionSelector};
    pb::CommitRequest {
        project_id: "p".into(),
        mode: match transaction {
            Some(_) => Mode::Transactional,
            None => Mode::NonTransactional,
        } as i32,
        transaction_selector: transaction.map(TransactionSelector::Transaction),
        mutations,
        ..pb::CommitRequest::default()
    }
}

fn query(query: pb::Query) -> pb::RunQueryRequest {
    pb::RunQueryRequest {
        project_id: "p".into(),
        partition_id: Some(pb::PartitionId {
            project_id: "p".into(),
            namespace_id: "ns".into(),
            ..pb::PartitionId::default()
        }),
        query_type: Some(pb::run_query_request::QueryType::Query(query)),
        ..pb::RunQueryRequest::default()
    }
}

fn on(name: &str) -> Option<pb::PropertyReference> {
    Some(pb::PropertyReference { name: name.into() })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rest_and_grpc_give_the_same_answers() {
    let mut both = Both::start().await;
    let things: Vec<pb::Mutation> = (0..6)
        .map(|n| upsert(every_type(&format!("t{n}"), n)))
        .collect();
    same!(
        both,
        commit,
        "commit",
        commit(things, None),
        "CommitRequest",
        "CommitResponse"
    );
    let lookup = pb::LookupRequest {
        project_id: "p".into(),
        keys: vec![
            key("Thing", "t1"),
            key("Thing", "nothing"),
            key("Thing", "t4"),
        ],
        ..pb::LookupRequest::default()
    };
    let (found, _) = same!(
        both,
        lookup,
        "lookup",
        lookup,
        "LookupRequest",
        "LookupResponse"
    );
    assert_eq!(found["found"].as_array().unwrap().len(), 2, "{found}");
    // Queries: a filter and an order, a projection, keys only, distinct, an offset and limit.
    let kind = vec![pb::KindExpression {
        name: "Thing".into(),
    }];
    let filtered = pb::Query {
        kind: kind.clone(),
        filter: Some(pb::Filter {
            filter_type: Some(pb::filter::FilterType::PropertyFilter(pb::PropertyFilter {
                property: on("n"),
                op: pb::property_filter::Operator::GreaterThanOrEqual as i32,
                value: Some(value(pb::value::ValueType::IntegerValue(2))),
            })),
        }),
        order: vec![pb::PropertyOrder {
            property: on("n"),
            direction: pb::property_order::Direction::Descending as i32,
        }],
        limit: Some(3),
        offset: 1,
        ..pb::Query::default()
    };
    let projection = pb::Query {
        projection: vec![
            pb::Projection {
                property: on("yes"),
            },
            pb::Projection {
                property: on("text"),
            },
        ],
        distinct_on: vec![pb::PropertyReference { name: "yes".into() }],
        order: vec![pb::PropertyOrder {
            property: on("yes"),
            direction: 0,
        }],
        kind: kind.clone(),
        ..pb::Query::default()
    };
    let keys = pb::Query {
        projection: vec![pb::Projection {
            property: on("__key__"),
        }],
        kind: kind.clone(),
        ..pb::Query::default()
    };
    for q in [filtered, projection, keys] {
        same!(
            both,
            run_query,
            "runQuery",
            query(q),
            "RunQueryRequest",
            "RunQueryResponse"
        );
    }
    // Aggregations, with aliases.
    use pb::aggregation_query::aggregation::{Avg, Count, Operator as Agg, Sum};
    let aggregate = pb::RunAggregationQueryRequest {
        project_id: "p".into(),
        partition_id: Some(pb::PartitionId {
            project_id: "p".into(),
            namespace_id: "ns".into(),
            ..pb::PartitionId::default()
        }),
        query_type: Some(
            pb::run_aggregation_query_request::QueryType::AggregationQuery(pb::AggregationQuery {
                aggregations: vec![
                    pb::aggregation_query::Aggregation {
                        alias: "all".into(),
                        operator: Some(Agg::Count(Count { up_to: None })),
                    },
                    pb::aggregation_query::Aggregation {
                        alias: "total".into(),
                        operator: Some(Agg::Sum(Sum { property: on("n") })),
                    },
                    pb::aggregation_query::Aggregation {
                        alias: "mean".into(),
                        operator: Some(Agg::Avg(Avg {
                            property: on("half"),
                        })),
                    },
                ],
                query_type: Some(pb::aggregation_query::QueryType::NestedQuery(pb::Query {
                    kind: kind.clone(),
                    ..pb::Query::default()
                })),
            }),
        ),
        ..pb::RunAggregationQueryRequest::default()
    };
    same!(
        both,
        run_aggregation_query,
        "runAggregationQuery",
        aggregate,
        "RunAggregationQueryRequest",
        "RunAggregationQueryResponse"
    );
    // A transaction on each side: begun, read in, written in, committed.
    let begin = pb::BeginTransactionRequest {
        project_id: "p".into(),
        ..pb::BeginTransactionRequest::default()
    };
    let (a, b) = same!(
        both,
        begin_transaction,
        "beginTransaction",
        begin.clone(),
        "BeginTransactionRequest",
        "BeginTransactionResponse"
    );
    let id = |answer: &serde_json::Value| {
        from_json::<pb::BeginTransactionResponse>("BeginTransactionResponse", answer).transaction
    };
    let (grpc_id, rest_id) = (id(&a), id(&b));
    let read_in = |transaction: Vec<u8>| pb::LookupRequest {
        project_id: "p".into(),
        keys: vec![key("Thing", "t2")],
        read_options: Some(pb::ReadOptions {
            consistency_type: Some(pb::read_options::ConsistencyType::Transaction(transaction)),
        }),
        ..pb::LookupRequest::default()
    };
    let grpc = both
        .grpc
        .lookup(read_in(grpc_id.clone()))
        .await
        .unwrap()
        .into_inner();
    let (status, rest) = both
        .rest("lookup", &{
            let mut body = json("LookupRequest", &read_in(rest_id.clone()));
            body.as_object_mut().unwrap().remove("projectId");
            body
        })
        .await;
    assert_eq!(status, 200);
    let (mut a, mut b) = (json("LookupResponse", &grpc), rest);
    stable(&mut a);
    stable(&mut b);
    assert_eq!(a, b, "a lookup in a transaction");
    let write =
        |transaction: Vec<u8>| commit(vec![upsert(every_type("t2", 20))], Some(transaction));
    let grpc = both.grpc.commit(write(grpc_id)).await.unwrap().into_inner();
    let (status, rest) = both
        .rest("commit", &{
            let mut body = json("CommitRequest", &write(rest_id));
            body.as_object_mut().unwrap().remove("projectId");
            body
        })
        .await;
    assert_eq!(status, 200, "{rest}");
    let (mut a, mut b) = (json("CommitResponse", &grpc), rest);
    stable(&mut a);
    stable(&mut b);
    assert_eq!(a, b, "a commit in a transaction");
    // Ids reserved; allocated ids are random, so only their number is compared.
    let reserve = pb::ReserveIdsRequest {
        project_id: "p".into(),
        keys: vec![key("Thing", "r")],
        ..pb::ReserveIdsRequest::default()
    };
    same!(
        both,
        reserve_ids,
        "reserveIds",
        reserve,
        "ReserveIdsRequest",
        "ReserveIdsResponse"
    );
    let mut incomplete = key("Thing", "x");
    incomplete.path[0].id_type = None;
    let allocate = pb::AllocateIdsRequest {
        project_id: "p".into(),
        keys: vec![incomplete.clone(), incomplete],
        ..pb::AllocateIdsRequest::default()
    };
    let grpc = both
        .grpc
        .allocate_ids(allocate.clone())
        .await
        .unwrap()
        .into_inner();
    let mut body = json("AllocateIdsRequest", &allocate);
    body.as_object_mut().unwrap().remove("projectId");
    let (status, rest) = both.rest("allocateIds", &body).await;
    assert_eq!(status, 200);
    assert_eq!(rest["keys"].as_array().unwrap().len(), grpc.keys.len());
    // Refusals: the same status and message both ways.
    let reserved = commit(
        vec![upsert(pb::Entity {
            key: Some(key("__bad__", "x")),
            properties: HashMap::new(),
        })],
        None,
    );
    same!(
        both,
        commit,
        "commit",
        reserved,
        "CommitRequest",
        "CommitResponse"
    );
    let unknown = pb::RollbackRequest {
        project_id: "p".into(),
        transaction: vec![1; 16],
        ..pb::RollbackRequest::default()
    };
    same!(
        both,
        rollback,
        "rollback",
        unknown,
        "RollbackRequest",
        "RollbackResponse"
    );
    let too_many = pb::LookupRequest {
        project_id: "p".into(),
        keys: vec![key("Thing", "t1"); 1_001],
        ..pb::LookupRequest::default()
    };
    same!(
        both,
        lookup,
        "lookup",
        too_many,
        "LookupRequest",
        "LookupResponse"
    );
    for server in both.servers {
        server.stop().await;
    }
}
