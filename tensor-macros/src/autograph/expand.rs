//! The rewritten `if` and `while`: only `quote!`. The user's code appears once; the run-time
//! state machines (`IfState`, `WhileState` in `tensor_core::control::autograph`) decide
//! whether it runs as plain Rust or is traced into a `Cond`/`While` node.
//!
//! Carried variables are moved into a block that shadows them (`enter`), and moved back out
//! when it ends, so the user's code assigns the shadows and the graph path can read them.
//! The write-backs are allowed to be dead: the user's own code decides whether the variable
//! is read afterwards, as it would in plain Rust.

use super::scan::{Exit, Plan};
use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Block, Expr, ExprIf, ExprWhile, Ident};

/// The rewritten `if`.
pub fn expand_if(plan: &Plan, i: &ExprIf) -> TokenStream {
    if let Some(exit) = plan.exit {
        let (check, then) = (plain_check(exit, &i.cond), &i.then_branch);
        let other = i.else_branch.as_ref().map(|(token, e)| quote!(#token #e));
        return quote!(if #check #then #other);
    }
    let ag = autograph();
    let Carried { markers, names, leaves, enter, vars, write_back, graph_write_back } = Carried::new(plan, quote!(__tc_if));
    let condition = super::condition_arg(&i.cond);
    let branch = |which: &str, block: TokenStream| {
        let (run, leave) = (format_ident!("run_{which}"), format_ident!("leave_{which}"));
        quote! {
            if __tc_if.#run() {
                let (__tc_value, __tc_vars) = {
                    #enter
                    let __tc_value = #block;
                    let __tc_mv = #ag::Carry::of(&__tc_value);
                    let __tc_left = __tc_if.#leave(|| ::std::vec![(&__tc_mv).leaves(&__tc_value, "the value of the `if`"), #(#leaves),*]);
                    if let ::core::result::Result::Err(e) = __tc_left {
                        return #ag::fail(e);
                    }
                    (__tc_value, #vars)
                };
                #write_back
                ::core::option::Option::Some(__tc_value)
            } else {
                ::core::option::Option::None
            }
        }
    };
    let then = branch("then", quote_block(&i.then_branch));
    let other = branch("else", else_block(i));
    quote! {{
        #[allow(unused_imports)]
        use #ag::{CarryFallback as _, CarrySupported as _};
        #markers
        let mut __tc_if = match #ag::IfState::begin(#condition, &[#(#names),*], || ::std::vec![#(#leaves),*]) {
            ::core::result::Result::Ok(s) => s,
            ::core::result::Result::Err(e) => return #ag::fail(e),
        };
        let __tc_then = #then;
        let __tc_else = #other;
        let __tc_mv = #ag::Carry::of_some(&__tc_then);
        match __tc_if.finish() {
            ::core::result::Result::Ok(::core::option::Option::None) => #ag::taken(__tc_then, __tc_else),
            ::core::result::Result::Ok(::core::option::Option::Some(mut __tc_o)) => {
                let __tc_value = (&__tc_mv).rebuild(&mut __tc_o);
                #graph_write_back
                __tc_value
            }
            ::core::result::Result::Err(e) => return #ag::fail(e),
        }
    }}
}

/// The rewritten `while`.
pub fn expand_while(plan: &Plan, w: &ExprWhile) -> TokenStream {
    let (cond, body) = (&w.cond, &w.body);
    if let Some(exit) = plan.exit {
        let check = plain_check(exit, cond);
        return quote!(while #check #body);
    }
    let ag = autograph();
    let Carried { markers, names, leaves, enter, vars, write_back, graph_write_back } = Carried::new(plan, quote!(__tc_while));
    let condition = super::condition_arg(cond);
    let outputs = match plan.carried.is_empty() {
        true => quote!(_),
        false => quote!(mut __tc_o),
    };
    quote! {{
        #[allow(unused_imports)]
        use #ag::{CarryFallback as _, CarrySupported as _};
        #markers
        let mut __tc_while = #ag::WhileState::new();
        loop {
            let (__tc_step, __tc_vars) = {
                #enter
                let __tc_step = __tc_while.condition(#condition, &[#(#names),*], || ::std::vec![#(#leaves),*]);
                (__tc_step, #vars)
            };
            #write_back
            match __tc_step {
                ::core::result::Result::Ok(#ag::Step::Body) => {}
                ::core::result::Result::Ok(#ag::Step::Retry) => continue,
                ::core::result::Result::Ok(#ag::Step::Exit) => break,
                ::core::result::Result::Err(e) => return #ag::fail(e),
            }
            let (__tc_end, __tc_vars) = {
                #enter
                #body
                let __tc_end = __tc_while.leave_body(|| ::std::vec![#(#leaves),*]);
                (__tc_end, #vars)
            };
            #write_back
            match __tc_end {
                ::core::result::Result::Ok(::core::option::Option::None) => {}
                ::core::result::Result::Ok(::core::option::Option::Some(#outputs)) => {
                    #graph_write_back
                    break;
                }
                ::core::result::Result::Err(e) => return #ag::fail(e),
            }
        }
    }}
}

/// The pieces of the expansion that handle the carried variables.
struct Carried {
    /// `let __tc_m_x = Carry::of(&x);` for each: the variable's type, for method resolution.
    markers: TokenStream,
    /// "`x`", for messages.
    names: Vec<String>,
    /// `(&__tc_m_x).leaves(&x, "`x`")` for each.
    leaves: Vec<TokenStream>,
    /// Shadows the variables with what the state hands the code (nothing when none is carried).
    enter: TokenStream,
    /// `(x, y,)`: the shadows, moved out of the block.
    vars: TokenStream,
    /// Moves `__tc_vars` back into the variables.
    write_back: TokenStream,
    /// Assigns the node's outputs (`__tc_o`) to the variables.
    graph_write_back: TokenStream,
}

impl Carried {
    fn new(plan: &Plan, state: TokenStream) -> Carried {
        let ag = autograph();
        let vs = &plan.carried;
        let ms: Vec<Ident> = vs.iter().map(|v| format_ident!("__tc_m_{}", v)).collect();
        let names: Vec<String> = vs.iter().map(|v| format!("`{v}`")).collect();
        let leaves = vs.iter().zip(&ms).zip(&names).map(|((v, m), name)| quote!((&#m).leaves(&#v, #name))).collect();
        let markers = quote!(#(let #ms = #ag::Carry::of(&#vs);)*);
        let vars = quote!((#(#vs,)*));
        if vs.is_empty() {
            let write_back = quote!(let () = __tc_vars;);
            return Carried { markers, names, leaves, enter: quote!(), vars, write_back, graph_write_back: quote!() };
        }
        let enter = quote! {
            #[allow(unused_mut)]
            let (#(mut #vs,)*) = #state.enter((#(#vs,)*), |__tc_p| (#((&#ms).rebuild(__tc_p),)*));
        };
        let write_back = quote! {
            #[allow(unused_assignments)]
            let () = { (#(#vs,)*) = __tc_vars; };
        };
        let graph_write_back = quote! {
            #[allow(unused_assignments)]
            let () = { #(#vs = (&#ms).rebuild(&mut __tc_o);)* };
        };
        Carried { markers, names, leaves, enter, vars, write_back, graph_write_back }
    }
}

/// A branch's block as an expression, its braces re-spanned to the macro: the user's
/// `{ x * 2.0 }` is needed as a block here, so rustc must not suggest removing the braces.
fn quote_block(b: &Block) -> TokenStream {
    let stmts = &b.stmts;
    quote_spanned!(Span::call_site()=> { #(#stmts)* })
}

/// The else-branch as a block expression (`{}` when there is none; an `else if` as it was
/// rewritten).
fn else_block(i: &ExprIf) -> TokenStream {
    match i.else_branch.as_ref().map(|(_, e)| &**e) {
        None => quote!({}),
        Some(Expr::Block(b)) if b.attrs.is_empty() && b.label.is_none() => quote_block(&b.block),
        Some(other) => quote!({ #other }),
    }
}

fn autograph() -> TokenStream {
    quote!(::tensor_core::__private::autograph)
}

/// The condition of plain code that holds `exit`: it must be a `bool`, checked by a trait only
/// `bool` implements, spanned at the condition so the error points there.
fn plain_check(exit: Exit, cond: &Expr) -> TokenStream {
    let check = match exit {
        Exit::Break => "plain_for_break",
        Exit::Return => "plain_for_return",
        Exit::Place => "plain_for_place",
        Exit::Panic => "plain_for_panic",
    };
    let check = Ident::new(check, Span::call_site());
    let ag = autograph();
    quote_spanned!(cond.span()=> #ag::#check(#cond))
}
