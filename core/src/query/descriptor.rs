//! Typed property descriptors (`Account::EMAIL`, `Key::PROPERTY`) and the filters and orders
//! built from them, checked by the type system (R-I1: nothing on an excluded property).

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use crate::model::entity::Entity;
use crate::model::key::{KEY_PROPERTY, Key};
use crate::model::property_type::PropertyType;
use crate::model::schema::Direction;
use crate::model::value::Value;
use crate::query::spec::{FilterNode, Operator, PropertyFilter};

/// Marker: the property is indexed, so it can be filtered, ordered and projected on.
#[derive(Debug, Clone, Copy)]
pub enum Indexed {}

/// Marker: the property is excluded from indexes (`#[exclude_from_index]`, `#[ttl]`, R-I1).
#[derive(Debug, Clone, Copy)]
pub enum Excluded {}

/// Marker: a path through a `Vec` of embedded entities that is not `#[property(flatten)]`
/// (`Order::ITEMS.dot(LineItem::SKU)`). The service indexes nothing inside an array of
/// entities, so such a path cannot be filtered, ordered or projected on.
#[derive(Debug, Clone, Copy)]
pub enum InArray {}

/// Marker of a `#[property(flatten)]` field, indexed as `I` says: its own name holds no
/// property (it is stored as `field.sub` properties), so it is reached through `.dot(...)`.
#[derive(Debug, Clone, Copy)]
pub struct Flattened<I>(std::convert::Infallible, PhantomData<I>);

/// What a descriptor's path is: [`Indexed`], [`Excluded`], [`InArray`] or [`Flattened`].
/// `And<J>` is the marker of a path through an embedded entity into a property marked `J` (a
/// property inside an excluded embedded entity is excluded too); `ThroughArray<J>` the same
/// through a `Vec` of embedded entities.
pub trait IndexMarker: sealed::Marker {
    /// The marker of `self` followed by `J`.
    type And<J: IndexMarker>: IndexMarker;
    /// The marker of `self`, an array of embedded entities, followed by `J`.
    type ThroughArray<J: IndexMarker>: IndexMarker;
}

impl IndexMarker for Indexed {
    type And<J: IndexMarker> = J;
    type ThroughArray<J: IndexMarker> = InArray;
}

impl IndexMarker for Excluded {
    type And<J: IndexMarker> = Excluded;
    type ThroughArray<J: IndexMarker> = Excluded;
}

impl IndexMarker for InArray {
    type And<J: IndexMarker> = InArray;
    type ThroughArray<J: IndexMarker> = InArray;
}

/// Flattened, an array is one array per sub-property: indexed element by element.
impl<I: IndexMarker> IndexMarker for Flattened<I> {
    type And<J: IndexMarker> = I::And<J>;
    type ThroughArray<J: IndexMarker> = I::And<J>;
}

/// How `.dot(...)` passes through a property of type `Self`: into one embedded entity (or an
/// `Option` or a `Box` of one), or into each element of a `Vec` of them. The derive implements
/// it for each embedded entity type.
pub trait Nested {
    /// The marker of a path marked `I` through `Self` into a property marked `J`.
    type Path<I: IndexMarker, J: IndexMarker>: IndexMarker;
}

impl<T: Nested> Nested for Option<T> {
    type Path<I: IndexMarker, J: IndexMarker> = T::Path<I, J>;
}

impl<T: Nested> Nested for Box<T> {
    type Path<I: IndexMarker, J: IndexMarker> = T::Path<I, J>;
}

impl<T: Nested> Nested for Vec<T> {
    type Path<I: IndexMarker, J: IndexMarker> = I::ThroughArray<J>;
}

/// A marker that filters, orders and projections accept: [`Indexed`] only. They require the
/// three traits below rather than this one: each other marker lacks exactly one of them, so a
/// mistake is one error that says which (this trait is for generic code of users).
#[diagnostic::on_unimplemented(
    message = "a property marked `{Self}` cannot be used in a filter, an order or a projection",
    label = "not an indexed property",
    note = "only an indexed property (marker `Indexed`) has index entries a query can read (R-I1, R-P2)"
)]
pub trait Queryable: NotExcluded + NotInArray + NotFlattened {}
impl<I: NotExcluded + NotInArray + NotFlattened> Queryable for I {}

