//! The user's guide: what `#[graph_fn]` does, how to write one, every option, and a complete
//! training step. Every example here is compiled and run as a test.
//!
//! - [Which calls can fail](#which-calls-can-fail)
//! - [Graph functions](#graph-functions): the attribute, arguments and signatures, return
//!   types, what runs at trace time, state, tensor conditions
//! - [Options](#options): `reduce_retracing`, `input_signature`, `max_traces`, `optimize`,
//!   `cache_capacity`, `name`
//! - [The trace cache](#the-trace-cache) and [introspection](#introspection-and-debugging)
//! - [A complete training step](#a-complete-training-step)
//! - [Checkpoints](#checkpoints): state dicts, strict and non-strict loads
//! - [Debug builds](#debug-builds)
//!
//! # Which calls can fail
//!
//! One rule decides whether a call returns a `Result`: **if it runs an op, it can fail**, so it
//! returns [`Result`](crate::Result), and a failed op changes nothing (inputs, their `.grad`s,
//! every cache). Making a tensor from Rust values, copying a handle or reading a property
//! cannot fail, so those return plain values. The operators are the exception: `a + b` cannot
//! return a `Result`, so it panics with the message the `Err` would carry.
//!
//! | calls | return | examples |
//! |---|---|---|
//! | ops: anything that computes a tensor, reads its values or runs autograd | `Result<_>` | `add` `matmul` `relu` `exp` `mean` `sum` `cast` `eq` `lt` `reshape` `i` `cross_entropy` `mse_loss` `conv2d` · `randperm_gen` · `add_` `sub_` (in place) · `item` `to_vec` · `requires_grad_` `backward` `zero_grad` · `from_vec` (checks the data fills the shape) · an optimizer's `step` |
//! | constructors from Rust values | the tensor | `zeros` `ones` `full` `scalar` `arange` `rand` `randn` `zeros_like` `randperm` |
//! | handle operations | the tensor | `clone` `detach` |
//! | accessors | the value | `dtype` `shape` `dims` `grad` `grad_fn` `is_leaf` `requires_grad` `version` |
//! | operators `+ - * /` (tensor or Rust scalar on either side) | the tensor, or a panic with the `Err`'s message | `&a + &b`, `&x * 2.0` |
//!
//! Errors print their message with `{}` and `{:?}`, so `fn main() -> Result<()>` and `unwrap()`
//! say what went wrong and how to fix it; `{:#?}` shows the [`Error`](crate::Error) variant.
//!
//! ```
//! use tensor_core::prelude::*;
//! let a = Tensor::zeros(&[2, 3], DType::F32); // a constructor: a plain value
//! let err = a.matmul(&Tensor::zeros(&[2, 3], DType::F32)).unwrap_err(); // an op: a Result
//! assert!(err.to_string().starts_with("matmul: incompatible shapes [2, 3] and [2, 3]"));
//! let panicked = std::panic::catch_unwind(|| &a + &Tensor::zeros(&[4], DType::F32));
//! assert!(panicked.is_err()); // an operator: the same message, as a panic
//! assert_eq!(a.dims(), vec![2, 3]); // an accessor: a plain value
//! ```
//!
//! # Graph functions
//!
//! ## The attribute
//!
//! Put `#[graph_fn]` (or `#[graph_fn(option, ...)]`, see [Options](#options)) on a free
//! function or on a method taking `&self`. The function is called like any other; its first
//! call per *signature* traces the body into a graph, which is optimized, cached, and replayed
//! by later calls with that signature. Not allowed, each with a compile error that says why:
//! `async` and `const` functions, `self` by value and `&mut self`, `&mut` arguments, and
//! `impl Trait` in argument or return position.
//!
//! ```
//! use tensor_core::prelude::*;
//! #[graph_fn]
//! fn guide_scaled_tanh(x: &Tensor, scale: f32) -> Result<Tensor> {
//!     x.mul(scale)?.tanh()
//! }
//! let x = Tensor::from_vec(vec![0.5f32, -1.0], &[2])?;
//! let y = guide_scaled_tanh(&x, 2.0)?; // traces, then runs the graph
//! let z = guide_scaled_tanh(&(&x * 3.0), 2.0)?; // same signature: replays the graph
//! assert_eq!(y.to_vec::<f32>()?, x.mul(2.0)?.tanh()?.to_vec::<f32>()?); // same bits as eager
//! assert_eq!(z.dims(), vec![2]);
//! assert_eq!(tensor_core::function::lookup("guide_scaled_tanh").unwrap().trace_count(), 1);
//! # Ok::<(), tensor_core::Error>(())
//! ```
//!
//! ## Arguments and signatures: what retraces
//!
//! Every argument type implements [`GraphArg`](crate::GraphArg), which splits a value into
//! tensor leaves and a static part. The signature of a call is made of:
//!
//! - **tensors** (`Tensor` or `&Tensor`): their dtype, shape, whether they require grad and
//!   their device (a body traces once per device, feature `cuda`) — not their values;
//! - **Rust scalars** (`bool`, `char`, integers, `f32`, `f64`) and **strings** (`&str`,
//!   `String`): their *value*, so a new value is a new trace (pass values that change every
//!   call, such as a step counter, as tensors);
//! - **collections**: `Vec`, slices, arrays, tuples (up to 8) and `Option` of the above, by
//!   length (or variant) and elements;
//! - **`nn` layers and containers**: every layer ([`Linear`](crate::nn::Linear),
//!   [`Conv2d`](crate::nn::Conv2d), ...) and [`Sequential`](crate::nn::Sequential) — their
//!   parameters as leaves, their settings by value, and a `Sequential`'s layers by position
//!   and type (a [`Module`](crate::nn::Module) is always a `GraphArg`);
//! - **your structs and enums** with `#[derive(GraphArg)]`: each field as above, by name;
//!   mark a field that holds no tensors `#[graph_arg(static)]` to key it by value (it must be
//!   `Hash + Eq`), or `#[graph_arg(skip)]` to leave it out of the signature (a tensor in a
//!   skipped field is still read at each call: it is captured, see
//!   [State](#captured-state-and-in-place-updates); the captures are the tensors the field held
//!   when the body was traced, so the key holds their identities, and a call whose field holds
//!   other tensors — another model's optimizer — traces again, with the reason
//!   `arg self.opt: holds other tensors`, as a TensorFlow method traces per object). A skipped
//!   field holding tensors that
//!   require grad which no other field holds is an `Err` at every call
//!   ([`Error::SkippedParameters`](crate::Error::SkippedParameters)): the graph would not read
//!   those parameters as inputs, and checkpoints would leave them out. Skipping an optimizer
//!   over the other fields' parameters is fine;
//! - the optimizers [`Sgd`](crate::optim::Sgd), [`Adam`](crate::optim::Adam) and
//!   [`AdamW`](crate::optim::AdamW): their scheduled hyperparameters (`lr`, momentum, betas,
//!   weight decay), parameters and state as leaves (so a new learning rate does not
//!   retrace), `eps` and whether there is weight decay by value.
//!
//! A method also keys its `Self` type and flattens `&self` like an argument.
//!
//! ```
//! use tensor_core::prelude::*;
//! #[derive(GraphArg)]
//! struct Layer {
//!     w: Tensor,
//!     #[graph_arg(static)]
//!     activation: String, // keyed by value
//! }
//! impl Layer {
//!     #[graph_fn]
//!     fn guide_forward(&self, x: &Tensor) -> Result<Tensor> {
//!         let y = x.matmul(&self.w)?;
//!         match self.activation.as_str() {
//!             "relu" => y.relu(), // plain Rust: decided while tracing
//!             _ => Ok(y),
//!         }
//!     }
//! }
//! let layer = Layer { w: Tensor::ones(&[2, 2], DType::F32), activation: "relu".into() };
//! layer.guide_forward(&Tensor::ones(&[1, 2], DType::F32))?;
//! layer.guide_forward(&Tensor::ones(&[1, 2], DType::F32))?; // same signature
//! layer.guide_forward(&Tensor::ones(&[3, 2], DType::F32))?; // a new shape: traces again
//! let f = tensor_core::function::lookup("Layer::guide_forward").unwrap();
//! assert_eq!(f.trace_count(), 2);
//! assert_eq!(f.retrace_reasons()[1], "arg x: shape [1, 2] -> [3, 2]");
//! # Ok::<(), tensor_core::Error>(())
//! ```
//!
//! ## Grad mode, and what else a body reads while tracing
//!
//! **Grad mode** ([`no_grad`](crate::no_grad), [`set_grad_enabled`](crate::autograd::set_grad_enabled),
//! per thread) at the time of the call is part of the signature too, as torch.compile guards
//! on it: the same arguments in the other mode trace again, with the reason
//! `grad mode: enabled -> disabled` (and signatures traced with it off read
//! `x: f32[2] (grad mode disabled)`). Each mode then runs the graph its own trace made, so a
//! call does what the eager body does in that mode: a training step whose `backward()` is an
//! `Err` under `no_grad` eagerly is that `Err` as a graph call too, and accumulates nothing;
//! an in-place update of a parameter traced under `no_grad` is `Error::InPlaceOnLeaf` when
//! called with grad on; a `while_loop` keeps its iterations only in the mode that needs them;
//! a body that branches on [`is_grad_enabled()`](crate::is_grad_enabled) keeps one trace per
//! mode. A cache hit reads the mode from a thread-local and allocates nothing for it.
//!
//! ```
//! use tensor_core::prelude::*;
//! #[graph_fn]
//! fn guide_by_mode(x: &Tensor) -> Result<Tensor> {
//!     x.mul(if tensor_core::is_grad_enabled() { 2.0 } else { 3.0 }) // decided while tracing
//! }
//! let x = Tensor::ones(&[2], DType::F32);
//! for _ in 0..3 {
//!     assert_eq!(guide_by_mode(&x)?.to_vec::<f32>()?, [2.0, 2.0]);
//!     assert_eq!(no_grad(|| guide_by_mode(&x))?.to_vec::<f32>()?, [3.0, 3.0]);
//! }
//! let f = tensor_core::function::lookup("guide_by_mode").unwrap();
//! assert_eq!(f.retrace_reasons(), ["first call", "grad mode: enabled -> disabled"]);
//! assert_eq!(f.cached_signatures(), ["x: f32[2]", "x: f32[2] (grad mode disabled)"]);
//! # Ok::<(), tensor_core::Error>(())
//! ```
//!
//! The other process- and thread-wide settings a body could observe while it is traced, and
//! why none of them is in the key:
//!
//! | setting | decision |
//! |---|---|
//! | grad mode (`no_grad`, `enable_grad`, `set_grad_enabled`) | **keyed**, as above |
//! | [`run_functions_eagerly`](crate::run_functions_eagerly) | already handled: read at every call before the key; when on, no graph runs and nothing traces, so a trace never sees it on |
//! | the default random generator ([`manual_seed`](crate::random::manual_seed)) | already handled: its state is a tensor, captured by reference like any other (read at each call, advanced and written back), and reseeding updates that tensor in place |
//! | SIMD level ([`set_max_level`](crate::kernels::simd::set_max_level)), code generation ([`set_codegen`](crate::set_codegen)) | cannot change results: every level and the interpreter give the same bits; a fused program keeps the loops picked when its graph was lowered to run (right after the trace, or when an export is loaded), so set them before tracing |
//! | thread count ([`set_num_threads`](crate::set_num_threads)) | cannot change results: reductions fix their order by shape, and kernels read the count when the graph runs |
//! | the distributed world (`distributed::init`) | fixed for the process; a collective op keeps the number of ranks it was traced for and a run in another job is an `Err` saying to trace again |
//! | the gradient hook of `DataParallel` | not read by a trace: it is called on eager gradient accumulation only |
//!
//! Settings that belong to a value, not the thread — a layer's training flag (`Dropout`) —
//! are keyed through the argument that holds them (by value), or fixed at trace time when
//! captured. An optimizer's learning rate and the other hyperparameters a schedule changes
//! are not settings but state: 0-d tensors the step reads at every call
//! ([`Hyperparameter`](crate::optim::Hyperparameter)), as TF keeps `learning_rate` in a
//! variable, so `set_lr` and the [`lr_scheduler`](crate::optim::lr_scheduler)s never retrace.
//!
//! A [`ConcreteFunction`](crate::function::ConcreteFunction) (from `ConcreteFunction::trace`
//! or `concrete_functions()`) and an exported, loaded function are one graph: they run what was
//! traced, in the grad mode it was traced in, whichever mode they are called in. The mode of a
//! `ConcreteFunction` call decides only whether it records a grad node for its outputs.
//!
//! ## Return types
//!
//! A graph function returns a [`Tensor`](crate::Tensor), `()`, or a tuple, `Vec` or `Option`
//! of these, or a `Result` of any of them whose error type implements `From<Error>`. A
//! `Result` return receives the errors of the trace and of the run; any other return type
//! panics with the error's message (as the operators do). Outputs of a graph call are new
//! tensors; when an input requires grad (with grad mode on) they carry a `grad_fn` named after
//! the function, and `backward()` through them gives the eager gradients, bit for bit — the
//! backward is a cached graph too, reading the values the forward kept for it (see
//! [`ConcreteFunction::forwards_with_residuals`](crate::function::ConcreteFunction::forwards_with_residuals)).
//! Graphs with `cond`/`while_loop` nodes (a tensor `if` or `while`) differentiate the same
//! way: the backward holds a `cond`/`while_loop` of its own. A call whose graph touches a
//! `.grad` (a whole training step, with `backward()` *inside* the function, as below) has no
//! gradient from outside: its `backward()` is `Error::NotDifferentiable`.
//!
//! ## What runs at trace time
//!
//! The body runs once per new signature, with *symbolic* tensors: their dtype and shape are
//! known, their values exist only when the graph runs. So:
//!
//! - Host code — `println!`, counters, reading the clock, a Rust `if` on a `bool` — runs only
//!   while tracing. [`tprint!`](crate::tprint) is a graph node: it prints the run-time values
//!   on every call.
//! - [`executing_eagerly()`](crate::executing_eagerly) is `false` while tracing.
//! - `item()` and `to_vec()` of a symbolic tensor are an `Err` explaining this; branch on
//!   tensors with a tensor condition (below) instead.
//! - [`run_functions_eagerly(true)`](crate::run_functions_eagerly) makes every graph function
//!   run its body as plain eager code on every call, to debug it with prints and a debugger.
//!
//! ```
//! use tensor_core::prelude::*;
//! use std::sync::atomic::{AtomicUsize, Ordering};
//! static BODY_RUNS: AtomicUsize = AtomicUsize::new(0);
//! #[graph_fn]
//! fn guide_counted(x: &Tensor) -> Result<Tensor> {
//!     BODY_RUNS.fetch_add(1, Ordering::SeqCst); // host code: once per trace
//!     assert!(!executing_eagerly());
//!     assert!(x.item::<f32>().is_err()); // no value yet
//!     tprint!("x = {}", x); // every call, with the value of that call
//!     x.exp()
//! }
//! for v in [1.0f32, 2.0, 3.0] {
//!     guide_counted(&Tensor::scalar(v))?;
//! }
//! assert_eq!(BODY_RUNS.load(Ordering::SeqCst), 1);
//! # Ok::<(), tensor_core::Error>(())
//! ```
//!
//! ## Captured state and in-place updates
//!
//! A tensor made outside the function and used inside it (a *capture*), and every tensor leaf
//! of the arguments, is read **by reference** at each call — never a stale copy. In-place
//! updates (`add_`, `sub_`, an optimizer's `step`) and `.grad` writes (`backward()`,
//! `zero_grad()`) on those tensors are applied to them after each call, so after a call every
//! tensor holds what the eager run of the same code would have left in it. Creating a tensor
//! that requires grad inside the body is an `Err`: make parameters outside and pass them in
//! (or capture them).
//!
//! ```
//! use tensor_core::prelude::*;
//! let total = Tensor::zeros(&[2], DType::F32); // made outside: captured by reference
//! #[graph_fn]
//! fn guide_accumulate(total: &Tensor, x: &Tensor) -> Result<()> {
//!     total.add_(x)
//! }
//! let x = Tensor::ones(&[2], DType::F32);
//! for _ in 0..3 {
//!     guide_accumulate(&total, &x)?;
//! }
//! assert_eq!(total.to_vec::<f32>()?, vec![3.0, 3.0]); // each call's update landed
//! # Ok::<(), tensor_core::Error>(())
//! ```
//!
//! ## Tensor conditions
//!
//! In a `#[graph_fn]` body, an `if` or `while` whose condition is a scalar bool tensor — a
//! variable, a field, or a comparison method such as `x.lt(&y)?` — becomes one `Cond` or
//! `While` graph node, decided by the values of each call; the variables the code assigns are
//! carried through it (they must be tensors, initialized before). With a `bool` condition it
//! is plain Rust, decided while tracing. `break`, `continue`, `return`, `?` and assignments to
//! fields under a tensor condition are compile errors. The library forms are
//! [`control::cond`](crate::control::cond) and
//! [`control::while_loop`](crate::control::while_loop).
//!
//! State can change under a tensor condition, as TF's `v.assign_add(1)` inside `tf.cond`: an
//! in-place update (`add_`, `assign_`, ...) of a captured tensor or an argument inside a
//! branch or loop body becomes an extra output of the `Cond` node (the other branch passes the
//! old value through) or an extra loop variable of the `While` node, written back after each
//! call, so the tensor holds what the eager run leaves in it. The usual in-place rules hold (a
//! leaf that requires grad is `Error::InPlaceOnLeaf` outside `no_grad`); an update in a loop's
//! condition is `Error::ControlFlow` (the condition runs once more than the body).
//!
//! ```
//! use tensor_core::prelude::*;
//! #[graph_fn]
//! fn count_positive(x: &Tensor, count: &Tensor) -> Result<Tensor> {
//!     if x.sum()?.gt(0.0)? {
//!         count.add_(1)?;
//!     }
//!     x.relu()
//! }
//! let count = Tensor::scalar(0i32);
//! for v in [1.0f32, -1.0, 2.0] {
//!     count_positive(&Tensor::scalar(v), &count)?;
//! }
//! assert_eq!(count.item::<i32>()?, 2);
//! # Ok::<(), tensor_core::Error>(())
//! ```
//!
//! # Options
//!
//! Options go in the attribute, separated by commas, each at most once:
//! `#[graph_fn(reduce_retracing, max_traces(8, error), name = "step")]`. A misspelt or
//! malformed option is a compile error that lists them all.
//!
//! | option | default | what it does |
//! |---|---|---|
//! | `reduce_retracing` (or `reduce_retracing = true`) | off | after a retrace caused only by different dims, trace once with those dims unknown (`[2]`, `[3]` → `[?]`), so later sizes reuse that trace; after one caused by a different rank, trace once with the rank unknown (`[]`, `[1]` → `[*]`) so every later rank reuses it, when the function's ops all have a rule at an unknown rank (elementwise ops, reductions over all axes; else each rank traces, its dims relaxed) |
//! | `input_signature(x: f32[?, 784], labels: i64[?])` | none | fixes the dtype and shape of the named tensor arguments (`?`: any size; dtypes `f32 f64 i32 i64 bool`); a call that does not match is `Error::SignatureMismatch`, never a retrace |
//! | `max_traces = N`, `max_traces(N)`, `max_traces(N, warn)` | unlimited | beyond N traces, log a warning (through the `tracing` crate) naming what changed, and trace anyway |
//! | `max_traces(N, error)` | | beyond N traces, return `Error::TooManyTraces` (with the reason) instead of tracing; the signatures already cached still run |
//! | `optimize = false` | `true` | run the graph as traced, without the optimizing passes (to debug them) |
//! | `cache_capacity = N` | 64 | the most signatures cached; beyond it the least recently used is evicted (and retraces if called again, with the reason "evicted") |
//! | `name = "..."` | the function's name (`Type::method` for methods) | the name for [`lookup`](crate::function::lookup), warnings and errors |
//!
//! Whatever the options, a fifth trace within 20 calls logs a warning (target
//! `tensor_core::graph_fn`) with the reason and the usual fixes.
//!
//! ```
//! use tensor_core::prelude::*;
//! #[graph_fn(max_traces(1, error), cache_capacity = 4, name = "guide_once")]
//! fn once(x: &Tensor) -> Result<Tensor> {
//!     x.exp()
//! }
//! once(&Tensor::ones(&[1], DType::F32))?;
//! let err = once(&Tensor::ones(&[2], DType::F32)).unwrap_err();
//! assert!(matches!(err, Error::TooManyTraces { limit: 1, .. }), "{err}");
//! assert!(err.to_string().contains("arg x: shape [1] -> [2]"));
//! once(&Tensor::ones(&[1], DType::F32))?; // the cached signature still runs
//! assert_eq!(tensor_core::function::lookup("guide_once").unwrap().cache_capacity(), 4);
//!
//! #[graph_fn(reduce_retracing)]
//! fn guide_relaxed(x: &Tensor) -> Result<Tensor> {
//!     x.relu()
//! }
//! for n in 1..=5 {
//!     guide_relaxed(&Tensor::ones(&[n], DType::F32))?;
//! }
//! let f = tensor_core::function::lookup("guide_relaxed").unwrap();
//! assert_eq!(f.trace_count(), 2); // [1], then [?] for every other length
//!
//! #[graph_fn(input_signature(x: f32[?, 3]))]
//! fn guide_fixed(x: &Tensor) -> Result<Tensor> {
//!     x.relu()
//! }
//! guide_fixed(&Tensor::ones(&[2, 3], DType::F32))?;
//! guide_fixed(&Tensor::ones(&[7, 3], DType::F32))?; // any number of rows: no retrace
//! assert!(matches!(guide_fixed(&Tensor::ones(&[2, 4], DType::F32)), Err(Error::SignatureMismatch { .. })));
//! assert_eq!(tensor_core::function::lookup("guide_fixed").unwrap().trace_count(), 1);
//! # Ok::<(), tensor_core::Error>(())
//! ```
//!
//! ## Symbolic dims and guards
//!
//! In a trace whose dims are relaxed (`reduce_retracing`, or `?` in an `input_signature`),
//! a relaxed dim is a symbol (`n0`, `n1`, … in argument order), never a placeholder number.
//! `x.dim(0)` and `x.dims()[0]` give a [`Dim`](crate::Dim): arithmetic on it (`n * 2`,
//! `n + 1`, `n / heads`, `n % 8`) gives symbolic expressions, and a comparison whose answer
//! the host code branches on (`n < 10`, `n == m`, `n % 8 == 0`) answers for the traced call
//! and records a **guard** on the trace. A later call reuses the trace only when every guard
//! holds on its dims; a call that fails one traces again, and the retrace reason names it
//! (`arg x dim 0 = 12 fails n0 < 10`). Converting a symbolic dim to a plain number
//! (`usize::from(n)`, `n.into()`, or reading `x.dims()` as a `&[usize]`: `len`, `iter`,
//! `to_vec`, passing it to a shape) *specializes*: a guard on that exact value, correct but
//! a trace per size. A dim of a value computed from the arguments keeps its symbol through
//! ops that carry it (elementwise ops, reductions, matmul, transposes, reshapes that keep it);
//! a dim the trace cannot name specializes on every relaxed dim. Eagerly, and in traces
//! without relaxed dims, a `Dim` is just a number, as cheap as before.
//!
//! ```
//! use tensor_core::prelude::*;
//! #[graph_fn(reduce_retracing)]
//! fn guide_branch(x: &Tensor) -> Result<Tensor> {
//!     if x.dims()[0] < 10 { x.mul(1.0) } else { x.add(10.0) }
//! }
//! for n in [3, 2, 1, 0] {
//!     assert_eq!(guide_branch(&Tensor::ones(&[n], DType::F32))?.to_vec::<f32>()?, vec![1.0; n]);
//! }
//! let f = tensor_core::function::lookup("guide_branch").unwrap();
//! assert_eq!(f.trace_count(), 2); // [3] exactly, then [n0] guarded by n0 < 10
//! assert_eq!(f.concrete_functions()[1].guards(), ["n0 < 10"]);
//! assert_eq!(guide_branch(&Tensor::ones(&[12], DType::F32))?.to_vec::<f32>()?, vec![11.0; 12]);
//! assert_eq!(f.traces()[2].reason, "arg x dim 0 = 12 fails n0 < 10");
//! # Ok::<(), tensor_core::Error>(())
//! ```
//!
//! `ConcreteFunction::guards()` lists a trace's guards and `symbols()` what each symbol
//! stands for (`n0 = x dim 0`); `ConcreteFunction::call` checks the guards on every call
//! (`Error::GuardFailed` naming the failing one).
//!
//! **Shapes computed at run time.** The ops that take a shape or a size accept symbolic
//! dims, and then compute it when the graph runs, from the call's argument dims, instead of
//! specializing: `reshape` (an array of [`Dim`](crate::Dim)s, or a tuple mixing them with
//! numbers and `-1`: `x.reshape((n * 2, -1))`), `Tensor::zeros`/`ones`/`full` and
//! `broadcast_to` (anything [`IntoDims`](crate::dim::IntoDims): `&[n, 4.into()]`,
//! `[n, Dim::from(4)]`, `&y.dims()`), `narrow` and `slice` (`x.narrow(0, 0, n - 1)`),
//! `split`/`split_sizes`/`chunk` (the lengths; the *number* of pieces is host data, so it is
//! guarded on), `Tensor::arange_len(n, dtype)`, and the masks built from them
//! (`Tensor::causal_mask_dim(n)`, and `scaled_dot_product_attention` with `causal`). The
//! graph node keeps the expression (`reshape[shape=[n0 * 2, -1]]`, printed with its output
//! type `f32[n0 * 2, ?]`), each call evaluates it on its own dims and runs the op eager runs
//! — the same bits — and no guard is recorded, so one trace serves every size:
//!
//! ```
//! use tensor_core::prelude::*;
//! #[graph_fn(reduce_retracing)]
//! fn guide_mask(x: &Tensor) -> Result<Tensor> {
//!     let n = x.dim(0);
//!     let scores = x.matmul(&x.t()?)?.add(&Tensor::ones([n, n], DType::F32))?;
//!     scores.masked_fill(&Tensor::causal_mask_dim(n)?, f32::NEG_INFINITY)?.softmax(-1)
//! }
//! for n in [2, 3, 5, 8] {
//!     let y = guide_mask(&Tensor::zeros(&[n, 4], DType::F32))?;
//!     assert_eq!(y.narrow(0, 0, 1)?.to_vec::<f32>()?[0], 1.0); // row 0 sees only itself
//! }
//! let f = tensor_core::function::lookup("guide_mask").unwrap();
//! assert_eq!(f.trace_count(), 2); // [2, 4] exactly, then one trace for every n
//! assert!(f.concrete_functions()[1].guards().is_empty());
//! # Ok::<(), tensor_core::Error>(())
//! ```
//!
//! What still specializes: a size read as a number (`usize::from(n)`, `x.shape()`, `dims()`
//! as a `&[usize]`, a `Vec<usize>` built from it), a dim the trace cannot name (a reshape's
//! inferred `-1` dim, a concatenation's length: reading it guards every symbol on its value),
//! and sizes inside a `cond` branch or `while_loop` body (their graphs run without the call's
//! dims). A `narrow` whose start or length is computed at run time has no gradient yet
//! (`Error::NotDifferentiable`); reshapes and fills do. Graph files keep run-time sizes as
//! expressions, so a loaded function computes them from each call's dims too; ONNX export
//! does not hold them yet (exporting such a trace to ONNX is an `Err`).
//!
//! An exported relaxed trace keeps its symbols and guards (docs/EXPORT.md): the loaded
//! function serves every size its guards admit — a whole training step too, backward and
//! optimizer included, with eager's bits at each batch size — and checks the guards on every
//! call, an `Err` naming the one that fails. ONNX export writes each symbolic dim of the
//! model's inputs and outputs as a `dim_param` named by its symbol (`n0`).
//!
//! # The trace cache
//!
//! Each graph function has one cache for all its callers, from signature to traced graph.
//! It is safe to call from many threads: a signature is traced exactly once, and concurrent
//! first callers wait for that trace. A trace that fails (or whose body returns `Err`) is not
//! cached and does not count against `max_traces`. Beyond `cache_capacity` signatures the
//! least recently used is evicted;
//! [`GraphFunction::set_cache_capacity`](crate::function::GraphFunction::set_cache_capacity)
//! changes the capacity at run time and
//! [`clear_cache`](crate::function::GraphFunction::clear_cache) empties it.
//!
//! # Introspection and debugging
//!
//! [`function::lookup("name")`](crate::function::lookup) finds a graph function once it has
//! been called (`"Type::method"` for methods), and [`function::all()`](crate::function::all)
//! lists them. A [`GraphFunction`](crate::function::GraphFunction) tells its `trace_count()`,
//! `retrace_reasons()` (`"first call"`, `"arg x: shape [2] -> [3]"`, `"arg lr: 0.1 -> 0.2"`),
//! `cached_signatures()`, and its `concrete_functions()`, each with its graph as text
//! (`to_text()`), as Graphviz (`to_dot()`) and the graph before and after each optimizing
//! pass (`pass_log_text()`).
//!
//! ```
//! use tensor_core::prelude::*;
//! #[graph_fn]
//! fn guide_dense(x: &Tensor, w: &Tensor, b: &Tensor) -> Result<Tensor> {
//!     x.matmul(w)?.add(b)?.tanh()
//! }
//! let (w, b) = (Tensor::ones(&[3, 2], DType::F32), Tensor::zeros(&[2], DType::F32));
//! guide_dense(&Tensor::ones(&[4, 3], DType::F32), &w, &b)?;
//! let f = tensor_core::function::lookup("guide_dense").unwrap();
//! assert_eq!(f.cached_signatures(), vec!["x: f32[4, 3], w: f32[3, 2], b: f32[2]".to_string()]);
//! let graph = f.concrete_functions()[0].to_text();
//! assert!(graph.contains("matmul"), "{graph}");
//! # Ok::<(), tensor_core::Error>(())
//! ```
//!
//! # A complete training step
//!
//! A model whose parameters are the tensor fields of a `#[derive(GraphArg)]` struct, an
//! optimizer, and one `#[graph_fn]` that runs the forward pass, the loss, `backward()` and the
//! optimizer's update. The first call traces all of it into one graph; every later call
//! replays it, reading the parameters, their `.grad`s and the optimizer's state by reference
//! and writing the updates back. The same body run eagerly gives the same losses, bit for bit.
//!
//! ```
//! use tensor_core::nn::{Linear, Module};
//! use tensor_core::optim::{Optimizer, Sgd, SgdConfig};
//! use tensor_core::prelude::*;
//!
//! /// A two-layer perceptron: 4 inputs, 16 hidden units, 3 classes.
//! #[derive(GraphArg)]
//! struct Mlp {
//!     w1: Tensor,
//!     b1: Tensor,
//!     w2: Tensor,
//!     b2: Tensor,
//! }
//!
//! impl Mlp {
//!     /// Parameters initialized as PyTorch's `nn.Linear`, from `seed`.
//!     fn new(seed: u64) -> Result<Mlp> {
//!         let g = &Generator::new(seed);
//!         let layers = [Linear::new(4, 16, DType::F32, g)?, Linear::new(16, 3, DType::F32, g)?];
//!         let params: Vec<Tensor> = layers.iter().flat_map(|l| l.parameters()).collect();
//!         let [w1, b1, w2, b2] = params.try_into().expect("two weights and two biases");
//!         Ok(Mlp { w1, b1, w2, b2 })
//!     }
//!
//!     fn parameters(&self) -> Vec<Tensor> {
//!         vec![self.w1.clone(), self.b1.clone(), self.w2.clone(), self.b2.clone()]
//!     }
//!
//!     /// Logits `[n, 3]` of inputs `[n, 4]`: `x @ w1ᵀ + b1`, ..., the weights `[out, in]` as
//!     /// `nn.Linear` stores them, read transposed in place.
//!     fn forward(&self, x: &Tensor) -> Result<Tensor> {
//!         let h = x.matmul_t(&self.w1, false, true)?.add(&self.b1)?.relu()?;
//!         h.matmul_t(&self.w2, false, true)?.add(&self.b2)
//!     }
//! }
//!
//! /// One step: forward, mean cross-entropy, gradients, and the SGD update in place.
//! fn step(model: &Mlp, opt: &Sgd, x: &Tensor, labels: &Tensor) -> Result<Tensor> {
//!     opt.zero_grad()?;
//!     let loss = model.forward(x)?.cross_entropy(labels)?;
//!     loss.backward()?;
//!     opt.step()?;
//!     Ok(loss)
//! }
//!
//! /// The same step as one graph: traced on the first call, replayed after.
//! #[graph_fn]
//! fn guide_train_step(model: &Mlp, opt: &Sgd, x: &Tensor, labels: &Tensor) -> Result<Tensor> {
//!     step(model, opt, x, labels)
//! }
//!
//! let x = Tensor::randn(&[32, 4], DType::F32, 1);
//! let labels = Tensor::from_vec((0..32).map(|i| i % 3).collect::<Vec<i64>>(), &[32])?;
//! let config = SgdConfig { lr: 0.1, momentum: 0.9, ..Default::default() };
//!
//! // Two copies of the model from the same seed: one trained eagerly, one as a graph.
//! let (eager_model, graph_model) = (Mlp::new(0)?, Mlp::new(0)?);
//! let eager_opt = Sgd::with_config(eager_model.parameters(), config)?;
//! let graph_opt = Sgd::with_config(graph_model.parameters(), config)?;
//! let mut losses = Vec::new();
//! for _ in 0..20 {
//!     let eager = step(&eager_model, &eager_opt, &x, &labels)?.item::<f32>()?;
//!     let graph = guide_train_step(&graph_model, &graph_opt, &x, &labels)?.item::<f32>()?;
//!     assert_eq!(eager.to_bits(), graph.to_bits()); // the same bits in both modes
//!     losses.push(graph);
//! }
//! assert!(losses[19] < 0.9 * losses[0], "{losses:?}"); // it learns
//! assert_eq!(eager_model.w1.to_vec::<f32>()?, graph_model.w1.to_vec::<f32>()?);
//! assert!(graph_model.w1.grad().is_some()); // .grad written back by the graph
//! let f = tensor_core::function::lookup("guide_train_step").unwrap();
//! assert_eq!(f.trace_count(), 1); // traced once, replayed 19 times
//! # Ok::<(), tensor_core::Error>(())
//! ```
//!
//! # Checkpoints
//!
//! Every `GraphArg` value has a state dict ([`StateDict`](crate::io::StateDict), in the
//! prelude): its tensors named by the fields, elements and layer positions that hold them —
//! the names of its graph functions' leaves, and PyTorch's (`body.0.weight`, where PyTorch
//! counts a `Sequential`'s parameterless layers too). The `nn` layers also keep PyTorch's
//! layouts ([`Linear`](crate::nn::Linear)'s weight is `[out, in]`), so a PyTorch
//! `state_dict()` saved as safetensors loads as it is. [`io::save_safetensors`](crate::io::save_safetensors)
//! writes it; loading replaces the values of the model's own tensors in place. Loads are
//! strict, as PyTorch's default: a file lacking some of the model's tensors, or holding
//! others, is an `Err` listing every such name, and the model is left unchanged. A
//! non-strict load (PyTorch's `strict=False`) loads the names that match and returns the
//! others.
//!
//! ```
//! use tensor_core::io;
//! use tensor_core::nn::{Linear, ReLU, Sequential};
//! use tensor_core::prelude::*;
//!
//! #[derive(GraphArg)]
//! struct Classifier {
//!     body: Sequential,
//!     head: Linear,
//! }
//! let new = |seed| -> Result<Classifier> {
//!     let g = &Generator::new(seed);
//!     let body = Sequential::new().add(Linear::new(4, 8, DType::F32, g)?).add(ReLU);
//!     Ok(Classifier { body, head: Linear::new_without_bias(8, 3, DType::F32, g)? })
//! };
//! let model = new(0)?;
//! let named = model.state_dict()?;
//! let names: Vec<&str> = named.iter().map(|(n, _)| n.as_str()).collect();
//! assert_eq!(names, ["body.0.weight", "body.0.bias", "head.weight"]);
//!
//! let path = std::env::temp_dir().join(format!("guide-{}.safetensors", std::process::id()));
//! io::save_safetensors(&model, &path)?;
//! let mut fresh = new(1)?;
//! io::load_safetensors(&mut fresh, &path)?; // strict: every name, dtype and shape checked
//! assert_eq!(fresh.head.weight().to_vec::<f32>()?, model.head.weight().to_vec::<f32>()?);
//!
//! // A checkpoint of the body alone: strictly an error naming what is missing...
//! let body_only = vec![named[0].clone(), named[1].clone()];
//! let err = fresh.load_state_dict(&body_only).unwrap_err();
//! assert!(err.to_string().contains("1 missing key: `head.weight`"), "{err}");
//! // ...or, non-strictly, loaded, with the missing names returned.
//! let keys = fresh.load_state_dict_non_strict(&body_only)?;
//! assert_eq!((keys.missing, keys.unexpected.len()), (vec!["head.weight".to_string()], 0));
//! # std::fs::remove_file(&path).unwrap();
//! # Ok::<(), tensor_core::Error>(())
//! ```
//!
//! # Debug builds
//!
//! Unoptimized Rust is slow at numeric loops: a plain debug build of a program using
//! tensor-core runs its kernels 100 to 300 times slower than a release build (50 ×
//! (256² matmul + tanh) in a small dependent crate: about 3,000 ms, against 10 ms in release
//! and 30 ms in a debug build with the setting below). Cargo ignores the profile settings of
//! dependencies, so add this to *your* `Cargo.toml` to compile your dependencies optimized
//! even in debug builds (your own code stays quick to build and debug):
//!
//! ```toml
//! [profile.dev.package."*"]
//! opt-level = 2
//! ```
