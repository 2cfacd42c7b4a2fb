//! The expansion of `#[graph_fn]`: only `quote!`. The function keeps its attributes,
//! visibility and signature; its body becomes a closure the runtime traces on the first call
//! per signature (and runs eagerly under `run_functions_eagerly`).

use crate::ast::GraphFn;
use crate::attr::{Options, Policy};
use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{FnArg, Pat};

pub fn graph_fn(f: &GraphFn, opts: &Options) -> TokenStream {
    let item = &f.item;
    let (attrs, vis) = (&item.attrs, &item.vis);
    let sig = signature(f);
    let name = f.name().to_string();
    let arg_names = f.arg_names();
    let options = options(f, opts);
    let flatten = flatten(f);
    let ret = f.return_type();
    let self_type = match f.receiver {
        Some(_) => quote!(::core::option::Option::Some(::core::any::type_name::<Self>())),
        None => quote!(::core::option::Option::None),
    };
    let bindings = f.args.iter().filter_map(|a| {
        a.pattern.as_ref().map(|p| {
            let ident = &a.ident;
            quote!(let #p = #ident;)
        })
    });
    let mut block = (*item.block).clone();
    crate::autograph::rewrite(&mut block);
    let stmts = &block.stmts;
    let call = quote_spanned! {ret.span()=>
        __TC_GRAPH_FN.call::<#ret, _>(#self_type, __tc_flat, move || -> #ret { #(#bindings)* #(#stmts)* })
    };
    quote! {
        #(#attrs)*
        #vis #sig {
            static __TC_GRAPH_FN: ::tensor_core::__private::GraphFunction =
                ::tensor_core::__private::GraphFunction::new(#name, ::core::module_path!(), &[#(#arg_names),*], #options);
            let __tc_flat = __TC_GRAPH_FN.flatten_args(|__tc_f: &mut ::tensor_core::__private::Flattener| { #flatten });
            #call
        }
    }
}

/// The signature, with pattern arguments renamed (their patterns are bound in the body).
fn signature(f: &GraphFn) -> syn::Signature {
    let mut sig = f.item.sig.clone();
    let mut args = f.args.iter();
    for input in sig.inputs.iter_mut() {
        if let FnArg::Typed(t) = input {
            let arg = args.next().expect("one model arg per typed input");
            if arg.pattern.is_some() {
                let ident = &arg.ident;
                *t.pat = Pat::Verbatim(quote!(#ident));
            }
        }
    }
    sig
}

/// Adds each argument (and, where statics are shared across types, each type) to the key.
fn flatten(f: &GraphFn) -> TokenStream {
    let receiver = f.receiver.as_ref().map(|r| {
        let flat = quote_spanned! {r.span()=> <Self as ::tensor_core::__private::GraphArg>::flatten(self, __tc_f); };
        quote! {
            __tc_f.arg();
            __tc_f.type_name(::core::any::type_name::<Self>());
            #flat
        }
    });
    let args = f.args.iter().map(|a| {
        let (ident, ty) = (&a.ident, &a.ty);
        let flat = quote_spanned! {ty.span()=> <#ty as ::tensor_core::__private::GraphArg>::flatten(&#ident, __tc_f); };
        // A generic function's static is shared by all its instantiations: key the types too.
        let type_name = f.is_generic().then(|| quote! { __tc_f.type_name(::core::any::type_name::<#ty>()); });
        quote! { __tc_f.arg(); #type_name #flat }
    });
    // Generic parameters (the function's, and for methods the impl's and trait's, which the
    // attribute cannot see) can change the body without changing any argument's type: key
    // the instantiation itself, named by a closure's type (`step<f32, 3>::{{closure}}`).
    let instantiation = (f.is_generic() || f.receiver.is_some()).then(|| {
        quote! { __tc_f.instantiation(::core::any::type_name_of_val(&|| ())); }
    });
    quote! { #receiver #(#args)* #instantiation }
}

fn options(f: &GraphFn, opts: &Options) -> TokenStream {
    let p = quote!(::tensor_core::__private);
    let reduce = opts.reduce_retracing;
    let input_signature = match &opts.input_signature {
        None => quote!(::core::option::Option::None),
        Some(specs) => {
            let specs = specs.iter().map(|s| {
                let arg = f.arg_index(&s.arg.to_string()).expect("checked by valid");
                let dtype = s.dtype.variant();
                let dims = s.dims.iter().map(|d| match d {
                    Some(n) => quote!(::core::option::Option::Some(#n)),
                    None => quote!(::core::option::Option::None),
                });
                quote!(#p::TensorSpec { arg: #arg, dtype: #p::DType::#dtype, dims: &[#(#dims),*] })
            });
            quote!(::core::option::Option::Some(&[#(#specs),*]))
        }
    };
    let max_traces = match opts.max_traces {
        None => quote!(::core::option::Option::None),
        Some((n, Policy::Warn)) => quote!(::core::option::Option::Some((#n, #p::TracePolicy::Warn))),
        Some((n, Policy::Error)) => quote!(::core::option::Option::Some((#n, #p::TracePolicy::Error))),
    };
    let optimize = opts.optimize.unwrap_or(true);
    let capacity = opts.cache_capacity.unwrap_or(64);
    let name = match &opts.name {
        Some(n) => quote!(::core::option::Option::Some(#n)),
        None => quote!(::core::option::Option::None),
    };
    quote! {
        #p::Options {
            reduce_retracing: #reduce,
            input_signature: #input_signature,
            max_traces: #max_traces,
            optimize: #optimize,
            cache_capacity: #capacity,
            name: #name,
        }
    }
}
