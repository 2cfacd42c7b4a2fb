//! Replaying a function graph that only computes (op nodes and prints) through the op
//! dispatch, so autograd records every op as the eager body would — or, inside a trace,
//! appends them to that trace.

use crate::error::Result;
use crate::graph::{Graph, InputSource, NodeKind, ValueId};
use crate::ops::dispatch::apply;
use crate::tensor::Tensor;

/// A replayed graph: the tensor each value became (`None` for slot inputs, which each use
/// reads afresh, and for values of nodes that were not replayed).
pub(super) struct Replayed {
    values: Vec<Option<Tensor>>,
}

impl Replayed {
    /// The tensor value `v` became.
    pub(super) fn value(&self, v: ValueId) -> &Tensor {
        self.values[v].as_ref().expect("a replayed value")
    }
}

/// Replays `g` (see `is_differentiable`); `read(slot)` gives the tensor each *use* of a slot
/// reads — an op's operand or a returned slot — in program order, then output order.
/// Returns the outputs and the replayed values.
pub(super) fn replay_uses(g: &Graph, mut read: impl FnMut(usize) -> Tensor) -> Result<(Vec<Tensor>, Replayed)> {
    let mut slot_of: Vec<Option<usize>> = vec![None; g.values.len()];
    for (v, src) in &g.inputs {
        let InputSource::Data(slot) = src else { unreachable!("a differentiable graph reads data only") };
        slot_of[*v] = Some(*slot);
    }
    let mut values: Vec<Option<Tensor>> = vec![None; g.values.len()];
    for (v, s) in &g.constants {
        values[*v] = Some(Tensor::from_storage(s.clone()));
    }
    let mut get = |values: &[Option<Tensor>], v: ValueId| match slot_of[v] {
        Some(slot) => read(slot),
        None => values[v].clone().expect("defined before use"),
    };
    for node in &g.nodes {
        let NodeKind::Op(op) = &node.kind else { continue }; // prints: not replayed
        let ins: Vec<Tensor> = node.inputs.iter().map(|&v| get(&values, v)).collect();
        let refs: Vec<&Tensor> = ins.iter().collect();
        values[node.outputs[0]] = Some(apply(op.clone(), &refs)?);
    }
    let outputs = g.outputs.iter().map(|&v| get(&values, v)).collect();
    Ok((outputs, Replayed { values }))
}

/// Replays `g` on the tensors of its slots and returns its outputs.
pub(super) fn replay(g: &Graph, slots: &[&Tensor]) -> Result<Vec<Tensor>> {
    Ok(replay_uses(g, |slot| slots[slot].clone())?.0)
}

/// How many uses (see `replay_uses`) each of the `slots` slots of `g` has.
pub(super) fn uses_per_slot(g: &Graph, slots: usize) -> Vec<usize> {
    let mut slot_of: Vec<Option<usize>> = vec![None; g.values.len()];
    for (v, src) in &g.inputs {
        if let InputSource::Data(slot) = src {
            slot_of[*v] = Some(*slot);
        }
    }
    let mut uses = vec![0; slots];
    let op_inputs = g.nodes.iter().filter(|n| matches!(n.kind, NodeKind::Op(_))).flat_map(|n| n.inputs.iter());
    for &v in op_inputs.chain(&g.outputs) {
        if let Some(slot) = slot_of[v] {
            uses[slot] += 1;
        }
    }
    uses
}
