//! The backends' answers as the Datastore API's responses.

use gcloud_sdk::google::datastore::v1 as pb;

use super::request::{Paging, Scope};
use crate::backend::{QueryBatch, QueryResult, ResultShape, Stamp};
use crate::model::key::RawKey;
use crate::model::value::{PropertyMap, Value};
use crate::model::wire::timestamp;

/// At most this many results in one batch; a query that wants more is answered in batches
/// (`NOT_FINISHED`), as the service does.
pub(super) const BATCH: usize = 500;

/// At most about this many bytes of entities in one batch: under gRPC's usual 4 MiB limit on
/// what a client receives.
const BATCH_BYTES: usize = 3 << 20;

/// `answer` with only the first result of each run of results with the same values of the
/// `distinct` properties (the order leads with them), each carrying the cursor of its run's
/// last result (a query resumed from it starts at the next run); then at most `offset` and
/// `limit`'s runs (a batch's worth), `more_results` if runs remain.
pub(super) fn distinct(answer: QueryBatch, paging: &Paging) -> QueryBatch {
    let values = |r: &QueryResult| -> Vec<Option<Value>> {
        paging
            .distinct
            .iter()
            .map(|p| r.properties.get(p).map(|p| p.value.clone()))
            .collect()
    };
    let mut runs: Vec<(Vec<Option<Value>>, QueryResult)> = Vec::new();
    for result in answer.results {
        let these = values(&result);
        match runs.last_mut() {
            Some((last, first)) if *last == these => first.cursor = result.cursor,
            _ => runs.push((these, result)),
        }
    }
    let wanted = paging.offset + paging.limit.map_or(BATCH, |l| l.min(BATCH));
    let more_results = runs.len() > wanted;
    runs.truncate(wanted);
    QueryBatch {
        end_cursor: runs
            .last()
            .map_or(answer.end_cursor, |(_, r)| r.cursor.clone()),
        results: runs.into_iter().map(|(_, r)| r).collect(),
        more_results,
    }
}

impl Scope {
    /// An entity as the service returns it.
    pub(super) fn entity(&self, key: &RawKey, properties: PropertyMap) -> pb::Entity {
        pb::Entity {
            key: Some(self.partitions.key(key)),
            properties: properties.into_wire(&self.partitions, false),
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
    ) -> pb::QueryResultBatch {
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
        results.truncate(kept);
        let asked = paging.limit.map_or(BATCH, |l| l.min(BATCH));
        let more = if trimmed
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
        pb::QueryResultBatch {
            skipped_results: i32::try_from(skipped).unwrap_or(i32::MAX),
            skipped_cursor,
            entity_result_type: result_type as i32,
            entity_results: results.into_iter().map(|r| self.result(r)).collect(),
            end_cursor,
            more_results: more as i32,
            ..pb::QueryResultBatch::default()
        }
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