/// Implemented by every marker but [`Excluded`].
#[diagnostic::on_unimplemented(
    message = "this property is excluded from indexes, so it cannot be used in a filter, an order or a projection",
    label = "excluded from indexes",
    note = "an excluded property (`#[exclude_from_index]`, `#[ttl]`, a `Vector`, or the plain value of a \
            `#[sharded_index]` field) has no index entries, so a query on it would find nothing (R-I1)",
    note = "remove `#[exclude_from_index]` from the field if you need to query on it; query a \
            `#[sharded_index]` field through its generated `query_by_<field>` helper (R-S3)"
)]
pub trait NotExcluded: sealed::Marker {}
impl NotExcluded for Indexed {}
impl NotExcluded for InArray {}
impl<I> NotExcluded for Flattened<I> {}

/// Implemented by every marker but [`InArray`].
#[diagnostic::on_unimplemented(
    message = "this property is inside a `Vec` of embedded entities, so it cannot be used in a filter, an order or a projection",
    label = "inside an array of embedded entities",
    note = "the service indexes nothing inside an array of embedded entities, so a query on it would \
            find nothing (R-P2)",
    note = "declare the `Vec` field `#[property(flatten)]`: it is then stored as one array per \
            sub-property (`field.sub`, as NDB and Go write it), each of them indexed"
)]
pub trait NotInArray: sealed::Marker {}
impl NotInArray for Indexed {}
impl NotInArray for Excluded {}
impl<I> NotInArray for Flattened<I> {}

/// Implemented by every marker but [`Flattened`].
#[diagnostic::on_unimplemented(
    message = "a `#[property(flatten)]` field is stored as its sub-properties, so it cannot be used as a whole in a filter, an order or a projection",
    label = "a flattened embedded entity",
    note = "filter, order or project on one of its properties: `.dot(Inner::PROPERTY)`"
)]
pub trait NotFlattened: sealed::Marker {}
impl NotFlattened for Indexed {}
impl NotFlattened for Excluded {}
impl NotFlattened for InArray {}

mod sealed {
    pub trait Marker {}
    impl Marker for super::Indexed {}
    impl Marker for super::Excluded {}
    impl Marker for super::InArray {}
    impl<I> Marker for super::Flattened<I> {}
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

impl<E, T: PropertyType + Nested, I: IndexMarker> PropertyPath<E, T, I> {
    /// The property `inner` of the embedded entity this property holds, addressed as
    /// `outer.inner` (R-P2): `Post::LOCATION.dot(Address::CITY).eq("Paris")`. Works through
    /// `Option`, and through a `Vec` declared `#[property(flatten)]` (one array per
    /// sub-property, matched per element). Through a plain `Vec` of embedded entities the path
    /// is [`InArray`]: it names the property (for a sort of the results in Rust, say) but
    /// does not compile in a filter, an order or a projection, as the service indexes nothing
    /// inside such an array.
    pub fn dot<U, J: IndexMarker>(
        &self,
        inner: PropertyPath<T::Operand, U, J>,
    ) -> PropertyPath<E, U, T::Path<I, J>> {
        PropertyPath {
            name: Cow::Owned(format!("{}.{}", self.name, inner.name)),
            marker: PhantomData,
        }
    }
}

impl<E, T: PropertyType, I> PropertyPath<E, T, I> {
    fn filter(&self, op: Operator, value: Value) -> Filter<E> {
        Filter::leaf(PropertyFilter {
            property: self.name.clone().into_owned(),
            op,
            value,
        })
    }

    /// `property = value`; on an array property, matches when any element equals `value`.
    pub fn eq(&self, value: impl Into<T::Operand>) -> Filter<E>
    where
        I: NotExcluded + NotInArray + NotFlattened,
    {
        self.filter(Operator::Equal, value.into().to_value())
    }

    /// `property = null`: the entities where the property holds null (an `Option` field
    /// holding `None`); entities without the property are not returned.
    pub fn is_null(&self) -> Filter<E>
    where
        I: NotExcluded + NotInArray + NotFlattened,
    {
        self.filter(Operator::Equal, Value::Null)
    }

