//! What this thread is doing: running ops eagerly, or tracing into graphs (one for the
//! function, more nested inside it for cond branches and loop bodies). The trace layer pushes
//! and pops traces here; everything below it only asks — so "am I tracing?" has one answer
//! and one place.
//!
//! It also holds the traced *stand-ins* of tensors from outside the function (arguments and
//! captures): while a function is traced, its code still holds the caller's handles, and a
//! handle finds the graph value it stands for here, in one spot.

use super::Tensor;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;

thread_local! {
    /// The ids of the active traces, the function's first, the innermost last.
    static TRACES: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
    /// The innermost active trace (0: none), kept apart for the hot path.
    static INNERMOST: Cell<u64> = const { Cell::new(0) };
    /// Tensor id -> the function trace's stand-in for it.
    static STAND_INS: RefCell<HashMap<u64, Tensor>> = RefCell::new(HashMap::new());
}

/// True while a trace is active on this thread.
pub(crate) fn is_tracing() -> bool {
    INNERMOST.with(Cell::get) != 0
}

/// The id of the innermost active trace (0: none).
pub(crate) fn current_trace() -> u64 {
    INNERMOST.with(Cell::get)
}

/// How many traces are active (more than one inside cond branches and loop bodies).
pub(crate) fn depth() -> usize {
    TRACES.with(|t| t.borrow().len())
}

/// The stack level of trace `id` (0: the function's), if it is active on this thread.
pub(crate) fn level_of(id: u64) -> Option<usize> {
    TRACES.with(|t| t.borrow().iter().position(|&x| x == id))
}

/// Makes trace `id` the innermost.
pub(crate) fn push_trace(id: u64) {
    TRACES.with(|t| t.borrow_mut().push(id));
    INNERMOST.set(id);
}

/// Ends trace `id` (the innermost); ending the function's trace drops its stand-ins.
pub(crate) fn pop_trace(id: u64) {
    let now = TRACES.with(|t| {
        let mut t = t.borrow_mut();
        if t.last() == Some(&id) {
            t.pop();
        }
        t.last().copied().unwrap_or(0)
    });
    INNERMOST.set(now);
    if now == 0 {
        // Taken out before dropping: a dropped tensor may look here again.
        let old = STAND_INS.with(|s| std::mem::take(&mut *s.borrow_mut()));
        drop(old);
    }
}

/// The traced stand-in of `t` (an argument or a captured tensor) in the function being traced.
pub(crate) fn stand_in(t: &Tensor) -> Option<Tensor> {
    if !is_tracing() {
        return None;
    }
    STAND_INS.with(|s| s.borrow().get(&t.id()).cloned())
}

/// Records `proxy` as the stand-in of `t` until the function's trace ends.
pub(crate) fn set_stand_in(t: &Tensor, proxy: &Tensor) {
    STAND_INS.with(|s| s.borrow_mut().insert(t.id(), proxy.clone()));
}

/// True when `t`'s value can be read as Rust data now: a concrete tensor, made inside the
/// active traces when one is active (a constant). A tensor from outside the function is
/// external state: its value is read when the graph runs, not now.
pub(crate) fn is_known_now(t: &Tensor) -> bool {
    t.symbol().is_none() && (!is_tracing() || level_of(t.0.origin_trace).is_some())
}

/// True for a concrete tensor made inside the trace running now: a constant of its graph.
pub(crate) fn is_trace_constant(t: &Tensor) -> bool {
    is_tracing() && t.symbol().is_none() && t.0.origin_trace == current_trace()
}

/// Runs `f` with the active traces set aside, so its ops run eagerly on concrete tensors
/// and its reads of tensors from outside the trace see their values now (ONNX import
/// evaluates shape arithmetic so, at trace time). The traces are active again afterwards,
/// whatever `f` returned; the stand-ins are kept.
pub(crate) fn eagerly<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(Vec<u64>, u64);
    impl Drop for Restore {
        fn drop(&mut self) {
            TRACES.with(|t| *t.borrow_mut() = std::mem::take(&mut self.0));
            INNERMOST.set(self.1);
        }
    }
    let _restore = Restore(TRACES.with(|t| std::mem::take(&mut *t.borrow_mut())), INNERMOST.replace(0));
    f()
}
