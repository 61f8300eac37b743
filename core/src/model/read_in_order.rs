//! A property map read in one pass, in name order, the order the derive reads its fields in:
//! the stored form ([`InOrder`], `in_order.rs`), a map in a backend's own form, as received
//! from the service ([`ForeignInOrderReader`]: the backend puts each property in its field's
//! place by the derive's `match` on its name, in one walk over the map — no hashing, no
//! removal, no sort — then moves it out where it lies as its field reads it), or any other map
//! ([`MapInOrder`], through its lookups), all behind [`OnePass`]. Not a public API: the derive's
//! `__from_in_order` reads through it (by way of `model/generated.rs`).

use crate::error::Error;
use crate::model::in_order::InOrder;
use crate::model::map::read_foreign;
use crate::model::property_type::PropertyType;
use crate::model::stored::ValueRef;
use crate::model::value::{DecodeError, ForeignInOrder, PropertyMap};

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

/// A map in a backend's own form, read in its type's fields' order (see the module docs).
/// What the type does not know is passed over: arrival checked it.
pub struct ForeignInOrderReader<'a>(&'a mut dyn ForeignInOrder);

impl ReadInOrder for ForeignInOrderReader<'_> {
    /// The next field's property: the derive asks for them in its slots' order.
    fn read_as<T: PropertyType>(
        &mut self,
        _name: &str,
        missing: Option<fn() -> T>,
    ) -> Result<T, DecodeError> {
        match self.0.next_value() {
            Some(value) => read_foreign(value, T::read_value, T::from_value),
            None => missing_as(missing),
        }
    }

    fn finish(self) -> Result<(), Error> {
        Ok(())
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
    /// A map in a backend's own form (one received from the service).
    Foreign(ForeignInOrderReader<'a>),
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
            OnePass::Foreign(r) => r.read_as(name, missing),
            OnePass::Map(r) => r.read_as(name, missing),
        }
    }

    fn finish(self) -> Result<(), Error> {
        match self {
            OnePass::Stored(r) => ReadInOrder::finish(r),
            OnePass::Foreign(r) => r.finish(),
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

/// What `read` makes of `properties` read in name order, when they are a map in a backend's
/// own form (one received from the service) not read yet: the type reads `count` properties,
/// and `slot` gives a name's place among them in name order (`None`: a property the type does
/// not know). `None` when they are another map.
pub fn foreign_in_order<R>(
    properties: &mut PropertyMap,
    count: usize,
    slot: fn(&str) -> Option<usize>,
    read: impl FnOnce(OnePass<'_>) -> R,
) -> Option<R> {
    let map = properties.foreign_map()?;
    let mut read = Some(read);
    let mut made = None;
    map.read_in_order(count, slot, &mut |reader| {
        made = read
            .take()
            .map(|read| read(OnePass::Foreign(ForeignInOrderReader(reader))));
    });
    made
}
