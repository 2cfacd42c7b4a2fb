//! The state of one trace: the graph being built, the slots (external tensors, each with a
//! symbolic proxy and the traced view of its `.grad`), and the constants.

use super::{current_trace_id, resolve, with_level, with_root, with_trace, Nested, Traced, Update};
use crate::dtype::DType;
use crate::error::Result;
use crate::graph::{Graph, InputSource, NodeKind, StateWrite, ValueId};
use crate::ops::dispatch::InPlace;
use crate::shape::Shape;
use crate::storage::Storage;
use crate::tensor::Symbol;
use crate::tensor::{Tensor, Value};
use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

/// The traced view of a slot's `.grad`.
#[derive(Clone)]
enum GradState {
    /// Not touched yet: whatever the slot holds when the graph runs.
    Untouched,
    /// Cleared by `zero_grad()`.
    Cleared,
    /// Holds this symbolic value.
    Set(Tensor),
}

struct Slot {
    /// The external tensor (for captures, kept by the concrete function).
    tensor: Tensor,
    proxy: Tensor,
    initial_value: ValueId,
    grad: GradState,
    initial_grad: Option<ValueId>,
}

/// A parameter of a subgraph trace: a placeholder (a loop variable) or a value captured from
/// the enclosing trace.
struct Param {
    local: Tensor,
    /// The enclosing trace's value this parameter stands for (`None` for placeholders).
    outer: Option<Tensor>,
    /// The value it had when made: an in-place update inside the trace changes `local`'s.
    initial: ValueId,
}

pub(crate) struct TraceState {
    pub(crate) id: u64,
    /// The traced function's name, which each symbol keeps for its error messages.
    function: Arc<str>,
    params: Vec<Param>,
    param_of: HashMap<(u64, ValueId), usize>,
    graph: Graph,
    slots: Vec<Slot>,
    slot_of: HashMap<u64, usize>,
    constants: HashMap<u64, Tensor>,
    grad_guards: Vec<(usize, bool)>,
}

impl TraceState {
    pub(crate) fn new(id: u64, name: &str) -> TraceState {
        TraceState {
            id,
            function: Arc::from(name),
            params: Vec::new(),
            param_of: HashMap::new(),
            graph: Graph::new(name),
            slots: Vec::new(),
            slot_of: HashMap::new(),
            constants: HashMap::new(),
            grad_guards: Vec::new(),
        }
    }

    /// A new parameter of this (nested) trace's graph.
    pub(crate) fn add_param(&mut self, dtype: DType, shape: Shape, label: Option<&str>, outer: Option<Tensor>) -> Tensor {
        let k = self.graph.num_params;
        self.graph.num_params += 1;
        let v = self.graph.add_value(dtype, shape, label.map(str::to_string));
        self.graph.inputs.push((v, InputSource::Param(k)));
        let local = self.symbolic(v, None, label);
        if let Some(o) = &outer {
            let sym = o.symbol().expect("captured values are symbolic");
            self.param_of.insert((sym.trace, sym.value), k);
            crate::dim::table::alias(sym.trace, sym.value, self.id, v);
        }
        self.params.push(Param { local: local.clone(), outer, initial: v });
        local
    }

    /// The parameter standing for `outer` (a value of the enclosing trace), made on first use.
    pub(crate) fn capture_param(&mut self, outer: &Tensor) -> Tensor {
        let sym = outer.symbol().expect("captured values are symbolic");
        if let Some(&k) = self.param_of.get(&(sym.trace, sym.value)) {
            return self.params[k].local.clone();
        }
        let label = sym.label.as_deref().map(str::to_string);
        self.add_param(outer.0.dtype, outer.0.shape.clone(), label.as_deref(), Some(outer.clone()))
    }

    /// Ends a nested trace: its graph (outputs set), the enclosing values its captured
    /// parameters stand for, in parameter order (after the placeholders), and the captured
    /// values the traced code updated in place, with their new values.
    pub(crate) fn finish_nested(&mut self, outputs: &[Tensor]) -> Nested {
        self.graph.outputs = outputs.iter().map(|t| t.symbol().expect("resolved").value).collect();
        let captured = self.params.iter().filter_map(|p| p.outer.clone()).collect();
        let updates = self
            .params
            .iter()
            .filter_map(|p| {
                let now = p.local.symbol().expect("parameters are symbolic").value;
                let outer = p.outer.as_ref().filter(|_| now != p.initial)?;
                Some(Update { outer: outer.clone(), value: now })
            })
            .collect();
        Nested { graph: std::mem::take(&mut self.graph), captured, updates }
    }

