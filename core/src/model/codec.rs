//! The stored form's bytes: the tag of each kind of value, the little-endian numbers and
//! length-prefixed strings they are made of, and [`Reader`], which decodes what
//! `stored.rs`'s [`Writer`](crate::model::stored::Writer) wrote into [`Value`]s, checking
//! everything it reads. Decoding never panics: malformed bytes are [`Malformed`].

use std::collections::VecDeque;

use crate::model::annotations::{AnnotationsView, head};
use crate::model::key::{IdOrName, KeyId, PartitionId, PathElement, RawKey};
use crate::model::name::KeyName;
use crate::model::scalar::{Blob, GeoPoint, Timestamp, Vector};
use crate::model::value::{Entries, Property, PropertyMap, Repr, Value};

pub const NULL: u8 = 0;
pub const BOOLEAN: u8 = 1;
pub const INTEGER: u8 = 2;
pub const DOUBLE: u8 = 3;
pub const TIMESTAMP: u8 = 4;
pub const STRING: u8 = 5;
pub const BLOB: u8 = 6;
pub const GEO: u8 = 7;
pub const KEY: u8 = 8;
pub const ARRAY: u8 = 9;
pub const ENTITY: u8 = 10;
/// A vector: its dimension, then each value's bits (eight bytes each).
pub const VECTOR: u8 = 11;

/// Nesting deeper than this (arrays in entities in arrays…) is refused when reading. What a
/// [`Writer`](crate::model::stored::Writer) writes is far shallower: it stops one level past [`MAX_NESTING`](crate::model::value::MAX_NESTING) in each value
/// it is given, and the write is refused there (see [`Writer::value`](crate::model::stored::Writer::value)).
pub const MAX_DEPTH: usize = 128;

/// Bytes that are not what a [`Writer`](crate::model::stored::Writer) (or the engine's order-preserving encoding) wrote:
/// only ever from a corrupt store or an altered cursor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Malformed;

