//! `StepLR`: the rate times `gamma` every `step_size` epochs.

use super::progress::SchedulerCore;
use super::{impl_lr_scheduler, lr_of, LrScheduler};
use crate::error::{Error, Result};
use crate::optim::Optimizer;

/// Multiplies the rate by `gamma` every `step_size` epochs (PyTorch's `StepLR`, its
/// chainable form: at an epoch that is a multiple of `step_size`, the current rate times
/// `gamma`; otherwise the current rate).
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::optim::lr_scheduler::{LrScheduler, StepLR};
/// use tensor_core::optim::{Optimizer, Sgd};
/// let opt = Sgd::new(vec![], 0.1)?;
/// let mut sched = StepLR::new(&opt, 3, 0.5)?;
/// let mut lrs = vec![opt.lr()];
/// for _ in 0..6 {
///     sched.step()?;
///     lrs.push(opt.lr());
/// }
/// assert_eq!(lrs, [0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.025]);
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub struct StepLR {
    core: SchedulerCore,
    step_size: i64,
    gamma: f64,
}

impl StepLR {
    /// A schedule of `opt`'s learning rate, from its current value, decayed by `gamma`
    /// (finite, at least 0) every `step_size` (at least 1) epochs; takes the first step
    /// (epoch 0, the rate unchanged).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::optim::lr_scheduler::StepLR;
    /// let opt = tensor_core::optim::Sgd::new(vec![], 0.1)?;
    /// assert!(StepLR::new(&opt, 0, 0.5).is_err());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn new(opt: &(impl Optimizer + ?Sized), step_size: usize, gamma: f64) -> Result<StepLR> {
        if step_size == 0 {
            return Err(Error::invalid("StepLR", "step_size", "must be at least 1, found 0"));
        }
        super::super::check_non_negative("StepLR", "gamma", gamma)?;
        let lr = lr_of(opt)?;
        let core = SchedulerCore::new(lr.clone(), lr.get());
        let mut sched = StepLR { core, step_size: step_size as i64, gamma };
        sched.step()?;
        Ok(sched)
    }

    fn lr_at(&self, epoch: i64) -> Result<f64> {
        let lr = self.core.lr.get();
        Ok(if epoch == 0 || epoch % self.step_size != 0 { lr } else { lr * self.gamma })
    }

    fn after_load(&self) -> Result<()> {
        Ok(())
    }
}

impl_lr_scheduler!(StepLR);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optim::Sgd;

    #[test]
    fn decays_by_gamma_every_step_size_epochs_as_pytorch() -> Result<()> {
        let opt = Sgd::new(vec![], 0.1)?;
        let mut sched = StepLR::new(&opt, 3, 0.1)?;
        let mut lrs = vec![sched.get_last_lr()[0]];
        for _ in 0..7 {
            sched.step()?;
            lrs.push(opt.lr());
        }
        // PyTorch: 0.1 * 0.1 in f64 is 0.010000000000000002, and so on.
        assert_eq!(
            lrs,
            [0.1, 0.1, 0.1, 0.010000000000000002, 0.010000000000000002, 0.010000000000000002, 0.0010000000000000002, 0.0010000000000000002]
        );
        assert_eq!(sched.last_epoch(), 7);
        Ok(())
    }

    #[test]
    fn a_loaded_state_dict_resumes_the_schedule_and_the_rate() -> Result<()> {
        let opt = Sgd::new(vec![], 0.1)?;
        let mut sched = StepLR::new(&opt, 2, 0.5)?;
        sched.step()?;
        sched.step()?; // epoch 2: 0.05
        let saved = sched.state_dict();
        let mut opt2 = Sgd::new(vec![], 0.1)?;
        let mut resumed = StepLR::new(&opt2, 2, 0.5)?;
        resumed.load_state_dict(&saved)?;
        assert_eq!((resumed.last_epoch(), opt2.lr()), (2, 0.05));
        for _ in 0..2 {
            sched.step()?;
            resumed.step()?;
        }
        assert_eq!((opt.lr(), opt2.lr()), (0.025, 0.025));
        opt2.set_lr(1.0)?;
        assert!(resumed.load_state_dict(&saved[1..]).unwrap_err().to_string().contains("missing key `last_epoch`"));
        assert_eq!(opt2.lr(), 1.0); // the failed load changed nothing
        Ok(())
    }
}
