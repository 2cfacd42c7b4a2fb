//! Symbolic dim expressions and the guards a trace records on them: what a later call's
//! input dims must satisfy for the trace to serve it.

use serde::{Deserialize, Serialize};
use std::fmt;

/// An operand of an expression: a constant, or expression `id` of the trace's table.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub(crate) enum Term {
    Const(usize),
    Sym(u32),
}

/// Arithmetic on dims.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub(crate) enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
}

impl BinOp {
    /// `a op b`, `None` where `usize` arithmetic would fail (overflow, underflow, division by 0).
    pub(crate) fn apply(self, a: usize, b: usize) -> Option<usize> {
        match self {
            BinOp::Add => a.checked_add(b),
            BinOp::Sub => a.checked_sub(b),
            BinOp::Mul => a.checked_mul(b),
            BinOp::Div => a.checked_div(b),
            BinOp::Rem => a.checked_rem(b),
        }
    }

    fn symbol(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Rem => "%",
        }
    }
}

/// A comparison of dims.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub(crate) enum Cmp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Cmp {
    pub(crate) fn holds(self, a: usize, b: usize) -> bool {
        match self {
            Cmp::Eq => a == b,
            Cmp::Ne => a != b,
            Cmp::Lt => a < b,
            Cmp::Le => a <= b,
            Cmp::Gt => a > b,
            Cmp::Ge => a >= b,
        }
    }

    /// The comparison that holds where `self` does not.
    pub(crate) fn negated(self) -> Cmp {
        match self {
            Cmp::Eq => Cmp::Ne,
            Cmp::Ne => Cmp::Eq,
            Cmp::Lt => Cmp::Ge,
            Cmp::Le => Cmp::Gt,
            Cmp::Gt => Cmp::Le,
            Cmp::Ge => Cmp::Lt,
        }
    }

    fn symbol(self) -> &'static str {
        match self {
            Cmp::Eq => "==",
            Cmp::Ne => "!=",
            Cmp::Lt => "<",
            Cmp::Le => "<=",
            Cmp::Gt => ">",
            Cmp::Ge => ">=",
        }
    }
}

/// One expression of a trace's table: an input dim (a symbol, `n0`, `n1`, … in order of
/// appearance), or arithmetic on terms.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub(crate) enum Expr {
    /// Dim `axis` of argument leaf `leaf`; `index` is its symbol's number (`n{index}`).
    Input {
        leaf: u32,
        axis: u32,
        index: u32,
    },
    Bin(BinOp, Term, Term),
}

/// A condition a trace was traced under: `lhs cmp rhs` held for the traced call.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub(crate) struct Guard {
    pub(crate) lhs: Term,
    pub(crate) cmp: Cmp,
    pub(crate) rhs: Term,
}

/// A trace's symbolic dims and guards: a later call reuses the trace only when every guard
/// holds on its input dims.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Guards {
    pub(crate) exprs: Vec<Expr>,
    pub(crate) guards: Vec<Guard>,
}

impl Guards {
    /// True when there is nothing to check.
    pub(crate) fn is_empty(&self) -> bool {
        self.guards.is_empty()
    }

    /// Checks a table read from a file: every term names an earlier expression, every
    /// input a slot below `slots`.
    pub(crate) fn check(&self, slots: usize) -> Result<(), String> {
        let term_ok = |t: Term, before: usize| matches!(t, Term::Const(_)) || matches!(t, Term::Sym(id) if (id as usize) < before);
        for (k, e) in self.exprs.iter().enumerate() {
            let ok = match *e {
                Expr::Input { leaf, .. } => (leaf as usize) < slots,
                Expr::Bin(_, a, b) => term_ok(a, k) && term_ok(b, k),
            };
            if !ok {
                return Err(format!("symbolic dim expression {k} is malformed"));
            }
        }
        match self.guards.iter().all(|g| term_ok(g.lhs, self.exprs.len()) && term_ok(g.rhs, self.exprs.len())) {
            true => Ok(()),
            false => Err("a guard names no expression".to_string()),
        }
    }

    /// The value of `t` for a call whose input dims `dim(leaf, axis)` gives.
    fn eval(&self, t: Term, dim: &dyn Fn(usize, usize) -> Option<usize>) -> Option<usize> {
        match t {
            Term::Const(c) => Some(c),
            Term::Sym(id) => match self.exprs[id as usize] {
                Expr::Input { leaf, axis, .. } => dim(leaf as usize, axis as usize),
                Expr::Bin(op, a, b) => op.apply(self.eval(a, dim)?, self.eval(b, dim)?),
            },
        }
    }

