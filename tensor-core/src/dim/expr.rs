//! A symbolic dim as a graph holds it: an expression over the call's input dims that stands
//! on its own (no symbol table needed), so the graph can evaluate it at every call.

use super::guard::{Expr, Guards, Term};
use smallvec::SmallVec;
use std::fmt;
use std::sync::Arc;

/// A dim computed at run time from the call's argument dims (`n0 * 2`): what a shape
/// attribute of a graph op holds when a relaxed trace built it from symbolic [`Dim`](super::Dim)s.
///
/// ```
/// use tensor_core::prelude::*;
/// #[graph_fn(reduce_retracing)]
/// fn pairs(x: &Tensor) -> Result<Tensor> {
///     let n = x.dim(0);
///     x.reshape([n / 2, Dim::from(2)])
/// }
/// pairs(&Tensor::ones(&[4], DType::F32))?;
/// assert_eq!(pairs(&Tensor::ones(&[6], DType::F32))?.dims(), vec![3, 2]);
/// assert_eq!(pairs(&Tensor::ones(&[8], DType::F32))?.dims(), vec![4, 2]);
/// let f = tensor_core::function::lookup("pairs").unwrap();
/// assert_eq!(f.trace_count(), 2); // [4] exactly, then one trace for every length
/// assert!(f.concrete_functions()[1].to_text().contains("reshape[shape=[n0 / 2, 2]]"));
/// # Ok::<(), tensor_core::Error>(())
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct SymDim(Arc<[Expr]>);

impl SymDim {
    /// The expressions `root` is built from, renumbered to stand alone (each term names an
    /// earlier entry; the last entry is the value).
    pub(crate) fn extract(exprs: &[Expr], root: u32) -> SymDim {
        let root = root as usize;
        let mut keep = vec![false; root + 1];
        keep[root] = true;
        for i in (0..=root).rev() {
            if let (true, Expr::Bin(_, a, b)) = (keep[i], exprs[i]) {
                for t in [a, b] {
                    if let Term::Sym(j) = t {
                        keep[j as usize] = true;
                    }
                }
            }
        }
        let mut renumbered = vec![0u32; root + 1];
        let mut out = Vec::new();
        for i in (0..=root).filter(|&i| keep[i]) {
            let term = |t: Term| match t {
                Term::Sym(j) => Term::Sym(renumbered[j as usize]),
                c => c,
            };
            let e = match exprs[i] {
                Expr::Bin(op, a, b) => Expr::Bin(op, term(a), term(b)),
                input => input,
            };
            renumbered[i] = out.len() as u32;
            out.push(e);
        }
        SymDim(out.into())
    }

    /// The value for a call whose argument dims `dim(slot, axis)` gives; `None` when an input
    /// dim is missing or the arithmetic fails (an underflow, a division by 0).
    pub(crate) fn eval(&self, dim: &dyn Fn(usize, usize) -> Option<usize>) -> Option<usize> {
        let mut values: SmallVec<[usize; 8]> = SmallVec::new();
        for e in self.0.iter() {
            let value = match *e {
                Expr::Input { leaf, axis, .. } => dim(leaf as usize, axis as usize)?,
                Expr::Bin(op, a, b) => {
                    let term = |t: Term| match t {
                        Term::Const(c) => c,
                        Term::Sym(j) => values[j as usize],
                    };
                    op.apply(term(a), term(b))?
                }
            };
            values.push(value);
        }
        values.last().copied()
    }

    /// The steps, each naming earlier ones; the last is the value.
    pub(crate) fn exprs(&self) -> &[Expr] {
        &self.0
    }

    /// Steps read back from a graph file: an `Err` unless there is at least one and each
    /// names only earlier steps (so evaluating them cannot index past what it has computed).
    pub(crate) fn from_exprs(exprs: Vec<Expr>) -> Result<SymDim, String> {
        let earlier = |t: Term, i: usize| !matches!(t, Term::Sym(j) if j as usize >= i);
        let bad = exprs.iter().enumerate().find(|(i, e)| matches!(e, Expr::Bin(_, a, b) if !earlier(*a, *i) || !earlier(*b, *i)));
        match (exprs.is_empty(), bad) {
            (true, _) => Err("a symbolic size has no steps".into()),
            (_, Some((i, _))) => Err(format!("step {i} of a symbolic size names a step that is not before it")),
            _ => Ok(SymDim(exprs.into())),
        }
    }
}

impl fmt::Display for SymDim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let table = Guards { exprs: self.0.to_vec(), guards: Vec::new() };
        f.write_str(&table.term_text(Term::Sym(self.0.len() as u32 - 1), false))
    }
}

impl fmt::Debug for SymDim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::super::guard::BinOp;
    use super::*;

    #[test]
    fn an_extracted_expression_evaluates_and_prints_on_its_own() {
        // n0, n1, n0 * 2 (unused below), n1 - 1, (n1 - 1) + n0
        let exprs = [
            Expr::Input { leaf: 0, axis: 0, index: 0 },
            Expr::Input { leaf: 1, axis: 1, index: 1 },
            Expr::Bin(BinOp::Mul, Term::Sym(0), Term::Const(2)),
            Expr::Bin(BinOp::Sub, Term::Sym(1), Term::Const(1)),
            Expr::Bin(BinOp::Add, Term::Sym(3), Term::Sym(0)),
        ];
        let d = SymDim::extract(&exprs, 4);
        assert_eq!(d.exprs().len(), 4, "n0 * 2 is left out");
        assert_eq!(d.to_string(), "(n1 - 1) + n0");
        let dims = |slot: usize, axis: usize| match (slot, axis) {
            (0, 0) => Some(5),
            (1, 1) => Some(7),
            _ => None,
        };
        assert_eq!(d.eval(&dims), Some(11));
        assert_eq!(d.eval(&|_, _| Some(0)), None, "0 - 1 underflows");
        assert_eq!(SymDim::extract(&exprs, 2).eval(&dims), Some(10));
    }
}
