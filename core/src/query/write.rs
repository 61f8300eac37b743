//! Writes as the backends receive them: a commit's [`Mutation`]s, and the [`Mask`] of stored
//! properties each one sets (the service's `Mutation.property_mask`), merged over what is
//! stored as the service merges it.

use std::borrow::Cow;

use crate::model::annotations::AnnotationsView;
use crate::model::key::RawKey;
use crate::model::scalar::Timestamp;
use crate::model::schema::{PropertySchema, Schema};
use crate::model::value::{Annotations, Property, PropertyMap, Value};
use crate::query::spec::Stamp;

/// One write of a commit.
#[derive(Debug, Clone, PartialEq)]
pub enum Mutation {
    /// Create; fails with [`Error::AlreadyExists`](crate::error::Error::AlreadyExists) if the key exists. An incomplete key gets an id.
    Insert(RawKey, PropertyMap, Mask),
    /// Change; fails with [`Error::NotFound`](crate::error::Error::NotFound) if the key does not exist.
    Update(RawKey, PropertyMap, Mask),
    /// Create or change. An incomplete key gets an id.
    Upsert(RawKey, PropertyMap, Mask),
    /// Remove (removing a missing key is not an error).
    Delete(RawKey),
}

impl Mutation {
    /// The key the mutation writes.
    pub fn key(&self) -> &RawKey {
        match self {
            Mutation::Insert(k, ..) | Mutation::Update(k, ..) | Mutation::Upsert(k, ..) => k,
            Mutation::Delete(k) => k,
        }
    }

    /// What an insert, update or upsert writes; `None` for a delete.
    pub fn properties(&self) -> Option<&PropertyMap> {
        match self {
            Mutation::Insert(_, p, _) | Mutation::Update(_, p, _) | Mutation::Upsert(_, p, _) => {
                Some(p)
            }
            Mutation::Delete(_) => None,
        }
    }

    /// Which properties an insert, update or upsert sets; `None` for a delete.
    pub fn mask(&self) -> Option<&Mask> {
        match self {
            Mutation::Insert(.., m) | Mutation::Update(.., m) | Mutation::Upsert(.., m) => Some(m),
            Mutation::Delete(_) => None,
        }
    }
}

/// The condition a mutation is applied under (the service's conflict detection): the entity
/// must still be as the caller read it, else the whole commit fails with
/// [`Error::Conflict`](crate::error::Error::Conflict) and writes nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Condition {
    /// The entity is at this version ([`Stamp::version`]; `0`: it does not exist).
    Version(u64),
    /// The entity was last written at this time ([`Stamp::update_time`]). The legacy
    /// Datastore emulator does not know this condition.
    UpdateTime(Timestamp),
}

/// What a change whose [`Condition`] does not hold does: the service's conflict resolution
/// strategy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnConflict {
    /// The commit fails with [`Error::Conflict`](crate::error::Error::Conflict) and writes nothing
    /// (`FAIL`): what the crate's conditional writes (`put_if_version`…) ask.
    #[default]
    Fail,
    /// The change is skipped and the stored entity kept: its result says
    /// [`conflict_detected`](ChangeResult::conflict_detected), with the stored version, and the
    /// commit's other changes apply (`SERVER_VALUE`, the service's default strategy).
    KeepStored,
}

/// One change of a commit: a mutation, the condition it is applied under, and the
/// transforms applied after it.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// What is written.
    pub mutation: Mutation,
    /// Applied only if this holds (none: always).
    pub condition: Option<Condition>,
    /// What happens when the condition does not hold.
    pub on_conflict: OnConflict,
    /// Applied by the service to the entity the mutation leaves, in order, whatever its mask
    /// (an insert, update or upsert only).
    pub transforms: Vec<PropertyTransform>,
}

impl From<Mutation> for Change {
    fn from(mutation: Mutation) -> Change {
        Change {
            mutation,
            condition: None,
            on_conflict: OnConflict::Fail,
            transforms: Vec::new(),
        }
    }
}

/// A server-side transform of one property (the service's `PropertyTransform`).
#[derive(Debug, Clone, PartialEq)]
pub struct PropertyTransform {
    /// The property: a name, then names inside embedded entities.
    pub path: Vec<Cow<'static, str>>,
    /// What is done to it.
    pub kind: TransformKind,
}

