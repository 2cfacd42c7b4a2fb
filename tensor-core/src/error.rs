//! The one error type of the library. Each variant is one kind of mistake; its message names
//! the op, the shapes or dtypes involved, and what to do about it.

use crate::dtype::DType;
use crate::shape::Shape;
use std::fmt;

/// Declares the error enum as written and `Error::debug_variant`, which prints a variant the
/// way `#[derive(Debug)]` would. The derived form is kept for `{:#?}`; `{:?}` prints the
/// message (see the `Debug` impl). Variants are unit or have named fields.
macro_rules! with_variant_debug {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[$variant_meta:meta])* $variant:ident $({ $($field:ident: $ty:ty),* $(,)? })? ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        pub enum $name {
            $( $(#[$variant_meta])* $variant $({ $($field: $ty),* })? ),*
        }

        impl $name {
            fn debug_variant(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self {
                    $( $name::$variant $({ $($field),* })? => {
                        let mut out = f.debug_struct(stringify!($variant));
                        $($( out.field(stringify!($field), $field); )*)?
                        out.finish()
                    } )*
                }
            }
        }
    };
}

/// The library's `Result`.
///
/// ```
/// use tensor_core::prelude::*;
/// fn first(t: &Tensor) -> tensor_core::Result<f32> {
///     Ok(t.to_vec::<f32>()?[0])
/// }
/// assert_eq!(first(&Tensor::ones(&[2], DType::F32))?, 1.0);
/// assert!(first(&Tensor::ones(&[2], DType::I32)).is_err()); // dtype mismatch
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub type Result<T, E = Error> = std::result::Result<T, E>;

