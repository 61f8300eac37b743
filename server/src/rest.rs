//! Google's REST form of the Datastore API, on the server's one port as Google's emulators
//! serve it: `POST /v1/projects/{project}:{method}` with a JSON body in proto3's JSON mapping
//! (64-bit integers as strings, bytes as base64, enums by name, `nullValue: null`, `NaN` and
//! `Infinity` as strings), answered by the same [`Service`] the gRPC calls reach, so the two
//! cannot disagree. An error is `{"error": {"code", "message", "status"}}` with the HTTP code
//! Google maps its status to.
//!
//! The mapping is read from the messages' descriptors (`rest/datastore_v1.bin`, written from
//! Google's own Python client by `rest/descriptors.py`): a request's JSON becomes the message's
//! bytes, decoded as the gRPC path decodes them; an answer's bytes become its JSON.

use std::sync::LazyLock;

use crate::serve::Service;
use bytes::Bytes;
use gcloud_sdk::google::datastore::v1 as pb;
use gcloud_sdk::google::longrunning::Operation;
use gcloud_sdk::prost::Message;
use http_body_util::Full;
use hyper::{Response, StatusCode};
use prost_reflect::{DescriptorPool, DynamicMessage, MessageDescriptor, SerializeOptions};
use tonic::body::Body;
use tonic::{Code, Status};

use crate::admin;

/// The descriptors of the Datastore API's messages.
static POOL: LazyLock<Result<DescriptorPool, prost_reflect::DescriptorError>> =
    LazyLock::new(|| DescriptorPool::decode(include_bytes!("../rest/datastore_v1.bin").as_slice()));

/// The package of the API's messages.
const PACKAGE: &str = "google.datastore.v1";

/// Where a REST call goes: `/v1/projects/{project}:{method}` → the project and the method.
pub(crate) fn route(path: &str) -> Option<(&str, &str)> {
    let rest = path.strip_prefix("/v1/projects/")?;
    let (project, method) = rest.rsplit_once(':')?;
    (!project.is_empty() && !project.contains('/')).then_some((project, method))
}

/// Answers one REST call to `method` of `project` with the JSON `body`.
pub(crate) async fn call(
    service: Service,
    project: &str,
    method: &str,
    body: &[u8],
) -> Response<Body> {
    macro_rules! methods {
        ($($name:literal => $call:ident, $req:ty, $req_name:literal, $res:literal;)*) => {
            match method {
                $($name => {
                    let request: $req = match decode($req_name, body, project) {
                        Ok(request) => request,
                        Err(status) => return error(&status),
                    };
                    match service.$call(request).await {
                        Ok(response) => encode($res, &response),
                        Err(status) => error(&status),
                    }
                })*
                _ => error(&Status::not_found(format!(
                    "Method not found: {method} is not a method of the Datastore API's REST \
                     form (lookup, runQuery, runAggregationQuery, beginTransaction, commit, \
                     rollback, allocateIds, reserveIds, export, import)."
                ))),
            }
        };
    }
    // The admin API's exports and imports, at the same paths as the legacy emulator serves
    // them: a finished long-running operation.
    match method {
        "export" => {
            return match decode(EXPORT_REQUEST, body, project) {
                Ok(request) => operation(admin::export_entities(&service, request).await),
                Err(status) => error(&status),
            };
        }
        "import" => {
            return match decode(IMPORT_REQUEST, body, project) {
                Ok(request) => operation(admin::import_entities(&service, request).await),
                Err(status) => error(&status),
            };
        }
        _ => {}
    }
    methods! {
        "lookup" => lookup, pb::LookupRequest, "LookupRequest", "LookupResponse";
        "runQuery" => run_query, pb::RunQueryRequest, "RunQueryRequest", "RunQueryResponse";
        "runAggregationQuery" => run_aggregation_query, pb::RunAggregationQueryRequest,
            "RunAggregationQueryRequest", "RunAggregationQueryResponse";
        "beginTransaction" => begin_transaction, pb::BeginTransactionRequest,
            "BeginTransactionRequest", "BeginTransactionResponse";
        "commit" => commit, pb::CommitRequest, "CommitRequest", "CommitResponse";
        "rollback" => rollback, pb::RollbackRequest, "RollbackRequest", "RollbackResponse";
        "allocateIds" => allocate_ids, pb::AllocateIdsRequest, "AllocateIdsRequest",
            "AllocateIdsResponse";
        "reserveIds" => reserve_ids, pb::ReserveIdsRequest, "ReserveIdsRequest",
            "ReserveIdsResponse";
    }
}

