//! `GraphFunction`: the runtime of one `#[graph_fn]` — its trace cache (a `DashMap` from
//! signature to a once-cell, so concurrent callers of a new signature trace it once), the
//! retracing policy, and the record of every trace and why it happened.

use super::concrete::ConcreteFunction;
use super::key::{self, Fields, Flattener, KeyRef, KeyWords, Signature};
use super::options::{Options, TracePolicy};
use super::output::GraphReturn;
use crate::error::{Error, Result};
use crate::shape::Shape;
use crate::tensor::Tensor;
use dashmap::DashMap;
use once_cell::sync::OnceCell;
use std::any::Any;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

static RUN_EAGERLY: AtomicBool = AtomicBool::new(false);

/// Makes every `#[graph_fn]` run its body as plain eager code on every call (for debugging),
/// as TF's `tf.config.run_functions_eagerly`.
///
/// ```standalone_crate
/// tensor_core::run_functions_eagerly(true);
/// assert!(tensor_core::functions_run_eagerly());
/// tensor_core::run_functions_eagerly(false);
/// ```
pub fn run_functions_eagerly(on: bool) {
    RUN_EAGERLY.store(on, Ordering::SeqCst);
}

/// True when `run_functions_eagerly(true)` is in effect.
///
/// ```standalone_crate
/// use tensor_core::prelude::*;
/// use tensor_core::function::functions_run_eagerly;
/// run_functions_eagerly(true);
/// assert!(functions_run_eagerly());
/// run_functions_eagerly(false);
/// assert!(!functions_run_eagerly());
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub fn functions_run_eagerly() -> bool {
    RUN_EAGERLY.load(Ordering::SeqCst)
}

/// Traces within this many calls count as "recent" for the retracing warning.
const RECENT_CALLS: u64 = 20;
/// The trace that triggers the warning (TF warns from the fifth, too).
const WARN_AT_TRACES: usize = 5;

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
    /// The signature it was traced for (`x: f32[2, 3], lr: 0.01`; `?` for relaxed dims).
    pub signature: String,
    /// Why it happened: `first call`, or what changed (`arg x: shape [2] -> [3]`).
    pub reason: String,
}

/// A cached concrete function and what rebuilds its outputs.
struct Entry {
    function: ConcreteFunction,
    structure: Box<dyn Any + Send + Sync>,
    /// The signature it serves (`x: f32[?, 784]`: unknown dims shown as `?`).
    signature: String,
}

struct CacheSlot {
    cell: OnceCell<Arc<Entry>>,
    last_used: AtomicU64,
}

/// A relaxed trace (`reduce_retracing`): the erased key it serves, the shapes it admits,
/// and the cache slot holding it (evicting the slot drops the relaxed trace too).
struct Relaxed {
    erased: KeyWords,
    shapes: Vec<Shape>,
    slot: Arc<CacheSlot>,
}

struct State {
    full_name: String,
    cache: DashMap<KeyWords, Arc<CacheSlot>>,
    relaxed: Mutex<Vec<Relaxed>>,
    history: Mutex<History>,
    traces: AtomicUsize,
    /// Traces admitted under `max_traces` (finished or in progress).
    admitted: AtomicUsize,
    calls: AtomicU64,
    capacity: AtomicUsize,
}

