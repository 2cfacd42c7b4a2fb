//! Replaying a function graph that computes (op nodes, control-flow nodes and prints) through
//! the op dispatch, so autograd records every op as the eager body would — or, inside a trace,
//! appends them to that trace.
//!
//! `Cond` and `While` nodes are replayed by the control layer, which sits above this one: it
//! registers its replay here (`register_control_replay`) before it makes its first node, the
//! way the tracer registers with the op dispatch. A graph holding such a node was made by
//! control code, so the replay is there whenever one is met.

use crate::error::{Error, Result};
use crate::graph::{Graph, Node, NodeKind, ValueId};
use crate::ops::dispatch::apply;
use crate::tensor::Tensor;
use std::sync::OnceLock;

/// Replays one `Cond` or `While` node on its input tensors, returning a tensor per output
/// (with autograd recording, or appended to the active trace).
pub(crate) type ControlReplay = fn(&Node, &[Tensor]) -> Result<Vec<Tensor>>;

static CONTROL_REPLAY: OnceLock<ControlReplay> = OnceLock::new();

/// Makes `replay` the replay of control-flow nodes (the first registration stays).
pub(crate) fn register_control_replay(replay: ControlReplay) {
    CONTROL_REPLAY.get_or_init(|| replay);
}

/// True when control-flow nodes can be replayed (the control layer registered its replay).
pub(super) fn control_replay_registered() -> bool {
    CONTROL_REPLAY.get().is_some()
}

/// A replayed graph: the tensor each value became (`None` for slot inputs, which each use
/// reads afresh).
pub(super) struct Replayed {
    values: Vec<Option<Tensor>>,
}

impl Replayed {
    /// The tensor value `v` became, if a replayed node made it.
    pub(super) fn get(&self, v: ValueId) -> Option<&Tensor> {
        self.values[v].as_ref()
    }
}

/// True for the nodes `replay_uses` replays (all but prints); their inputs are the uses.
pub(super) fn is_replayed(node: &Node) -> bool {
    !matches!(node.kind, NodeKind::Print(_))
}

/// Replays `g` (see `is_differentiable`); `read(slot)` gives the tensor each *use* of a slot
/// reads — an operand of a node, or a returned slot — in program order, then output order.
/// Returns the outputs and the replayed values.
pub(super) fn replay_uses(g: &Graph, mut read: impl FnMut(usize) -> Tensor) -> Result<(Vec<Tensor>, Replayed)> {
    let slot_of = g.slot_of_values();
    let mut values: Vec<Option<Tensor>> = vec![None; g.values.len()];
    for (v, s) in &g.constants {
        values[*v] = Some(Tensor::from_storage(s.clone()));
    }
    let mut get = |values: &[Option<Tensor>], v: ValueId| match slot_of[v] {
        Some(slot) => read(slot),
        None => values[v].clone().expect("defined before use"),
    };
    for node in g.nodes.iter().filter(|n| is_replayed(n)) {
        let ins: Vec<Tensor> = node.inputs.iter().map(|&v| get(&values, v)).collect();
        let outs = match &node.kind {
            NodeKind::Op(op) => {
                let refs: Vec<&Tensor> = ins.iter().collect();
                vec![apply(op.clone(), &refs)?]
            }
            NodeKind::Cond { .. } | NodeKind::While { .. } => replay_control(g, node, &ins)?,
            _ => return Err(not_replayable(g, node)),
        };
        for (&v, t) in node.outputs.iter().zip(outs) {
            values[v] = Some(t);
        }
    }
    let outputs = g.outputs.iter().map(|&v| get(&values, v)).collect();
    Ok((outputs, Replayed { values }))
}

fn replay_control(g: &Graph, node: &Node, ins: &[Tensor]) -> Result<Vec<Tensor>> {
    let replay = CONTROL_REPLAY.get().ok_or_else(|| not_replayable(g, node))?;
    replay(node, ins)
}

fn not_replayable(g: &Graph, node: &Node) -> Error {
    Error::InvalidGraph { graph: g.name.clone(), problem: format!("a {} node cannot be replayed for a gradient", node.kind_name()) }
}

/// Replays `g` on the tensors of its slots and returns its outputs.
pub(super) fn replay(g: &Graph, slots: &[&Tensor]) -> Result<Vec<Tensor>> {
    Ok(replay_uses(g, |slot| slots[slot].clone())?.0)
}

/// How many gradient edges (see `Graph::edges_to`) each of the `slots` slots of `g` feeds
/// in a replay: a use as a `cond`'s branch input counts the edges the branch gives it.
pub(super) fn edges_per_slot(g: &Graph, slots: usize) -> Vec<usize> {
    let slot_of = g.slot_of_values();
    g.edges_to(slots, |v| slot_of[v])
}

/// How many uses (see `replay_uses`) each of the `slots` slots of `g` has.
pub(super) fn uses_per_slot(g: &Graph, slots: usize) -> Vec<usize> {
    let slot_of = g.slot_of_values();
    let mut uses = vec![0; slots];
    let node_inputs = g.nodes.iter().filter(|n| is_replayed(n)).flat_map(|n| n.inputs.iter());
    for &v in node_inputs.chain(&g.outputs) {
        if let Some(slot) = slot_of[v] {
            uses[slot] += 1;
        }
    }
    uses
}
