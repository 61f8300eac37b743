//! What a typed query answers in: a [`Page`] of results with the [`Cursor`] to the next
//! one (R-Q3: there is no offset anywhere), and the sums of [`Numeric`] properties. Plain
//! data, below the `Db` that runs queries.

use std::fmt;
use std::str::FromStr;

use base64::Engine as _;

use crate::error::Error;
use crate::model::value::Value;

/// An opaque position in a query's results (R-Q3).
///
/// It round-trips through `to_string()` / `parse()` (URL-safe text), so it can go into a
/// web page's "next" link. A cursor that was altered, or that belongs to another query,
/// is [`Error::InvalidCursor`] when used.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Cursor(Vec<u8>);

impl Cursor {
    /// The cursor's bytes, as the backend produced them.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// A cursor from bytes a backend (or a sharded query) produced.
    pub fn from_bytes(bytes: Vec<u8>) -> Cursor {
        Cursor(bytes)
    }

    /// Its bytes, taken.
    pub fn into_bytes(self) -> Vec<u8> {
        self.0
    }
}

impl fmt::Display for Cursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&self.0))
    }
}

/// Its text (feature `serde`): a cursor kept in a web page or a job's state.
#[cfg(feature = "serde")]
impl serde::Serialize for Cursor {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        crate::model::ecosystem::serde_forms::as_text(self, s)
    }
}

/// Its text, checked as `Cursor::from_str` checks it (feature `serde`).
#[cfg(feature = "serde")]
impl<'de> serde::Deserialize<'de> for Cursor {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        crate::model::ecosystem::serde_forms::from_text(d)
    }
}

impl fmt::Debug for Cursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Cursor({self})")
    }
}

impl FromStr for Cursor {
    type Err = Error;
    fn from_str(text: &str) -> Result<Cursor, Error> {
        base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(text)
            .map(Cursor)
            .map_err(|_| Error::InvalidCursor {
                reason: "it is not cursor text (URL-safe base64)".to_owned(),
            })
    }
}

/// One page of results and the cursor to the next page (`None`: there are no more).
#[derive(Debug, Clone, PartialEq)]
pub struct Page<T> {
    /// The results, in order.
    pub items: Vec<T>,
    /// Where the next page starts; `None` when this is the last page.
    pub next: Option<Cursor>,
}

impl<T> Page<Result<T, Error>> {
    /// The page, or the first of its items' errors.
    pub fn transpose(self) -> Result<Page<T>, Error> {
        Ok(Page {
            items: self.items.into_iter().collect::<Result<_, _>>()?,
            next: self.next,
        })
    }
}

/// A numeric property type, which [`Query::sum`](struct.Query.html#method.sum) and [`Query::avg`](struct.Query.html#method.avg) take: integers sum to an
/// `i64`, doubles to an `f64`.
#[diagnostic::on_unimplemented(
    message = "`sum` and `avg` take a numeric property; this one holds `{Self}`",
    label = "not a property of integers or doubles",
    note = "the service sums integers and doubles only (other values are skipped); count \
            the results with `count()` instead"
)]
pub trait Numeric {
    /// What the sum is.
    type Sum;
    /// The sum from the aggregation's value, or why it is not one.
    fn sum(value: Value) -> Result<Self::Sum, SumError>;
}

/// Why an aggregation's sum is not a number of the summed property's type
/// ([`Numeric::sum`]).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum SumError {
    /// The integers summed leave the range of an `i64`: the service sums them into a double,
    /// this one.
    #[error("{0}: the integer sum overflowed a 64-bit integer")]
    Overflowed(f64),
    /// The answer held another value.
    #[error("{0:?}")]
    NotANumber(Box<Value>),
}

macro_rules! numeric {
    ($sum:ty: $($t:ty),*) => {$(
        impl Numeric for $t {
            type Sum = $sum;
            fn sum(value: Value) -> Result<$sum, SumError> {
                numeric_sum::<$sum>(value)
            }
        }
    )*};
}
numeric!(i64: i8, i16, i32, i64, u8, u16, u32);
numeric!(f64: f32, f64);

trait FromSum: Sized {
    fn from_sum(value: &Value) -> Option<Self>;
}

impl FromSum for i64 {
    fn from_sum(value: &Value) -> Option<i64> {
        match value {
            Value::Integer(i) => Some(*i),
            _ => None,
        }
    }
}

impl FromSum for f64 {
    fn from_sum(value: &Value) -> Option<f64> {
        match value {
            Value::Integer(i) => Some(*i as f64),
            Value::Double(d) => Some(*d),
            _ => None,
        }
    }
}

fn numeric_sum<S: FromSum>(value: Value) -> Result<S, SumError> {
    S::from_sum(&value).ok_or_else(|| match value {
        // The service sums integers into a double when the sum leaves the range of an i64.
        Value::Double(d) => SumError::Overflowed(d),
        other => SumError::NotANumber(Box::new(other)),
    })
}
