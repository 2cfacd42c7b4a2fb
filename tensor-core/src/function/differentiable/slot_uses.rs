//! A function graph replayed on its slots, and its slots' uses: the replay is the control
//! layer's one replay (`control::replay_uses`, which also replays `cond` and `while_loop`
//! nodes), reading a function graph's data inputs; a *use* is an operand of a replayed node
//! or a returned slot, and a use as a `cond`'s branch input feeds as many gradient edges as
//! the branch gives it.

use crate::control::{is_replayed, replay_uses};
use crate::error::Result;
use crate::graph::Graph;
use crate::tensor::Tensor;

/// Replays `g` on the tensors of its slots and returns its outputs.
pub(super) fn replay(g: &Graph, slots: &[&Tensor]) -> Result<Vec<Tensor>> {
    let dims = |slot: usize, axis: usize| crate::compile::slot_dim(slots, slot, axis);
    Ok(replay_uses(g, &g.slot_of_values(), &dims, |slot| Ok(slots[slot].clone()))?.0)
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
