//! The Google Cloud path's form of property maps: `pb::Value`s by name, as a `LookupResponse`
//! holds them or as the derive writes them for a commit. It is the model's [`ForeignMap`]:
//! the derive writes an entity bound for Google Cloud straight into the `pb::Entity` its
//! commit sends and reads a received one straight out of its message, without the stored
//! form between; a map is decoded into [`Property`]s only if something asks for a
//! `&Property`. A received map is checked once on arrival ([`from_wire`]).

use std::any::Any;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use gcloud_sdk::google::datastore::v1 as pb;
use gcloud_sdk::prost::encoding::{encoded_len_varint, hash_map, key_len, message, string};
use smallvec::SmallVec;

use crate::backend::cloud::wire::{Partitions, from_timestamp, timestamp};
use crate::backend::cloud::wire_map::{
    array, check_wire, property_from_wire, scalar, value_from_wire, wire_entity, wire_properties,
    wire_value,
};
use datastore_entity_core::error::Error;
use datastore_entity_core::model::key::RawKey;
use datastore_entity_core::model::value::{
    ForeignForm, ForeignInOrder, ForeignMap, Piece, Property, PropertyMap, Value,
};
use datastore_entity_core::model::views::{MapView, ValueView};
use pb::value::ValueType as V;

/// The wire form of one database: key values read and written against its partitions.
#[derive(Clone, Debug)]
pub struct WireForm(pub Arc<Partitions>);

impl ForeignForm for WireForm {
    fn new_map(&self, excluded: bool, properties: usize) -> Box<dyn ForeignMap> {
        Box::new(Wire {
            properties: HashMap::with_capacity(properties),
            form: self.clone(),
            excluded,
            // Empty; each property the derive writes adds its size.
            size: Measured::known(0),
            writing: Writing::default(),
        })
    }
}

/// Properties in the service's protocol buffers.
pub struct Wire {
    properties: HashMap<String, pb::Value>,
    form: WireForm,
    /// Whether every value written into the map is excluded from indexes (the properties
    /// of an excluded embedded entity).
    excluded: bool,
    /// The properties' encoded size, once measured (the limits check, then the commit), or
    /// summed as the derive writes them.
    size: Measured,
    /// The value being written.
    writing: Writing,
}

/// A `pb::Value` built from the derive's pieces: arrays are announced by their length and
/// filled by the pieces that follow.
#[derive(Default)]
struct Writing {
    /// Whether the value is excluded from indexes (each element of an array is).
    excluded: bool,
    /// The arrays being filled, innermost last, with how many elements each still lacks.
    open: Vec<(Vec<pb::Value>, usize)>,
    done: Option<pb::Value>,
}

impl Writing {
    fn push(&mut self, value_type: V) {
        let value = scalar(value_type, self.excluded);
        self.push_value(value);
    }

    /// Adds a finished value to the innermost open array, closing the arrays it fills.
    fn push_value(&mut self, mut value: pb::Value) {
        loop {
            let Some((elements, missing)) = self.open.last_mut() else {
                self.done = Some(value);
                return;
            };
            elements.push(value);
            *missing -= 1;
            if *missing > 0 {
                return;
            }
            let (values, _) = self.open.pop().unwrap_or_default();
            value = array(values);
        }
    }

    fn array(&mut self, len: usize) {
        match len {
            0 => self.push_value(array(Vec::new())),
            _ => self.open.push((Vec::with_capacity(len), len)),
        }
    }
}

impl Clone for Wire {
    fn clone(&self) -> Wire {
        Wire {
            properties: self.properties.clone(),
            form: self.form.clone(),
            excluded: self.excluded,
            size: self.size.clone(),
            writing: Writing::default(),
        }
    }
}

