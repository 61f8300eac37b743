//! The operations of [`PropertyMap`] (an entity's properties by name, defined in `value.rs`):
//! built and read by name over either of its forms, decoded entries or the stored bytes.

use std::collections::VecDeque;
use std::fmt;
use std::ops::Index;
use std::sync::OnceLock;

use crate::model::sink::ValueWriter;
use crate::model::stored::{ValueRef, Writer};
use crate::model::value::{
    DecodeError, Entries, Entry, Facts, Foreign, Property, PropertyMap, Repr, Slot, Stored, Value,
};
use crate::model::views::{ValueView, written_value};

/// Dropped without recursion (see [`Value`]).
impl Drop for PropertyMap {
    fn drop(&mut self) {
        if self.holds_nested_values() {
            let mut pending = Vec::new();
            self.take_values(&mut pending);
            // Each value drops what it nests without recursion.
            drop(pending);
        }
    }
}

impl PropertyMap {
    /// Whether the map holds decoded array or entity values (which cloning, comparing and
    /// dropping walk without recursion). The stored and wire forms are bounded by
    /// construction: no write produces, and no read accepts, values nested too deep.
    pub fn holds_nested_values(&self) -> bool {
        match &self.repr {
            Repr::Entries(e) => e
                .entries
                .iter()
                .any(|e| matches!(e.property.value, Value::Array(_) | Value::Entity(_))),
            _ => false,
        }
    }

    /// Moves the decoded values out onto `pending`, leaving their properties null.
    pub fn take_values(&mut self, pending: &mut Vec<Value>) {
        if let Repr::Entries(e) = &mut self.repr {
            pending.extend(
                e.entries
                    .iter_mut()
                    .map(|e| std::mem::take(&mut e.property.value)),
            );
        }
    }
}

impl PropertyMap {
    /// An empty map.
    pub fn new() -> PropertyMap {
        PropertyMap::default()
    }

    /// An empty map with room for `properties` properties whose names total `name_bytes`.
    pub fn with_capacity(properties: usize, name_bytes: usize) -> PropertyMap {
        PropertyMap {
            repr: Repr::Entries(Entries {
                names: String::with_capacity(name_bytes),
                entries: VecDeque::with_capacity(properties),
            }),
        }
    }

    /// An empty map that the derive fills in name order, in the stored form, with `bytes`
    /// of room. Not a public API.
    #[doc(hidden)]
    pub fn stored_with_capacity(properties: usize, bytes: usize) -> PropertyMap {
        let mut stored = Vec::with_capacity(bytes);
        stored.extend_from_slice(&0_u32.to_le_bytes());
        PropertyMap {
            repr: Repr::Stored(Stored {
                bytes: stored,
                slots: OnceLock::from(Vec::with_capacity(properties)),
                front: 0,
                exact: true,
                decoded: OnceLock::new(),
                facts: Facts::EMPTY,
            }),
        }
    }

