//! Runs a plan on concrete slots with the same kernels eager dispatch uses. A call does no
//! graph analysis: it walks the precomputed steps, frees each value at its last use, lets
//! fused steps write into dying buffers, and applies the state writes after the run.

use super::control::ControlPlan;
use super::plan::Plan;
use crate::error::Result;
use crate::graph::{Graph, InputSource, NodeKind, StateWrite};
use crate::kernels::fused::Input;
use crate::ops::{BinaryOp, Op};
use crate::storage::Storage;
use crate::tensor::{Tensor, Value};
use smallvec::SmallVec;
use std::sync::Mutex;

/// A graph prepared to run: optimized (unless asked not to) and planned.
pub struct Executable {
    graph: Graph,
    plan: Plan,
    /// For each step that is a `Cond` or `While` node, its planned subgraphs.
    controls: Vec<Option<ControlPlan>>,
    /// Value tables of finished runs, reused so a call does not allocate one.
    tables: Mutex<Vec<Vec<Option<Storage>>>>,
}

impl Executable {
    /// Prepares `graph`, optimizing it unless `optimize` is false.
    pub fn new(graph: &Graph, optimize: bool) -> Executable {
        let graph = if optimize { super::optimize(graph, None) } else { graph.clone() };
        let plan = Plan::new(&graph);
        let controls = plan.steps.iter().map(|s| ControlPlan::new(&s.node.kind, optimize)).collect();
        Executable { graph, plan, controls, tables: Mutex::new(Vec::new()) }
    }

    /// The graph that runs.
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// Runs on `slots` (argument leaves, then captures), applies the writes, returns outputs.
    pub fn run(&self, slots: &[&Tensor]) -> Result<Vec<Tensor>> {
        let outputs = self.with_table(|values| self.run_steps(slots, &[], values))?;
        Ok(outputs.into_iter().map(Tensor::from_storage).collect())
    }

    /// Runs a subgraph on its parameters (a cond branch, a loop's condition or body).
    pub(crate) fn run_params(&self, params: &[Storage]) -> Result<Vec<Storage>> {
        self.with_table(|values| self.run_steps(&[], params, values))
    }

    /// Runs `f` with a value table sized for this graph, taken from the pool and returned.
    fn with_table<R>(&self, f: impl FnOnce(&mut [Option<Storage>]) -> R) -> R {
        let mut values = self.tables.lock().unwrap_or_else(|e| e.into_inner()).pop().unwrap_or_default();
        values.resize(self.graph.values.len(), None);
        let result = f(&mut values);
        values.iter_mut().for_each(|v| *v = None);
        self.tables.lock().unwrap_or_else(|e| e.into_inner()).push(values);
        result
    }

    fn run_steps(&self, slots: &[&Tensor], params: &[Storage], values: &mut [Option<Storage>]) -> Result<Vec<Storage>> {
        let g = &self.graph;
        for (v, src) in &g.inputs {
            values[*v] = Some(read_input(slots, params, *src)?);
        }
        for (v, s) in &g.constants {
            values[*v] = Some(s.clone());
        }
        for (step, control) in self.plan.steps.iter().zip(&self.controls) {
            let node = &step.node;
            let outs = match &node.kind {
                _ if control.is_some() => {
                    let inputs: SmallVec<[&Storage; 4]> = node.inputs.iter().map(|&v| values[v].as_ref().expect("defined before use")).collect();
                    control.as_ref().expect("checked").run(&inputs)?
                }
                NodeKind::Fused(p) => {
                    let mut taken: SmallVec<[Option<Storage>; 4]> =
                        node.inputs.iter().zip(&step.donate).map(|(&v, &give)| if give { values[v].take() } else { None }).collect();
                    let inputs = node.inputs.iter().zip(taken.iter_mut()).map(|(&v, t)| match t.take() {
                        Some(s) => Input::Dying(s),
                        None => Input::Shared(values[v].as_ref().expect("defined before use")),
                    });
                    p.run(inputs)
                }
                kind => {
                    let inputs: SmallVec<[&Storage; 4]> = node.inputs.iter().map(|&v| values[v].as_ref().expect("defined before use")).collect();
                    run_node(kind, &inputs, slots)?
                }
            };
            for (&v, s) in node.outputs.iter().zip(outs) {
                values[v] = Some(s);
            }
            for &v in &step.frees {
                values[v] = None;
            }
        }
        let outputs = g.outputs.iter().map(|&v| values[v].clone().expect("outputs are kept")).collect();
        for w in &g.writes {
            apply_write(w, values, slots);
        }
        Ok(outputs)
    }
}

fn read_input(slots: &[&Tensor], params: &[Storage], src: InputSource) -> Result<Storage> {
    match src {
        InputSource::Data(s) => slots[s].storage("graph input"),
        InputSource::Grad(s) => slots[s].grad_slot().grad.clone().expect("presence checked by the call's guards").storage("graph input"),
        InputSource::Param(k) => Ok(params[k].clone()),
    }
}

fn run_node(kind: &NodeKind, inputs: &[&Storage], slots: &[&Tensor]) -> Result<SmallVec<[Storage; 1]>> {
    let one = |s: Storage| smallvec::smallvec![s];
    match kind {
        NodeKind::Op(op) => Ok(one(op.compute(inputs)?)),
        NodeKind::Print(pieces) => {
            let tensors: Vec<Tensor> = inputs.iter().map(|s| Tensor::from_storage((*s).clone())).collect();
            println!("{}", crate::trace::render_pieces(pieces, &tensors));
            Ok(SmallVec::new())
        }
        NodeKind::AccumulateGrad { slot } => {
            let old = slots[*slot].grad_slot().grad.clone();
            match old {
                // The same kernel eager accumulation uses: `old + g`.
                Some(o) => Ok(one(Op::Binary(BinaryOp::Add).compute(&[&o.storage("accumulate_grad")?, inputs[0]])?)),
                None => Ok(one(inputs[0].clone())),
            }
        }
        NodeKind::Fused(_) => unreachable!("run by the caller"),
        NodeKind::Cond { .. } | NodeKind::While { .. } => unreachable!("run through their control plans"),
    }
}

fn apply_write(w: &StateWrite, values: &[Option<Storage>], slots: &[&Tensor]) {
    let get = |v: usize| values[v].clone().expect("written values are kept");
    match w {
        StateWrite::Data { slot, value } => slots[*slot].set_value(Value::Concrete(get(*value))),
        StateWrite::Grad { slot, value } => slots[*slot].set_grad_raw(value.map(|v| Tensor::from_storage(get(v)))),
    }
}
