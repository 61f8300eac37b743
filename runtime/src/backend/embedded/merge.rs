//! Queries with OR (and IN, `!=`, NOT IN): each branch read by its own plan, the results
//! merged in the query's order without duplicates; the cursor holds every branch's position.

use std::cmp::Ordering;
use std::collections::VecDeque;

use super::candidates::other_plan;
use super::exec::*;
use super::plan::Access;
use super::scan::Prepared;
use super::store::Store;
use datastore_entity_core::error::Error;
use datastore_entity_core::model::codec::Reader as CodecReader;
use datastore_entity_core::model::schema::Direction;
use datastore_entity_core::model::stored::Writer;
use datastore_entity_core::model::walk::compare_values;
use datastore_entity_core::query::spec::QueryBatch;

/// Where each branch of a merged plan stands: after this position of its own plan (`None`:
/// before its first entry).
type Positions = Vec<Option<Vec<u8>>>;

fn encode_positions(
    prepared: &Prepared<'_>,
    plans: &[(Prepared<'_>, Access)],
    positions: &Positions,
) -> Vec<u8> {
    let mut w = Writer::default();
    for ((_, access), position) in plans.iter().zip(positions) {
        w.u8(access.tag());
        match position {
            None => w.u8(0),
            Some(p) => {
                w.u8(1);
                w.bytes(p);
            }
        }
    }
    prepared.encode_cursor(MERGED, &w.bytes)
}

fn decode_positions(
    prepared: &Prepared<'_>,
    plans: &[(Prepared<'_>, Access)],
    bytes: &[u8],
) -> Result<Positions, Error> {
    let (tag, body) = prepared.decode_cursor(bytes)?;
    if tag != MERGED {
        return Err(other_plan());
    }
    let corrupt = |_| Error::InvalidCursor {
        reason: "it is corrupt".to_owned(),
    };
    let mut r = CodecReader::new(body);
    let mut positions = Vec::with_capacity(plans.len());
    for (_, access) in plans {
        if r.u8().map_err(corrupt)? != access.tag() {
            return Err(other_plan());
        }
        positions.push(match r.u8().map_err(corrupt)? {
            0 => None,
            _ => Some(r.bytes().map_err(corrupt)?.to_vec()),
        });
    }
    if !r.is_empty() {
        return Err(other_plan());
    }
    Ok(positions)
}

/// The order of found entries: their order values in the orders' directions, then their keys
/// in the last order's direction.
fn compare_found(prepared: &Prepared<'_>, a: &Found, b: &Found) -> Ordering {
    for ((x, y), order) in a.sort.iter().zip(&b.sort).zip(&prepared.orders) {
        let o = compare_values(x, y);
        let o = match order.direction {
            Direction::Ascending => o,
            Direction::Descending => o.reverse(),
        };
        if o.is_ne() {
            return o;
        }
    }
    let o = a.path().cmp(b.path());
    match prepared.key_direction {
        Direction::Ascending => o,
        Direction::Descending => o.reverse(),
    }
}

/// A query of several branches (an OR, an IN, a `!=`, a NOT IN), each answered by its own
/// index plan in the query's order: the branches' entries are merged (a k-way merge), an entry
/// several branches hold returned once. Each branch reads at most one page (plus one) from
/// where the cursor left it, so a page costs what it holds, times the branches.
pub(crate) fn merged(
    store: &dyn Store,
    prepared: &Prepared<'_>,
    plans: &[(Prepared<'_>, Access)],
) -> Result<QueryBatch, Error> {
    let query = prepared.query;
    let decode = |bytes: &Option<Vec<u8>>| {
        bytes
            .as_ref()
            .map(|b| decode_positions(prepared, plans, b))
            .transpose()
    };
    let (start, end) = (decode(&query.start_cursor)?, decode(&query.end_cursor)?);
    let limit = query.limit.unwrap_or(usize::MAX);
    let mut positions = start.unwrap_or_else(|| vec![None; plans.len()]);
    let mut heads = Vec::with_capacity(plans.len());
    for (i, (branch, access)) in plans.iter().enumerate() {
        let end = match &end {
            None => None,
            // The branch had not started where the end cursor was made: none of it comes before.
            Some(end) if end[i].is_none() => {
                heads.push(VecDeque::new());
                continue;
            }
            Some(end) => end[i].clone(),
        };
        let start = positions[i].clone();
        let (found, _) = find(
            store,
            branch,
            access,
            start,
            end,
            limit.saturating_add(1),
            true,
        )?;
        heads.push(VecDeque::from(found));
    }
    let mut taken = Vec::new();
    while taken.len() < limit {
        let next = (0..heads.len())
            .filter(|&i| !heads[i].is_empty())
            .min_by(|&a, &b| compare_found(prepared, &heads[a][0], &heads[b][0]));
        let Some(next) = next else { break };
        let Some(found) = heads[next].pop_front() else {
            break;
        };
        positions[next] = Some(found.position.clone());
        for (i, head) in heads.iter_mut().enumerate() {
            while let Some(same) = head.front() {
                if compare_found(prepared, same, &found) != Ordering::Equal {
                    break;
                }
                positions[i] = head.pop_front().map(|f| f.position);
            }
        }
        taken.push((found, encode_positions(prepared, plans, &positions)));
    }
    let more_results = heads.iter().any(|h| !h.is_empty());
    let end_cursor = match (taken.last(), &query.start_cursor) {
        (Some((_, cursor)), _) => cursor.clone(),
        (None, Some(start)) => start.clone(),
        (None, None) => encode_positions(prepared, plans, &positions),
    };
    Ok(QueryBatch {
        results: results(store, prepared, taken.into_iter())?,
        end_cursor,
        more_results,
    })
}
