//! Eager tensors that trace into optimized graphs.
//!
//! Tensors run eagerly, op by op, so code can be printed and stepped through like any Rust.
//! Put `#[graph_fn]` on a function and its first call per input signature traces the same
//! code into a graph that is optimized, cached and replayed on later calls — with the same
//! results, bit for bit. Autograd (PyTorch semantics) works in both modes.
//!
//! ```
//! use tensor_core::prelude::*;
//! let w = Tensor::scalar(1.0f32).requires_grad_(true)?;
//! let x = Tensor::scalar(2.0f32).requires_grad_(true)?;
//! let y = (&w + &x) * (&w + 1.0);
//! y.backward()?;
//! assert_eq!(w.grad().unwrap().item::<f32>()?, 5.0);
//! assert_eq!(x.grad().unwrap().item::<f32>()?, 2.0);
//! # Ok::<(), tensor_core::Error>(())
//! ```
//!
//! **Start with the [`guide`]**: which calls return `Result`, how `#[graph_fn]` traces and
//! what retraces, every option of the attribute, the trace cache, and a complete model +
//! optimizer + `#[graph_fn]` training step.
//!
//! The modules, by concept: [`Tensor`] and its ops (the methods), [`autograd`]
//! (`backward`, `grad`, `no_grad`), [`nn`] (layers, losses, initializers), [`optim`] (`Sgd`,
//! `Adam`), [`data`] (`randperm`, `DataLoader`), [`control`] (`cond`, `while_loop`),
//! [`function`] (the runtime of `#[graph_fn]`: `lookup` and introspection), [`graph`] and
//! [`compile`] (the graph IR and its optimizing passes). `use tensor_core::prelude::*;` brings in what most programs need.

#![warn(missing_docs)]

extern crate self as tensor_core;

pub mod autograd;
/// The graph compiler (passes, plan, executor): internals behind `ConcreteFunction`.
#[doc(hidden)]
pub mod compile;
pub mod control;
mod cuda;
pub mod data;
pub mod device;
pub mod dim;
pub mod distributed;
pub mod dtype;
pub mod error;
pub mod export;
pub mod function;
pub mod graph;
pub mod guide;
pub mod io;
pub mod kernels;
#[cfg(test)]
mod layers;
mod math;
pub mod nn;
pub mod onnx;
pub mod ops;
pub mod optim;
pub mod random;
pub mod shape;
pub(crate) mod storage;
mod switch;
mod tensor;
mod trace;

pub use autograd::{
    enable_grad, grad, is_grad_enabled, no_grad, set_grad_enabled, BackwardOptions, EnableGradGuard, GradFn, NextFunction, NoGradGuard,
};
pub use device::Device;
pub use dim::{Dim, Dims};
pub use dtype::{DType, Scalar};
pub use error::{Error, Result};
pub use function::{functions_run_eagerly, run_functions_eagerly, GraphArg, GraphOutput};
pub use kernels::codegen::{codegen_enabled, set_codegen};
pub use kernels::parallel::{num_threads, set_num_threads};
pub use random::{manual_seed, Generator};
pub use shape::Shape;
pub use storage::Element;
pub use tensor::Tensor;
/// The [`guide`] describes the semantics (what runs at trace time, what retraces, state
/// and in-place updates, tensor conditions), the attribute's syntax and [every
/// option](guide#options): `reduce_retracing`, `input_signature(x: f32[?, 784])`,
/// `max_traces = N` / `max_traces(N, warn | error)`, `optimize = bool`, `cache_capacity = N`
/// (default 64) and `name = "..."`.
///
/// ```
/// use tensor_core::prelude::*;
/// #[graph_fn]
/// fn step(x: &Tensor, lr: f32) -> Result<Tensor> {
///     println!("tracing"); // runs once per new signature
///     x.mul(lr)?.tanh()
/// }
/// let x = Tensor::ones(&[3], DType::F32);
/// step(&x, 0.5)?; // traces, then runs the graph
/// step(&x, 0.5)?; // runs the cached graph
/// assert_eq!(tensor_core::function::lookup("step").unwrap().trace_count(), 1);
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub use tensor_macros::graph_fn;
/// ```
/// use tensor_core::prelude::*;
/// #[derive(GraphArg)]
/// struct Linear {
///     w: Tensor,
///     b: Tensor,
///     #[graph_arg(static)]
///     name: String, // keyed by value
/// }
/// impl Linear {
///     #[graph_fn]
///     fn forward(&self, x: &Tensor) -> Result<Tensor> {
///         x.matmul(&self.w)?.add(&self.b)
///     }
/// }
/// let l = Linear { w: Tensor::ones(&[2, 3], DType::F32), b: Tensor::zeros(&[3], DType::F32), name: "l1".into() };
/// assert_eq!(l.forward(&Tensor::ones(&[4, 2], DType::F32))?.dims(), vec![4, 3]);
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub use tensor_macros::GraphArg;
pub use trace::executing_eagerly;
// `cuda/` still names this storage macro through the crate root.
#[cfg(feature = "cuda")]
pub(crate) use storage::with_array;

/// Prints like `println!`. Eagerly it prints at once; inside a traced graph function it
/// prints the run-time values on every call, in program order (where `println!` runs only
/// while tracing).
///
/// ```
/// use tensor_core::prelude::*;
/// let x = Tensor::scalar(2.0f32);
/// tprint!("x = {}, twice = {:.1}", x, &x * 2.0);
/// ```
#[macro_export]
macro_rules! tprint {
    ($fmt:literal $(, $arg:expr)* $(,)?) => {
        $crate::__private::tprint_impl($fmt, &[$(&$arg as &dyn ::std::fmt::Display),*]).unwrap_or_else(|e| panic!("{}", e))
    };
}

/// What most programs need: `use tensor_core::prelude::*;`.
pub mod prelude {
    pub use crate::io::StateDict;
    pub use crate::{
        executing_eagerly, graph_fn, no_grad, run_functions_eagerly, tprint, DType, Device, Dim, Dims, Error, Generator, GraphArg, NoGradGuard,
        Result, Shape, Tensor,
    };
}

/// What the macros' expansions name. Not part of the public API.
#[doc(hidden)]
pub mod __private {
    pub use crate::control::autograph;
    pub use crate::function::{
        Flattener, GraphArg, GraphArgField, GraphFunction, GraphReturn, Options, Skipped, SkippedGraphArg, SkippedOther, StaticField, TensorSpec,
        TracePolicy,
    };
    pub use crate::trace::tprint_impl;
    pub use crate::DType;
}
