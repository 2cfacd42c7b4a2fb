//! `if` and `while` with tensor conditions in `#[graph_fn]` bodies, as TF's AutoGraph does
//! for Python: when traced, they become `Cond`/`While` nodes carrying the variables the code
//! assigns; with a `bool` condition they keep their plain Rust meaning.
//!
//! The macro cannot see types, so it rewrites every `if`/`while` whose condition *could* be a
//! tensor — a variable, a field, an index, a call or method call (`x.lt(&y)`, `self.mask()`),
//! any of them behind `&`, parentheses or `?` — into code that asks at run time. Conditions
//! that are certainly `bool` (`a < b`, `!done`, `a && b`, `if let`) are left alone. Code that a
//! graph node cannot carry (`break`, `continue`, `return`, an assignment to a field, or
//! `panic!` and kin, which tracing both branches would always fire) is kept plain too, and its
//! condition must then be a `bool`: a tensor there is a compile error that names the construct.
//! `?` is allowed: an error met while tracing fails the call.
//!
//! `scan` reads the controlled code, `expand` writes the replacement, in which the user's code
//! appears once (so nesting grows the expansion linearly). Not descended into: closures, async
//! blocks and nested items (they are other functions).

mod expand;
mod scan;

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use scan::Plan;
use syn::spanned::Spanned;
use syn::visit_mut::VisitMut;
use syn::{Block, Expr};

/// Rewrites the tensor-conditioned `if`s and `while`s of a function body.
pub fn rewrite(block: &mut Block) {
    Rewriter.visit_block_mut(block);
}

struct Rewriter;

impl VisitMut for Rewriter {
    fn visit_expr_mut(&mut self, e: &mut Expr) {
        match e {
            Expr::Closure(_) | Expr::Async(_) => {}
            Expr::If(i) if may_be_tensor(&i.cond) => {
                // Analyse the code as written, before the nested constructs are rewritten (their
                // expansion contains `return`s of its own).
                let plan = Plan::of_if(i);
                syn::visit_mut::visit_expr_if_mut(self, i);
                *e = Expr::Verbatim(expand::expand_if(&plan, i));
            }
            Expr::While(w) if w.label.is_none() && may_be_tensor(&w.cond) => {
                let plan = Plan::of_while(w);
                syn::visit_mut::visit_expr_while_mut(self, w);
                *e = Expr::Verbatim(expand::expand_while(&plan, w));
            }
            _ => syn::visit_mut::visit_expr_mut(self, e),
        }
    }

    fn visit_item_mut(&mut self, _: &mut syn::Item) {}
}

/// True unless the condition is certainly a `bool`: an operator (`<`, `&&`, `!`), a literal,
/// a block, a `let`, a macro.
fn may_be_tensor(cond: &Expr) -> bool {
    match cond {
        Expr::Path(p) => p.qself.is_none() && p.path.get_ident().is_some(),
        Expr::Field(_) | Expr::Index(_) | Expr::MethodCall(_) | Expr::Call(_) => true,
        Expr::Try(t) => may_be_tensor(&t.expr),
        Expr::Paren(p) => may_be_tensor(&p.expr),
        Expr::Reference(r) => r.mutability.is_none() && may_be_tensor(&r.expr),
        _ => false,
    }
}

