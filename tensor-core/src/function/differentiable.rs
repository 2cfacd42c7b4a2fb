//! Gradients through graph calls. A call whose inputs (arguments or captured tensors, such as
//! parameters) require grad, with grad mode on, records one grad node for all its outputs, named
//! after the function (`stepBackward` for `step`). Its formula is itself a concrete function:
//! the vector-Jacobian product of the forward graph, traced once per (which inputs need a
//! gradient, which outputs received one, input shapes) by replaying the traced forward graph
//! through the op dispatch and taking `grad_with` on it — so the backward is optimized and
//! cached like any graph, runs the formulas an eager backward runs (the same bits), and,
//! being a graph call itself, is differentiated again the same way (`create_graph`).
//!
//! Only graphs that compute are differentiable from outside: a graph with state writes
//! (in-place updates, `.grad` accumulation, a generator's draws) or control-flow nodes runs as
//! before, its outputs requiring no grad. Under `no_grad`, or when no input requires grad, a
//! call records nothing and allocates nothing more.

use super::concrete::ConcreteFunction;
use crate::autograd::{grad_with, is_grad_enabled, GradModeGuard};
use crate::error::{Error, Result};
use crate::graph::{Graph, InputSource, NodeKind};
use crate::ops::dispatch::apply;
use crate::shape::Shape;
use crate::tensor::grad_node::{record_many, Backward, BackwardCtx, InputGrads, Saves};
use crate::tensor::Tensor;
use std::collections::HashSet;
use std::sync::{Arc, Mutex, OnceLock};

/// True when `g` only computes its outputs from its slots' data (op nodes and prints), so
/// replaying it through the dispatch rebuilds exactly what the body recorded eagerly.
pub(crate) fn is_differentiable(g: &Graph) -> bool {
    g.writes.is_empty()
        && g.inputs.iter().all(|(_, s)| matches!(s, InputSource::Data(_)))
        && g.nodes.iter().all(|n| matches!(n.kind, NodeKind::Op(_) | NodeKind::Print(_)))
}

/// True when a call on `slots` must record a grad node (the cheap test every call makes).
pub(crate) fn needs_record(slots: &[&Tensor]) -> bool {
    is_grad_enabled() && slots.iter().any(|t| t.requires_grad_raw())
}

/// `name` + `Backward`, kept for the program's life (one string per function name).
pub(crate) fn grad_fn_name(name: &str) -> &'static str {
    static NAMES: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let full = format!("{name}Backward");
    let mut names = NAMES.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    if let Some(&known) = names.get(full.as_str()) {
        return known;
    }
    let leaked: &'static str = Box::leak(full.into_boxed_str());
    names.insert(leaked);
    leaked
}

/// The outputs of a function graph `g` (see `is_differentiable`) computed through the op
/// dispatch from its slots' tensors: autograd records every op as the eager body would.
pub(crate) fn replay(g: &Graph, slots: &[&Tensor]) -> Result<Vec<Tensor>> {
    let mut vals: Vec<Option<Tensor>> = vec![None; g.values.len()];
    for (v, src) in &g.inputs {
        let InputSource::Data(slot) = src else { unreachable!("a differentiable graph reads data only") };
        vals[*v] = Some(slots[*slot].clone());
    }
    for (v, s) in &g.constants {
        vals[*v] = Some(Tensor::from_storage(s.clone()));
    }
    for node in &g.nodes {
        let NodeKind::Op(op) = &node.kind else { continue }; // prints: not replayed
        let ins: Vec<&Tensor> = node.inputs.iter().map(|&v| vals[v].as_ref().expect("defined before use")).collect();
        let out = apply(op.clone(), &ins)?;
        vals[node.outputs[0]] = Some(out);
    }
    Ok(g.outputs.iter().map(|&v| vals[v].clone().expect("outputs are defined")).collect())
}

