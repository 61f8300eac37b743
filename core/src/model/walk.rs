//! What walks a [`Value`]: dropping, cloning, comparing (`==` and the service's order,
//! [`compare_values`]) and `Debug`, none of them recursing with the value's depth, so a value
//! nested a hundred thousand levels deep (which no write accepts, but a caller can build) is
//! handled without overflowing the stack.

use std::fmt;

use crate::model::map::Iter;
use crate::model::value::{Property, PropertyMap, Value};

/// The service's order of values, also across types, as Google's Datastore emulator orders
/// them: null; integers and timestamps (together, by number and microseconds); booleans;
/// strings and byte strings (together, by bytes); doubles (NaN last); geo points; keys;
/// then arrays and embedded entities (which the service does not index as whole values),
/// compared element by element without recursion.
pub fn compare_values(a: &Value, b: &Value) -> std::cmp::Ordering {
    walk_pairs(a, b, &compare_leaves, &|(an, _), (bn, _)| an.cmp(bn))
}

/// [`compare_values`] of two values that are not both arrays or both entities.
fn compare_leaves(a: &Value, b: &Value) -> std::cmp::Ordering {
    fn rank(v: &Value) -> u8 {
        match v {
            Value::Null => 0,
            Value::Integer(_) | Value::Timestamp(_) => 1,
            Value::Boolean(_) => 2,
            Value::String(_) | Value::Blob(_) => 3,
            Value::Double(_) => 4,
            Value::GeoPoint(_) => 5,
            Value::Key(_) => 6,
            Value::Array(_) => 7,
            Value::Entity(_) => 8,
            Value::Vector(_) => 9,
        }
    }
    fn fixed_point(v: &Value) -> Option<i64> {
        match v {
            Value::Integer(i) => Some(*i),
            Value::Timestamp(t) => Some(t.as_micros()),
            _ => None,
        }
    }
    fn bytes(v: &Value) -> Option<&[u8]> {
        match v {
            Value::String(s) => Some(s.as_bytes()),
            Value::Blob(b) => Some(b),
            _ => None,
        }
    }
    if let (Some(x), Some(y)) = (fixed_point(a), fixed_point(b)) {
        return x.cmp(&y);
    }
    if let (Some(x), Some(y)) = (bytes(a), bytes(b)) {
        return x.cmp(y);
    }
    match (a, b) {
        (Value::Boolean(x), Value::Boolean(y)) => x.cmp(y),
        (Value::Double(x), Value::Double(y)) => compare_doubles(*x, *y),
        (Value::Key(x), Value::Key(y)) => x.cmp(y),
        (Value::GeoPoint(x), Value::GeoPoint(y)) => compare_doubles(x.latitude(), y.latitude())
            .then_with(|| compare_doubles(x.longitude(), y.longitude())),
        // By dimension, then element by element (as Firestore orders vectors).
        (Value::Vector(x), Value::Vector(y)) => x.dimension().cmp(&y.dimension()).then_with(|| {
            let pairs = x.as_slice().iter().zip(y.as_slice());
            pairs
                .map(|(a, b)| compare_doubles(*a, *b))
                .find(|o| o.is_ne())
                .unwrap_or(std::cmp::Ordering::Equal)
        }),
        _ => rank(a).cmp(&rank(b)),
    }
}

/// Doubles in numeric order with NaN last (and equal to itself); -0.0 equals 0.0.
fn compare_doubles(x: f64, y: f64) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    match (x.is_nan(), y.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        // Neither is NaN, so the partial order is total here.
        (false, false) => x.partial_cmp(&y).unwrap_or(Ordering::Equal),
    }
}

/// Values nested in `value` (its array elements, or its entity's properties when they are
/// decoded entries), moved out onto `pending`, so that dropping `value` does not recurse.
fn take_children(value: &mut Value, pending: &mut Vec<Value>) {
    match value {
        Value::Array(values) => pending.append(values),
        Value::Entity(map) => map.take_values(pending),
        _ => {}
    }
}

/// Dropped without recursion: a value nested thousands of levels deep (which no write
/// accepts, but a caller can build) would otherwise overflow the stack as it is freed.
impl Drop for Value {
    /// Inlined across crates: most values nest nothing, and a field read drops one.
    #[inline]
    fn drop(&mut self) {
        if matches!(self, Value::Array(_) | Value::Entity(_)) {
            self.drop_nested();
        }
    }
}

