//! What a concrete function keeps for its differentiable calls: per (which slots need a
//! gradient, slot shapes) a *plan* — the forward graph with its residuals as extra outputs,
//! and the backward functions traced for it, one per set of node outputs receiving a
//! gradient. Built on the first call that needs it, reused by later ones.

use super::gates::{use_conditions, MadeWhen, Use};
use super::joint::{trace_split, JointSpec, Split};
use super::slot_uses::edges_per_slot;
use crate::compile::Executable;
use crate::error::Result;
use crate::function::concrete::ConcreteFunction;
use crate::graph::{Graph, InputSource, ValueId};
use crate::shape::Shape;
use crate::tensor::Tensor;
use crate::trace::Traced;
use std::sync::{Arc, Mutex};

/// A plan (or why there is none) with its key: which slots need a gradient, slot shapes.
type KeyedPlan = (Vec<bool>, Vec<Shape>, Result<Arc<ForwardPlan>>);

/// The plans of one concrete function and the backward functions traced for them.
#[derive(Default)]
pub(crate) struct BackwardCache {
    plans: Mutex<Vec<KeyedPlan>>,
    /// Every backward function traced, in trace order (for introspection).
    traced: Mutex<Vec<ConcreteFunction>>,
}

impl BackwardCache {
    /// The backward functions traced so far, in trace order.
    pub(crate) fn functions(&self) -> Vec<ConcreteFunction> {
        self.traced.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The forward graphs with residual outputs made so far (one per plan).
    pub(crate) fn forward_graphs(&self) -> Vec<Graph> {
        let plans = self.plans.lock().unwrap_or_else(|e| e.into_inner());
        plans.iter().filter_map(|(_, _, p)| p.as_ref().ok()).map(|p| p.forward.graph().clone()).collect()
    }

    /// The plan for a call of `forward` on `slots`, made on first need. A plan that cannot
    /// be made (a backward formula fails while tracing) is kept as its error, which the
    /// call's `backward()` reports, as an eager body would.
    pub(crate) fn plan_for(&self, forward: &ConcreteFunction, slots: &[&Tensor]) -> Result<Arc<ForwardPlan>> {
        let needs: Vec<bool> = slots.iter().map(|t| t.requires_grad_raw()).collect();
        let same = |n: &[bool], s: &[Shape]| n == needs && s.iter().zip(slots).all(|(s, t)| *s == t.0.shape);
        if let Some((_, _, p)) = self.plans.lock().unwrap_or_else(|e| e.into_inner()).iter().find(|(n, s, _)| same(n, s)) {
            return p.clone();
        }
        // Made outside the lock: tracing may itself call graph functions.
        let plan = ForwardPlan::build(self, forward, slots, &needs).map(Arc::new);
        let mut plans = self.plans.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, _, p)) = plans.iter().find(|(n, s, _)| same(n, s)) {
            return p.clone();
        }
        plans.push((needs, slots.iter().map(|t| t.0.shape.clone()).collect(), plan.clone()));
        plan
    }

    fn add_traced(&self, f: &ConcreteFunction) {
        self.traced.lock().unwrap_or_else(|e| e.into_inner()).push(f.clone());
    }
}

/// How calls with one (slots needing a gradient, slot shapes) run and differentiate.
pub(crate) struct ForwardPlan {
    /// The forward graph returning its outputs, then the residuals.
    pub(super) forward: Executable,
    /// The forward graph the residuals are values of: the traced graph, or a copy whose
    /// `While` nodes keep their history for the backward (see `Split::forward`).
    primal: Graph,
    /// How many outputs the function itself returns.
    pub(super) num_outputs: usize,
    /// The residuals (values of the traced forward graph), in output order.
    residuals: Vec<ValueId>,
    /// Per slot, how many edges of the call's node it has (0 when it needs no gradient): one
    /// per gradient edge a replay of the body feeds (`edges_per_slot`), so each contribution
    /// reaches the engine on its own.
    pub(super) edges: Vec<usize>,
    /// Per slot and use, when eager code makes that use (see `gates.rs`).
    conditions: Vec<Vec<Option<MadeWhen>>>,
    needs: Vec<bool>,
    backwards: Mutex<Vec<Arc<BackwardEntry>>>,
}

