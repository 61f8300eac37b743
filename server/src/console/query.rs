//! The GQL page: a query's results as a table, a page at a time (the first runs the GQL, the
//! next ones the structured query it became, from a cursor); an aggregation's values; a
//! malformed query's error with its position.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use gcloud_sdk::google::datastore::v1 as pb;
use gcloud_sdk::prost::Message as _;
use hyper::StatusCode;
use pb::value::ValueType;
use tonic::Status;

use super::html::{self, escape, notice, page, table};
use super::pages::{
    Answer, Context, PAGE_ROWS, cell, cursor_from_param, ok, pager, project_href, results_table,
    run,
};

/// A binding's value: an integer, a double, `true`/`false`, `null`, a quoted string, or the
/// text itself as a string.
fn binding_value(text: &str) -> pb::Value {
    let value_type = match text {
        "true" => ValueType::BooleanValue(true),
        "false" => ValueType::BooleanValue(false),
        "null" => ValueType::NullValue(0),
        t if t.len() >= 2
            && (t.starts_with('"') && t.ends_with('"')
                || t.starts_with('\'') && t.ends_with('\'')) =>
        {
            ValueType::StringValue(t[1..t.len() - 1].to_owned())
        }
        t => match (t.parse::<i64>(), t.parse::<f64>()) {
            (Ok(i), _) => ValueType::IntegerValue(i),
            (_, Ok(d)) => ValueType::DoubleValue(d),
            _ => ValueType::StringValue(t.to_owned()),
        },
    };
    pb::Value {
        value_type: Some(value_type),
        ..pb::Value::default()
    }
}

/// The GQL query of the page, with its bindings.
fn gql_query(gql: &str, bindings: &str) -> pb::GqlQuery {
    let mut query = pb::GqlQuery {
        query_string: gql.to_owned(),
        allow_literals: true,
        ..pb::GqlQuery::default()
    };
    let mut positional = Vec::new();
    for line in bindings.lines().filter(|l| !l.trim().is_empty()) {
        let (name, value) = line.split_once('=').unwrap_or((line, ""));
        let (name, value) = (
            name.trim().trim_start_matches('@'),
            binding_value(value.trim()),
        );
        let parameter = pb::GqlQueryParameter {
            parameter_type: Some(pb::gql_query_parameter::ParameterType::Value(value)),
        };
        match name.parse::<usize>() {
            Ok(n) if n >= 1 => {
                if positional.len() < n {
                    positional.resize(n, None);
                }
                positional[n - 1] = Some(parameter);
            }
            _ => {
                query.named_bindings.insert(name.to_owned(), parameter);
            }
        }
    }
    query.positional_bindings = positional
        .into_iter()
        .map(Option::unwrap_or_default)
        .collect();
    query
}

/// Whether `gql` is an aggregation (`SELECT COUNT(*) …`, `AGGREGATE … OVER (…)`).
fn is_aggregation(gql: &str) -> bool {
    let upper = gql.trim_start().to_ascii_uppercase();
    if upper.starts_with("AGGREGATE") {
        return true;
    }
    let Some(rest) = upper.strip_prefix("SELECT") else {
        return false;
    };
    let rest = rest.trim_start();
    [
        "COUNT(",
        "COUNT_UP_TO(",
        "SUM(",
        "AVG(",
        "COUNT (",
        "SUM (",
        "AVG (",
    ]
    .iter()
    .any(|f| rest.starts_with(f))
}