/// The admin API's export request, its import request, and the operation answering both.
const EXPORT_REQUEST: &str = "google.datastore.admin.v1.ExportEntitiesRequest";
const IMPORT_REQUEST: &str = "google.datastore.admin.v1.ImportEntitiesRequest";
const OPERATION: &str = "google.longrunning.Operation";

/// An export's or import's answer as its JSON.
fn operation(answer: Result<Operation, Status>) -> Response<Body> {
    match answer {
        Ok(operation) => encode(OPERATION, &operation),
        Err(status) => error(&status),
    }
}

/// The descriptor of message `name`: the API's (`LookupRequest`), or any by its full name.
fn descriptor(name: &str) -> Result<MessageDescriptor, Status> {
    let pool = POOL.as_ref().map_err(|e| Status::internal(e.to_string()))?;
    let full = match name.contains('.') {
        true => name.to_owned(),
        false => format!("{PACKAGE}.{name}"),
    };
    pool.get_message_by_name(&full)
        .ok_or_else(|| Status::internal(format!("no descriptor of {name}")))
}

/// A request (the API's message `name`) from its JSON, its project the path's.
fn decode<T: Message + Default>(name: &str, body: &[u8], project: &str) -> Result<T, Status> {
    let descriptor = descriptor(name)?;
    let body = match body.iter().all(u8::is_ascii_whitespace) {
        true => b"{}".as_slice(),
        false => body,
    };
    let mut json = serde_json::Deserializer::from_slice(body);
    let mut message = DynamicMessage::deserialize(descriptor, &mut json)
        .and_then(|m| json.end().map(|()| m))
        .map_err(|e| Status::invalid_argument(format!("Invalid JSON payload received. {e}")))?;
    message.set_field_by_name(
        "project_id",
        prost_reflect::Value::String(project.to_owned()),
    );
    T::decode(message.encode_to_vec().as_slice())
        .map_err(|e| Status::invalid_argument(format!("Invalid request: {e}")))
}

/// A message (the API's `name`, or any by its full name) as its JSON text.
fn json_bytes<T: Message>(name: &str, message: &T) -> Result<Vec<u8>, Status> {
    let message = DynamicMessage::decode(descriptor(name)?, message.encode_to_vec().as_slice())
        .map_err(|e| Status::internal(e.to_string()))?;
    let mut out = serde_json::Serializer::new(Vec::new());
    message
        .serialize_with_options(&mut out, &SerializeOptions::new())
        .map_err(|e| Status::internal(e.to_string()))?;
    Ok(out.into_inner())
}

/// A message as its JSON (the console shows values so).
pub(crate) fn to_json<T: Message>(name: &str, message: &T) -> Result<serde_json::Value, Status> {
    serde_json::from_slice(&json_bytes(name, message)?).map_err(|e| Status::internal(e.to_string()))
}

/// A message from its JSON (the console reads edited values so); `INVALID_ARGUMENT` with
/// what is wrong otherwise.
pub(crate) fn from_json<T: Message + Default>(
    name: &str,
    json: &serde_json::Value,
) -> Result<T, Status> {
    let message = DynamicMessage::deserialize(descriptor(name)?, json)
        .map_err(|e| Status::invalid_argument(e.to_string()))?;
    T::decode(message.encode_to_vec().as_slice())
        .map_err(|e| Status::invalid_argument(e.to_string()))
}

/// An answer as its JSON.
fn encode<T: Message>(name: &str, response: &T) -> Response<Body> {
    let json = json_bytes(name, response);
    match json {
        Ok(json) => respond(StatusCode::OK, json),
        Err(status) => error(&status),
    }
}

