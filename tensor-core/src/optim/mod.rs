//! Optimizers: SGD (with momentum and weight decay), Adam and AdamW, with PyTorch's update
//! rules.
//!
//! An optimizer holds handles to the parameters (leaves that require grad) and updates them
//! **in place** from their `.grad`, with tensor ops under `no_grad`. Nothing is read back
//! into Rust during a step and all state (momentum buffers, Adam's moments and step count) is
//! held in tensors made when the optimizer is built, so the same `step()` traces into a
//! graph: run inside a `#[graph_fn]`, it becomes graph nodes whose in-place updates are
//! written back to the parameters and the state tensors on every call.
//!
//! Build optimizers outside graph functions, as you do parameters. Their hyperparameters
//! (`lr`, `momentum`, ...) are Rust values: a traced step uses the values it was traced with.
//!
//! ```
//! use tensor_core::prelude::*;
//! use tensor_core::optim::{Optimizer, Sgd};
//! let w = Tensor::from_vec(vec![1.0f32, -2.0], &[2])?.requires_grad_(true)?;
//! let mut opt = Sgd::new(vec![w.clone()], 0.1)?;
//! for _ in 0..100 {
//!     opt.zero_grad()?;
//!     let loss = (&w * &w).sum()?; // minimum at w = 0
//!     loss.backward()?;
//!     opt.step()?;
//! }
//! assert!(w.to_vec::<f32>()?.iter().all(|v| v.abs() < 1e-6));
//! # Ok::<(), tensor_core::Error>(())
//! ```

mod adam;
mod adamw;
mod sgd;

pub use adam::{Adam, AdamConfig};
pub use adamw::AdamW;
pub use sgd::{Sgd, SgdConfig};

use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// Updates parameters from their gradients (PyTorch's `torch.optim.Optimizer`).
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::optim::{Adam, Optimizer};
/// let w = Tensor::scalar(1.0f64).requires_grad_(true)?;
/// let mut opt: Box<dyn Optimizer> = Box::new(Adam::new(vec![w.clone()], 0.1)?);
/// (&w * 2.0).backward()?;
/// opt.step()?;
/// assert!((w.item::<f64>()? - 0.9).abs() < 1e-6); // Adam's first step moves by about lr
/// opt.zero_grad()?;
/// assert!(w.grad().is_none());
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub trait Optimizer {
    /// Updates every parameter that has a `.grad`, in place; parameters whose `.grad` is
    /// `None` are skipped (their state does not change either).
    fn step(&self) -> Result<()>;

    /// The parameters this optimizer updates, in the order it was given them.
    fn parameters(&self) -> &[Tensor];

    /// Clears the `.grad` of every parameter (sets it to `None`, as PyTorch's default).
    fn zero_grad(&self) -> Result<()> {
        self.parameters().iter().try_for_each(Tensor::zero_grad)
    }
}

/// Parameters must be distinct float tensors (a parameter given twice would be stepped twice).
fn check_params(op: &'static str, params: &[Tensor]) -> Result<()> {
    let mut seen = std::collections::HashSet::new();
    for (i, p) in params.iter().enumerate() {
        if !p.dtype().is_float() {
            return Err(Error::UnsupportedDType { op, dtype: p.dtype(), needs: "float parameters (f32 or f64)" });
        }
        if !seen.insert(p.id()) {
            return Err(Error::invalid(op, "params", format!("parameter {i} appears more than once; pass each tensor once")));
        }
    }
    Ok(())
}

/// A hyperparameter must be finite and at least 0 (PyTorch's checks).
fn check_non_negative(op: &'static str, arg: &'static str, value: f64) -> Result<()> {
    if value.is_finite() && value >= 0.0 {
        Ok(())
    } else {
        Err(Error::invalid(op, arg, format!("must be a finite value >= 0, found {value}")))
    }
}

/// `grad + weight_decay * p` (the L2 penalty's gradient), or `grad` itself when it is 0.
fn with_weight_decay(grad: Tensor, p: &Tensor, weight_decay: f64) -> Result<Tensor> {
    if weight_decay == 0.0 {
        Ok(grad)
    } else {
        grad.add(&p.mul(weight_decay)?)
    }
}