#[derive(Default)]
struct History {
    records: Vec<TraceRecord>,
    type_names: Vec<(u64, &'static str)>,
    last_words: Option<KeyWords>,
    last_fields: Fields,
    /// For each trace, its erased key and the shapes it was traced for (relaxed ones
    /// included), so `reduce_retracing` relaxes against what was traced.
    last_shapes: Vec<(KeyWords, Vec<Shape>)>,
    trace_calls: Vec<u64>,
    /// Cache keys that were traced and then evicted or cleared, for retrace reasons.
    removed: HashMap<KeyWords, Removal>,
}

/// How many removed signatures are remembered for retrace reasons.
const REMEMBER_REMOVED: usize = 1024;

impl History {
    fn note_removed(&mut self, key: KeyWords, why: Removal) {
        if self.removed.len() >= REMEMBER_REMOVED {
            self.removed.clear();
        }
        self.removed.insert(key, why);
    }
}

/// Why a traced signature left the cache.
#[derive(Clone, Copy)]
enum Removal {
    Evicted { capacity: usize },
    Cleared,
}

/// The runtime of one `#[graph_fn]` (a `static` the macro emits in the function).
///
/// ```
/// use tensor_core::prelude::*;
/// #[graph_fn]
/// fn square(x: &Tensor) -> Result<Tensor> {
///     x.mul(x)
/// }
/// square(&Tensor::ones(&[2], DType::F32))?;
/// let f = tensor_core::function::lookup("square").unwrap();
/// assert_eq!((f.name(), f.trace_count()), ("square", 1));
/// # Ok::<(), tensor_core::Error>(())
/// ```
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
    #[doc(hidden)]
    /// A graph function's runtime (used by the macro's expansion).
    pub const fn new(name: &'static str, module: &'static str, arg_names: &'static [&'static str], options: Options) -> GraphFunction {
        GraphFunction { name, module, arg_names, options, state: OnceLock::new() }
    }

    fn state(&'static self, self_type: Option<&'static str>) -> &'static State {
        self.state.get_or_init(|| {
            super::registry::register(self);
            State {
                full_name: full_name(self.options.name, self.name, self_type),
                cache: DashMap::new(),
                relaxed: Mutex::new(Vec::new()),
                history: Mutex::new(History::default()),
                traces: AtomicUsize::new(0),
                admitted: AtomicUsize::new(0),
                calls: AtomicU64::new(0),
                capacity: AtomicUsize::new(self.options.cache_capacity.max(1)),
            }
        })
    }

    #[doc(hidden)]
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

    #[doc(hidden)]
    /// Calls the function: runs the cached graph for this signature, tracing `body` first if
    /// there is none; with `flat == None`, runs `body` eagerly.
    pub fn call<R, F>(&'static self, self_type: Option<&'static str>, flat: Option<Flattener>, body: F) -> R
    where
        R: GraphReturn,
        F: FnOnce() -> R,
    {
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
        let leaves: smallvec::SmallVec<[&Tensor; 8]> = sig.slot_leaves().map(|(_, t)| t).collect();
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
        if let Some(slot) = state.cache.get(&key[..])
            && let Some(e) = slot.cell.get()
        {
            slot.last_used.store(call_no, Ordering::Relaxed);
            return Ok(Some(e.clone()));
        }
        if self.options.reduce_retracing {
            let erased = sig.erased();
            let shapes = sig.shapes();
            let relaxed = state.relaxed.lock().unwrap_or_else(|e| e.into_inner());
            let admits = |r: &&Relaxed| r.erased == erased && r.shapes.iter().zip(&shapes).all(|(a, b)| a.admits(b));
            if let Some(e) = relaxed.iter().filter(admits).find_map(|r| r.slot.cell.get().map(|e| (r, e))) {
                e.0.slot.last_used.store(call_no, Ordering::Relaxed);
                return Ok(Some(e.1.clone()));
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
            self.trace(state, sig, &key, call_no, body, &mut passed, &mut relaxed).map(Arc::new)
        });
        drop(cleanup);
        match (result, passed) {
            (Ok(e), _) => {
                if let Some((erased, shapes)) = relaxed {
                    state.relaxed.lock().unwrap_or_else(|e| e.into_inner()).push(Relaxed { erased, shapes, slot: slot.clone() });
                }
                self.evict(state);
                Ok(e.clone())
            }
            (Err(_), Some(r)) => Err(TraceEnd::Return(r)),
            (Err(e), None) => Err(TraceEnd::Error(e)),
        }
    }

    /// Traces `body` for this signature (relaxing dims when the policy says so).
    #[allow(clippy::too_many_arguments)]
    fn trace<R: GraphReturn>(
        &self,
        state: &State,
        sig: &Signature,
        key: &[u64],
        call_no: u64,
        body: impl FnOnce() -> R,
        passed: &mut Option<R>,
        relaxed: &mut Option<(KeyWords, Vec<Shape>)>,
    ) -> Result<Entry> {
        let (shapes, relaxed_erased) = self.shapes_to_trace(state, sig);
        let admission = self.admit_trace(state, sig, key)?;
        let names = sig.leaf_names(self.arg_names);
        let guard = crate::trace::TraceGuard::begin(&state.full_name);
        for (i, t) in sig.slot_leaves() {
            guard.bind_arg(t, &names[i], shapes[i].clone());
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
        let signature = key::describe(self.arg_names, KeyRef { words: &sig.words_with_shapes(&shapes), fields: &sig.fields });
        let entry = Entry { function, structure: Box::new(structure), signature: signature.clone() };
        admission.keep();
        self.record_trace(state, sig, key, &shapes, signature, call_no);
        *relaxed = relaxed_erased.map(|erased| (erased, shapes));
        Ok(entry)
    }

    /// The shapes to trace with: the call's, the fixed signature's, or — under
    /// `reduce_retracing`, when an earlier trace differs only in dims — relaxed ones.
    fn shapes_to_trace(&self, state: &State, sig: &Signature) -> (Vec<Shape>, Option<KeyWords>) {
        let shapes = self.fixed_shapes(sig);
        if self.options.input_signature.is_some() || !self.options.reduce_retracing {
            return (shapes, None);
        }
        let erased = sig.erased();
        let history = state.history.lock().unwrap_or_else(|e| e.into_inner());
        match history.last_shapes.iter().rev().find(|(e, _)| *e == erased) {
            // Relax against what the last such trace used, so the traces widen ([2] -> [?];
            // [?, 5] then [3, 6] -> [?, ?]) instead of jumping between partial guesses.
            Some((_, old)) => (key::relax(old, &shapes), Some(erased)),
            None => (shapes, None),
        }
    }

    /// The call's leaf shapes, with a fixed input signature's shapes for the arguments it
    /// covers.
    fn fixed_shapes(&self, sig: &Signature) -> Vec<Shape> {
        let mut shapes = sig.shapes();
        for spec in self.options.input_signature.unwrap_or_default() {
            if let Some(leaf) = sig.leaf_args.iter().position(|&a| a as usize == spec.arg) {
                shapes[leaf] = spec.shape();
            }
        }
        shapes
    }

    /// The words retrace reasons compare: the call's, with a fixed input signature's shapes in
    /// place of the dims it leaves out of the key.
    fn telling_words(&self, sig: &Signature) -> KeyWords {
        match self.options.input_signature {
            None => sig.words.clone(),
            Some(_) => sig.words_with_shapes(&self.fixed_shapes(sig)),
        }
    }

    /// Checks `max_traces`, reserving this trace's place.
    fn admit_trace<'s>(&self, state: &'s State, sig: &Signature, key: &[u64]) -> Result<Admission<'s>> {
        let admitted = state.admitted.fetch_add(1, Ordering::SeqCst);
        let admission = Admission { admitted: &state.admitted, kept: false };
        if let Some((limit, policy)) = self.options.max_traces
            && admitted >= limit
        {
            let reason = self.reason(&state.history.lock().unwrap_or_else(|e| e.into_inner()), sig, key);
            let err = Error::TooManyTraces { function: state.full_name.clone(), count: admitted + 1, limit, reason };
            match policy {
                TracePolicy::Error => return Err(err),
                TracePolicy::Warn => tracing::warn!(target: "tensor_core::graph_fn", function = %state.full_name, "{err}"),
            }
        }
        Ok(admission)
    }

    /// Why a call traces: its first call, a signature that left the cache, or what changed
    /// since the last traced signature.
    fn reason(&self, history: &History, sig: &Signature, key: &[u64]) -> String {
        let Some(old) = &history.last_words else { return "first call".to_string() };
        match history.removed.get(key) {
            Some(Removal::Evicted { capacity }) => return format!("the signature was evicted from the cache (capacity {capacity})"),
            Some(Removal::Cleared) => return "the cache was cleared".to_string(),
            None => {}
        }
        let mut types = history.type_names.clone();
        types.extend(sig.type_names.iter().copied());
        let old = KeyRef { words: old, fields: &history.last_fields };
        let reasons = key::explain(self.arg_names, &types, old, KeyRef { words: &self.telling_words(sig), fields: &sig.fields });
        match reasons.is_empty() {
            true => "the same signature as the last trace (its cache entry was removed)".to_string(),
            false => reasons.join("; "),
        }
    }

    /// Records a finished trace; its reason is worked out here, against the trace recorded
    /// before it, so concurrent traces read as a sequence (one `first call`).
    fn record_trace(&self, state: &State, sig: &Signature, key: &[u64], shapes: &[Shape], signature: String, call_no: u64) {
        let mut h = state.history.lock().unwrap_or_else(|e| e.into_inner());
        let count = state.traces.fetch_add(1, Ordering::SeqCst) + 1;
        let reason = self.reason(&h, sig, key);
        let record = TraceRecord { signature, reason: reason.clone() };
        h.records.push(record);
        for t in &sig.type_names {
            if !h.type_names.contains(t) {
                h.type_names.push(*t);
            }
        }
        h.removed.remove(key);
        h.last_words = Some(self.telling_words(sig));
        h.last_fields = sig.fields.clone();
        h.last_shapes.push((sig.erased(), shapes.to_vec()));
        h.trace_calls.push(call_no);
        // Traces of concurrent calls may be recorded out of call order: count, don't scan.
        let recent = h.trace_calls.iter().filter(|&&c| c <= call_no && call_no - c < RECENT_CALLS).count();
        drop(h); // a subscriber may introspect
        if recent >= WARN_AT_TRACES {
            tracing::warn!(
                target: "tensor_core::graph_fn",
                function = %state.full_name,
                traces = count,
                "`{}` traced {recent} times in its last {RECENT_CALLS} calls; trace {count} because {reason}. Retracing is \
                 expensive: pass values that change as tensors rather than Rust scalars, use #[graph_fn(reduce_retracing)] \
                 for varying dims, or fix an input_signature",
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
            let Some((key, slot)) = oldest.and_then(|k| state.cache.remove(&k)) else { break };
            state.relaxed.lock().unwrap_or_else(|e| e.into_inner()).retain(|r| !Arc::ptr_eq(&r.slot, &slot));
            state.history.lock().unwrap_or_else(|e| e.into_inner()).note_removed(key, Removal::Evicted { capacity });
        }
    }
}