/// An error as Google's REST APIs answer it.
pub(crate) fn error(status: &Status) -> Response<Body> {
    let (http, name) = http_status(status.code());
    let json = serde_json::json!({
        "error": {
            "code": http.as_u16(),
            "message": status.message(),
            "status": name,
        }
    });
    respond(http, json.to_string().into_bytes())
}

fn respond(status: StatusCode, json: Vec<u8>) -> Response<Body> {
    let mut response = Response::new(Body::new(Full::new(Bytes::from(json))));
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json; charset=UTF-8"),
    );
    response
}

/// The HTTP code Google's APIs answer a status with, and the status's name
/// (`google.rpc.Code`).
fn http_status(code: Code) -> (StatusCode, &'static str) {
    let (http, name) = match code {
        Code::Ok => (200, "OK"),
        Code::Cancelled => (499, "CANCELLED"),
        Code::Unknown => (500, "UNKNOWN"),
        Code::InvalidArgument => (400, "INVALID_ARGUMENT"),
        Code::DeadlineExceeded => (504, "DEADLINE_EXCEEDED"),
        Code::NotFound => (404, "NOT_FOUND"),
        Code::AlreadyExists => (409, "ALREADY_EXISTS"),
        Code::PermissionDenied => (403, "PERMISSION_DENIED"),
        Code::ResourceExhausted => (429, "RESOURCE_EXHAUSTED"),
        Code::FailedPrecondition => (400, "FAILED_PRECONDITION"),
        Code::Aborted => (409, "ABORTED"),
        Code::OutOfRange => (400, "OUT_OF_RANGE"),
        Code::Unimplemented => (501, "UNIMPLEMENTED"),
        Code::Internal => (500, "INTERNAL"),
        Code::Unavailable => (503, "UNAVAILABLE"),
        Code::DataLoss => (500, "DATA_LOSS"),
        Code::Unauthenticated => (401, "UNAUTHENTICATED"),
    };
    (
        StatusCode::from_u16(http).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        name,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_are_routed_by_project_and_method() {
        assert_eq!(route("/v1/projects/p:lookup"), Some(("p", "lookup")));
        assert_eq!(
            route("/v1/projects/my-app:runQuery"),
            Some(("my-app", "runQuery"))
        );
        assert_eq!(route("/v1/projects/:lookup"), None);
        assert_eq!(route("/v1/projects/a/b:lookup"), None);
        assert_eq!(route("/v2/projects/p:lookup"), None);
    }

    #[test]
    fn every_request_and_answer_has_its_descriptor() {
        for name in [
            "LookupRequest",
            "LookupResponse",
            "RunQueryRequest",
            "RunQueryResponse",
            "RunAggregationQueryRequest",
            "RunAggregationQueryResponse",
            "BeginTransactionRequest",
            "BeginTransactionResponse",
            "CommitRequest",
            "CommitResponse",
            "RollbackRequest",
            "RollbackResponse",
            "AllocateIdsRequest",
            "AllocateIdsResponse",
            "ReserveIdsRequest",
            "ReserveIdsResponse",
        ] {
            assert!(descriptor(name).is_ok(), "{name}");
        }
    }

    #[test]
    fn a_request_reads_proto3_json() {
        let json = br#"{"keys": [{"partitionId": {"namespaceId": "ns"},
            "path": [{"kind": "K", "id": "9007199254740993"}]}],
            "readOptions": {"transaction": "AAEC"}}"#;
        let request: pb::LookupRequest = decode("LookupRequest", json, "p").unwrap();
        assert_eq!(request.project_id, "p");
        let key = &request.keys[0];
        assert_eq!(key.partition_id.as_ref().unwrap().namespace_id, "ns");
        assert_eq!(
            key.path[0].id_type,
            Some(pb::key::path_element::IdType::Id(9_007_199_254_740_993))
        );
        let refused = decode::<pb::LookupRequest>("LookupRequest", b"{\"kees\": []}", "p");
        assert_eq!(refused.unwrap_err().code(), Code::InvalidArgument);
    }
}
