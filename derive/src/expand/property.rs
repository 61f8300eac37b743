//! Property descriptors (`Post::TITLE`) and the one assertion per field that checks its type.

use proc_macro2::{Span, TokenStream, TokenTree};
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;

use super::mode::private;
use crate::ast::{Entity, Role, unsupported_hint};

/// One typed descriptor per stored property, named in SCREAMING_SNAKE_CASE.
pub(super) fn descriptors(entity: &Entity) -> Vec<TokenStream> {
    let p = private(entity);
    let vis = &entity.vis;
    entity
        .descriptors()
        .into_iter()
        .map(|(field, ident)| {
            let name = field.name.text();
            let ty = match field.flags.blob.or(field.json) {
                Some(_) => quote!(#p::Blob),
                None => {
                    let ty = &field.ty;
                    quote!(#ty)
                }
            };
            let (marker, note) = if field.flags.sharded_index.is_some() {
                (
                    quote!(#p::Excluded),
                    format!(
                        " Its plain value is excluded from indexes: query it with `{}::query_by_{}` (R-S3).",
                        entity.ident,
                        crate::ast::ident_text(&field.ident)
                    ),
                )
            } else if field.excluded() {
                (
                    quote!(#p::Excluded),
                    " Excluded from indexes: it cannot be filtered, ordered or projected on.".to_owned(),
                )
            } else {
                (quote!(#p::Indexed), String::new())
            };
            let (marker, note) = match field.flatten {
                Some(_) => (
                    quote!(#p::Flattened<#marker>),
                    format!(
                        "{note} Flattened: stored as its sub-properties, reached through `.dot(...)`."
                    ),
                ),
                None => (marker, note),
            };
            let doc = format!("The `{name}` property.{note}");
            quote! {
                #[doc = #doc]
                #vis const #ident: #p::PropertyPath<Self, #ty, #marker> = #p::PropertyPath::new(#name);
            }
        })
        .collect()
}

/// Exactly one type assertion per field, at the field's type: the only place a wrong type is
/// reported (the generated code's other uses of the type go through `Probe`).
pub(super) fn assertions(entity: &Entity) -> TokenStream {
    let p = private(entity);
    let checks = entity.fields.iter().filter_map(|field| {
        let ty = &field.ty;
        let assert = match field.role() {
            Role::Key => quote!(assert_key),
            Role::Parent => return None,
            // A misplaced `json` was reported already (`check::json`).
            Role::Property if field.json.is_some() && json_misplaced(entity, field) => return None,
            Role::Property if field.json.is_some() => quote!(assert_json),
            // A targeted error was reported already.
            Role::Property if field.flags.blob.is_none() && unsupported_hint(ty).is_some() => {
                return None;
            }
            Role::Property if field.flatten.is_some() => quote!(assert_flatten),
            Role::Property if field.flags.blob.is_some() => quote!(assert_blob),
            Role::Property if field.flags.sharded.is_some() => quote!(assert_counter),
            Role::Property if field.flags.sharded_index.is_some() => {
                quote!(assert_sharded_index)
            }
            Role::Property if field.flags.ttl.is_some() => quote!(assert_ttl),
            // R-I3: an indexed value must not grow with time unless acknowledged.
            Role::Property if field.excluded() || field.flags.monotonic.is_some() => {
                quote!(assert_property)
            }
            Role::Property => quote!(assert_indexed),
        };
        // The whole call at the type: rustc reports some failed bounds on the call's path.
        let path = respanned(quote!(#p::#assert), ty.span());
        Some(quote_spanned!(ty.span()=> #path::<#ty>();))
    });
    quote! {
        #[allow(dead_code)]
        fn __assert_field_types() {
            #(#checks)*
        }
    }
}

/// `tokens` with every span set to `span`.
pub(super) fn respanned(tokens: TokenStream, span: Span) -> TokenStream {
    tokens
        .into_iter()
        .map(|mut tree| {
            if let TokenTree::Group(group) = &tree {
                let mut inner =
                    proc_macro2::Group::new(group.delimiter(), respanned(group.stream(), span));
                inner.set_span(span);
                tree = TokenTree::Group(inner);
            } else {
                tree.set_span(span);
            }
            tree
        })
        .collect()
}

/// `#[property(json)]` where `check` refuses it: with another stored form, or in an embedded
/// entity.
fn json_misplaced(entity: &Entity, field: &crate::ast::Field) -> bool {
    field.own_form().is_some() || field.flatten.is_some() || !entity.is_entity()
}
