//! On an error, emit the user's function unchanged beside the error, so the rest of the
//! crate still compiles against it and the user sees one error, not a cascade.

use proc_macro2::TokenStream;

pub fn with_error(item: TokenStream, error: syn::Error) -> TokenStream {
    let mut out = error.to_compile_error();
    out.extend(item);
    out
}
