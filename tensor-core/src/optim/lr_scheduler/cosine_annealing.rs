//! `CosineAnnealingLR`: the rate follows a cosine from its base down to `eta_min` over
//! `t_max` epochs, and back up.

use super::progress::SchedulerCore;
use super::{impl_lr_scheduler, lr_of, LrScheduler};
use crate::error::{Error, Result};
use crate::optim::Optimizer;
use std::f64::consts::PI;

/// Anneals the rate along a cosine (PyTorch's `CosineAnnealingLR`, SGDR without restarts):
/// from the base rate at epoch 0 to `eta_min` at epoch `t_max`, then back up over the next
/// `t_max` epochs, and so on. The closed form is
///
/// ```text
/// lr(t) = eta_min + (base_lr - eta_min) * (1 + cos(pi * t / t_max)) / 2
/// ```
///
/// and the rates are those of PyTorch's chainable form, which updates the current rate (so a
/// rate changed by hand between steps carries on from there):
///
/// ```text
/// lr(t) = (1 + cos(pi * t / t_max)) / (1 + cos(pi * (t - 1) / t_max)) * (lr(t - 1) - eta_min) + eta_min
/// lr(t) = lr(t - 1) + (base_lr - eta_min) * (1 - cos(pi / t_max)) / 2   when (t - 1 - t_max) % (2 t_max) == 0
/// ```
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::optim::lr_scheduler::{CosineAnnealingLR, LrScheduler};
/// use tensor_core::optim::{Optimizer, Sgd};
/// let opt = Sgd::new(vec![], 0.1)?;
/// let mut sched = CosineAnnealingLR::new(&opt, 4, 0.01)?;
/// sched.step()?;
/// sched.step()?; // half way: the mean of 0.1 and 0.01
/// assert!((opt.lr() - 0.055).abs() < 1e-15);
/// sched.step()?;
/// sched.step()?;
/// assert!((opt.lr() - 0.01).abs() < 1e-15);
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub struct CosineAnnealingLR {
    core: SchedulerCore,
    t_max: i64,
    eta_min: f64,
}

impl CosineAnnealingLR {
    /// A cosine schedule of `opt`'s learning rate from its current value to `eta_min`
    /// (finite, at least 0) over `t_max` (at least 1) epochs; takes the first step (epoch 0,
    /// the rate unchanged).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::optim::lr_scheduler::CosineAnnealingLR;
    /// let opt = tensor_core::optim::Sgd::new(vec![], 0.1)?;
    /// assert!(CosineAnnealingLR::new(&opt, 0, 0.0).is_err());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn new(opt: &(impl Optimizer + ?Sized), t_max: usize, eta_min: f64) -> Result<CosineAnnealingLR> {
        if t_max == 0 {
            return Err(Error::invalid("CosineAnnealingLR", "t_max", "must be at least 1, found 0"));
        }
        crate::optim::check_non_negative("CosineAnnealingLR", "eta_min", eta_min)?;
        let lr = lr_of(opt)?;
        let core = SchedulerCore::new(lr.clone(), lr.get());
        let mut sched = CosineAnnealingLR { core, t_max: t_max as i64, eta_min };
        sched.step()?;
        Ok(sched)
    }

    /// PyTorch's `get_lr`, term for term (the order of the f64 operations included).
    fn lr_at(&self, epoch: i64) -> Result<f64> {
        let (lr, base, eta_min, t_max) = (self.core.lr.get(), self.core.base_lr, self.eta_min, self.t_max as f64);
        Ok(if epoch == 0 {
            lr
        } else if (epoch - 1 - self.t_max).rem_euclid(2 * self.t_max) == 0 {
            lr + (base - eta_min) * (1.0 - (PI / t_max).cos()) / 2.0
        } else {
            let e = epoch as f64;
            (1.0 + (PI * e / t_max).cos()) / (1.0 + (PI * (e - 1.0) / t_max).cos()) * (lr - eta_min) + eta_min
        })
    }

    fn after_load(&self) -> Result<()> {
        Ok(())
    }
}

impl_lr_scheduler!(CosineAnnealingLR);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optim::Sgd;

    #[test]
    fn follows_pytorchs_chainable_cosine_down_and_back_up() -> Result<()> {
        let opt = Sgd::new(vec![], 0.1)?;
        let mut sched = CosineAnnealingLR::new(&opt, 4, 0.01)?;
        let mut lrs = vec![opt.lr()];
        for _ in 0..10 {
            sched.step()?;
            lrs.push(opt.lr());
        }
        // PyTorch 2's values for lr 0.1, T_max 4, eta_min 0.01; the closed form gives
        // 0.01 + 0.09 * (1 + cos(pi t / 4)) / 2: 0.1, 0.0868..., 0.055, 0.0231..., 0.01, ...
        let pytorch = [
            0.1,
            0.08681980515339464,
            0.05500000000000001,
            0.023180194846605363,
            0.01,
            0.023180194846605363,
            0.05500000000000002,
            0.08681980515339469,
            0.10000000000000006,
            0.0868198051533947,
            0.05500000000000005,
        ];
        for (t, (got, want)) in lrs.iter().zip(pytorch).enumerate() {
            assert!((got - want).abs() < 1e-16, "epoch {t}: {got} != {want}");
        }
        Ok(())
    }
}
