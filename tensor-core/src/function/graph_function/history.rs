//! The record of a function's traces: each trace's signature and the reason it happened
//! (worked out against the trace before it, or a signature that left the cache), and the
//! warning when a function retraces often.

use super::super::key::{self, CacheKey, Fields, KeyRef, Signature};
use super::{warning, GraphFunction, State};
use crate::shape::Shape;
use std::collections::HashMap;
use std::sync::atomic::Ordering;

/// Traces within this many calls count as "recent" for the retracing warning.
const RECENT_CALLS: u64 = 20;
/// The trace that triggers the warning (TF warns from the fifth, too).
const WARN_AT_TRACES: usize = 5;
/// How many removed signatures are remembered for retrace reasons.
const REMEMBER_REMOVED: usize = 1024;

/// One trace of a function, for introspection.
///
/// ```
/// use tensor_core::prelude::*;
/// #[graph_fn]
/// fn double(x: &Tensor) -> Result<Tensor> {
///     x.mul(2.0)
/// }
/// double(&Tensor::ones(&[2], DType::F32))?;
/// double(&Tensor::ones(&[3], DType::F32))?;
/// let traces = tensor_core::function::lookup("double").unwrap().traces();
/// assert_eq!(traces[1].signature, "x: f32[3]");
/// assert_eq!(traces[1].reason, "arg x: shape [2] -> [3]");
/// # Ok::<(), tensor_core::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct TraceRecord {
    /// The signature it was traced for (`x: f32[2, 3], lr: 0.01`; `?` for relaxed dims;
    /// ` (grad mode disabled)` after it for a call under `no_grad`).
    pub signature: String,
    /// Why it happened: `first call`, or what changed (`arg x: shape [2] -> [3]`,
    /// `grad mode: enabled -> disabled`).
    pub reason: String,
}

#[derive(Default)]
pub(super) struct History {
    pub(super) records: Vec<TraceRecord>,
    type_names: Vec<(u64, &'static str)>,
    /// The key the last trace is compared by (see `telling_key`), with its field names.
    last: Option<(CacheKey, Fields)>,
    /// For each trace, its keys without dims (and ranks) and the shapes it was traced for
    /// (relaxed ones included), so `reduce_retracing` relaxes against what was traced.
    pub(super) last_shapes: Vec<TracedShapes>,
    trace_calls: Vec<u64>,
    /// Cache keys that were traced and then evicted or cleared, for retrace reasons.
    removed: HashMap<CacheKey, Removal>,
}

/// What `reduce_retracing` relaxes a new signature against: an earlier trace's shapes.
pub(super) struct TracedShapes {
    /// The traced call's key without dims.
    pub(super) erased: CacheKey,
    /// The traced call's key without dims and ranks.
    pub(super) rank_erased: CacheKey,
    /// The shapes the trace used.
    pub(super) shapes: Vec<Shape>,
    /// Whether its graph could be traced at an unknown rank (`ops::unknown_rank`).
    pub(super) any_rank: bool,
}

/// Why a traced signature left the cache.
#[derive(Clone, Copy)]
pub(super) enum Removal {
    Evicted { capacity: usize },
    Cleared,
}

impl History {
    pub(super) fn note_removed(&mut self, keys: Vec<CacheKey>, why: Removal) {
        for key in keys {
            if self.removed.len() >= REMEMBER_REMOVED {
                self.removed.clear();
            }
            self.removed.insert(key, why);
        }
    }
}

impl GraphFunction {
    /// Why a call traces: its first call, a signature that left the cache, or what changed
    /// since the last traced signature.
    pub(super) fn reason(&self, history: &History, sig: &Signature, key: &CacheKey) -> String {
        let Some((old, old_fields)) = &history.last else { return "first call".to_string() };
        match history.removed.get(key) {
            Some(Removal::Evicted { capacity }) => return format!("the signature was evicted from the cache (capacity {capacity})"),
            Some(Removal::Cleared) => return "the cache was cleared".to_string(),
            None => {}
        }
        let mut types = history.type_names.clone();
        types.extend(sig.type_names.iter().copied());
        let new = self.telling_key(sig);
        let reasons = key::explain(self.arg_names, &types, KeyRef::new(old, old_fields), KeyRef::new(&new, &sig.fields));
        match reasons.is_empty() {
            true => "the same signature as the last trace (its cache entry was removed)".to_string(),
            false => reasons.join("; "),
        }
    }

    /// The key retrace reasons compare: the call's, with a fixed input signature's shapes in
    /// place of the dims it leaves out of the cache key.
    fn telling_key(&self, sig: &Signature) -> CacheKey {
        match self.options.input_signature {
            None => sig.key.clone(),
            Some(_) => sig.with_shapes(&self.fixed_shapes(sig)),
        }
    }

    /// Records a finished trace; its reason is worked out here, against the trace recorded
    /// before it, so concurrent traces read as a sequence (one `first call`).
    /// `failed` is the guard of a cached trace the call failed, when that is why it traces.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn record_trace(
        &self,
        state: &State,
        sig: &Signature,
        key: &CacheKey,
        traced: TracedShapes,
        signature: String,
        call_no: u64,
        failed: Option<String>,
    ) {
        let mut h = Self::history(state);
        let count = state.traces.fetch_add(1, Ordering::SeqCst) + 1;
        let reason = failed.unwrap_or_else(|| self.reason(&h, sig, key));
        h.records.push(TraceRecord { signature, reason: reason.clone() });
        for t in &sig.type_names {
            if !h.type_names.contains(t) {
                h.type_names.push(*t);
            }
        }
        h.removed.remove(key);
        h.last = Some((self.telling_key(sig), sig.fields.clone()));
        h.last_shapes.push(traced);
        h.trace_calls.push(call_no);
        // Traces of concurrent calls may be recorded out of call order: count, don't scan.
        let recent = h.trace_calls.iter().filter(|&&c| c <= call_no && call_no - c < RECENT_CALLS).count();
        drop(h); // a subscriber may introspect
        if recent >= WARN_AT_TRACES {
            warning::warn(&state.full_name, count, &retracing_message(&state.full_name, recent, count, &reason));
        }
    }
}

/// The warning for a function that traced `recent` times in its last `RECENT_CALLS` calls.
fn retracing_message(name: &str, recent: usize, count: usize, reason: &str) -> String {
    format!(
        "`{name}` traced {recent} times in its last {RECENT_CALLS} calls; trace {count} because {reason}. Retracing is \
         expensive: pass values that change as tensors rather than Rust scalars, use #[graph_fn(reduce_retracing)] \
         for varying dims, or fix an input_signature"
    )
}
