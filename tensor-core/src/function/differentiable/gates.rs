//! Uses that eager code may never make. A slot read by a `cond` for one branch only, or by a
//! `while_loop`'s body, is read eagerly only when that branch is taken or the body runs at
//! least once; when it is not, eager autograd delivers nothing for that use, and an input read
//! nowhere else keeps `.grad == None`. The backward graph, being one graph for every
//! predicate, returns zeros for such a use (as TF and JAX do); the call's node drops them
//! after the fact from the predicate or trip count the call kept, so the gradients are the
//! eager ones, `None` included.

use crate::control::is_replayed;
use crate::graph::{Graph, NodeKind, ValueId};
use crate::tensor::Tensor;

/// One use of a slot: the `nth` (from 0) of `slot`'s uses, in the order `replay_uses` reads
/// them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Use {
    pub(super) slot: usize,
    pub(super) nth: usize,
}

/// When a use inside control flow is made eagerly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum MadeWhen {
    /// The `cond` whose predicate is this forward value takes this branch (`true`: then).
    Predicate(ValueId, bool),
    /// The `while_loop` whose trip count is this forward value runs its body at least once.
    Runs(ValueId),
}

impl MadeWhen {
    /// The forward value the condition reads.
    pub(super) fn value(self) -> ValueId {
        match self {
            MadeWhen::Predicate(v, _) | MadeWhen::Runs(v) => v,
        }
    }

    /// Whether the use was made, given the value the call computed; `None` when that cannot
    /// be read (a value of an enclosing trace).
    pub(super) fn was_made(self, value: &Tensor) -> Option<bool> {
        if value.is_symbolic() {
            return None;
        }
        match self {
            MadeWhen::Predicate(_, branch) => value.item::<bool>().ok().map(|p| p == branch),
            MadeWhen::Runs(_) => value.cast(crate::dtype::DType::I64).and_then(|t| t.item::<i64>()).ok().map(|trip| trip > 0),
        }
    }
}

/// For each slot of `g` (`slots` of them), for each of its uses in `replay_uses` order, when
/// eager code makes it (`None`: always, as far as the call can tell).
pub(super) fn use_conditions(g: &Graph, slots: usize) -> Vec<Vec<Option<MadeWhen>>> {
    let slot_of = g.slot_of_values();
    let mut uses = vec![Vec::new(); slots];
    for node in g.nodes.iter().filter(|n| is_replayed(n)) {
        for (position, &v) in node.inputs.iter().enumerate() {
            if let Some(slot) = slot_of[v] {
                uses[slot].push(condition(g, node, position));
            }
        }
    }
    for &v in &g.outputs {
        if let Some(slot) = slot_of[v] {
            uses[slot].push(None);
        }
    }
    uses
}

/// When input `position` of `node` is used eagerly: a `cond`'s branch input when its branch is
/// taken, a `while_loop`'s body input when the body runs (a node with its trip count only).
fn condition(g: &Graph, node: &crate::graph::Node, position: usize) -> Option<MadeWhen> {
    match &node.kind {
        NodeKind::Cond { then, .. } if position > 0 => Some(MadeWhen::Predicate(node.inputs[0], position <= then.num_params)),
        NodeKind::While { cond, body, history: true, .. } => {
            let vars = body.outputs.len();
            let body_start = cond.num_params;
            let trip = *node.outputs.get(vars)?;
            (position >= body_start && g.values[trip].dtype.is_int()).then_some(MadeWhen::Runs(trip))
        }
        _ => None,
    }
}
