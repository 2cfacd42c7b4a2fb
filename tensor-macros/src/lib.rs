//! Procedural macros of tensor-core: `#[graph_fn]` and `#[derive(GraphArg)]`. Users reach them
//! through `tensor_core::prelude`; the generated code names only `::tensor_core::__private`
//! paths. Each phase has its file: `attr` parses the options, `ast` models the function,
//! `valid` holds every check, `expand` is only `quote!`, `autograph` rewrites `if`/`while` on
//! tensor conditions, `fallback` re-emits the user's item next to an error so only one error
//! shows. `derive` has the same phases for `#[derive(GraphArg)]`.

mod ast;
mod attr;
mod autograph;
mod derive;
mod expand;
mod fallback;
mod valid;

use proc_macro::TokenStream;

/// Traces the function into a graph on its first call per input signature and replays the
/// cached graph on later calls. See `tensor_core`'s documentation for options and semantics.
#[proc_macro_attribute]
pub fn graph_fn(attr: TokenStream, item: TokenStream) -> TokenStream {
    let item2: proc_macro2::TokenStream = item.into();
    let result = attr::parse(attr.into()).and_then(|opts| {
        let f = ast::GraphFn::parse(item2.clone())?;
        valid::check(&f, &opts)?;
        Ok(expand::graph_fn(&f, &opts))
    });
    match result {
        Ok(tokens) => tokens.into(),
        Err(e) => fallback::with_error(item2, e).into(),
    }
}

/// Implements `GraphArg` for a struct or enum: fields that are `GraphArg` (tensors, scalars,
/// collections of them) become part of the signature; mark other fields
/// `#[graph_arg(static)]` (keyed by value: `Hash + Eq + Clone + Debug + Send + Sync + 'static`) or
/// `#[graph_arg(skip)]`.
#[proc_macro_derive(GraphArg, attributes(graph_arg))]
pub fn derive_graph_arg(item: TokenStream) -> TokenStream {
    let item: proc_macro2::TokenStream = item.into();
    match derive::graph_arg(item.clone()) {
        Ok(tokens) => tokens.into(),
        Err(e) => fallback::derive_with_error(item, e).into(),
    }
}