/// The vector-Jacobian product of `g` at `slots`: the gradients of the slots marked in
/// `needs` (in order, `None` where no output depends on one), for the gradients `gys` of the
/// outputs marked in `outs`.
fn vjp(g: &Graph, slots: &[&Tensor], needs: &[bool], outs: &[bool], gys: &[&Tensor], create_graph: bool) -> Result<Vec<Option<Tensor>>> {
    let _record = GradModeGuard::set(true);
    let replayed = replay(g, slots)?;
    let roots: Vec<&Tensor> = replayed.iter().zip(outs).filter(|(_, o)| **o).map(|(t, _)| t).collect();
    let targets: Vec<&Tensor> = slots.iter().zip(needs).filter(|(_, n)| **n).map(|(t, _)| *t).collect();
    grad_with(&roots, gys, &targets, create_graph)
}

/// One traced backward: its key, the concrete function, and what its outputs stand for.
pub(crate) struct BackwardEntry {
    needs: Vec<bool>,
    outs: Vec<bool>,
    shapes: Vec<Shape>,
    /// The backward graph; arguments: the forward's slots, then the gradients of the outputs
    /// marked in `outs`.
    pub(crate) function: ConcreteFunction,
    /// For each slot that needs a gradient, whether the function returns one for it.
    gives: Vec<bool>,
    /// The forward slots the optimized backward reads: changing one in place after the call
    /// makes the saved call stale (`Error::SavedTensorModified`).
    reads: Vec<usize>,
}

/// The backward functions of one concrete function, traced on first need.
#[derive(Default)]
pub(crate) struct BackwardCache {
    entries: Mutex<Vec<Arc<BackwardEntry>>>,
}

impl BackwardCache {
    /// The backward functions traced so far, in trace order.
    pub(crate) fn functions(&self) -> Vec<ConcreteFunction> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner()).iter().map(|e| e.function.clone()).collect()
    }

    /// The entry for this key, traced if there is none.
    fn get_or_trace(
        &self,
        forward: &ConcreteFunction,
        needs: &[bool],
        outs: &[bool],
        slots: &[&Tensor],
        gys: &[&Tensor],
    ) -> Result<Arc<BackwardEntry>> {
        let same = |e: &BackwardEntry| e.needs == needs && e.outs == outs && e.shapes.iter().zip(slots).all(|(s, t)| *s == t.shape());
        if let Some(e) = self.entries.lock().unwrap_or_else(|e| e.into_inner()).iter().find(|e| same(e)) {
            return Ok(e.clone());
        }
        // Traced outside the lock: the trace may itself call graph functions.
        let entry = Arc::new(trace_backward(forward, needs, outs, slots, gys)?);
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(e) = entries.iter().find(|e| same(e)) {
            return Ok(e.clone());
        }
        entries.push(entry.clone());
        Ok(entry)
    }
}

/// Traces the vector-Jacobian product of `forward`'s graph into a concrete function.
fn trace_backward(forward: &ConcreteFunction, needs: &[bool], outs: &[bool], slots: &[&Tensor], gys: &[&Tensor]) -> Result<BackwardEntry> {
    let g = forward.traced_graph();
    // Fresh leaves stand for the arguments: the backward's own history starts at them.
    let leaves: Vec<Tensor> =
        slots.iter().zip(needs).map(|(t, &n)| if n { t.detach().requires_grad_(true) } else { Ok(t.detach()) }).collect::<Result<_>>()?;
    let grads: Vec<Tensor> = gys.iter().map(|t| t.detach()).collect();
    let mut names: Vec<String> = g.slot_names.clone();
    names.extend(outs.iter().enumerate().filter(|(_, o)| **o).map(|(k, _)| format!("grad_output{k}")));
    let args: Vec<(&str, &Tensor)> = names.iter().map(String::as_str).zip(leaves.iter().chain(&grads)).collect();
    let shapes: Vec<Shape> = args.iter().map(|(_, t)| t.shape()).collect();
    let mut gives = Vec::new();
    let name = format!("{}_backward", forward.name());
    let function = ConcreteFunction::trace_with_shapes(&name, &args, &shapes, forward.is_optimized(), || {
        let leaf_refs: Vec<&Tensor> = leaves.iter().collect();
        let grad_refs: Vec<&Tensor> = grads.iter().collect();
        let found = vjp(g, &leaf_refs, needs, outs, &grad_refs, false)?;
        gives = found.iter().map(Option::is_some).collect();
        Ok(found.into_iter().flatten().collect())
    })?;
    let reads = function
        .graph()
        .inputs
        .iter()
        .filter_map(|(_, s)| if let InputSource::Data(i) = s { (*i < slots.len()).then_some(*i) } else { None })
        .collect();
    Ok(BackwardEntry { needs: needs.to_vec(), outs: outs.to_vec(), shapes: slots.iter().map(|t| t.shape()).collect(), function, gives, reads })
}

