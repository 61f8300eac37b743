//! `#[derive(Entity)]` for `datastore-entity`. Use it through the `datastore-entity` crate,
//! which re-exports it and documents the attributes.
//!
//! The macro is a straight pipeline: [`attr`] reads the attributes, [`ast`] builds a typed
//! model, [`check`] applies every rule and collects all errors, and only a valid model
//! reaches [`expand`].

mod ast;
mod attr;
mod check;
mod expand;

use darling::FromDeriveInput;
use proc_macro::TokenStream;

/// Derives `datastore_entity::Entity` (a struct with a `#[key]` field) or an embedded
/// entity type (a struct without one). See the `datastore-entity` crate for the attributes.
#[proc_macro_derive(
    Entity,
    attributes(entity, key, parent, property, exclude_from_index, ttl, blob)
)]
pub fn derive_entity(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as syn::DeriveInput);
    derive(&input)
        .unwrap_or_else(darling::Error::write_errors)
        .into()
}

fn derive(input: &syn::DeriveInput) -> darling::Result<proc_macro2::TokenStream> {
    shape(input)?;
    let mut hard = darling::Error::accumulator();
    let mut soft = darling::Error::accumulator();
    let entity = hard
        .handle(attr::EntityInput::from_derive_input(input))
        .map(|parsed| ast::Entity::from_input(parsed, &mut hard));
    if let Some(entity) = &entity {
        check::check(entity, &mut hard, &mut soft);
    }
    let (hard, soft) = (hard.into_inner(), soft.into_inner());
    match entity {
        Some(entity) if hard.is_empty() => {
            let mut tokens = expand::expand(&entity);
            if !soft.is_empty() {
                tokens.extend(darling::Error::multiple(soft).write_errors());
            }
            Ok(tokens)
        }
        _ => Err(darling::Error::multiple(
            soft.into_iter().chain(hard).collect(),
        )),
    }
}

/// Only structs with named fields can be entities; say why for every other shape.
fn shape(input: &syn::DeriveInput) -> darling::Result<()> {
    let fix = "help: declare a struct with named fields, e.g. `struct Account { #[key] name: KeyName, ... }`";
    let (span, what) = match &input.data {
        syn::Data::Struct(data) => match &data.fields {
            syn::Fields::Named(_) => return Ok(()),
            syn::Fields::Unnamed(fields) => (
                syn::spanned::Spanned::span(fields),
                "a tuple struct has no field names to use as property names",
            ),
            syn::Fields::Unit => (
                input.ident.span(),
                "a unit struct has no properties to store",
            ),
        },
        syn::Data::Enum(data) => (
            data.enum_token.span,
            "an enum cannot be an entity: an entity is a fixed set of named properties",
        ),
        syn::Data::Union(data) => (
            data.union_token.span,
            "a union cannot be an entity: an entity is a fixed set of named properties",
        ),
    };
    Err(darling::Error::custom(format!(
        "`#[derive(Entity)]` needs a struct with named fields: {what}\n{fix}"
    ))
    .with_span(&span))
}