    fn symbolic(&self, value: ValueId, slot: Option<usize>, label: Option<&str>) -> Tensor {
        let info = &self.graph.values[value];
        let ty = Arc::from(format!("{}{}", info.dtype, info.shape));
        let sym = Symbol { trace: self.id, value, slot, label: label.map(Arc::from), function: self.function.clone(), ty };
        Tensor::from_value(Value::Symbolic(sym), info.dtype, info.shape.clone())
    }

    /// Appends a node with one output and returns the output's symbolic tensor.
    pub(crate) fn append(&mut self, kind: NodeKind, inputs: &[ValueId], dtype: DType, shape: Shape) -> Tensor {
        let v = self.graph.add_node(kind, inputs, dtype, shape);
        if !self.graph.values[v].shape.is_known() && crate::dim::table::is_active() {
            self.note_dims(inputs, v);
        }
        self.symbolic(v, None, None)
    }

    /// Notes the dims of `v`, just appended with unknown dims, at the traced call and at the
    /// probe call of the symbol table (`dim/table.rs`), from its op's shape rule.
    fn note_dims(&self, inputs: &[ValueId], v: ValueId) {
        use crate::dim::table;
        let Some(NodeKind::Op(op)) = self.graph.nodes.last().map(|n| &n.kind) else { return };
        // An op with symbolic sizes has them evaluated at each point too.
        let (hint_op, probe_op) = match op {
            crate::ops::Op::SymShape(s) => match table::at_hint_and_probe(|hint, probe| (s.at(hint), s.at(probe))) {
                Some((Ok(h), p)) => (Cow::Owned(crate::ops::Op::SymShape(h)), p.ok().map(|p| Cow::Owned(crate::ops::Op::SymShape(p)))),
                _ => return,
            },
            op => (Cow::Borrowed(op), Some(Cow::Borrowed(op))),
        };
        let mut hints = Vec::with_capacity(inputs.len());
        let mut probes = Vec::with_capacity(inputs.len());
        for &i in inputs {
            let value = &self.graph.values[i];
            let (hint, probe) = match table::value_dims(self.id, i) {
                Some(dims) => dims,
                None if value.shape.is_known() => (value.shape.clone(), Some(value.shape.clone())),
                None => return,
            };
            hints.push((value.dtype, hint));
            probes.push((value.dtype, probe.filter(table::fits)));
        }
        let infer = |op: &crate::ops::Op, types: Vec<(DType, &Shape)>| {
            let refs: Vec<crate::ops::TypeRef> = types.into_iter().map(|(dtype, shape)| crate::ops::TypeRef { dtype, shape }).collect();
            op.infer(&refs).ok().map(|(_, s)| s)
        };
        let Some(hint) = infer(&hint_op, hints.iter().map(|(d, s)| (*d, s)).collect()) else { return };
        let probe = match (probes.iter().all(|(_, p)| p.is_some()), &probe_op) {
            (true, Some(op)) => {
                infer(op, probes.iter().map(|(d, p)| (*d, p.as_ref().expect("checked"))).collect()).filter(|s| s.rank() == hint.rank())
            }
            _ => None,
        };
        table::set_value_dims(self.id, v, hint, probe);
    }

    /// Appends a node with several outputs of the given types.
    pub(crate) fn append_multi(&mut self, kind: NodeKind, inputs: &[ValueId], types: &[(DType, Shape)]) -> Vec<Tensor> {
        let outs: smallvec::SmallVec<[ValueId; 1]> = types.iter().map(|(d, s)| self.graph.add_value(*d, s.clone(), None)).collect();
        self.graph.nodes.push(crate::graph::Node { kind, inputs: inputs.into(), outputs: outs.clone() });
        outs.iter().map(|&v| self.symbolic(v, None, None)).collect()
    }

    /// Appends a node with no output (a print).
    pub(crate) fn append_effect(&mut self, kind: NodeKind, inputs: &[ValueId]) {
        self.graph.nodes.push(crate::graph::Node { kind, inputs: inputs.into(), outputs: smallvec::SmallVec::new() });
    }