    /// `property < value`.
    pub fn lt(&self, value: impl Into<T::Operand>) -> Filter<E>
    where
        I: NotExcluded + NotInArray + NotFlattened,
    {
        self.filter(Operator::LessThan, value.into().to_value())
    }

    /// `property <= value`.
    pub fn le(&self, value: impl Into<T::Operand>) -> Filter<E>
    where
        I: NotExcluded + NotInArray + NotFlattened,
    {
        self.filter(Operator::LessThanOrEqual, value.into().to_value())
    }

    /// `property > value`.
    pub fn gt(&self, value: impl Into<T::Operand>) -> Filter<E>
    where
        I: NotExcluded + NotInArray + NotFlattened,
    {
        self.filter(Operator::GreaterThan, value.into().to_value())
    }

    /// `property >= value`.
    pub fn ge(&self, value: impl Into<T::Operand>) -> Filter<E>
    where
        I: NotExcluded + NotInArray + NotFlattened,
    {
        self.filter(Operator::GreaterThanOrEqual, value.into().to_value())
    }

    /// `property != value`: the entities holding some value other than `value` (an array
    /// matches when any element differs; an entity without the property does not match).
    /// A not-equal filter orders by its property, as a range filter does, and a query takes
    /// one `ne` or `not_in` at most.
    pub fn ne(&self, value: impl Into<T::Operand>) -> Filter<E>
    where
        I: NotExcluded + NotInArray + NotFlattened,
    {
        self.filter(Operator::NotEqual, value.into().to_value())
    }

    /// `property IN (values)`: equal to one of them (at most 30; an array literal of more, or
    /// of none, does not compile). Results are in key order unless ordered.
    pub fn is_in<L: InValues<T::Operand>>(&self, values: L) -> Filter<E>
    where
        I: NotExcluded + NotInArray + NotFlattened,
    {
        self.filter(Operator::In, Value::Array(values.into_values()))
    }

    /// `property NOT IN (values)`: holding some value that is none of them (at most 10; an
    /// array literal of more, or of none, does not compile). Orders by its property, as a
    /// range filter does; cannot be combined with `is_in`, `or` or another `ne`/`not_in`.
    pub fn not_in<L: NotInValues<T::Operand>>(&self, values: L) -> Filter<E>
    where
        I: NotExcluded + NotInArray + NotFlattened,
    {
        self.filter(Operator::NotIn, Value::Array(values.into_values()))
    }

    /// Ascending order on this property.
    pub fn asc(&self) -> Order<E>
    where
        I: NotExcluded + NotInArray + NotFlattened,
    {
        self.order(Direction::Ascending)
    }

    /// Descending order on this property.
    pub fn desc(&self) -> Order<E>
    where
        I: NotExcluded + NotInArray + NotFlattened,
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

/// A filter on entities of type `E`: a property filter built from a descriptor
/// (`Post::AUTHOR.eq("ann")`), or filters combined with [`and`](Filter::and) and
/// [`or`](Filter::or), nested as deep as needed.
pub struct Filter<E> {
    node: FilterNode,
    entity: PhantomData<fn() -> E>,
}

impl<E> Filter<E> {
    pub fn leaf(filter: PropertyFilter) -> Filter<E> {
        Filter {
            node: FilterNode::Property(filter),
            entity: PhantomData,
        }
    }

    /// Both `self` and `other` hold.
    pub fn and(self, other: Filter<E>) -> Filter<E> {
        self.combine(other, true)
    }

    /// `self` or `other` holds (or both). An entity matching both is returned once. The
    /// service answers an `or` as one query per branch of its disjunctive normal form (at
    /// most 30, `is_in` values counted), merged in the query's order.
    pub fn or(self, other: Filter<E>) -> Filter<E> {
        self.combine(other, false)
    }

    fn combine(self, other: Filter<E>, and: bool) -> Filter<E> {
        let mut terms = Vec::with_capacity(2);
        for node in [self.node, other.node] {
            match (node, and) {
                (FilterNode::And(inner), true) | (FilterNode::Or(inner), false) => {
                    terms.extend(inner)
                }
                (node, _) => terms.push(node),
            }
        }
        Filter {
            node: match and {
                true => FilterNode::And(terms),
                false => FilterNode::Or(terms),
            },
            entity: PhantomData,
        }
    }