    /// Appends property `name` (greater than every name so far) in the stored form, written
    /// by `write`; a map that is not being filled that way takes it decoded.
    #[doc(hidden)]
    pub fn put_with(
        &mut self,
        name: &str,
        excluded: bool,
        write: impl FnOnce(&mut ValueWriter<'_>),
    ) {
        let in_order = match &self.repr {
            Repr::Stored(s) => s
                .slots()
                .last()
                .is_none_or(|last| s.range(last.name) < name.as_bytes()),
            _ => true,
        };
        match in_order {
            true => self.append(name, excluded, write, false),
            false => self.put_decoded(name, excluded, write),
        }
    }

    /// [`PropertyMap::put_with`] of a name the caller knows is greater than every name put
    /// so far and valid: the derive's plain fields, whose names it validated and whose order
    /// it settled when it compiled. Not a public API.
    #[doc(hidden)]
    #[inline]
    pub fn put_next(
        &mut self,
        name: &'static str,
        excluded: bool,
        write: impl FnOnce(&mut ValueWriter<'_>),
    ) {
        self.append(name, excluded, write, true);
    }

    /// Appends property `name`, greater than every name so far (`name_checked`: a name the
    /// derive validated when it compiled).
    #[inline]
    fn append(
        &mut self,
        name: &str,
        excluded: bool,
        write: impl FnOnce(&mut ValueWriter<'_>),
        name_checked: bool,
    ) {
        if let Repr::Stored(s) = &mut self.repr
            && s.exact
        {
            debug_assert!(
                s.slots()
                    .last()
                    .is_none_or(|last| s.range(last.name) < name.as_bytes())
            );
            s.decoded = OnceLock::new();
            let mut w = Writer {
                bytes: std::mem::take(&mut s.bytes),
            };
            let name_start = w.bytes.len() + 4;
            w.bytes(name.as_bytes());
            let name_end = w.bytes.len();
            w.u8(u8::from(excluded));
            let value_start = w.bytes.len();
            let mut sink = ValueWriter::stored(&mut w);
            write(&mut sink);
            s.facts.absorb(sink.tally(), excluded, name_checked);
            let value_end = w.bytes.len();
            s.bytes = w.bytes;
            let at = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
            let slots = s.slots_mut();
            slots.push(Slot {
                name: (at(name_start), at(name_end)),
                value: (at(value_start), at(value_end)),
                excluded,
            });
            let count = u32::try_from(slots.len()).unwrap_or(u32::MAX).to_le_bytes();
            s.bytes[..4].copy_from_slice(&count);
            return;
        }
        if let Repr::Foreign(map) = &mut self.repr {
            return put_foreign(map, name, excluded, write, name_checked);
        }
        self.put_decoded(name, excluded, write);
    }

    /// Property `name` written by `write`, taken decoded.
    fn put_decoded(
        &mut self,
        name: &str,
        excluded: bool,
        write: impl FnOnce(&mut ValueWriter<'_>),
    ) {
        let mut w = Writer::default();
        write(&mut ValueWriter::stored(&mut w));
        let value = written_value(&w.bytes);
        let property = match excluded {
            true => Property::excluded(value),
            false => Property::indexed(value),
        };
        self.insert(name, property);
    }

    /// Takes property `name` out, read as a `T`: straight from the stored bytes when the map
    /// holds them (no [`Value`] is built), otherwise from its decoded value.
    pub fn take_as<T>(
        &mut self,
        name: &str,
        read: impl FnOnce(ValueRef<'_>) -> Result<T, DecodeError>,
        from_value: impl FnOnce(Value) -> Result<T, DecodeError>,
    ) -> Option<Result<T, DecodeError>> {
        match &mut self.repr {
            Repr::Stored(s) if s.decoded.get().is_none() => {
                // The derive reads in name order: the property is usually the first left.
                let i = match s.live().first() {
                    Some(first) if s.range(first.name) == name.as_bytes() => s.front,
                    _ => s.find(name).ok()?,
                };
                let slot = s.slots()[i];
                let value = read(ValueRef(s.view(&slot)));
                if i == s.front {
                    s.front += 1;
                } else {
                    s.slots_mut().remove(i);
                }
                s.exact = false;
                Some(value)
            }
            // Moved out and converted, its strings moved, not copied.
            Repr::Foreign(f) if f.decoded.get().is_none() => {
                Some(read_foreign(f.map.take(name)?, read, from_value))
            }
            _ => self.remove(name).map(|p| from_value(p.value)),
        }
    }

    fn entries(&self) -> &Entries {
        match &self.repr {
            Repr::Entries(e) => e,
            Repr::Stored(s) => s.entries(),
            Repr::Foreign(f) => f.entries(),
        }
    }

    fn entries_mut(&mut self) -> &mut Entries {
        match &mut self.repr {
            Repr::Entries(_) => {}
            Repr::Stored(s) => {
                let entries = s.decoded.take().map_or_else(|| s.decode(), |e| *e);
                self.repr = Repr::Entries(entries);
            }
            Repr::Foreign(f) => {
                let entries = f.decoded.take().map_or_else(|| f.decode(), |e| *e);
                self.repr = Repr::Entries(entries);
            }
        }
        match &mut self.repr {
            Repr::Entries(e) => e,
            _ => unreachable!("just decoded"),
        }
    }

    /// How many properties there are.
    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::Entries(e) => e.entries.len(),
            Repr::Stored(s) => s.live().len(),
            Repr::Foreign(f) => f.map.len(),
        }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The property named `name`.
    pub fn get(&self, name: &str) -> Option<&Property> {
        let e = self.entries();
        e.find(name).ok().map(|i| &e.entries[i].property)
    }

    /// The property named `name`, to change it.
    pub fn get_mut(&mut self, name: &str) -> Option<&mut Property> {
        let e = self.entries_mut();
        e.find(name).ok().map(|i| &mut e.entries[i].property)
    }

    /// Whether there is a property named `name`.
    pub fn contains_key(&self, name: &str) -> bool {
        match &self.repr {
            Repr::Entries(e) => e.find(name).is_ok(),
            Repr::Stored(s) => s.find(name).is_ok(),
            Repr::Foreign(f) => f.map.contains(name),
        }
    }

    /// Sets the property `name`; returns the one it replaces.
    pub fn insert(&mut self, name: impl AsRef<str>, property: Property) -> Option<Property> {
        self.entries_mut().insert(name.as_ref(), property)
    }

    /// Only the properties at `paths` (each a name, then names inside embedded entities), as
    /// the service reads an entity through a property mask: a path to a missing property, or
    /// through a value that is not an embedded entity (an array included), gives nothing; a
    /// path to an embedded entity gives it whole.
    pub fn selected(&self, paths: &[Vec<std::borrow::Cow<'static, str>>]) -> PropertyMap {
        let mut out = PropertyMap::new();
        for path in paths {
            copy_path(self, &mut out, path);
        }
        out
    }

    /// Removes the property `name` and returns it.
    pub fn remove(&mut self, name: &str) -> Option<Property> {
        let e = self.entries_mut();
        e.find(name)
            .ok()
            .and_then(|i| e.entries.remove(i))
            .map(|entry| entry.property)
    }

    /// The properties, in name order.
    pub fn iter(&self) -> Iter<'_> {
        let entries = self.entries();
        Iter {
            map: entries,
            entries: entries.entries.iter(),
        }
    }

    /// The properties, in name order, to change them.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (&str, &mut Property)> {
        let e = self.entries_mut();
        let names = &e.names;
        e.entries.iter_mut().map(move |entry| {
            let start = entry.start as usize;
            (
                names
                    .get(start..start + entry.len as usize)
                    .unwrap_or_default(),
                &mut entry.property,
            )
        })
    }

    /// The names, in order.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.iter().map(|(name, _)| name)
    }

    /// The properties, in name order.
    pub fn values(&self) -> impl Iterator<Item = &Property> {
        self.entries().entries.iter().map(|e| &e.property)
    }

    /// The properties, in name order, to change them.
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut Property> {
        self.entries_mut()
            .entries
            .iter_mut()
            .map(|e| &mut e.property)
    }
}

/// The properties of a map, in name order.
#[derive(Clone)]
pub struct Iter<'a> {
    map: &'a Entries,
    entries: std::collections::vec_deque::Iter<'a, Entry>,
}

/// Copies what `from` holds at `path` into `to` (see [`PropertyMap::selected`]).
fn copy_path(from: &PropertyMap, to: &mut PropertyMap, path: &[std::borrow::Cow<'static, str>]) {
    let Some((name, rest)) = path.split_first() else {
        return;
    };
    let Some(property) = from.get(name) else {
        return;
    };
    if rest.is_empty() {
        to.insert(name.as_ref(), property.clone());
        return;
    }
    let Value::Entity(inner_from) = &property.value else {
        return;
    };
    let mut inner = match to.remove(name) {
        Some(Property { value, .. }) if matches!(value, Value::Entity(_)) => {
            value.into_entity().unwrap_or_default()
        }
        _ => PropertyMap::new(),
    };
    copy_path(inner_from, &mut inner, rest);
    if !inner.is_empty() {
        to.insert(
            name.as_ref(),
            Property {
                value: Value::Entity(inner),
                excluded: property.excluded,
                annotations: property.annotations.clone(),
            },
        );
    }
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a str, &'a Property);

    fn next(&mut self) -> Option<Self::Item> {
        self.entries.next().map(|e| (self.map.name(e), &e.property))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.entries.size_hint()
    }
}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.entries
            .next_back()
            .map(|e| (self.map.name(e), &e.property))
    }
}

