//! `#[entity(projection(Name: a, b))]`: a struct with exactly those fields, and
//! `impl Projection` (R-Q2).

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;

use super::mode::private;
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
        // One assertion per listed field, at its name in the list: the row's declared type is
        // what the field projects as, and the field is not an embedded entity. Probed, so a
        // field type that is no property type is only reported by the field's own assertion.
        let assertions = listed_fields
            .iter()
            .filter(|(_, f)| f.flags.blob.is_none())
            .map(|(name, field)| {
                let ty = &field.ty;
                let row = projected_type(field);
                let probe = quote_spanned!(name.span()=> (&#p::Probe::<#ty>::new()));
                let call = respanned(quote!(projects_as::<#row>), name.span());
                quote_spanned!(name.span()=> #probe.#call();)
            });
        let doc = format!(
            "A projection of `{entity_ident}` ({}): the rows of \
             `db.query::<{entity_ident}>().project::<{name}>()`, read from the index (R-Q2).",
            listed.join(", ")
        );
        let stored: Vec<String> = fields.iter().map(|f| f.name.text()).collect();
        let declarations = fields.iter().map(|field| {
            let ident = &field.ident;
            let ty = projected_type(field);
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
                    let row = projected_type(field);
                    quote_spanned!(ty.span()=> (&#p::Probe::<#ty>::new()).take_projected::<#row>(&mut __properties, #property))
                }
            };
            quote! {
                #ident: #read.map_err(|__e| __e.into_error(<#entity_ident as #p::Entity>::KIND, #property))?,
            }
        });
        // Debug, Clone and PartialEq as derives would write them, bounded on the row types
        // through `for<'__a>` so that a field type lacking them (one that is no property type,
        // already reported) adds no error of its own.
        let idents: Vec<_> = fields.iter().map(|f| &f.ident).collect();
        let rows: Vec<TokenStream> = fields.iter().map(|f| projected_type(f)).collect();
        let name_text = name.to_string();
        let idents_text: Vec<String> = idents.iter().map(|i| ident_text(i)).collect();
        quote! {
            #[doc = #doc]
            #vis struct #name {
                #(#declarations)*
            }

            #[automatically_derived]
            impl ::core::fmt::Debug for #name
            where
                #(for<'__a> #rows: ::core::fmt::Debug,)*
            {
                fn fmt(&self, __f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                    __f.debug_struct(#name_text)
                        #(.field(#idents_text, &self.#idents))*
                        .finish()
                }
            }

            #[automatically_derived]
            impl ::core::clone::Clone for #name
            where
                #(for<'__a> #rows: ::core::clone::Clone,)*
            {
                fn clone(&self) -> Self {
                    Self {
                        #(#idents: ::core::clone::Clone::clone(&self.#idents),)*
                    }
                }
            }

            #[automatically_derived]
            impl ::core::cmp::PartialEq for #name
            where
                #(for<'__a> #rows: ::core::cmp::PartialEq,)*
            {
                fn eq(&self, __other: &Self) -> bool {
                    true #(&& self.#idents == __other.#idents)*
                }
            }

            const _: () = {
                #[allow(unused_imports)]
                use #p::{ProjectionFallback as _, ProjectionProbe as _};

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

/// What one projected row holds for `field`, spelled from its type as `Projectable` would
/// compute it — an `Option` of the projection of its content, the element of a `Vec`, the
/// content of a `Box`, the type itself otherwise; bytes as the field holds them. (The field's
/// assertion checks the spelling against `Projectable::Projected`, so a type alias of an array
/// is a clear error rather than a wrong row.) Spelled, not computed, so the struct stays
/// well-formed when the field type is not a property type at all.
fn projected_type(field: &Field) -> TokenStream {
    match field.flags.blob {
        Some(_) => {
            let ty = &field.ty;
            quote!(#ty)
        }
        None => row_type(&field.ty),
    }
}

fn row_type(ty: &syn::Type) -> TokenStream {
    match ty {
        syn::Type::Group(group) => row_type(&group.elem),
        syn::Type::Paren(paren) => row_type(&paren.elem),
        syn::Type::Path(path) if path.qself.is_none() => {
            let Some(last) = path.path.segments.last() else {
                return quote!(#ty);
            };
            let syn::PathArguments::AngleBracketed(arguments) = &last.arguments else {
                return quote!(#ty);
            };
            let inner = match arguments.args.iter().collect::<Vec<_>>().as_slice() {
                [syn::GenericArgument::Type(inner)] => inner,
                _ => return quote!(#ty),
            };
            match last.ident.to_string().as_str() {
                "Vec" | "Box" => row_type(inner),
                "Option" => {
                    let mut outer = path.clone();
                    let content = row_type(inner);
                    if let Some(syn::PathArguments::AngleBracketed(arguments)) = outer
                        .path
                        .segments
                        .last_mut()
                        .map(|segment| &mut segment.arguments)
                    {
                        arguments.args = syn::parse_quote!(#content);
                    }
                    quote!(#outer)
                }
                _ => quote!(#ty),
            }
        }
        _ => quote!(#ty),
    }
}
