//! Control flow that graphs can hold: `cond` and `while_loop`. Eagerly they are plain Rust
//! (the predicate's value picks the branch; the loop runs while the condition is true).
//! While tracing, each closure is traced once into a subgraph held by one `Cond` or `While`
//! node, so a loop of any trip count is one node and the trip count can depend on values
//! known only when the graph runs. Gradients flow through both (see `grad.rs`).

#[doc(hidden)]
#[doc(hidden)]
pub mod autograph;
mod carried_state;
mod cond;
mod grad;
mod replay;
mod while_loop;

pub use cond::cond;
pub(crate) use replay::{is_replayed, replay_uses, Replayed};
pub use while_loop::{while_loop, while_loop_opts, WhileOptions};

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::shape::Shape;
use crate::tensor::Tensor;

/// Checks that a predicate is one bool value.
fn check_predicate(op: &'static str, pred: &Tensor) -> Result<()> {
    if pred.dtype() != DType::Bool {
        return Err(Error::UnsupportedDType {
            op,
            dtype: pred.dtype(),
            needs: "a bool predicate (a comparison such as x.gt(0.0), reduced to one value)",
        });
    }
    let shape = pred.raw_shape();
    if shape.is_known() && shape.numel() != 1 {
        return Err(Error::NotOneElement { op, shape: shape.clone(), numel: shape.numel() });
    }
    Ok(())
}

/// `dtype[shape]`, for messages.
fn describe(dtype: DType, shape: &Shape) -> String {
    format!("{dtype}{shape}")
}

/// The dtype and shape of each tensor.
fn types_of(ts: &[Tensor]) -> Vec<(DType, Shape)> {
    ts.iter().map(|t| (t.dtype(), t.raw_shape())).collect()
}

/// True when `pred` is data known while tracing (made inside the traced function), so the
/// branch can be chosen now. A captured tensor is not: its value is read at each call.
fn is_trace_constant(pred: &Tensor) -> bool {
    crate::tensor::context::is_known_now(pred)
}
