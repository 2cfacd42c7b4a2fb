//! A symbolic tensor's place in the graph being traced.

use super::context;
use crate::error::Error;
use std::sync::Arc;

/// The index of a value in a graph (`Graph::values`).
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::graph::{Graph, ValueId};
/// let mut g = Graph::new("g");
/// let v: ValueId = g.add_value(DType::F32, Shape::new(&[2]), None);
/// assert_eq!(g.values[v].name, "v0");
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub type ValueId = usize;

/// A value of the graph a trace is building.
#[derive(Clone, Debug)]
pub(crate) struct Symbol {
    /// The trace that made it.
    pub(crate) trace: u64,
    pub(crate) value: ValueId,
    /// The external tensor this value stands for, if it is a slot's proxy.
    pub(crate) slot: Option<usize>,
    pub(crate) label: Option<Arc<str>>,
    /// The function being traced when it was made, and its type (`f32[4, 3]`): what an
    /// error about a value that escaped its trace names.
    pub(crate) function: Arc<str>,
    pub(crate) ty: Arc<str>,
}

impl Symbol {
    /// The name it prints with: the argument's name, `capture_N`, or `vN`.
    pub(crate) fn name(&self) -> String {
        match &self.label {
            Some(l) => l.to_string(),
            None => format!("v{}", self.value),
        }
    }

    /// The error for reading this value as a Rust value in `op`.
    pub(crate) fn value_error(&self, op: &'static str) -> Error {
        if context::current_trace() == self.trace {
            Error::SymbolicValue { op, name: self.name() }
        } else {
            self.leaked(op)
        }
    }

    /// The error for using this value after its trace ended.
    pub(crate) fn leaked(&self, op: &'static str) -> Error {
        Error::LeakedTracer { op, name: self.name(), ty: self.ty.to_string(), function: self.function.to_string() }
    }
}
