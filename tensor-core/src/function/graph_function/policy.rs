//! The retracing policy of the options: what a call is keyed by under a fixed
//! `input_signature`, the shapes a trace uses (the call's, the fixed ones, or relaxed ones
//! under `reduce_retracing`), and `max_traces`.

use super::super::key::{CacheKey, Signature};
use super::super::options::TracePolicy;
use super::{warning, GraphFunction, State};
use crate::error::{Error, Result};
use crate::graph::{Graph, NodeKind};
use crate::ops::unknown_rank::has_unknown_rank_form;
use crate::shape::{Shape, UNKNOWN};
use std::borrow::Cow;
use std::sync::atomic::{AtomicUsize, Ordering};

impl GraphFunction {
    /// The key this call is cached under (dims of fixed-signature arguments left out); an
    /// error when the call does not match the fixed signature.
    pub(super) fn cache_key<'s>(&self, state: &State, sig: &'s Signature) -> Result<Cow<'s, CacheKey>> {
        let Some(specs) = self.options.input_signature else { return Ok(Cow::Borrowed(&sig.key)) };
        for spec in specs {
            let leaf = sig.leaf_args.iter().position(|&a| a as usize == spec.arg);
            let mismatch = |found: String| Error::SignatureMismatch {
                function: state.full_name.clone(),
                arg: self.arg_names.get(spec.arg).copied().unwrap_or("?").to_string(),
                expected: format!("{}{}", spec.dtype, spec.shape()),
                found,
            };
            let t = &sig.leaves[leaf.ok_or_else(|| mismatch("no tensor".into()))?];
            if t.dtype() != spec.dtype || !spec.shape().admits(&t.0.shape) {
                return Err(mismatch(format!("{}{}", t.dtype(), t.0.shape)));
            }
        }
        let args: Vec<usize> = specs.iter().map(|s| s.arg).collect();
        Ok(Cow::Owned(sig.erased_for_args(&args)))
    }

    /// The shapes to trace with: the call's, the fixed signature's, or — under
    /// `reduce_retracing`, when an earlier trace differs only in shapes — relaxed ones, with
    /// the key without dims (and ranks, for an unknown rank) they then serve.
    pub(super) fn shapes_to_trace(&self, state: &State, sig: &Signature) -> (Vec<Shape>, Option<CacheKey>) {
        let shapes = self.fixed_shapes(sig);
        if self.options.input_signature.is_some() || !self.options.reduce_retracing {
            return (shapes, None);
        }
        let erased = sig.erased();
        let history = Self::history(state);
        // Relax against what the last such trace used, so the traces widen ([2] -> [?];
        // [?, 5] then [3, 6] -> [?, ?]) instead of jumping between partial guesses.
        if let Some(old) = history.last_shapes.iter().rev().find(|t| t.erased == erased) {
            return (relax(&old.shapes, &shapes), Some(erased));
        }
        // Another rank: as TF does, one trace of unknown rank then serves every rank — when
        // the earlier trace's ops all have a rule at an unknown rank (else each rank traces),
        // and no argument requires grad (a gradient through the call would need the shapes).
        if sig.leaves.iter().any(|t| t.requires_grad_raw()) {
            return (shapes, None);
        }
        let rank_erased = sig.rank_erased();
        match history.last_shapes.iter().rev().find(|t| t.rank_erased == rank_erased) {
            Some(old) if old.any_rank => (relax(&old.shapes, &shapes), Some(rank_erased)),
            _ => (shapes, None),
        }
    }

    /// The call's leaf shapes, with a fixed input signature's shapes for the arguments it
    /// covers.
    pub(super) fn fixed_shapes(&self, sig: &Signature) -> Vec<Shape> {
        let mut shapes = sig.shapes();
        for spec in self.options.input_signature.unwrap_or_default() {
            if let Some(leaf) = sig.leaf_args.iter().position(|&a| a as usize == spec.arg) {
                shapes[leaf] = spec.shape();
            }
        }
        shapes
    }

    /// Checks `max_traces`, reserving this trace's place: an error under
    /// `max_traces(N, error)`, a warning under `max_traces(N, warn)`.
    pub(super) fn admit_trace<'s>(&self, state: &'s State, sig: &Signature, key: &CacheKey) -> Result<Admission<'s>> {
        let admitted = state.admitted.fetch_add(1, Ordering::SeqCst);
        let admission = Admission { admitted: &state.admitted, kept: false };
        if let Some((limit, policy)) = self.options.max_traces
            && admitted >= limit
        {
            let reason = self.reason(&Self::history(state), sig, key);
            let err = Error::TooManyTraces { function: state.full_name.clone(), count: admitted + 1, limit, reason };
            match policy {
                TracePolicy::Error => return Err(err),
                TracePolicy::Warn => warning::warn(&state.full_name, admitted + 1, &err.to_string()),
            }
        }
        Ok(admission)
    }
}

/// The shapes a relaxed trace uses: each dim that differs between `a` and `b` is unknown, and
/// so is the rank where the ranks differ.
fn relax(a: &[Shape], b: &[Shape]) -> Vec<Shape> {
    let relax_one = |x: &Shape, y: &Shape| {
        if x.is_unknown_rank() || x.rank() != y.rank() {
            return Shape::unknown_rank();
        }
        Shape::from(x.dims().iter().zip(y.dims()).map(|(&p, &q)| if p == q { p } else { UNKNOWN }).collect::<Vec<_>>())
    };
    a.iter().zip(b).map(|(x, y)| relax_one(x, y)).collect()
}

/// True when every node of `graph` (and of its subgraphs) has a form at an unknown rank
/// (`ops::unknown_rank`), so the function may be traced once for every rank.
pub(super) fn traces_at_unknown_rank(graph: &Graph) -> bool {
    graph.nodes.iter().all(|node| match &node.kind {
        NodeKind::Op(op) => node.inputs.first().is_some_and(|&v| has_unknown_rank_form(op, &graph.values[v].shape)),
        NodeKind::Print(_) => true,
        NodeKind::Cond { then, other } => traces_at_unknown_rank(then) && traces_at_unknown_rank(other),
        NodeKind::While { cond, body, history: false, .. } => traces_at_unknown_rank(cond) && traces_at_unknown_rank(body),
        _ => false,
    })
}

/// A trace's place under `max_traces`, given back unless the trace finishes (an `Err` from
/// the body, a failed trace or a panic does not count).
pub(super) struct Admission<'a> {
    admitted: &'a AtomicUsize,
    kept: bool,
}

impl Admission<'_> {
    pub(super) fn keep(mut self) {
        self.kept = true;
    }
}

impl Drop for Admission<'_> {
    fn drop(&mut self) {
        if !self.kept {
            self.admitted.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relaxing_makes_differing_dims_unknown() {
        let (a, b) = ([Shape::new(&[2, 5]), Shape::new(&[3])], [Shape::new(&[7, 5]), Shape::new(&[3])]);
        let relaxed: Vec<String> = relax(&a, &b).iter().map(|s| s.to_string()).collect();
        assert_eq!(relaxed, ["[?, 5]", "[3]"]);
        let (a, b) = ([Shape::new(&[2, 5]), Shape::unknown_rank(), Shape::scalar()], [Shape::new(&[4]), Shape::new(&[1]), Shape::scalar()]);
        let relaxed: Vec<String> = relax(&a, &b).iter().map(|s| s.to_string()).collect();
        assert_eq!(relaxed, ["[*]", "[*]", "[]"]);
    }
}