/// What a [`PropertyTransform`] does. Its result (in [`ChangeResult::transform_results`]) is
/// the property's new value for the numeric transforms and the request time, null for the
/// array transforms. The property written is indexed (as the service writes it).
#[derive(Debug, Clone, PartialEq)]
pub enum TransformKind {
    /// Adds an integer or a double (a property that is not a number, or missing, is set to
    /// it; integers saturate; a double on either side makes a double).
    Increment(Value),
    /// The larger of the property and the value (set to the value if not a number).
    Maximum(Value),
    /// The smaller of the property and the value (set to the value if not a number).
    Minimum(Value),
    /// Appends each value the array lacks, in order (a property that is not an array starts
    /// empty; 3 and 3.0 are the same value).
    AppendMissing(Vec<Value>),
    /// Removes every element equal to one of the values (a property that is not an array
    /// becomes empty).
    RemoveAll(Vec<Value>),
    /// The time the service processed the request, in milliseconds: the same for every
    /// transform of one commit.
    RequestTime,
}

/// What a commit did: each change's result, in order, and when it was applied.
#[derive(Debug, Clone, PartialEq)]
pub struct Committed {
    /// One result per change, in the order of the changes.
    pub results: Vec<ChangeResult>,
    /// When the commit was applied (where the backend says: not the legacy emulator).
    pub commit_time: Option<Timestamp>,
}

/// What one change did.
#[derive(Debug, Clone, PartialEq)]
pub struct ChangeResult {
    /// The entity's complete key (an allocated id filled in).
    pub key: RawKey,
    /// Its version and times after the change (after a delete: a version, no times).
    pub stamp: Stamp,
    /// The result of each of the change's transforms, in order.
    pub transform_results: Vec<Value>,
    /// Whether the change's condition did not hold and it was skipped
    /// ([`OnConflict::KeepStored`]): the stamp is then the stored entity's.
    pub conflict_detected: bool,
}

