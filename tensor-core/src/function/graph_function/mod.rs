//! `GraphFunction`: the runtime of one `#[graph_fn]`.
//!
//! `call.rs` is the call path (look up, or trace and cache, then run); `cache.rs` the trace
//! cache (a `DashMap` from key to a once-cell, so concurrent callers of a new signature trace
//! it once) and its LRU eviction; `policy.rs` the retracing policy (fixed input signatures,
//! relaxed shapes, `max_traces`); `history.rs` the record of every trace and why it happened;
//! `warning.rs` how warnings reach the user; `introspection.rs` the public view of it all;
//! `eager.rs` the switch that runs every function eagerly.

mod cache;
mod call;
mod eager;
mod history;
mod introspection;
mod policy;
mod warning;

pub use eager::{functions_run_eagerly, run_functions_eagerly};
pub use history::TraceRecord;

use super::key::Flattener;
use super::options::Options;
use crate::trace::GraphReturn;
use cache::Cache;
use history::History;
use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::sync::{Mutex, OnceLock};

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
/// println!("{f:?}"); // name, trace count, cached signatures, options
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub struct GraphFunction {
    name: &'static str,
    module: &'static str,
    arg_names: &'static [&'static str],
    options: Options,
    state: OnceLock<State>,
}

/// What a function keeps once called.
struct State {
    /// The name introspection, errors and warnings use (see `full_name`).
    full_name: String,
    cache: Cache,
    history: Mutex<History>,
    traces: AtomicUsize,
    /// Traces admitted under `max_traces` (finished or in progress).
    admitted: AtomicUsize,
    calls: AtomicU64,
}

impl GraphFunction {
    #[doc(hidden)]
    /// A graph function's runtime (used by the macro's expansion).
    pub const fn new(name: &'static str, module: &'static str, arg_names: &'static [&'static str], options: Options) -> GraphFunction {
        GraphFunction { name, module, arg_names, options, state: OnceLock::new() }
    }

    // The macro's entry points are defined here, beside the type, so that a bound the user's
    // code fails reads as `GraphFunction::call` in the error.

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
    /// there is none (see `call.rs`); with `flat == None`, runs `body` eagerly.
    pub fn call<R, F>(&'static self, self_type: Option<&'static str>, flat: Option<Flattener>, body: F) -> R
    where
        R: GraphReturn,
        F: FnOnce() -> R,
    {
        match flat {
            Some(flat) => self.call_graph(self_type, flat, body),
            None => body(),
        }
    }

    /// The state, made (and the function registered) on the first call.
    fn state(&'static self, self_type: Option<&'static str>) -> &'static State {
        self.state.get_or_init(|| {
            super::registry::register(self);
            State {
                full_name: full_name(self.options.name, self.name, self_type),
                cache: Cache::new(self.options.cache_capacity),
                history: Mutex::new(History::default()),
                traces: AtomicUsize::new(0),
                admitted: AtomicUsize::new(0),
                calls: AtomicU64::new(0),
            }
        })
    }

    /// The history, also after a panic while it was held (it is consistent between writes).
    fn history(state: &State) -> std::sync::MutexGuard<'_, History> {
        state.history.lock().unwrap_or_else(|e| e.into_inner())
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

#[cfg(test)]
mod tests {
    use super::full_name;

    #[test]
    fn methods_are_named_by_their_type() {
        assert_eq!(full_name(None, "step", None), "step");
        assert_eq!(full_name(None, "step", Some("my_crate::model::Mlp<f32>")), "Mlp::step");
        assert_eq!(full_name(Some("train"), "step", Some("my_crate::Mlp")), "train");
    }
}
