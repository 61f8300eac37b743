//! Whether the generated code works or stands in ([`Mode`]), and the path it reaches the
//! runtime through.

use proc_macro2::TokenStream;
use quote::quote;

use crate::ast::Entity;

/// Whether the generated items work, or only stand in for them next to compile errors.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Real,
    Stub,
}

impl Mode {
    /// `body` in [`Mode::Real`]; in [`Mode::Stub`], a body that never runs.
    pub(crate) fn body(self, p: &TokenStream, body: TokenStream) -> TokenStream {
        match self {
            Mode::Real => body,
            Mode::Stub => quote!(#p::unreachable!("the derive reported an error for this type")),
        }
    }
}

/// The runtime's `__private` module, by the crate path the entity names.
pub(crate) fn private(entity: &Entity) -> TokenStream {
    let krate = &entity.krate;
    quote!(#krate::__private)
}
