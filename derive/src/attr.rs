//! The attributes as written, read with darling into plain structs. No rule is checked here
//! beyond the syntax of each attribute.

use darling::util::SpannedValue;
use darling::{FromDeriveInput, FromField, FromMeta};
use proc_macro2::Span;
use syn::spanned::Spanned;

/// `#[entity(...)]` on the struct, and the struct itself.
#[derive(FromDeriveInput)]
#[darling(attributes(entity), supports(struct_named))]
pub(crate) struct EntityInput {
    pub ident: syn::Ident,
    pub vis: syn::Visibility,
    pub generics: syn::Generics,
    pub data: darling::ast::Data<(), FieldInput>,
    pub kind: Option<NameLit>,
    pub rename_all: Option<SpannedValue<String>>,
    #[darling(rename = "crate")]
    pub krate: Option<syn::Path>,
}

/// One field: `#[property(rename = "...")]` parsed by darling, the word attributes forwarded.
#[derive(FromField)]
#[darling(
    attributes(property),
    forward_attrs(key, parent, exclude_from_index, ttl, blob)
)]
pub(crate) struct FieldInput {
    pub ident: Option<syn::Ident>,
    pub ty: syn::Type,
    pub attrs: Vec<syn::Attribute>,
    pub rename: Option<NameLit>,
}

/// A name given as a literal: a string, or a byte string that must be UTF-8 (R-N1).
#[derive(Clone)]
pub(crate) struct NameLit {
    pub bytes: Vec<u8>,
    pub span: Span,
}

impl FromMeta for NameLit {
    fn from_value(value: &syn::Lit) -> darling::Result<Self> {
        match value {
            syn::Lit::Str(s) => Ok(NameLit {
                bytes: s.value().into_bytes(),
                span: s.span(),
            }),
            syn::Lit::ByteStr(b) => Ok(NameLit {
                bytes: b.value(),
                span: b.span(),
            }),
            // R-N1: names are strings; a number, char or bool is not a name.
            other => Err(darling::Error::custom(
                "a name must be a string literal, such as \"Account\" [R-N1]",
            )
            .with_span(&other.span())),
        }
    }
}

/// The word attributes of one field, each with the span of its path for error messages.
#[derive(Default)]
pub(crate) struct FieldFlags {
    pub key: Option<Span>,
    pub parent: Option<Span>,
    pub exclude_from_index: Option<Span>,
    pub ttl: Option<Span>,
    pub blob: Option<Span>,
}

/// Reads the forwarded word attributes (`#[key]`, `#[parent]`, ...): each takes no arguments
/// and may appear once.
pub(crate) fn field_flags(
    attrs: &[syn::Attribute],
    errors: &mut darling::error::Accumulator,
) -> FieldFlags {
    let mut flags = FieldFlags::default();
    for attr in attrs {
        let path = attr.path();
        let slot = if path.is_ident("key") {
            &mut flags.key
        } else if path.is_ident("parent") {
            &mut flags.parent
        } else if path.is_ident("exclude_from_index") {
            &mut flags.exclude_from_index
        } else if path.is_ident("ttl") {
            &mut flags.ttl
        } else if path.is_ident("blob") {
            &mut flags.blob
        } else {
            continue;
        };
        let name = path
            .get_ident()
            .map(ToString::to_string)
            .unwrap_or_default();
        if !matches!(attr.meta, syn::Meta::Path(_)) {
            errors.push(
                darling::Error::custom(format!(
                    "`#[{name}]` takes no arguments; write `#[{name}]`"
                ))
                .with_span(&attr.meta),
            );
        }
        if slot.is_some() {
            errors.push(
                darling::Error::custom(format!("`#[{name}]` is given twice; remove one"))
                    .with_span(&attr.meta),
            );
        }
        *slot = Some(path.span());
    }
    flags
}
