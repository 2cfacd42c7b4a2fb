//! Gradients through graph calls. A call whose inputs (arguments or captured tensors, such as
//! parameters) require grad, with grad mode on, records one grad node for all its outputs,
//! named after the function (`stepBackward` for `step`).
//!
//! Such a call runs its forward graph *with residuals*: the values the backward needs (what
//! the eager ops would save: `exp`'s output, operands made inside the call) come back as
//! extra outputs and the node keeps them, as an eager node keeps its saved tensors. The
//! backward is a concrete function of the slots the formulas read, the output gradients and
//! the residuals — the tangent half of the joint function (`joint.rs`), so it recomputes
//! nothing, and an input changed in place after the call is an error exactly where it is
//! one eagerly (an input `mul` or `log` saved), and fine where eager is fine (`exp` saved its
//! output). Both graphs are optimized and cached on the forward's `ConcreteFunction` (per
//! which slots need a gradient and their shapes, and per which outputs receive one).
//!
//! The node has one edge per *use* of each input inside the call (a use inside a `cond`'s
//! branch included), and the backward returns each use's contribution on its own, in the order
//! the eager walk delivers them; the engine then adds them to whatever else flows into that
//! input in the eager order, so an input used both inside and outside the call gets the eager
//! bits (see docs/ARCHITECTURE.md for the cases where the walk orders differ). Uses eager code
//! would not have made (an untaken branch's) are dropped (`gates.rs`).
//!
//! Being a graph call itself, the backward is differentiated again the same way
//! (`create_graph`): the residuals are outputs of the forward's node, so gradients reach the
//! inputs through them too.
//!
//! Graphs with `cond`/`while_loop` nodes are differentiable too: the control layer, below this
//! one, replays them (its one replay, `control::replay_uses`, see `slot_uses.rs`), and their gradients are themselves a `cond` (on
//! the same predicate) or a `while_loop` (walking the saved iterations back) in the backward
//! graph. A loop's saved iterations are residuals like any other, and so is a slot the call
//! updates in place under a branch (the backward's branch replay reads it as the call did).
//!
//! Graphs that read or write a `.grad` (`backward()` or `zero_grad()` inside the function) are
//! not differentiable from outside, nor is a call that updates in place an input requiring
//! grad: such a call runs as before; when an input requires grad (with grad mode on), its
//! outputs then require grad and their `backward()` is `Error::NotDifferentiable` naming the
//! function (see `record_failed`). Under `no_grad`, or when no input requires grad, a call
//! runs the plain forward graph, records nothing and allocates nothing more.

mod backward_cache;
mod gates;
mod joint;
mod slot_uses;

pub(crate) use backward_cache::BackwardCache;

use super::concrete::ConcreteFunction;
use crate::autograd::is_grad_enabled;
use crate::compile::Outputs;
use crate::error::{Error, Result};
use crate::graph::{Graph, InputSource, NodeKind, StateWrite};
use crate::tensor::grad_node::{record_many, Backward, BackwardCtx, InputGrads, Saves};
use crate::tensor::{Tensor, Value};
use backward_cache::ForwardPlan;
use gates::{MadeWhen, Use};
use std::collections::HashSet;
use std::sync::{Arc, Mutex, OnceLock};

/// Why calls of `g` cannot be differentiated from outside, or `None` when they can: `g`
/// computes its outputs from its slots' data with op nodes, control-flow nodes (`cond`,
/// `while_loop`) and prints, and may update slots in place (a buffer, a generator's state),
/// since replaying its nodes without the writes still rebuilds what the body recorded eagerly.
pub(crate) fn no_gradient(g: &Graph) -> Option<&'static str> {
    let reads_grad = g.inputs.iter().any(|(_, s)| !matches!(s, InputSource::Data(_)))
        || g.writes.iter().any(|w| matches!(w, StateWrite::Grad { .. }))
        || g.nodes.iter().any(|n| matches!(n.kind, NodeKind::AccumulateGrad { .. }));
    reads_grad.then_some(GRAD_STATE)
}

