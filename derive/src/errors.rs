//! The errors of one derive, collected so that all of them are reported together.

use proc_macro2::{Span, TokenStream};
use quote::ToTokens;

/// Compile errors, in the order they were found.
#[derive(Default)]
pub(crate) struct Errors(Vec<syn::Error>);

impl Errors {
    pub(crate) fn push(&mut self, error: impl Into<syn::Error>) {
        self.0.push(error.into());
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub(crate) fn append(&mut self, other: Errors) {
        self.0.extend(other.0);
    }

    pub(crate) fn into_tokens(self) -> TokenStream {
        self.0.into_iter().map(|e| e.to_compile_error()).collect()
    }
}

impl Extend<syn::Error> for Errors {
    fn extend<I: IntoIterator<Item = syn::Error>>(&mut self, errors: I) {
        self.0.extend(errors);
    }
}

/// An error at one token.
pub(crate) fn at(span: Span, message: impl std::fmt::Display) -> syn::Error {
    syn::Error::new(span, message)
}

/// An error spanning all of `tokens` (a whole type, `std::time::Duration`).
pub(crate) fn on(tokens: impl ToTokens, message: impl std::fmt::Display) -> syn::Error {
    syn::Error::new_spanned(tokens, message)
}
