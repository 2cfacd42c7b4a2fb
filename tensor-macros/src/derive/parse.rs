//! The derive's input as a small model: the type's fields (or each variant's), each with its
//! role in the signature and the name its parts go by.

use syn::meta::ParseNestedMeta;
use syn::{DeriveInput, Fields, Generics, Ident, Path, Type};

/// The type the derive is on.
pub struct Item<'a> {
    pub ident: &'a Ident,
    pub generics: &'a Generics,
    pub shape: Shape<'a>,
}

pub enum Shape<'a> {
    Struct(Vec<Field<'a>>),
    Enum(Vec<Variant<'a>>),
    /// Refused by `valid`: a union's active field is not known.
    Union(&'a syn::token::Union),
}

pub struct Variant<'a> {
    pub ident: &'a Ident,
    pub style: Style,
    pub fields: Vec<Field<'a>>,
}

/// How a struct or variant writes its fields.
#[derive(Clone, Copy, PartialEq)]
pub enum Style {
    Named,
    Unnamed,
    Unit,
}

pub struct Field<'a> {
    /// The field's identifier, for named fields.
    pub ident: Option<&'a Ident>,
    /// Its position.
    pub index: usize,
    pub ty: &'a Type,
    /// The name its leaves and retrace reasons go by: its identifier, or its index when
    /// there are several unnamed fields (a newtype's single field adds no name).
    pub label: Option<String>,
    /// Each `#[graph_arg(..)]` role given, with the path that gave it (`valid` wants one).
    pub roles: Vec<(Role, Path)>,
}

/// How a field takes part in the signature.
#[derive(Clone, Copy, PartialEq)]
pub enum Role {
    Leaf,
    Static,
    Skip,
}

impl<'a> Item<'a> {
    pub fn parse(input: &'a DeriveInput) -> syn::Result<Item<'a>> {
        let shape = match &input.data {
            syn::Data::Struct(s) => Shape::Struct(fields(&s.fields)?),
            syn::Data::Enum(e) => Shape::Enum(e.variants.iter().map(Variant::parse).collect::<syn::Result<_>>()?),
            syn::Data::Union(u) => Shape::Union(&u.union_token),
        };
        Ok(Item { ident: &input.ident, generics: &input.generics, shape })
    }
}

impl<'a> Variant<'a> {
    fn parse(v: &'a syn::Variant) -> syn::Result<Variant<'a>> {
        Ok(Variant { ident: &v.ident, style: style(&v.fields), fields: fields(&v.fields)? })
    }
}

impl Field<'_> {
    /// The role the field plays: a leaf unless an attribute says otherwise.
    pub fn role(&self) -> Role {
        self.roles.first().map_or(Role::Leaf, |(role, _)| *role)
    }
}

fn style(fields: &Fields) -> Style {
    match fields {
        Fields::Named(_) => Style::Named,
        Fields::Unnamed(_) => Style::Unnamed,
        Fields::Unit => Style::Unit,
    }
}

fn fields(fields: &Fields) -> syn::Result<Vec<Field<'_>>> {
    let several = fields.len() > 1;
    fields
        .iter()
        .enumerate()
        .map(|(index, f)| {
            let label = match &f.ident {
                Some(id) => Some(id.to_string()),
                None => several.then(|| index.to_string()),
            };
            Ok(Field { ident: f.ident.as_ref(), index, ty: &f.ty, label, roles: roles(f)? })
        })
        .collect()
}

fn roles(field: &syn::Field) -> syn::Result<Vec<(Role, Path)>> {
    let mut roles = Vec::new();
    for attr in field.attrs.iter().filter(|a| a.path().is_ident("graph_arg")) {
        attr.parse_nested_meta(|meta| {
            roles.push((role(&meta)?, meta.path.clone()));
            Ok(())
        })?;
    }
    Ok(roles)
}

fn role(meta: &ParseNestedMeta) -> syn::Result<Role> {
    if meta.path.is_ident("static") {
        Ok(Role::Static)
    } else if meta.path.is_ident("skip") {
        Ok(Role::Skip)
    } else {
        Err(meta.error("expected `#[graph_arg(static)]` or `#[graph_arg(skip)]`"))
    }
}
