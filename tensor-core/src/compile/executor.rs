//! Runs a graph on concrete slots with the same kernels eager dispatch uses. Each value is
//! freed after its last use; state writes are applied after the run, in order.

use crate::error::Result;
use crate::graph::{Graph, InputSource, NodeKind, StateWrite};
use crate::ops::{BinaryOp, Op};
use crate::storage::Storage;
use crate::tensor::{Tensor, Value};

/// A graph prepared to run: the (optimized) graph and, per node, the values that die there.
pub struct Executable {
    graph: Graph,
    /// For each node, the values whose last use it is.
    frees: Vec<Vec<usize>>,
}

impl Executable {
    /// Prepares `graph` (optimizing it unless `optimize` is false).
    pub fn new(graph: &Graph, _optimize: bool) -> Executable {
        let graph = graph.clone();
        let frees = last_uses(&graph);
        Executable { graph, frees }
    }

    /// The graph that runs.
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// Runs on `slots` (argument leaves, then captures), applies the writes, returns outputs.
    pub fn run(&self, slots: &[&Tensor]) -> Result<Vec<Tensor>> {
        let g = &self.graph;
        let mut values: Vec<Option<Storage>> = vec![None; g.values.len()];
        for (v, src) in &g.inputs {
            values[*v] = Some(read_input(slots, *src)?);
        }
        for (v, s) in &g.constants {
            values[*v] = Some(s.clone());
        }
        for (node, frees) in g.nodes.iter().zip(&self.frees) {
            let inputs: Vec<&Storage> = node.inputs.iter().map(|&v| values[v].as_ref().expect("defined before use")).collect();
            let out = run_node(&node.kind, &inputs, slots)?;
            for (&v, s) in node.outputs.iter().zip(out) {
                values[v] = Some(s);
            }
            for &v in frees {
                values[v] = None;
            }
        }
        let outputs: Vec<Tensor> = g.outputs.iter().map(|&v| Tensor::from_storage(values[v].clone().expect("outputs are kept"))).collect();
        for w in &g.writes {
            apply_write(w, &values, slots);
        }
        Ok(outputs)
    }
}

fn read_input(slots: &[&Tensor], src: InputSource) -> Result<Storage> {
    match src {
        InputSource::Data(s) => slots[s].storage("graph input"),
        InputSource::Grad(s) => slots[s].grad_slot().grad.clone().expect("presence checked by the call's guards").storage("graph input"),
    }
}

fn run_node(kind: &NodeKind, inputs: &[&Storage], slots: &[&Tensor]) -> Result<Vec<Storage>> {
    match kind {
        NodeKind::Op(op) => Ok(vec![op.compute(inputs)?]),
        NodeKind::Print(pieces) => {
            let tensors: Vec<Tensor> = inputs.iter().map(|s| Tensor::from_storage((*s).clone())).collect();
            println!("{}", crate::trace::render_pieces(pieces, &tensors));
            Ok(vec![])
        }
        NodeKind::AccumulateGrad { slot } => {
            let old = slots[*slot].grad_slot().grad.clone();
            match old {
                // The same kernel eager accumulation uses: `old + g`.
                Some(o) => Ok(vec![Op::Binary(BinaryOp::Add).compute(&[&o.storage("accumulate_grad")?, inputs[0]])?]),
                None => Ok(vec![inputs[0].clone()]),
            }
        }
        NodeKind::Cond { .. } | NodeKind::While { .. } => unimplemented!("control flow arrives with the control-flow issue"),
    }
}

fn apply_write(w: &StateWrite, values: &[Option<Storage>], slots: &[&Tensor]) {
    let get = |v: usize| values[v].clone().expect("written values are kept");
    match w {
        StateWrite::Data { slot, value } => slots[*slot].set_value(Value::Concrete(get(*value))),
        StateWrite::Grad { slot, value } => slots[*slot].set_grad_raw(value.map(|v| Tensor::from_storage(get(v)))),
    }
}

/// For each node, the values used for the last time there (never outputs or written values).
fn last_uses(g: &Graph) -> Vec<Vec<usize>> {
    let mut last = vec![usize::MAX; g.values.len()];
    for (i, node) in g.nodes.iter().enumerate() {
        for &v in &node.inputs {
            last[v] = i;
        }
    }
    let mut keep = vec![false; g.values.len()];
    g.outputs.iter().for_each(|&v| keep[v] = true);
    for w in &g.writes {
        match w {
            StateWrite::Data { value, .. } => keep[*value] = true,
            StateWrite::Grad { value: Some(v), .. } => keep[*v] = true,
            StateWrite::Grad { value: None, .. } => {}
        }
    }
    let mut frees = vec![Vec::new(); g.nodes.len()];
    for (v, &i) in last.iter().enumerate() {
        if i != usize::MAX && !keep[v] {
            frees[i].push(v);
        }
    }
    frees
}
