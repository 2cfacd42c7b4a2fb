//! The derive's impl: only `quote!`.

use super::parse::{Field, Item, Role, Shape, Style, Variant};
use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::GenericParam;

pub fn graph_arg(item: &Item) -> TokenStream {
    let name = item.ident;
    let mut generics = item.generics.clone();
    for param in generics.params.iter_mut() {
        if let GenericParam::Type(t) = param {
            t.bounds.push(syn::parse_quote!(::tensor_core::__private::GraphArg));
        }
    }
    let (impl_generics, ty_generics, where_clause) = generics.split_for_impl();
    let body = match &item.shape {
        Shape::Struct(fields) => struct_body(fields),
        Shape::Enum(variants) => {
            let arms = variants.iter().enumerate().map(|(i, v)| variant_arm(i, v));
            quote! { match self { #(#arms)* } }
        }
        Shape::Union(_) => unreachable!("refused by valid"),
    };
    quote! {
        #[automatically_derived]
        impl #impl_generics ::tensor_core::__private::GraphArg for #name #ty_generics #where_clause {
            fn flatten(&self, __tc_f: &mut ::tensor_core::__private::Flattener) {
                #body
            }
        }
    }
}

fn struct_body(fields: &[Field]) -> TokenStream {
    let flattens = fields.iter().map(|f| {
        let access = match f.ident {
            Some(id) => quote!(&self.#id),
            None => {
                let index = syn::Index::from(f.index);
                quote!(&self.#index)
            }
        };
        field_flatten(f, access)
    });
    quote!(#(#flattens)*)
}

/// `Self::V { a, b } => { variant index and name; each field }`; the variant's fields go under
/// its name.
fn variant_arm(index: usize, v: &Variant) -> TokenStream {
    let (vname, label, index) = (v.ident, v.ident.to_string(), index as u32);
    let names: Vec<_> = v.fields.iter().map(|f| f.ident.cloned().unwrap_or_else(|| format_ident!("__tc_field{}", f.index))).collect();
    let flattens = v.fields.iter().zip(&names).map(|(f, name)| field_flatten(f, quote!(#name)));
    let flatten = quote!(#(#flattens)*);
    let flatten = match v.fields.is_empty() {
        true => flatten,
        false => quote! { __tc_f.field(#label); #flatten __tc_f.end_field(); },
    };
    let pattern = match v.style {
        Style::Named => quote!({ #(#names),* }),
        Style::Unnamed => quote!(( #(#names),* )),
        Style::Unit => quote!(),
    };
    quote! { Self::#vname #pattern => { __tc_f.variant_named(#index, #label); #flatten } }
}

/// One field's part of the key, under its label. Spanned at the field's type, so a missing
/// trait is reported there.
fn field_flatten(field: &Field, access: TokenStream) -> TokenStream {
    let ty = field.ty;
    let flatten = match field.role() {
        Role::Leaf => quote_spanned! {ty.span()=> <#ty as ::tensor_core::__private::GraphArgField>::flatten_field(#access, __tc_f); },
        Role::Static => quote_spanned! {ty.span()=> <#ty as ::tensor_core::__private::StaticField>::flatten_static(#access, __tc_f); },
        Role::Skip => return skipped_check(field, access),
    };
    match &field.label {
        Some(name) => quote! { __tc_f.field(#name); #flatten __tc_f.end_field(); },
        None => flatten,
    }
}

/// A skipped field adds nothing to the key, but its parameters are looked for: method
/// resolution picks `SkippedGraphArg` (which notes the tensors that require grad, an error
/// unless another field holds them) when the type is `GraphArg`, else `SkippedOther`, a no-op.
fn skipped_check(field: &Field, access: TokenStream) -> TokenStream {
    let name = field.label.clone().unwrap_or_else(|| field.index.to_string());
    quote! {{
        #[allow(unused_imports)]
        use ::tensor_core::__private::{SkippedGraphArg as _, SkippedOther as _};
        (&::tensor_core::__private::Skipped(#access)).check_skipped(#name, __tc_f);
    }}
}
