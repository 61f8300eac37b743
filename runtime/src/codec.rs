//! A compact binary form of keys and values, for the embedded engine's cursors (and any
//! other place that must store them as bytes). Decoding never panics: any malformed input
//! is an error, and every decoded name, id and key is validated again.

use crate::key::{IdOrName, PartitionId, PathElement, RawKey};
use crate::value::{Blob, GeoPoint, Property, PropertyMap, Timestamp, Value};
use crate::{KeyId, KeyName};

/// Nesting deeper than this (arrays in entities in arrays…) is refused when decoding.
const MAX_DEPTH: usize = 64;

/// Why bytes could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CodecError(pub(crate) &'static str);

type Result<T> = std::result::Result<T, CodecError>;

/// Appends encoded values to a byte buffer.
#[derive(Default)]
pub(crate) struct Writer {
    pub(crate) bytes: Vec<u8>,
}

impl Writer {
    pub(crate) fn u8(&mut self, b: u8) {
        self.bytes.push(b);
    }

    pub(crate) fn u64(&mut self, n: u64) {
        self.bytes.extend_from_slice(&n.to_le_bytes());
    }

    pub(crate) fn len(&mut self, n: usize) {
        // Lengths beyond u32 cannot occur: entities are far smaller.
        self.bytes
            .extend_from_slice(&u32::try_from(n).unwrap_or(u32::MAX).to_le_bytes());
    }

    pub(crate) fn bytes(&mut self, b: &[u8]) {
        self.len(b.len());
        self.bytes.extend_from_slice(b);
    }

    pub(crate) fn key(&mut self, key: &RawKey) {
        self.partition(key.partition());
        self.path(key);
    }

    pub(crate) fn partition(&mut self, partition: Option<&PartitionId>) {
        match partition {
            None => self.u8(0),
            Some(partition) => {
                self.u8(1);
                self.bytes(partition.project_id.as_bytes());
                self.bytes(partition.database_id.as_bytes());
                self.bytes(partition.namespace.as_bytes());
            }
        }
    }

    /// The key's path without its partition.
    pub(crate) fn path(&mut self, key: &RawKey) {
        self.len(key.path().len());
        for element in key.path() {
            self.bytes(element.kind().as_bytes());
            match element.id_or_name() {
                None => self.u8(0),
                Some(IdOrName::Id(id)) => {
                    self.u8(1);
                    self.u64(id.get().cast_unsigned());
                }
                Some(IdOrName::Name(name)) => {
                    self.u8(2);
                    self.bytes(name.as_str().as_bytes());
                }
            }
        }
    }

    pub(crate) fn value(&mut self, value: &Value) {
        match value {
            Value::Null => self.u8(0),
            Value::Boolean(b) => {
                self.u8(1);
                self.u8(u8::from(*b));
            }
            Value::Integer(i) => {
                self.u8(2);
                self.u64(i.cast_unsigned());
            }
            Value::Double(d) => {
                self.u8(3);
                self.u64(d.to_bits());
            }
            Value::Timestamp(t) => {
                self.u8(4);
                self.u64(t.as_micros().cast_unsigned());
            }
            Value::String(s) => {
                self.u8(5);
                self.bytes(s.as_bytes());
            }
            Value::Blob(b) => {
                self.u8(6);
                self.bytes(b);
            }
            Value::GeoPoint(g) => {
                self.u8(7);
                self.u64(g.latitude().to_bits());
                self.u64(g.longitude().to_bits());
            }
            Value::Key(k) => {
                self.u8(8);
                self.key(k);
            }
            Value::Array(values) => {
                self.u8(9);
                self.len(values.len());
                values.iter().for_each(|v| self.value(v));
            }
            Value::Entity(properties) => {
                self.u8(10);
                self.properties(properties);
            }
        }
    }

    pub(crate) fn properties(&mut self, properties: &PropertyMap) {
        if let Some(stored) = properties.stored_bytes() {
            self.bytes.extend_from_slice(stored);
            return;
        }
        self.len(properties.len());
        for (name, property) in properties {
            self.bytes(name.as_bytes());
            self.u8(u8::from(property.excluded));
            self.value(&property.value);
        }
    }
}

