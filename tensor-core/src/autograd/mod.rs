//! Reverse-mode automatic differentiation with PyTorch's semantics. Every op records a grad
//! node when an input requires grad; gradient formulas are ordinary tensor ops, so they run
//! eagerly, trace into graphs, and can be differentiated again.

mod api;
mod engine;
mod node;

pub(crate) use crate::tensor::grad_mode::GradModeGuard;
pub use crate::tensor::grad_mode::{is_grad_enabled, no_grad, set_grad_enabled, NoGradGuard};
pub use api::{grad, grad_with};
pub use engine::BackwardOptions;
pub(crate) use node::{BackwardCtx, CustomBackward, GradNode};
pub use node::{GradFn, NextFunction};

use crate::ops::Op;
use crate::tensor::Tensor;

/// Records a grad node for `out = op(inputs)` when grad mode is on and an input requires grad.
pub(crate) fn record(op: Op, inputs: &[&Tensor], out: &Tensor) {
    if !is_grad_enabled() || !op.is_differentiable() || !out.dtype().is_float() {
        return;
    }
    if !inputs.iter().any(|t| t.requires_grad_raw()) {
        return;
    }
    out.set_grad_fn(Some(GradNode::new(op, inputs, out)), 0);
}

/// Records one grad node with a custom formula for all of `outputs`, when grad mode is on and
/// an input requires grad.
pub(crate) fn record_custom(formula: std::sync::Arc<dyn CustomBackward>, inputs: &[&Tensor], outputs: &[&Tensor]) {
    if !is_grad_enabled() || !inputs.iter().any(|t| t.requires_grad_raw()) {
        return;
    }
    let node = GradNode::custom(formula, inputs, outputs);
    for (n, t) in outputs.iter().enumerate() {
        if t.dtype().is_float() {
            t.set_grad_fn(Some(node.clone()), n);
        }
    }
}
