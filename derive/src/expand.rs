//! Code generation. Only ever sees a model that passed `check`.
//!
//! Everything generated reaches the runtime through `#krate::__private` (absolute paths,
//! STYLE.md), and every public item carries a doc line.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;

use crate::ast::{Entity, Field, ident_text, is_option, key_target};

pub(crate) fn expand(entity: &Entity) -> TokenStream {
    let trait_impl = match entity.key() {
        Some(key) => entity_impl(entity, key),
        None => embedded_impl(entity),
    };
    let inherent = inherent_impl(entity);
    quote! {
        const _: () = {
            #trait_impl
        };
        #inherent
    }
}

/// `impl Entity` for a struct with a `#[key]`.
fn entity_impl(entity: &Entity, key: &Field) -> TokenStream {
    let p = private(entity);
    let ident = &entity.ident;
    let kind = entity.kind.text();
    let schema = schema(entity, false);
    let to_properties = to_properties(entity);
    let key_ident = &key.ident;
    let key_ty = &key.ty;
    let (parent_raw, parent_init) = match entity.parent() {
        Some(parent) => {
            let parent_ident = &parent.ident;
            let target = key_target(&parent.ty);
            (
                quote!(#p::Option::Some(#p::Key::raw(&self.#parent_ident))),
                quote! {
                    #parent_ident: #p::parent_field::<#target>(__key)
                        .map_err(|__e| __e.into_error(<Self as #p::Entity>::KIND, "__key__"))?,
                },
            )
        }
        None => (quote!(#p::Option::None), TokenStream::new()),
    };
    // A key type that is not a `KeyField` is reported at the field's type, by every use.
    let key_field_check = quote_spanned! {key_ty.span()=>
        #p::key_field::<#key_ty>(__key)
    };
    let entity_key = quote_spanned! {key_ty.span()=>
        #p::entity_key::<Self, #key_ty>(#parent_raw, &self.#key_ident)
    };
    let fields = entity.properties().map(|field| {
        let field_ident = &field.ident;
        let read = read_property(entity, field);
        let name = field.name.text();
        quote! {
            #field_ident: #read.map_err(|__e| __e.into_error(<Self as #p::Entity>::KIND, #name))?,
        }
    });
    quote! {
        #[automatically_derived]
        impl #p::Entity for #ident {
            const KIND: &'static str = #kind;
            const SCHEMA: &'static #p::Schema = &#schema;

            fn entity_key(&self) -> #p::Result<#p::Key<Self>, #p::Error> {
                #entity_key
            }

            fn to_properties(&self) -> #p::PropertyMap {
                #to_properties
            }

            fn from_entity(
                __key: &#p::RawKey,
                #[allow(unused_mut)] mut __properties: #p::PropertyMap,
            ) -> #p::Result<Self, #p::Error> {
                #p::Result::Ok(Self {
                    #key_ident: #key_field_check
                        .map_err(|__e| __e.into_error(<Self as #p::Entity>::KIND, "__key__"))?,
                    #parent_init
                    #(#fields)*
                })
            }
        }
    }
}

/// `impl PropertyType` for a struct without `#[key]`: an embedded entity value.
fn embedded_impl(entity: &Entity) -> TokenStream {
    let p = private(entity);
    let ident = &entity.ident;
    let schema = schema(entity, true);
    let to_properties = to_properties(entity);
    let fields = entity.properties().map(|field| {
        let field_ident = &field.ident;
        let read = read_property(entity, field);
        let step = format!(".{}", field.name.text());
        quote! {
            #field_ident: #read.map_err(|__e| __e.within(#step))?,
        }
    });
    quote! {
        #[automatically_derived]
        impl #p::PropertyType for #ident {
            type Operand = Self;
            const EMBEDDED: #p::Option<&'static #p::Schema> = #p::Option::Some(&#schema);

            fn to_value(&self) -> #p::Value {
                #p::Value::Entity(#to_properties)
            }

            fn from_value(__value: #p::Value) -> #p::Result<Self, #p::DecodeError> {
                match __value {
                    #p::Value::Entity(__properties) => {
                        #[allow(unused_mut)]
                        let mut __properties = __properties;
                        #p::Result::Ok(Self {
                            #(#fields)*
                        })
                    }
                    __other => #p::Result::Err(#p::DecodeError::mismatch("embedded entity", &__other)),
                }
            }
        }
    }
}

