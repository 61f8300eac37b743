//! Ranges of the ordered tables' keys, as both stores read them: whether one is empty, the
//! prefix every key inside it starts with, which side of its far end a key is on, and a walk
//! over a store's entries in either direction.

use std::ops::Bound;

use crate::error::Error;
use crate::format::file::common_prefix;

/// A key range: lower and upper bounds.
pub(crate) type Range<'a> = (Bound<&'a [u8]>, Bound<&'a [u8]>);

/// Steps through `entries` forwards (or backwards) until `step` returns `false`.
pub(super) fn walk<T>(
    mut entries: impl DoubleEndedIterator<Item = T>,
    reverse: bool,
    mut step: impl FnMut(T) -> Result<bool, Error>,
) -> Result<(), Error> {
    loop {
        let entry = match reverse {
            true => entries.next_back(),
            false => entries.next(),
        };
        let Some(entry) = entry else { return Ok(()) };
        if !step(entry)? {
            return Ok(());
        }
    }
}

/// The longest prefix both of `range`'s bounds start with (none if one is unbounded): every
/// key inside the range starts with it.
pub(super) fn shared_prefix<'a>(range: Range<'a>) -> &'a [u8] {
    match range {
        (
            Bound::Included(low) | Bound::Excluded(low),
            Bound::Included(high) | Bound::Excluded(high),
        ) => &low[..common_prefix(low, high)],
        _ => &[],
    }
}

/// Whether `key` is on the near side of `far`, the bound a scan ends at (its upper bound, or
/// with `reverse` its lower one).
pub(super) fn within(key: &[u8], far: Bound<&[u8]>, reverse: bool) -> bool {
    match (far, reverse) {
        (Bound::Unbounded, _) => true,
        (Bound::Included(end), false) => key <= end,
        (Bound::Excluded(end), false) => key < end,
        (Bound::Included(start), true) => key >= start,
        (Bound::Excluded(start), true) => key > start,
    }
}

/// Whether a range is empty or inverted (`BTreeMap::range` panics on those).
pub(crate) fn is_empty(range: &Range<'_>) -> bool {
    match (range.0, range.1) {
        (Bound::Included(a), Bound::Included(b)) => a > b,
        (Bound::Included(a) | Bound::Excluded(a), Bound::Excluded(b))
        | (Bound::Excluded(a), Bound::Included(b)) => a >= b,
        _ => false,
    }
}