/// The properties of an entity the service returned, as they are: checked once (what
/// converting them could refuse), converted only as they are read.
pub fn from_wire(
    properties: HashMap<String, pb::Value>,
    partitions: &Arc<Partitions>,
) -> Result<PropertyMap, Error> {
    properties
        .values()
        .try_for_each(|v| check_wire(v, partitions))?;
    let map = Wire {
        properties,
        form: WireForm(Arc::clone(partitions)),
        excluded: false,
        size: Measured::unknown(),
        writing: Writing::default(),
    };
    Ok(PropertyMap::foreign(Box::new(map)))
}

/// The properties in the wire form: as they are when the map holds that form, otherwise
/// converted (all excluded when `excluded`).
pub fn into_wire(
    mut map: PropertyMap,
    partitions: &Partitions,
    excluded: bool,
) -> HashMap<String, pb::Value> {
    if let Some(w) = map
        .foreign_map()
        .and_then(|m| m.as_any_mut().downcast_mut::<Wire>())
        && (w.excluded || !excluded)
    {
        return std::mem::take(&mut w.properties);
    }
    wire_properties(MapView::Map(&map).iter(), excluded, partitions, 0)
}

/// What one property adds to the encoded length of a `pb::Entity`'s `properties` (field 2, a
/// map): exactly what prost counts for that entry.
fn entry_len(name: &String, value: &pb::Value) -> usize {
    let len = match name.is_empty() {
        true => 0,
        false => string::encoded_len(1, name),
    } + match *value == pb::Value::default() {
        true => 0,
        false => message::encoded_len(2, value),
    };
    key_len(2) + encoded_len_varint(len as u64) + len
}

impl ForeignMap for Wire {
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }

    fn clone_map(&self) -> Box<dyn ForeignMap> {
        Box::new(self.clone())
    }

    fn len(&self) -> usize {
        self.properties.len()
    }

    fn contains(&self, name: &str) -> bool {
        self.properties.contains_key(name)
    }

    fn decode(&self) -> Result<Vec<(&str, Property)>, Error> {
        self.properties
            .iter()
            .map(|(name, v)| Ok((name.as_str(), property_from_wire(v.clone(), &self.form.0)?)))
            .collect()
    }

    fn get(&self, name: &str) -> Option<Result<Property, Error>> {
        let value = self.properties.get(name)?;
        Some(property_from_wire(value.clone(), &self.form.0))
    }

    fn take(&mut self, name: &str) -> Option<Result<Value, Error>> {
        let value = self.properties.remove(name)?;
        self.size.set(None);
        Some(value_from_wire(value, &self.form.0))
    }

    fn read_in_order(
        &mut self,
        count: usize,
        slot: fn(&str) -> Option<usize>,
        read: &mut dyn FnMut(&mut dyn ForeignInOrder),
    ) {
        self.size.set(None);
        let mut slots: SmallVec<[Option<&mut pb::Value>; 16]> =
            std::iter::repeat_with(|| None).take(count).collect();
        for (name, value) in self.properties.iter_mut() {
            if let Some(place) = slot(name).and_then(|i| slots.get_mut(i)) {
                *place = Some(value);
            }
        }
        read(&mut WireInOrder {
            slots,
            at: 0,
            partitions: &self.form.0,
        });
    }

    fn excluded(&self) -> bool {
        self.excluded
    }

    fn form(&self) -> &dyn ForeignForm {
        &self.form
    }

    fn begin(&mut self, excluded: bool) {
        self.writing.excluded = excluded;
        self.writing.open.clear();
        self.writing.done = None;
    }

    fn write(&mut self, piece: Piece<'_>) {
        let w = &mut self.writing;
        match piece {
            Piece::Null => w.push(V::NullValue(0)),
            Piece::Boolean(b) => w.push(V::BooleanValue(b)),
            Piece::Integer(i) => w.push(V::IntegerValue(i)),
            Piece::Double(d) => w.push(V::DoubleValue(d)),
            Piece::Timestamp(t) => w.push(V::TimestampValue(timestamp(t))),
            Piece::String(s) => w.push(V::StringValue(s.to_owned())),
            Piece::Blob(b) => w.push(V::BlobValue(b.to_vec())),
            Piece::Key(key) => w.push(V::KeyValue(self.form.0.key(key))),
            Piece::Array(len) => w.array(len),
            Piece::Entity(properties) => {
                let properties = into_wire(properties, &self.form.0, w.excluded);
                w.push(V::EntityValue(wire_entity(properties)));
            }
            Piece::Value(value) => {
                let value = wire_value(ValueView::of(value), w.excluded, &self.form.0);
                w.push_value(value);
            }
        }
    }

    fn finish(&mut self, name: &str) {
        let value = self
            .writing
            .done
            .take()
            .unwrap_or_else(|| scalar(V::NullValue(0), false));
        let name = name.to_owned();
        let entry = entry_len(&name, &value);
        // The size so far plus this property's, unless it replaced one (then measured again
        // when asked).
        let size = self.size.get().map(|size| size + entry);
        let replaced = self.properties.insert(name, value).is_some();
        self.size.set(size.filter(|_| !replaced));
    }

    fn encoded_len(&self) -> usize {
        self.size.get_or_measure(|| {
            hash_map::encoded_len(
                string::encoded_len,
                message::encoded_len,
                2,
                &self.properties,
            )
        })
    }

    fn entity_len(&self, key: &RawKey) -> usize {
        message::encoded_len(1, &self.form.0.key(key)) + self.encoded_len()
    }
}

