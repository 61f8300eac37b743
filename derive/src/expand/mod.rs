//! Code generation.
//!
//! Everything generated reaches the runtime through `#krate::__private` (absolute paths), and every public item carries a doc line. Each field's type is checked by one
//! assertion ([`property::assertions`]); every other use of the type goes through the
//! runtime's `Probe`, so a wrong type is reported exactly once.
//!
//! In [`Mode::Stub`] (after a structural mistake or an attribute typo) the same items are
//! generated with bodies that never run, so the user's code that uses the type keeps
//! compiling and only the real errors are shown (thiserror's fallback).

mod entity;
mod key;
pub(crate) mod mode;
mod projection;
mod property;
mod scale;

use proc_macro2::TokenStream;
use quote::quote;

use self::mode::{Mode, private};
use crate::ast::Entity;

pub(crate) fn expand(entity: &Entity, mode: Mode) -> TokenStream {
    let p = private(entity);
    let trait_impl = if entity.is_entity() {
        entity::entity_impl(entity, mode)
    } else {
        entity::embedded_impl(entity, mode)
    };
    let assertions = property::assertions(entity);
    let ident = &entity.ident;
    let builders = entity.is_entity().then(|| key::builders(entity, mode));
    let descriptors = property::descriptors(entity);
    let helpers = entity.is_entity().then(|| scale::helpers(entity));
    let projections = entity.is_entity().then(|| projection::projections(entity));
    quote! {
        const _: () = {
            #[allow(unused_imports)]
            use #p::{
                BlobFallback as _, BlobProbe as _, FlattenFallback as _, FlattenProbe as _,
                JsonFallback as _, JsonProbe as _, KeyFallback as _, KeyProbe as _,
                PropertyFallback as _, PropertyProbe as _, ShardIndexFallback as _,
                ShardIndexProbe as _,
            };
            #trait_impl
            #assertions
        };
        #[automatically_derived]
        impl #ident {
            #builders
            #(#descriptors)*
            #helpers
        }
        #projections
    }
}