impl Value {
    /// [`Value`]'s drop of an array or an entity: what it nests taken out first.
    fn drop_nested(&mut self) {
        let nests = |v: &Value| matches!(v, Value::Array(_) | Value::Entity(_));
        let deep = match self {
            Value::Array(values) => values.iter().any(nests),
            Value::Entity(map) => map.holds_nested_values(),
            _ => false,
        };
        if !deep {
            return;
        }
        let mut pending = Vec::new();
        take_children(self, &mut pending);
        while let Some(mut value) = pending.pop() {
            take_children(&mut value, &mut pending);
            // `value` is dropped here with nothing nested left in it.
        }
    }
}

/// Cloned without recursion (see [`Value`]).
impl Clone for Value {
    fn clone(&self) -> Value {
        /// What is left to do: clone a value, or assemble the last `n` clones into an array
        /// or into the entity whose names and flags `map` holds.
        enum Task<'a> {
            Clone(&'a Value),
            Array(usize),
            Entity(&'a PropertyMap),
        }
        let mut tasks = vec![Task::Clone(self)];
        let mut done: Vec<Value> = Vec::new();
        while let Some(task) = tasks.pop() {
            match task {
                Task::Clone(Value::Array(values)) => {
                    tasks.push(Task::Array(values.len()));
                    tasks.extend(values.iter().rev().map(Task::Clone));
                }
                Task::Clone(Value::Entity(map)) if map.holds_nested_values() => {
                    tasks.push(Task::Entity(map));
                    tasks.extend(map.iter().rev().map(|(_, p)| Task::Clone(&p.value)));
                }
                Task::Clone(value) => done.push(value.clone_flat()),
                Task::Array(n) => {
                    let values = done.split_off(done.len() - n);
                    done.push(Value::Array(values));
                }
                Task::Entity(map) => {
                    let values = done.split_off(done.len() - map.len());
                    let entity = map
                        .iter()
                        .zip(values)
                        .map(|((name, p), value)| {
                            (
                                name,
                                Property {
                                    value,
                                    excluded: p.excluded,
                                    annotations: p.annotations.clone(),
                                },
                            )
                        })
                        .collect();
                    done.push(Value::Entity(entity));
                }
            }
        }
        done.pop().unwrap_or_default()
    }
}

impl Value {
    /// A clone of a value that holds no nested value to recurse into: a scalar, or an
    /// entity whose properties are flat (or held in the stored or wire form, which is
    /// bounded by construction).
    fn clone_flat(&self) -> Value {
        match self {
            Value::Null => Value::Null,
            Value::Boolean(b) => Value::Boolean(*b),
            Value::Integer(i) => Value::Integer(*i),
            Value::Double(d) => Value::Double(*d),
            Value::Timestamp(t) => Value::Timestamp(*t),
            Value::String(s) => Value::String(s.clone()),
            Value::Blob(b) => Value::Blob(b.clone()),
            Value::GeoPoint(g) => Value::GeoPoint(*g),
            Value::Vector(v) => Value::Vector(v.clone()),
            Value::Key(k) => Value::Key(k.clone()),
            Value::Array(values) => Value::Array(values.iter().map(Value::clone_flat).collect()),
            Value::Entity(map) => Value::Entity(map.clone()),
        }
    }
}

/// A property of an entity value: its name and the property.
type Named<'a> = (&'a str, &'a Property);

/// The children of two container values, walked side by side.
enum Pair<'a> {
    Arrays(std::slice::Iter<'a, Value>, std::slice::Iter<'a, Value>),
    Entities(Iter<'a>, Iter<'a>),
}

