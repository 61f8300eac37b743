//! Server-side transforms, typed by the property they touch: `Account::BALANCE.increment(5)`,
//! `.maximum(n)`, `.minimum(n)` on numbers, `.append_missing(..)`, `.remove_all(..)` on `Vec`
//! fields, `.request_time()` on timestamps. Anything else does not compile.

use std::borrow::Cow;
use std::marker::PhantomData;

use crate::model::property_type::PropertyType;
use crate::model::scalar::Timestamp;
use crate::model::value::Value;
use crate::query::descriptor::PropertyPath;
use crate::query::write::{PropertyTransform, TransformKind};

/// A server-side transform of one property of `E`, applied by the service to the stored entity
/// (no read, no transaction): built from the property's descriptor, so only a transform the
/// property's type allows compiles. Several, of different properties and kinds, go in one array
/// (`db.transform(&key, [Account::BALANCE.increment(5), Account::SEEN.request_time()])`).
pub struct Transform<E> {
    /// The transform, or the path into an embedded entity it was asked of, which is refused.
    pub transform: Result<PropertyTransform, EmbeddedPath>,
    marker: PhantomData<fn() -> E>,
}

impl<E> Clone for Transform<E> {
    fn clone(&self) -> Self {
        Transform {
            transform: self.transform.clone(),
            marker: PhantomData,
        }
    }
}

impl<E> std::fmt::Debug for Transform<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.transform {
            Ok(t) => write!(f, "Transform({:?} {:?})", t.path, t.kind),
            Err(reason) => write!(f, "Transform(refused: {reason})"),
        }
    }
}

/// A property whose value the numeric transforms (`increment`, `maximum`, `minimum`) may
/// change: `i64` or `f64`, or an `Option` of one.
#[diagnostic::on_unimplemented(
    message = "`increment`, `maximum` and `minimum` change a property of `i64` or `f64`; this one holds `{Self}`",
    label = "not an `i64` or `f64` property",
    note = "the service adds and compares integers and doubles only, and an integer it saturates at \
            the `i64` range: a narrower integer field could not read the result back"
)]
pub trait Arithmetic {
    /// What the transform takes: the field's number type.
    type Operand;
    /// The operand as the service takes it.
    fn operand(by: Self::Operand) -> Value;
}

impl Arithmetic for i64 {
    type Operand = i64;
    fn operand(by: i64) -> Value {
        Value::Integer(by)
    }
}

impl Arithmetic for f64 {
    type Operand = f64;
    fn operand(by: f64) -> Value {
        Value::Double(by)
    }
}

impl<T: Arithmetic> Arithmetic for Option<T> {
    type Operand = T::Operand;
    fn operand(by: T::Operand) -> Value {
        T::operand(by)
    }
}

/// A property whose elements the array transforms (`append_missing`, `remove_all`) change: a
/// `Vec` of values, taking a `Vec` of the same values.
#[diagnostic::on_unimplemented(
    message = "`append_missing` and `remove_all` change an array property (a `Vec` field); this one holds `{Self}`",
    label = "not a `Vec` property",
    note = "the service appends to and removes from arrays only"
)]
pub trait ArrayOf {
    /// The element type.
    type Element: PropertyType;
}

impl<U: PropertyType> ArrayOf for Vec<U> {
    type Element = U;
}

/// A timestamp property, which `request_time` sets to the time the service processed the
/// request: [`Timestamp`], `chrono::DateTime<Utc>` and `time::OffsetDateTime` (with their
/// features), or an `Option` of one.
#[diagnostic::on_unimplemented(
    message = "`request_time` sets a timestamp property; this one holds `{Self}`",
    label = "not a timestamp property",
    note = "the service writes its request time as a timestamp: use a `Timestamp` field (or \
            `chrono::DateTime<Utc>`, `time::OffsetDateTime` with their features)"
)]
pub trait ServerTime {}

impl ServerTime for Timestamp {}
impl<T: ServerTime> ServerTime for Option<T> {}
#[cfg(feature = "chrono")]
impl ServerTime for chrono::DateTime<chrono::Utc> {}
#[cfg(feature = "time")]
impl ServerTime for time::OffsetDateTime {}

/// A transform's path into an embedded entity (`e.x`): refused, as ambiguous (the property `e`
/// then `x`, or a flattened property named `e.x`).
#[derive(Clone, Debug)]
pub struct EmbeddedPath(pub String);

impl std::fmt::Display for EmbeddedPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "`{}` is a path into an embedded entity; transforms are typed on an entity's own \
             properties (build a `PropertyTransform` with the path for a backend's \
             `commit_changes`)",
            self.0
        )
    }
}

/// Values as the service takes them.
fn elements<U: PropertyType>(values: &[U]) -> Vec<Value> {
    values.iter().map(PropertyType::to_value).collect()
}

impl<E, T, I> PropertyPath<E, T, I> {
    fn transform(&self, kind: TransformKind) -> Transform<E> {
        let name = self.name();
        // A path through an embedded entity is a name with dots: as a transform path it could
        // be the property `e` then `x`, or a flattened property named `e.x`. Refused rather
        // than guessed.
        let transform = match name.contains('.') {
            true => Err(EmbeddedPath(name.to_owned())),
            false => Ok(PropertyTransform {
                path: vec![Cow::Owned(name.to_owned())],
                kind,
            }),
        };
        Transform {
            transform,
            marker: PhantomData,
        }
    }

    /// Adds `by` to the stored value, on the server: no read, no transaction (a property that
    /// is missing, or not a number, is set to `by`; an integer saturates at the `i64` range).
    /// Its result is the new value.
    pub fn increment(&self, by: T::Operand) -> Transform<E>
    where
        T: Arithmetic,
    {
        self.transform(TransformKind::Increment(T::operand(by)))
    }

    /// Sets the property to the larger of its value and `other`, on the server. Its result is
    /// the new value.
    pub fn maximum(&self, other: T::Operand) -> Transform<E>
    where
        T: Arithmetic,
    {
        self.transform(TransformKind::Maximum(T::operand(other)))
    }

    /// Sets the property to the smaller of its value and `other`, on the server. Its result is
    /// the new value.
    pub fn minimum(&self, other: T::Operand) -> Transform<E>
    where
        T: Arithmetic,
    {
        self.transform(TransformKind::Minimum(T::operand(other)))
    }

    /// Appends each of `values` the array does not hold yet, in order, on the server: a set
    /// without a read (a property that is not an array starts empty). Its result is null.
    pub fn append_missing(&self, values: Vec<T::Element>) -> Transform<E>
    where
        T: ArrayOf,
    {
        self.transform(TransformKind::AppendMissing(elements(&values)))
    }

    /// Removes every element equal to one of `values`, on the server (a property that is not
    /// an array becomes empty). Its result is null.
    pub fn remove_all(&self, values: Vec<T::Element>) -> Transform<E>
    where
        T: ArrayOf,
    {
        self.transform(TransformKind::RemoveAll(elements(&values)))
    }

    /// Sets the property to the time the service processed the request (milliseconds; the
    /// same time for every transform of one commit). Its result is that time.
    pub fn request_time(&self) -> Transform<E>
    where
        T: ServerTime,
    {
        self.transform(TransformKind::RequestTime)
    }
}