/// The `Schema` literal.
fn schema(entity: &Entity, embedded: bool) -> TokenStream {
    let p = private(entity);
    let kind = entity.kind.text();
    let properties = entity.properties().map(|field| {
        let name = field.name.text();
        let rust_name = ident_text(&field.ident);
        let excluded = field.excluded();
        let ty = &field.ty;
        let ttl = match field.flags.ttl {
            Some(_) => quote_spanned!(ty.span()=> <#ty as #p::TtlField>::TTL),
            None => quote!(false),
        };
        let embedded = match field.flags.blob {
            Some(_) => quote!(#p::Option::None),
            None => quote_spanned!(ty.span()=> <#ty as #p::PropertyType>::EMBEDDED),
        };
        quote! {
            #p::PropertySchema {
                name: #name,
                field: #rust_name,
                excluded: #excluded,
                ttl: #ttl,
                embedded: #embedded,
            }
        }
    });
    quote! {
        #p::Schema {
            kind: #kind,
            embedded: #embedded,
            properties: &[#(#properties),*],
        }
    }
}

/// The block that builds the `PropertyMap` from `self`.
fn to_properties(entity: &Entity) -> TokenStream {
    let p = private(entity);
    let puts = entity.properties().map(|field| {
        let ident = &field.ident;
        let ty = &field.ty;
        let name = field.name.text();
        let excluded = field.excluded();
        let put = match field.flags.blob {
            Some(_) => quote_spanned!(ty.span()=> #p::put_blob::<#ty>),
            None => quote_spanned!(ty.span()=> #p::put::<#ty>),
        };
        quote! { #put(&mut __properties, #name, &self.#ident, #excluded); }
    });
    quote! {{
        #[allow(unused_mut)]
        let mut __properties = #p::PropertyMap::new();
        #(#puts)*
        __properties
    }}
}

/// The expression reading one property out of `__properties`.
fn read_property(entity: &Entity, field: &Field) -> TokenStream {
    let p = private(entity);
    let ty = &field.ty;
    let name = field.name.text();
    match field.flags.blob {
        Some(_) => quote_spanned!(ty.span()=> #p::take_blob::<#ty>(&mut __properties, #name)),
        None => quote_spanned!(ty.span()=> #p::take::<#ty>(&mut __properties, #name)),
    }
}

/// Key builders and property descriptors.
fn inherent_impl(entity: &Entity) -> TokenStream {
    let p = private(entity);
    let ident = &entity.ident;
    let vis = &entity.vis;
    let kind = entity.kind.text();
    let builders = entity.key().map(|key| {
        let key_ty = &key.ty;
        let (parent_arg, parent_raw, parent_doc) = match entity.parent().and_then(|f| key_target(&f.ty)) {
            Some(target) => (
                quote!(parent: &#p::Key<#target>,),
                quote!(#p::Option::Some(#p::Key::raw(parent))),
                " under `parent`",
            ),
            None => (TokenStream::new(), quote!(#p::Option::None), ""),
        };
        let key_doc = format!(
            "The key of the `{kind}` entity{parent_doc} with this id or name. Key names show up \
             in logs, URLs and the console: never put sensitive data in them (R-N8)."
        );
        let builder = quote_spanned!(key_ty.span()=> <#key_ty as #p::KeyField>::Builder);
        let incomplete = is_option(key_ty).then(|| {
            let doc = format!(
                "An incomplete `{kind}` key{parent_doc}: its id is allocated when the entity is put (R-K1)."
            );
            quote! {
                #[doc = #doc]
                #vis fn incomplete_key(#parent_arg) -> #p::Key<Self> {
                    #p::Key::new(#parent_raw, #p::Option::None)
                }
            }
        });
        quote! {
            #[doc = #key_doc]
            #vis fn key(#parent_arg id_or_name: #builder) -> #p::Key<Self> {
                #p::Key::new(#parent_raw, #p::Option::Some(#p::Into::into(id_or_name)))
            }
            #incomplete
        }
    });
    let descriptors = entity.properties().map(|field| {
        let name = field.name.text();
        let const_ident = format_ident!(
            "{}",
            heck::ToShoutySnakeCase::to_shouty_snake_case(ident_text(&field.ident).as_str()),
            span = field.ident.span()
        );
        let ty = match field.flags.blob {
            Some(_) => quote!(#p::Blob),
            None => {
                let ty = &field.ty;
                quote!(#ty)
            }
        };
        let (marker, note) = if field.excluded() {
            (quote!(#p::Excluded), " Excluded from indexes: it cannot be filtered, ordered or projected on.")
        } else {
            (quote!(#p::Indexed), "")
        };
        let doc = format!("The `{name}` property.{note}");
        quote! {
            #[doc = #doc]
            #vis const #const_ident: #p::PropertyPath<Self, #ty, #marker> = #p::PropertyPath::new(#name);
        }
    });
    quote! {
        #[automatically_derived]
        impl #ident {
            #builders
            #(#descriptors)*
        }
    }
}

fn private(entity: &Entity) -> TokenStream {
    let krate = &entity.krate;
    quote!(#krate::__private)
}
