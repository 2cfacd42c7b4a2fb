//! A concrete function: one traced graph for one input signature, with the tensors it
//! captured. This is the plain-Rust entry point to tracing; `#[graph_fn]` builds on it.

use super::differentiable::{self, BackwardCache};
use crate::compile::{Executable, PassLog};
use crate::error::{Error, Result};
use crate::graph::Graph;
use crate::shape::Shape;
use crate::tensor::Tensor;
use crate::trace::{TraceGuard, Traced};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

static NEXT_SERIAL: AtomicU64 = AtomicU64::new(0);

/// A traced graph, ready to run on new inputs of its signature.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::function::ConcreteFunction;
/// let w = Tensor::from_vec(vec![2.0f32, 3.0], &[2])?;          // captured
/// let x = Tensor::from_vec(vec![1.0f32, 1.0], &[2])?;          // an argument
/// let f = ConcreteFunction::trace("scale", &[("x", &x)], || Ok(vec![x.mul(&w)?.add(1.0)?]))?;
/// let y = f.call(&[&Tensor::from_vec(vec![10.0f32, 20.0], &[2])?])?;
/// assert_eq!(y[0].to_vec::<f32>()?, vec![21.0, 61.0]);
/// # Ok::<(), tensor_core::Error>(())
/// ```
#[derive(Clone)]
pub struct ConcreteFunction {
    serial: u64,
    name: String,
    traced_graph: Arc<Graph>,
    executable: Arc<Executable>,
    captures: Arc<[Tensor]>,
    grad_guards: Arc<[(usize, bool)]>,
    /// The symbolic dims and their guards, for a trace with relaxed dims.
    dim_guards: Option<Arc<crate::dim::Guards>>,
    /// Whether the graph that runs was optimized (else it is the traced graph).
    optimized: bool,
    /// The pass log, made on first request (see `pass_log`).
    pass_log: Arc<OnceLock<PassLog>>,
    /// Why a call cannot be differentiated from outside (see `differentiable/`), if so.
    no_gradient: Option<&'static str>,
    /// The grad_fn name of its calls (`nameBackward`).
    grad_fn_name: &'static str,
    /// The traced backward functions.
    backward: Arc<BackwardCache>,
}

impl std::fmt::Debug for ConcreteFunction {
    /// The name, the arguments with their types, and the size of the graph that runs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let g = &self.traced_graph;
        let arg = |slot: usize| {
            let info = &g.values[g.inputs[slot].0];
            format!("{}: {}{}", g.slot_names[slot], info.dtype, info.shape)
        };
        let args: Vec<String> = (0..g.num_arg_slots).map(arg).collect();
        f.debug_struct("ConcreteFunction")
            .field("name", &self.name)
            .field("args", &args)
            .field("captures", &self.captures.len())
            .field("outputs", &g.outputs.len())
            .field("nodes", &self.graph().nodes.len())
            .field("optimized", &self.optimized)
            .finish()
    }
}

