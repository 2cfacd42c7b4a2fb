//! Reverse-mode automatic differentiation with PyTorch's semantics. Every op records a grad
//! node when an input requires grad; gradient formulas are ordinary tensor ops, so they run
//! eagerly, trace into graphs, and can be differentiated again.

mod api;
mod engine;
mod grad_fn;
#[cfg(test)]
mod tests;

pub(crate) use crate::tensor::grad_mode::GradModeGuard;
pub use crate::tensor::grad_mode::{enable_grad, is_grad_enabled, no_grad, set_grad_enabled, EnableGradGuard, NoGradGuard};
pub(crate) use api::vjp_each;
pub use api::{backward, grad, vjp};
pub use engine::BackwardOptions;
pub use grad_fn::{GradFn, NextFunction};