    fn add_slot(&mut self, t: &Tensor, name: &str, shape: Shape) -> usize {
        let slot = self.slots.len();
        let value = self.graph.add_value(t.0.dtype, shape, Some(name.to_string()));
        self.graph.inputs.push((value, InputSource::Data(slot)));
        self.graph.slot_names.push(name.to_string());
        let proxy = self.symbolic(value, Some(slot), Some(name));
        // Gradients stop at the graph's boundary: only a leaf keeps requiring grad inside.
        let leaf_requires = t.requires_grad_raw() && t.is_leaf_raw();
        proxy.0.requires_grad.store(leaf_requires, std::sync::atomic::Ordering::Release);
        crate::tensor::context::set_stand_in(t, &proxy);
        self.slots.push(Slot { tensor: t.clone(), proxy, initial_value: value, grad: GradState::Untouched, initial_grad: None });
        self.slot_of.insert(t.id(), slot);
        slot
    }

    pub(crate) fn bind_arg(&mut self, t: &Tensor, leaf: usize, name: &str, shape: Shape) {
        if !self.slot_of.contains_key(&t.id()) {
            let relaxed = shape.clone();
            let slot = self.add_slot(t, name, shape);
            self.graph.num_arg_slots = self.slots.len();
            crate::dim::table::bind_input(self.id, self.slots[slot].initial_value, leaf, &relaxed, &t.0.shape);
        }
    }

    pub(crate) fn resolve_concrete(&mut self, t: &Tensor) -> Tensor {
        if let Some(&slot) = self.slot_of.get(&t.id()) {
            return self.slots[slot].proxy.clone();
        }
        if t.0.origin_trace == self.id {
            return self.constant(t);
        }
        let name = format!("capture_{}", self.slots.len() - self.graph.num_arg_slots);
        let slot = self.add_slot(t, &name, t.0.shape.clone());
        self.slots[slot].proxy.clone()
    }

    pub(crate) fn constant(&mut self, t: &Tensor) -> Tensor {
        if let Some(c) = self.constants.get(&t.id()) {
            return c.clone();
        }
        let storage: Storage = t.storage("constant").expect("a concrete tensor");
        let v = self.graph.add_value(t.0.dtype, t.0.shape.clone(), None);
        self.graph.constants.push((v, storage));
        let c = self.symbolic(v, None, None);
        self.constants.insert(t.id(), c.clone());
        c
    }

    /// The slot a tensor stands for: a proxy's own slot, or a concrete tensor's.
    fn slot_for(&mut self, t: &Tensor) -> Option<usize> {
        match t.symbol() {
            Some(sym) if sym.trace == self.id => sym.slot,
            Some(_) => None,
            None if t.0.origin_trace == self.id => None,
            None => {
                self.resolve_concrete(t);
                self.slot_of.get(&t.id()).copied()
            }
        }
    }

    pub(crate) fn finish(&mut self, outputs: &[Tensor]) -> Traced {
        self.graph.outputs = outputs.iter().map(|t| t.symbol().expect("resolved").value).collect();
        for (i, slot) in self.slots.iter().enumerate() {
            let now = slot.proxy.symbol().expect("proxies are symbolic").value;
            if now != slot.initial_value {
                self.graph.writes.push(StateWrite::Data { slot: i, value: now });
            }
            match &slot.grad {
                GradState::Untouched => {}
                GradState::Cleared => self.graph.writes.push(StateWrite::Grad { slot: i, value: None }),
                GradState::Set(g) => {
                    let v = g.symbol().expect("traced grads are symbolic").value;
                    if Some(v) != slot.initial_grad {
                        self.graph.writes.push(StateWrite::Grad { slot: i, value: Some(v) });
                    }
                }
            }
        }
        let captures = self.slots[self.graph.num_arg_slots..].iter().map(|s| s.tensor.clone()).collect();
        Traced { graph: std::mem::take(&mut self.graph), captures, grad_guards: std::mem::take(&mut self.grad_guards), guards: None }
    }
}

