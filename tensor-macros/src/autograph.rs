//! `if` and `while` with tensor conditions in `#[graph_fn]` bodies, as TF's AutoGraph does
//! for Python: when traced, they become `Cond`/`While` nodes carrying the variables the code
//! assigns; with a `bool` condition they keep their plain Rust meaning.
//!
//! The macro cannot see types, so it rewrites every `if`/`while` whose condition *could* be a
//! tensor — a variable, a field, or a call of a comparison method (`x.lt(&y)`) — into code that
//! asks at run time (`autograph::branching`) and keeps the user's code, unchanged, on the plain
//! path. Conditions that are certainly `bool` (`a < b`, `!done`, `x.is_empty()`, `if let`) are
//! left alone. Code that a graph node cannot carry (`break`, `continue`, `return`, `?`, an
//! assignment to a field, or `panic!` and kin, which tracing both branches would always fire) is kept plain too, and its condition must then be a `bool`: a tensor
//! there is a compile error that names the construct.
//!
//! Not descended into: closures, async blocks and nested items (they are other functions).

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::visit::Visit;
use syn::visit_mut::VisitMut;
use syn::{BinOp, Block, Expr, ExprIf, ExprWhile, Ident, Pat};

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
                *e = syn::parse2(plan.expand_if(i)).expect("the if rewrite is an expression");
            }
            Expr::While(w) if w.label.is_none() && may_be_tensor(&w.cond) => {
                let plan = Plan::of_while(w);
                syn::visit_mut::visit_expr_while_mut(self, w);
                *e = syn::parse2(plan.expand_while(w)).expect("the while rewrite is an expression");
            }
            _ => syn::visit_mut::visit_expr_mut(self, e),
        }
    }

    fn visit_item_mut(&mut self, _: &mut syn::Item) {}
}

/// Method names of tensor predicates (methods that return a bool `Tensor`).
const TENSOR_PREDICATES: &[&str] = &["lt", "le", "gt", "ge", "eq", "ne", "logical_not", "logical_and", "logical_or", "any", "all"];

/// True unless the condition is certainly a `bool` (or not something we can carry).
fn may_be_tensor(cond: &Expr) -> bool {
    match cond {
        Expr::Path(p) => p.qself.is_none() && p.path.get_ident().is_some(),
        Expr::Field(_) => true,
        Expr::MethodCall(m) => TENSOR_PREDICATES.contains(&m.method.to_string().as_str()) && !contains_try(cond),
        Expr::Paren(p) => may_be_tensor(&p.expr),
        Expr::Reference(r) => r.mutability.is_none() && may_be_tensor(&r.expr),
        _ => false,
    }
}

fn contains_try(e: &Expr) -> bool {
    struct Finder(bool);
    impl<'a> Visit<'a> for Finder {
        fn visit_expr_try(&mut self, _: &'a syn::ExprTry) {
            self.0 = true;
        }
    }
    let mut f = Finder(false);
    f.visit_expr(e);
    f.0
}

/// A construct the graph cannot carry, found in the controlled code.
#[derive(Clone, Copy)]
enum Exit {
    Break,
    Return,
    Try,
    Place,
    /// `panic!` and kin: tracing runs both branches, so it would always fire.
    Panic,
}

/// What the rewrite needs to know about the controlled code.
struct Plan {
    /// The first construct that keeps the code plain.
    exit: Option<Exit>,
    /// Variables assigned in the code and declared outside it, in order of first assignment.
    carried: Vec<Ident>,
}

impl Plan {
    fn of_if(i: &ExprIf) -> Plan {
        let mut scan = Scan::default();
        scan.visit_block(&i.then_branch);
        let mut plan = scan.plan();
        if let Some((_, other)) = &i.else_branch {
            let mut scan = Scan::default();
            scan.visit_expr(other);
            let other = scan.plan();
            plan.exit = plan.exit.or(other.exit);
            for v in other.carried {
                if !plan.carried.contains(&v) {
                    plan.carried.push(v);
                }
            }
        }
        plan
    }