/// Walks `a` and `b` side by side without recursion: `leaf` compares two values that are
/// not both arrays or both entities, `names` two entities' property names and flags; the
/// first unequal answer is returned, and a shorter container comes before a longer one.
fn walk_pairs(
    a: &Value,
    b: &Value,
    leaf: &dyn Fn(&Value, &Value) -> std::cmp::Ordering,
    names: &dyn Fn(Named<'_>, Named<'_>) -> std::cmp::Ordering,
) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    fn open<'v>(a: &'v Value, b: &'v Value) -> Option<Pair<'v>> {
        match (a, b) {
            (Value::Array(x), Value::Array(y)) => Some(Pair::Arrays(x.iter(), y.iter())),
            (Value::Entity(x), Value::Entity(y)) => Some(Pair::Entities(x.iter(), y.iter())),
            _ => None,
        }
    }
    let mut stack: Vec<Pair<'_>> = Vec::new();
    match open(a, b) {
        Some(pair) => stack.push(pair),
        None => return leaf(a, b),
    }
    while let Some(top) = stack.last_mut() {
        let next = match top {
            Pair::Arrays(x, y) => match (x.next(), y.next()) {
                (None, None) => None,
                (None, Some(_)) => return Ordering::Less,
                (Some(_), None) => return Ordering::Greater,
                (Some(x), Some(y)) => Some((x, y)),
            },
            Pair::Entities(x, y) => match (x.next(), y.next()) {
                (None, None) => None,
                (None, Some(_)) => return Ordering::Less,
                (Some(_), None) => return Ordering::Greater,
                (Some(x), Some(y)) => match names(x, y) {
                    Ordering::Equal => Some((&x.1.value, &y.1.value)),
                    unequal => return unequal,
                },
            },
        };
        let Some((x, y)) = next else {
            stack.pop();
            continue;
        };
        match open(x, y) {
            Some(pair) => stack.push(pair),
            None => match leaf(x, y) {
                Ordering::Equal => {}
                unequal => return unequal,
            },
        }
    }
    Ordering::Equal
}

/// Compared without recursion (see [`Value`]); doubles as `f64` compares them (NaN is not
/// equal to itself).
impl PartialEq for Value {
    fn eq(&self, other: &Value) -> bool {
        use std::cmp::Ordering;
        let leaf = |a: &Value, b: &Value| match (a, b) {
            (Value::Null, Value::Null) => Ordering::Equal,
            (Value::Boolean(x), Value::Boolean(y)) if x == y => Ordering::Equal,
            (Value::Integer(x), Value::Integer(y)) if x == y => Ordering::Equal,
            (Value::Double(x), Value::Double(y)) if x == y => Ordering::Equal,
            (Value::Timestamp(x), Value::Timestamp(y)) if x == y => Ordering::Equal,
            (Value::String(x), Value::String(y)) if x == y => Ordering::Equal,
            (Value::Blob(x), Value::Blob(y)) if x == y => Ordering::Equal,
            (Value::GeoPoint(x), Value::GeoPoint(y)) if x == y => Ordering::Equal,
            (Value::Vector(x), Value::Vector(y)) if x == y => Ordering::Equal,
            (Value::Key(x), Value::Key(y)) if x == y => Ordering::Equal,
            _ => Ordering::Less,
        };
        let names = |(an, ap): (&str, &Property), (bn, bp): (&str, &Property)| match an == bn
            && ap.excluded == bp.excluded
        {
            true => Ordering::Equal,
            false => Ordering::Less,
        };
        walk_pairs(self, other, &leaf, &names) == Ordering::Equal
    }
}

/// How deep `Debug` goes before it writes `…` for what is nested further.
const DEBUG_DEPTH: usize = 64;

impl fmt::Debug for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        thread_local! {
            static DEPTH: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
        }
        struct Level;
        impl Drop for Level {
            fn drop(&mut self) {
                DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
            }
        }
        let depth = DEPTH.with(|d| {
            d.set(d.get() + 1);
            d.get()
        });
        let _level = Level;
        match self {
            Value::Null => f.write_str("Null"),
            Value::Boolean(b) => f.debug_tuple("Boolean").field(b).finish(),
            Value::Integer(i) => f.debug_tuple("Integer").field(i).finish(),
            Value::Double(d) => f.debug_tuple("Double").field(d).finish(),
            Value::Timestamp(t) => f.debug_tuple("Timestamp").field(t).finish(),
            Value::String(s) => f.debug_tuple("String").field(s).finish(),
            Value::Blob(b) => f.debug_tuple("Blob").field(b).finish(),
            Value::GeoPoint(g) => f.debug_tuple("GeoPoint").field(g).finish(),
            Value::Vector(v) => f.debug_tuple("Vector").field(&v.as_slice()).finish(),
            Value::Key(k) => f.debug_tuple("Key").field(k).finish(),
            Value::Array(_) | Value::Entity(_) if depth > DEBUG_DEPTH => f.write_str("…"),
            Value::Array(values) => f.debug_tuple("Array").field(values).finish(),
            Value::Entity(map) => f.debug_tuple("Entity").field(map).finish(),
        }
    }
}
