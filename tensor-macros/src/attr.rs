//! Parses `#[graph_fn(...)]` options. Every problem is reported on the option's own tokens.

use proc_macro2::TokenStream;
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
    pub dtype: Ident,
    pub dims: Vec<Option<usize>>,
}

const DTYPES: [&str; 5] = ["f32", "f64", "i32", "i64", "bool"];
const OPTIONS: &str = "reduce_retracing, input_signature(x: f32[?, 784], ...), max_traces = N, max_traces(N, warn | error), optimize = bool, cache_capacity = N, name = \"...\"";

pub fn parse(tokens: TokenStream) -> syn::Result<Options> {
    let mut opts = Options::default();
    let items = Punctuated::<OptionItem, Token![,]>::parse_terminated.parse2(tokens)?;
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

    fn malformed(&self, expected: &str) -> syn::Error {
        let msg = format!("malformed `{}` option: expected {expected}", self.name);
        if self.value.is_empty() {
            syn::Error::new_spanned(&self.name, msg)
        } else {
            syn::Error::new_spanned(&self.value, msg)
        }
    }

    /// `= value`
    fn eq_value<T: Parse + LitName>(&self) -> syn::Result<T> {
        let parser = |input: ParseStream| {
            input.parse::<Token![=]>()?;
            let v: T = input.parse()?;
            if !input.is_empty() {
                return Err(input.error("unexpected tokens"));
            }
            Ok(v)
        };
        parser.parse2(self.value.clone()).map_err(|_| self.malformed(&format!("`{} = <{}>`", self.name, T::NAME)))
    }

    fn positive(&self) -> syn::Result<usize> {
        positive(&self.name, &self.eq_value::<LitInt>()?)
    }

    /// `= "a name"`, not empty.
    fn name_value(&self) -> syn::Result<String> {
        let lit = self.eq_value::<LitStr>()?;
        match lit.value() {
            v if v.trim().is_empty() => Err(syn::Error::new_spanned(lit, "`name` must not be empty")),
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
        let (n, policy) =
            parser.parse2(self.value.clone()).map_err(|_| self.malformed("`max_traces = N` or `max_traces(N, warn)` / `max_traces(N, error)`"))?;
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
            let specs = Punctuated::<SpecSyntax, Token![,]>::parse_terminated(&content)?;
            Ok(specs.into_iter().map(|s| s.0).collect::<Vec<_>>())
        };
        let specs = parser.parse2(self.value.clone()).map_err(|_| {
            self.malformed("`input_signature(x: f32[?, 784], labels: i64[?])` (dtypes f32, f64, i32, i64, bool; `?` for an unknown dim)")
        })?;
        for (i, spec) in specs.iter().enumerate() {
            if !DTYPES.contains(&spec.dtype.to_string().as_str()) {
                let msg = format!("unknown dtype `{}` in input_signature; expected one of {}", spec.dtype, DTYPES.join(", "));
                return Err(syn::Error::new_spanned(&spec.dtype, msg));
            }
            if specs[..i].iter().any(|s| s.arg == spec.arg) {
                return Err(syn::Error::new_spanned(&spec.arg, format!("input_signature names `{}` twice", spec.arg)));
            }
        }
        if specs.is_empty() {
            return Err(self.malformed("at least one `arg: dtype[dims]` inside `input_signature(...)`"));
        }
        Ok(specs)
    }
}

fn positive(option: &Ident, lit: &LitInt) -> syn::Result<usize> {
    match lit.base10_parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(syn::Error::new_spanned(lit, format!("`{option}` must be a positive integer"))),
    }
}

struct SpecSyntax(Spec);

impl Parse for SpecSyntax {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let arg: Ident = input.parse()?;
        input.parse::<Token![:]>()?;
        let dtype: Ident = input.parse()?;
        let content;
        syn::bracketed!(content in input);
        let mut dims = Vec::new();
        while !content.is_empty() {
            if content.parse::<Option<Token![?]>>()?.is_some() {
                dims.push(None);
            } else {
                dims.push(Some(content.parse::<LitInt>()?.base10_parse()?));
            }
            if content.parse::<Option<Token![,]>>()?.is_none() {
                break;
            }
        }
        if !content.is_empty() {
            return Err(content.error("expected `,` or `]`"));
        }
        Ok(SpecSyntax(Spec { arg, dtype, dims }))
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
