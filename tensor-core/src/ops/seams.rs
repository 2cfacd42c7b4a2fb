//! The seams: what layers above the op dispatch plug into it. Dispatch sits below the code
//! that implements these, so each is a global slot filled from above at run time — the only
//! places where a lower layer calls up. Each slot says who fills it, when, and what an empty
//! slot means:
//!
//! | slot | filled by | when | while empty |
//! |------|-----------|------|-------------|
//! | the tracer ([`Executor`]) | `trace` | before its first trace begins | never read: no trace runs without it |
//! | the gradient hook | `distributed::DataParallel` | while a wrapped model lives | an eager accumulation tells no one |
//! | the transport | `distributed::init` | from init to finalize | a collective op is an `Err` saying how to get one |
//!
//! (Control flow needs no slot: it sits below the function layer, which calls its replay.)

use super::collective::Transport;
use super::dispatch::Executor;
use crate::error::{Error, Result};
use crate::tensor::Tensor;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock, RwLock};

/// A slot an upper layer fills, replaces or empties at any time. Reading an empty slot is
/// one atomic load (the gradient hook is asked on every eager accumulation).
pub(crate) struct Seam<T> {
    value: RwLock<Option<T>>,
    filled: AtomicBool,
}

impl<T: Clone> Seam<T> {
    const fn new() -> Seam<T> {
        Seam { value: RwLock::new(None), filled: AtomicBool::new(false) }
    }

    /// Puts `value` in (with `None`, empties the slot); returns what it replaces.
    fn set(&self, value: Option<T>) -> Option<T> {
        let mut slot = self.value.write().unwrap_or_else(|e| e.into_inner());
        self.filled.store(value.is_some(), Ordering::Release);
        std::mem::replace(&mut *slot, value)
    }

    /// What the slot holds.
    fn get(&self) -> Option<T> {
        if !self.filled.load(Ordering::Acquire) {
            return None;
        }
        self.value.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

// ------------------------------------------------------------------------------- the tracer

/// The tracer: set once (it never changes), and read by every op while a trace is active, so
/// a `OnceLock` rather than a `Seam`.
static TRACER: OnceLock<&'static dyn Executor> = OnceLock::new();

/// Makes `tracer` the executor of every thread while it traces.
pub(crate) fn register_tracer(tracer: &'static dyn Executor) {
    TRACER.get_or_init(|| tracer);
}

/// The tracer (registered before any trace begins).
pub(crate) fn tracer() -> &'static dyn Executor {
    *TRACER.get().expect("the tracer registers itself before a trace begins")
}

// ------------------------------------------------------------------------ the gradient hook

/// Told, eagerly, of each tensor whose `.grad` a gradient was just added to (the
/// distributed module starts a bucket's all-reduce from here, overlapping the rest of backward).
pub(crate) type GradHook = Arc<dyn Fn(&Tensor) + Send + Sync>;

static GRAD_HOOK: Seam<GradHook> = Seam::new();

/// Installs (or with `None` removes) the gradient hook; returns the one it replaces.
pub(crate) fn set_grad_hook(hook: Option<GradHook>) -> Option<GradHook> {
    GRAD_HOOK.set(hook)
}

/// The gradient hook, if one is installed (every run but a distributed one: none).
pub(crate) fn grad_hook() -> Option<GradHook> {
    GRAD_HOOK.get()
}

// ------------------------------------------------------------------------------ the transport

static TRANSPORT: Seam<Arc<dyn Transport>> = Seam::new();

/// Installs (or with `None` removes) the transport the collective ops use.
pub(crate) fn set_transport(transport: Option<Arc<dyn Transport>>) {
    TRANSPORT.set(transport);
}

/// The installed transport, or the error that says how to get one.
pub(crate) fn transport(op: &'static str) -> Result<Arc<dyn Transport>> {
    TRANSPORT.get().ok_or_else(|| Error::Distributed {
        op,
        reason: "no communicator: build with the `mpi` feature, call `distributed::init()` and start the program with mpirun".into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seam_hands_back_what_it_replaces_and_reads_empty_once_emptied() {
        let seam: Seam<u32> = Seam::new();
        assert_eq!(seam.get(), None);
        assert_eq!(seam.set(Some(1)), None);
        assert_eq!(seam.set(Some(2)), Some(1));
        assert_eq!(seam.get(), Some(2));
        assert_eq!(seam.set(None), Some(2));
        assert_eq!(seam.get(), None);
    }
}
