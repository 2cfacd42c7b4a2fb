//! Parses `#[graph_fn(...)]` options. Every problem is reported on the option's own tokens:
//! a malformed value at the token where it stops making sense.

use proc_macro2::{Span, TokenStream};
use syn::parse::{Parse, ParseStream, Parser};
use syn::punctuated::Punctuated;
use syn::{Ident, LitBool, LitInt, LitStr, Token};

/// The options, as written.
#[derive(Default)]
pub struct Options {
    pub reduce_retracing: bool,
    pub input_signature: Option<Vec<Spec>>,
    pub max_traces: Option<(usize, Policy)>,
    pub optimize: Option<bool>,
    pub cache_capacity: Option<usize>,
    pub name: Option<String>,
}

#[derive(Clone, Copy)]
pub enum Policy {
    Warn,
    Error,
}

/// One `name: dtype[dims]` of an input signature.
pub struct Spec {
    pub arg: Ident,
    pub dtype: DTypeName,
    pub dims: Vec<Option<usize>>,
}

/// A dtype an input signature can name.
#[derive(Clone, Copy)]
pub enum DTypeName {
    F32,
    F64,
    I32,
    I64,
    Bool,
}

impl DTypeName {
    /// Each dtype by the name a signature spells it with.
    const ALL: [(&'static str, DTypeName); 5] =
        [("f32", DTypeName::F32), ("f64", DTypeName::F64), ("i32", DTypeName::I32), ("i64", DTypeName::I64), ("bool", DTypeName::Bool)];

    fn parse(name: &Ident) -> syn::Result<DTypeName> {
        match Self::ALL.iter().find(|(spelled, _)| name == spelled) {
            Some((_, dtype)) => Ok(*dtype),
            None => {
                let names: Vec<&str> = Self::ALL.iter().map(|(spelled, _)| *spelled).collect();
                let msg = format!("unknown dtype `{name}` in input_signature; expected one of {}", names.join(", "));
                Err(syn::Error::new_spanned(name, msg))
            }
        }
    }

    /// The matching variant of `tensor_core::DType`.
    pub fn variant(self) -> Ident {
        let name = match self {
            DTypeName::F32 => "F32",
            DTypeName::F64 => "F64",
            DTypeName::I32 => "I32",
            DTypeName::I64 => "I64",
            DTypeName::Bool => "Bool",
        };
        Ident::new(name, Span::call_site())
    }
}

const OPTIONS: &str = "reduce_retracing, input_signature(x: f32[?, 784], ...), max_traces = N, max_traces(N, warn | error), optimize = bool, cache_capacity = N, name = \"...\"";

pub fn parse(tokens: TokenStream) -> syn::Result<Options> {
    let mut opts = Options::default();
    let items = Punctuated::<OptionItem, Token![,]>::parse_terminated
        .parse2(tokens)
        .map_err(|e| syn::Error::new(e.span(), format!("expected a #[graph_fn] option; the options are: {OPTIONS}")))?;
    let mut seen = Vec::new();
    for item in items {
        item.apply(&mut opts, &mut seen)?;
    }
    Ok(opts)
}

/// One option: a name and what follows it.
struct OptionItem {
    name: Ident,
    value: TokenStream,
}

impl Parse for OptionItem {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let name: Ident = input.parse()?;
        let mut value = TokenStream::new();
        while !input.is_empty() && !input.peek(Token![,]) {
            let tt: proc_macro2::TokenTree = input.parse()?;
            value.extend([tt]);
        }
        Ok(OptionItem { name, value })
    }
}

impl OptionItem {
    fn apply(self, opts: &mut Options, seen: &mut Vec<String>) -> syn::Result<()> {
        let key = self.name.to_string();
        if seen.contains(&key) {
            return Err(syn::Error::new_spanned(&self.name, format!("duplicate #[graph_fn] option `{key}`; give each option once")));
        }
        match key.as_str() {
            "reduce_retracing" => {
                opts.reduce_retracing = match self.value.is_empty() {
                    true => true,
                    false => self.eq_value::<LitBool>()?.value,
                }
            }
            "input_signature" => opts.input_signature = Some(self.specs()?),
            "max_traces" => opts.max_traces = Some(self.max_traces()?),
            "optimize" => opts.optimize = Some(self.eq_value::<LitBool>()?.value),
            "cache_capacity" => opts.cache_capacity = Some(self.positive()?),
            "name" => opts.name = Some(self.name_value()?),
            _ => return Err(syn::Error::new_spanned(&self.name, format!("unknown #[graph_fn] option `{key}`; the options are: {OPTIONS}"))),
        }
        seen.push(key);
        Ok(())
    }

    /// Runs `parser` over the value. A parse error becomes "malformed `option`: expected
    /// ...", at the token where parsing failed (at the option's name when there is no value).
    fn parse_value<T>(&self, parser: impl FnOnce(ParseStream) -> syn::Result<T>, expected: &str) -> syn::Result<T> {
        let parser = |input: ParseStream| {
            let value = parser(input)?;
            if !input.is_empty() {
                return Err(input.error("unexpected tokens"));
            }
            Ok(value)
        };
        parser.parse2(self.value.clone()).map_err(|e| {
            let msg = format!("malformed `{}` option: expected {expected}", self.name);
            match self.value.is_empty() {
                true => syn::Error::new_spanned(&self.name, msg),
                false => syn::Error::new(e.span(), msg),
            }
        })
    }