impl ForwardPlan {
    /// Traces the joint function for every float output and keeps what it needs.
    fn build(cache: &BackwardCache, forward: &ConcreteFunction, slots: &[&Tensor], needs: &[bool]) -> Result<ForwardPlan> {
        let g = forward.traced_graph();
        let roots: Vec<usize> = (0..g.outputs.len()).filter(|&k| g.values[g.outputs[k]].dtype.is_float()).collect();
        let name = format!("{}_backward", forward.name());
        let spec = JointSpec { forward: g, name: &name, slots, needs, roots: &roots, known: None };
        let mut split = outside_traces(|| trace_split(&spec))?;
        let primal = split.forward.take().unwrap_or_else(|| g.clone());
        let mut with_residuals = primal.clone();
        with_residuals.outputs.extend(&split.residuals);
        let mut outs = vec![false; g.outputs.len() + split.residuals.len()];
        roots.iter().for_each(|&k| outs[k] = true);
        let residuals = split.residuals.clone();
        let conditions = use_conditions(&primal, slots.len());
        let entry = BackwardEntry::new(forward, outs, split, slots.len(), &conditions);
        cache.add_traced(&entry.function);
        let edges = edges_per_slot(g, slots.len()).into_iter().zip(needs).map(|(u, &n)| if n { u } else { 0 }).collect();
        Ok(ForwardPlan {
            forward: Executable::new(&with_residuals, forward.is_optimized()),
            primal,
            num_outputs: g.outputs.len(),
            residuals,
            edges,
            conditions,
            needs: needs.to_vec(),
            backwards: Mutex::new(vec![Arc::new(entry)]),
        })
    }

    /// The backward function for the node outputs marked in `outs`, traced on first need.
    pub(super) fn backward_for(
        &self,
        cache: &BackwardCache,
        forward: &ConcreteFunction,
        outs: &[bool],
        slots: &[&Tensor],
    ) -> Result<Arc<BackwardEntry>> {
        if let Some(e) = self.backwards.lock().unwrap_or_else(|e| e.into_inner()).iter().find(|e| e.outs == outs) {
            return Ok(e.clone());
        }
        let roots: Vec<usize> = outs.iter().enumerate().filter(|(_, o)| **o).map(|(k, _)| k).collect();
        let name = format!("{}_backward", forward.name());
        let spec = JointSpec { forward: &self.primal, name: &name, slots, needs: &self.needs, roots: &roots, known: Some(&self.residuals) };
        let split = outside_traces(|| trace_split(&spec))?;
        let entry = Arc::new(BackwardEntry::new(forward, outs.to_vec(), split, slots.len(), &self.conditions));
        let mut backwards = self.backwards.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(e) = backwards.iter().find(|e| e.outs == outs) {
            return Ok(e.clone());
        }
        cache.add_traced(&entry.function);
        backwards.push(entry.clone());
        Ok(entry)
    }
}

/// One backward function of a plan.
pub(crate) struct BackwardEntry {
    /// The node outputs (function outputs, then residuals) whose gradients it takes.
    outs: Vec<bool>,
    /// Arguments: the forward's slots, the gradients of the outputs marked in `outs`, then
    /// the plan's residuals. Outputs: each use's contribution, in eager delivery order.
    pub(super) function: ConcreteFunction,
    /// The use of a forward slot each output is the contribution of.
    pub(super) contributions: Vec<Use>,
    /// Per output, when eager code makes its use: the condition, and the index among the
    /// residuals of the value it reads (`None`: always made).
    pub(super) made_when: Vec<Option<(MadeWhen, usize)>>,
    /// The forward slots its graph reads (the saved inputs of the formulas): changing one in
    /// place after the call is `Error::SavedTensorModified`, as eagerly.
    pub(super) reads: Vec<usize>,
}

impl BackwardEntry {
    fn new(forward: &ConcreteFunction, outs: Vec<bool>, split: Split, num_slots: usize, conditions: &[Vec<Option<MadeWhen>>]) -> BackwardEntry {
        let made_when = split
            .contributions
            .iter()
            .map(|u| {
                let when = conditions[u.slot][u.nth]?;
                Some((when, split.residuals.iter().position(|&r| r == when.value())?))
            })
            .collect();
        let traced = Traced { graph: split.graph, captures: Vec::new(), grad_guards: Vec::new(), guards: None };
        let function = ConcreteFunction::from_traced(&traced.graph.name.clone(), traced, forward.is_optimized());
        let reads = slots_read(function.graph(), num_slots);
        BackwardEntry { outs, function, contributions: split.contributions, made_when, reads }
    }
}

/// The slots below `num_slots` whose data a node or an output of `g` reads.
fn slots_read(g: &Graph, num_slots: usize) -> Vec<usize> {
    let read = |v: ValueId| g.nodes.iter().any(|n| n.inputs.contains(&v)) || g.outputs.contains(&v);
    g.inputs
        .iter()
        .filter_map(|&(v, s)| match s {
            InputSource::Data(i) if i < num_slots && read(v) => Some(i),
            _ => None,
        })
        .collect()
}

/// Runs `f` where no trace is active: on this thread, or — when a backward runs inside
/// another trace — on a helper thread, so that trace does not take in the joint function.
fn outside_traces<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    if !crate::trace::is_active() {
        return f();
    }
    std::thread::scope(|s| s.spawn(f).join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
}
