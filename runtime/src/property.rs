//! Typed property descriptors (`Account::EMAIL`) and the filters and orders built from them.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use crate::value::{PropertyType, Value};

/// Marker: the property is indexed, so it can be filtered, ordered and projected on.
#[derive(Debug, Clone, Copy)]
pub enum Indexed {}

/// Marker: the property is excluded from indexes (`#[exclude_from_index]`, `#[ttl]`, R-I1).
#[derive(Debug, Clone, Copy)]
pub enum Excluded {}

/// [`Indexed`] or [`Excluded`]; `And<J>` is the marker of a path through both (a property
/// inside an excluded embedded entity is excluded too).
pub trait IndexMarker: sealed::Marker {
    /// The marker of `self` followed by `J`.
    type And<J: IndexMarker>: IndexMarker;
}

impl IndexMarker for Indexed {
    type And<J: IndexMarker> = J;
}

impl IndexMarker for Excluded {
    type And<J: IndexMarker> = Excluded;
}

/// Implemented only by [`Indexed`]: what filters, orders and projections require.
#[diagnostic::on_unimplemented(
    message = "this property is excluded from indexes, so it cannot be used in a filter, an order or a projection",
    label = "excluded from indexes",
    note = "an excluded property (`#[exclude_from_index]`, `#[ttl]`, or the plain value of a `#[sharded_index]` \
            field) has no index entries, so a query on it would find nothing (R-I1)",
    note = "remove `#[exclude_from_index]` from the field if you need to query on it; query a \
            `#[sharded_index]` field through its generated `query_by_<field>` helper (R-S3)"
)]
pub trait Queryable: sealed::Sealed {}
impl Queryable for Indexed {}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::Indexed {}
    pub trait Marker {}
    impl Marker for super::Indexed {}
    impl Marker for super::Excluded {}
}

/// A stored property of entity type `E`, holding Rust type `T`; `I` is [`Indexed`] or [`Excluded`].
///
/// The derive generates one per field, named in SCREAMING_SNAKE_CASE (`Post::TITLE`).
pub struct PropertyPath<E, T, I> {
    name: Cow<'static, str>,
    marker: PhantomData<Marker<E, T, I>>,
}

/// Variance and auto traits of a descriptor do not depend on its type parameters.
type Marker<E, T, I> = fn() -> (E, T, I);

impl<E, T, I> PropertyPath<E, T, I> {
    /// A descriptor for the stored name `name` (used by the generated code).
    pub const fn new(name: &'static str) -> Self {
        PropertyPath {
            name: Cow::Borrowed(name),
            marker: PhantomData,
        }
    }

    /// The stored name (a dotted path inside embedded entities).
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl<E, T: PropertyType, I: IndexMarker> PropertyPath<E, T, I> {
    /// The property `inner` of the embedded entity this property holds, addressed as
    /// `outer.inner` (R-P2): `Post::LOCATION.dot(Address::CITY).eq("Paris")`. Works through
    /// `Option` and `Vec` (an array of embedded entities matches on any element).
    pub fn dot<U, J: IndexMarker>(
        &self,
        inner: PropertyPath<T::Operand, U, J>,
    ) -> PropertyPath<E, U, I::And<J>> {
        PropertyPath {
            name: Cow::Owned(format!("{}.{}", self.name, inner.name)),
            marker: PhantomData,
        }
    }
}

impl<E, T: PropertyType, I> PropertyPath<E, T, I> {
    fn filter(&self, op: Operator, operand: T::Operand) -> Filter<E> {
        Filter {
            property: self.name.clone(),
            op,
            value: operand.to_value(),
            entity: PhantomData,
        }
    }

    /// `property = value`; on an array property, matches when any element equals `value`.
    pub fn eq(&self, value: impl Into<T::Operand>) -> Filter<E>
    where
        I: Queryable,
    {
        self.filter(Operator::Equal, value.into())
    }

    /// `property = null`: the entities where the property holds null (an `Option` field
    /// holding `None`); entities without the property are not returned.
    pub fn is_null(&self) -> Filter<E>
    where
        I: Queryable,
    {
        Filter {
            property: self.name.clone(),
            op: Operator::Equal,
            value: Value::Null,
            entity: PhantomData,
        }
    }

    /// `property < value`.
    pub fn lt(&self, value: impl Into<T::Operand>) -> Filter<E>
    where
        I: Queryable,
    {
        self.filter(Operator::LessThan, value.into())
    }

    /// `property <= value`.
    pub fn le(&self, value: impl Into<T::Operand>) -> Filter<E>
    where
        I: Queryable,
    {
        self.filter(Operator::LessThanOrEqual, value.into())
    }

    /// `property > value`.
    pub fn gt(&self, value: impl Into<T::Operand>) -> Filter<E>
    where
        I: Queryable,
    {
        self.filter(Operator::GreaterThan, value.into())
    }

    /// `property >= value`.
    pub fn ge(&self, value: impl Into<T::Operand>) -> Filter<E>
    where
        I: Queryable,
    {
        self.filter(Operator::GreaterThanOrEqual, value.into())
    }

    /// Ascending order on this property.
    pub fn asc(&self) -> Order<E>
    where
        I: Queryable,
    {
        self.order(Direction::Ascending)
    }

    /// Descending order on this property.
    pub fn desc(&self) -> Order<E>
    where
        I: Queryable,
    {
        self.order(Direction::Descending)
    }

    fn order(&self, direction: Direction) -> Order<E> {
        Order {
            property: self.name.clone(),
            direction,
            entity: PhantomData,
        }
    }
}

impl<E, T, I> Clone for PropertyPath<E, T, I> {
    fn clone(&self) -> Self {
        PropertyPath {
            name: self.name.clone(),
            marker: PhantomData,
        }
    }
}

impl<E, T, I> fmt::Debug for PropertyPath<E, T, I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PropertyPath({})", self.name)
    }
}

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operator {
    /// `=`
    Equal,
    /// `<`
    LessThan,
    /// `<=`
    LessThanOrEqual,
    /// `>`
    GreaterThan,
    /// `>=`
    GreaterThanOrEqual,
}

impl Operator {
    /// Whether this is an inequality (range) operator.
    pub fn is_inequality(self) -> bool {
        self != Operator::Equal
    }
}

/// A sort direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Smallest first.
    Ascending,
    /// Largest first.
    Descending,
}

/// A property filter on entities of type `E`, built from a property descriptor.
pub struct Filter<E> {
    /// The property's stored name.
    pub property: Cow<'static, str>,
    /// The comparison.
    pub op: Operator,
    /// The operand.
    pub value: Value,
    entity: PhantomData<fn() -> E>,
}

/// An order on entities of type `E`, built from a property descriptor.
pub struct Order<E> {
    /// The property's stored name.
    pub property: Cow<'static, str>,
    /// The direction.
    pub direction: Direction,
    entity: PhantomData<fn() -> E>,
}

impl<E> fmt::Debug for Filter<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Filter({} {:?} {:?})",
            self.property, self.op, self.value
        )
    }
}

impl<E> fmt::Debug for Order<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Order({} {:?})", self.property, self.direction)
    }
}
