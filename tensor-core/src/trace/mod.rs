//! Tracing: while a trace is active on a thread, every op appends a node to its graph and
//! returns a symbolic tensor. Tensors created outside the trace and used inside become
//! *slots* (captures, or argument leaves bound by the caller): the graph reads their data and
//! `.grad` at each call and writes back what the traced code changed.

mod print;
mod state;

pub(crate) use print::capture_for_print;
pub(crate) use print::render_pieces;
pub use print::{tprint_impl, FormatSpec};
pub(crate) use state::TraceState;

use crate::error::{Error, Result};
use crate::graph::{Graph, ValueId};
use crate::ops::Op;
use crate::tensor::Tensor;
use smallvec::SmallVec;
use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A tensor's place in the graph being traced.
#[derive(Clone, Debug)]
pub(crate) struct Symbol {
    pub(crate) trace: u64,
    pub(crate) value: ValueId,
    /// The external tensor this value stands for, if it is a slot's proxy.
    pub(crate) slot: Option<usize>,
    pub(crate) label: Option<Arc<str>>,
}

impl Symbol {
    /// The name it prints with: the argument's name, `capture_N`, or `vN`.
    pub fn name(&self) -> String {
        match &self.label {
            Some(l) => l.to_string(),
            None => format!("v{}", self.value),
        }
    }

    /// The error for reading this value as a Rust value in `op`.
    pub(crate) fn value_error(&self, op: &'static str) -> Error {
        if current_trace_id() == self.trace {
            Error::SymbolicValue { op, name: self.name() }
        } else {
            Error::LeakedTracer { op, name: self.name() }
        }
    }
}

thread_local! {
    static STACK: RefCell<Vec<TraceState>> = const { RefCell::new(Vec::new()) };
    static ACTIVE: Cell<u64> = const { Cell::new(0) };
}

static NEXT_TRACE: AtomicU64 = AtomicU64::new(1);

/// True when the current code runs op by op: false only while a `#[graph_fn]` body (or
/// another traced closure) is being traced on this thread.
///
/// ```
/// assert!(tensor_core::executing_eagerly());
/// ```
pub fn executing_eagerly() -> bool {
    !is_active()
}

/// True while a trace is active on this thread.
pub(crate) fn is_active() -> bool {
    ACTIVE.with(Cell::get) != 0
}

/// The id of the trace active on this thread (0: none).
pub(crate) fn current_trace_id() -> u64 {
    ACTIVE.with(Cell::get)
}

/// Runs `f` on the innermost active trace. Callers keep the borrow short: `f` must not
/// dispatch ops.
fn with_trace<R>(f: impl FnOnce(&mut TraceState) -> R) -> R {
    STACK.with(|s| f(s.borrow_mut().last_mut().expect("a trace is active")))
}

/// Runs `f` on the outermost active trace: the function's, which owns the slots.
fn with_root<R>(f: impl FnOnce(&mut TraceState) -> R) -> R {
    STACK.with(|s| f(s.borrow_mut().first_mut().expect("a trace is active")))
}

/// Runs `f` on the trace at `level` of this thread's stack (0: the function's).
fn with_level<R>(level: usize, f: impl FnOnce(&mut TraceState) -> R) -> R {
    STACK.with(|s| f(&mut s.borrow_mut()[level]))
}

/// How many traces are active on this thread (more than one inside cond and while_loop).
pub(crate) fn depth() -> usize {
    STACK.with(|s| s.borrow().len())
}

/// The stack level of trace `id`, if it is active on this thread.
fn level_of(id: u64) -> Option<usize> {
    STACK.with(|s| s.borrow().iter().position(|t| t.id == id))
}

/// `v`, a value of the trace at `level`, as seen by the innermost trace: captured as a
/// parameter by every nested trace in between.
fn capture_down(level: usize, mut v: Tensor) -> Tensor {
    for l in level + 1..depth() {
        v = with_level(l, |s| s.capture_param(&v));
    }
    v
}

