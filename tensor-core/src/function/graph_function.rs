//! `GraphFunction`: the runtime of one `#[graph_fn]` — its trace cache (a `DashMap` from
//! signature to a once-cell, so concurrent callers of a new signature trace it once), the
//! retracing policy, and the record of every trace and why it happened.

use super::concrete::ConcreteFunction;
use super::key::{self, Flattener, KeyWords, Signature};
use super::options::{Options, TracePolicy};
use super::output::GraphReturn;
use crate::error::{Error, Result};
use crate::shape::Shape;
use crate::tensor::Tensor;
use dashmap::DashMap;
use once_cell::sync::OnceCell;
use std::any::Any;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

static RUN_EAGERLY: AtomicBool = AtomicBool::new(false);

/// Makes every `#[graph_fn]` run its body as plain eager code on every call (for debugging),
/// as TF's `tf.config.run_functions_eagerly`.
///
/// ```
/// tensor_core::run_functions_eagerly(true);
/// assert!(tensor_core::functions_run_eagerly());
/// tensor_core::run_functions_eagerly(false);
/// ```
pub fn run_functions_eagerly(on: bool) {
    RUN_EAGERLY.store(on, Ordering::SeqCst);
}

/// True when `run_functions_eagerly(true)` is in effect.
pub fn functions_run_eagerly() -> bool {
    RUN_EAGERLY.load(Ordering::SeqCst)
}

/// Traces within this many calls count as "recent" for the retracing warning.
const RECENT_CALLS: u64 = 20;
/// The trace that triggers the warning (TF warns from the fifth, too).
const WARN_AT_TRACES: usize = 5;

/// One trace of a function, for introspection.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceRecord {
    /// The signature it was traced for (`x: f32[2, 3], lr: 0.01`; `?` for relaxed dims).
    pub signature: String,
    /// Why it happened: `first call`, or what changed (`arg x: shape [2] -> [3]`).
    pub reason: String,
}

/// A cached concrete function and what rebuilds its outputs.
struct Entry {
    function: ConcreteFunction,
    structure: Box<dyn Any + Send + Sync>,
    words: KeyWords,
}

struct CacheSlot {
    cell: OnceCell<Arc<Entry>>,
    last_used: AtomicU64,
}

/// A relaxed trace and the erased key it serves.
struct Relaxed {
    erased: KeyWords,
    shapes: Vec<Shape>,
    entry: Arc<Entry>,
}

struct State {
    full_name: String,
    cache: DashMap<KeyWords, Arc<CacheSlot>>,
    relaxed: Mutex<Vec<Relaxed>>,
    history: Mutex<History>,
    traces: AtomicUsize,
    calls: AtomicU64,
    capacity: AtomicUsize,
}

#[derive(Default)]
struct History {
    records: Vec<TraceRecord>,
    type_names: Vec<(u64, &'static str)>,
    last_words: Option<KeyWords>,
    last_shapes: Vec<(KeyWords, Vec<Shape>)>,
    trace_calls: Vec<u64>,
}

/// The runtime of one `#[graph_fn]` (a `static` the macro emits in the function).
pub struct GraphFunction {
    name: &'static str,
    module: &'static str,
    arg_names: &'static [&'static str],
    options: Options,
    state: OnceLock<State>,
}

/// How a trace ended without a cache entry.
enum TraceEnd<R> {
    /// The body returned this value (an `Err`), passed to the caller.
    Return(R),
    Error(Error),
}

