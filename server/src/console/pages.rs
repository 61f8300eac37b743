//! The console's pages, each answered through the same [`Service`](crate::serve::Service)
//! the gRPC and REST calls reach.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use gcloud_sdk::google::datastore::v1 as pb;
use gcloud_sdk::prost::Message as _;
use hyper::StatusCode;
use pb::key::path_element::IdType;
use pb::value::ValueType;
use tonic::Status;

use super::html::{self, escape, link, notice, page, query as query_string, table};
use super::jobs::Jobs;
use super::values;
use crate::serve::Service;
use datastore_entity::backend::embedded::Embedded;

/// A request's query string or form, by name (the last of a name wins).
pub(super) type Form = std::collections::HashMap<String, String>;

/// Rows a page shows.
pub(super) const PAGE_ROWS: i32 = 20;
/// The most characters of a value a table shows.
const CELL_CHARS: usize = 80;

/// What a page is asked with.
pub(super) struct Context<'a> {
    pub(super) service: &'a Service,
    pub(super) engine: &'a Embedded,
    pub(super) token: &'a str,
    pub(super) jobs: &'a Jobs,
    pub(super) query: &'a Form,
    pub(super) form: &'a Form,
}

/// A page, or where the browser goes next (after a write).
pub(super) enum Answer {
    Page(StatusCode, String),
    Redirect(String),
}

impl Context<'_> {
    pub(super) fn param(&self, name: &str) -> &str {
        self.query.get(name).map_or("", String::as_str)
    }

    pub(super) fn field(&self, name: &str) -> &str {
        self.form.get(name).map_or("", String::as_str)
    }

    /// The database and namespace a page is about, from its query string (or its form).
    pub(super) fn partition(&self, project: &str) -> pb::PartitionId {
        let either = |name: &str| match self.param(name) {
            "" => self.field(name),
            value => value,
        };
        pb::PartitionId {
            project_id: project.to_owned(),
            database_id: either("database").to_owned(),
            namespace_id: either("namespace").to_owned(),
        }
    }

    pub(super) fn hidden_token(&self) -> String {
        format!(
            "<input type=\"hidden\" name=\"token\" value=\"{}\">",
            escape(self.token)
        )
    }
}

pub(super) fn ok(title: &str, trail: &[(String, String)], body: &str) -> Answer {
    Answer::Page(StatusCode::OK, page(title, trail, body))
}

