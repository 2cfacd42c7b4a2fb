//! Learning-rate schedules (PyTorch's `torch.optim.lr_scheduler`): [`StepLR`],
//! [`CosineAnnealingLR`], [`LinearLR`] (warm-up) and [`OneCycleLR`].
//!
//! A scheduler holds a handle to its optimizer's learning rate (a [`Hyperparameter`], a 0-d
//! tensor the step reads), and `step()` writes the next rate there in place. A training step
//! traced into a `#[graph_fn]` reads the rate at every call, so a schedule never retraces it
//! and the traced steps match eager ones bit for bit.
//!
//! As in PyTorch, building a scheduler takes its first step (epoch 0), `step()` is called
//! after each optimizer step (or epoch), and the rates are PyTorch's, computed in f64 by its
//! formulas (the chainable forms that read the current rate, where PyTorch uses them).
//!
//! ```
//! use tensor_core::prelude::*;
//! use tensor_core::optim::lr_scheduler::{LrScheduler, StepLR};
//! use tensor_core::optim::{Optimizer, Sgd};
//! let w = Tensor::scalar(1.0f64).requires_grad_(true)?;
//! let opt = Sgd::new(vec![w.clone()], 0.1)?;
//! let mut sched = StepLR::new(&opt, 2, 0.5)?;
//! let mut lrs = vec![];
//! for _ in 0..5 {
//!     opt.zero_grad()?;
//!     (&w * &w).backward()?;
//!     opt.step()?;
//!     sched.step()?;
//!     lrs.push(opt.lr());
//! }
//! assert_eq!(lrs, [0.1, 0.05, 0.05, 0.025, 0.025]);
//! # Ok::<(), tensor_core::Error>(())
//! ```

mod cosine_annealing;
mod linear;
mod one_cycle;
mod progress;
mod step;

pub use cosine_annealing::CosineAnnealingLR;
pub use linear::LinearLR;
pub use one_cycle::{AnnealStrategy, OneCycleConfig, OneCycleLR};
pub use step::StepLR;

use super::Hyperparameter;
use crate::error::Result;
use crate::tensor::Tensor;

/// A learning-rate schedule (PyTorch's `LRScheduler`), for an optimizer with one parameter
/// group.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::optim::lr_scheduler::{CosineAnnealingLR, LrScheduler};
/// use tensor_core::optim::{Optimizer, Sgd};
/// let opt = Sgd::new(vec![], 1.0)?;
/// let mut sched: Box<dyn LrScheduler> = Box::new(CosineAnnealingLR::new(&opt, 2, 0.0)?);
/// assert_eq!((sched.last_epoch(), sched.get_last_lr()), (0, vec![1.0]));
/// sched.step()?;
/// sched.step()?;
/// assert_eq!((sched.last_epoch(), opt.lr()), (2, 0.0));
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub trait LrScheduler {
    /// Moves to the next epoch (`last_epoch + 1`) and writes its rate into the optimizer.
    /// An `Err` (a rate out of range, a step past the end of a one-cycle schedule) changes
    /// nothing.
    fn step(&mut self) -> Result<()>;

    /// The rate the last step wrote, one per parameter group (one here), as PyTorch's
    /// `get_last_lr()`.
    fn get_last_lr(&self) -> Vec<f64>;

    /// The epoch of the last step: 0 after building, +1 per `step()`.
    fn last_epoch(&self) -> i64;

    /// The schedule's progress as named f64 scalars, PyTorch's names: `last_epoch`,
    /// `_step_count`, `base_lrs.0`, `_last_lr.0` (its settings, such as `gamma`, come from
    /// the constructor and are not part of it).
    fn state_dict(&self) -> Vec<(String, Tensor)>;

    /// Loads a [`state_dict`](Self::state_dict) (every name checked first: an `Err` names a
    /// missing, unexpected or non-scalar entry and changes nothing), and writes the saved
    /// last rate into the optimizer. PyTorch restores that rate from the optimizer's state
    /// dict; this crate's optimizer state dicts hold no hyperparameters, so the scheduler
    /// restores it, and a run resumed from both state dicts continues exactly.
    fn load_state_dict(&mut self, named: &[(String, Tensor)]) -> Result<()>;
}

/// Implements [`LrScheduler`] for a schedule with a `core: SchedulerCore` field and
/// `fn lr_at(&self, epoch: i64) -> Result<f64>` (the rate of `epoch`, which may read the
/// current rate) and `fn after_load(&self) -> Result<()>` (what else a load restores).
macro_rules! impl_lr_scheduler {
    ($t:ty) => {
        impl $crate::optim::lr_scheduler::LrScheduler for $t {
            fn step(&mut self) -> $crate::error::Result<()> {
                let lr = self.lr_at(self.core.last_epoch + 1)?;
                self.core.advance(lr)
            }

            fn get_last_lr(&self) -> Vec<f64> {
                vec![self.core.last_lr]
            }

            fn last_epoch(&self) -> i64 {
                self.core.last_epoch
            }

            fn state_dict(&self) -> Vec<(String, $crate::tensor::Tensor)> {
                self.core.state_dict()
            }

            fn load_state_dict(&mut self, named: &[(String, $crate::tensor::Tensor)]) -> $crate::error::Result<()> {
                self.core.load_state_dict(named)?;
                self.after_load()
            }
        }
    };
}
use impl_lr_scheduler;

/// The learning rate's handle, from the optimizer.
fn lr_of(opt: &(impl super::Optimizer + ?Sized)) -> Result<Hyperparameter> {
    opt.hyperparameter("lr").cloned()
}