/// An in-place op while tracing: the result becomes the target's new symbolic value (for a
/// slot, its proxy's, written back to the external tensor after the run). Inside a cond
/// branch or loop body, a tensor from outside it is a captured parameter there: the update
/// changes that parameter's value, and the `Cond`/`While` node carries it out (see
/// `control/carried_state.rs`).
pub(super) fn apply_in_place(u: InPlace) -> Result<()> {
    let (target, name) = (u.target, u.name);
    // Data made in the function but outside the branch or loop body being traced would
    // resolve to a constant of the nested trace, and updating that copy would leave the
    // function's tensor as it was: it becomes a value of the trace that made it first, so
    // the branch captures it like any outer value.
    let made_outside = target.symbol().is_none()
        && target.0.origin_trace != current_trace_id()
        && super::depth() > 1
        && super::level_of(target.0.origin_trace).is_some();
    if made_outside {
        promote_to_graph_value(target);
    }
    let t = resolve(target, name)?;
    let others: Vec<Tensor> = u.others.iter().map(|o| resolve(o, name)).collect::<Result<_>>()?;
    let others: Vec<&Tensor> = others.iter().collect();
    u.run(&t, &others, |op, inputs| {
        let out = super::append(op, inputs)?;
        let mut sym = out.symbol().expect("appended values are symbolic");
        sym.slot = t.symbol().and_then(|s| s.slot);
        sym.label = t.symbol().and_then(|s| s.label);
        t.set_value(Value::Symbolic(sym.clone()));
        if !target.same_as(&t) && target.symbol().is_none() && target.0.origin_trace == current_trace_id() {
            // A constant made inside the trace and then updated in place is a graph value
            // now; the user's handle gets the history too, or later ops would not see it.
            target.set_value(Value::Symbolic(sym));
            with_trace(|s| s.constants.remove(&target.id()));
            return Ok(target.clone());
        }
        Ok(t.clone())
    })
}

/// Makes `t`, data made by an enclosing trace of this thread, a value of that trace's graph
/// (its constant), so that the user's handle follows the value from then on.
fn promote_to_graph_value(t: &Tensor) {
    let Some(level) = super::level_of(t.0.origin_trace) else { return };
    let c = with_level(level, |s| {
        let c = s.constant(t);
        s.constants.remove(&t.id());
        c
    });
    t.set_value(c.read_value().clone());
}

pub(super) fn read_grad(t: &Tensor) -> Option<Option<Tensor>> {
    with_root(|s| {
        let slot = s.slot_for(t)?;
        Some(match s.slots[slot].grad.clone() {
            GradState::Set(g) => Some(g),
            GradState::Cleared => None,
            GradState::Untouched => s.read_initial_grad(slot),
        })
    })
}

impl TraceState {
    /// Reads the slot's `.grad` as it is when the graph runs; its presence now becomes a
    /// guard the call checks.
    fn read_initial_grad(&mut self, slot: usize) -> Option<Tensor> {
        let present = self.slots[slot].tensor.grad_slot().grad.clone();
        self.grad_guards.push((slot, present.is_some()));
        let g = present?;
        let name = format!("{}.grad", self.graph.slot_names[slot]);
        let v = self.graph.add_value(g.0.dtype, g.0.shape.clone(), Some(name.clone()));
        self.graph.inputs.push((v, InputSource::Grad(slot)));
        let sym = self.symbolic(v, None, Some(&name));
        self.slots[slot].initial_grad = Some(v);
        self.slots[slot].grad = GradState::Set(sym.clone());
        Some(sym)
    }
}

pub(super) fn accumulate_grad(t: &Tensor, g: &Tensor) -> Option<Result<()>> {
    let (slot, state) = with_root(|s| {
        let slot = s.slot_for(t)?;
        Some((slot, s.slots[slot].grad.clone()))
    })?;
    if super::depth() > 1 {
        return Some(Err(nested_state_error("backward() into the .grad of a tensor from outside the function")));
    }
    Some(accumulate_into_slot(slot, state, g))
}

fn accumulate_into_slot(slot: usize, state: GradState, g: &Tensor) -> Result<()> {
    let g = resolve(g, "backward")?;
    let new = match state {
        GradState::Untouched => {
            let v = g.symbol().expect("resolved").value;
            with_root(|s| s.append(NodeKind::AccumulateGrad { slot }, &[v], g.0.dtype, g.0.shape.clone()))
        }
        GradState::Cleared => g,
        GradState::Set(old) => old.add(&g)?,
    };
    with_root(|s| s.slots[slot].grad = GradState::Set(new));
    Ok(())
}

pub(super) fn clear_grad(t: &Tensor) -> Result<bool> {
    if super::depth() > 1 && with_root(|s| s.slot_for(t)).is_some() {
        // Clearing it here would clear it on every call, whichever branch runs (or however
        // often the loop runs).
        return Err(nested_state_error("zero_grad() on the .grad of a tensor from outside the function"));
    }
    Ok(with_root(|s| match s.slot_for(t) {
        Some(slot) => {
            s.slots[slot].grad = GradState::Cleared;
            true
        }
        None => false,
    }))
}

/// The error for changing a function's state from inside a cond branch or loop body.
fn nested_state_error(what: &str) -> crate::error::Error {
    crate::error::Error::ControlFlow {
        construct: format!("{what} inside a cond branch or while_loop body: state changes cannot be carried through graph control flow; do it outside the branch or loop"),
    }
}