impl ConcreteFunction {
    /// Traces `body`, in which the tensors `args` (with their names) are the inputs: every
    /// op on them, and on tensors they lead to, becomes a graph node. Tensors from outside
    /// used in `body` are captured by reference. `body` returns the outputs.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::function::ConcreteFunction;
    /// let x = Tensor::ones(&[3], DType::F32);
    /// let f = ConcreteFunction::trace("plus_one", &[("x", &x)], || Ok(vec![x.add(1.0)?]))?;
    /// assert_eq!(f.call(&[&Tensor::zeros(&[3], DType::F32)])?[0].to_vec::<f32>()?, vec![1.0; 3]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn trace(name: &str, args: &[(&str, &Tensor)], body: impl FnOnce() -> Result<Vec<Tensor>>) -> Result<ConcreteFunction> {
        let shapes: Vec<Shape> = args.iter().map(|(_, t)| t.0.shape.clone()).collect();
        Self::trace_with_shapes(name, args, &shapes, true, body)
    }

    /// Like `trace`, with the argument shapes to trace for (dims may be unknown), and
    /// optionally without optimizing the graph.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::function::ConcreteFunction;
    /// use tensor_core::shape::UNKNOWN;
    /// let x = Tensor::ones(&[3], DType::F32);
    /// // Traced for any length: the graph serves other shapes too.
    /// let f = ConcreteFunction::trace_with_shapes("double", &[("x", &x)], &[Shape::new(&[UNKNOWN])], true, || Ok(vec![x.mul(2.0)?]))?;
    /// assert_eq!(f.call(&[&Tensor::ones(&[5], DType::F32)])?[0].dims(), vec![5]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    ///
    /// An export that serves any batch size: the batch dim traced unknown, the weights
    /// captured (they travel in the file).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::function::ConcreteFunction;
    /// use tensor_core::shape::UNKNOWN;
    /// let w = Tensor::randn(&[4, 3], DType::F32, 0);
    /// let x = Tensor::ones(&[2, 4], DType::F32);
    /// let any_batch = [Shape::new(&[UNKNOWN, 4])];
    /// let f = ConcreteFunction::trace_with_shapes("forward", &[("x", &x)], &any_batch, true, || Ok(vec![x.matmul(&w)?.relu()?]))?;
    /// let loaded = tensor_core::export::load_bytes(&f.export_bytes()?)?;
    /// for batch in [1, 7] {
    ///     let xb = Tensor::randn(&[batch, 4], DType::F32, batch as u64);
    ///     assert_eq!(loaded.call(&[&xb])?[0].to_vec::<f32>()?, xb.matmul(&w)?.relu()?.to_vec::<f32>()?);
    /// }
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn trace_with_shapes(
        name: &str,
        args: &[(&str, &Tensor)],
        shapes: &[Shape],
        optimize: bool,
        body: impl FnOnce() -> Result<Vec<Tensor>>,
    ) -> Result<ConcreteFunction> {
        let guard = TraceGuard::begin(name);
        for (i, ((arg_name, t), shape)) in args.iter().zip(shapes).enumerate() {
            guard.bind_arg(t, i, arg_name, shape.clone());
        }
        let outputs = body()?;
        let traced = guard.finish(&outputs)?;
        Ok(ConcreteFunction::from_traced(name, traced, optimize))
    }

    /// Wraps a finished trace.
    pub(crate) fn from_traced(name: &str, traced: Traced, optimize: bool) -> ConcreteFunction {
        debug_assert_eq!(crate::graph::validate(&traced.graph), Ok(()), "traced graph of {name}");
        let no_gradient = differentiable::no_gradient(&traced.graph);
        let graph = Arc::new(traced.graph);
        let executable = Arc::new(Executable::new(&graph, optimize));
        ConcreteFunction {
            serial: NEXT_SERIAL.fetch_add(1, Ordering::Relaxed),
            name: name.to_string(),
            traced_graph: graph,
            executable,
            captures: traced.captures.into(),
            grad_guards: traced.grad_guards.into(),
            dim_guards: traced.guards.map(Arc::new),
            optimized: optimize,
            pass_log: Arc::new(OnceLock::new()),
            no_gradient,
            grad_fn_name: differentiable::grad_fn_name(name),
            backward: Arc::new(BackwardCache::default()),
        }
    }

    /// The `.grad` presence guards: (slot, present when traced).
    pub(crate) fn grad_guards(&self) -> &[(usize, bool)] {
        &self.grad_guards
    }

    /// Whether the graph that runs was optimized (its `cond`/`while` subgraphs are then
    /// optimized when planned).
    pub(crate) fn is_optimized(&self) -> bool {
        self.optimized
    }

    /// The order of creation (for listing cached functions in trace order).
    pub(crate) fn serial(&self) -> u64 {
        self.serial
    }

    /// Runs the graph on `args` (the tensor leaves, in the order traced), applying its state
    /// writes, and returns the outputs.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::function::ConcreteFunction;
    /// let x = Tensor::ones(&[2], DType::F32);
    /// let f = ConcreteFunction::trace("sq", &[("x", &x)], || Ok(vec![x.mul(&x)?]))?;
    /// assert_eq!(f.call(&[&Tensor::from_vec(vec![3.0f32, 4.0], &[2])?])?[0].to_vec::<f32>()?, vec![9.0, 16.0]);
    /// assert!(f.call(&[&Tensor::ones(&[3], DType::F32)]).is_err()); // not the traced signature
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn call(&self, args: &[&Tensor]) -> Result<Vec<Tensor>> {
        self.check_args(args)?;
        if let Some(failed) = self.failed_guard(&|slot, axis| args.get(slot).and_then(|t| t.0.shape.dims().get(axis).copied())) {
            return Err(Error::GuardFailed { function: self.name.clone(), reason: failed });
        }
        Ok(self.run(args)?.into_vec())
    }

    /// `call` without the argument check (the trace cache's key already guarantees it).
    pub(crate) fn run(&self, args: &[&Tensor]) -> Result<crate::compile::Outputs> {
        let mut slots: smallvec::SmallVec<[&Tensor; 16]> = smallvec::SmallVec::with_capacity(args.len() + self.captures.len());
        slots.extend_from_slice(args);
        slots.extend(self.captures.iter());
        self.check_guards(&slots)?;
        if differentiable::needs_record(&slots) {
            return differentiable::run_recording(self, &slots);
        }
        self.executable.run(&slots)
    }

    /// The executable of the traced graph.
    pub(crate) fn executable(&self) -> &Executable {
        &self.executable
    }

    /// Why calls of this function have no gradient from outside (`None`: they have one).
    pub(crate) fn no_gradient(&self) -> Option<&'static str> {
        self.no_gradient
    }

    /// The name of its calls' grad_fn.
    pub(crate) fn grad_fn_name(&self) -> &'static str {
        self.grad_fn_name
    }

    /// The traced backward functions (see `backward_functions`).
    pub(crate) fn backward_cache(&self) -> &BackwardCache {
        &self.backward
    }

    /// The backward functions traced so far for calls of this one, in trace order: one per
    /// combination of which inputs needed a gradient, the input shapes, and which outputs
    /// received one. A call whose inputs require grad (with grad mode on) records a grad
    /// node named `<name>Backward`; the first such call traces the vector-Jacobian product
    /// of this graph (for gradients of all its float outputs) into a function called
    /// `<name>_backward`, together with the forward that returns its residuals (see
    /// `forwards_with_residuals`); later calls and backward passes reuse them.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::function::ConcreteFunction;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0], &[2])?.requires_grad_(true)?;
    /// let f = ConcreteFunction::trace("sq", &[("x", &x)], || Ok(vec![x.mul(&x)?.sum()?]))?;
    /// let y = f.call(&[&x])?;
    /// assert_eq!(y[0].grad_fn().unwrap().name(), "sqBackward");
    /// y[0].backward()?;
    /// assert_eq!(x.grad().unwrap().to_vec::<f32>()?, vec![2.0, 4.0]);
    /// f.call(&[&x])?[0].backward()?; // the backward graph is reused
    /// assert_eq!(f.backward_functions().len(), 1);
    /// assert_eq!(f.backward_functions()[0].name(), "sq_backward");
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn backward_functions(&self) -> Vec<ConcreteFunction> {
        self.backward.functions()
    }

    /// The forward graphs that calls needing a gradient run (optimized), one per
    /// combination of which inputs require grad and the input shapes: this function's graph
    /// returning, after its outputs, the *residuals* — the values its backward functions
    /// read, as an eager body saves them for backward (an `exp`'s output, a product made
    /// inside the function). Under `no_grad`, or when no input requires grad, a call runs
    /// `graph()` itself.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::function::ConcreteFunction;
    /// let x = Tensor::from_vec(vec![0.5f32, 1.0], &[2])?.requires_grad_(true)?;
    /// let f = ConcreteFunction::trace("soft", &[("x", &x)], || Ok(vec![x.exp()?.sum()?]))?;
    /// no_grad(|| f.call(&[&x]))?;
    /// assert!(f.forwards_with_residuals().is_empty());
    /// f.call(&[&x])?[0].backward()?;
    /// let forward = &f.forwards_with_residuals()[0];
    /// assert_eq!(forward.outputs.len(), 2, "the sum, then exp(x): what exp saves for backward");
    /// assert_eq!(x.grad().unwrap().to_vec::<f32>()?, vec![0.5f32.exp(), 1.0f32.exp()]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn forwards_with_residuals(&self) -> Vec<Graph> {
        self.backward.forward_graphs()
    }

    fn check_args(&self, args: &[&Tensor]) -> Result<()> {
        let g = &self.traced_graph;
        if args.len() != g.num_arg_slots {
            return Err(Error::ArgumentCount {
                function: self.name.clone(),
                expected: g.num_arg_slots,
                found: args.len(),
                names: g.slot_names[..g.num_arg_slots].join(", "),
            });
        }
        for (slot, t) in args.iter().enumerate() {
            let info = &g.values[g.inputs[slot].0];
            if info.dtype != t.0.dtype || !info.shape.admits(&t.0.shape) {
                return Err(Error::SignatureMismatch {
                    function: self.name.clone(),
                    arg: g.slot_names[slot].clone(),
                    expected: format!("{}{}", info.dtype, info.shape),
                    found: format!("{}{}", t.0.dtype, t.0.shape),
                });
            }
        }
        Ok(())
    }

    /// The guards on its symbolic dims, as text (`n0 < 10`), in the order the trace recorded
    /// them: a call reuses this function only when all hold. Empty for a trace without
    /// relaxed dims, or whose host code did not branch on them.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::function::ConcreteFunction;
    /// use tensor_core::shape::UNKNOWN;
    /// let x = Tensor::ones(&[3], DType::F32);
    /// let f = ConcreteFunction::trace_with_shapes("f", &[("x", &x)], &[Shape::new(&[UNKNOWN])], true, || {
    ///     Ok(vec![if x.dim(0) < 10 { x.mul(2.0)? } else { x.add(10.0)? }])
    /// })?;
    /// assert_eq!(f.guards(), ["n0 < 10"]);
    /// assert_eq!(f.call(&[&Tensor::ones(&[5], DType::F32)])?[0].to_vec::<f32>()?, vec![2.0; 5]);
    /// assert!(f.call(&[&Tensor::ones(&[12], DType::F32)]).is_err()); // arg x dim 0 = 12 fails n0 < 10
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn guards(&self) -> Vec<String> {
        self.dim_guards.as_ref().map(|g| g.texts()).unwrap_or_default()
    }

    /// The symbols of its relaxed dims (`n0 = x dim 0`), in order.
    pub fn symbols(&self) -> Vec<String> {
        self.dim_guards.as_ref().map(|g| g.symbol_texts(&self.traced_graph.slot_names)).unwrap_or_default()
    }

    /// The symbolic dims and guards, when the trace has any guard to check.
    pub(crate) fn dim_guards(&self) -> Option<&crate::dim::Guards> {
        self.dim_guards.as_deref().filter(|g| !g.is_empty())
    }

    /// The symbols of its relaxed dims and the guards on them, guards or not (`None` when
    /// no dim was relaxed): what ONNX export names its symbolic dims by.
    pub(crate) fn dim_symbols(&self) -> Option<&crate::dim::Guards> {
        self.dim_guards.as_deref()
    }

    /// Why a call whose argument dims `dim(slot, axis)` gives fails a guard (`arg x dim 0 =
    /// 12 fails n0 < 10`); `None` when all hold.
    pub(crate) fn failed_guard(&self, dim: &dyn Fn(usize, usize) -> Option<usize>) -> Option<String> {
        let g = self.dim_guards()?;
        let i = g.first_failing(dim)?;
        Some(g.failure(i, &self.traced_graph.slot_names, dim))
    }

    fn check_guards(&self, slots: &[&Tensor]) -> Result<()> {
        for &(slot, present) in self.grad_guards.iter() {
            if slots[slot].grad_slot().grad.is_some() != present {
                let word = |p: bool| if p { "set" } else { "empty" };
                return Err(Error::GradPresence {
                    function: self.name.clone(),
                    name: self.traced_graph.slot_names[slot].clone(),
                    traced: word(present),
                    now: word(!present),
                });
            }
        }
        Ok(())
    }

    /// The function's name.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::function::ConcreteFunction;
    /// let x = Tensor::ones(&[2], DType::F32);
    /// assert_eq!(ConcreteFunction::trace("named", &[("x", &x)], || Ok(vec![x.exp()?]))?.name(), "named");
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The graph as traced (before optimization).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::function::ConcreteFunction;
    /// let x = Tensor::ones(&[2], DType::F32);
    /// let f = ConcreteFunction::trace("f", &[("x", &x)], || Ok(vec![x.mul(1.0)?.exp()?]))?;
    /// assert_eq!(f.traced_graph().nodes.len(), 2); // as traced
    /// assert_eq!(f.graph().nodes.len(), 1); // `x * 1` simplified away
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn traced_graph(&self) -> &Graph {
        &self.traced_graph
    }

    /// The graph that runs (after optimization).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::function::ConcreteFunction;
    /// let x = Tensor::ones(&[2], DType::F32);
    /// let f = ConcreteFunction::trace("f", &[("x", &x)], || Ok(vec![x.add(1.0)?.tanh()?]))?;
    /// assert_eq!(f.graph().count_op("fused"), 1);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn graph(&self) -> &Graph {
        self.executable.graph()
    }

    /// The text form of the graph that runs, one line per node.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::function::ConcreteFunction;
    /// let x = Tensor::ones(&[2], DType::F32);
    /// let f = ConcreteFunction::trace("f", &[("x", &x)], || Ok(vec![x.exp()?]))?;
    /// assert!(f.to_text().starts_with("graph f(x: f32[2]) {"), "{}", f.to_text());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn to_text(&self) -> String {
        let mut text = self.graph().to_text();
        let guards = self.guards();
        if let (false, Some(end)) = (guards.is_empty(), text.find('\n')) {
            let lines: String = guards.iter().map(|g| format!("  guard {g}\n")).collect();
            text.insert_str(end + 1, &lines);
        }
        text
    }

    /// The graph that runs, in Graphviz DOT.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::function::ConcreteFunction;
    /// let x = Tensor::ones(&[2], DType::F32);
    /// let f = ConcreteFunction::trace("f", &[("x", &x)], || Ok(vec![x.exp()?]))?;
    /// assert!(f.to_dot().starts_with("digraph"));
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn to_dot(&self) -> String {
        let mut dot = self.graph().to_dot();
        let guards = self.guards();
        if !guards.is_empty() {
            let label = guards.join("\\n").replace('"', "\\\"");
            let at = dot.rfind('}').unwrap_or(dot.len());
            dot.insert_str(at, &format!("  guards [shape=note, label=\"guards\\n{label}\"];\n"));
        }
        dot
    }

    /// The graph in text form as traced (`"traced"`), then after each optimization pass that
    /// changed it, named by the pass (`"simplify"`, `"fuse_elementwise"`, ...): entry `k - 1`
    /// is the graph before pass `k`, and the last entry is the graph that runs (`to_text()`).
    /// A function traced without optimization has the traced graph only. Subgraphs of
    /// `cond` and `while_loop` are optimized on their own and appear in their node's text.
    ///
    /// Recording costs nothing while tracing: the first request reruns the (deterministic)
    /// passes on the traced graph and keeps the log. For a `#[graph_fn]`, take the function
    /// from `lookup("name")` and ask one of its `concrete_functions()`.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::function::ConcreteFunction;
    /// let x = Tensor::from_vec(vec![0.5f32, -1.0], &[2])?;
    /// let f = ConcreteFunction::trace("f", &[("x", &x)], || Ok(vec![x.mul(1.0)?.tanh()?.exp()?]))?;
    /// let log = f.pass_log();
    /// let passes: Vec<&str> = log.iter().map(|(pass, _)| *pass).collect();
    /// assert_eq!(passes, ["traced", "simplify", "dce", "fuse_elementwise"]);
    /// assert!(log[0].1.contains("mul[rhs=1.0](x)"));
    /// assert!(log[1].1.contains("tanh(x)"), "simplify: x * 1 is x");
    /// assert!(log[3].1.contains("fused"), "tanh and exp: one fused loop");
    /// assert!(!log[2].1.contains("mul"), "dce: the bypassed node is gone");
    /// assert_eq!(log.last().unwrap().1, f.to_text());
    /// println!("{}", f.pass_log_text());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn pass_log(&self) -> &[(&'static str, String)] {
        self.pass_log.get_or_init(|| {
            let log = self.record_pass_log();
            debug_assert_eq!(log.last().map(|e| e.1.as_str()), Some(self.to_text().as_str()), "the passes rerun to the graph that runs");
            log
        })
    }

    fn record_pass_log(&self) -> PassLog {
        if !self.optimized {
            return vec![("traced", self.traced_graph.to_text())];
        }
        let mut log = PassLog::new();
        crate::compile::optimize(&self.traced_graph, Some(&mut log));
        log
    }

    /// `pass_log` as one text: each graph under a heading line (`== traced ==`,
    /// `== after simplify ==`, ...).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::function::ConcreteFunction;
    /// let x = Tensor::ones(&[2], DType::F32);
    /// let f = ConcreteFunction::trace("f", &[("x", &x)], || Ok(vec![x.mul(1.0)?.exp()?.neg()?]))?;
    /// let log = f.pass_log_text();
    /// assert!(log.contains("simplify") && log.contains("fuse_elementwise"), "{log}");
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn pass_log_text(&self) -> String {
        let mut out = String::new();
        for (pass, text) in self.pass_log() {
            let heading = if *pass == "traced" { "traced".to_string() } else { format!("after {pass}") };
            out.push_str(&format!("== {heading} ==\n{text}\n"));
        }
        out
    }

    /// The tensors the graph captured from outside.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::function::ConcreteFunction;
    /// let (x, w) = (Tensor::ones(&[2], DType::F32), Tensor::ones(&[2], DType::F32));
    /// let f = ConcreteFunction::trace("f", &[("x", &x)], || Ok(vec![x.mul(&w)?]))?;
    /// assert!(f.captures()[0].same_as(&w)); // read by reference at every call
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn captures(&self) -> &[Tensor] {
        &self.captures
    }
}
