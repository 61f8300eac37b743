//! A property map read in one pass, in name order, the order the derive reads its fields in:
//! the stored form ([`InOrder`], `in_order.rs`), a map received from the service
//! ([`WireInOrder`]: each property put in its field's place by the derive's `match` on its
//! name, in one walk over the map — no hashing, no removal, no sort — then moved out where it
//! lies as its field reads it), or any other map ([`MapInOrder`], through its lookups), all
//! behind [`OnePass`]. Not a public API: the derive's
//! `__from_in_order` reads through it (by way of `model/generated.rs`).

use crate::error::Error;
use crate::model::in_order::InOrder;
use crate::model::property_type::PropertyType;
use crate::model::stored::ValueRef;
use crate::model::value::{DecodeError, PropertyMap};

/// A property map read in one pass, in name order (see the module docs).
pub trait ReadInOrder {
    /// Reads property `name` as a `T`; an entity without it gives `missing()` when there is
    /// a default, else `T::from_missing`. Names must be asked for in increasing order.
    fn read_as<T: PropertyType>(
        &mut self,
        name: &str,
        missing: Option<fn() -> T>,
    ) -> Result<T, DecodeError>;

    /// Checks what was not read; an error if the map was malformed.
    fn finish(self) -> Result<(), Error>;
}

fn missing_as<T: PropertyType>(missing: Option<fn() -> T>) -> Result<T, DecodeError> {
    missing.map_or_else(T::from_missing, |missing| Ok(missing()))
}

impl ReadInOrder for InOrder<'_> {
    #[inline]
    fn read_as<T: PropertyType>(
        &mut self,
        name: &str,
        missing: Option<fn() -> T>,
    ) -> Result<T, DecodeError> {
        // Straight from the bytes when they hold a value of `T`'s own kind, else checked
        // and read through a view (the same value, the same mistakes).
        let Some(at) = self.find(name) else {
            return missing_as(missing);
        };
        if let Some((read, rest)) = T::read_stored(at) {
            self.read_to(rest.0);
            return Ok(read);
        }
        match self.view(at) {
            Some(value) => T::read_value(ValueRef(value)),
            None => missing_as(missing),
        }
    }

    fn finish(self) -> Result<(), Error> {
        InOrder::finish(self)
    }
}

#[cfg(feature = "cloud")]
pub use wire::WireInOrder;

#[cfg(feature = "cloud")]
mod wire {
    use gcloud_sdk::google::datastore::v1 as pb;
    use smallvec::SmallVec;

    use super::*;
    use crate::model::value::Repr;
    use crate::model::wire::Partitions;
    use crate::model::wire_map::read_wire;

    /// A received map read in its type's fields' order (see the module docs). What the type
    /// does not know is passed over: arrival checked it.
    pub struct WireInOrder<'a> {
        slots: SmallVec<[Option<&'a mut pb::Value>; 16]>,
        at: usize,
        partitions: &'a Partitions,
    }

    impl WireInOrder<'_> {
        /// A reader of `properties` when they are a map received from the service and not
        /// read yet: the type reads `count` properties, and `slot` gives a name's place among
        /// them in name order (`None`: a property the type does not know).
        pub(super) fn of(
            properties: &mut PropertyMap,
            count: usize,
            slot: fn(&str) -> Option<usize>,
        ) -> Option<WireInOrder<'_>> {
            let Repr::Wire(w) = &mut properties.repr else {
                return None;
            };
            if w.decoded.get().is_some() {
                return None;
            }
            let mut slots: SmallVec<[Option<&mut pb::Value>; 16]> =
                std::iter::repeat_with(|| None).take(count).collect();
            for (name, value) in w.properties.iter_mut() {
                if let Some(place) = slot(name).and_then(|i| slots.get_mut(i)) {
                    *place = Some(value);
                }
            }
            Some(WireInOrder {
                slots,
                at: 0,
                partitions: &w.partitions,
            })
        }
    }

    impl ReadInOrder for WireInOrder<'_> {
        /// The next field's property: the derive asks for them in its slots' order.
        fn read_as<T: PropertyType>(
            &mut self,
            _name: &str,
            missing: Option<fn() -> T>,
        ) -> Result<T, DecodeError> {
            let value = self.slots.get_mut(self.at).and_then(Option::take);
            self.at += 1;
            match value {
                Some(value) => read_wire(value, self.partitions, T::read_value, T::from_value),
                None => missing_as(missing),
            }
        }

        fn finish(self) -> Result<(), Error> {
            Ok(())
        }
    }
}

/// Any other map (built by hand, decoded, or read from already), read through its own
/// lookups in the fields' order: each property taken out as a field read of the map takes it.
pub struct MapInOrder<'a>(&'a mut PropertyMap);

impl ReadInOrder for MapInOrder<'_> {
    fn read_as<T: PropertyType>(
        &mut self,
        name: &str,
        missing: Option<fn() -> T>,
    ) -> Result<T, DecodeError> {
        self.0
            .take_as(name, T::read_value, T::from_value)
            .unwrap_or_else(|| missing_as(missing))
    }

    fn finish(self) -> Result<(), Error> {
        Ok(())
    }
}

/// What the derive's one-pass read (`__from_in_order`) reads: the stored form, a received
/// map, or any other map. One type for all, so that each entity type's read is compiled once,
/// not once per form (a branch per field, which the processor predicts).
pub enum OnePass<'a> {
    /// The stored form.
    Stored(InOrder<'a>),
    /// A map received from the service.
    #[cfg(feature = "cloud")]
    Wire(WireInOrder<'a>),
    /// Any other map.
    Map(MapInOrder<'a>),
}

impl ReadInOrder for OnePass<'_> {
    #[inline]
    fn read_as<T: PropertyType>(
        &mut self,
        name: &str,
        missing: Option<fn() -> T>,
    ) -> Result<T, DecodeError> {
        match self {
            OnePass::Stored(r) => r.read_as(name, missing),
            #[cfg(feature = "cloud")]
            OnePass::Wire(r) => r.read_as(name, missing),
            OnePass::Map(r) => r.read_as(name, missing),
        }
    }

    fn finish(self) -> Result<(), Error> {
        match self {
            OnePass::Stored(r) => ReadInOrder::finish(r),
            #[cfg(feature = "cloud")]
            OnePass::Wire(r) => r.finish(),
            OnePass::Map(r) => r.finish(),
        }
    }
}

/// The stored form `bytes`, read in one pass.
pub fn stored_in_order(bytes: &[u8]) -> OnePass<'_> {
    OnePass::Stored(InOrder::new(bytes))
}

/// Any map, read through its own lookups (see `MapInOrder`).
pub fn map_in_order(properties: &mut PropertyMap) -> OnePass<'_> {
    OnePass::Map(MapInOrder(properties))
}

/// A reader of `properties` in name order when they are a map received from the service and
/// not read yet (see [`WireInOrder`]): the type reads `count` properties, and `slot` gives a
/// name's place among them in name order (`None`: a property the type does not know).
pub fn wire_in_order(
    properties: &mut PropertyMap,
    count: usize,
    slot: fn(&str) -> Option<usize>,
) -> Option<OnePass<'_>> {
    #[cfg(feature = "cloud")]
    return WireInOrder::of(properties, count, slot).map(OnePass::Wire);
    #[cfg(not(feature = "cloud"))]
    {
        let _ = (properties, count, slot);
        None
    }
}
