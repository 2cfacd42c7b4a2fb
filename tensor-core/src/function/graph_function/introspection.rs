//! The public view of a graph function: its name, traces and their reasons, cached
//! signatures and concrete functions, cache capacity and options — and `Debug`.

use super::super::concrete::ConcreteFunction;
use super::super::options::Options;
use super::cache::Entry;
use super::history::{Removal, TraceRecord};
use super::GraphFunction;
use std::sync::atomic::Ordering;
use std::sync::Arc;

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
        self.state.get().map_or_else(Vec::new, |s| Self::history(s).records.clone())
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
    /// with `?` for the dims a relaxed or fixed signature leaves unknown, and
    /// ` (grad mode disabled)` after one traced for calls under `no_grad`).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// #[graph_fn]
    /// fn inc(x: &Tensor) -> Result<Tensor> {
    ///     x.add(1.0)
    /// }
    /// inc(&Tensor::ones(&[2, 3], DType::F32))?;
    /// no_grad(|| inc(&Tensor::ones(&[2, 3], DType::F32)))?; // grad mode is keyed: traces again
    /// let signatures = tensor_core::function::lookup("inc").unwrap().cached_signatures();
    /// assert_eq!(signatures, ["x: f32[2, 3]", "x: f32[2, 3] (grad mode disabled)"]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn cached_signatures(&self) -> Vec<String> {
        self.entries().iter().map(|e| e.signature.clone()).collect()
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
        self.entries().iter().map(|e| e.function.clone()).collect()
    }

    /// The backward functions traced for calls of the cached concrete functions (see
    /// `ConcreteFunction::backward_functions`): the vector-Jacobian products a `backward()`
    /// through a call runs, each a graph with `to_text()`, `to_dot()` and `pass_log()`.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// #[graph_fn]
    /// fn energy(x: &Tensor) -> Result<Tensor> {
    ///     x.mul(x)?.sum()
    /// }
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0], &[2])?.requires_grad_(true)?;
    /// energy(&x)?.backward()?;
    /// energy(&x)?.backward()?; // the backward graph is cached
    /// let f = tensor_core::function::lookup("energy").unwrap();
    /// assert_eq!(f.backward_trace_count(), 1);
    /// let b = &f.backward_functions()[0];
    /// assert!(b.to_text().starts_with("graph energy_backward(x: f32[2], grad_output0: f32[]) {"), "{}", b.to_text());
    /// assert!(b.to_dot().starts_with("digraph"));
    /// assert_eq!(x.grad().unwrap().to_vec::<f32>()?, vec![4.0, 8.0]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn backward_functions(&self) -> Vec<ConcreteFunction> {
        let mut all: Vec<ConcreteFunction> = self.concrete_functions().iter().flat_map(ConcreteFunction::backward_functions).collect();
        all.sort_by_key(ConcreteFunction::serial);
        all
    }

    /// How many backward functions the cached concrete functions have traced.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// #[graph_fn]
    /// fn twice(x: &Tensor) -> Result<Tensor> {
    ///     x.mul(2.0)
    /// }
    /// let x = Tensor::ones(&[2], DType::F32).requires_grad_(true)?;
    /// no_grad(|| twice(&x))?; // no gradient needed: nothing traced
    /// assert_eq!(tensor_core::function::lookup("twice").unwrap().backward_trace_count(), 0);
    /// twice(&x)?; // needs one: the backward is traced with the forward's residuals
    /// assert_eq!(tensor_core::function::lookup("twice").unwrap().backward_trace_count(), 1);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn backward_trace_count(&self) -> usize {
        self.concrete_functions().iter().map(|c| c.backward_functions().len()).sum()
    }

    fn entries(&self) -> Vec<Arc<Entry>> {
        self.state.get().map_or_else(Vec::new, |s| s.cache.entries())
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
            let removed = s.cache.clear();
            Self::history(s).note_removed(removed, Removal::Cleared);
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
        self.state.get().map_or(self.options.cache_capacity.max(1), |s| s.cache.capacity())
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
        s.cache.set_capacity(capacity);
        self.evict(s);
    }
}

impl std::fmt::Debug for GraphFunction {
    /// The name, module, trace count, cached signatures, backward traces and options.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GraphFunction")
            .field("name", &self.name())
            .field("module", &self.module)
            .field("trace_count", &self.trace_count())
            .field("cached_signatures", &self.cached_signatures())
            .field("backward_trace_count", &self.backward_trace_count())
            .field("options", &self.options)
            .finish()
    }
}
