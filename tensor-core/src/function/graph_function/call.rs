//! The call path: flatten the arguments, find the cached concrete function for their key —
//! or trace the body into one and cache it — then run it and rebuild the return value.

use super::super::concrete::ConcreteFunction;
use super::super::key::{self, CacheKey, Flattener, KeyRef, Signature};
use super::cache::{Entry, Relaxation, SlotGuard};
use super::history::TracedShapes;
use super::{GraphFunction, State};
use crate::error::Error;
use crate::tensor::Tensor;
use crate::trace::GraphReturn;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Where a call's result comes from.
enum Resolved<R> {
    /// Run this entry (cached, or just traced).
    Run(Arc<Entry>),
    /// The body's own value from tracing (an `Err`): the call's result as it is.
    Return(R),
    /// The runtime's error (a signature mismatch, `max_traces`, a failed trace).
    Fail(Error),
}

/// What tracing a call's body produced.
// Made once per trace and matched at once: the size of the `Traced` variant costs nothing.
#[allow(clippy::large_enum_variant)]
enum TraceOutcome<R> {
    /// A concrete function for the signature, and under `reduce_retracing` what else it serves.
    Traced(Arc<Entry>, Option<Relaxation>),
    /// The body returned an error value: nothing is cached or counted.
    BodyReturned(R),
    /// Tracing was refused (`max_traces`) or failed.
    Failed(Error),
}

impl GraphFunction {
    /// Runs the cached graph for this signature, tracing `body` first if there is none.
    pub(super) fn call_graph<R: GraphReturn>(&'static self, self_type: Option<&'static str>, flat: Flattener, body: impl FnOnce() -> R) -> R {
        let sig = flat.finish();
        let state = self.state(self_type);
        // A skipped field's parameters would be neither inputs nor written back: refuse.
        let hidden = sig.hidden_fields(Some(self.arg_names));
        if !hidden.is_empty() {
            return R::from_error(Error::SkippedParameters { op: state.full_name.clone(), fields: hidden });
        }
        let call_no = state.calls.fetch_add(1, Ordering::Relaxed) + 1;
        let entry = match self.resolve(state, &sig, call_no, body) {
            Resolved::Run(entry) => entry,
            Resolved::Return(r) => return r,
            Resolved::Fail(e) => return R::from_error(e),
        };
        let leaves: smallvec::SmallVec<[&Tensor; 8]> = sig.slot_leaves().map(|(_, t)| t).collect();
        match entry.function.run(&leaves) {
            Ok(outputs) => {
                let structure = entry.structure.downcast_ref::<R::Structure>().expect("one return type per function");
                R::join(structure, outputs)
            }
            Err(e) => R::from_error(e),
        }
    }

    /// The entry this call runs: the cached one for its key, else a new trace of `body`.
    fn resolve<R: GraphReturn>(&'static self, state: &State, sig: &Signature, call_no: u64, body: impl FnOnce() -> R) -> Resolved<R> {
        let key = match self.cache_key(state, sig) {
            Ok(key) => key,
            Err(e) => return Resolved::Fail(e),
        };
        let mut failed = None;
        if let Some(entry) = state.cache.get(&key, sig, call_no, &mut failed) {
            return Resolved::Run(entry);
        }
        let fixed = self.options.input_signature.is_some();
        if (self.options.reduce_retracing || fixed)
            && let Some(entry) = state.cache.get_relaxed(sig, call_no, &mut failed)
        {
            return Resolved::Run(entry);
        }
        // Under a fixed signature the key has no dims: a trace for dims that fail the first
        // trace's guards is kept under the call's own key, and found as a relaxed trace.
        let key = match (&failed, fixed) {
            (Some(_), true) => sig.key.clone(),
            _ => key.into_owned(),
        };
        self.trace_and_cache(state, sig, key, call_no, failed, body)
    }

    /// Traces `body` into the cache slot for `key` — once, however many callers arrive at
    /// once: the others wait for it (or, if it fails, try themselves).
    fn trace_and_cache<R: GraphReturn>(
        &'static self,
        state: &State,
        sig: &Signature,
        key: CacheKey,
        call_no: u64,
        failed: Option<String>,
        body: impl FnOnce() -> R,
    ) -> Resolved<R> {
        let slot = state.cache.slot(&key, call_no);
        let guard = SlotGuard::new(&state.cache, &key, &slot);
        let traced = slot.cell.get_or_try_init(|| match self.trace(state, sig, &key, call_no, failed, body) {
            TraceOutcome::Traced(entry, relaxation) => {
                // Listed before the cell is set; lookups skip it until then.
                if let Some(relaxation) = relaxation {
                    state.cache.add_relaxed(relaxation, slot.clone());
                }
                Ok(entry)
            }
            TraceOutcome::BodyReturned(r) => Err(Resolved::Return(r)),
            TraceOutcome::Failed(e) => Err(Resolved::Fail(e)),
        });
        drop(guard);
        match traced {
            Ok(entry) => {
                let entry = entry.clone();
                self.evict(state);
                Resolved::Run(entry)
            }
            Err(resolved) => resolved,
        }
    }

    /// Traces `body` for this signature (with relaxed dims when the policy says so) and
    /// records the trace.
    fn trace<R: GraphReturn>(
        &self,
        state: &State,
        sig: &Signature,
        key: &CacheKey,
        call_no: u64,
        failed: Option<String>,
        body: impl FnOnce() -> R,
    ) -> TraceOutcome<R> {
        let (shapes, relaxed_key) = self.shapes_to_trace(state, sig);
        let admission = match self.admit_trace(state, sig, key) {
            Ok(admission) => admission,
            Err(e) => return TraceOutcome::Failed(e),
        };
        let names = sig.leaf_names(self.arg_names);
        let guard = crate::trace::TraceGuard::begin(&state.full_name);
        for (slot, (i, t)) in sig.slot_leaves().enumerate() {
            guard.bind_arg(t, slot, &names[i], shapes[i].clone());
        }
        let (outputs, structure) = match body().split() {
            Ok(parts) => parts,
            Err(r) => return TraceOutcome::BodyReturned(r),
        };
        let traced = match guard.finish(&outputs) {
            Ok(traced) => traced,
            Err(e) => return TraceOutcome::Failed(e),
        };
        let function = ConcreteFunction::from_traced(&state.full_name, traced, self.options.optimize);
        let mut signature = key::describe(self.arg_names, KeyRef::new(&sig.with_shapes(&shapes), &sig.fields));
        let guards = function.guards();
        if !guards.is_empty() {
            signature = format!("{signature} where {}", guards.join(", "));
        }
        admission.keep();
        let any_rank = super::policy::traces_at_unknown_rank(function.traced_graph());
        let traced = TracedShapes { erased: sig.erased(), rank_erased: sig.rank_erased(), shapes: shapes.clone(), any_rank };
        self.record_trace(state, sig, key, traced, signature.clone(), call_no, failed);
        // A trace under a fixed signature with guards serves the dims that pass them only:
        // listed as relaxed, so a call failing another trace's guards can find it.
        let relaxed_key = match self.options.input_signature.is_some() && function.dim_guards().is_some() {
            true => Some(sig.erased()),
            false => relaxed_key,
        };
        let relaxation = relaxed_key.map(|erased| Relaxation { erased, shapes });
        TraceOutcome::Traced(Arc::new(Entry { function, structure: Box::new(structure), signature }), relaxation)
    }
}
