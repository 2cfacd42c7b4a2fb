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
//! Build optimizers outside graph functions, as you do parameters. The hyperparameters a
//! schedule changes (`lr`, `momentum`, `betas`, `weight_decay`) are [`Hyperparameter`]s,
//! 0-d tensors the step reads: changing one (`set_lr`, a scheduler of [`lr_scheduler`])
//! never retraces, and a traced step uses the new value with the same bits as an eager one.
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
mod hyperparameter;
pub mod lr_scheduler;
mod sgd;

pub use adam::{Adam, AdamConfig};
pub use adamw::AdamW;
pub use hyperparameter::Hyperparameter;
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

    /// The hyperparameters a schedule may change, learning rate first, under PyTorch's
    /// param group names: `lr`, then `momentum` and `weight_decay` (SGD) or `betas.0`,
    /// `betas.1` and `weight_decay` (Adam, AdamW). Live handles: setting one changes the
    /// optimizer's next step, traced or not.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::optim::{Optimizer, Sgd};
    /// let opt = Sgd::new(vec![], 0.1)?;
    /// let names: Vec<_> = opt.hyperparameters().iter().map(|h| h.name()).collect();
    /// assert_eq!(names, ["lr", "momentum", "weight_decay"]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    fn hyperparameters(&self) -> Vec<&Hyperparameter>;

    /// The hyperparameter called `name` (see [`hyperparameters`](Self::hyperparameters)),
    /// or an `Err` listing the names there are.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::optim::{Adam, Optimizer};
    /// let opt = Adam::new(vec![], 0.1)?;
    /// opt.hyperparameter("betas.0")?.set(0.8)?;
    /// assert_eq!(opt.config().betas, (0.8, 0.999));
    /// assert!(opt.hyperparameter("momentum").is_err());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    fn hyperparameter(&self, name: &str) -> Result<&Hyperparameter> {
        let all = self.hyperparameters();
        let names: Vec<&str> = all.iter().map(|h| h.name()).collect();
        all.iter().find(|h| h.name() == name).copied().ok_or_else(|| {
            Error::invalid("Optimizer::hyperparameter", "name", format!("no hyperparameter `{name}`; this optimizer has {}", names.join(", ")))
        })
    }

    /// The current learning rate.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::optim::{AdamW, Optimizer};
    /// let mut opt = AdamW::new(vec![], 0.1)?;
    /// opt.set_lr(0.05)?;
    /// assert_eq!(opt.lr(), 0.05);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    fn lr(&self) -> f64 {
        self.hyperparameters().first().map_or(f64::NAN, |h| h.get())
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

/// A value must be finite and at least 0 (PyTorch's checks).
fn check_non_negative(op: &'static str, arg: &'static str, value: f64) -> Result<()> {
    if value.is_finite() && value >= 0.0 {
        Ok(())
    } else {
        Err(Error::invalid(op, arg, format!("must be a finite value >= 0, found {value}")))
    }
}

/// `grad + weight_decay * p` (the L2 penalty's gradient), or `grad` itself when the
/// optimizer was built without weight decay.
fn with_weight_decay(grad: Tensor, p: &Tensor, weight_decay: &Hyperparameter) -> Result<Tensor> {
    if weight_decay.is_used() {
        grad.add(&p.mul(&weight_decay.in_dtype(p.dtype())?)?)
    } else {
        Ok(grad)
    }
}