    fn of_while(w: &ExprWhile) -> Plan {
        let mut scan = Scan::default();
        scan.visit_block(&w.body);
        scan.plan()
    }

    fn expand_if(&self, i: &ExprIf) -> TokenStream {
        let (cond, then) = (&i.cond, &i.then_branch);
        let other = match &i.else_branch {
            Some((_, e)) => quote!({ #e }),
            None => quote!({}),
        };
        if let Some(exit) = self.exit {
            let check = plain_check(exit, cond);
            return quote!(if #check #then else #other);
        }
        let ag = autograph();
        let condition = condition_arg(cond);
        let markers = self.markers();
        let names = self.names();
        let leaves = self.leaves();
        let rebind = self.rebind(quote!(__tc_v));
        let write_back = self.write_back();
        quote! {{
            #[allow(unused_imports)]
            use #ag::{CarryFallback as _, CarrySupported as _};
            match #ag::branching(#condition, "if") {
                ::core::result::Result::Ok(#ag::Branching::Plain(true)) => #then,
                ::core::result::Result::Ok(#ag::Branching::Plain(false)) => #other,
                ::core::result::Result::Ok(#ag::Branching::Graph(__tc_pred)) => {
                    #markers
                    let mut __tc_if = match #ag::GraphIf::begin(__tc_pred, &[#(#names),*], ::std::vec![#(#leaves),*]) {
                        ::core::result::Result::Ok(g) => g,
                        ::core::result::Result::Err(e) => return #ag::fail(e),
                    };
                    let (__tc_out, __tc_mv) = {
                        let mut __tc_v = __tc_if.vars();
                        #rebind
                        let __tc_value = #then;
                        let __tc_mv = #ag::Carry::of(&__tc_value);
                        (::std::vec![(&__tc_mv).leaves(&__tc_value, "the value of the `if`"), #(#leaves),*], __tc_mv)
                    };
                    if let ::core::result::Result::Err(e) = __tc_if.then_done(__tc_out) {
                        return #ag::fail(e);
                    }
                    let __tc_out = {
                        let mut __tc_v = __tc_if.vars();
                        #rebind
                        let __tc_value = #other;
                        ::std::vec![(&__tc_mv).leaves(&__tc_value, "the value of the `if`"), #(#leaves),*]
                    };
                    match __tc_if.finish(__tc_out) {
                        ::core::result::Result::Ok(__tc_o) => {
                            let mut __tc_o = __tc_o.into_iter();
                            let __tc_value = (&__tc_mv).rebuild(&mut __tc_o);
                            #write_back
                            __tc_value
                        }
                        ::core::result::Result::Err(e) => return #ag::fail(e),
                    }
                }
                ::core::result::Result::Err(e) => return #ag::fail(e),
            }
        }}
    }

    fn expand_while(&self, w: &ExprWhile) -> TokenStream {
        let (cond, body) = (&w.cond, &w.body);
        if let Some(exit) = self.exit {
            let check = plain_check(exit, cond);
            return quote!(while #check #body);
        }
        let ag = autograph();
        let condition = condition_arg(cond);
        let cond_value = condition_arg(cond);
        let markers = self.markers();
        let names = self.names();
        let leaves = self.leaves();
        let rebind = self.rebind(quote!(__tc_p));
        let write_back = self.write_back();
        quote! {{
            #[allow(unused_imports)]
            use #ag::{CarryFallback as _, CarrySupported as _};
            loop {
                match #ag::branching(#condition, "while") {
                    ::core::result::Result::Ok(#ag::Branching::Plain(true)) => #body,
                    ::core::result::Result::Ok(#ag::Branching::Plain(false)) => break,
                    ::core::result::Result::Ok(#ag::Branching::Graph(_)) => {
                        #markers
                        let mut __tc_loop = match #ag::GraphLoop::begin(&[#(#names),*], ::std::vec![#(#leaves),*]) {
                            ::core::result::Result::Ok(l) => l,
                            ::core::result::Result::Err(e) => return #ag::fail(e),
                        };
                        {
                            let mut __tc_p = __tc_loop.params();
                            #rebind
                            let __tc_c = #cond_value;
                            if let ::core::result::Result::Err(e) = __tc_loop.cond_done(__tc_c) {
                                return #ag::fail(e);
                            }
                        }
                        let __tc_out = {
                            let mut __tc_p = __tc_loop.params();
                            #rebind
                            #body
                            ::std::vec![#(#leaves),*]
                        };
                        match __tc_loop.finish(__tc_out) {
                            ::core::result::Result::Ok(__tc_o) => {
                                let mut __tc_o = __tc_o.into_iter();
                                #write_back
                            }
                            ::core::result::Result::Err(e) => return #ag::fail(e),
                        }
                        break;
                    }
                    ::core::result::Result::Err(e) => return #ag::fail(e),
                }
            }
        }}
    }

    fn marker(v: &Ident) -> Ident {
        format_ident!("__tc_m_{}", v)
    }

    /// `let __tc_m_x = Carry::of(&x);` for each carried variable.
    fn markers(&self) -> TokenStream {
        let ag = autograph();
        let lets = self.carried.iter().map(|v| {
            let m = Self::marker(v);
            quote!(let #m = #ag::Carry::of(&#v);)
        });
        quote!(#(#lets)*)
    }

    fn names(&self) -> Vec<String> {
        self.carried.iter().map(|v| format!("`{v}`")).collect()
    }

    /// `(&__tc_m_x).leaves(&x, "`x`")` for each carried variable.
    fn leaves(&self) -> Vec<TokenStream> {
        self.carried
            .iter()
            .map(|v| {
                let (m, name) = (Self::marker(v), format!("`{v}`"));
                quote!((&#m).leaves(&#v, #name))
            })
            .collect()
    }

    /// Shadows each carried variable with its value from `source`, so the code assigns the
    /// shadow and the subgraph's outputs can be read from it.
    fn rebind(&self, source: TokenStream) -> TokenStream {
        let lets = self.carried.iter().map(|v| {
            let m = Self::marker(v);
            quote! {
                #[allow(unused_mut, unused_variables)]
                let mut #v = (&#m).rebuild(&mut #source);
            }
        });
        quote!(#(#lets)*)
    }

    /// Assigns the node's outputs back to the carried variables.
    fn write_back(&self) -> TokenStream {
        let sets = self.carried.iter().map(|v| {
            let m = Self::marker(v);
            quote!(#v = (&#m).rebuild(&mut __tc_o);)
        });
        quote!(#(#sets)*)
    }
}

fn autograph() -> TokenStream {
    quote!(::tensor_core::__private::autograph)
}

/// The condition as `branching` takes it: a place (variable or field) by reference, so a
/// tensor there is not moved; a computed value as it is.
fn condition_arg(cond: &Expr) -> TokenStream {
    match cond {
        Expr::Path(_) | Expr::Field(_) => quote!(&#cond),
        Expr::Paren(p) => condition_arg(&p.expr),
        _ => quote!(#cond),
    }
}

/// The condition of plain code that holds `exit`: it must be a `bool`, checked by a trait only
/// `bool` implements, spanned at the condition so the error points there.
fn plain_check(exit: Exit, cond: &Expr) -> TokenStream {
    let check = match exit {
        Exit::Break => "plain_for_break",
        Exit::Return => "plain_for_return",
        Exit::Try => "plain_for_try",
        Exit::Place => "plain_for_place",
        Exit::Panic => "plain_for_panic",
    };
    let check = Ident::new(check, Span::call_site());
    let ag = autograph();
    quote_spanned!(cond.span()=> #ag::#check(#cond))
}

/// Walks controlled code: finds exits, assigned variables and the variables declared inside.
#[derive(Default)]
struct Scan {
    exit: Option<Exit>,
    assigned: Vec<Ident>,
    declared: Vec<Ident>,
    /// Loops entered inside the code (an unlabelled `break` there stays inside).
    loop_depth: usize,
}

impl Scan {
    fn plan(self) -> Plan {
        let declared = self.declared;
        let carried = self.assigned.into_iter().filter(|v| !declared.contains(v)).collect();
        Plan { exit: self.exit, carried }
    }

    fn found(&mut self, exit: Exit) {
        self.exit.get_or_insert(exit);
    }

    fn assign_target(&mut self, left: &Expr) {
        match left {
            Expr::Path(p) if p.qself.is_none() => match p.path.get_ident() {
                Some(v) if !self.assigned.contains(v) => self.assigned.push(v.clone()),
                Some(_) => {}
                None => self.found(Exit::Place),
            },
            Expr::Paren(p) => self.assign_target(&p.expr),
            // `_ = f()` discards a value: nothing to carry.
            Expr::Infer(_) => {}
            _ => self.found(Exit::Place),
        }
    }

    fn in_loop(&mut self, f: impl FnOnce(&mut Self)) {
        self.loop_depth += 1;
        f(self);
        self.loop_depth -= 1;
    }
}

impl<'a> Visit<'a> for Scan {
    fn visit_expr_closure(&mut self, _: &'a syn::ExprClosure) {}
    fn visit_expr_async(&mut self, _: &'a syn::ExprAsync) {}
    fn visit_item(&mut self, _: &'a syn::Item) {}

    fn visit_macro(&mut self, m: &'a syn::Macro) {
        let name = m.path.segments.last().map(|s| s.ident.to_string());
        if matches!(name.as_deref(), Some("panic" | "unreachable" | "todo" | "unimplemented")) {
            self.found(Exit::Panic);
        }
    }
    fn visit_expr_return(&mut self, _: &'a syn::ExprReturn) {
        self.found(Exit::Return);
    }
    fn visit_expr_try(&mut self, e: &'a syn::ExprTry) {
        self.found(Exit::Try);
        syn::visit::visit_expr_try(self, e);
    }
    fn visit_expr_break(&mut self, e: &'a syn::ExprBreak) {
        if self.loop_depth == 0 || e.label.is_some() {
            self.found(Exit::Break);
        }
        syn::visit::visit_expr_break(self, e);
    }
    fn visit_expr_continue(&mut self, e: &'a syn::ExprContinue) {
        if self.loop_depth == 0 || e.label.is_some() {
            self.found(Exit::Break);
        }
    }
    fn visit_expr_while(&mut self, e: &'a syn::ExprWhile) {
        self.visit_expr(&e.cond);
        self.in_loop(|s| s.visit_block(&e.body));
    }
    fn visit_expr_loop(&mut self, e: &'a syn::ExprLoop) {
        self.in_loop(|s| s.visit_block(&e.body));
    }
    fn visit_expr_for_loop(&mut self, e: &'a syn::ExprForLoop) {
        self.visit_pat(&e.pat);
        self.visit_expr(&e.expr);
        self.in_loop(|s| s.visit_block(&e.body));
    }

    fn visit_expr_assign(&mut self, e: &'a syn::ExprAssign) {
        self.assign_target(&e.left);
        self.visit_expr(&e.right);
    }
    fn visit_expr_binary(&mut self, e: &'a syn::ExprBinary) {
        if is_compound_assign(&e.op) {
            self.assign_target(&e.left);
            self.visit_expr(&e.right);
        } else {
            syn::visit::visit_expr_binary(self, e);
        }
    }

    fn visit_pat_ident(&mut self, p: &'a syn::PatIdent) {
        self.declared.push(p.ident.clone());
        syn::visit::visit_pat_ident(self, p);
    }
    fn visit_pat(&mut self, p: &'a Pat) {
        syn::visit::visit_pat(self, p);
    }
}

fn is_compound_assign(op: &BinOp) -> bool {
    matches!(
        op,
        BinOp::AddAssign(_)
            | BinOp::SubAssign(_)
            | BinOp::MulAssign(_)
            | BinOp::DivAssign(_)
            | BinOp::RemAssign(_)
            | BinOp::BitXorAssign(_)
            | BinOp::BitAndAssign(_)
            | BinOp::BitOrAssign(_)
            | BinOp::ShlAssign(_)
            | BinOp::ShrAssign(_)
    )
}
