//! The options of `#[graph_fn(...)]`.

use crate::dtype::DType;

/// What happens when a function would trace more often than `max_traces`.
///
/// ```
/// use tensor_core::prelude::*;
/// #[graph_fn(max_traces(1, error))]
/// fn once(x: &Tensor) -> Result<Tensor> {
///     x.exp()
/// }
/// once(&Tensor::ones(&[1], DType::F32))?;
/// assert!(matches!(once(&Tensor::ones(&[2], DType::F32)), Err(Error::TooManyTraces { .. })));
/// # Ok::<(), tensor_core::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TracePolicy {
    /// Log a warning and trace anyway. The warning is a `tracing` event (target
    /// `tensor_core::graph_fn`), also written to standard error when no `tracing` subscriber is
    /// installed.
    Warn,
    /// Return `Error::TooManyTraces` (through the function's `Result`).
    Error,
}

/// A fixed dtype and shape for one tensor argument; `None` dims are unknown (any size).
///
/// ```
/// use tensor_core::prelude::*;
/// #[graph_fn(input_signature(x: f32[?, 3]))]
/// fn rows(x: &Tensor) -> Result<Tensor> {
///     x.sum_axes(&[1], false)
/// }
/// assert_eq!(rows(&Tensor::ones(&[5, 3], DType::F32))?.dims(), vec![5]);
/// assert!(rows(&Tensor::ones(&[5, 4], DType::F32)).is_err()); // does not match: no retrace
/// let spec = tensor_core::function::lookup("rows").unwrap().options().input_signature.unwrap()[0];
/// assert_eq!(spec.shape().to_string(), "[?, 3]");
/// # Ok::<(), tensor_core::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TensorSpec {
    /// The index of the argument this spec is for.
    pub arg: usize,
    /// The dtype the argument must have.
    pub dtype: DType,
    /// The dims it must have; `None` is any size.
    pub dims: &'static [Option<usize>],
}

impl TensorSpec {
    /// The spec as a shape (unknown dims as `?`).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::function::TensorSpec;
    /// let spec = TensorSpec { arg: 0, dtype: DType::F32, dims: &[None, Some(784)] };
    /// assert_eq!(spec.shape().to_string(), "[?, 784]");
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn shape(&self) -> crate::shape::Shape {
        crate::shape::Shape::from(self.dims.iter().map(|d| d.unwrap_or(crate::shape::UNKNOWN)).collect::<Vec<_>>())
    }
}

/// How a graph function traces and caches.
///
/// ```
/// use tensor_core::prelude::*;
/// #[graph_fn(optimize = false, name = "plain")]
/// fn unoptimized(x: &Tensor) -> Result<Tensor> {
///     x.mul(1.0)
/// }
/// unoptimized(&Tensor::ones(&[1], DType::F32))?;
/// let f = tensor_core::function::lookup("plain").unwrap();
/// assert!(!f.options().optimize);
/// assert_eq!(f.concrete_functions()[0].graph().count_op("mul"), 1); // kept as traced
/// # Ok::<(), tensor_core::Error>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// After a retrace caused only by differing dims, trace once with those dims unknown.
    pub reduce_retracing: bool,
    /// Fixed specs for tensor arguments: a call that does not match is an error.
    pub input_signature: Option<&'static [TensorSpec]>,
    /// The most traces allowed, and what happens beyond (see [`TracePolicy`]).
    pub max_traces: Option<(usize, TracePolicy)>,
    /// Run the graph optimizer (switch off to debug).
    pub optimize: bool,
    /// The most cached signatures (least recently used evicted).
    pub cache_capacity: usize,
    /// The name introspection, `lookup`, graphs, errors and warnings use (default: the
    /// function's, `Type::method` for a method).
    pub name: Option<&'static str>,
}

impl Options {
    /// The defaults: exact signatures, optimized, 64 cached signatures.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::function::Options;
    /// assert_eq!(Options::DEFAULT.cache_capacity, 64);
    /// assert!(Options::DEFAULT.optimize && !Options::DEFAULT.reduce_retracing);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub const DEFAULT: Options =
        Options { reduce_retracing: false, input_signature: None, max_traces: None, optimize: true, cache_capacity: 64, name: None };
}

impl Default for Options {
    fn default() -> Self {
        Options::DEFAULT
    }
}
