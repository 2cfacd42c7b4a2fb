//! `#[derive(GraphArg)]`: tensor-carrying fields become leaves of the signature; fields marked
//! `#[graph_arg(static)]` key by value (Hash + Eq); `#[graph_arg(skip)]` fields are ignored.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Data, DeriveInput, Fields, GenericParam};

/// How a field takes part in the signature.
enum Role {
    Leaf,
    Static,
    Skip,
}

pub fn graph_arg(tokens: TokenStream) -> syn::Result<TokenStream> {
    let input: DeriveInput = syn::parse2(tokens)?;
    let name = &input.ident;
    let mut generics = input.generics.clone();
    for param in generics.params.iter_mut() {
        if let GenericParam::Type(t) = param {
            t.bounds.push(syn::parse_quote!(::tensor_core::__private::GraphArg));
        }
    }
    let (impl_generics, ty_generics, where_clause) = generics.split_for_impl();
    let body = match &input.data {
        Data::Struct(s) => struct_body(&s.fields)?,
        Data::Enum(e) => {
            let arms = e.variants.iter().enumerate().map(|(i, v)| {
                let vname = &v.ident;
                let label = vname.to_string();
                let index = i as u32;
                let (pattern, flatten) = variant_fields(&v.fields)?;
                let flatten = match v.fields.is_empty() {
                    true => flatten,
                    false => quote! { __tc_f.field(#label); #flatten __tc_f.end_field(); },
                };
                Ok(quote! { Self::#vname #pattern => { __tc_f.variant(#index); #flatten } })
            });
            let arms = arms.collect::<syn::Result<Vec<_>>>()?;
            quote! { match self { #(#arms)* } }
        }
        Data::Union(u) => return Err(syn::Error::new_spanned(u.union_token, "GraphArg cannot be derived for unions")),
    };
    Ok(quote! {
        impl #impl_generics ::tensor_core::__private::GraphArg for #name #ty_generics #where_clause {
            fn flatten(&self, __tc_f: &mut ::tensor_core::__private::Flattener) {
                #body
            }
        }
    })
}

fn struct_body(fields: &Fields) -> syn::Result<TokenStream> {
    let mut out = TokenStream::new();
    for (i, field) in fields.iter().enumerate() {
        let access = match &field.ident {
            Some(id) => quote!(&self.#id),
            None => {
                let index = syn::Index::from(i);
                quote!(&self.#index)
            }
        };
        out.extend(field_flatten(field, label(fields, i), access)?);
    }
    Ok(out)
}

/// The name a field's parts go by: its identifier, or its index in a tuple struct or variant
/// with several fields (a newtype's single field adds no name).
fn label(fields: &Fields, i: usize) -> Option<String> {
    let field = fields.iter().nth(i)?;
    match &field.ident {
        Some(id) => Some(id.to_string()),
        None if fields.len() > 1 => Some(i.to_string()),
        None => None,
    }
}

fn variant_fields(fields: &Fields) -> syn::Result<(TokenStream, TokenStream)> {
    let names: Vec<_> = fields.iter().enumerate().map(|(i, f)| f.ident.clone().unwrap_or_else(|| format_ident!("__tc_field{i}"))).collect();
    let mut flatten = TokenStream::new();
    for (i, (field, name)) in fields.iter().zip(&names).enumerate() {
        flatten.extend(field_flatten(field, label(fields, i), quote!(#name))?);
    }
    let pattern = match fields {
        Fields::Named(_) => quote!({ #(#names),* }),
        Fields::Unnamed(_) => quote!(( #(#names),* )),
        Fields::Unit => quote!(),
    };
    Ok((pattern, flatten))
}

fn field_flatten(field: &syn::Field, label: Option<String>, access: TokenStream) -> syn::Result<TokenStream> {
    let ty = &field.ty;
    let flatten = match role(field)? {
        Role::Leaf => quote_spanned! {ty.span()=> <#ty as ::tensor_core::__private::GraphArgField>::flatten_field(#access, __tc_f); },
        Role::Static => quote_spanned! {ty.span()=> <#ty as ::tensor_core::__private::StaticField>::flatten_static(#access, __tc_f); },
        Role::Skip => return Ok(quote!()),
    };
    Ok(match label {
        Some(name) => quote! { __tc_f.field(#name); #flatten __tc_f.end_field(); },
        None => flatten,
    })
}

fn role(field: &syn::Field) -> syn::Result<Role> {
    let mut role = Role::Leaf;
    for attr in field.attrs.iter().filter(|a| a.path().is_ident("graph_arg")) {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("static") {
                role = Role::Static;
                Ok(())
            } else if meta.path.is_ident("skip") {
                role = Role::Skip;
                Ok(())
            } else {
                Err(meta.error("expected `#[graph_arg(static)]` or `#[graph_arg(skip)]`"))
            }
        })?;
    }
    Ok(role)
}
