//! Ranges of the ordered tables' keys, as the stores read them: whether one is empty, the
//! prefix every key inside it starts with, which side of its far end a key is on, and a walk
//! over a store's entries in either direction; and writes laid over a store's entries.

use std::ops::Bound;

use datastore_entity_core::error::Error;
use datastore_entity_core::format::file::common_prefix;

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

/// A scan of a store's entries with `writes` laid over them (a value, or `None` where one was
/// deleted), both in the scan's order: `base` scans the store with the visitor it is given,
/// and `visit` sees the merged entries, a write replacing the store's entry under its key.
pub(super) fn overlay<'a>(
    mut writes: impl DoubleEndedIterator<Item = (&'a [u8], Option<&'a [u8]>)>,
    reverse: bool,
    visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    base: impl FnOnce(&mut dyn FnMut(&[u8], &[u8]) -> bool) -> Result<(), Error>,
) -> Result<(), Error> {
    let mut step = move || match reverse {
        true => writes.next_back(),
        false => writes.next(),
    };
    // Whether `a` comes before `b` in the scan's direction.
    let before = |a: &[u8], b: &[u8]| match reverse {
        true => a > b,
        false => a < b,
    };
    let mut held = step();
    let mut stopped = false;
    base(&mut |key, value| {
        while let Some((written, written_value)) = held {
            if before(key, written) {
                break;
            }
            held = step();
            if let Some(v) = written_value
                && !visit(written, v)
            {
                stopped = true;
                return false;
            }
            if written == key {
                return true;
            }
        }
        stopped = !visit(key, value);
        !stopped
    })?;
    while !stopped && let Some((written, written_value)) = held {
        if let Some(v) = written_value {
            stopped = !visit(written, v);
        }
        held = step();
    }
    Ok(())
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
