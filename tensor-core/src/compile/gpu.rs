//! Runs a plan on a GPU (feature `cuda`): the same steps as the CPU executor, with each
//! value a device buffer. Fused programs become one generated CUDA kernel each, products go
//! to cuBLAS (an epilogue's program then runs as one kernel on the product), every other op
//! runs as it runs eagerly on the GPU, and the state writes land on the caller's tensors as
//! device data. The graph is the one the CPU runs: only the kernels differ.
//!
//! Not yet: one planned arena and the capture of the whole call as a CUDA graph (each value
//! is its own allocation, from the driver's stream-ordered pool), and `cond`/`while_loop`
//! nodes, which are an `Err` naming them.

use super::executor::Outputs;
use super::plan::Plan;
use crate::cuda::DeviceStorage;
use crate::device::Device;
use crate::error::{Error, Result};
use crate::graph::{Graph, InputSource, Node, NodeKind, StateWrite};
use crate::kernels::fused::FusedProgram;
use crate::ops::device as gpu_ops;
use crate::ops::{BinaryOp, ElementwiseOp, Op};
use crate::tensor::{Tensor, Value};
use smallvec::SmallVec;

/// The GPU the call's tensor slots live on, if any (none: the CPU executor runs it).
pub(super) fn device_of(graph: &Graph, slots: &[&Tensor]) -> Result<Option<Device>> {
    if !crate::tensor::any_on_device() {
        return Ok(None);
    }
    let read: SmallVec<[&Tensor; 8]> = graph
        .inputs
        .iter()
        .filter_map(|(_, src)| match *src {
            InputSource::Data(s) | InputSource::Grad(s) => Some(slots[s]),
            InputSource::Param(_) => None,
        })
        .collect();
    gpu_ops::placement("graph call", &read)
}

/// Runs the plan's steps on `device`, applies the writes, returns the outputs.
pub(super) fn run(graph: &Graph, plan: &Plan, slots: &[&Tensor], device: Device) -> Result<Outputs> {
    let mut values: Vec<Option<DeviceStorage>> = vec![None; graph.values.len()];
    for (v, src) in &graph.inputs {
        values[*v] = Some(read_input(slots, *src, device)?);
    }
    for (v, s) in &graph.constants {
        values[*v] = Some(crate::cuda::upload(s, device)?);
    }
    for step in &plan.steps {
        let node = &step.node;
        let outs = {
            let inputs: SmallVec<[&DeviceStorage; 4]> = node.inputs.iter().map(|&v| values[v].as_ref().expect("defined before use")).collect();
            run_node(node, &inputs, slots, device)?
        };
        for (&v, s) in node.outputs.iter().zip(outs) {
            values[v] = Some(s);
        }
        for &v in &step.frees {
            values[v] = None;
        }
    }
    let get = |v: usize| values[v].clone().expect("outputs and written values are kept");
    let outputs = graph.outputs.iter().map(|&v| tensor_of(get(v))).collect();
    for w in &graph.writes {
        match w {
            StateWrite::Data { slot, value } => slots[*slot].set_value(Value::Device(get(*value))),
            StateWrite::Grad { slot, value } => slots[*slot].set_grad_raw(value.map(|v| tensor_of(get(v)))),
        }
    }
    Ok(outputs)
}

fn tensor_of(d: DeviceStorage) -> Tensor {
    let (dtype, shape) = (d.dtype, d.shape.clone());
    Tensor::from_value(Value::Device(d), dtype, shape)
}

fn read_input(slots: &[&Tensor], src: InputSource, device: Device) -> Result<DeviceStorage> {
    match src {
        InputSource::Data(s) => gpu_ops::device_data(slots[s], "graph input", device),
        InputSource::Grad(s) => {
            let g = slots[s].grad_slot().grad.clone().expect("presence checked by the call's guards");
            gpu_ops::device_data(&g, "graph input", device)
        }
        InputSource::Param(_) => Err(not_yet("a subgraph parameter")),
    }
}

fn not_yet(what: &str) -> Error {
    Error::Device { op: "graph call", reason: format!("{what} does not run on the GPU yet; call the function on CPU tensors") }
}

fn run_node(node: &Node, inputs: &[&DeviceStorage], slots: &[&Tensor], device: Device) -> Result<SmallVec<[DeviceStorage; 1]>> {
    let one = |s: DeviceStorage| smallvec::smallvec![s];
    match &node.kind {
        NodeKind::Op(op) => Ok(one(gpu_ops::compute_on(op, inputs)?)),
        NodeKind::Fused(p) => Ok(gpu_ops::fused_on(p, inputs)?.into_iter().collect()),
        NodeKind::Epilogue(e) => {
            let (anchor_inputs, others) = inputs.split_at(e.arity);
            let product = gpu_ops::compute_on(&e.anchor, anchor_inputs)?;
            let program_inputs = program_inputs(&e.program, e.slot, &product, others);
            let mut outs: SmallVec<[DeviceStorage; 1]> = SmallVec::new();
            if e.keep_anchor {
                outs.push(product.clone());
            }
            outs.extend(gpu_ops::fused_on(&e.program, &program_inputs)?);
            Ok(outs)
        }
        NodeKind::AccumulateGrad { slot } => {
            let old = slots[*slot].grad_slot().grad.clone();
            match old {
                // The same kernel eager accumulation uses: `old + g`.
                Some(o) => {
                    let old = gpu_ops::device_data(&o, "accumulate_grad", device)?;
                    let add: Op = ElementwiseOp::Binary(BinaryOp::Add).into();
                    Ok(one(gpu_ops::compute_on(&add, &[&old, inputs[0]])?))
                }
                None => Ok(one(inputs[0].clone())),
            }
        }
        NodeKind::Print(pieces) => {
            let tensors: Vec<Tensor> = inputs.iter().map(|d| tensor_of((*d).clone())).collect();
            println!("{}", crate::graph::render(pieces, &tensors));
            Ok(SmallVec::new())
        }
        NodeKind::Cond { .. } | NodeKind::While { .. } => Err(not_yet("cond and while_loop")),
    }
}

/// The program's inputs in order: the product at `slot`, the node's other inputs around it.
fn program_inputs<'a>(p: &FusedProgram, slot: usize, product: &'a DeviceStorage, others: &[&'a DeviceStorage]) -> SmallVec<[&'a DeviceStorage; 4]> {
    let mut rest = others.iter();
    (0..p.inputs.len()).map(|k| if k == slot { product } else { *rest.next().expect("one input per program slot") }).collect()
}