/// `/console/{project}/query?gql=…`: a GQL query's results (an aggregation's values), paged;
/// a malformed query's error with its position.
pub(super) async fn query(cx: &Context<'_>, project: &str) -> Answer {
    let partition = cx.partition(project);
    let trail = [(project_href(project), project.to_owned())];
    let (gql, bindings) = (cx.param("gql"), cx.param("bindings"));
    let mut body = html::query_form(
        project,
        gql,
        &partition.database_id,
        &partition.namespace_id,
        bindings,
    );
    if gql.trim().is_empty() {
        return ok("Query", &trail, &body);
    }
    let mut status = StatusCode::OK;
    if is_aggregation(gql) {
        let answer = cx
            .service
            .run_aggregation_query(pb::RunAggregationQueryRequest {
                project_id: project.to_owned(),
                database_id: partition.database_id.clone(),
                partition_id: Some(partition.clone()),
                query_type: Some(pb::run_aggregation_query_request::QueryType::GqlQuery(
                    gql_query(gql, bindings),
                )),
                ..pb::RunAggregationQueryRequest::default()
            })
            .await;
        match answer {
            Ok(response) => {
                let mut rows = Vec::new();
                for result in response
                    .batch
                    .map(|b| b.aggregation_results)
                    .unwrap_or_default()
                {
                    let mut names: Vec<_> = result.aggregate_properties.into_iter().collect();
                    names.sort_by(|a, b| a.0.cmp(&b.0));
                    for (alias, value) in names {
                        rows.push(vec![
                            format!("<code>{}</code>", escape(&alias)),
                            cell(&value),
                        ]);
                    }
                }
                body.push_str(&table(&["Alias", "Value"], &rows));
            }
            Err(error) => {
                status = StatusCode::BAD_REQUEST;
                body.push_str(&notice(true, error.message()));
            }
        }
        return Answer::Page(status, page("Query", &trail, &body));
    }
    // The first page runs the GQL; the next ones the structured query it became, from a
    // cursor, a page at a time.
    let here = cx.param("cursor");
    let answer = match cursor_from_param(here).filter(|c| !c.is_empty()) {
        None => cx
            .service
            .run_query(pb::RunQueryRequest {
                project_id: project.to_owned(),
                database_id: partition.database_id.clone(),
                partition_id: Some(partition.clone()),
                query_type: Some(pb::run_query_request::QueryType::GqlQuery(gql_query(
                    gql, bindings,
                ))),
                ..pb::RunQueryRequest::default()
            })
            .await
            .map(|r| (r.batch.unwrap_or_default(), r.query)),
        Some(cursor) => match key_query(cx.param("q")) {
            Some(structured) => {
                // Past the first page: the GQL's offset is behind, and its limit counts the
                // rows the pages before showed.
                let before = cx
                    .param("back")
                    .split(',')
                    .filter(|s| !s.is_empty())
                    .count() as i32;
                let mut paged = structured.clone();
                paged.offset = 0;
                paged.limit = Some(match structured.limit {
                    Some(limit) => PAGE_ROWS.min(limit - before * PAGE_ROWS).max(0),
                    None => PAGE_ROWS,
                });
                run(cx, &partition, paged, Some(cursor))
                    .await
                    .map(|b| (b, Some(structured)))
            }
            None => Err(Status::invalid_argument(
                "this page's link lost its query: run it again",
            )),
        },
    };
    match answer {
        Ok((batch, structured)) => {
            let results: Vec<pb::EntityResult> = batch
                .entity_results
                .into_iter()
                .take(PAGE_ROWS as usize)
                .collect();
            let shown_all = results.len() < PAGE_ROWS as usize;
            body.push_str(&results_table(&results));
            let end = results
                .last()
                .map(|r| r.cursor.clone())
                .filter(|c| !c.is_empty());
            let q = structured
                .map(|s| URL_SAFE_NO_PAD.encode(s.encode_to_vec()))
                .unwrap_or_default();
            let keep = [
                ("gql", gql),
                ("bindings", bindings),
                ("database", partition.database_id.as_str()),
                ("namespace", partition.namespace_id.as_str()),
                ("q", q.as_str()),
            ];
            let next = match shown_all {
                true => None,
                false => end.as_deref(),
            };
            body.push_str(&pager(
                &format!("/console/{}/query", html::component(project)),
                &keep,
                cx.param("back"),
                here,
                next,
            ));
        }
        Err(error) => {
            status = StatusCode::BAD_REQUEST;
            body.push_str(&notice(true, error.message()));
        }
    }
    Answer::Page(status, page("Query", &trail, &body))
}

/// The structured query a GQL page's links carry.
fn key_query(text: &str) -> Option<pb::Query> {
    let bytes = URL_SAFE_NO_PAD.decode(text).ok()?;
    pb::Query::decode(bytes.as_slice()).ok()
}
