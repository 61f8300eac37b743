//! `#[entity(projection(Name: a, b))]`: a struct with exactly those fields, and
//! `impl Projection` (R-Q2).

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;

use super::private;
use super::property::respanned;
use crate::ast::{Entity, Field, ident_text};

pub(super) fn projections(entity: &Entity) -> TokenStream {
    let p = private(entity);
    let vis = &entity.vis;
    let entity_ident = &entity.ident;
    let structs = entity.distinct_projections().into_iter().map(|projection| {
        let name = &projection.name;
        let listed_fields = entity.projection_fields(projection);
        let fields: Vec<&Field> = listed_fields.iter().map(|(_, f)| *f).collect();
        let listed: Vec<String> = fields.iter().map(|f| ident_text(&f.ident)).collect();
        // One assertion per listed field, at its name in the list: not an embedded entity.
        let assertions = listed_fields
            .iter()
            .filter(|(_, f)| f.flags.blob.is_none())
            .map(|(name, field)| {
                let ty = &field.ty;
                let call = respanned(quote!(#p::assert_projectable::<#ty>), name.span());
                quote_spanned!(name.span()=> #call();)
            });
        let doc = format!(
            "A projection of `{entity_ident}` ({}): the rows of \
             `db.query::<{entity_ident}>().project::<{name}>()`, read from the index (R-Q2).",
            listed.join(", ")
        );
        let stored: Vec<String> = fields.iter().map(|f| f.name.text()).collect();
        let declarations = fields.iter().map(|field| {
            let ident = &field.ident;
            let ty = projected_type(entity, field);
            let doc = format!("The projected `{}` property.", field.name.text());
            quote! {
                #[doc = #doc]
                #vis #ident: #ty,
            }
        });
        let reads = fields.iter().map(|field| {
            let ident = &field.ident;
            let ty = &field.ty;
            let property = field.name.text();
            let read = match field.flags.blob {
                Some(_) => quote_spanned!(ty.span()=> #p::take_blob::<#ty>(&mut __properties, #property)),
                None => {
                    let projected = projected_type(entity, field);
                    quote_spanned!(ty.span()=> #p::take_index_value::<#projected>(&mut __properties, #property))
                }
            };
            quote! {
                #ident: #read.map_err(|__e| __e.into_error(<#entity_ident as #p::Entity>::KIND, #property))?,
            }
        });
        quote! {
            #[doc = #doc]
            #[derive(Debug, Clone, PartialEq)]
            #vis struct #name {
                #(#declarations)*
            }

            const _: () = {
                #[allow(dead_code)]
                fn __assert_projected_types() {
                    #(#assertions)*
                }

                #[automatically_derived]
                impl #p::Projection for #name {
                    type Entity = #entity_ident;
                    const PROPERTIES: &'static [&'static str] = &[#(#stored),*];

                    fn from_properties(
                        #[allow(unused_mut)] mut __properties: #p::PropertyMap,
                    ) -> #p::Result<Self, #p::Error> {
                        #p::Result::Ok(Self {
                            #(#reads)*
                        })
                    }
                }
            };
        }
    });
    quote!(#(#structs)*)
}

/// What one projected row holds for `field`: the element type of an array, the field's type
/// otherwise; bytes as the field holds them.
fn projected_type(entity: &Entity, field: &Field) -> TokenStream {
    let p = private(entity);
    let ty = &field.ty;
    match field.flags.blob {
        Some(_) => quote!(#ty),
        None => quote_spanned!(ty.span()=> <#ty as #p::Projectable>::Projected),
    }
}
