//! Typed key builders: `Account::key(name)`, `Post::key(&parent, id)`, `Post::incomplete_key(&parent)`.

use proc_macro2::TokenStream;
use quote::quote;

use super::mode::{Mode, private};
use crate::ast::{Entity, is_option, key_target};

pub(super) fn builders(entity: &Entity, mode: Mode) -> TokenStream {
    let p = private(entity);
    let vis = &entity.vis;
    let kind = entity.kind.text();
    let target = entity.parent().and_then(|f| key_target(&f.ty));
    let parent_doc = if entity.parent().is_some() {
        " under `parent`"
    } else {
        ""
    };
    let key_doc = format!(
        "The key of the `{kind}` entity{parent_doc} with this id or name. Key names show up \
         in logs, URLs and the console: never put sensitive data in them (R-N8)."
    );
    let incomplete_doc = format!(
        "An incomplete `{kind}` key{parent_doc}: its id is allocated when the entity is put (R-K1)."
    );
    let parent_untyped = entity.parent().is_some() && target.is_none();
    let key = match entity.key() {
        Some(key) if mode == Mode::Real && !parent_untyped => key,
        // A structural mistake: builders that accept whatever the user's code passes, so
        // only the real error shows.
        _ => {
            let unreachable = Mode::Stub.body(&p, TokenStream::new());
            let (generics, args, incomplete_generics, incomplete_args) =
                if entity.parent().is_some() {
                    (
                        quote!(<__P, __K>),
                        quote!(parent: __P, id_or_name: __K),
                        quote!(<__P>),
                        quote!(parent: __P),
                    )
                } else {
                    (quote!(<__K>), quote!(id_or_name: __K), quote!(), quote!())
                };
            return quote! {
                #[doc = #key_doc]
                #[allow(unused_variables)]
                #vis fn key #generics (#args) -> #p::Key<Self> {
                    #unreachable
                }
                #[doc = #incomplete_doc]
                #[allow(unused_variables)]
                #vis fn incomplete_key #incomplete_generics (#incomplete_args) -> #p::Key<Self> {
                    #unreachable
                }
            };
        }
    };
    let (parent_arg, parent_raw) = match target {
        Some(target) => (
            quote!(parent: &#p::Key<#target>,),
            quote!(#p::Option::Some(#p::Key::raw(parent))),
        ),
        None => (TokenStream::new(), quote!(#p::Option::None)),
    };
    let builder = builder_type(entity, &key.ty);
    let incomplete = is_option(&key.ty).then(|| {
        quote! {
            #[doc = #incomplete_doc]
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
}

/// What the key builder takes, read from the key field's type as written: `KeyName` for
/// names, `KeyId` for ids. Another type (an alias, or an unsupported one, which its assertion
/// reports) takes anything that converts into an id or a name.
fn builder_type(entity: &Entity, ty: &syn::Type) -> TokenStream {
    let p = private(entity);
    let last = match ty {
        syn::Type::Path(path) if path.qself.is_none() => path.path.segments.last(),
        _ => None,
    };
    match last.map(|s| s.ident.to_string()).as_deref() {
        Some("KeyName" | "String") => quote!(#p::KeyName),
        Some("KeyId" | "u64" | "Option") => quote!(#p::KeyId),
        _ => quote!(impl #p::Into<#p::IdOrName>),
    }
}
