//! An entity's stored form read in one pass, in name order, the order the derive reads its
//! fields in: each property is checked where it lies (its name, structure, strings, keys,
//! depth — what [`PropertyMap::from_stored`](crate::model::value::PropertyMap) checks) and
//! read once, straight into the field; properties the type does not know are checked and
//! passed over. No map, no slot table, no copy of the bytes. Not a public API: the derive's
//! `from_stored` calls it (through `model/generated.rs`).

use crate::error::Error;
use std::cmp::Ordering;

use crate::model::annotations::head;
use crate::model::codec::{chunk, len};
use crate::model::stored::StoredAt;
use crate::model::views::{ValueView, checked_view};

/// A stored property map being read front to back (see the module docs).
pub struct InOrder<'a> {
    /// The properties not read yet.
    rest: &'a [u8],
    /// How many they are.
    left: usize,
    /// The name of the last property read: names are stored strictly increasing.
    last: Option<&'a [u8]>,
    /// Whether the bytes were found malformed; [`InOrder::finish`] reports it.
    malformed: bool,
}

impl<'a> InOrder<'a> {
    /// A reader of the stored property map `bytes`.
    pub fn new(bytes: &'a [u8]) -> InOrder<'a> {
        match len(bytes) {
            Ok((left, rest)) if left <= rest.len() => InOrder {
                rest,
                left,
                last: None,
                malformed: false,
            },
            _ => InOrder {
                rest: &[],
                left: 0,
                last: None,
                malformed: true,
            },
        }
    }

    /// The bytes of property `name`'s value (not checked yet: its read checks it, or
    /// [`InOrder::view`]), if the map has it. Names must be asked for in strictly increasing
    /// order; the properties before `name` are checked and passed over.
    pub fn find(&mut self, name: &str) -> Option<StoredAt<'a>> {
        while self.left > 0 && !self.malformed {
            let Ok((stored, after)) = chunk(self.rest) else {
                self.malformed = true;
                break;
            };
            // Compared as bytes: a stored name equal to `name` is UTF-8 without a check, and
            // one before it is checked when it is passed over.
            match stored.cmp(name.as_bytes()) {
                Ordering::Greater => return None,
                Ordering::Less => {
                    self.malformed = self.pass(stored, after).is_none();
                }
                Ordering::Equal => {
                    // Past the last name without a comparison: every name read so far was
                    // less than one asked for before `name` or passed over before it.
                    debug_assert!(self.last.is_none_or(|last| last < stored));
                    let Some((_excluded, _, value)) = head(after) else {
                        self.malformed = true;
                        break;
                    };
                    self.last = Some(stored);
                    return Some(StoredAt(value));
                }
            }
        }
        None
    }

    /// The value at `at` (what [`InOrder::find`] gave), checked, and moved past; `None` if
    /// it is malformed (then reported by [`InOrder::finish`]).
    pub fn view(&mut self, at: StoredAt<'a>) -> Option<ValueView<'a>> {
        match checked_view(at.0) {
            Ok((value, rest)) => {
                self.read_to(rest);
                Some(value)
            }
            Err(_) => {
                self.malformed = true;
                None
            }
        }
    }

    /// Moves past the value just read, which ends where `rest` starts.
    pub fn read_to(&mut self, rest: &'a [u8]) {
        self.rest = rest;
        self.left -= 1;
    }

    /// Checks the property named `stored` whose flag and value start `after`, and moves past
    /// it; `None` if it is malformed.
    fn pass(&mut self, stored: &'a [u8], after: &'a [u8]) -> Option<()> {
        std::str::from_utf8(stored).ok()?;
        if self.last.is_some_and(|last| last >= stored) {
            return None;
        }
        let (_excluded, _, after) = head(after)?;
        let (_, after) = checked_view(after).ok()?;
        self.read_to(after);
        self.last = Some(stored);
        Some(())
    }

    /// Checks the properties left unread; an error if anything in the map was malformed (the
    /// fields read from it are then not to be trusted either).
    pub fn finish(mut self) -> Result<(), Error> {
        while self.left > 0 && !self.malformed {
            match chunk(self.rest) {
                Ok((name, after)) => self.malformed = self.pass(name, after).is_none(),
                Err(_) => self.malformed = true,
            }
        }
        match self.malformed || !self.rest.is_empty() {
            true => Err(Error::storage("a stored entity is malformed".to_owned())),
            false => Ok(()),
        }
    }
}
