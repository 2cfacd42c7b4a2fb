//! Every check `#[graph_fn]` makes, each reporting on the user's offending tokens.

use crate::ast::GraphFn;
use crate::attr::Options;
use syn::{Error, Type};

pub fn check(f: &GraphFn, opts: &Options) -> syn::Result<()> {
    let sig = &f.item.sig;
    if let Some(a) = &sig.asyncness {
        return Err(Error::new_spanned(a, "#[graph_fn] cannot be async: a traced graph runs synchronously; remove `async`"));
    }
    if let Some(c) = &sig.constness {
        return Err(Error::new_spanned(c, "#[graph_fn] cannot be a const fn: tracing happens at run time; remove `const`"));
    }
    if let Some(r) = &f.receiver
        && !is_shared_self(&r.ty)
    {
        return Err(Error::new_spanned(r, "#[graph_fn] methods must take `&self`: the graph reads the receiver's tensors by reference and writes their updates back; `self` by value and `&mut self` are not supported"));
    }
    for arg in &f.args {
        check_arg_type(&arg.ty)?;
    }
    if let syn::ReturnType::Type(_, ty) = &sig.output
        && let Type::ImplTrait(_) = &**ty
    {
        return Err(Error::new_spanned(ty, "#[graph_fn] cannot return `impl Trait`: the graph rebuilds its outputs by their type; name the return type (a Tensor, a tuple, Vec or Option of them, or a Result of one)"));
    }
    if let Some(specs) = &opts.input_signature {
        for spec in specs {
            check_spec(f, spec)?;
        }
    }
    Ok(())
}

fn check_arg_type(ty: &Type) -> syn::Result<()> {
    match ty {
        Type::Reference(r) if r.mutability.is_some() => Err(Error::new_spanned(
            ty,
            "#[graph_fn] arguments cannot be `&mut`: pass `&Tensor` and update it in place with add_/sub_/assign_ (the graph writes the change back), or return the new value",
        )),
        Type::Reference(r) => check_arg_type(&r.elem),
        Type::ImplTrait(_) => Err(Error::new_spanned(ty, "#[graph_fn] arguments cannot be `impl Trait`: every call's argument types must be known to build its signature; use a generic parameter `T: GraphArg` or a concrete type")),
        _ => Ok(()),
    }
}

/// `&self`, `&'a self` or `self: &Self`.
fn is_shared_self(ty: &Type) -> bool {
    match ty {
        Type::Reference(r) => r.mutability.is_none() && matches!(&*r.elem, Type::Path(p) if p.qself.is_none() && p.path.is_ident("Self")),
        _ => false,
    }
}

fn check_spec(f: &GraphFn, spec: &crate::attr::Spec) -> syn::Result<()> {
    let name = spec.arg.to_string();
    let Some(index) = f.arg_index(&name) else {
        let names = f.arg_names().join(", ");
        return Err(Error::new_spanned(
            &spec.arg,
            format!("input_signature names `{name}`, which is not an argument of this function (its arguments: {names})"),
        ));
    };
    let ty = if f.receiver.is_some() { index.checked_sub(1).map(|i| &f.args[i].ty) } else { Some(&f.args[index].ty) };
    if !ty.is_some_and(is_tensor_type) {
        return Err(Error::new_spanned(
            &spec.arg,
            format!("input_signature can only fix tensor arguments, and `{name}` is not a `Tensor` or `&Tensor`"),
        ));
    }
    Ok(())
}

/// `Tensor`, `&Tensor`, or a path ending in `Tensor`.
fn is_tensor_type(ty: &Type) -> bool {
    match ty {
        Type::Reference(r) => is_tensor_type(&r.elem),
        Type::Path(p) => p.qself.is_none() && p.path.segments.last().is_some_and(|s| s.ident == "Tensor" && s.arguments.is_none()),
        Type::Paren(p) => is_tensor_type(&p.elem),
        _ => false,
    }
}