with_variant_debug! {
/// Everything that can go wrong, grouped by section. A failed op returns one of these and
/// changes nothing: its inputs, their grads and every cache stay as they were.
///
/// `{}` and `{:?}` both print the message, so `fn main() -> Result<()>` and `unwrap()` show
/// what went wrong and how to fix it; `{:#?}` shows the variant and its fields.
///
/// ```
/// use tensor_core::prelude::*;
/// let a = Tensor::zeros(&[2, 3], DType::F32);
/// let b = Tensor::zeros(&[4], DType::F32);
/// let err = a.add(&b).unwrap_err();
/// assert!(err.to_string().contains("[2, 3]") && err.to_string().contains("[4]"));
/// assert_eq!(format!("{err:?}"), err.to_string());
/// assert!(format!("{err:#?}").starts_with("Broadcast {\n    op: \"add\","));
/// ```
// Variant fields are named for what they hold (`op`, `shape`, `expected`, `found`); each
// variant's doc and message say what they mean, so they carry no docs of their own.
#[allow(missing_docs)]
#[derive(Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    // ---------------------------------------------------------------- creation and conversion
    /// The data does not fill the shape. Example: `from_vec(vec![1.0; 5], &[2, 3])`.
    /// Fix: pass as many values as the shape has elements.
    #[error("{op}: {len} values cannot fill shape {shape} ({numel} elements); pass exactly {numel} values or change the shape")]
    DataLength { op: &'static str, len: usize, shape: Shape, numel: usize },

    /// A tensor of one dtype was read or combined as another. Example: `to_vec::<f32>()` on an
    /// i64 tensor, or `a + b` with a f32 and a f64 operand. Fix: `cast` one side first.
    #[error("{op}: expected dtype {expected}, found {found}; use .cast(DType::{expected_variant}) to convert")]
    DTypeMismatch { op: &'static str, expected: DType, found: DType, expected_variant: &'static str },

    /// Two operands of one op have different dtypes. Example: an f64 batch into a model with
    /// f32 weights (`x.matmul(&w)`), `a + b` with an f32 and an f64 tensor. Fix: cast one of
    /// them to the other's dtype; the message names both and says how.
    #[error("{op}: {second} is {second_dtype} but {first} is {first_dtype}; they must share one dtype: cast one of them, with .cast(DType::{first_variant}) on {second} or .cast(DType::{second_variant}) on {first}")]
    OperandDTypes {
        op: &'static str,
        first: String,
        first_dtype: DType,
        first_variant: &'static str,
        second: String,
        second_dtype: DType,
        second_variant: &'static str,
    },

    /// The op is not defined for this dtype. Example: `exp` of an i32 tensor, `requires_grad_`
    /// on an integer tensor. Fix: cast to a dtype the op supports.
    #[error("{op}: not defined for dtype {dtype}; it needs {needs} (cast the input first)")]
    UnsupportedDType { op: &'static str, dtype: DType, needs: &'static str },

    /// `item()` on a tensor with more (or fewer) than one element.
    /// Fix: index or reduce it first (`sum()`, `narrow`).
    #[error("{op}: needs a tensor with exactly one element, found shape {shape} ({numel} elements); reduce or index it first")]
    NotOneElement { op: &'static str, shape: Shape, numel: usize },

    // ---------------------------------------------------------------- shapes and arguments
    /// Two shapes do not broadcast. Example: `[2, 3] + [4]`. Fix: make trailing dims equal or 1
    /// (reshape / unsqueeze one side).
    #[error("{op}: shapes {lhs} and {rhs} do not broadcast (trailing dims must be equal or 1); reshape or unsqueeze one operand")]
    Broadcast { op: &'static str, lhs: Shape, rhs: Shape },

    /// Two shapes that must agree do not. Example: `matmul` of `[2, 3]` and `[4, 5]`.
    #[error("{op}: incompatible shapes {lhs} and {rhs}: {hint}")]
    ShapeMismatch { op: &'static str, lhs: Shape, rhs: Shape, hint: String },

    /// An axis outside the tensor's rank. Example: `sum_axes(&[2])` on a 2-d tensor.
    #[error("{op}: axis {axis} is out of range for a tensor of rank {rank} (valid: -{rank}..{rank})")]
    Axis { op: &'static str, axis: isize, rank: usize },

    /// A reshape to a shape with another number of elements, or with more than one `-1`.
    #[error("reshape: cannot reshape {from} ({numel} elements) into {to}; {hint}")]
    Reshape { from: Shape, to: String, numel: usize, hint: &'static str },

    /// An argument outside what the op accepts. The message says which and why.
    #[error("{op}: invalid argument `{arg}`: {reason}")]
    InvalidArgument { op: &'static str, arg: &'static str, reason: String },

    /// An index value outside the indexed dim. Example: `one_hot` of 10 with 10 classes.
    #[error("{op}: index {index} is out of range for a dim of size {size}")]
    IndexOutOfRange { op: &'static str, index: i64, size: usize },

    // ---------------------------------------------------------------- autograd
    /// `backward()` on a tensor that does not require grad and has no `grad_fn`.
    /// Fix: call `requires_grad_(true)` on the leaves you want gradients for, before the ops.
    #[error("{op}: the tensor does not require grad and has no grad_fn; call requires_grad_(true) on the leaves first")]
    NoGradFn { op: &'static str },

    /// `backward()` without a gradient on a tensor that is not a scalar.
    /// Fix: reduce to a scalar (`sum()`, `mean()`) or use `backward_from(&gradient)`.
    #[error("backward: grad can be implicitly created only for scalar outputs, found shape {shape}; call .sum() or .mean() first, or pass a gradient with backward_from")]
    BackwardNonScalar { shape: Shape },

    /// The gradient passed to `backward_from` does not have the output's shape or dtype.
    #[error("backward_from: the gradient has shape {found} and dtype {found_dtype}, the output has shape {expected} and dtype {expected_dtype}")]
    GradientShape { expected: Shape, found: Shape, expected_dtype: DType, found_dtype: DType },

    /// An in-place op on a leaf that requires grad, outside `no_grad`.
    /// Fix: update parameters inside `no_grad(|| ...)`, as optimizers do, or use the
    /// out-of-place op.
    #[error("{op}: a leaf tensor that requires grad is used in an in-place operation; wrap the update in no_grad(|| ...) (as optimizers do) or use the out-of-place op")]
    InPlaceOnLeaf { op: &'static str },

    /// A tensor saved for backward was changed in place before `backward()` ran.
    /// Fix: clone it before the in-place op, or do the in-place op after backward.
    #[error("backward: a tensor needed by {node} was modified by an in-place operation: it was saved at version {expected} and is now at version {found}; use the out-of-place op or clone the tensor first")]
    SavedTensorModified { node: &'static str, expected: u64, found: u64 },

    /// A second `backward()` through a graph whose saved tensors were released.
    /// Fix: pass `retain_graph = true` to the first backward.
    #[error("backward: trying to backward through {node} a second time, but its saved tensors were freed by the first backward; use backward_opts with retain_graph = true the first time")]
    GraphReleased { node: &'static str },

    /// A gradient was asked of an op that has none (argmax, comparisons) or of a higher order
    /// than it supports.
    #[error("{op}: not differentiable{detail}")]
    NotDifferentiable { op: &'static str, detail: &'static str },

    /// `grad(outputs, inputs)` where an input was not used to compute the outputs.
    #[error("grad: input {index} was not used to compute the outputs (or does not require grad); pass allow_unused or drop it")]
    UnusedInput { index: usize },

    // ---------------------------------------------------------------- tracing and graphs
    /// A Rust value was asked of a tensor that only exists when the graph runs.
    /// Fix: print it with `tprint!`, branch on it with graph control flow (`cond`,
    /// `while_loop`), or debug with `run_functions_eagerly(true)`.
    #[error("{op}: `{name}` is a symbolic tensor while tracing a graph function: its value exists only when the graph runs. Compute with tensor ops instead (`cast` for another dtype, `where_` for a choice per element, `cond`/`while_loop` for a branch or a loop), print it with tprint!, or call run_functions_eagerly(true) to debug the body eagerly")]
    SymbolicValue { op: &'static str, name: String },

    /// A tensor that requires grad was created inside a traced body.
    /// Fix: create parameters outside the graph function (or pass them in), as with
    /// `tf.Variable`s in `tf.function`.
    #[error("requires_grad_: a tensor that requires grad was created inside a traced graph function; it would be re-created on every trace and never updated. Create parameters outside the function and use them (captured) or pass them in as arguments")]
    ParameterInTrace,

    /// A symbolic tensor from a trace that has ended was used.
    /// Fix: return tensors from the graph function instead of storing them outside.
    #[error("{op}: tensor `{name}` ({ty}) was made while tracing `{function}` and belongs to a trace that has ended: it leaked out of the graph function (through a captured variable, a static or a returned closure) and has no value: return it from the function instead of storing it (or call run_functions_eagerly(true) while debugging)")]
    LeakedTracer { op: &'static str, name: String, ty: String, function: String },

    /// A call does not match the function's fixed `input_signature`.
    #[error("{function}: argument `{arg}` does not match the input signature: expected {expected}, found {found}")]
    SignatureMismatch { function: String, arg: String, expected: String, found: String },

    /// A call's dims fail a guard of a function traced with symbolic dims (`n0 < 10`): the
    /// trace's host code chose its ops for dims that satisfy it.
    /// Fix: call it with dims that satisfy its guards (see `ConcreteFunction::guards`), or
    /// trace it again for these dims.
    #[error("{function}: the call does not satisfy the trace's guards: {reason}")]
    GuardFailed { function: String, reason: String },

    /// A concrete or loaded function was called with the wrong number of tensor arguments.
    /// Fix: pass the tensors its signature lists, in that order.
    #[error("{function}: called with {found} tensor argument(s), but it takes {expected}: {names}")]
    ArgumentCount { function: String, expected: usize, found: usize, names: String },

    /// A graph function was traced more often than its `max_traces` allows.
    #[error("{function}: traced {count} times, more than max_traces = {limit}; last retrace because {reason}")]
    TooManyTraces { function: String, count: usize, limit: usize, reason: String },

    /// A grad slot read inside a graph was empty when traced but is set now (or the reverse).
    #[error(
        "{function}: the .grad of `{name}` was {traced} when the graph was traced but is {now} now; call zero_grad() at the same point on every call"
    )]
    GradPresence { function: String, name: String, traced: &'static str, now: &'static str },

    // ---------------------------------------------------------------- control flow
    /// A loop body changed a loop variable's dtype or shape.
    #[error("while_loop: loop variable {var} changes from {old} to {new} in the body; loop variables must keep their dtype and shape (declare a dim unknown to let it vary)")]
    LoopVarChanged { var: String, old: String, new: String },

    /// The branches of `cond` return different structures, dtypes or shapes.
    #[error("cond: output {index} differs between the branches: {then_desc} in then_fn, {else_desc} in else_fn")]
    BranchMismatch { index: usize, then_desc: String, else_desc: String },

    /// A construct that cannot be carried through a graph loop or branch.
    #[error("{construct}")]
    ControlFlow { construct: String },

    /// A graph that does not check (`graph::validate`): a value used before it is defined,
    /// an op node whose type is not what its rule gives, a slot or parameter that does not
    /// exist, a subgraph that does not match its node. Traced graphs always check; this is
    /// for graphs built or loaded from outside.
    #[error("graph `{graph}` is invalid: {problem}")]
    InvalidGraph { graph: String, problem: String },

    // ---------------------------------------------------------------- devices

    /// A GPU operation failed or cannot run here: no `cuda` feature, no driver or GPU, a
    /// kernel NVRTC could not compile (the message carries its log), out of GPU memory, or
    /// an op without a GPU kernel yet. Example: `x.to_device(Device::Cuda(0))` on a machine
    /// without an NVIDIA driver. Fix: what the message says (`.to_cpu()` runs any op on the CPU).
    #[error("{op}: {reason}")]
    Device { op: &'static str, reason: String },

    /// An op's inputs live on different devices. Example: `a.add(&b)` with `a` on `cuda:0`
    /// and `b` on the CPU. Fix: move one with `to_device` (a 0-d CPU tensor is moved for you).
    #[error("{op}: input {first_index} is on {first} but input {second_index} is on {second}; move them to one device with .to_device(..) first")]
    DeviceMismatch { op: &'static str, first: crate::device::Device, first_index: usize, second: crate::device::Device, second_index: usize },

    // ---------------------------------------------------------------- saving and loading
    /// A file could not be read or written. Fix: check the path, its directory and the
    /// permissions.
    #[error("{path}: cannot {action}: {reason}")]
    Io { path: String, action: &'static str, reason: String },

    /// A file is not a valid file of its kind: truncated, changed since it was written, or
    /// not of that format at all. The reason says what does not check. Fix: write the file
    /// again (save or export it anew).
    #[error("{path}: not a valid {format} file: {reason}")]
    BadFile { path: String, format: &'static str, reason: String },

    /// A file written by a newer version of its format than this build reads.
    /// Fix: load it with a newer tensor-core, or write it again with this one.
    #[error("{path}: {format} version {found} is newer than this build reads (up to version {supported}); load it with a newer tensor-core or write it again with this one")]
    FileVersion { path: String, format: &'static str, found: u32, supported: u32 },

    /// A named tensor does not fit the tensor it is loaded into (another dtype or shape), or
    /// a name is given twice. Nothing was changed. Fix: load the state dict of the same
    /// model (names as `state_dict()` gives them), or build the model with the saved shapes.
    #[error("{op}: tensor `{name}`{problem}; nothing was loaded")]
    StateDict { op: &'static str, name: String, problem: String },

    /// A strict load met names that do not match the model's: tensors of the model that the
    /// state dict lacks (`missing`), entries that are no tensor of the model (`unexpected`),
    /// or both; every one is listed. Nothing was changed. Fix: load the state dict of the same
    /// model, or load non-strictly (`load_state_dict_non_strict`, PyTorch's `strict=False`),
    /// which loads the names that match and returns the others.
    #[error("{op}: {}; nothing was loaded (a non-strict load takes the names that match and returns the others)", key_lists(.missing, .unexpected))]
    StateDictKeys { op: &'static str, missing: Vec<String>, unexpected: Vec<String> },

    /// Fields marked `#[graph_arg(skip)]` hold tensors that require grad (parameters) which no
    /// other field holds: a graph function would not read them as inputs, and a state dict
    /// would leave them out. Nothing was run, saved or loaded. Fix: drop the `skip` (every
    /// `nn` layer is a `GraphArg`; `#[derive(GraphArg)]` makes your own types one).
    #[error(
        "{op}: {} #[graph_arg(skip)] but {} tensors that require grad (parameters), which the signature and the state dict would leave out; remove the skip so that they are leaves",
        names(.fields),
        if .fields.len() == 1 { "holds" } else { "hold" }
    )]
    SkippedParameters { op: String, fields: Vec<String> },

    /// An op in a graph has no ONNX operator to become. Fix: export a graph without it (a
    /// forward pass for inference, without the loss's gradient or an optimizer step).
    #[error("onnx export: {op} has no ONNX mapping{detail}")]
    OnnxUnsupported { op: String, detail: String },

    /// An imported ONNX model is not valid where it reaches a node: an input no node,
    /// initializer or graph input makes, an attribute missing or out of range, an initializer
    /// whose data does not fit its dims, an op that its opset does not have, a constant input
    /// (a shape, axes) computed from the model's inputs. Example: a Reshape whose shape
    /// input is a name nothing defines. Fix: check the model (`onnx.checker.check_model`), or
    /// export it again.
    #[error("onnx import: node `{node}` ({op}): {problem}")]
    OnnxImport { node: String, op: String, problem: String },

    /// An imported ONNX model uses ops import does not map to tensor-core's; every one is
    /// listed (with the nodes' count). Fix: export the model without them, or add each as one
    /// row of the table in `onnx/import/ops.rs` (docs/ONNX.md).
    #[error("onnx import: no tensor-core mapping for {}; see docs/ONNX.md for the ops that map", .ops.join(", "))]
    OnnxUnsupportedOps { ops: Vec<String> },

    /// An ONNX tensor, input or cast has an element type tensor-core lacks (strings,
    /// complex, float16, bfloat16, 8- and 16-bit and unsigned integers), or a value that is no
    /// tensor (a sequence, map or optional). Fix: convert the model to f32/f64/i32/i64/bool.
    #[error("onnx import: {what} has element type {dtype}, which tensor-core lacks (it has f32, f64, i32, i64 and bool)")]
    OnnxDType { what: String, dtype: String },

    /// A collective op (all-reduce, broadcast, all-gather) could not run: no communicator,
    /// an error from MPI, or a rank that did not answer in time (it probably died; the
    /// message names the timeout). Fix: as the message says.
    #[error("{op}: {reason}")]
    Distributed { op: &'static str, reason: String },
}
}

/// The message, as `Display` prints it (`main` returning `Err` and `unwrap()` print this);
/// with `{:#?}`, the variant and its fields.
///
/// ```
/// use tensor_core::prelude::*;
/// let w = Tensor::ones(&[2], DType::F32).requires_grad_(true)?;
/// let err = w.sub_(&Tensor::ones(&[2], DType::F32)).unwrap_err();
/// assert!(format!("{err:?}").starts_with("sub_: a leaf tensor that requires grad is used in an in-place operation"));
/// assert_eq!(format!("{err:#?}"), "InPlaceOnLeaf {\n    op: \"sub_\",\n}");
/// # Ok::<(), tensor_core::Error>(())
/// ```
impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match f.alternate() {
            true => self.debug_variant(f),
            false => fmt::Display::fmt(self, f),
        }
    }
}

impl Error {
    pub(crate) fn dtype_mismatch(op: &'static str, expected: DType, found: DType) -> Error {
        Error::DTypeMismatch { op, expected, found, expected_variant: dtype_variant(expected) }
    }

    /// Operands `first` and `second` (named as the op's caller knows them: `self`, `other`,
    /// `tensors[2]`) differ in dtype.
    pub(crate) fn operand_dtypes(op: &'static str, first: (impl Into<String>, DType), second: (impl Into<String>, DType)) -> Error {
        Error::OperandDTypes {
            op,
            first: first.0.into(),
            first_dtype: first.1,
            first_variant: dtype_variant(first.1),
            second: second.0.into(),
            second_dtype: second.1,
            second_variant: dtype_variant(second.1),
        }
    }

    pub(crate) fn invalid(op: &'static str, arg: &'static str, reason: impl Into<String>) -> Error {
        Error::InvalidArgument { op, arg, reason: reason.into() }
    }

    pub(crate) fn shapes(op: &'static str, lhs: &Shape, rhs: &Shape, hint: impl Into<String>) -> Error {
        Error::ShapeMismatch { op, lhs: lhs.clone(), rhs: rhs.clone(), hint: hint.into() }
    }
}

/// An I/O error from the user's own code (`?` on a `std::fs` call in a function returning
/// tensor-core's `Result`): `Error::Io` with what the system said. The path is not known here.
///
/// ```
/// use tensor_core::prelude::*;
/// fn read(path: &str) -> Result<String> {
///     Ok(std::fs::read_to_string(path)?)
/// }
/// let e = read("/no/such/file").unwrap_err();
/// assert!(matches!(e, Error::Io { action: "read or write", .. }));
/// ```
impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Error {
        Error::Io { path: "(a path of the caller's)".into(), action: "read or write", reason: e.to_string() }
    }
}

/// "2 missing keys: `a`, `b`; 1 unexpected key: `c`", leaving out an empty list.
fn key_lists(missing: &[String], unexpected: &[String]) -> String {
    let list = |kind: &str, keys: &[String]| match keys.len() {
        0 => None,
        1 => Some(format!("1 {kind} key: `{}`", keys[0])),
        n => Some(format!("{n} {kind} keys: {}", keys.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", "))),
    };
    [list("missing", missing), list("unexpected", unexpected)].into_iter().flatten().collect::<Vec<_>>().join("; ")
}

/// "field `a` is" or "fields `a`, `b` are".
fn names(fields: &[String]) -> String {
    let quoted = fields.iter().map(|f| format!("`{f}`")).collect::<Vec<_>>().join(", ");
    match fields.len() {
        1 => format!("field {quoted} is"),
        _ => format!("fields {quoted} are"),
    }
}

fn dtype_variant(d: DType) -> &'static str {
    match d {
        DType::F32 => "F32",
        DType::F64 => "F64",
        DType::I32 => "I32",
        DType::I64 => "I64",
        DType::Bool => "Bool",
    }
}
