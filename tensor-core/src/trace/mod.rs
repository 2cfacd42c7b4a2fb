//! Tracing: while a trace is active on a thread, every op appends a node to its graph and
//! returns a symbolic tensor. Tensors created outside the trace and used inside become
//! *slots* (captures, or argument leaves bound by the caller): the graph reads their data and
//! `.grad` at each call and writes back what the traced code changed.

mod output;
mod print;
mod state;
mod tracer;

pub use output::{GraphOutput, GraphReturn};
pub use print::tprint_impl;
pub(crate) use state::TraceState;

use crate::error::Result;
use crate::graph::{Graph, ValueId};
use crate::ops::Op;
use crate::tensor::context;
use crate::tensor::Tensor;
use smallvec::SmallVec;
use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};

thread_local! {
    /// The state of each active trace, in the order of the context's trace stack.
    static STACK: RefCell<Vec<TraceState>> = const { RefCell::new(Vec::new()) };
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
    context::is_tracing()
}

/// The id of the trace active on this thread (0: none).
pub(crate) fn current_trace_id() -> u64 {
    context::current_trace()
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
    context::depth()
}

/// The stack level of trace `id`, if it is active on this thread.
fn level_of(id: u64) -> Option<usize> {
    context::level_of(id)
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
        crate::ops::seams::register_tracer(&tracer::TRACER);
        STACK.with(|s| s.borrow_mut().push(TraceState::new(id, name)));
        context::push_trace(id);
        TraceGuard { id, finished: false }
    }

    /// Starts the nested trace of a cond branch or loop body, inside the active trace.
    pub(crate) fn begin_nested(name: &str) -> TraceGuard {
        Self::begin(name)
    }

    /// A placeholder parameter of a nested trace (a loop variable).
    pub(crate) fn param(&self, dtype: crate::dtype::DType, shape: crate::shape::Shape, label: &str) -> Tensor {
        with_trace(|s| s.add_param(dtype, shape, Some(label), None))
    }

    /// Ends a nested trace: its graph, the enclosing values it captured, in order, and those
    /// it updated in place.
    pub(crate) fn finish_nested(mut self, outputs: &[Tensor]) -> Result<Nested> {
        let resolved: Vec<Tensor> = outputs.iter().map(|t| resolve(t, "cond/while_loop")).collect::<Result<_>>()?;
        let done = with_trace(|s| s.finish_nested(&resolved));
        self.pop();
        self.finished = true;
        Ok(done)
    }

    /// Makes `t` (an argument's tensor leaf) slot `index`, with possibly relaxed `shape`.
    pub(crate) fn bind_arg(&self, t: &Tensor, leaf: usize, name: &str, shape: crate::shape::Shape) {
        with_trace(|s| s.bind_arg(t, leaf, name, shape));
    }

    /// Ends the trace: `outputs` become the graph's outputs. Returns the graph and the
    /// captured tensors (the slots after the arguments).
    pub(crate) fn finish(mut self, outputs: &[Tensor]) -> Result<Traced> {
        let resolved: Vec<Tensor> = outputs.iter().map(|t| resolve(t, "return")).collect::<Result<_>>()?;
        let mut traced = with_trace(|s| s.finish(&resolved));
        name_dims(self.id, &mut traced.graph);
        let guards = crate::dim::table::take(self.id);
        self.pop();
        self.finished = true;
        traced.guards = guards.map_err(|why| crate::error::Error::ControlFlow {
            construct: format!(
                "{why}: a trace with relaxed dims cannot guard on it; read dims of the arguments (or values whose dims follow from \
                 them by elementwise ops, reductions, matmul, transposes) or trace without relaxed shapes for this argument"
            ),
        })?;
        Ok(traced)
    }

    fn pop(&self) {
        // Taken out before it drops: dropping its tensors may look at the stack again.
        let state = STACK.with(|s| {
            let mut s = s.borrow_mut();
            if s.last().is_some_and(|t| t.id == self.id) {
                s.pop()
            } else {
                None
            }
        });
        context::pop_trace(self.id);
        crate::dim::table::end(self.id);
        drop(state);
    }
}

impl Drop for TraceGuard {
    fn drop(&mut self) {
        if !self.finished {
            self.pop();
        }
    }
}

/// Names the unknown dims of trace `id`'s values by the expressions they equal, for the
/// text and DOT forms (`f32[n0, 784]`), when the trace has relaxed dims.
fn name_dims(id: u64, g: &mut Graph) {
    if !crate::dim::table::is_active() {
        return;
    }
    for v in 0..g.values.len() {
        if g.values[v].shape.is_known() {
            continue;
        }
        if let Some(names) = crate::dim::table::named_dims(id, v) {
            g.dim_names.insert(v, names);
        }
    }
}

/// What a finished nested trace (a cond branch, a loop condition or body) produced.
pub(crate) struct Nested {
    /// The subgraph, its outputs set.
    pub(crate) graph: Graph,
    /// The enclosing values its captured parameters stand for, in parameter order (after the
    /// placeholders).
    pub(crate) captured: Vec<Tensor>,
    /// The captured values the traced code updated in place, in parameter order.
    pub(crate) updates: Vec<Update>,
}

/// A value of the enclosing trace that a nested trace updated in place.
pub(crate) struct Update {
    /// The enclosing trace's tensor (what the captured parameter stands for).
    pub(crate) outer: Tensor,
    /// Its new value in the nested graph.
    pub(crate) value: ValueId,
}

/// What a finished trace produced.
pub(crate) struct Traced {
    pub(crate) graph: Graph,
    pub(crate) captures: Vec<Tensor>,
    /// (slot, whether its `.grad` was present) for every `.grad` the traced code read before
    /// writing it: a call must see the same presence.
    pub(crate) grad_guards: Vec<(usize, bool)>,
    /// The symbolic dims and guards of a trace with relaxed dims (`None`: all dims known).
    pub(crate) guards: Option<crate::dim::Guards>,
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
            None => Err(sym.leaked(op)),
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

/// Appends `op` applied to resolved `inputs` to the active graph.
pub(crate) fn append(op: &Op, inputs: &[&Tensor]) -> Result<Tensor> {
    let types: SmallVec<[crate::ops::TypeRef; 3]> = inputs.iter().map(|t| crate::ops::TypeRef { dtype: t.0.dtype, shape: &t.0.shape }).collect();
    let (dtype, shape) = op.infer(&types)?;
    let ids: SmallVec<[ValueId; 3]> = inputs.iter().map(|t| t.symbol().expect("resolved inputs are symbolic").value).collect();
    Ok(with_trace(|s| s.append(crate::graph::NodeKind::Op(op.clone()), &ids, dtype, shape)))
}

/// Appends a node of any kind with several outputs to the active graph; `inputs` must be
/// resolved.
pub(crate) fn append_node(kind: crate::graph::NodeKind, inputs: &[&Tensor], types: &[(crate::dtype::DType, crate::shape::Shape)]) -> Vec<Tensor> {
    let ids: SmallVec<[ValueId; 3]> = inputs.iter().map(|t| t.symbol().expect("resolved inputs are symbolic").value).collect();
    with_trace(|s| s.append_multi(kind, &ids, types))
}