/// A trace's place under `max_traces`, given back unless the trace finishes (an `Err` from
/// the body, a failed trace or a panic does not count).
struct Admission<'a> {
    admitted: &'a AtomicUsize,
    kept: bool,
}

impl Admission<'_> {
    fn keep(mut self) {
        self.kept = true;
    }
}

impl Drop for Admission<'_> {
    fn drop(&mut self) {
        if !self.kept {
            self.admitted.fetch_sub(1, Ordering::SeqCst);
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

/// The name introspection and messages use: an explicit `name = "..."` as given, else the
/// function's name, prefixed by its type for methods (`Mlp::step`).
fn full_name(name: Option<&str>, fn_name: &str, self_type: Option<&str>) -> String {
    let name = match name {
        Some(explicit) => return explicit.to_string(),
        None => fn_name,
    };
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
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// struct Model {
    ///     w: Tensor,
    /// }
    /// #[derive(GraphArg)]
    /// struct Batch {
    ///     x: Tensor,
    /// }
    /// impl Model {
    ///     #[graph_fn]
    ///     fn forward(&self, b: &Batch) -> Result<Tensor> {
    ///         b.x.matmul(&self.w)
    ///     }
    /// }
    /// impl GraphArg for Model {
    ///     fn flatten(&self, f: &mut tensor_core::function::Flattener) {
    ///         self.w.flatten(f);
    ///     }
    /// }
    /// let m = Model { w: Tensor::ones(&[2, 2], DType::F32) };
    /// m.forward(&Batch { x: Tensor::ones(&[1, 2], DType::F32) })?;
    /// assert!(tensor_core::function::lookup("Model::forward").is_some());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn name(&self) -> &str {
        self.state.get().map_or(self.options.name.unwrap_or(self.name), |s| s.full_name.as_str())
    }

    /// The module the function is defined in.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// #[graph_fn]
    /// fn neg(x: &Tensor) -> Tensor {
    ///     -x
    /// }
    /// neg(&Tensor::ones(&[1], DType::F32));
    /// assert!(!tensor_core::function::lookup("neg").unwrap().module().is_empty());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn module(&self) -> &str {
        self.module
    }

    /// How many times the function has traced.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// #[graph_fn]
    /// fn scale(x: &Tensor, by: f32) -> Result<Tensor> {
    ///     x.mul(by)
    /// }
    /// let x = Tensor::ones(&[2], DType::F32);
    /// scale(&x, 2.0)?;
    /// scale(&x, 2.0)?; // cached
    /// scale(&x, 3.0)?; // a new Rust scalar value: retraces
    /// assert_eq!(tensor_core::function::lookup("scale").unwrap().trace_count(), 2);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn trace_count(&self) -> usize {
        self.state.get().map_or(0, |s| s.traces.load(Ordering::Relaxed))
    }

    /// Every trace so far, in order, with its signature and the reason it happened.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// #[graph_fn]
    /// fn id(x: &Tensor) -> Tensor {
    ///     x.clone()
    /// }
    /// id(&Tensor::ones(&[2], DType::I32));
    /// id(&Tensor::ones(&[2], DType::F32));
    /// let t = tensor_core::function::lookup("id").unwrap().traces();
    /// assert_eq!((t[0].reason.as_str(), t[1].reason.as_str()), ("first call", "arg x: dtype i32 -> f32"));
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn traces(&self) -> Vec<TraceRecord> {
        self.state.get().map_or_else(Vec::new, |s| s.history.lock().unwrap_or_else(|e| e.into_inner()).records.clone())
    }

    /// The reasons of every trace so far (`first call`, `arg x: shape [2] -> [3]`, ...).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// #[graph_fn]
    /// fn repeat(x: &Tensor, n: i32) -> Result<Tensor> {
    ///     x.mul(n)
    /// }
    /// let x = Tensor::ones(&[2], DType::I32);
    /// repeat(&x, 1)?;
    /// repeat(&x, 2)?;
    /// assert_eq!(tensor_core::function::lookup("repeat").unwrap().retrace_reasons(), ["first call", "arg n: 1 -> 2"]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn retrace_reasons(&self) -> Vec<String> {
        self.traces().into_iter().map(|t| t.reason).collect()
    }

    /// The signatures currently cached, in the order they were traced (`x: f32[?, 784]`,
    /// with `?` for the dims a relaxed or fixed signature leaves unknown).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// #[graph_fn]
    /// fn inc(x: &Tensor) -> Result<Tensor> {
    ///     x.add(1.0)
    /// }
    /// inc(&Tensor::ones(&[2, 3], DType::F32))?;
    /// assert_eq!(tensor_core::function::lookup("inc").unwrap().cached_signatures(), ["x: f32[2, 3]"]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn cached_signatures(&self) -> Vec<String> {
        self.cached().into_iter().map(|(signature, _)| signature).collect()
    }

    /// The concrete functions currently cached (their graphs: `to_text()`, `to_dot()`, and
    /// the graph before and after each optimization pass: `pass_log()`, `pass_log_text()`).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// #[graph_fn]
    /// fn affine(x: &Tensor) -> Result<Tensor> {
    ///     x.mul(2.0)?.add(1.0)
    /// }
    /// affine(&Tensor::ones(&[4], DType::F32))?;
    /// let c = &tensor_core::function::lookup("affine").unwrap().concrete_functions()[0];
    /// assert!(c.to_text().contains("fused[mul,add]"), "{}", c.to_text());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn concrete_functions(&self) -> Vec<ConcreteFunction> {
        self.cached().into_iter().map(|(_, f)| f).collect()
    }

    fn cached(&self) -> Vec<(String, ConcreteFunction)> {
        let Some(s) = self.state.get() else { return Vec::new() };
        let mut entries: Vec<(u64, String, ConcreteFunction)> =
            s.cache.iter().filter_map(|slot| slot.cell.get().map(|e| (e.function.serial(), e.signature.clone(), e.function.clone()))).collect();
        entries.sort_by_key(|e| e.0);
        entries.dedup_by_key(|e| e.0);
        entries.into_iter().map(|(_, w, f)| (w, f)).collect()
    }

    /// Empties the cache, so every signature traces again on its next call (the trace
    /// count and history stay).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// #[graph_fn]
    /// fn half(x: &Tensor) -> Result<Tensor> {
    ///     x.mul(0.5)
    /// }
    /// let x = Tensor::ones(&[2], DType::F32);
    /// half(&x)?;
    /// let f = tensor_core::function::lookup("half").unwrap();
    /// f.clear_cache();
    /// assert!(f.cached_signatures().is_empty());
    /// half(&x)?; // traces again
    /// assert_eq!(f.trace_count(), 2);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn clear_cache(&self) {
        if let Some(s) = self.state.get() {
            let keys: Vec<KeyWords> = s.cache.iter().filter(|slot| slot.cell.get().is_some()).map(|slot| slot.key().clone()).collect();
            for key in keys {
                if s.cache.remove_if(&key, |_, slot| slot.cell.get().is_some()).is_some() {
                    s.history.lock().unwrap_or_else(|e| e.into_inner()).note_removed(key, Removal::Cleared);
                }
            }
            s.relaxed.lock().unwrap_or_else(|e| e.into_inner()).clear();
        }
    }

    /// How many signatures the cache keeps.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// #[graph_fn(cache_capacity = 8)]
    /// fn small(x: &Tensor) -> Tensor {
    ///     x.clone()
    /// }
    /// small(&Tensor::ones(&[1], DType::F32));
    /// assert_eq!(tensor_core::function::lookup("small").unwrap().cache_capacity(), 8);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn cache_capacity(&self) -> usize {
        self.state.get().map_or(self.options.cache_capacity.max(1), |s| s.capacity.load(Ordering::Relaxed))
    }

    /// The options the function was declared with.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// #[graph_fn(reduce_retracing)]
    /// fn relaxed(x: &Tensor) -> Tensor {
    ///     x.clone()
    /// }
    /// relaxed(&Tensor::ones(&[1], DType::F32));
    /// assert!(tensor_core::function::lookup("relaxed").unwrap().options().reduce_retracing);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn options(&self) -> &Options {
        &self.options
    }

    /// Sets how many signatures the cache keeps (least recently used are evicted).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// #[graph_fn]
    /// fn keep_one(x: &Tensor) -> Tensor {
    ///     x.clone()
    /// }
    /// keep_one(&Tensor::ones(&[1], DType::F32));
    /// let f = tensor_core::function::lookup("keep_one").unwrap();
    /// f.set_cache_capacity(1);
    /// keep_one(&Tensor::ones(&[2], DType::F32)); // evicts the [1] signature
    /// assert_eq!(f.cached_signatures(), ["x: f32[2]"]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn set_cache_capacity(&'static self, capacity: usize) {
        let s = self.state(None);
        s.capacity.store(capacity.max(1), Ordering::Relaxed);
        self.evict(s);
    }
}
