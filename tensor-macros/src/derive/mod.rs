//! `#[derive(GraphArg)]`: tensor-carrying fields become leaves of the signature; fields marked
//! `#[graph_arg(static)]` key by value (Hash + Eq); `#[graph_arg(skip)]` fields add no leaf;
//! at run time their tensors are keyed by identity and a parameter only they hold is an error
//! (see `expand::skipped_check`).
//!
//! One phase per file, as for `#[graph_fn]`: `parse` reads the item into a small model,
//! `valid` checks it, `expand` writes the impl.

mod expand;
mod parse;
mod valid;

use proc_macro2::TokenStream;

pub fn graph_arg(tokens: TokenStream) -> syn::Result<TokenStream> {
    let input: syn::DeriveInput = syn::parse2(tokens)?;
    let item = parse::Item::parse(&input)?;
    valid::check(&item)?;
    Ok(expand::graph_arg(&item))
}

#[cfg(test)]
mod tests {
    use super::graph_arg;

    fn expand(item: &str) -> syn::Result<String> {
        graph_arg(item.parse().unwrap()).map(|t| t.to_string())
    }

    #[test]
    fn the_impl_is_marked_automatically_derived_and_flattens_fields_in_order() {
        let out = expand("struct Model<T> { w: Tensor, #[graph_arg(static)] act: String, #[graph_arg(skip)] n: usize, b: T }").unwrap();
        assert!(out.starts_with("# [automatically_derived] impl < T : :: tensor_core :: __private :: GraphArg >"), "{out}");
        let (w, act, b) = (out.find("\"w\"").unwrap(), out.find("\"act\"").unwrap(), out.find("\"b\"").unwrap());
        assert!(w < act && act < b, "{out}");
        assert!(out.contains("StaticField"), "{out}");
        // A skipped field adds no label or key, only the check for parameters it would hide.
        assert!(out.contains("Skipped (& self . n)) . check_skipped (\"n\" , __tc_f)") && !out.contains("field (\"n\")"), "{out}");
    }

    #[test]
    fn enums_key_their_variant_and_unions_are_refused() {
        let out = expand("enum Act { Relu, Leaky(f32), Scaled { by: Tensor } }").unwrap();
        assert!(out.contains("variant_named (0u32 , \"Relu\")") && out.contains("variant_named (2u32 , \"Scaled\")"), "{out}");
        let e = expand("union Bits { f: f32, i: i32 }").unwrap_err();
        assert!(e.to_string().contains("unions"), "{e}");
    }
}
