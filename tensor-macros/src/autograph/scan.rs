//! What the rewrite needs to know about the code an `if` or `while` controls, read from the
//! syntax alone: the first construct a graph node cannot carry, and the variables the code
//! assigns that were declared outside it.
//!
//! `?` is not such a construct: an error while a branch or body is traced is an error of the
//! trace (shapes, dtypes, a value read too early), which fails the call whichever branch runs,
//! as the operators' panics do; on the plain path `?` is plain Rust.

use syn::visit::Visit;
use syn::{BinOp, Block, Expr, ExprIf, ExprWhile, Ident};

/// A construct the graph cannot carry, found in the controlled code.
#[derive(Clone, Copy)]
pub enum Exit {
    /// `break` or `continue` leaving the code.
    Break,
    Return,
    /// An assignment to a field, index or dereference.
    Place,
    /// `panic!` and kin: tracing runs both branches, so it would always fire.
    Panic,
}

/// What the rewrite needs to know about the controlled code.
pub struct Plan {
    /// The first construct that keeps the code plain.
    pub exit: Option<Exit>,
    /// Variables assigned in the code and declared outside it, in order of first assignment.
    pub carried: Vec<Ident>,
}

impl Plan {
    /// Both branches of an `if` (an `else if` chain included).
    pub fn of_if(i: &ExprIf) -> Plan {
        let mut plan = Scan::of_block(&i.then_branch);
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

    /// The body of a `while` (its condition only reads).
    pub fn of_while(w: &ExprWhile) -> Plan {
        Scan::of_block(&w.body)
    }
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
    fn of_block(b: &Block) -> Plan {
        let mut scan = Scan::default();
        scan.visit_block(b);
        scan.plan()
    }

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
            // `(a, b) = f()` assigns each.
            Expr::Tuple(t) => t.elems.iter().for_each(|e| self.assign_target(e)),
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
