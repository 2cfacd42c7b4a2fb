//! The derive's checks, each reported on the offending tokens.

use super::parse::{Field, Item, Shape};
use syn::Error;

pub fn check(item: &Item) -> syn::Result<()> {
    let fields: Vec<&Field> = match &item.shape {
        Shape::Union(token) => {
            let msg = "GraphArg cannot be derived for unions: which field holds the value is not known, so its tensors cannot be found; use a struct or an enum";
            return Err(Error::new_spanned(token, msg));
        }
        Shape::Struct(fields) => fields.iter().collect(),
        Shape::Enum(variants) => variants.iter().flat_map(|v| &v.fields).collect(),
    };
    fields.into_iter().try_for_each(one_role)
}

/// A field is a leaf, `static` or `skip`: not two of them.
fn one_role(field: &Field) -> syn::Result<()> {
    match field.roles.as_slice() {
        [(_, first), (_, second), ..] => {
            let (first, second) = (path_name(first), path_name(second));
            let msg = format!("this field is already `#[graph_arg({first})]`; give it one of `static` or `skip`, not `{first}` and `{second}`");
            Err(Error::new_spanned(&field.roles[1].1, msg))
        }
        _ => Ok(()),
    }
}

fn path_name(p: &syn::Path) -> String {
    p.get_ident().map(|i| i.to_string()).unwrap_or_default()
}
