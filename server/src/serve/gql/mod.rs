//! GQL, Google's query language, read into the structured queries the rest of the service
//! answers: the text cut into tokens (`lexer.rs`), read by a recursive descent whose nesting
//! is bounded (`reader.rs`, `values.rs`, `statement.rs`), the request's bindings put in place.
//! The structured query is what the response's `query` field holds, as the service answers.
//!
//! Every mistake is `INVALID_ARGUMENT` naming where it is and what was expected:
//! `GQL query error at 1:8: expected a property name, found `FROM``.

mod lexer;
mod reader;
mod statement;
mod values;

#[cfg(test)]
mod tests;

use gcloud_sdk::google::datastore::v1 as pb;
use tonic::Status;

use self::reader::Reader;
use self::statement::{Statement, statement};
use crate::serve::request::invalid;

/// The text of `gql` read, its bindings resolved; keys without a partition of their own are in
/// `partition` (the request's).
fn read(gql: &pb::GqlQuery, partition: Option<&pb::PartitionId>) -> Result<Statement, Status> {
    let tokens = lexer::tokens(&gql.query_string)?;
    let mut reader = Reader::new(tokens, gql, partition.cloned().unwrap_or_default());
    let read = statement(&mut reader)?;
    reader.finish()?;
    Ok(read)
}

/// A `RunQuery`'s GQL as a structured query.
pub(super) fn query(
    gql: &pb::GqlQuery,
    partition: Option<&pb::PartitionId>,
) -> Result<pb::Query, Status> {
    match read(gql, partition)? {
        Statement::Query(query) => Ok(query),
        Statement::Aggregation(_) => Err(invalid(
            "GQL query error: an aggregation (COUNT, COUNT_UP_TO, SUM, AVG) is run by RunAggregationQuery",
        )),
    }
}

/// A `RunAggregationQuery`'s GQL as a structured aggregation query.
pub(super) fn aggregation(
    gql: &pb::GqlQuery,
    partition: Option<&pb::PartitionId>,
) -> Result<pb::AggregationQuery, Status> {
    match read(gql, partition)? {
        Statement::Aggregation(query) => Ok(query),
        Statement::Query(_) => Err(invalid(
            "GQL query error: RunAggregationQuery runs an aggregation: `SELECT COUNT(*) FROM …` or `AGGREGATE … OVER (SELECT …)`",
        )),
    }
}