impl ExactSizeIterator for Iter<'_> {}

impl<'a> IntoIterator for &'a PropertyMap {
    type Item = (&'a str, &'a Property);
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

impl IntoIterator for PropertyMap {
    type Item = (String, Property);
    type IntoIter = std::vec::IntoIter<(String, Property)>;

    fn into_iter(mut self) -> Self::IntoIter {
        let Entries { names, entries } = std::mem::take(self.entries_mut());
        entries
            .into_iter()
            .map(|e| {
                let start = e.start as usize;
                let name = names.get(start..start + e.len as usize).unwrap_or_default();
                (name.to_owned(), e.property)
            })
            .collect::<Vec<_>>()
            .into_iter()
    }
}

impl<K: AsRef<str>> FromIterator<(K, Property)> for PropertyMap {
    fn from_iter<I: IntoIterator<Item = (K, Property)>>(iter: I) -> PropertyMap {
        let mut map = PropertyMap::new();
        map.extend(iter);
        map
    }
}

impl<K: AsRef<str>> Extend<(K, Property)> for PropertyMap {
    fn extend<I: IntoIterator<Item = (K, Property)>>(&mut self, iter: I) {
        for (name, property) in iter {
            self.insert(name, property);
        }
    }
}

impl<K: AsRef<str>, const N: usize> From<[(K, Property); N]> for PropertyMap {
    fn from(entries: [(K, Property); N]) -> PropertyMap {
        entries.into_iter().collect()
    }
}

impl Index<&str> for PropertyMap {
    type Output = Property;

