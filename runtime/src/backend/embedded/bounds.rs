//! A range of a table's keys, as the executor (`exec.rs`) reads it: bounds narrowed by a
//! query's range filters and cursors.

use std::ops::Bound;

use datastore_entity_core::format::keycode;
use datastore_entity_core::model::value::Value;
use datastore_entity_core::query::spec::{Operator, PropertyFilter};

/// A lower bound (inclusive) and an upper bound on a table's keys.
#[derive(Clone)]
pub(super) struct Bounds {
    lower: Bound<Vec<u8>>,
    upper: Bound<Vec<u8>>,
}

impl Bounds {
    /// Every key that starts with `prefix`.
    pub(super) fn prefix(prefix: Vec<u8>) -> Bounds {
        Bounds {
            upper: after_prefix(&prefix),
            lower: Bound::Included(prefix),
        }
    }

    pub(super) fn raise(&mut self, bound: Bound<Vec<u8>>) {
        if tighter(&bound, &self.lower, std::cmp::Ordering::Greater) {
            self.lower = bound;
        }
    }

    pub(super) fn lower_to(&mut self, bound: Bound<Vec<u8>>) {
        if tighter(&bound, &self.upper, std::cmp::Ordering::Less) {
            self.upper = bound;
        }
    }

    pub(super) fn range(&self) -> (Bound<&[u8]>, Bound<&[u8]>) {
        (as_ref(&self.lower), as_ref(&self.upper))
    }
}

pub(super) fn as_ref(bound: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match bound {
        Bound::Included(b) => Bound::Included(b),
        Bound::Excluded(b) => Bound::Excluded(b),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// Whether `new` is a tighter bound than `old`, `towards` the inside of the range.
fn tighter(new: &Bound<Vec<u8>>, old: &Bound<Vec<u8>>, towards: std::cmp::Ordering) -> bool {
    match (new, old) {
        (Bound::Unbounded, _) => false,
        (_, Bound::Unbounded) => true,
        (Bound::Included(a) | Bound::Excluded(a), Bound::Included(b) | Bound::Excluded(b)) => {
            let o = a.cmp(b);
            o == towards || (o.is_eq() && matches!(new, Bound::Excluded(_)))
        }
    }
}

/// The first key past every key that starts with `prefix`.
pub(super) fn after_prefix(prefix: &[u8]) -> Bound<Vec<u8>> {
    keycode::prefix_end(prefix).map_or(Bound::Unbounded, Bound::Excluded)
}

pub(super) fn encoded(value: &Value, inverted: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(16);
    // Filter operands are never arrays or entities (checked when the query is prepared).
    let _ = keycode::value(&mut out, value);
    if inverted {
        out.iter_mut().for_each(|b| *b = !*b);
    }
    out
}

/// Narrows `bounds` (over `head` + a column + ...) to the entries whose column value passes
/// every range filter; a descending column's values are encoded inverted, which reverses
/// their byte order.
pub(super) fn narrow(
    bounds: &mut Bounds,
    head: &[u8],
    inverted: bool,
    filters: &[&PropertyFilter],
) {
    for f in filters {
        // The entries holding the operand's value are those that start with `at`.
        let at = [head, &encoded(&f.value, inverted)].concat();
        let op = match (f.op, inverted) {
            (Operator::GreaterThan, true) => Operator::LessThan,
            (Operator::GreaterThanOrEqual, true) => Operator::LessThanOrEqual,
            (Operator::LessThan, true) => Operator::GreaterThan,
            (Operator::LessThanOrEqual, true) => Operator::GreaterThanOrEqual,
            (op, _) => op,
        };
        match op {
            Operator::GreaterThan => {
                bounds.raise(keycode::prefix_end(&at).map_or(Bound::Excluded(at), Bound::Included))
            }
            Operator::GreaterThanOrEqual => bounds.raise(Bound::Included(at)),
            Operator::LessThan => bounds.lower_to(Bound::Excluded(at)),
            Operator::LessThanOrEqual => bounds.lower_to(after_prefix(&at)),
            // Branches hold `=` and ranges only.
            Operator::Equal | Operator::NotEqual | Operator::In | Operator::NotIn => {}
        }
    }
}
