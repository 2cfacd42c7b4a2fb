//! `cond(pred, then_fn, else_fn)`.

use super::carried_state::{merge_branch_updates, unalias, write_back};
use super::grad::CondGrad;
use super::{check_predicate, describe, is_trace_constant, types_of};
use crate::error::{Error, Result};
use crate::graph::{Graph, NodeKind};
use crate::tensor::Tensor;
use crate::trace::{self, GraphOutput, Nested, TraceGuard};
use std::sync::Arc;

/// `then_fn()` if the scalar bool `pred` is true, else `else_fn()`. Eagerly only the chosen
/// branch runs. While tracing, both branches are traced into subgraphs of one `Cond` node
/// that picks at run time; they must return the same structure, dtypes and shapes.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::control::cond;
/// let x = Tensor::scalar(3.0f32);
/// let y = cond(&x.gt(0.0)?, || x.mul(2.0), || x.neg())?;
/// assert_eq!(y.item::<f32>()?, 6.0);
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub fn cond<T: GraphOutput>(pred: &Tensor, then_fn: impl FnOnce() -> Result<T>, else_fn: impl FnOnce() -> Result<T>) -> Result<T> {
    check_predicate("cond", pred)?;
    if !trace::is_active() || is_trace_constant(pred) {
        return if pred.item::<bool>()? { then_fn() } else { else_fn() };
    }
    let pred = trace::resolve(pred, "cond")?;
    let then_branch = trace_branch("then", then_fn)?;
    let else_branch = trace_branch("else", else_fn)?;
    check_branches(&then_branch.types, &else_branch.types)?;
    let outs = cond_nodes(&pred, then_branch.nested, else_branch.nested)?;
    let mut leaves = outs.into_iter();
    Ok(T::from_parts(&then_branch.structure, &mut leaves))
}

/// One traced branch: its graph, the outer values it captured and updated, its outputs' types
/// and its result's structure.
struct TracedBranch<S> {
    nested: Nested,
    types: Vec<(crate::dtype::DType, crate::shape::Shape)>,
    structure: S,
}

fn trace_branch<T: GraphOutput>(name: &str, f: impl FnOnce() -> Result<T>) -> Result<TracedBranch<T::Structure>> {
    let guard = TraceGuard::begin_nested(name);
    let mut leaves = Vec::new();
    let structure = f()?.into_parts(&mut leaves);
    let types = types_of(&leaves);
    let nested = guard.finish_nested(&leaves)?;
    Ok(TracedBranch { nested, types, structure })
}

fn check_branches(then_out: &[(crate::dtype::DType, crate::shape::Shape)], else_out: &[(crate::dtype::DType, crate::shape::Shape)]) -> Result<()> {
    if then_out.len() != else_out.len() {
        let index = then_out.len().min(else_out.len());
        let count = |n: usize| format!("{n} tensors in all");
        return Err(Error::BranchMismatch { index, then_desc: count(then_out.len()), else_desc: count(else_out.len()) });
    }
    for (index, (a, b)) in then_out.iter().zip(else_out).enumerate() {
        if a != b {
            return Err(Error::BranchMismatch { index, then_desc: describe(a.0, &a.1), else_desc: describe(b.0, &b.1) });
        }
    }
    Ok(())
}

/// Appends a `Cond` node over two traced branches and returns their outputs. Outer tensors a
/// branch updated in place become extra outputs of the node, written back to them
/// (`carried_state.rs`).
pub(crate) fn cond_nodes(pred: &Tensor, mut then: Nested, mut other: Nested) -> Result<Vec<Tensor>> {
    let n = then.graph.outputs.len();
    let outers = merge_branch_updates(&mut then, &mut other);
    unalias(&mut then.captured, &outers);
    unalias(&mut other.captured, &outers);
    let mut outs = cond_graphs(pred, then.graph, other.graph, &then.captured, &other.captured)?;
    write_back(&outers, &outs[n..]);
    outs.truncate(n);
    Ok(outs)
}

/// Appends a `Cond` node over traced branch graphs, whose parameters are `then_in` and
/// `else_in` (values of the active trace), and records its gradient.
pub(crate) fn cond_graphs(pred: &Tensor, then_graph: Graph, else_graph: Graph, then_in: &[Tensor], else_in: &[Tensor]) -> Result<Vec<Tensor>> {
    let types: Vec<_> = then_graph.outputs.iter().map(|&v| (then_graph.values[v].dtype, then_graph.values[v].shape.clone())).collect();
    let (then_graph, else_graph) = (Arc::new(then_graph), Arc::new(else_graph));
    let mut inputs: Vec<Tensor> = vec![trace::resolve(pred, "cond")?];
    for t in then_in.iter().chain(else_in) {
        inputs.push(trace::resolve(t, "cond")?);
    }
    let refs: Vec<&Tensor> = inputs.iter().collect();
    let outs = trace::append_node(NodeKind::Cond { then: then_graph.clone(), other: else_graph.clone() }, &refs, &types);
    let grad = CondGrad {
        pred: inputs[0].clone(),
        then_edges: then_graph.param_edges(),
        else_edges: else_graph.param_edges(),
        then_graph,
        else_graph,
        then_in: inputs[1..1 + then_in.len()].to_vec(),
        else_in: inputs[1 + then_in.len()..].to_vec(),
    };
    let out_refs: Vec<&Tensor> = outs.iter().collect();
    let edges = grad.edge_inputs();
    let edge_refs: Vec<&Tensor> = edges.iter().collect();
    crate::tensor::grad_node::record_many(grad, &edge_refs, &out_refs);
    Ok(outs)
}