    /// The untyped filter, as the backends receive it.
    pub fn node(&self) -> &FilterNode {
        &self.node
    }

    pub fn into_node(self) -> FilterNode {
        self.node
    }
}

impl<E> Clone for Filter<E> {
    fn clone(&self) -> Self {
        Filter {
            node: self.node.clone(),
            entity: PhantomData,
        }
    }
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
        write!(f, "Filter({})", self.node)
    }
}

impl<E> fmt::Debug for Order<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Order({} {:?})", self.property, self.direction)
    }
}

/// The values of an [`is_in`](PropertyPath::is_in) filter: an array literal of 1 to 30 values
/// (checked when compiling), or a `Vec` (checked when the query runs).
#[diagnostic::on_unimplemented(
    message = "`is_in` takes 1 to 30 values of the property's type; `{Self}` is not such a list",
    label = "not 1 to 30 values of the property's type",
    note = "the service refuses an IN filter with more than 30 values, or none: split the values \
            over several queries, or filter on a property that groups them"
)]
pub trait InValues<T> {
    /// The values, in their stored form.
    fn into_values(self) -> Vec<Value>;
}

/// The values of a [`not_in`](PropertyPath::not_in) filter: an array literal of 1 to 10 values
/// (checked when compiling), or a `Vec` (checked when the query runs).
#[diagnostic::on_unimplemented(
    message = "`not_in` takes 1 to 10 values of the property's type; `{Self}` is not such a list",
    label = "not 1 to 10 values of the property's type",
    note = "the service refuses a NOT_IN filter with more than 10 values, or none"
)]
pub trait NotInValues<T> {
    /// The values, in their stored form.
    fn into_values(self) -> Vec<Value>;
}

/// Listed values in their stored form.
fn stored<T: PropertyType, U: Into<T>>(values: impl IntoIterator<Item = U>) -> Vec<Value> {
    values.into_iter().map(|v| v.into().to_value()).collect()
}

/// An array length, for the bounds on [`InValues`] and [`NotInValues`].
pub struct Count<const N: usize>;

/// Implemented by [`Count<N>`] for `1 <= N <= 30`.
pub trait AtMost30 {}
/// Implemented by [`Count<N>`] for `1 <= N <= 10`.
pub trait AtMost10 {}

macro_rules! counts {
    ($bound:ident: $($n:literal)*) => {$(impl $bound for Count<$n> {})*};
}
counts!(AtMost10: 1 2 3 4 5 6 7 8 9 10);
counts!(AtMost30: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30);

#[diagnostic::do_not_recommend]
impl<T: PropertyType, U: Into<T>, const N: usize> InValues<T> for [U; N]
where
    Count<N>: AtMost30,
{
    fn into_values(self) -> Vec<Value> {
        stored(self)
    }
}

impl<T: PropertyType, U: Into<T>> InValues<T> for Vec<U> {
    fn into_values(self) -> Vec<Value> {
        stored(self)
    }
}

#[diagnostic::do_not_recommend]
impl<T: PropertyType, U: Into<T>, const N: usize> NotInValues<T> for [U; N]
where
    Count<N>: AtMost10,
{
    fn into_values(self) -> Vec<Value> {
        stored(self)
    }
}

impl<T: PropertyType, U: Into<T>> NotInValues<T> for Vec<U> {
    fn into_values(self) -> Vec<Value> {
        stored(self)
    }
}

/// The key itself as a property, beside the properties' descriptors.
impl<E: Entity> Key<E> {
    /// The key itself as a property (`__key__`), for filters and orders on keys:
    /// `Key::PROPERTY.gt(key)` (the keys after `key`, its descendants included),
    /// `Key::PROPERTY.is_in([a, b])`, `Key::PROPERTY.desc()` (the last key first).
    /// Keys compare by their path, element by element: a parent before its children.
    pub const PROPERTY: PropertyPath<E, Key<E>, Indexed> = PropertyPath::new(KEY_PROPERTY);
}