/// Reads what a [`Writer`] wrote.
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
    depth: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes, depth: 0 }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.bytes.len() < n {
            return Err(CodecError("truncated"));
        }
        let (head, tail) = self.bytes.split_at(n);
        self.bytes = tail;
        Ok(head)
    }

    pub(crate) fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }

    pub(crate) fn u64(&mut self) -> Result<u64> {
        let mut buf = [0u8; 8];
        buf.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(buf))
    }

    fn len(&mut self) -> Result<usize> {
        let mut buf = [0u8; 4];
        buf.copy_from_slice(self.take(4)?);
        let n = u32::from_le_bytes(buf) as usize;
        // Every element takes at least one byte: a larger count is a lie, not a reason to allocate.
        if n > self.bytes.len() {
            return Err(CodecError("length beyond the end"));
        }
        Ok(n)
    }

    /// A length-prefixed byte string, as [`Writer::bytes`] wrote it.
    pub(crate) fn bytes(&mut self) -> Result<&'a [u8]> {
        let n = self.len()?;
        self.take(n)
    }

    fn string(&mut self) -> Result<String> {
        let n = self.len()?;
        let bytes = self.take(n)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| CodecError("string is not UTF-8"))
    }

    pub(crate) fn key(&mut self) -> Result<RawKey> {
        let partition = match self.u8()? {
            0 => None,
            1 => Some(PartitionId {
                project_id: self.string()?,
                database_id: self.string()?,
                namespace: self.string()?,
            }),
            _ => return Err(CodecError("bad partition")),
        };
        let n = self.len()?;
        let mut path = Vec::with_capacity(n);
        for _ in 0..n {
            let kind = self.string()?;
            let id_or_name = match self.u8()? {
                0 => None,
                1 => Some(IdOrName::Id(
                    KeyId::new(self.u64()?.cast_signed()).map_err(|_| CodecError("bad id"))?,
                )),
                2 => Some(IdOrName::Name(
                    KeyName::new(self.string()?).map_err(|_| CodecError("bad key name"))?,
                )),
                _ => return Err(CodecError("bad key element")),
            };
            path.push(PathElement::new(kind, id_or_name).map_err(|_| CodecError("bad kind"))?);
        }
        RawKey::new(partition, path).map_err(|_| CodecError("bad key"))
    }

    pub(crate) fn value(&mut self) -> Result<Value> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(CodecError("nested too deeply"));
        }
        let value = match self.u8()? {
            0 => Value::Null,
            1 => Value::Boolean(self.u8()? != 0),
            2 => Value::Integer(self.u64()?.cast_signed()),
            3 => Value::Double(f64::from_bits(self.u64()?)),
            4 => Value::Timestamp(Timestamp::from_micros(self.u64()?.cast_signed())),
            5 => Value::String(self.string()?),
            6 => {
                let n = self.len()?;
                Value::Blob(Blob::from(self.take(n)?))
            }
            7 => {
                let lat = f64::from_bits(self.u64()?);
                let lng = f64::from_bits(self.u64()?);
                Value::GeoPoint(GeoPoint::new(lat, lng).map_err(|_| CodecError("bad geo point"))?)
            }
            8 => Value::Key(self.key()?),
            9 => {
                let n = self.len()?;
                Value::Array((0..n).map(|_| self.value()).collect::<Result<_>>()?)
            }
            10 => Value::Entity(self.properties()?),
            _ => return Err(CodecError("unknown value tag")),
        };
        self.depth -= 1;
        Ok(value)
    }

    pub(crate) fn properties(&mut self) -> Result<PropertyMap> {
        let n = self.len()?;
        let mut properties = PropertyMap::with_capacity(n.min(self.bytes.len()), 16 * n.min(64));
        for _ in 0..n {
            let name = self.string()?;
            let excluded = self.u8()? != 0;
            let value = self.value()?;
            properties.insert(name, Property { value, excluded });
        }
        Ok(properties)
    }
}

/// FNV-1a, 128 bits: for names that must not collide by accident.
pub(crate) fn fnv1a_128(bytes: &[u8]) -> u128 {
    bytes
        .iter()
        .fold(0x6c62_272e_07bb_0142_62b8_2175_6295_c58d_u128, |h, b| {
            (h ^ u128::from(*b)).wrapping_mul(0x0000_0000_0100_0000_0000_0000_0000_013b)
        })
}

/// FNV-1a, 64 bits: stable across releases and platforms, for checksums and fingerprints.
pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_and_garbage_is_an_error() {
        let mut inner = PropertyMap::new();
        inner.insert("a", Property::excluded(Value::Double(f64::NAN)));
        let key = RawKey::new(
            Some(PartitionId::default()),
            vec![PathElement::new("K", Some(IdOrName::Id(KeyId::new(3).unwrap()))).unwrap()],
        )
        .unwrap();
        let value = Value::Array(vec![
            Value::Null,
            Value::String("é".into()),
            Value::Key(key),
            Value::Entity(inner),
            Value::GeoPoint(GeoPoint::new(1.0, 2.0).unwrap()),
        ]);
        let mut w = Writer::default();
        w.value(&value);
        let back = Reader::new(&w.bytes).value().unwrap();
        // NaN != NaN, so compare the encodings.
        let mut w2 = Writer::default();
        w2.value(&back);
        assert_eq!(w.bytes, w2.bytes);
        for cut in 0..w.bytes.len() {
            assert!(Reader::new(&w.bytes[..cut]).value().is_err());
        }
        let deep = [9u8, 1, 0, 0, 0].repeat(1000);
        assert!(Reader::new(&deep).value().is_err());
    }
}