/// A received map read in its type's fields' order (see `model/read_in_order.rs`): each
/// property put in its field's place by the derive's `match` on its name, in one walk over
/// the map — no hashing, no removal, no sort — then moved out where it lies as its field
/// reads it, its strings moved, not copied. What the type does not know is passed over:
/// arrival checked it.
struct WireInOrder<'a> {
    slots: SmallVec<[Option<&'a mut pb::Value>; 16]>,
    at: usize,
    partitions: &'a Partitions,
}

impl ForeignInOrder for WireInOrder<'_> {
    fn next_value(&mut self) -> Option<Result<Value, Error>> {
        let value = self.slots.get_mut(self.at).and_then(Option::take);
        self.at += 1;
        let value = value?;
        // A scalar is read where it lies (checked on arrival), a string moved out alone;
        // anything else moved out whole.
        let read = match &mut value.value_type {
            None | Some(V::NullValue(_)) => Value::Null,
            Some(V::BooleanValue(b)) => Value::Boolean(*b),
            Some(V::IntegerValue(i)) => Value::Integer(*i),
            Some(V::DoubleValue(d)) => Value::Double(*d),
            Some(V::TimestampValue(t)) => Value::Timestamp(from_timestamp(t)),
            Some(V::StringValue(s)) => Value::String(std::mem::take(s)),
            _ => return Some(value_from_wire(std::mem::take(value), self.partitions)),
        };
        Some(Ok(read))
    }
}

/// A size known from `&self` once measured (or kept up to date by the writes that change
/// it). An atomic rather than a `OnceLock`: setting a `OnceLock` goes through its `Once`,
/// which costs as much as a small property's whole conversion.
#[derive(Debug)]
struct Measured(AtomicUsize);

impl Measured {
    /// Not measured.
    const UNKNOWN: usize = usize::MAX;

    fn unknown() -> Measured {
        Measured(AtomicUsize::new(Measured::UNKNOWN))
    }

    fn known(size: usize) -> Measured {
        Measured(AtomicUsize::new(size))
    }

    /// The size, if known.
    fn get(&self) -> Option<usize> {
        let size = self.0.load(Ordering::Relaxed);
        (size != Measured::UNKNOWN).then_some(size)
    }

    /// The size, measured by `measure` if it is not known yet.
    fn get_or_measure(&self, measure: impl FnOnce() -> usize) -> usize {
        self.get().unwrap_or_else(|| {
            let size = measure();
            self.0.store(size, Ordering::Relaxed);
            size
        })
    }

