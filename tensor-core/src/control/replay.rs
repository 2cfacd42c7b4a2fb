//! Replaying a subgraph through the op dispatch, on given inputs: inside the trace of a
//! gradient this rebuilds a branch's or a loop body's forward computation with autograd
//! recording, so its vector-Jacobian product can be taken. Prints are not replayed.
//!
//! The replay of one control-flow node (`replay_control`) is also what the function layer
//! uses to differentiate a graph call holding `Cond`/`While` nodes (it cannot import this
//! layer, so `install` registers it there before the first such node is made).

use crate::error::Result;
use crate::graph::{Graph, Node, NodeKind};
use crate::ops::dispatch::apply;
use crate::tensor::Tensor;

/// Registers `replay_control` with the function layer (idempotent; cheap after the first).
pub(super) fn install() {
    crate::function::register_control_replay(replay_control);
}

/// The outputs of `g` computed from `params` (one tensor per graph parameter).
pub(super) fn replay(g: &Graph, params: &[Tensor]) -> Result<Vec<Tensor>> {
    replay_uses(g, |k| Ok(params[k].clone()))
}

/// The outputs of `g`, where `read(k)` gives the tensor each *use* of parameter `k` reads —
/// an operand of a replayed node, or a returned parameter — in node order, then output order.
pub(super) fn replay_uses(g: &Graph, mut read: impl FnMut(usize) -> Result<Tensor>) -> Result<Vec<Tensor>> {
    let params = g.param_of_values();
    let mut vals: Vec<Option<Tensor>> = vec![None; g.values.len()];
    for (v, s) in &g.constants {
        vals[*v] = Some(Tensor::from_storage(s.clone()));
    }
    let mut get = |vals: &[Option<Tensor>], v: usize| match params[v] {
        Some(k) => read(k),
        None => Ok(vals[v].clone().expect("defined before use")),
    };
    for node in g.nodes.iter().filter(|n| !matches!(n.kind, NodeKind::Print(_))) {
        let ins: Vec<Tensor> = node.inputs.iter().map(|&v| get(&vals, v)).collect::<Result<_>>()?;
        let outs = match &node.kind {
            NodeKind::Op(op) => {
                let refs: Vec<&Tensor> = ins.iter().collect();
                vec![apply(op.clone(), &refs)?]
            }
            _ => replay_control(node, &ins)?,
        };
        for (&v, t) in node.outputs.iter().zip(outs) {
            vals[v] = Some(t);
        }
    }
    g.outputs.iter().map(|&v| get(&vals, v)).collect()
}

/// Replays one `Cond` or `While` node on `ins` (its inputs, in node order, values of the
/// active trace): a new node of that trace, with its gradient recorded. The result has a
/// tensor per output of the new node (a `While` node that keeps its history has more outputs
/// than one that does not: see `while_graphs`).
pub(crate) fn replay_control(node: &Node, ins: &[Tensor]) -> Result<Vec<Tensor>> {
    match &node.kind {
        NodeKind::Cond { then, other } => {
            let nt = then.num_params;
            super::cond::cond_graphs(&ins[0], (**then).clone(), (**other).clone(), &ins[1..1 + nt], &ins[1 + nt..])
        }
        NodeKind::While { cond, body, max_iterations, .. } => {
            let n = body.outputs.len();
            let nc = cond.num_params - n;
            let types: Vec<_> = body.outputs.iter().map(|&v| (body.values[v].dtype, body.values[v].shape.clone())).collect();
            super::while_loop::while_graphs(&ins[..n], (**cond).clone(), (**body).clone(), &ins[n..n + nc], &ins[n + nc..], *max_iterations, &types)
        }
        _ => unreachable!("only control-flow nodes are replayed here"),
    }
}