/// Reads what a [`Writer`](crate::model::stored::Writer) wrote.
pub struct Reader<'a> {
    bytes: &'a [u8],
    depth: usize,
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes, depth: 0 }
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], Malformed> {
        if self.bytes.len() < n {
            return Err(Malformed);
        }
        let (head, tail) = self.bytes.split_at(n);
        self.bytes = tail;
        Ok(head)
    }

    pub fn u8(&mut self) -> Result<u8, Malformed> {
        Ok(self.take(1)?[0])
    }

    pub fn u64(&mut self) -> Result<u64, Malformed> {
        let mut buf = [0u8; 8];
        buf.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(buf))
    }

    fn len(&mut self) -> Result<usize, Malformed> {
        let mut buf = [0u8; 4];
        buf.copy_from_slice(self.take(4)?);
        let n = u32::from_le_bytes(buf) as usize;
        // Every element takes at least one byte: a larger count is a lie, not a reason to allocate.
        if n > self.bytes.len() {
            return Err(Malformed);
        }
        Ok(n)
    }

    /// A length-prefixed byte string, as [`Writer::bytes`] wrote it.
    pub fn bytes(&mut self) -> Result<&'a [u8], Malformed> {
        let n = self.len()?;
        self.take(n)
    }

    fn string(&mut self) -> Result<String, Malformed> {
        let n = self.len()?;
        let bytes = self.take(n)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| Malformed)
    }

    pub fn key(&mut self) -> Result<RawKey, Malformed> {
        let partition = match self.u8()? {
            0 => None,
            1 => Some(PartitionId {
                project_id: self.string()?,
                database_id: self.string()?,
                namespace: self.string()?,
            }),
            _ => return Err(Malformed),
        };
        let n = self.len()?;
        let mut path = Vec::with_capacity(n);
        for _ in 0..n {
            let kind = self.string()?;
            let id_or_name = match self.u8()? {
                0 => None,
                1 => Some(IdOrName::Id(
                    KeyId::stored(self.u64()?.cast_signed()).map_err(|_| Malformed)?,
                )),
                2 => Some(IdOrName::Name(KeyName::stored(self.string()?))),
                _ => return Err(Malformed),
            };
            // Any key the service accepts reads back (a `/`, a negative id): lenient, as the
            // service's reads are.
            path.push(PathElement::stored(kind, id_or_name));
        }
        RawKey::new(partition, path).map_err(|_| Malformed)
    }

    pub fn value(&mut self) -> Result<Value, Malformed> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(Malformed);
        }
        let value = match self.u8()? {
            NULL => Value::Null,
            BOOLEAN => Value::Boolean(self.u8()? != 0),
            INTEGER => Value::Integer(self.u64()?.cast_signed()),
            DOUBLE => Value::Double(f64::from_bits(self.u64()?)),
            TIMESTAMP => {
                Value::Timestamp(Timestamp::checked(self.u64()?.cast_signed()).ok_or(Malformed)?)
            }
            STRING => Value::String(self.string()?),
            BLOB => {
                let n = self.len()?;
                Value::Blob(Blob::from(self.take(n)?))
            }
            GEO => {
                let lat = f64::from_bits(self.u64()?);
                let lng = f64::from_bits(self.u64()?);
                Value::GeoPoint(GeoPoint::new(lat, lng).map_err(|_| Malformed)?)
            }
            KEY => Value::Key(self.key()?),
            ARRAY => {
                let n = self.len()?;
                Value::Array(
                    (0..n)
                        .map(|_| self.value())
                        .collect::<Result<_, Malformed>>()?,
                )
            }
            ENTITY => Value::Entity(self.properties()?),
            VECTOR => {
                let n = self.len()?;
                let bytes = self.take(n.checked_mul(8).ok_or(Malformed)?)?;
                Value::Vector(vector_of(bytes)?)
            }
            _ => return Err(Malformed),
        };
        self.depth -= 1;
        Ok(value)
    }

    pub fn properties(&mut self) -> Result<PropertyMap, Malformed> {
        let n = self.len()?;
        let mut entries = Entries {
            names: String::with_capacity(16 * n.min(64)),
            entries: VecDeque::with_capacity(n.min(self.bytes.len())),
        };
        for _ in 0..n {
            let name = self.string()?;
            let (excluded, annotations, rest) = head(self.bytes).ok_or(Malformed)?;
            let annotations = AnnotationsView::stored(annotations).to_annotations();
            self.bytes = rest;
            let value = self.value()?;
            let property = Property {
                value,
                excluded,
                annotations,
            };
            entries.insert(&name, property);
        }
        Ok(PropertyMap {
            repr: Repr::Entries(entries),
        })
    }
}

/// Reads a little-endian u32 length at the start of `bytes`.
#[inline]
pub fn len(bytes: &[u8]) -> Result<(usize, &[u8]), Malformed> {
    let (head, rest) = bytes.split_first_chunk::<4>().ok_or(Malformed)?;
    Ok((u32::from_le_bytes(*head) as usize, rest))
}

#[inline]
pub fn u64(bytes: &[u8]) -> Result<(u64, &[u8]), Malformed> {
    let (head, rest) = bytes.split_first_chunk::<8>().ok_or(Malformed)?;
    Ok((u64::from_le_bytes(*head), rest))
}

/// Length-prefixed bytes.
#[inline]
pub fn chunk(bytes: &[u8]) -> Result<(&[u8], &[u8]), Malformed> {
    let (n, rest) = len(bytes)?;
    if rest.len() < n {
        return Err(Malformed);
    }
    Ok(rest.split_at(n))
}

#[inline]
pub fn text(bytes: &[u8]) -> Result<(&str, &[u8]), Malformed> {
    let (b, rest) = chunk(bytes)?;
    Ok((std::str::from_utf8(b).map_err(|_| Malformed)?, rest))
}

/// A double from its eight stored bytes. Inlined across crates: a vector's distance reads
/// one per value.
#[inline]
pub fn double_bits(bytes: &[u8]) -> f64 {
    f64::from_bits(u64::from_le_bytes(bytes.try_into().unwrap_or_default()))
}

/// A vector's stored values (eight bytes each), checked.
pub fn vector_of(bytes: &[u8]) -> Result<Vector, Malformed> {
    Vector::new(bytes.chunks_exact(8).map(double_bits).collect()).map_err(|_| Malformed)
}