impl GraphFunction {
    /// A graph function's runtime (used by the macro's expansion).
    pub const fn new(name: &'static str, module: &'static str, arg_names: &'static [&'static str], options: Options) -> GraphFunction {
        GraphFunction { name, module, arg_names, options, state: OnceLock::new() }
    }

    fn state(&'static self, self_type: Option<&'static str>) -> &'static State {
        self.state.get_or_init(|| {
            super::registry::register(self);
            State {
                full_name: full_name(self.options.name.unwrap_or(self.name), self_type),
                cache: DashMap::new(),
                relaxed: Mutex::new(Vec::new()),
                history: Mutex::new(History::default()),
                traces: AtomicUsize::new(0),
                calls: AtomicU64::new(0),
                capacity: AtomicUsize::new(self.options.cache_capacity.max(1)),
            }
        })
    }

    /// Flattens the arguments with `flatten`, or `None` when the body should run eagerly
    /// (`run_functions_eagerly`, or a call from inside another trace, which inlines).
    pub fn flatten_args(&self, flatten: impl FnOnce(&mut Flattener)) -> Option<Flattener> {
        if functions_run_eagerly() || crate::trace::is_active() {
            return None;
        }
        let mut f = Flattener::new();
        flatten(&mut f);
        Some(f)
    }

    /// Calls the function: runs the cached graph for this signature, tracing `body` first if
    /// there is none; with `flat == None`, runs `body` eagerly.
    pub fn call<R: GraphReturn, F: FnOnce() -> R>(&'static self, self_type: Option<&'static str>, flat: Option<Flattener>, body: F) -> R {
        let Some(flat) = flat else { return body() };
        let sig = flat.finish();
        let state = self.state(self_type);
        let call_no = state.calls.fetch_add(1, Ordering::Relaxed) + 1;
        let entry = match self.lookup(state, &sig, call_no) {
            Ok(Some(e)) => e,
            Ok(None) => match self.trace_entry(state, &sig, call_no, body) {
                Ok(e) => e,
                Err(TraceEnd::Return(r)) => return r,
                Err(TraceEnd::Error(e)) => return R::from_error(e),
            },
            Err(e) => return R::from_error(e),
        };
        let leaves: smallvec::SmallVec<[&Tensor; 8]> = sig.leaves.iter().collect();
        match entry.function.run(&leaves) {
            Ok(outputs) => {
                let structure = entry.structure.downcast_ref::<R::Structure>().expect("one return type per function");
                R::join(structure, outputs)
            }
            Err(e) => R::from_error(e),
        }
    }

    /// The key this call is cached under (dims of fixed-signature arguments left out).
    fn cache_key(&self, sig: &Signature) -> Result<KeyWords> {
        let Some(specs) = self.options.input_signature else { return Ok(sig.words.clone()) };
        for spec in specs {
            let leaf = sig.leaf_args.iter().position(|&a| a as usize == spec.arg);
            let arg = self.arg_names.get(spec.arg).copied().unwrap_or("?");
            let mismatch = |found: String| Error::SignatureMismatch {
                function: self.name.to_string(),
                arg: arg.to_string(),
                expected: format!("{}{}", spec.dtype, spec.shape()),
                found,
            };
            let t = &sig.leaves[leaf.ok_or_else(|| mismatch("no tensor".into()))?];
            if t.dtype() != spec.dtype || !spec.shape().admits(&t.0.shape) {
                return Err(mismatch(format!("{}{}", t.dtype(), t.0.shape)));
            }
        }
        let args: Vec<usize> = specs.iter().map(|s| s.arg).collect();
        Ok(sig.erased_for_args(&args))
    }

    fn lookup(&self, state: &State, sig: &Signature, call_no: u64) -> Result<Option<Arc<Entry>>> {
        let key = self.cache_key(sig)?;
        if let Some(slot) = state.cache.get(&key[..]) {
            if let Some(e) = slot.cell.get() {
                slot.last_used.store(call_no, Ordering::Relaxed);
                return Ok(Some(e.clone()));
            }
        }
        if self.options.reduce_retracing {
            let erased = sig.erased();
            let shapes = sig.shapes();
            let relaxed = state.relaxed.lock().unwrap_or_else(|e| e.into_inner());
            let hit = relaxed.iter().find(|r| r.erased == erased && r.shapes.iter().zip(&shapes).all(|(a, b)| a.admits(b)));
            if let Some(r) = hit {
                return Ok(Some(r.entry.clone()));
            }
        }
        Ok(None)
    }

    fn trace_entry<R: GraphReturn>(
        &'static self,
        state: &State,
        sig: &Signature,
        call_no: u64,
        body: impl FnOnce() -> R,
    ) -> std::result::Result<Arc<Entry>, TraceEnd<R>> {
        let key = self.cache_key(sig).map_err(TraceEnd::Error)?;
        let slot = state
            .cache
            .entry(key.clone())
            .or_insert_with(|| Arc::new(CacheSlot { cell: OnceCell::new(), last_used: AtomicU64::new(call_no) }))
            .clone();
        let cleanup = RemoveIfEmpty { state, key: &key, slot: &slot };
        let mut body = Some(body);
        let mut passed: Option<R> = None;
        let mut relaxed: Option<(KeyWords, Vec<Shape>)> = None;
        let result = slot.cell.get_or_try_init(|| {
            let body = body.take().expect("the initializer runs once");
            self.trace(state, sig, call_no, body, &mut passed, &mut relaxed).map(Arc::new)
        });
        drop(cleanup);
        match (result, passed) {
            (Ok(e), _) => {
                if let Some((erased, shapes)) = relaxed {
                    state.relaxed.lock().unwrap_or_else(|e| e.into_inner()).push(Relaxed { erased, shapes, entry: e.clone() });
                }
                self.evict(state);
                Ok(e.clone())
            }
            (Err(_), Some(r)) => Err(TraceEnd::Return(r)),
            (Err(e), None) => Err(TraceEnd::Error(e)),
        }
    }

    /// Traces `body` for this signature (relaxing dims when the policy says so).
    fn trace<R: GraphReturn>(
        &self,
        state: &State,
        sig: &Signature,
        call_no: u64,
        body: impl FnOnce() -> R,
        passed: &mut Option<R>,
        relaxed: &mut Option<(KeyWords, Vec<Shape>)>,
    ) -> Result<Entry> {
        let (shapes, relaxed_erased) = self.shapes_to_trace(state, sig);
        let reason = self.admit_trace(state, sig)?;
        let names = sig.leaf_names(self.arg_names);
        let guard = crate::trace::TraceGuard::begin(&state.full_name);
        for ((t, name), shape) in sig.leaves.iter().zip(&names).zip(&shapes) {
            guard.bind_arg(t, name, shape.clone());
        }
        let (outputs, structure) = match body().split() {
            Ok(parts) => parts,
            Err(r) => {
                *passed = Some(r);
                return Err(Error::ControlFlow { construct: "the traced body returned an error".into() });
            }
        };
        let traced = guard.finish(&outputs)?;
        let function = ConcreteFunction::from_traced(&state.full_name, traced, self.options.optimize);
        let entry = Entry { function, structure: Box::new(structure), words: sig.words.clone() };
        self.record_trace(state, sig, &shapes, reason, call_no);
        *relaxed = relaxed_erased.map(|erased| (erased, shapes));
        Ok(entry)
    }

    /// The shapes to trace with: the call's, the fixed signature's, or — under
    /// `reduce_retracing`, when an earlier trace differs only in dims — relaxed ones.
    fn shapes_to_trace(&self, state: &State, sig: &Signature) -> (Vec<Shape>, Option<KeyWords>) {
        let mut shapes = sig.shapes();
        if let Some(specs) = self.options.input_signature {
            for spec in specs {
                if let Some(leaf) = sig.leaf_args.iter().position(|&a| a as usize == spec.arg) {
                    shapes[leaf] = spec.shape();
                }
            }
            return (shapes, None);
        }
        if !self.options.reduce_retracing {
            return (shapes, None);
        }
        let erased = sig.erased();
        let history = state.history.lock().unwrap_or_else(|e| e.into_inner());
        match history.last_shapes.iter().rev().find(|(e, _)| *e == erased) {
            Some((_, old)) => (key::relax(old, &shapes), Some(erased)),
            None => (shapes, None),
        }
    }

    /// Checks `max_traces` and works out why this trace happens.
    fn admit_trace(&self, state: &State, sig: &Signature) -> Result<String> {
        let history = state.history.lock().unwrap_or_else(|e| e.into_inner());
        let reason = match &history.last_words {
            None => "first call".to_string(),
            Some(old) => {
                let mut types = history.type_names.clone();
                types.extend(sig.type_names.iter().copied());
                key::explain(self.arg_names, &types, old, &sig.words).join("; ")
            }
        };
        let count = state.traces.load(Ordering::Relaxed);
        if let Some((limit, policy)) = self.options.max_traces {
            if count >= limit {
                let err = Error::TooManyTraces { function: state.full_name.clone(), count: count + 1, limit, reason: reason.clone() };
                match policy {
                    TracePolicy::Error => return Err(err),
                    TracePolicy::Warn => tracing::warn!(target: "tensor_core::graph_fn", "{err}"),
                }
            }
        }
        Ok(reason)
    }

    fn record_trace(&self, state: &State, sig: &Signature, shapes: &[Shape], reason: String, call_no: u64) {
        let count = state.traces.fetch_add(1, Ordering::Relaxed) + 1;
        let mut h = state.history.lock().unwrap_or_else(|e| e.into_inner());
        let mut signature = key::describe(self.arg_names, &sig.words);
        if shapes.iter().any(|s| !s.is_known()) {
            let relaxed: Vec<String> = shapes.iter().map(Shape::to_string).collect();
            signature = format!("{signature} (traced for shapes {})", relaxed.join(", "));
        }
        h.records.push(TraceRecord { signature, reason: reason.clone() });
        for t in &sig.type_names {
            if !h.type_names.contains(t) {
                h.type_names.push(*t);
            }
        }
        h.last_words = Some(sig.words.clone());
        h.last_shapes.push((sig.erased(), sig.shapes()));
        h.trace_calls.push(call_no);
        let recent = h.trace_calls.len() >= WARN_AT_TRACES && call_no - h.trace_calls[h.trace_calls.len() - WARN_AT_TRACES] < RECENT_CALLS;
        if count >= WARN_AT_TRACES && recent {
            tracing::warn!(
                target: "tensor_core::graph_fn",
                "{} was traced {count} times within its last {RECENT_CALLS} calls; this retrace because {reason}. Retracing is expensive: pass tensors instead of changing Rust values, use #[graph_fn(reduce_retracing)] for varying dims, or fix the input_signature",
                state.full_name
            );
        }
    }

    /// Drops least recently used entries beyond the capacity.
    fn evict(&self, state: &State) {
        let capacity = state.capacity.load(Ordering::Relaxed);
        while state.cache.len() > capacity {
            let oldest =
                state.cache.iter().filter(|s| s.cell.get().is_some()).min_by_key(|s| s.last_used.load(Ordering::Relaxed)).map(|s| s.key().clone());
            match oldest {
                Some(k) => drop(state.cache.remove(&k)),
                None => break,
            }
        }
    }
}