/// Which stored properties an insert, update or upsert sets (the service's
/// `Mutation.property_mask`). What a mask leaves out stays as it was stored, with its index
/// entries: that is how a struct that does not declare a property leaves it alone.
#[derive(Debug, Clone)]
pub enum Mask {
    /// Every property: the stored entity becomes exactly the written one.
    Whole,
    /// Only these paths, each a property name followed by names inside embedded entities.
    /// A path the written entity lacks is removed from the stored one.
    Paths(Vec<Vec<Cow<'static, str>>>),
    /// The properties an entity type writes ([`Mask::declared`]): its paths, named without
    /// building them for every write.
    Declared(&'static Schema),
}

impl Mask {
    /// The properties an entity type writes: every stored property it declares, and the
    /// former names of its properties (a write removes those).
    pub fn declared(schema: &'static Schema) -> Mask {
        Mask::Declared(schema)
    }

    /// The paths of a declared mask, each one name long.
    pub fn declared_names(schema: &'static Schema) -> impl Iterator<Item = Cow<'static, str>> {
        schema.properties.iter().flat_map(stored_names)
    }

    /// The paths a read of the type `schema` describes needs: each property it declares (and
    /// its former names), and inside an embedded entity only the properties its type declares
    /// (not inside an array of them, which a path does not reach through).
    pub fn read_paths(schema: &'static Schema) -> Vec<Vec<Cow<'static, str>>> {
        let mut paths = Vec::new();
        read_paths(
            schema,
            &mut vec![std::ptr::from_ref(schema)],
            &[],
            &mut paths,
        );
        paths
    }

    /// The paths, `None` for the whole entity.
    pub fn paths(&self) -> Option<Cow<'_, [Vec<Cow<'static, str>>]>> {
        match self {
            Mask::Whole => None,
            Mask::Paths(paths) => Some(Cow::Borrowed(paths)),
            Mask::Declared(schema) => Some(Cow::Owned(
                Mask::declared_names(schema).map(|n| vec![n]).collect(),
            )),
        }
    }

    /// `self`, each path behind `name` (the mask of an entity embedded as property `name`).
    pub fn inside(&self, name: &'static str) -> Mask {
        match self.paths() {
            None => Mask::Paths(vec![vec![Cow::Borrowed(name)]]),
            Some(paths) => Mask::Paths(
                paths
                    .iter()
                    .map(|path| {
                        std::iter::once(Cow::Borrowed(name))
                            .chain(path.iter().cloned())
                            .collect()
                    })
                    .collect(),
            ),
        }
    }

    /// `self` and `other`'s paths.
    pub fn with(self, other: Mask) -> Mask {
        match (self.paths(), other.paths()) {
            (Some(a), Some(b)) => Mask::Paths(a.iter().chain(b.iter()).cloned().collect()),
            _ => Mask::Whole,
        }
    }

    /// `written` laid over `stored` as this mask says: the entity the write leaves.
    pub fn merge(&self, stored: Option<PropertyMap>, written: PropertyMap) -> PropertyMap {
        let mut stored = match (stored, self) {
            (_, Mask::Whole) => return written,
            // Nothing stored (most writes) and an entity type's write: what the type wrote is
            // exactly what it declares, without naming the mask's paths.
            (None, Mask::Declared(_)) => return written,
            // Nothing stored, and each property written is masked whole: all of it (the
            // mask of a client that names what it writes, such as this crate's own).
            (None, Mask::Paths(paths)) if masked_whole(paths, &written) => return written,
            // Nothing stored: only the masked paths of what is written (as the service).
            (None, Mask::Paths(_)) => PropertyMap::new(),
            (Some(stored), _) => stored,
        };
        if let Some(paths) = self.paths() {
            for path in paths.iter() {
                overlay(&mut stored, &written, path);
            }
        }
        stored
    }
}

/// Whether `paths` names each of `written`'s properties as a whole (a path of its name alone).
fn masked_whole(paths: &[Vec<Cow<'static, str>>], written: &PropertyMap) -> bool {
    let mut whole: Vec<&str> = paths
        .iter()
        .filter_map(|path| match path.as_slice() {
            [name] => Some(name.as_ref()),
            _ => None,
        })
        .collect();
    whole.sort_unstable();
    written
        .keys()
        .all(|name| whole.binary_search(&name).is_ok())
}

/// The stored names of one declared property: its own (or, flattened, its `name.sub`
/// properties), then its former names.
fn stored_names(property: &'static PropertySchema) -> impl Iterator<Item = Cow<'static, str>> {
    let flattened = property.embedded().filter(|_| property.flatten);
    // `#[property(flatten)]`: its `name.sub` properties.
    let subs = flattened.into_iter().flat_map(move |inner| {
        inner
            .properties
            .iter()
            .map(move |sub| Cow::Owned(format!("{}.{}", property.name, sub.name)))
    });
    let own = flattened.is_none().then_some(Cow::Borrowed(property.name));
    own.into_iter()
        .chain(subs)
        .chain(property.aliases.iter().map(|&alias| Cow::Borrowed(alias)))
}

/// [`Mask::read_paths`] of `schema`, each behind `prefix`; `seen` holds the schemas being
/// walked, so a type that embeds itself is read whole at its second level.
fn read_paths(
    schema: &'static Schema,
    seen: &mut Vec<*const Schema>,
    prefix: &[Cow<'static, str>],
    out: &mut Vec<Vec<Cow<'static, str>>>,
) {
    let behind = |name: Cow<'static, str>| prefix.iter().cloned().chain([name]).collect();
    for property in schema.properties {
        let inner = property.embedded().filter(|inner| {
            !property.flatten
                && !property.repeated()
                && !inner.properties.is_empty()
                && !seen.contains(&std::ptr::from_ref(*inner))
        });
        match inner {
            Some(inner) => {
                seen.push(std::ptr::from_ref(inner));
                let path: Vec<_> = behind(Cow::Borrowed(property.name));
                read_paths(inner, seen, &path, out);
                seen.pop();
                out.extend(property.aliases.iter().map(|&a| behind(Cow::Borrowed(a))));
            }
            None => out.extend(stored_names(property).map(behind)),
        }
    }
}

/// Masks are equal when they keep the same paths.
impl PartialEq for Mask {
    fn eq(&self, other: &Mask) -> bool {
        self.paths() == other.paths()
    }
}

impl Eq for Mask {}

/// Sets `path` of `stored` to what `written` holds there (removes it when `written` has none).
fn overlay(stored: &mut PropertyMap, written: &PropertyMap, path: &[Cow<'static, str>]) {
    let Some((name, rest)) = path.split_first() else {
        return;
    };
    let name = name.as_ref();
    let source = written.get(name);
    if rest.is_empty() {
        match source {
            Some(property) => {
                stored.insert(name, property.clone());
            }
            None => {
                stored.remove(name);
            }
        }
        return;
    }
    let empty = PropertyMap::new();
    let inner_written = match source.map(|p| &p.value) {
        Some(Value::Entity(inner)) => inner,
        _ => &empty,
    };
    let (mut inner, excluded, annotations) = match take_entity(stored, name) {
        Some(parts) => parts,
        // Nothing to remove a path from, and nothing to write.
        None if source.is_none() => return,
        // What is stored there is replaced below.
        None => (PropertyMap::new(), false, Annotations::None),
    };
    overlay(&mut inner, inner_written, rest);
    let (excluded, annotations) = match source {
        Some(p) => (p.excluded, p.annotations.clone()),
        None => (excluded, annotations),
    };
    stored.insert(
        name,
        Property {
            value: Value::Entity(inner),
            excluded,
            annotations,
        },
    );
}

impl PropertyTransform {
    /// Applies the transform to `entity` as the service does, `request_time` being the
    /// commit's; returns its result. The value written is indexed; an array transformed keeps
    /// each stored element's exclusion and meaning (an element appended is indexed), as the
    /// service keeps them.
    pub fn apply(&self, entity: &mut PropertyMap, request_time: Timestamp) -> Value {
        let property = property_at(entity, &self.path);
        let current = property.map(|p| &p.value);
        // Each element of the stored array with its meaning and exclusion.
        let marked = || -> Vec<(Value, (i32, bool))> {
            match property {
                Some(p) => match &p.value {
                    Value::Array(values) => values
                        .iter()
                        .enumerate()
                        .map(|(i, v)| {
                            let view = AnnotationsView::of(&p.annotations);
                            (v.clone(), view.element(i, p.excluded))
                        })
                        .collect(),
                    _ => Vec::new(),
                },
                None => Vec::new(),
            }
        };
        let array = |marked: Vec<(Value, (i32, bool))>| {
            let (values, marks): (Vec<Value>, Vec<(i32, bool)>) = marked.into_iter().unzip();
            let (annotations, excluded) = Annotations::of_elements(marks);
            Property {
                value: Value::Array(values),
                excluded,
                annotations,
            }
        };
        let (new, result) = match &self.kind {
            TransformKind::Increment(by) => {
                let new = increment(current, by);
                (Property::indexed(new.clone()), new)
            }
            TransformKind::Maximum(other) => {
                let new = extreme(current, other, std::cmp::Ordering::Greater);
                (Property::indexed(new.clone()), new)
            }
            TransformKind::Minimum(other) => {
                let new = extreme(current, other, std::cmp::Ordering::Less);
                (Property::indexed(new.clone()), new)
            }
            TransformKind::AppendMissing(values) => {
                let mut elements = marked();
                for value in values {
                    if !elements.iter().any(|(a, _)| equivalent(a, value)) {
                        elements.push((value.clone(), (0, false)));
                    }
                }
                (array(elements), Value::Null)
            }
            TransformKind::RemoveAll(values) => {
                let mut elements = marked();
                elements.retain(|(a, _)| !values.iter().any(|v| equivalent(a, v)));
                (array(elements), Value::Null)
            }
            TransformKind::RequestTime => {
                // Milliseconds, as the service's request time.
                let millis = request_time.as_micros().div_euclid(1000) * 1000;
                let time = Value::Timestamp(Timestamp::from_micros(millis));
                (Property::indexed(time.clone()), time)
            }
        };
        set_at(entity, &self.path, new);
        result
    }
}

/// The property at `path` in `entity`, if there is one.
fn property_at<'m>(entity: &'m PropertyMap, path: &[Cow<'static, str>]) -> Option<&'m Property> {
    let (name, rest) = path.split_first()?;
    let property = entity.get(name)?;
    match (rest.is_empty(), &property.value) {
        (true, _) => Some(property),
        (false, Value::Entity(inner)) => property_at(inner, rest),
        (false, _) => None,
    }
}

/// Takes the embedded entity `name` out of `map`: its properties, exclusion and annotations;
/// `None` (and `map` unchanged) when `name` holds no embedded entity.
fn take_entity(map: &mut PropertyMap, name: &str) -> Option<(PropertyMap, bool, Annotations)> {
    if !matches!(map.get(name).map(|p| &p.value), Some(Value::Entity(_))) {
        return None;
    }
    let Property {
        value,
        excluded,
        annotations,
    } = map.remove(name)?;
    Some((
        value.into_entity().unwrap_or_default(),
        excluded,
        annotations,
    ))
}

/// Sets `path` of `entity` to `property`, creating the embedded entities on the way.
fn set_at(entity: &mut PropertyMap, path: &[Cow<'static, str>], property: Property) {
    let Some((name, rest)) = path.split_first() else {
        return;
    };
    if rest.is_empty() {
        entity.insert(name.as_ref(), property);
        return;
    }
    let (mut inner, excluded, annotations) =
        take_entity(entity, name).unwrap_or((PropertyMap::new(), false, Annotations::None));
    set_at(&mut inner, rest, property);
    entity.insert(
        name.as_ref(),
        Property {
            value: Value::Entity(inner),
            excluded,
            annotations,
        },
    );
}

/// `current + by`: integers saturate, a double on either side makes a double; anything but a
/// number becomes `by`.
fn increment(current: Option<&Value>, by: &Value) -> Value {
    match (current, by) {
        (Some(Value::Integer(a)), Value::Integer(b)) => Value::Integer(a.saturating_add(*b)),
        (Some(Value::Integer(a)), Value::Double(b)) => Value::Double(*a as f64 + b),
        (Some(Value::Double(a)), Value::Integer(b)) => Value::Double(a + *b as f64),
        (Some(Value::Double(a)), Value::Double(b)) => Value::Double(a + b),
        _ => by.clone(),
    }
}

/// The larger (`wanted` = `Greater`) or smaller of `current` and `other`: `other` if `current`
/// is not a number, NaN if either is, `current` if they are equal (3 and 3.0, 0 and -0.0).
fn extreme(current: Option<&Value>, other: &Value, wanted: std::cmp::Ordering) -> Value {
    let Some(current) = current.filter(|c| is_number(c)) else {
        return other.clone();
    };
    if is_nan(current) {
        return current.clone();
    }
    if is_nan(other) {
        return other.clone();
    }
    match numeric_cmp(other, current) {
        Some(order) if order == wanted => other.clone(),
        _ => current.clone(),
    }
}

fn is_number(value: &Value) -> bool {
    matches!(value, Value::Integer(_) | Value::Double(_))
}

fn is_nan(value: &Value) -> bool {
    matches!(value, Value::Double(d) if d.is_nan())
}

/// How two numbers compare, integers and doubles alike (`None`: not two numbers, or NaN).
fn numeric_cmp(a: &Value, b: &Value) -> Option<std::cmp::Ordering> {
    match (a, b) {
        (Value::Integer(a), Value::Integer(b)) => Some(a.cmp(b)),
        (Value::Double(a), Value::Double(b)) => a.partial_cmp(b),
        (Value::Integer(i), Value::Double(d)) => int_double(*i, *d),
        (Value::Double(d), Value::Integer(i)) => {
            int_double(*i, *d).map(std::cmp::Ordering::reverse)
        }
        _ => None,
    }
}

/// How integer `i` compares with double `d`, exactly.
fn int_double(i: i64, d: f64) -> Option<std::cmp::Ordering> {
    match (i as f64).partial_cmp(&d)? {
        // Equal as doubles: compare the integer with the double's integer part, exactly.
        std::cmp::Ordering::Equal if d.fract() == 0.0 && d.abs() < 9.2e18 => {
            Some(i.cmp(&(d as i64)))
        }
        order => Some(order),
    }
}

/// Whether two values are the same element for the array transforms: numbers by value (3 and
/// 3.0), NaN equal to NaN, anything else by equality.
fn equivalent(a: &Value, b: &Value) -> bool {
    match (is_number(a) && is_number(b), is_nan(a) || is_nan(b)) {
        (true, true) => is_nan(a) && is_nan(b),
        (true, false) => numeric_cmp(a, b) == Some(std::cmp::Ordering::Equal),
        (false, _) => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::value::Property;

    fn map(properties: &[(&str, Value)]) -> PropertyMap {
        let mut map = PropertyMap::new();
        for (name, value) in properties {
            map.insert(name, Property::indexed(value.clone()));
        }
        map
    }

    fn paths(paths: &[&[&'static str]]) -> Mask {
        Mask::Paths(
            paths
                .iter()
                .map(|p| p.iter().map(|&n| Cow::Borrowed(n)).collect())
                .collect(),
        )
    }

    /// Over nothing stored, a mask keeps only the paths it names: all of a write whose every
    /// property it names whole, nothing else of one it does not, and only the named part of
    /// an embedded entity.
    #[test]
    fn a_mask_over_nothing_stored_keeps_only_its_paths() {
        let inner = map(&[("b", Value::Integer(1)), ("c", Value::Integer(2))]);
        let written = map(&[
            ("a", Value::Entity(inner)),
            ("d", Value::String("x".into())),
        ]);
        let whole = paths(&[&["a"], &["d"], &["e"]]).merge(None, written.clone());
        assert_eq!(whole, written);
        let some = paths(&[&["d"]]).merge(None, written.clone());
        assert_eq!(some, map(&[("d", Value::String("x".into()))]));
        let inside = paths(&[&["a", "b"], &["d"]]).merge(None, written);
        let expected = map(&[
            ("a", Value::Entity(map(&[("b", Value::Integer(1))]))),
            ("d", Value::String("x".into())),
        ]);
        assert_eq!(inside, expected);
    }
}