/// A call's refusal as a page: its status and message.
pub(super) fn failed(status: &Status, title: &str, trail: &[(String, String)]) -> Answer {
    let code = match status.code() {
        tonic::Code::InvalidArgument | tonic::Code::FailedPrecondition => StatusCode::BAD_REQUEST,
        tonic::Code::NotFound => StatusCode::NOT_FOUND,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    let text = format!("{:?}: {}", status.code(), status.message());
    Answer::Page(code, page(title, trail, &notice(true, &text)))
}

/// How a database or namespace is named on a page: `(default)` for the default one.
pub(super) fn shown(name: &str) -> &str {
    match name {
        "" => "(default)",
        name => name,
    }
}

pub(super) fn project_href(project: &str) -> String {
    format!("/console/{}", html::component(project))
}

pub(super) fn kind_href(partition: &pb::PartitionId, kind: &str) -> String {
    format!(
        "/console/{}/kinds/{}{}",
        html::component(&partition.project_id),
        html::component(kind),
        query_string(&[
            ("database", &partition.database_id),
            ("namespace", &partition.namespace_id),
        ])
    )
}

/// A key as the console's URLs carry it: its protobuf bytes, base64url (any key reads back,
/// whatever its names).
pub(super) fn key_param(key: &pb::Key) -> String {
    URL_SAFE_NO_PAD.encode(key.encode_to_vec())
}

pub(super) fn key_from_param(text: &str) -> Option<pb::Key> {
    let bytes = URL_SAFE_NO_PAD.decode(text.trim_end_matches('=')).ok()?;
    pb::Key::decode(bytes.as_slice()).ok()
}

pub(super) fn entity_href(key: &pb::Key) -> String {
    let project = key
        .partition_id
        .as_ref()
        .map_or("", |p| p.project_id.as_str());
    format!(
        "/console/{}/entity{}",
        html::component(project),
        query_string(&[("key", &key_param(key))])
    )
}

/// A key's path as text: `Kind:id/Kind:'name'`.
pub(super) fn path_text(key: &pb::Key) -> String {
    let mut out = String::new();
    for (i, element) in key.path.iter().enumerate() {
        if i > 0 {
            out.push('/');
        }
        out.push_str(&element.kind);
        match &element.id_type {
            Some(IdType::Id(id)) => {
                let _ = write!(out, ":{id}");
            }
            Some(IdType::Name(name)) => {
                let _ = write!(out, ":'{name}'");
            }
            None => out.push_str(":(new)"),
        }
    }
    out
}

pub(super) fn trail_of(partition: &pb::PartitionId, kind: Option<&str>) -> Vec<(String, String)> {
    let mut trail = vec![(
        project_href(&partition.project_id),
        partition.project_id.clone(),
    )];
    if let Some(kind) = kind {
        trail.push((kind_href(partition, kind), kind.to_owned()));
    }
    trail
}

/// `/console`: the projects that hold data.
pub(super) async fn projects(cx: &Context<'_>) -> Answer {
    let partitions = match cx.engine.partitions() {
        Ok(partitions) => partitions,
        Err(error) => return failed(&crate::serve::status(error), "Projects", &[]),
    };
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut last: Option<&str> = None;
    for partition in &partitions {
        if last == Some(partition.project_id.as_str()) {
            continue;
        }
        last = Some(&partition.project_id);
        let count = partitions
            .iter()
            .filter(|p| p.project_id == partition.project_id)
            .count();
        rows.push(vec![
            link(&project_href(&partition.project_id), &partition.project_id),
            count.to_string(),
        ]);
    }
    let body = match rows.is_empty() {
        true => notice(
            false,
            "No project holds data yet: point a client at this server \
             (DATASTORE_EMULATOR_HOST) and write an entity.",
        ),
        false => table(&["Project", "Databases and namespaces with data"], &rows),
    };
    ok("Projects", &[], &body)
}

/// `/console/{project}`: its databases and namespaces, each kind with its count, and a
/// GQL query box.
pub(super) async fn project(cx: &Context<'_>, project: &str) -> Answer {
    let trail = [(project_href(project), project.to_owned())];
    let partitions = match cx.engine.partitions() {
        Ok(partitions) => partitions,
        Err(error) => return failed(&crate::serve::status(error), project, &[]),
    };
    let mut body = html::query_form(project, "", "", "", "");
    let _ = write!(
        body,
        "<p>{}</p>",
        link(
            &format!("{}/transfer", project_href(project)),
            "Import or export…"
        )
    );
    let mut any = false;
    for partition in partitions.iter().filter(|p| p.project_id == project) {
        any = true;
        let partition = pb::PartitionId {
            project_id: partition.project_id.clone(),
            database_id: partition.database_id.clone(),
            namespace_id: partition.namespace.clone(),
        };
        let kinds = match run(cx, &partition, kinds_query(), None).await {
            Ok(batch) => batch,
            Err(status) => return failed(&status, project, &trail),
        };
        let mut rows = Vec::new();
        for result in kinds.entity_results {
            let Some(kind) = result
                .entity
                .and_then(|e| e.key)
                .and_then(|k| k.path.last().cloned())
                .and_then(|e| match e.id_type {
                    Some(IdType::Name(name)) => Some(name),
                    _ => None,
                })
            else {
                continue;
            };
            let count = match count(cx, &partition, &kind).await {
                Ok(count) => count.to_string(),
                Err(status) => format!("({})", status.message()),
            };
            rows.push(vec![
                link(&kind_href(&partition, &kind), &kind),
                escape(&count),
            ]);
        }
        let _ = write!(
            body,
            "<h2>Database {} · namespace {}</h2>{}",
            escape(shown(&partition.database_id)),
            escape(shown(&partition.namespace_id)),
            table(&["Kind", "Entities"], &rows)
        );
    }
    if !any {
        body.push_str(&notice(false, "This project holds no data."));
    }
    ok(project, &trail, &body)
}

/// The `__kind__` metadata query.
fn kinds_query() -> pb::Query {
    pb::Query {
        kind: vec![pb::KindExpression {
            name: "__kind__".to_owned(),
        }],
        ..pb::Query::default()
    }
}

/// Runs `query` in `partition` from `cursor`.
pub(super) async fn run(
    cx: &Context<'_>,
    partition: &pb::PartitionId,
    mut query: pb::Query,
    cursor: Option<Vec<u8>>,
) -> Result<pb::QueryResultBatch, Status> {
    if let Some(cursor) = cursor {
        query.start_cursor = cursor;
    }
    let response = cx
        .service
        .run_query(pb::RunQueryRequest {
            project_id: partition.project_id.clone(),
            database_id: partition.database_id.clone(),
            partition_id: Some(partition.clone()),
            query_type: Some(pb::run_query_request::QueryType::Query(query)),
            ..pb::RunQueryRequest::default()
        })
        .await?;
    response
        .batch
        .ok_or_else(|| Status::internal("an answer without a batch"))
}

/// How many entities of `kind` `partition` holds.
async fn count(cx: &Context<'_>, partition: &pb::PartitionId, kind: &str) -> Result<i64, Status> {
    use pb::aggregation_query::aggregation::{Count, Operator};
    let query = pb::AggregationQuery {
        query_type: Some(pb::aggregation_query::QueryType::NestedQuery(pb::Query {
            kind: vec![pb::KindExpression {
                name: kind.to_owned(),
            }],
            ..pb::Query::default()
        })),
        aggregations: vec![pb::aggregation_query::Aggregation {
            alias: "count".to_owned(),
            operator: Some(Operator::Count(Count::default())),
        }],
    };
    let response = cx
        .service
        .run_aggregation_query(pb::RunAggregationQueryRequest {
            project_id: partition.project_id.clone(),
            database_id: partition.database_id.clone(),
            partition_id: Some(partition.clone()),
            query_type: Some(pb::run_aggregation_query_request::QueryType::AggregationQuery(query)),
            ..pb::RunAggregationQueryRequest::default()
        })
        .await?;
    let value = response
        .batch
        .and_then(|b| b.aggregation_results.into_iter().next())
        .and_then(|r| r.aggregate_properties.get("count").cloned());
    match value.and_then(|v| v.value_type) {
        Some(ValueType::IntegerValue(n)) => Ok(n),
        _ => Err(Status::internal("a count without its value")),
    }
}

/// The results of a query as a table: the key (a link to the entity's page) and a column per
/// property any of them has.
pub(super) fn results_table(results: &[pb::EntityResult]) -> String {
    let mut columns = BTreeSet::new();
    for result in results {
        if let Some(entity) = &result.entity {
            columns.extend(entity.properties.keys().map(String::as_str));
        }
    }
    let mut headers = vec!["Key"];
    headers.extend(columns.iter().copied());
    let rows: Vec<Vec<String>> = results
        .iter()
        .filter_map(|r| r.entity.as_ref())
        .map(|entity| {
            let mut row = vec![match &entity.key {
                Some(key) => link(&entity_href(key), &path_text(key)),
                None => String::new(),
            }];
            for column in &columns {
                row.push(match entity.properties.get(*column) {
                    Some(value) => cell(value),
                    None => String::new(),
                });
            }
            row
        })
        .collect();
    table(&headers, &rows)
}

/// A value in a table: its text, cut short.
pub(super) fn cell(value: &pb::Value) -> String {
    let text = values::text_of(value);
    let short: String = text.chars().take(CELL_CHARS).collect();
    let more = if short.len() < text.len() { "…" } else { "" };
    format!(
        "{}{more} <span class=\"type\">{}</span>",
        escape(&short),
        values::type_of(value)
    )
}

/// Cursors in URLs: base64url.
pub(super) fn cursor_param(cursor: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(cursor)
}

pub(super) fn cursor_from_param(text: &str) -> Option<Vec<u8>> {
    URL_SAFE_NO_PAD.decode(text).ok()
}

/// The pager under a table: the previous page (the last start in `back`) and the next (from
/// `end`), as links that keep `keep` (the page's other parameters).
pub(super) fn pager(
    base: &str,
    keep: &[(&str, &str)],
    back: &str,
    here: &str,
    end: Option<&[u8]>,
) -> String {
    let mut out = String::from("<nav class=\"pager\">");
    if !here.is_empty() {
        let mut starts: Vec<&str> = back.split(',').filter(|s| !s.is_empty()).collect();
        let previous = starts.pop().unwrap_or_default();
        let (previous, back) = (previous.trim_start_matches('-'), starts.join(","));
        let mut params = keep.to_vec();
        params.extend([("cursor", previous), ("back", back.as_str())]);
        out.push_str(&link(
            &format!("{base}{}", query_string(&params)),
            "← Previous",
        ));
    }
    if let Some(end) = end {
        let cursor = cursor_param(end);
        // The first page's start is empty: written as "-" so that it survives the list.
        let back = format!(
            "{back}{}{}",
            if back.is_empty() { "" } else { "," },
            if here.is_empty() { "-" } else { here }
        );
        let mut params = keep.to_vec();
        params.extend([("cursor", cursor.as_str()), ("back", back.as_str())]);
        out.push_str(&link(&format!("{base}{}", query_string(&params)), "Next →"));
    }
    out.push_str("</nav>");
    out
}

/// `/console/{project}/kinds/{kind}`: its entities in key order, a page at a time.
pub(super) async fn kind(cx: &Context<'_>, project: &str, kind: &str) -> Answer {
    let partition = cx.partition(project);
    let trail = trail_of(&partition, Some(kind));
    let here = cx.param("cursor");
    let query = pb::Query {
        kind: vec![pb::KindExpression {
            name: kind.to_owned(),
        }],
        limit: Some(PAGE_ROWS),
        ..pb::Query::default()
    };
    let batch = match run(cx, &partition, query, cursor_from_param(here)).await {
        Ok(batch) => batch,
        Err(status) => return failed(&status, kind, &trail),
    };
    let more = batch.entity_results.len() == PAGE_ROWS as usize
        && batch.more_results != pb::query_result_batch::MoreResultsType::NoMoreResults as i32;
    let base = format!(
        "/console/{}/kinds/{}",
        html::component(project),
        html::component(kind)
    );
    let keep = [
        ("database", partition.database_id.as_str()),
        ("namespace", partition.namespace_id.as_str()),
    ];
    let mut body = format!(
        "<p class=\"muted\">Database {} · namespace {} · in key order · {}</p>",
        escape(shown(&partition.database_id)),
        escape(shown(&partition.namespace_id)),
        link(&format!("{base}/new{}", query_string(&keep)), "New entity")
    );
    body.push_str(&results_table(&batch.entity_results));
    body.push_str(&pager(
        &base,
        &keep,
        cx.param("back"),
        here,
        more.then_some(batch.end_cursor.as_slice()),
    ));
    ok(kind, &trail, &body)
}