/// Keeps a trace active on this thread until dropped — also when the traced body panics,
/// so no half-made trace is ever left behind.
pub(crate) struct TraceGuard {
    id: u64,
    finished: bool,
}

impl TraceGuard {
    /// Starts a trace of a graph called `name`.
    pub(crate) fn begin(name: &str) -> TraceGuard {
        let id = NEXT_TRACE.fetch_add(1, Ordering::Relaxed);
        STACK.with(|s| s.borrow_mut().push(TraceState::new(id, name)));
        ACTIVE.with(|a| a.set(id));
        TraceGuard { id, finished: false }
    }

    /// Starts the nested trace of a cond branch or loop body, inside the active trace.
    pub(crate) fn begin_nested(name: &str) -> TraceGuard {
        Self::begin(name)
    }

    /// A placeholder parameter of a nested trace (a loop variable).
    pub(crate) fn param(&self, dtype: crate::DType, shape: crate::Shape, label: &str) -> Tensor {
        with_trace(|s| s.add_param(dtype, shape, Some(label), None))
    }

    /// Ends a nested trace: its graph and the enclosing values it captured, in order.
    pub(crate) fn finish_nested(mut self, outputs: &[Tensor]) -> Result<(Graph, Vec<Tensor>)> {
        if let Some(e) = with_trace(|s| s.deferred_error.take()) {
            return Err(e);
        }
        let resolved: Vec<Tensor> = outputs.iter().map(|t| resolve(t, "cond/while_loop")).collect::<Result<_>>()?;
        let done = with_trace(|s| s.finish_nested(&resolved));
        self.pop();
        self.finished = true;
        Ok(done)
    }

    /// Makes `t` (an argument's tensor leaf) slot `index`, with possibly relaxed `shape`.
    pub(crate) fn bind_arg(&self, t: &Tensor, name: &str, shape: crate::Shape) {
        with_trace(|s| s.bind_arg(t, name, shape));
    }

    /// Ends the trace: `outputs` become the graph's outputs. Returns the graph and the
    /// captured tensors (the slots after the arguments).
    pub(crate) fn finish(mut self, outputs: &[Tensor]) -> Result<Traced> {
        let resolved: Vec<Tensor> = outputs.iter().map(|t| resolve(t, "return")).collect::<Result<_>>()?;
        let traced = with_trace(|s| s.finish(&resolved));
        self.pop();
        self.finished = true;
        Ok(traced)
    }

    fn pop(&self) {
        STACK.with(|s| {
            let mut s = s.borrow_mut();
            if s.last().is_some_and(|t| t.id == self.id) {
                s.pop();
            }
            ACTIVE.with(|a| a.set(s.last().map_or(0, |t| t.id)));
        });
    }
}

impl Drop for TraceGuard {
    fn drop(&mut self) {
        if !self.finished {
            self.pop();
        }
    }
}

/// What a finished trace produced.
pub(crate) struct Traced {
    pub(crate) graph: Graph,
    pub(crate) captures: Vec<Tensor>,
    /// (slot, whether its `.grad` was present) for every `.grad` the traced code read before
    /// writing it: a call must see the same presence.
    pub(crate) grad_guards: Vec<(usize, bool)>,
}

/// The graph value `t` stands for in the active trace: itself if symbolic, else a slot proxy
/// or a constant.
pub(crate) fn resolve(t: &Tensor, op: &'static str) -> Result<Tensor> {
    if let Some(sym) = t.symbol() {
        if sym.trace == current_trace_id() {
            return Ok(t.clone());
        }
        // A value of an enclosing trace (used inside cond or while_loop) is captured.
        return match level_of(sym.trace) {
            Some(level) => Ok(capture_down(level, t.clone())),
            None => Err(Error::LeakedTracer { op, name: sym.name() }),
        };
    }
    if depth() == 1 {
        return Ok(with_trace(|s| s.resolve_concrete(t)));
    }
    if level_of(t.0.origin_trace).is_some() {
        // Data made inside the function is a constant wherever it is used.
        return Ok(with_trace(|s| s.constant(t)));
    }
    // A tensor from outside the function: a slot of the function's trace, captured down.
    let proxy = with_root(|s| s.resolve_concrete(t));
    Ok(capture_down(0, proxy))
}

