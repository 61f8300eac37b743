//! `#[derive(Entity)]` and `#[derive(PropertyValue)]` for `datastore-entity`. Use them through
//! the `datastore-entity` crate, which re-exports them and documents the attributes.
//!
//! `Entity` is a straight pipeline: [`attr`] reads the attributes, [`ast`] builds a typed
//! model, [`check`] applies every rule and collects all errors, and [`expand`] generates the
//! code: the real one, or after a structural mistake a stub of the same API, so the user's
//! code that uses the type shows only the real errors.

mod ast;
mod attr;
mod check;
mod errors;
mod expand;
mod property_value;

use darling::FromDeriveInput;
use proc_macro::TokenStream;

/// Derives `datastore_entity::Entity` (a struct with a `#[key]` field) or an embedded
/// entity type (a struct without one). See the `datastore-entity` crate for the attributes.
#[proc_macro_derive(
    Entity,
    attributes(
        entity,
        key,
        parent,
        property,
        exclude_from_index,
        ttl,
        blob,
        index,
        sharded,
        sharded_index,
        vector_index,
        replicated
    )
)]
pub fn derive_entity(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as syn::DeriveInput);
    derive(&input).into()
}

/// Derives `datastore_entity::PropertyType` for a unit-only enum (stored as a string) or a
/// one-field tuple struct (stored as its field). See the `datastore-entity` crate.
#[proc_macro_derive(PropertyValue, attributes(property))]
pub fn derive_property_value(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as syn::DeriveInput);
    property_value::derive(&input)
        .unwrap_or_else(darling::Error::write_errors)
        .into()
}

fn derive(input: &syn::DeriveInput) -> proc_macro2::TokenStream {
    if let Err(error) = shape(input) {
        return error.to_compile_error();
    }
    let mut hard = errors::Errors::default();
    let mut soft = errors::Errors::default();
    // An attribute typo: read what can be read, to emit the API's stub beside the error.
    let parsed = EntityInput::from_derive_input(input).unwrap_or_else(|error| {
        hard.push(error);
        attr::lenient(input)
    });
    let mut attr_errors = Vec::new();
    let attrs = attr::EntityAttrs::parse(&input.attrs, &mut attr_errors);
    hard.extend(attr_errors.into_iter().map(syn::Error::from));
    let entity = ast::Entity::from_input(parsed, attrs, &mut soft);
    check::check(&entity, &mut hard, &mut soft);
    // A generic struct has no single schema: nothing sensible can stand in for its API.
    let mode = match (hard.is_empty(), entity.generics.params.is_empty()) {
        (true, _) => Some(expand::mode::Mode::Real),
        (false, true) => Some(expand::mode::Mode::Stub),
        (false, false) => None,
    };
    let mut tokens = mode
        .map(|mode| expand::expand(&entity, mode))
        .unwrap_or_default();
    soft.append(hard);
    tokens.extend(soft.into_tokens());
    tokens
}

use attr::EntityInput;

/// Only structs with named fields can be entities; say why for every other shape.
fn shape(input: &syn::DeriveInput) -> syn::Result<()> {
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
            "an enum cannot be an entity: an entity is a fixed set of named properties \
             (to store an enum as a property value, derive `PropertyValue` on it)",
        ),
        syn::Data::Union(data) => (
            data.union_token.span,
            "a union cannot be an entity: an entity is a fixed set of named properties",
        ),
    };
    Err(errors::at(
        span,
        format!("`#[derive(Entity)]` needs a struct with named fields: {what}\n{fix}"),
    ))
}