const GRAD_STATE: &str = " from outside the call: its graph reads or writes a .grad (a backward() or zero_grad() inside the function); take the gradient inside the function and read its outputs as values (item(), detach())";
const WRITES_GRAD_INPUT: &str =
    " from outside the call: it updated in place an input that requires grad; update a detached tensor, or take the gradient inside the function";

/// Why this call of `g` on `slots` has no gradient: `no_gradient`, or an in-place update
/// of a slot that requires grad (whose history the write-back does not carry).
fn call_no_gradient(function: &ConcreteFunction, slots: &[&Tensor]) -> Option<&'static str> {
    let writes_grad_input =
        || function.traced_graph().writes.iter().any(|w| matches!(w, StateWrite::Data { slot, .. } if slots[*slot].requires_grad_raw()));
    function.no_gradient().or_else(|| writes_grad_input().then_some(WRITES_GRAD_INPUT))
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

/// Runs a call of `function` on `slots` that records a grad node (`needs_record`): the
/// forward with residuals, then the node. Returns the function's outputs.
pub(crate) fn run_recording(function: &ConcreteFunction, slots: &[&Tensor]) -> Result<Outputs> {
    if let Some(detail) = call_no_gradient(function, slots) {
        let outputs = function.executable().run(slots)?;
        record_failed(function, slots, &outputs, Error::NotDifferentiable { op: function.grad_fn_name(), detail });
        return Ok(outputs);
    }
    let plan = match function.backward_cache().plan_for(function, slots) {
        Ok(plan) => plan,
        // No backward can be traced: run as without a gradient; backward() gives the error.
        Err(e) => {
            let outputs = function.executable().run(slots)?;
            record_failed(function, slots, &outputs, e);
            return Ok(outputs);
        }
    };
    // The versions the slots had when the graph read them: a slot the call itself updates
    // in place and the backward reads is then stale, as an eagerly saved input would be.
    let inputs: Vec<(Tensor, u64)> = slots.iter().map(|t| ((*t).clone(), t.version())).collect();
    let mut outputs = plan.forward.run(slots)?;
    let residuals: Vec<Tensor> = outputs.drain(plan.num_outputs..).collect();
    record_call(function, plan, inputs, &outputs, &residuals);
    Ok(outputs)
}

/// Records the grad node of a call on `inputs` that gave `outputs` and `residuals`.
fn record_call(function: &ConcreteFunction, plan: Arc<ForwardPlan>, inputs: Vec<(Tensor, u64)>, outputs: &[Tensor], residuals: &[Tensor]) {
    let edges: Vec<&Tensor> = inputs.iter().zip(&plan.edges).flat_map(|((t, _), &n)| std::iter::repeat_n(t, n)).collect();
    let node_outputs: Vec<&Tensor> = outputs.iter().chain(residuals).collect();
    let kept = Kept { inputs: inputs.clone(), residuals: residuals.iter().map(|t| t.read_value().clone()).collect() };
    let formula = CallBackward { function: function.clone(), plan, kept: Mutex::new(Some(kept)) };
    record_many(formula, &edges, &node_outputs);
}

/// Records a node whose backward is `error` (a call whose backward could not be traced).
fn record_failed(function: &ConcreteFunction, slots: &[&Tensor], outputs: &[Tensor], error: Error) {
    let outs: Vec<&Tensor> = outputs.iter().collect();
    record_many(Unsupported { name: function.grad_fn_name(), error }, slots, &outs);
}

/// The grad node of one graph call: the plan whose backward functions it runs, and what the
/// call kept for them until the graph is freed.
struct CallBackward {
    function: ConcreteFunction,
    plan: Arc<ForwardPlan>,
    kept: Mutex<Option<Kept>>,
}