/// Removes a cache slot whose trace failed or panicked, so no half-made entry stays.
struct RemoveIfEmpty<'a> {
    state: &'a State,
    key: &'a KeyWords,
    slot: &'a Arc<CacheSlot>,
}

impl Drop for RemoveIfEmpty<'_> {
    fn drop(&mut self) {
        if self.slot.cell.get().is_none() {
            self.state.cache.remove_if(self.key, |_, s| Arc::ptr_eq(s, self.slot) && s.cell.get().is_none());
        }
    }
}

fn full_name(name: &str, self_type: Option<&str>) -> String {
    match self_type {
        Some(t) => {
            let base = t.split('<').next().unwrap_or(t);
            format!("{}::{name}", base.rsplit("::").next().unwrap_or(base))
        }
        None => name.to_string(),
    }
}

// ------------------------------------------------------------------------------ introspection

impl GraphFunction {
    /// The function's name (`Mlp::forward` for methods).
    pub fn name(&self) -> &str {
        self.state.get().map_or(self.options.name.unwrap_or(self.name), |s| s.full_name.as_str())
    }

    /// The module the function is defined in.
    pub fn module(&self) -> &str {
        self.module
    }

    /// How many times the function has traced.
    pub fn trace_count(&self) -> usize {
        self.state.get().map_or(0, |s| s.traces.load(Ordering::Relaxed))
    }