    /// The index of the first guard that fails for a call whose input dims `dim` gives.
    pub(crate) fn first_failing(&self, dim: &dyn Fn(usize, usize) -> Option<usize>) -> Option<usize> {
        self.guards.iter().position(|g| match (self.eval(g.lhs, dim), self.eval(g.rhs, dim)) {
            (Some(a), Some(b)) => !g.cmp.holds(a, b),
            _ => true,
        })
    }

    /// The guards as text (`n0 < 10`), in the order they were recorded.
    pub(crate) fn texts(&self) -> Vec<String> {
        self.guards.iter().map(|g| self.guard_text(g)).collect()
    }

    fn guard_text(&self, g: &Guard) -> String {
        format!("{} {} {}", self.term_text(g.lhs, false), g.cmp.symbol(), self.term_text(g.rhs, false))
    }

    /// `t` as text; nested arithmetic in parentheses.
    pub(crate) fn term_text(&self, t: Term, nested: bool) -> String {
        match t {
            Term::Const(c) => c.to_string(),
            Term::Sym(id) => match self.exprs[id as usize] {
                Expr::Input { index, .. } => format!("n{index}"),
                Expr::Bin(op, a, b) => {
                    let s = format!("{} {} {}", self.term_text(a, true), op.symbol(), self.term_text(b, true));
                    if nested {
                        format!("({s})")
                    } else {
                        s
                    }
                }
            },
        }
    }

    /// The input dims guard `i` reads, as (leaf, axis, symbol number), once each.
    fn inputs_of(&self, t: Term, out: &mut Vec<(u32, u32, u32)>) {
        if let Term::Sym(id) = t {
            match self.exprs[id as usize] {
                Expr::Input { leaf, axis, index } => {
                    if !out.contains(&(leaf, axis, index)) {
                        out.push((leaf, axis, index));
                    }
                }
                Expr::Bin(_, a, b) => {
                    self.inputs_of(a, out);
                    self.inputs_of(b, out);
                }
            }
        }
    }

    /// Why guard `i` fails for a call: `arg x dim 0 = 12 fails n0 < 10`.
    pub(crate) fn failure(&self, i: usize, leaf_names: &[String], dim: &dyn Fn(usize, usize) -> Option<usize>) -> String {
        let g = &self.guards[i];
        let mut inputs = Vec::new();
        self.inputs_of(g.lhs, &mut inputs);
        self.inputs_of(g.rhs, &mut inputs);
        let values: Vec<String> = inputs
            .iter()
            .map(|&(leaf, axis, _)| {
                let name = leaf_names.get(leaf as usize).map(String::as_str).unwrap_or("?");
                let value = dim(leaf as usize, axis as usize).map_or("none".to_string(), |d| d.to_string());
                format!("arg {name} dim {axis} = {value}")
            })
            .collect();
        format!("{} fails {}", values.join(", "), self.guard_text(g))
    }

    /// The symbols as `n0 = x dim 0`, for introspection.
    pub(crate) fn symbol_texts(&self, leaf_names: &[String]) -> Vec<String> {
        self.exprs
            .iter()
            .filter_map(|e| match *e {
                Expr::Input { leaf, axis, index } => {
                    Some(format!("n{index} = {} dim {axis}", leaf_names.get(leaf as usize).map(String::as_str).unwrap_or("?")))
                }
                Expr::Bin(..) => None,
            })
            .collect()
    }
}

impl fmt::Display for Guards {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.texts().join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guards_evaluate_and_explain_on_input_dims() {
        let exprs = vec![Expr::Input { leaf: 0, axis: 0, index: 0 }, Expr::Bin(BinOp::Mul, Term::Sym(0), Term::Const(2))];
        let guards =
            vec![Guard { lhs: Term::Sym(0), cmp: Cmp::Lt, rhs: Term::Const(10) }, Guard { lhs: Term::Sym(1), cmp: Cmp::Ne, rhs: Term::Const(8) }];
        let g = Guards { exprs, guards };
        assert_eq!(g.texts(), ["n0 < 10", "n0 * 2 != 8"]);
        assert_eq!(g.first_failing(&|_, _| Some(3)), None);
        assert_eq!(g.first_failing(&|_, _| Some(4)), Some(1));
        assert_eq!(g.first_failing(&|_, _| Some(12)), Some(0));
        assert_eq!(g.failure(0, &["x".to_string()], &|_, _| Some(12)), "arg x dim 0 = 12 fails n0 < 10");
    }
}
