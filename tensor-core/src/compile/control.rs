//! Running `Cond` and `While` nodes: each subgraph is optimized and planned once, like a
//! function's graph, and run on the node's input values. The one subgraph optimizer lives
//! here too, so what an export writes is what the executor runs.

use super::executable::Executable;
use crate::error::{Error, Result};
use crate::graph::{Graph, NodeKind};
use crate::storage::Storage;
use smallvec::SmallVec;
use std::sync::Arc;

/// `g` with the subgraphs of its `cond` and `while` nodes optimized (each by
/// [`optimize`](super::optimize), and their own subgraphs in turn): what runs when the
/// executor plans those nodes. `g`'s own nodes are left as they are.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::control::cond;
/// use tensor_core::graph::NodeKind;
/// use tensor_core::function::ConcreteFunction;
/// let x = Tensor::ones(&[2], DType::F32);
/// let f = ConcreteFunction::trace("f", &[("x", &x)], || Ok(vec![cond(&x.sum()?.gt(0.0)?, || x.mul(1.0), || x.neg())?]))?;
/// let g = tensor_core::compile::optimize_subgraphs(f.traced_graph());
/// let then = g.nodes.iter().find_map(|n| match &n.kind {
///     NodeKind::Cond { then, .. } => Some(then.clone()),
///     _ => None,
/// });
/// assert_eq!(then.unwrap().count_op("mul"), 0); // `* 1` simplified away inside the branch
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub fn optimize_subgraphs(g: &Graph) -> Graph {
    let mut g = g.clone();
    g.nodes.iter_mut().for_each(|n| optimize_node_subgraphs(&mut n.kind));
    g
}

/// Optimizes the subgraphs of `kind` if it is a `Cond` or `While` node.
fn optimize_node_subgraphs(kind: &mut NodeKind) {
    let prepare = |sub: &mut Arc<Graph>| *sub = Arc::new(optimize_subgraphs(&super::optimize(sub, None)));
    match kind {
        NodeKind::Cond { then, other } => {
            prepare(then);
            prepare(other);
        }
        NodeKind::While { cond, body, .. } => {
            prepare(cond);
            prepare(body);
        }
        _ => {}
    }
}

/// The planned subgraphs of a control-flow node.
pub(super) enum ControlPlan {
    Cond { then: Executable, other: Executable, then_params: usize },
    While { cond: Executable, body: Executable, max_iterations: Option<usize>, history: bool, cond_params: usize },
}

impl ControlPlan {
    /// The plan of a `Cond` or `While` node (`None` for other nodes). With `optimize`, the
    /// node's subgraphs hold what [`optimize_subgraphs`] makes of them.
    pub(super) fn new(kind: &NodeKind, optimize: bool) -> Option<ControlPlan> {
        if !matches!(kind, NodeKind::Cond { .. } | NodeKind::While { .. }) {
            return None;
        }
        let mut kind = kind.clone();
        if optimize {
            optimize_node_subgraphs(&mut kind);
        }
        match &kind {
            NodeKind::Cond { then, other } => {
                Some(ControlPlan::Cond { then: Executable::new(then, false), other: Executable::new(other, false), then_params: then.num_params })
            }
            NodeKind::While { cond, body, max_iterations, history } => Some(ControlPlan::While {
                cond: Executable::new(cond, false),
                body: Executable::new(body, false),
                max_iterations: *max_iterations,
                history: *history,
                cond_params: cond.num_params,
            }),
            _ => None,
        }
    }

    /// Runs the node on its inputs.
    pub(super) fn run(&self, inputs: &[&Storage]) -> Result<SmallVec<[Storage; 1]>> {
        match self {
            ControlPlan::Cond { then, other, then_params } => {
                let params: Vec<Storage> = inputs[1..].iter().map(|s| (*s).clone()).collect();
                let outs = if truth(inputs[0])? { then.run_params(&params[..*then_params])? } else { other.run_params(&params[*then_params..])? };
                Ok(outs.into())
            }
            ControlPlan::While { cond, body, max_iterations, history, cond_params } => {
                let n = body.graph().outputs.len();
                let captured_by_cond = cond_params - n;
                let cond_extra = &inputs[n..n + captured_by_cond];
                let body_extra = &inputs[n + captured_by_cond..];
                let mut vars: Vec<Storage> = inputs[..n].iter().map(|s| (*s).clone()).collect();
                let mut seen: Vec<Vec<Storage>> = vec![Vec::new(); n];
                let mut trips = 0usize;
                while max_iterations.is_none_or(|m| trips < m) {
                    let go = cond.run_params(&with_extra(&vars, cond_extra))?;
                    if !truth(&go[0])? {
                        break;
                    }
                    if *history {
                        seen.iter_mut().zip(&vars).for_each(|(h, v)| h.push(v.clone()));
                    }
                    vars = body.run_params(&with_extra(&vars, body_extra))?;
                    trips += 1;
                }
                let mut outs: SmallVec<[Storage; 1]> = vars.into();
                if *history {
                    outs.push(Storage::I64(ndarray::arr0(trips as i64).into_dyn().into_shared()));
                    for (k, h) in seen.iter().enumerate() {
                        outs.push(stack(h, inputs[k]));
                    }
                }
                Ok(outs)
            }
        }
    }
}

/// The loop variables followed by a subgraph's captured values.
fn with_extra(vars: &[Storage], extra: &[&Storage]) -> Vec<Storage> {
    vars.iter().cloned().chain(extra.iter().map(|s| (*s).clone())).collect()
}

/// The value of a scalar bool predicate.
fn truth(s: &Storage) -> Result<bool> {
    match s {
        Storage::Bool(a) if a.len() == 1 => Ok(*a.iter().next().expect("one element")),
        other => Err(Error::invalid("cond/while_loop", "predicate", format!("must be one bool value, found {}{}", other.dtype(), other.shape()))),
    }
}

/// The saved values of one loop variable (whose initial value is `first`) stacked along a
/// new first dim: `[0, ...]` if the loop never ran.
fn stack(values: &[Storage], first: &Storage) -> Storage {
    let shape = first.shape();
    let dims = |n: usize| -> Vec<usize> { std::iter::once(n).chain(shape.dims().iter().copied()).collect() };
    if values.is_empty() {
        return Storage::full(&crate::shape::Shape::from(dims(0)), first.dtype(), crate::dtype::Scalar::Int(0));
    }
    let parts: Vec<Storage> = values.iter().map(|v| crate::storage::map_array!(v, a => crate::kernels::layout::reshape(a, &dims(1)))).collect();
    let refs: Vec<&Storage> = parts.iter().collect();
    crate::ops::Op::Layout(crate::ops::LayoutOp::Concat { axis: 0 }).compute(&refs).expect("loop variables keep their dtype and shape")
}
