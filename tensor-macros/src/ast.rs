//! Our small typed model of the annotated function: its signature pieces and its arguments.

use proc_macro2::{Span, TokenStream};
use syn::{FnArg, Ident, ItemFn, Pat, Receiver, ReturnType, Type};

/// One typed argument (the receiver is kept apart).
pub struct Arg {
    /// The name the expansion refers to it by: the user's identifier, or `__tc_argN` when the
    /// argument is a pattern.
    pub ident: Ident,
    /// The user's pattern, when it is not a plain identifier (bound inside the body).
    pub pattern: Option<Pat>,
    pub ty: Type,
}

/// The function as `#[graph_fn]` sees it.
pub struct GraphFn {
    pub item: ItemFn,
    pub receiver: Option<Receiver>,
    pub args: Vec<Arg>,
}

impl GraphFn {
    pub fn parse(tokens: TokenStream) -> syn::Result<GraphFn> {
        let item: ItemFn = syn::parse2(tokens.clone()).map_err(|_| not_a_function(tokens))?;
        let mut receiver = None;
        let mut args = Vec::new();
        for (i, input) in item.sig.inputs.iter().enumerate() {
            match input {
                FnArg::Receiver(r) => receiver = Some(r.clone()),
                FnArg::Typed(t) => {
                    let (ident, pattern) = match &*t.pat {
                        Pat::Ident(p) if p.subpat.is_none() && p.by_ref.is_none() => (p.ident.clone(), None),
                        other => (Ident::new(&format!("__tc_arg{i}"), Span::call_site()), Some(other.clone())),
                    };
                    args.push(Arg { ident, pattern, ty: (*t.ty).clone() });
                }
            }
        }
        Ok(GraphFn { item, receiver, args })
    }

    /// The function's name.
    pub fn name(&self) -> &Ident {
        &self.item.sig.ident
    }

    /// The return type (`()` when there is none).
    pub fn return_type(&self) -> Type {
        match &self.item.sig.output {
            ReturnType::Default => syn::parse_quote!(()),
            ReturnType::Type(_, t) => (**t).clone(),
        }
    }

    /// True when the function has type or const parameters (each argument's type, and the
    /// instantiation, go in the key).
    pub fn is_generic(&self) -> bool {
        let g = &self.item.sig.generics;
        g.type_params().next().is_some() || g.const_params().next().is_some()
    }

    /// The argument names in order, `self` first for methods.
    pub fn arg_names(&self) -> Vec<String> {
        let user = self.args.iter().map(|a| match &a.pattern {
            None => a.ident.to_string(),
            Some(p) => quote::quote!(#p).to_string(),
        });
        self.receiver.iter().map(|_| "self".to_string()).chain(user).collect()
    }

    /// The index (counting `self`) of the argument called `name`.
    pub fn arg_index(&self, name: &str) -> Option<usize> {
        self.arg_names().iter().position(|n| n == name)
    }
}

fn not_a_function(tokens: TokenStream) -> syn::Error {
    let head: TokenStream = tokens.into_iter().take(2).collect();
    syn::Error::new_spanned(head, "#[graph_fn] applies to functions and methods (`fn` items), not to this item")
}
