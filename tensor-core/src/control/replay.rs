//! The one replay of a graph through the op dispatch: every node but prints becomes the op
//! (or the `cond`/`while_loop`) it was, so autograd records it as the eager code would — or,
//! inside a trace, it is appended to that trace. Two callers: the gradient of a control-flow
//! node replays a branch or a loop body on its parameters (`grad.rs`), and the gradient of a
//! graph call replays the function's graph on its slots (the joint function of
//! `function::differentiable`, which sits above this layer and calls it directly).

use crate::error::{Error, Result};
use crate::graph::{Graph, Node, NodeKind, ValueId};
use crate::ops::dispatch::apply;
use crate::ops::Op;
use crate::tensor::Tensor;

/// A replayed graph: the tensor each value became (`None` for inputs, which each use reads
/// afresh).
pub(crate) struct Replayed {
    values: Vec<Option<Tensor>>,
}

impl Replayed {
    /// The tensor value `v` became, if a replayed node made it.
    pub(crate) fn get(&self, v: ValueId) -> Option<&Tensor> {
        self.values[v].as_ref()
    }
}

/// True for the nodes a replay replays (all but prints); their inputs are the uses.
pub(crate) fn is_replayed(node: &Node) -> bool {
    !matches!(node.kind, NodeKind::Print(_))
}

/// The outputs of subgraph `g` (a branch, a loop's condition or body) computed from
/// `params` (one tensor per parameter).
pub(super) fn replay(g: &Graph, params: &[Tensor]) -> Result<Vec<Tensor>> {
    Ok(replay_uses(g, &g.param_of_values(), &|_, _| None, |k| Ok(params[k].clone()))?.0)
}

/// Replays `g`, whose value `v` is input `input_of[v]` (a subgraph's parameter, a function
/// graph's slot) or made by a node; `read(k)` gives the tensor each *use* of input `k` reads
/// — an operand of a replayed node, or a returned input — in node order, then output order.
/// Returns the outputs and the replayed values. Nodes other than ops, control flow and
/// prints (a fused program, a `.grad` accumulation) are not replayed: an `Err`. An op whose
/// sizes are symbolic (a relaxed trace's) is replayed with them evaluated on `dims(slot,
/// axis)`, the dims of the slots replayed on.
pub(crate) fn replay_uses(
    g: &Graph,
    input_of: &[Option<usize>],
    dims: &dyn Fn(usize, usize) -> Option<usize>,
    mut read: impl FnMut(usize) -> Result<Tensor>,
) -> Result<(Vec<Tensor>, Replayed)> {
    let mut values: Vec<Option<Tensor>> = vec![None; g.values.len()];
    for (v, s) in &g.constants {
        values[*v] = Some(Tensor::from_storage(s.clone()));
    }
    let mut get = |values: &[Option<Tensor>], v: ValueId| match input_of[v] {
        Some(k) => read(k),
        None => Ok(values[v].clone().expect("defined before use")),
    };
    for node in g.nodes.iter().filter(|n| is_replayed(n)) {
        let ins: Vec<Tensor> = node.inputs.iter().map(|&v| get(&values, v)).collect::<Result<_>>()?;
        let outs = match &node.kind {
            NodeKind::Op(op) => {
                let refs: Vec<&Tensor> = ins.iter().collect();
                let op = match op {
                    Op::SymShape(s) => Op::SymShape(s.at(dims)?),
                    op => op.clone(),
                };
                vec![apply(op, &refs)?]
            }
            NodeKind::Cond { .. } | NodeKind::While { .. } => replay_control(node, &ins)?,
            _ => return Err(not_replayable(g, node)),
        };
        for (&v, t) in node.outputs.iter().zip(outs) {
            values[v] = Some(t);
        }
    }
    let outputs = g.outputs.iter().map(|&v| get(&values, v)).collect::<Result<_>>()?;
    Ok((outputs, Replayed { values }))
}

fn not_replayable(g: &Graph, node: &Node) -> Error {
    Error::InvalidGraph { graph: g.name.clone(), problem: format!("a {} node cannot be replayed for a gradient", node.kind_name()) }
}

/// Replays one `Cond` or `While` node on `ins` (its inputs, in node order, values of the
/// active trace): a new node of that trace, with its gradient recorded. The result has a
/// tensor per output of the new node (a `While` node that keeps its history has more outputs
/// than one that does not: see `while_graphs`).
fn replay_control(node: &Node, ins: &[Tensor]) -> Result<Vec<Tensor>> {
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
