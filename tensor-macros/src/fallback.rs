//! On an error, emit the user's function unchanged beside the error (and, for the derive,
//! an empty `GraphArg` impl), so the rest of the crate still compiles against it and the user
//! sees one error, not a cascade.

use proc_macro2::TokenStream;
use quote::quote;

pub fn with_error(item: TokenStream, error: syn::Error) -> TokenStream {
    let mut out = error.to_compile_error();
    out.extend(item);
    out
}

/// The derive's error, and an impl that keeps uses of the type as an argument from adding
/// errors of their own (the crate does not compile anyway, so the impl never runs).
pub fn derive_with_error(item: TokenStream, error: syn::Error) -> TokenStream {
    let mut out = error.to_compile_error();
    if let Ok(input) = syn::parse2::<syn::DeriveInput>(item) {
        let name = &input.ident;
        let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
        out.extend(quote! {
            #[automatically_derived]
            impl #impl_generics ::tensor_core::__private::GraphArg for #name #ty_generics #where_clause {
                fn flatten(&self, _: &mut ::tensor_core::__private::Flattener) {}
            }
        });
    }
    out
}