    /// The property `name`; panics if there is none (use [`get`](PropertyMap::get) when it
    /// may be missing).
    fn index(&self, name: &str) -> &Property {
        match self.get(name) {
            Some(property) => property,
            None => panic!("no property named `{name}`"),
        }
    }
}

impl PartialEq for PropertyMap {
    fn eq(&self, other: &PropertyMap) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl fmt::Debug for PropertyMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

/// Writes `write`'s value into foreign property `name` of `map` (excluded when `excluded`
/// or when the map's values all are).
fn put_foreign(
    map: &mut Foreign,
    name: &str,
    excluded: bool,
    write: impl FnOnce(&mut ValueWriter<'_>),
    name_checked: bool,
) {
    map.decoded = OnceLock::new();
    let excluded = excluded || map.map.excluded();
    map.map.begin(excluded);
    let mut sink = ValueWriter::foreign(&mut *map.map);
    write(&mut sink);
    let tally = sink.tally();
    map.facts.absorb(tally, excluded, name_checked);
    map.map.finish(name);
}

/// Reads a foreign value: a scalar where it lies (`read`), anything else through its
/// `Value`, its strings moved, not copied (`from_value`).
pub fn read_foreign<T>(
    value: Result<Value, crate::error::Error>,
    read: impl FnOnce(ValueRef<'_>) -> Result<T, DecodeError>,
    from_value: impl FnOnce(Value) -> Result<T, DecodeError>,
) -> Result<T, DecodeError> {
    match value {
        Ok(
            value @ (Value::Null
            | Value::Boolean(_)
            | Value::Integer(_)
            | Value::Double(_)
            | Value::Timestamp(_)),
        ) => read(ValueRef(ValueView::of(&value))),
        Ok(value) => from_value(value),
        // The map was checked when it was built: not expected.
        Err(e) => Err(DecodeError::new(
            "a value the crate can hold",
            e.to_string(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn property(n: i64) -> Property {
        Property::indexed(Value::Integer(n))
    }

    proptest! {
        /// The map behaves as a `BTreeMap<String, Property>` under any inserts and removes.
        #[test]
        fn behaves_as_a_sorted_map(ops in prop::collection::vec((any::<bool>(), "[a-d]{0,3}", any::<i64>()), 0..60)) {
            let mut map = PropertyMap::new();
            let mut model: BTreeMap<String, Property> = BTreeMap::new();
            for (insert, name, n) in ops {
                if insert {
                    prop_assert_eq!(map.insert(&name, property(n)), model.insert(name.clone(), property(n)));
                } else {
                    prop_assert_eq!(map.remove(&name), model.remove(&name));
                }
                prop_assert_eq!(map.len(), model.len());
                prop_assert!(map.iter().eq(model.iter().map(|(k, v)| (k.as_str(), v))));
                prop_assert_eq!(map.get(&name), model.get(&name));
            }
            let owned: Vec<(String, Property)> = map.clone().into_iter().collect();
            prop_assert_eq!(owned, model.into_iter().collect::<Vec<_>>());
        }
    }

    #[test]
    fn equal_maps_are_equal_whatever_their_history() {
        let mut a = PropertyMap::new();
        a.insert("x", property(1));
        a.insert("y", property(2));
        a.remove("x");
        a.insert("x", property(1));
        let b = PropertyMap::from([("y", property(2)), ("x", property(1))]);
        assert_eq!(a, b);
        assert_eq!(format!("{b:?}"), format!("{:?}", a));
    }
}