/// The condition as the state machines take it: a place (variable, field, index) by
/// reference, so a tensor there is not moved; a computed value as it is. Spanned at the
/// condition, so a type that is no condition is reported there.
fn condition_arg(cond: &Expr) -> TokenStream {
    match cond {
        Expr::Path(_) | Expr::Field(_) | Expr::Index(_) => quote_spanned!(cond.span()=> &#cond),
        Expr::Paren(p) => condition_arg(&p.expr),
        _ => quote!(#cond),
    }
}

#[cfg(test)]
mod tests {
    use super::rewrite;
    use proc_macro2::{TokenStream, TokenTree};
    use quote::ToTokens;

    /// Tokens in a stream, counting into groups.
    fn size(tokens: TokenStream) -> usize {
        tokens
            .into_iter()
            .map(|tt| match tt {
                TokenTree::Group(g) => 1 + size(g.stream()),
                _ => 1,
            })
            .sum()
    }

    /// How often the identifier `name` occurs.
    fn occurrences(tokens: TokenStream, name: &str) -> usize {
        tokens
            .into_iter()
            .map(|tt| match tt {
                TokenTree::Group(g) => occurrences(g.stream(), name),
                TokenTree::Ident(i) => usize::from(i == name),
                _ => 0,
            })
            .sum()
    }

    /// Wraps level `k`'s code around the code of the levels inside it.
    type Nest = fn(usize, String) -> String;

    /// The rewritten body of a function whose `if`s or `while`s nest `depth` deep. Each level's
    /// own code calls `level_k`, so its copies can be counted.
    fn rewritten(depth: usize, nest: Nest) -> TokenStream {
        let mut code = "x = level_0(&x);".to_string();
        for k in 1..=depth {
            code = nest(k, code);
        }
        let mut block: syn::Block = syn::parse_str(&format!("{{ let mut x = x.clone(); let mut n = n.clone(); {code} x }}")).unwrap();
        rewrite(&mut block);
        block.into_token_stream()
    }

    fn nested_if(k: usize, inner: String) -> String {
        format!("if x.sum().gt(0.0) {{ x = level_{k}(&x); {inner} }} else if n.lt(3) {{ n = &n + 1; }} else {{ x = &x * -1.0; }}")
    }

    fn nested_while(k: usize, inner: String) -> String {
        format!("while n.lt({k}) {{ n = &n + 1; x = level_{k}(&x); {inner} }}")
    }

    fn mixed(k: usize, inner: String) -> String {
        match k % 2 {
            0 => nested_if(k, inner),
            _ => nested_while(k, inner),
        }
    }

    /// Each level adds the same number of tokens (the expansion is linear in the depth, where
    /// emitting a branch's code once per mode would double it at every level), and each
    /// level's code appears exactly once.
    #[test]
    fn nesting_grows_the_expansion_linearly_and_keeps_one_copy_of_the_code() {
        // (how to nest, after how many levels the growth repeats: alternating constructs
        // repeat every two)
        let cases: [(Nest, usize); 3] = [(nested_if, 1), (nested_while, 1), (mixed, 2)];
        for (nest, period) in cases {
            let sizes: Vec<usize> = (1..=6).map(|d| size(rewritten(d, nest))).collect();
            let steps: Vec<usize> = sizes.windows(2).map(|w| w[1] - w[0]).collect();
            assert!(steps.iter().skip(period).zip(&steps).all(|(a, b)| a == b), "token counts for depths 1..=6: {sizes:?}");
            let deepest = rewritten(6, nest);
            for k in 0..=6 {
                assert_eq!(occurrences(deepest.clone(), &format!("level_{k}")), 1, "level {k}'s code in:\n{deepest}");
            }
        }
    }

    /// A condition that is certainly a `bool` is left as written.
    #[test]
    fn bool_conditions_are_not_rewritten() {
        for cond in ["a < b", "!done", "a && b.is_ok()", "let Some(v) = opt", "true", "matches!(x, 1)"] {
            let code = format!("{{ if {cond} {{ x = 1; }} while {cond} {{ x = 2; }} }}");
            let mut block: syn::Block = syn::parse_str(&code).unwrap();
            let before = block.to_token_stream().to_string();
            rewrite(&mut block);
            assert_eq!(block.to_token_stream().to_string(), before, "{cond}");
        }
    }

    /// Conditions that may be tensors are rewritten: places, calls, `?`, references.
    #[test]
    fn conditions_that_may_be_tensors_are_rewritten() {
        for cond in ["flag", "self.flag", "flags[0]", "x.lt(&y)", "x.lt(&y)?", "self.mask()", "is_small(&x)", "(flag)", "&flag"] {
            let code = format!("{{ if {cond} {{ x = 1; }} }}");
            let mut block: syn::Block = syn::parse_str(&code).unwrap();
            rewrite(&mut block);
            assert!(block.to_token_stream().to_string().contains("IfState"), "{cond}");
        }
    }
}
