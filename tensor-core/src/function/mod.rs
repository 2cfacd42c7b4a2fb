//! The runtime behind `#[graph_fn]`: argument flattening into signatures (`GraphArg`), output
//! rebuilding (`GraphOutput`, from the tracer), concrete functions (one traced graph per signature), the trace
//! cache with its retracing policy, and introspection.

mod arg;
mod concrete;
mod differentiable;
mod graph_function;
mod key;
mod options;
mod registry;

pub use crate::trace::{GraphOutput, GraphReturn};
pub use arg::{GraphArg, GraphArgField, Skipped, SkippedGraphArg, SkippedOther, StaticField};
pub use concrete::ConcreteFunction;
pub use graph_function::{functions_run_eagerly, run_functions_eagerly, GraphFunction, TraceRecord};
pub use key::Flattener;
pub use options::{Options, TensorSpec, TracePolicy};
pub use registry::{all, lookup};
