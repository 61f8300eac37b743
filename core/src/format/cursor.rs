//! The envelope of every cursor the crate makes (R-Q3): a magic byte saying who made it, the
//! fingerprint of the query it belongs to, the position, and a checksum — so an altered cursor,
//! or one of another query, is refused instead of resuming somewhere else. Users keep cursors
//! (in web pages' "next" links): `tests/tests/formats.rs` pins these bytes.

use crate::error::Error;
use crate::hash::fnv1a;
use crate::model::stored::Writer;
use crate::query::spec::FilterNode;

/// The magic byte of the embedded engine's cursors.
pub const ENGINE: u8 = 0xD5;

/// The magic byte of the embedded engine's cursors of metadata queries (`__kind__` …).
pub const METADATA: u8 = 0xD6;

/// The magic byte of a `#[sharded_index]` query's cursors (R-S3).
pub const SHARDED: u8 = 0xE7;

/// A cursor: `magic`, the query's `fingerprint`, `position`, and a checksum of all that.
pub fn seal(magic: u8, fingerprint: u64, position: &[u8]) -> Vec<u8> {
    let mut w = Writer {
        bytes: Vec::with_capacity(position.len() + 17),
    };
    w.u8(magic);
    w.u64(fingerprint);
    w.bytes.extend_from_slice(position);
    let checksum = fnv1a(&w.bytes);
    w.u64(checksum);
    w.bytes
}

/// The position of a cursor sealed with `magic` for the query of `fingerprint`; `maker` says
/// who makes such cursors, for the error of a cursor made by someone else.
pub fn open<'c>(
    magic: u8,
    fingerprint: u64,
    cursor: &'c [u8],
    maker: &str,
) -> Result<&'c [u8], Error> {
    let invalid = |reason: String| Error::InvalidCursor { reason };
    if cursor.len() < 17 || cursor[0] != magic {
        return Err(invalid(format!("it is not a cursor of {maker}")));
    }
    let (body, checksum) = cursor.split_at(cursor.len() - 8);
    if fnv1a(body).to_le_bytes() != checksum {
        return Err(invalid("it was altered (checksum mismatch)".to_owned()));
    }
    let (found, position) = body[1..].split_at(8);
    if found != fingerprint.to_le_bytes() {
        return Err(invalid("it belongs to a different query".to_owned()));
    }
    Ok(position)
}

/// Writes `node` into a query's fingerprint (what a cursor is checked against).
pub fn write_filter(w: &mut Writer, node: &FilterNode) {
    match node {
        FilterNode::Property(f) => {
            w.u8(0);
            w.bytes(f.property.as_bytes());
            w.u8(f.op as u8);
            w.value(&f.value);
        }
        FilterNode::And(nodes) | FilterNode::Or(nodes) => {
            w.u8(if matches!(node, FilterNode::And(_)) {
                1
            } else {
                2
            });
            w.len(nodes.len());
            nodes.iter().for_each(|n| write_filter(w, n));
        }
    }
}
