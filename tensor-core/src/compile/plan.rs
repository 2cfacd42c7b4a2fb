//! The execution plan, computed once per concrete function: the steps in order, for each
//! step the values that die there (freed at once) and the dying inputs a fused step may write
//! its outputs into, and whether the run must re-check shapes (graphs with unknown dims).

use crate::graph::{Graph, Node, NodeKind, StateWrite, ValueId};
use smallvec::SmallVec;

/// One step of the plan.
pub struct Step {
    pub node: Node,
    /// Values whose last use is this step (released after it).
    pub frees: SmallVec<[ValueId; 4]>,
    /// For each input: it dies here and nothing else keeps it, so its buffer may be reused.
    pub donate: SmallVec<[bool; 4]>,
}

/// The plan of a graph.
pub struct Plan {
    pub steps: Vec<Step>,
    /// The graph leaves a dim unknown, so the shape rules checked while tracing held only for
    /// the known dims: each step re-checks its rule on the concrete shapes before its kernel
    /// runs, and state writes are checked before any is applied. False for graphs with every
    /// shape known, which then pay nothing for it.
    pub checks_shapes: bool,
}

impl Plan {
    pub fn new(g: &Graph) -> Plan {
        let mut last = vec![usize::MAX; g.values.len()];
        for (i, node) in g.nodes.iter().enumerate() {
            node.inputs.iter().for_each(|&v| last[v] = i);
        }
        let kept = kept_values(g);
        let steps = g
            .nodes
            .iter()
            .enumerate()
            .map(|(i, node)| {
                let dies = |v: &ValueId| last[*v] == i && !kept[*v];
                let mut frees: SmallVec<[ValueId; 4]> = node.inputs.iter().copied().filter(dies).collect();
                frees.sort_unstable();
                frees.dedup();
                let donate = node
                    .inputs
                    .iter()
                    .enumerate()
                    .map(|(k, v)| dies(v) && !node.inputs[..k].contains(v) && !node.inputs[k + 1..].contains(v))
                    .collect();
                let donate = if matches!(node.kind, NodeKind::Fused(_)) { donate } else { SmallVec::from_elem(false, node.inputs.len()) };
                Step { node: node.clone(), frees, donate }
            })
            .collect();
        Plan { steps, checks_shapes: has_unknown_dims(g) }
    }
}

/// True if a value of `g` has an unknown dim (subgraphs of control flow decide for themselves
/// when their own plans are made).
fn has_unknown_dims(g: &Graph) -> bool {
    g.values.iter().any(|v| !v.shape.is_known())
}

/// Values that live to the end of the run: outputs and written-back values.
fn kept_values(g: &Graph) -> Vec<bool> {
    let mut keep = vec![false; g.values.len()];
    g.outputs.iter().for_each(|&v| keep[v] = true);
    for w in &g.writes {
        match w {
            StateWrite::Data { value, .. } | StateWrite::Grad { value: Some(value), .. } => keep[*value] = true,
            StateWrite::Grad { value: None, .. } => {}
        }
    }
    keep
}
