//! `#[derive(PropertyValue)]`: a unit-only enum stored as a string (each variant's name,
//! converted by `rename_all`, or its `rename`), or a one-field tuple struct stored as its field.

use darling::util::SpannedValue;
use darling::{FromDeriveInput, FromField, FromVariant};
use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;

use crate::ast::{Case, ident_text};

#[derive(FromDeriveInput)]
#[darling(attributes(property), supports(enum_unit, struct_newtype))]
struct ValueInput {
    ident: syn::Ident,
    generics: syn::Generics,
    data: darling::ast::Data<VariantInput, InnerField>,
    rename_all: Option<SpannedValue<String>>,
    #[darling(rename = "crate")]
    krate: Option<syn::Path>,
}

#[derive(FromVariant)]
#[darling(attributes(property))]
struct VariantInput {
    ident: syn::Ident,
    rename: Option<syn::LitStr>,
}

#[derive(FromField)]
struct InnerField {
    ty: syn::Type,
}

/// A unit-only enum or a one-field tuple struct; say what else to do for every other shape.
fn shape(input: &syn::DeriveInput) -> darling::Result<()> {
    let problem = match &input.data {
        syn::Data::Enum(data) => data
            .variants
            .iter()
            .find(|v| !matches!(v.fields, syn::Fields::Unit))
            .map(|v| {
                (
                    v.fields.span(),
                    "a variant with fields cannot be stored as one string",
                )
            }),
        syn::Data::Struct(data)
            if data.fields.len() == 1 && matches!(data.fields, syn::Fields::Unnamed(_)) =>
        {
            None
        }
        syn::Data::Struct(_) => Some((
            input.ident.span(),
            "a struct is stored as its one field: write `struct Name(Inner);` (a struct with \
             named fields is an embedded entity: derive `Entity` on it)",
        )),
        syn::Data::Union(data) => Some((data.union_token.span, "a union cannot be stored")),
    };
    match problem {
        None => Ok(()),
        Some((span, what)) => Err(darling::Error::custom(format!(
            "`#[derive(PropertyValue)]` stores a unit-only enum as a string, or a one-field tuple \
             struct as its field: {what}"
        ))
        .with_span(&span)),
    }
}

/// The longest string an indexed value may hold (R-I4).
const MAX_INDEXED_BYTES: usize = 1500;

pub(crate) fn derive(input: &syn::DeriveInput) -> darling::Result<TokenStream> {
    shape(input)?;
    let parsed = ValueInput::from_derive_input(input)?;
    if let Some(param) = parsed.generics.params.first() {
        return Err(darling::Error::custom(
            "`#[derive(PropertyValue)]` does not support generic types: a property has one stored type",
        )
        .with_span(param));
    }
    let krate = parsed
        .krate
        .clone()
        .unwrap_or_else(|| syn::parse_quote!(::datastore_entity));
    let p = quote!(#krate::__private);
    match &parsed.data {
        darling::ast::Data::Enum(variants) => unit_enum(&parsed, variants, &p),
        darling::ast::Data::Struct(fields) => {
            // `supports(struct_newtype)` guarantees exactly one field.
            let inner = fields.fields.first().map(|f| &f.ty);
            Ok(newtype(&parsed.ident, inner, &p))
        }
    }
}

fn unit_enum(
    input: &ValueInput,
    variants: &[VariantInput],
    p: &TokenStream,
) -> darling::Result<TokenStream> {
    let mut errors = darling::Error::accumulator();
    let case = input
        .rename_all
        .as_ref()
        .and_then(|r| Case::from_attr(r).map_err(|e| errors.push(e.into())).ok());
    if variants.is_empty() {
        errors.push(
            darling::Error::custom("an enum without variants has no value to store")
                .with_span(&input.ident),
        );
    }
    let mut stored: Vec<(String, &syn::Ident)> = Vec::new();
    for variant in variants {
        let (text, span) = match &variant.rename {
            Some(lit) => (lit.value(), lit.span()),
            None => {
                let raw = ident_text(&variant.ident);
                (
                    case.map_or(raw.clone(), |c| c.apply(&raw)),
                    variant.ident.span(),
                )
            }
        };
        if let Some((_, first)) = stored.iter().find(|(s, _)| *s == text) {
            errors.push(
                darling::Error::custom(format!(
                    "variant `{}` would be stored as {text:?}, like variant `{first}`; two variants \
                     cannot share one stored string\nhelp: give one of them another string with \
                     `#[property(rename = \"...\")]`",
                    variant.ident
                ))
                .with_span(&span),
            );
        }
        if text.len() > MAX_INDEXED_BYTES {
            errors.push(
                darling::Error::custom(format!(
                    "the stored string is {} bytes long; an indexed string holds at most \
                     {MAX_INDEXED_BYTES} bytes [R-I4]",
                    text.len()
                ))
                .with_span(&span),
            );
        }
        stored.push((text, &variant.ident));
    }
    errors.finish()?;
    let ident = &input.ident;
    let strings: Vec<&String> = stored.iter().map(|(s, _)| s).collect();
    let variants: Vec<&syn::Ident> = stored.iter().map(|(_, v)| *v).collect();
    let expected = format!(
        "one of {} (`{ident}`)",
        strings
            .iter()
            .map(|s| format!("{s:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok(quote! {
        const _: () = {
            #[automatically_derived]
            impl #p::PropertyType for #ident {
                type Operand = Self;
                type Growth = #p::Steady;

                fn to_value(&self) -> #p::Value {
                    #p::Value::String(#p::From::from(match self {
                        #(Self::#variants => #strings,)*
                    }))
                }

                fn from_value(__value: #p::Value) -> #p::Result<Self, #p::DecodeError> {
                    match &__value {
                        #p::Value::String(__text) => match __text.as_str() {
                            #(#strings => #p::Result::Ok(Self::#variants),)*
                            __other => #p::Result::Err(#p::DecodeError::new(
                                #expected,
                                ::std::format!("the string {:?}", __other),
                            )),
                        },
                        __other => #p::Result::Err(#p::DecodeError::mismatch(#expected, __other)),
                    }
                }
            }

            #[automatically_derived]
            impl #p::Projectable for #ident {
                type Projected = Self;
                type Shape = #p::Flat;
            }
        };
    })
}

fn newtype(ident: &syn::Ident, inner: Option<&syn::Type>, p: &TokenStream) -> TokenStream {
    let Some(inner) = inner else {
        return TokenStream::new();
    };
    let assert = quote_spanned!(inner.span()=> #p::assert_property::<#inner>());
    quote! {
        const _: () = {
            #[automatically_derived]
            impl #p::PropertyType for #ident {
                type Operand = Self;
                type Growth = <#inner as #p::PropertyType>::Growth;

                fn to_value(&self) -> #p::Value {
                    #p::PropertyType::to_value(&self.0)
                }

                fn from_value(__value: #p::Value) -> #p::Result<Self, #p::DecodeError> {
                    <#inner as #p::PropertyType>::from_value(__value).map(Self)
                }

                fn from_index_value(__value: #p::Value) -> #p::Result<Self, #p::DecodeError> {
                    <#inner as #p::PropertyType>::from_index_value(__value).map(Self)
                }

                fn from_missing() -> #p::Result<Self, #p::DecodeError> {
                    <#inner as #p::PropertyType>::from_missing().map(Self)
                }
            }

            #[automatically_derived]
            impl #p::Projectable for #ident {
                type Projected = Self;
                type Shape = #p::Flat;
            }

            #[allow(dead_code)]
            fn __assert_inner_type() {
                #assert;
            }
        };
    }
}
