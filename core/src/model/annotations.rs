//! What other clients write beside a property's value ([`Annotations`]: the service's meaning
//! of the value, an array's per-element meaning and exclusion) in the stored form, and viewed
//! where they lie: in stored bytes, in a decoded property, or in a value received from the
//! service.
//!
//! In the stored form a property's name is followed by a flag byte — bit 0: excluded from
//! indexes, bit 1: annotations follow — then, with bit 1, the annotations, then the value. The
//! annotations are a tag and its payload: `1` and the value's meaning (four bytes, little
//! endian), or `2`, the number of elements (four bytes) and each element's exclusion (a byte)
//! and meaning (four bytes). Engines of format 4 and before wrote the flag `0` or `1` only.

use crate::model::value::Annotations;

/// The meaning of an array value that is a vector, in the service's protocol: its type's, not
/// an annotation.
pub const VECTOR_MEANING: i32 = 31;

/// The flag bit of a property excluded from indexes.
const EXCLUDED: u8 = 1;
/// The flag bit of a property whose annotations follow its flag byte.
const ANNOTATED: u8 = 2;
/// The tag of a value's meaning.
const MEANING: u8 = 1;
/// The tag of an array's elements' meanings and exclusions.
const ELEMENTS: u8 = 2;
/// The bytes of one element's annotations: its exclusion, its meaning.
const ELEMENT: usize = 5;

/// A property's flag byte and annotations at the start of `bytes` (what follows its name):
/// whether it is excluded, its annotations (their tag first; empty: none) and what follows
/// them (its value). `None` for bytes no writer of the stored form wrote.
#[inline]
pub fn head(bytes: &[u8]) -> Option<(bool, &[u8], &[u8])> {
    let (&flags, rest) = bytes.split_first()?;
    let excluded = flags & EXCLUDED != 0;
    match flags {
        0 | EXCLUDED => Some((excluded, &[], rest)),
        _ if flags & !(EXCLUDED | ANNOTATED) != 0 => None,
        _ => {
            let (&tag, payload) = rest.split_first()?;
            let size = match tag {
                MEANING => 4,
                ELEMENTS => {
                    let n = u32::from_le_bytes(*payload.first_chunk::<4>()?) as usize;
                    n.checked_mul(ELEMENT)?.checked_add(4)?
                }
                _ => return None,
            };
            if payload.len() < size {
                return None;
            }
            let (annotations, value) = rest.split_at(1 + size);
            Some((excluded, annotations, value))
        }
    }
}

/// Appends a property's flag byte and its annotations (none: the flag alone, as engines of
/// format 4 wrote it).
pub fn write_head(out: &mut Vec<u8>, excluded: bool, annotations: AnnotationsView<'_>) {
    let flag = u8::from(excluded);
    match annotations.to_annotations() {
        Annotations::None => out.push(flag),
        Annotations::Meaning(meaning) => {
            out.extend_from_slice(&[flag | ANNOTATED, MEANING]);
            out.extend_from_slice(&meaning.to_le_bytes());
        }
        Annotations::Elements(elements) => {
            out.extend_from_slice(&[flag | ANNOTATED, ELEMENTS]);
            let n = u32::try_from(elements.len()).unwrap_or(u32::MAX);
            out.extend_from_slice(&n.to_le_bytes());
            for &(meaning, excluded) in &elements {
                out.push(u8::from(excluded));
                out.extend_from_slice(&meaning.to_le_bytes());
            }
        }
    }
}

/// A property's annotations where they lie.
#[derive(Debug, Clone, Copy)]
pub enum AnnotationsView<'a> {
    /// None.
    None,
    /// A decoded property's.
    Decoded(&'a Annotations),
    /// In the stored form, their tag first (checked by [`head`]).
    Stored(&'a [u8]),
}

impl<'a> AnnotationsView<'a> {
    /// The view of stored annotations (empty: none).
    pub fn stored(bytes: &'a [u8]) -> AnnotationsView<'a> {
        match bytes.is_empty() {
            true => AnnotationsView::None,
            false => AnnotationsView::Stored(bytes),
        }
    }

    /// The view of a decoded property's annotations.
    pub fn of(annotations: &'a Annotations) -> AnnotationsView<'a> {
        match annotations {
            Annotations::None => AnnotationsView::None,
            other => AnnotationsView::Decoded(other),
        }
    }

    /// The meaning of the value (not an array): `0` for none.
    pub fn meaning(self) -> i32 {
        match self {
            AnnotationsView::None => 0,
            AnnotationsView::Decoded(a) => a.meaning(),
            AnnotationsView::Stored(bytes) => match bytes.split_first() {
                Some((&MEANING, payload)) => payload
                    .first_chunk::<4>()
                    .map_or(0, |b| i32::from_le_bytes(*b)),
                _ => 0,
            },
        }
    }

    /// Element `i` of the array: its meaning and whether it is excluded, for a property
    /// `excluded` or not.
    pub fn element(self, i: usize, excluded: bool) -> (i32, bool) {
        match self {
            AnnotationsView::None => (0, excluded),
            AnnotationsView::Decoded(Annotations::Elements(elements)) => {
                elements.get(i).copied().unwrap_or((0, excluded))
            }
            AnnotationsView::Decoded(_) => (0, excluded),
            AnnotationsView::Stored(bytes) => match bytes.split_first() {
                Some((&ELEMENTS, payload)) => {
                    let at = 4 + i * ELEMENT;
                    match payload.get(at..at + ELEMENT) {
                        Some([flag, m @ ..]) => {
                            let meaning = <[u8; 4]>::try_from(m).map_or(0, i32::from_le_bytes);
                            (meaning, *flag != 0)
                        }
                        _ => (0, excluded),
                    }
                }
                _ => (0, excluded),
            },
        }
    }

    /// Whether element `i` of the array is excluded, for a property `excluded` or not.
    pub fn element_excluded(self, i: usize, excluded: bool) -> bool {
        self.element(i, excluded).1
    }

    /// The annotations, decoded (a received array's elements made [`Annotations::Elements`]
    /// only where they differ).
    pub fn to_annotations(self) -> Annotations {
        match self {
            AnnotationsView::None => Annotations::None,
            AnnotationsView::Decoded(a) => a.clone(),
            AnnotationsView::Stored(bytes) => match bytes.split_first() {
                Some((&MEANING, _)) => Annotations::Meaning(self.meaning()),
                Some((&ELEMENTS, payload)) => {
                    let n = payload
                        .first_chunk::<4>()
                        .map_or(0, |b| u32::from_le_bytes(*b) as usize);
                    Annotations::Elements((0..n).map(|i| self.element(i, false)).collect())
                }
                _ => Annotations::None,
            },
        }
    }

    /// Whether there are none.
    pub fn is_none(self) -> bool {
        match self {
            AnnotationsView::None => true,
            AnnotationsView::Decoded(a) => a.is_none(),
            AnnotationsView::Stored(bytes) => bytes.is_empty(),
        }
    }
}