/// Records the grad node of a call of `function` on `slots` that gave `outputs`.
pub(crate) fn record_call(function: &ConcreteFunction, slots: &[&Tensor], outputs: &[Tensor]) {
    let formula = CallBackward { function: function.clone(), inputs: slots.iter().map(|t| ((*t).clone(), t.version())).collect() };
    let outs: Vec<&Tensor> = outputs.iter().collect();
    record_many(formula, slots, &outs);
}

/// The grad node of one graph call: the inputs it read (with their versions then), and the
/// function, whose backward cache holds the traced vector-Jacobian products.
struct CallBackward {
    function: ConcreteFunction,
    inputs: Vec<(Tensor, u64)>,
}

impl Backward for CallBackward {
    fn name(&self) -> &'static str {
        self.function.grad_fn_name()
    }

    /// Claims a saved input so that, as for an eager body, a second backward without
    /// `retain_graph` is `Error::GraphReleased` (the engine checks it before the formula).
    fn saves(&self) -> Saves {
        Saves::inputs(1)
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<InputGrads> {
        let needs: Vec<bool> = (0..self.inputs.len()).map(|i| ctx.needs_grad(i)).collect();
        let outs: Vec<bool> = grads.iter().map(Option::is_some).collect();
        let slots: Vec<&Tensor> = self.inputs.iter().map(|(t, _)| t).collect();
        let gys: Vec<&Tensor> = grads.iter().flatten().collect();
        let found = if crate::trace::is_active() {
            // A backward traced into another graph (the call's output was captured there):
            // the product is traced inline, on leaves standing for the inputs.
            self.check_versions(0..slots.len())?;
            let leaves: Vec<Tensor> =
                slots.iter().zip(&needs).map(|(t, &n)| if n { t.detach().requires_grad_(true) } else { Ok(t.detach()) }).collect::<Result<_>>()?;
            let refs: Vec<&Tensor> = leaves.iter().collect();
            vjp(self.function.traced_graph(), &refs, &needs, &outs, &gys, ctx.create_graph())?
        } else {
            let entry = self.function.backward_cache().get_or_trace(&self.function, &needs, &outs, &slots, &gys)?;
            self.check_versions(entry.reads.iter().copied())?;
            let mut args = slots.clone();
            args.extend(gys.iter().copied());
            // A graph call itself: with create_graph it records its own node.
            let mut results = entry.function.call(&args)?.into_iter();
            entry.gives.iter().map(|&g| if g { results.next() } else { None }).collect()
        };
        let mut found = found.into_iter();
        Ok(needs.iter().map(|&n| if n { found.next().flatten() } else { None }).collect())
    }
}

impl CallBackward {
    /// `Error::SavedTensorModified` if one of these inputs changed in place since the call.
    fn check_versions(&self, slots: impl Iterator<Item = usize>) -> Result<()> {
        for i in slots {
            let (t, expected) = &self.inputs[i];
            let found = t.version();
            if found != *expected {
                return Err(Error::SavedTensorModified { node: self.name(), expected: *expected, found });
            }
        }
        Ok(())
    }
}
