//! The backends' answers as the Datastore API's responses.

use gcloud_sdk::google::datastore::v1 as pb;
use gcloud_sdk::prost_types;
use tonic::Status;

use super::request::{Paging, Scope};
use datastore_entity::backend::cloud::wire::timestamp;
use datastore_entity::backend::cloud::wire_form::into_wire;
use datastore_entity::backend::{QueryBatch, QueryResult, ResultShape, Stamp};
use datastore_entity_core::model::key::RawKey;
use datastore_entity_core::model::value::PropertyMap;
use datastore_entity_core::query::explain::Explanation;

/// At most this many results in one batch; a query that wants more is answered in batches
/// (`NOT_FINISHED`), as the service does.
pub(super) const BATCH: usize = 500;

/// At most about this many bytes of entities in one batch: under gRPC's usual 4 MiB limit on
/// what a client receives.
pub(super) const BATCH_BYTES: usize = 3 << 20;

/// At most this many results in the one batch of a query that cannot be resumed from a
/// cursor (an order after the key): a larger answer is refused, naming the query, rather than
/// cut where the client could not go on. Its bytes are bounded by [`BATCH_BYTES`] too.
pub(super) const WHOLE: usize = 20_000;

impl Scope {
    /// An entity as the service returns it.
    pub(super) fn entity(&self, key: &RawKey, properties: PropertyMap) -> pb::Entity {
        pb::Entity {
            key: Some(self.partitions.key(key)),
            properties: into_wire(properties, &self.partitions, false),
        }
    }

    /// A found entity with its version and times.
    pub(super) fn found(
        &self,
        key: &RawKey,
        properties: PropertyMap,
        stamp: &Stamp,
    ) -> pb::EntityResult {
        let mut result = stamped(stamp);
        result.entity = Some(self.entity(key, properties));
        result
    }

    /// A key that names no entity, as a lookup reports it.
    pub(super) fn missing(&self, key: &RawKey) -> pb::EntityResult {
        pb::EntityResult {
            entity: Some(pb::Entity {
                key: Some(self.partitions.key(key)),
                properties: Default::default(),
            }),
            ..pb::EntityResult::default()
        }
    }

    /// A query's answer as one batch, after `paging.offset` skipped results; `more` is whether
    /// the backend has results after these.
    pub(super) fn batch(
        &self,
        shape: &ResultShape,
        paging: &Paging,
        answer: QueryBatch,
        start: Option<Vec<u8>>,
    ) -> Result<pb::QueryResultBatch, Status> {
        use pb::entity_result::ResultType;
        use pb::query_result_batch::MoreResultsType as More;
        let QueryBatch {
            mut results,
            end_cursor,
            more_results,
        } = answer;
        let skipped = paging.offset.min(results.len());
        let skipped_cursor = match skipped {
            0 => Vec::new(),
            n => results[n - 1].cursor.clone(),
        };
        results.drain(..skipped);
        let mut bytes = 0;
        let kept = results
            .iter()
            .position(|r| {
                bytes += r.properties.encoded_size() + 64;
                bytes > BATCH_BYTES
            })
            .map_or(results.len(), |at| at.max(1));
        let trimmed = kept < results.len();
        // One batch or none: cut short by its bytes, past its results, or read only in part.
        let cut = more_results && paging.limit.is_none_or(|l| results.len() < l);
        if paging.whole && (trimmed || results.len() > WHOLE || cut) {
            return Err(Status::resource_exhausted(format!(
                "The query cannot be resumed from a cursor (an order after __key__) and its \
                 answer is larger than one batch holds ({WHOLE} results, {} MiB): give it a \
                 limit, or order by __key__ last.",
                BATCH_BYTES >> 20
            )));
        }
        results.truncate(kept);
        let batch = match paging.whole {
            true => WHOLE,
            false => BATCH,
        };
        let asked = paging.limit.map_or(batch, |l| l.min(batch));
        // Fewer than asked with more to come: the page stopped at its bytes.
        let more = if trimmed
            || (more_results && results.len() < asked)
            || (more_results && results.len() == asked && paging.limit.is_none_or(|l| l > asked))
        {
            More::NotFinished
        } else if more_results && paging.limit == Some(results.len()) {
            More::MoreResultsAfterLimit
        } else {
            More::NoMoreResults
        };
        let end_cursor = match (trimmed, results.last()) {
            (true, Some(last)) => last.cursor.clone(),
            (false, _) if !end_cursor.is_empty() => end_cursor,
            _ if !skipped_cursor.is_empty() => skipped_cursor.clone(),
            _ => start.unwrap_or_default(),
        };
        let result_type = match shape {
            ResultShape::Full => ResultType::Full,
            ResultShape::KeysOnly => ResultType::KeyOnly,
            ResultShape::Projection(_) => ResultType::Projection,
        };
        Ok(pb::QueryResultBatch {
            skipped_results: i32::try_from(skipped).unwrap_or(i32::MAX),
            skipped_cursor,
            entity_result_type: result_type as i32,
            entity_results: results.into_iter().map(|r| self.result(r)).collect(),
            end_cursor,
            more_results: more as i32,
            ..pb::QueryResultBatch::default()
        })
    }

