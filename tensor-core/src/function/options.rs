//! The options of `#[graph_fn(...)]`.

use crate::dtype::DType;

/// What happens when a function would trace more often than `max_traces`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TracePolicy {
    /// Log a warning (through `tracing`) and trace anyway.
    Warn,
    /// Return `Error::TooManyTraces` (through the function's `Result`).
    Error,
}

/// A fixed dtype and shape for one tensor argument; `None` dims are unknown (any size).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TensorSpec {
    /// The index of the argument this spec is for.
    pub arg: usize,
    pub dtype: DType,
    pub dims: &'static [Option<usize>],
}

impl TensorSpec {
    /// The spec as a shape (unknown dims as `?`).
    pub fn shape(&self) -> crate::Shape {
        crate::Shape::from(self.dims.iter().map(|d| d.unwrap_or(crate::shape::UNKNOWN)).collect::<Vec<_>>())
    }
}

/// How a graph function traces and caches.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// After a retrace caused only by differing dims, trace once with those dims unknown.
    pub reduce_retracing: bool,
    /// Fixed specs for tensor arguments: a call that does not match is an error.
    pub input_signature: Option<&'static [TensorSpec]>,
    /// The most traces allowed, and what happens beyond.
    pub max_traces: Option<(usize, TracePolicy)>,
    /// Run the graph optimizer (switch off to debug).
    pub optimize: bool,
    /// The most cached signatures (least recently used evicted).
    pub cache_capacity: usize,
    /// The name shown in introspection and warnings (default: the function's).
    pub name: Option<&'static str>,
}

impl Options {
    /// The defaults: exact signatures, optimized, 64 cached signatures.
    pub const DEFAULT: Options =
        Options { reduce_retracing: false, input_signature: None, max_traces: None, optimize: true, cache_capacity: 64, name: None };
}

impl Default for Options {
    fn default() -> Self {
        Options::DEFAULT
    }
}
