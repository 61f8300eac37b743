//! How a broken rule is reported: an error at a span, a name as a message shows it, two
//! attributes that contradict each other.

use proc_macro2::Span;

use crate::ast::Field;
use crate::errors;

pub(super) fn error(span: Span, message: impl std::fmt::Display) -> syn::Error {
    errors::at(span, message)
}

/// The name in quotes, shortened when it is too long to read in a message.
pub(super) fn shown(text: &str) -> String {
    const SHOWN: usize = 40;
    if text.chars().count() <= SHOWN {
        return format!("{text:?}");
    }
    let head: String = text.chars().take(SHOWN).collect();
    format!("{head:?}… ({} bytes)", text.len())
}

/// `#[a]` and `#[b]` on one field contradict each other.
pub(super) fn conflict(
    field: &Field,
    this: &str,
    other: (Option<Span>, &str),
    why: &str,
) -> Option<syn::Error> {
    let (span, attr) = other;
    span.map(|span| {
        error(
            span,
            format!(
                "`{attr}` cannot be combined with `{this}` on field `{}`: {why}\nhelp: remove `{attr}`",
                field.ident
            ),
        )
    })
}
