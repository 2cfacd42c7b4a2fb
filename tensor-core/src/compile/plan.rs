//! The execution plan, computed once per concrete function: the steps in order, for each
//! step the values that die there (freed at once) and the dying inputs a fused step may write
//! its outputs into, whether the run must re-check shapes (graphs with unknown dims), and
//! whether it runs on a worker thread (graphs whose kernels go parallel).

use crate::graph::{Graph, Node, NodeKind, StateWrite, ValueId};
use crate::kernels::{matmul::PARALLEL_FLOPS, parallel::PAR_MIN_LEN};
use crate::ops::{LinalgOp, Op};
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
    /// Some kernel of the graph may go parallel, so the run is handed to a worker thread
    /// (`kernels::parallel::on_worker`). False for small graphs, which run on the caller's
    /// thread and pay nothing for the hand-over.
    pub on_worker: bool,
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
        let checks_shapes = has_unknown_dims(g);
        Plan { steps, checks_shapes, on_worker: checks_shapes || goes_parallel(g) }
    }
}

/// True if some kernel of `g` may use several threads: a value of at least `PAR_MIN_LEN`
/// elements (elementwise kernels, reductions, convolutions), or a product of at least
/// `PARALLEL_FLOPS` multiply-adds.
fn goes_parallel(g: &Graph) -> bool {
    let numel = |v: ValueId| g.values[v].shape.numel();
    let large_product = |n: &Node| {
        let anchor = match &n.kind {
            NodeKind::Op(op) => op,
            NodeKind::Epilogue(e) => &e.anchor,
            _ => return false,
        };
        // m·k·n of a 2-d product is the square root of the operands' and output's sizes.
        let sizes = || (numel(n.inputs[0]) as f64) * (numel(n.inputs[1]) as f64) * (numel(n.outputs[0]) as f64);
        matches!(anchor, Op::Linalg(LinalgOp::Matmul { .. })) && sizes().sqrt() >= PARALLEL_FLOPS as f64
    };
    g.values.iter().any(|v| v.shape.numel() >= PAR_MIN_LEN) || g.nodes.iter().any(large_product)
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
