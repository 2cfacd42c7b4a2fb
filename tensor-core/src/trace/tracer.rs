//! The tracer: the executor dispatch hands every op to while a trace is active. Ops become
//! nodes of the innermost trace's graph; tensors from outside become slots; `.grad` reads and
//! writes of slots become graph state.

use super::{append, resolve, state};
use crate::error::Result;
use crate::ops::dispatch::{record, Executor, InPlace};
use crate::ops::Op;
use crate::tensor::{context, Tensor};
use smallvec::SmallVec;

/// The executor of every thread while it traces.
pub(super) struct Tracer;

/// The one tracer, registered with dispatch when the first trace begins.
pub(super) static TRACER: Tracer = Tracer;

impl Executor for Tracer {
    fn apply(&self, op: Op, inputs: &[&Tensor]) -> Result<Tensor> {
        let resolved: SmallVec<[Tensor; 3]> = inputs.iter().map(|t| resolve(t, op.name())).collect::<Result<_>>()?;
        let refs: SmallVec<[&Tensor; 3]> = resolved.iter().collect();
        let out = append(&op, &refs)?;
        record(op, &refs, &out);
        Ok(out)
    }

    fn apply_in_place(&self, update: InPlace) -> Result<()> {
        state::apply_in_place(update)
    }

    fn external(&self, t: &Tensor, op: &'static str) -> Option<Tensor> {
        if let Some(p) = context::stand_in(t) {
            return Some(p);
        }
        // A tensor from outside the trace is external state even on its first use: read it
        // through its slot at each call, never as a copy baked into the graph.
        let outside = t.symbol().is_none() && t.0.origin_trace != context::current_trace();
        if outside {
            resolve(t, op).ok()
        } else {
            None
        }
    }

    fn read_grad(&self, t: &Tensor) -> Option<Tensor> {
        state::read_grad(t).unwrap_or_else(|| t.grad_slot().grad.clone())
    }

    fn accumulate_grad(&self, t: &Tensor, g: &Tensor) -> Result<()> {
        match state::accumulate_grad(t, g) {
            Some(r) => r,
            // A tensor of the trace itself: its `.grad` is plain data of the trace.
            None => crate::ops::dispatch::accumulate_into(t, g),
        }
    }

    fn clear_grad(&self, t: &Tensor) -> Result<()> {
        if !state::clear_grad(t)? {
            t.set_grad_raw(None);
        }
        Ok(())
    }
}