    /// Sets the size (or forgets it).
    fn set(&mut self, size: Option<usize>) {
        *self.0.get_mut() = size.unwrap_or(Measured::UNKNOWN);
    }
}

impl Clone for Measured {
    fn clone(&self) -> Measured {
        Measured(AtomicUsize::new(self.0.load(Ordering::Relaxed)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datastore_entity_core::model::key::{IdOrName, KeyId, PartitionId, PathElement};
    use datastore_entity_core::model::scalar::Timestamp;
    use datastore_entity_core::model::scalar::{Blob, GeoPoint};
    use datastore_entity_core::model::sink::Form;
    use datastore_entity_core::model::value::Property;
    use gcloud_sdk::google::r#type::LatLng;

    /// The wire map `m` holds, if it holds one.
    fn as_wire(m: &mut PropertyMap) -> Option<&mut Wire> {
        m.foreign_map()?.as_any_mut().downcast_mut::<Wire>()
    }

    /// What the derive writes for an entity with every kind of field, into `form`.
    fn written(form: Form<'_>) -> PropertyMap {
        let reference = RawKey::new(
            None,
            vec![PathElement::new("Other", Some(IdOrName::Id(KeyId::new(9).unwrap()))).unwrap()],
        )
        .unwrap();
        let mut m = PropertyMap::in_form(form, 8, 256);
        m.put_with("a_tags", false, |w| {
            w.array(2);
            w.string("x");
            w.string("é");
        });
        m.put_with("b_empty", true, |w| w.array(0));
        m.put_with("c_inner", true, |w| {
            w.entity(|form| {
                let mut inner = PropertyMap::in_form(form, 2, 64);
                inner.put_with("n", false, |w| w.integer(-3));
                inner.put_with("when", false, |w| {
                    w.timestamp(Timestamp::from_micros(-1_500_001))
                });
                inner
            })
        });
        m.put_with("d_key", false, |w| w.key(&reference));
        m.put_with("e_nested", false, |w| {
            w.value(&Value::Array(vec![
                Value::Null,
                Value::Double(0.5),
                Value::Blob(Blob::from(vec![0, 255])),
                Value::GeoPoint(GeoPoint::new(1.5, -2.5).unwrap()),
            ]))
        });
        m.put_with("f_none", false, |w| w.null());
        m.put_with("g_flag", false, |w| w.boolean(true));
        m
    }

    /// The two forms of the sink are one: an entity written straight into the wire form is the
    /// message the stored form converts to (the cloud backend's conversion of any map), with
    /// exclusion carried into excluded embedded entities and key values in the handle's
    /// partition.
    #[test]
    fn the_wire_form_is_what_the_stored_form_converts_to() {
        let handle = PartitionId {
            project_id: "p".into(),
            database_id: "db".into(),
            namespace: "ns".into(),
        };
        let partitions = Arc::new(Partitions::new("p", "db").writing_into(&handle));
        let mut wire = written(Form::foreign(&WireForm(Arc::clone(&partitions))));
        assert!(as_wire(&mut wire).is_some());
        let stored = written(Form::STORED);
        assert!(stored.stored_bytes().is_some());
        assert_eq!(wire.len(), 7);
        // Read back, the values are the written ones (exclusion is the wire's: carried by
        // the values inside an excluded entity, and by no element of an empty array).
        let values = |m: &PropertyMap| m.values().map(|p| p.value.clone()).collect::<Vec<_>>();
        let mut expected = values(&stored);
        expected[2] = Value::Entity(PropertyMap::from([
            ("n", Property::excluded(Value::Integer(-3))),
            (
                "when",
                Property::excluded(Value::Timestamp(Timestamp::from_micros(-1_500_001))),
            ),
        ]));
        if let Value::Key(k) = &mut expected[3] {
            *k = k.clone().with_partition(handle.clone());
        }
        assert_eq!(values(&wire), expected);
        let size = wire.encoded_size();
        let sent = into_wire(wire, &partitions, false);
        assert_eq!(sent, into_wire(stored, &partitions, false));
        assert_eq!(
            size,
            hash_map::encoded_len(string::encoded_len, message::encoded_len, 2, &sent)
        );
        let inner = match &sent["c_inner"].value_type {
            Some(V::EntityValue(e)) => e,
            other => panic!("{other:?}"),
        };
        assert!(inner.properties.values().all(|v| v.exclude_from_indexes));
        match &sent["d_key"].value_type {
            Some(V::KeyValue(k)) => {
                let partition = k.partition_id.as_ref().unwrap();
                assert_eq!(partition.namespace_id, "ns");
                assert_eq!(partition.database_id, "db");
            }
            other => panic!("{other:?}"),
        }
        // The flag lives on an array's elements, never on the array.
        assert!(!sent["a_tags"].exclude_from_indexes);
        assert!(!sent["b_empty"].exclude_from_indexes);
    }

    /// A map received from the service is read lazily, and what it cannot hold is refused
    /// when it arrives, not turned into a null later.
    #[test]
    fn a_received_map_is_checked_once_and_read_where_it_lies() {
        let partitions = Arc::new(Partitions::new("p", ""));
        let mut properties = HashMap::new();
        properties.insert("s".to_owned(), scalar(V::StringValue("hi".into()), true));
        let map = from_wire(properties.clone(), &partitions).unwrap();
        assert_eq!(map["s"], Property::excluded(Value::String("hi".into())));
        let mut map = from_wire(properties.clone(), &partitions).unwrap();
        let taken = map.take_as(
            "s",
            |_| unreachable!(),
            |mut value| match &mut value {
                Value::String(s) => Ok(std::mem::take(s)),
                other => Err(datastore_entity_core::model::value::DecodeError::mismatch(
                    "string", other,
                )),
            },
        );
        assert_eq!(taken.unwrap().unwrap(), "hi");
        assert!(map.is_empty() && as_wire(&mut map).is_some());
        properties.insert(
            "g".to_owned(),
            scalar(
                V::GeoPointValue(LatLng {
                    latitude: 91.0,
                    longitude: 0.0,
                }),
                false,
            ),
        );
        assert!(from_wire(properties, &partitions).is_err());
    }

    /// A wire map the derive writes adds up its encoded size as it goes, to exactly what prost
    /// measures for the finished map, and knows whether its names were all validated by the
    /// derive; a property written twice makes it measure again.
    #[test]
    fn a_wire_map_sums_its_size_as_it_is_written() {
        let partitions = Arc::new(Partitions::new("p", ""));
        let form = WireForm(Arc::clone(&partitions));
        let measured = |m: &mut PropertyMap| {
            let w = as_wire(m).expect("a wire map");
            let size =
                hash_map::encoded_len(string::encoded_len, message::encoded_len, 2, &w.properties);
            (w.size.get(), size)
        };
        let mut m = written(Form::foreign(&form));
        let (summed, size) = measured(&mut m);
        assert_eq!(summed, Some(size));
        assert!(!m.facts().names, "put_with's names are not vouched for");

        let mut m = PropertyMap::in_form(Form::foreign(&form), 4, 0);
        m.put_next("a", false, |w| w.string(&"x".repeat(300)));
        m.put_next("b", true, |w| {
            w.array(2);
            w.null();
            w.entity(|form| {
                let mut inner = PropertyMap::in_form(form, 1, 0);
                inner.put_next("c", false, |w| w.integer(0));
                inner
            });
        });
        let (summed, size) = measured(&mut m);
        assert_eq!(summed, Some(size));
        assert!(m.facts().names);
        m.put_next("b", false, |w| {
            w.value(&Value::Array(vec![Value::Integer(1)]))
        });
        assert_eq!(
            measured(&mut m).0,
            None,
            "replaced: measured again when asked"
        );
        assert_eq!(m.encoded_size(), measured(&mut m).1);
        assert!(!m.facts().names, "a `Value` may hold any names");
    }
}