pub(crate) fn resolve_inputs(inputs: &[&Tensor], op: &'static str) -> Result<SmallVec<[Tensor; 3]>> {
    inputs.iter().map(|t| resolve(t, op)).collect()
}

/// Appends `op` applied to resolved `inputs` to the active graph.
pub(crate) fn append(op: &Op, inputs: &[&Tensor]) -> Result<Tensor> {
    let types: SmallVec<[crate::ops::TypeRef; 3]> = inputs.iter().map(|t| crate::ops::TypeRef { dtype: t.0.dtype, shape: &t.0.shape }).collect();
    let (dtype, shape) = op.infer(&types)?;
    let ids: SmallVec<[ValueId; 3]> = inputs.iter().map(|t| t.symbol().expect("resolved inputs are symbolic").value).collect();
    Ok(with_trace(|s| s.append(crate::graph::NodeKind::Op(op.clone()), &ids, dtype, shape)))
}

/// Appends a node of any kind with several outputs to the active graph; `inputs` must be
/// resolved.
pub(crate) fn append_node(kind: crate::graph::NodeKind, inputs: &[&Tensor], types: &[(crate::DType, crate::Shape)]) -> Vec<Tensor> {
    let ids: SmallVec<[ValueId; 3]> = inputs.iter().map(|t| t.symbol().expect("resolved inputs are symbolic").value).collect();
    with_trace(|s| s.append_multi(kind, &ids, types))
}

/// The slot proxy standing for concrete `t` in the active trace, if `t` is used there.
pub(crate) fn proxy_of(t: &Tensor) -> Option<Tensor> {
    if !is_active() {
        return None;
    }
    with_root(|s| s.proxy_of(t))
}

/// True when `t`'s value can be read as Rust data now: a concrete tensor, made inside the
/// active traces when one is active (a constant). A tensor from outside the function is a
/// capture: its value is read when the graph runs, not now.
pub(crate) fn is_known_now(t: &Tensor) -> bool {
    t.symbol().is_none() && (!is_active() || level_of(t.0.origin_trace).is_some())
}

/// While tracing, reading a value as Rust data is allowed only for constants made inside
/// the trace; outside a trace, only for concrete tensors.
pub(crate) fn check_host_read(t: &Tensor, op: &'static str) -> Result<()> {
    if let Some(sym) = t.symbol() {
        return Err(sym.value_error(op));
    }
    if !is_active() || level_of(t.0.origin_trace).is_some() {
        return Ok(());
    }
    let name = with_root(|s| s.proxy_of(t)).and_then(|p| p.symbol()).map_or_else(|| "a tensor from outside the function".to_string(), |s| s.name());
    Err(Error::SymbolicValue { op, name })
}

pub(crate) fn apply_in_place(op: Op, target: &Tensor, reads_target: bool, others: &[&Tensor], name: &'static str) -> Result<()> {
    state::apply_in_place(op, target, reads_target, others, name)
}

/// `.grad` of `t` as the traced code sees it, if `t` is a slot of the active trace.
pub(crate) fn read_grad(t: &Tensor) -> Option<Option<Tensor>> {
    if !is_active() {
        return None;
    }
    state::read_grad(t)
}

/// Accumulates into a slot's `.grad` inside the active trace; `None` if `t` is not a slot.
pub(crate) fn accumulate_grad(t: &Tensor, g: &Tensor) -> Option<Result<()>> {
    if !is_active() {
        return None;
    }
    state::accumulate_grad(t, g)
}

/// Clears a slot's `.grad` inside the active trace; false if `t` is not a slot.
pub(crate) fn clear_grad(t: &Tensor) -> bool {
    is_active() && state::clear_grad(t)
}