    /// `= value`
    fn eq_value<T: Parse + LitName>(&self) -> syn::Result<T> {
        let parser = |input: ParseStream| {
            let eq = input.parse::<Token![=]>()?;
            match input.is_empty() {
                // Nothing after `=`: point there rather than at the whole attribute.
                true => Err(syn::Error::new_spanned(eq, "a value")),
                false => input.parse::<T>(),
            }
        };
        self.parse_value(parser, &format!("`{} = <{}>`", self.name, T::NAME))
    }

    fn positive(&self) -> syn::Result<usize> {
        positive(&self.name, &self.eq_value::<LitInt>()?)
    }

    /// `= "a name"`, not empty.
    fn name_value(&self) -> syn::Result<String> {
        let lit = self.eq_value::<LitStr>()?;
        match lit.value() {
            v if v.trim().is_empty() => {
                Err(syn::Error::new_spanned(lit, "`name` must not be empty: it names the function in logs and in `function::lookup`"))
            }
            v => Ok(v),
        }
    }

    /// `= N` (warn), `(N)` (warn) or `(N, warn | error)`
    fn max_traces(&self) -> syn::Result<(usize, Policy)> {
        if self.value.to_string().starts_with('=') {
            return Ok((self.positive()?, Policy::Warn));
        }
        let parser = |input: ParseStream| {
            let content;
            syn::parenthesized!(content in input);
            let n: LitInt = content.parse()?;
            let policy = match content.parse::<Option<Token![,]>>()? {
                Some(_) => Some(content.parse::<Ident>()?),
                None => None,
            };
            if !content.is_empty() {
                return Err(content.error("unexpected tokens"));
            }
            Ok((n, policy))
        };
        let (n, policy) = self.parse_value(parser, "`max_traces = N` or `max_traces(N, warn)` / `max_traces(N, error)`")?;
        let policy = match policy.as_ref().map(|p| (p, p.to_string())) {
            None => Policy::Warn,
            Some((_, p)) if p == "warn" => Policy::Warn,
            Some((_, p)) if p == "error" => Policy::Error,
            Some((p, other)) => return Err(syn::Error::new_spanned(p, format!("unknown max_traces policy `{other}`: expected `warn` or `error`"))),
        };
        Ok((positive(&self.name, &n)?, policy))
    }

    /// `(x: f32[?, 784], labels: i64[?])`
    fn specs(&self) -> syn::Result<Vec<Spec>> {
        let parser = |input: ParseStream| {
            let content;
            syn::parenthesized!(content in input);
            Punctuated::<SpecSyntax, Token![,]>::parse_terminated(&content)
        };
        let expected = "`input_signature(x: f32[?, 784], labels: i64[?])` (dtypes f32, f64, i32, i64, bool; `?` for an unknown dim)";
        let specs = self.parse_value(parser, expected)?;
        if specs.is_empty() {
            return Err(syn::Error::new_spanned(
                &self.value,
                format!("malformed `input_signature` option: expected at least one `arg: dtype[dims]`, as in {expected}"),
            ));
        }
        let mut out: Vec<Spec> = Vec::new();
        for SpecSyntax { arg, dtype, dims } in specs {
            let dtype = DTypeName::parse(&dtype)?;
            if out.iter().any(|s| s.arg == arg) {
                return Err(syn::Error::new_spanned(&arg, format!("input_signature names `{arg}` twice; give each argument one spec")));
            }
            out.push(Spec { arg, dtype, dims });
        }
        Ok(out)
    }
}

fn positive(option: &Ident, lit: &LitInt) -> syn::Result<usize> {
    match lit.base10_parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(syn::Error::new_spanned(lit, format!("`{option}` must be a positive integer"))),
    }
}

/// A spec as written; its dtype is checked after parsing, so the error names it.
struct SpecSyntax {
    arg: Ident,
    dtype: Ident,
    dims: Vec<Option<usize>>,
}

impl Parse for SpecSyntax {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let arg: Ident = input.parse()?;
        input.parse::<Token![:]>()?;
        let dtype: Ident = input.parse()?;
        let content;
        syn::bracketed!(content in input);
        let dims = Punctuated::<Dim, Token![,]>::parse_terminated(&content)?;
        Ok(SpecSyntax { arg, dtype, dims: dims.into_iter().map(|d| d.0).collect() })
    }
}

/// `?` (unknown) or a size.
struct Dim(Option<usize>);

impl Parse for Dim {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        match input.parse::<Option<Token![?]>>()? {
            Some(_) => Ok(Dim(None)),
            None => Ok(Dim(Some(input.parse::<LitInt>()?.base10_parse()?))),
        }
    }
}

/// A literal kind's name for messages.
pub trait LitName {
    const NAME: &'static str;
}
impl LitName for LitBool {
    const NAME: &'static str = "true|false";
}
impl LitName for LitInt {
    const NAME: &'static str = "integer";
}
impl LitName for LitStr {
    const NAME: &'static str = "\"string\"";
}

#[cfg(test)]
mod tests {
    use super::{parse, Policy};

    #[test]
    fn options_parse_into_their_values() {
        let opts = parse(quote::quote!(reduce_retracing, input_signature(x: f32[?, 784], y: bool[]), max_traces(3, error), optimize = false, cache_capacity = 8, name = "f")).unwrap();
        assert!(opts.reduce_retracing);
        let specs = opts.input_signature.unwrap();
        let dtypes: Vec<String> = specs.iter().map(|s| s.dtype.variant().to_string()).collect();
        assert_eq!(dtypes, ["F32", "Bool"]);
        assert_eq!(specs[0].dims, [None, Some(784)]);
        assert!(specs[1].dims.is_empty());
        assert!(matches!(opts.max_traces, Some((3, Policy::Error))));
        assert_eq!((opts.optimize, opts.cache_capacity, opts.name.as_deref()), (Some(false), Some(8), Some("f")));
    }
}