/// What a call keeps for its backward: the slots it read (with their versions then) and the
/// residuals its forward returned (as data, so the node and its outputs do not keep each
/// other alive). Freed, as an eager body's saved tensors are, by a `backward()` without
/// `retain_graph`.
#[derive(Clone)]
struct Kept {
    inputs: Vec<(Tensor, u64)>,
    residuals: Vec<Value>,
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
        // The engine refuses a released node before its formula runs (`saves`).
        let kept = self.kept.lock().unwrap_or_else(|e| e.into_inner()).clone().ok_or(Error::GraphReleased { node: self.name() })?;
        let outs: Vec<bool> = grads.iter().map(Option::is_some).collect();
        let slots: Vec<&Tensor> = kept.inputs.iter().map(|(t, _)| t).collect();
        let entry = self.plan.backward_for(self.function.backward_cache(), &self.function, &outs, &slots)?;
        self.check_versions(&kept.inputs, &entry.reads)?;
        let first = self.plan.num_outputs;
        let residuals: Vec<Tensor> = kept.residuals.iter().enumerate().map(|(r, v)| ctx.kept_output(first + r, v.clone())).collect();
        let args: Vec<&Tensor> = slots.iter().copied().chain(grads.iter().flatten()).chain(&residuals).collect();
        let found = if crate::trace::is_active() {
            // A backward traced into another graph (the call's output was captured there):
            // its ops are traced inline.
            slot_uses::replay(entry.function.traced_graph(), &args)?
        } else {
            // A graph call itself: with create_graph it records its own node.
            entry.function.call(&args)?
        };
        let found = drop_unmade(found, &entry.made_when, &residuals);
        Ok(self.per_edge(found, &entry.contributions))
    }

    fn release(&self) -> Vec<Tensor> {
        let kept = self.kept.lock().unwrap_or_else(|e| e.into_inner()).take();
        kept.map(|k| k.inputs.into_iter().map(|(t, _)| t).collect()).unwrap_or_default()
    }
}

impl CallBackward {
    /// `Error::SavedTensorModified` if one of these inputs changed in place since the call.
    fn check_versions(&self, inputs: &[(Tensor, u64)], slots: &[usize]) -> Result<()> {
        for &i in slots {
            let (t, expected) = &inputs[i];
            let found = t.version();
            if found != *expected {
                return Err(Error::SavedTensorModified { node: self.name(), expected: *expected, found });
            }
        }
        Ok(())
    }

    /// The contributions laid out on the node's edges: each slot's edges take its
    /// contributions in delivery order (the engine adds them in edge order).
    fn per_edge(&self, found: Vec<Option<Tensor>>, contributions: &[Use]) -> InputGrads {
        let mut next: Vec<usize> = self.plan.edges.iter().scan(0, |start, &n| Some(std::mem::replace(start, *start + n))).collect();
        let mut grads = InputGrads::from_elem(None, self.plan.edges.iter().sum());
        for (g, u) in found.into_iter().zip(contributions) {
            grads[next[u.slot]] = g;
            next[u.slot] += 1;
        }
        grads
    }
}

/// The contributions of the backward graph, without those of uses the call's eager body would
/// not have made (an untaken branch's, a body that never ran: `gates.rs`).
fn drop_unmade(found: Vec<Tensor>, made_when: &[Option<(MadeWhen, usize)>], residuals: &[Tensor]) -> Vec<Option<Tensor>> {
    let made = |k: usize| made_when[k].and_then(|(when, r)| when.was_made(&residuals[r])).unwrap_or(true);
    found.into_iter().enumerate().map(|(k, g)| made(k).then_some(g)).collect()
}

/// The node of a call whose gradient cannot be taken: its backward is the error.
struct Unsupported {
    name: &'static str,
    error: Error,
}

impl Backward for Unsupported {
    fn name(&self) -> &'static str {
        self.name
    }

    fn backward(&self, _: &BackwardCtx, _: &[Option<Tensor>]) -> Result<InputGrads> {
        Err(self.error.clone())
    }
}

#[cfg(test)]
mod tests;
