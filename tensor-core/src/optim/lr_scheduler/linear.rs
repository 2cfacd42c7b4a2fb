//! `LinearLR`: a linear warm-up (or decay) of the rate by a factor over some epochs.

use super::progress::SchedulerCore;
use super::{impl_lr_scheduler, lr_of, LrScheduler};
use crate::error::{Error, Result};
use crate::optim::Optimizer;

/// Scales the rate by a factor that goes linearly from `start_factor` at epoch 0 to
/// `end_factor` at epoch `total_iters`, then stays (PyTorch's `LinearLR`, a warm-up with
/// `start_factor < 1`). The rates are those of PyTorch's chainable form:
///
/// ```text
/// lr(0) = lr * start_factor
/// lr(t) = lr(t - 1) * (1 + (end - start) / (total_iters * start + (t - 1) * (end - start)))   for 0 < t <= total_iters
/// ```
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::optim::lr_scheduler::{LinearLR, LrScheduler};
/// use tensor_core::optim::{Optimizer, Sgd};
/// let opt = Sgd::new(vec![], 0.1)?;
/// let mut sched = LinearLR::new(&opt, 0.5, 1.0, 2)?;
/// assert_eq!(opt.lr(), 0.05);
/// sched.step()?;
/// assert!((opt.lr() - 0.075).abs() < 1e-16);
/// sched.step()?;
/// sched.step()?;
/// assert!((opt.lr() - 0.1).abs() < 1e-16);
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub struct LinearLR {
    core: SchedulerCore,
    start_factor: f64,
    end_factor: f64,
    total_iters: i64,
}

impl LinearLR {
    /// A linear schedule of `opt`'s learning rate: `start_factor` in `(0, 1]`, `end_factor`
    /// in `[0, 1]` (PyTorch's defaults are 1/3, 1 and 5 iterations); takes the first step,
    /// which scales the rate by `start_factor`.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::optim::lr_scheduler::LinearLR;
    /// let opt = tensor_core::optim::Sgd::new(vec![], 0.1)?;
    /// assert!(LinearLR::new(&opt, 0.0, 1.0, 5).is_err());
    /// assert!(LinearLR::new(&opt, 0.5, 1.5, 5).is_err());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn new(opt: &(impl Optimizer + ?Sized), start_factor: f64, end_factor: f64, total_iters: usize) -> Result<LinearLR> {
        if !(start_factor > 0.0 && start_factor <= 1.0) {
            return Err(Error::invalid("LinearLR", "start_factor", format!("must be in (0, 1], found {start_factor}")));
        }
        if !(0.0..=1.0).contains(&end_factor) {
            return Err(Error::invalid("LinearLR", "end_factor", format!("must be in [0, 1], found {end_factor}")));
        }
        let lr = lr_of(opt)?;
        let core = SchedulerCore::new(lr.clone(), lr.get());
        let mut sched = LinearLR { core, start_factor, end_factor, total_iters: total_iters as i64 };
        sched.step()?;
        Ok(sched)
    }

    /// PyTorch's `get_lr`, term for term.
    fn lr_at(&self, epoch: i64) -> Result<f64> {
        let (lr, start, end) = (self.core.lr.get(), self.start_factor, self.end_factor);
        Ok(if epoch == 0 {
            lr * start
        } else if epoch > self.total_iters {
            lr
        } else {
            lr * (1.0 + (end - start) / (self.total_iters as f64 * start + (epoch - 1) as f64 * (end - start)))
        })
    }

    fn after_load(&self) -> Result<()> {
        Ok(())
    }
}

impl_lr_scheduler!(LinearLR);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optim::Sgd;

    #[test]
    fn warms_up_linearly_as_pytorch() -> Result<()> {
        let opt = Sgd::new(vec![], 0.1)?;
        let mut sched = LinearLR::new(&opt, 0.25, 1.0, 4)?;
        let mut lrs = vec![opt.lr()];
        for _ in 0..6 {
            sched.step()?;
            lrs.push(opt.lr());
        }
        // PyTorch: 0.025, then * (1 + 0.75 / (1 + 0.75 (t - 1))): 0.04375, 0.0625, ...
        assert_eq!(
            lrs,
            [0.025, 0.043750000000000004, 0.06250000000000001, 0.08125000000000002, 0.10000000000000002, 0.10000000000000002, 0.10000000000000002]
        );
        Ok(())
    }
}