    fn result(&self, result: QueryResult) -> pb::EntityResult {
        let mut out = result.stamp.as_ref().map(stamped).unwrap_or_default();
        out.entity = Some(self.entity(&result.key, result.properties));
        out.cursor = result.cursor;
        out
    }
}

/// An entity result with a stamp's version and times, and no entity yet.
fn stamped(stamp: &Stamp) -> pb::EntityResult {
    pb::EntityResult {
        version: i64::try_from(stamp.version).unwrap_or(i64::MAX),
        create_time: stamp.create_time.map(timestamp),
        update_time: stamp.update_time.map(timestamp),
        ..pb::EntityResult::default()
    }
}

/// Query Explain's answer, as the service gives it, for what `explained` says (one explanation
/// per aggregation, or the query's): the indexes read, named as the service names them
/// (`(done ASC, __name__ ASC)`; a kind's built-in and composite indexes are of the
/// "Collection group" scope, a composite index with the ancestor "Includes ancestors"), and,
/// where the query ran, what it read with the `billed` read operations and the time it `took`.
pub(super) fn explain_metrics(
    kind: &str,
    explained: &[Explanation],
    billed: usize,
    took: std::time::Duration,
) -> pb::ExplainMetrics {
    use prost_types::value::Kind;
    let text = |s: &str| prost_types::Value {
        kind: Some(Kind::StringValue(s.to_owned())),
    };
    let object = |fields: Vec<(&str, prost_types::Value)>| prost_types::Struct {
        fields: fields
            .into_iter()
            .map(|(name, value)| (name.to_owned(), value))
            .collect(),
    };
    let mut indexes_used: Vec<prost_types::Struct> = Vec::new();
    for name in explained.iter().flat_map(|e| &e.indexes_used) {
        let (properties, scope) = service_index(kind, name);
        let index = object(vec![
            ("query_scope", text(scope)),
            ("properties", text(&properties)),
        ]);
        if !indexes_used.contains(&index) {
            indexes_used.push(index);
        }
    }
    let stats: Vec<_> = explained.iter().filter_map(|e| e.stats.as_ref()).collect();
    let execution_stats = (!stats.is_empty()).then(|| {
        let sum = |f: fn(&datastore_entity_core::query::explain::ExecutionStats) -> u64| -> u64 {
            stats.iter().map(|s| f(s)).sum()
        };
        let number = |n: u64| text(&n.to_string());
        let (entries, documents) = (
            sum(|s| s.index_entries_scanned),
            sum(|s| s.entities_scanned),
        );
        let billing = object(vec![
            ("documents_billable", number(documents)),
            ("index_entries_billable", number(entries)),
            ("small_ops", number(0)),
            ("min_query_cost", number(0)),
        ]);
        let billing = prost_types::Value {
            kind: Some(Kind::StructValue(billing)),
        };
        // The service reports a query of one snapshot as at least one microsecond.
        let took = took.max(std::time::Duration::from_micros(1));
        pb::ExecutionStats {
            // A query's results, or an aggregation's one.
            results_returned: stats
                .iter()
                .map(|s| i64::try_from(s.results_returned).unwrap_or(i64::MAX))
                .max()
                .unwrap_or(0),
            execution_duration: prost_types::Duration::try_from(took).ok(),
            read_operations: i64::try_from(billed).unwrap_or(i64::MAX),
            debug_stats: Some(object(vec![
                ("billing_details", billing),
                ("documents_scanned", number(documents)),
                ("index_entries_scanned", number(entries)),
            ])),
        }
    });
    pb::ExplainMetrics {
        plan_summary: Some(pb::PlanSummary { indexes_used }),
        execution_stats,
    }
}

/// An index of `kind` the engine names (`Task (done ASC, __key__ ASC)`, `… with ancestor`) as
/// the service names it: its properties (`(done ASC, __name__ ASC)`) and its query scope.
fn service_index(kind: &str, name: &str) -> (String, &'static str) {
    let (name, scope) = match name.strip_suffix(" with ancestor") {
        Some(name) => (name, "Includes ancestors"),
        None => (name, "Collection group"),
    };
    let columns = name.strip_prefix(kind).unwrap_or(name).trim_start();
    let columns = columns.strip_prefix('(').unwrap_or(columns);
    let columns = columns
        .strip_suffix(')')
        .unwrap_or(columns)
        .split(", ")
        .map(|column| match column.strip_prefix("__key__ ") {
            Some(direction) => format!("__name__ {direction}"),
            None => column.to_owned(),
        })
        .collect::<Vec<_>>();
    (format!("({})", columns.join(", ")), scope)
}

#[cfg(test)]
mod tests {
    use super::service_index;

    #[test]
    fn the_engines_index_names_become_the_services() {
        assert_eq!(
            service_index("Task", "Task (__key__ ASC)"),
            ("(__name__ ASC)".to_owned(), "Collection group")
        );
        assert_eq!(
            service_index(
                "Task",
                "Task (done ASC, priority DESC, __key__ DESC) with ancestor"
            ),
            (
                "(done ASC, priority DESC, __name__ DESC)".to_owned(),
                "Includes ancestors"
            )
        );
        // A property named like the key keeps its name; a kind with a parenthesis too.
        assert_eq!(
            service_index("A (b)", "A (b) (__key__x ASC, __key__ ASC)").0,
            "(__key__x ASC, __name__ ASC)"
        );
    }
}