    /// Every trace so far, in order, with its signature and the reason it happened.
    pub fn traces(&self) -> Vec<TraceRecord> {
        self.state.get().map_or_else(Vec::new, |s| s.history.lock().unwrap_or_else(|e| e.into_inner()).records.clone())
    }

    /// The reasons of every trace so far (`first call`, `arg x: shape [2] -> [3]`, ...).
    pub fn retrace_reasons(&self) -> Vec<String> {
        self.traces().into_iter().map(|t| t.reason).collect()
    }

    /// The signatures currently cached, in the order they were traced.
    pub fn cached_signatures(&self) -> Vec<String> {
        self.cached().into_iter().map(|(words, _)| key::describe(self.arg_names, &words)).collect()
    }

    /// The concrete functions currently cached (their graphs: `to_text()`, `to_dot()`).
    pub fn concrete_functions(&self) -> Vec<ConcreteFunction> {
        self.cached().into_iter().map(|(_, f)| f).collect()
    }

    fn cached(&self) -> Vec<(KeyWords, ConcreteFunction)> {
        let Some(s) = self.state.get() else { return Vec::new() };
        let mut entries: Vec<(u64, KeyWords, ConcreteFunction)> =
            s.cache.iter().filter_map(|slot| slot.cell.get().map(|e| (e.function.serial(), e.words.clone(), e.function.clone()))).collect();
        entries.sort_by_key(|e| e.0);
        entries.dedup_by_key(|e| e.0);
        entries.into_iter().map(|(_, w, f)| (w, f)).collect()
    }

    /// Empties the cache (the trace count and history stay).
    pub fn clear_cache(&self) {
        if let Some(s) = self.state.get() {
            s.cache.clear();
            s.relaxed.lock().unwrap_or_else(|e| e.into_inner()).clear();
        }
    }

    /// Sets how many signatures the cache keeps (least recently used are evicted).
    pub fn set_cache_capacity(&'static self, capacity: usize) {
        let s = self.state(None);
        s.capacity.store(capacity.max(1), Ordering::Relaxed);
        self.evict(s);
    }
}
