//! What every schedule keeps: the rate's handle, the base rate, the epoch, and their state
//! dict.

use crate::error::{Error, Result};
use crate::optim::Hyperparameter;
use crate::tensor::Tensor;

/// A schedule's progress (PyTorch's `LRScheduler` attributes, for one parameter group).
pub(super) struct SchedulerCore {
    /// The optimizer's learning rate (shared with it).
    pub(super) lr: Hyperparameter,
    /// PyTorch's `base_lrs[0]`: the group's `initial_lr`.
    pub(super) base_lr: f64,
    /// PyTorch's `_last_lr[0]`.
    pub(super) last_lr: f64,
    /// -1 before the first step, which the constructor takes.
    pub(super) last_epoch: i64,
    /// Steps taken, the constructor's included (PyTorch's `_step_count`).
    pub(super) step_count: i64,
}

impl SchedulerCore {
    /// A schedule of `lr` from `base_lr`, before its first step.
    pub(super) fn new(lr: Hyperparameter, base_lr: f64) -> SchedulerCore {
        let last_lr = lr.get();
        SchedulerCore { lr, base_lr, last_lr, last_epoch: -1, step_count: 0 }
    }

    /// Writes `lr` (the next epoch's rate) and moves to that epoch; an `Err` (a rate out of
    /// range) changes nothing.
    pub(super) fn advance(&mut self, lr: f64) -> Result<()> {
        self.lr.set(lr)?;
        self.last_epoch += 1;
        self.step_count += 1;
        self.last_lr = lr;
        Ok(())
    }

    pub(super) fn state_dict(&self) -> Vec<(String, Tensor)> {
        vec![
            ("last_epoch".into(), Tensor::scalar(self.last_epoch)),
            ("_step_count".into(), Tensor::scalar(self.step_count)),
            ("base_lrs.0".into(), Tensor::scalar(self.base_lr)),
            ("_last_lr.0".into(), Tensor::scalar(self.last_lr)),
        ]
    }

    /// Reads every entry first, then sets them and the optimizer's rate.
    pub(super) fn load_state_dict(&mut self, named: &[(String, Tensor)]) -> Result<()> {
        const OP: &str = "LrScheduler::load_state_dict";
        let expected = ["last_epoch", "_step_count", "base_lrs.0", "_last_lr.0"];
        if let Some((name, _)) = named.iter().find(|(n, _)| !expected.contains(&n.as_str())) {
            return Err(Error::invalid(OP, "state_dict", format!("unexpected key `{name}`; a scheduler's state dict holds {}", expected.join(", "))));
        }
        let get = |name: &str| {
            named.iter().find(|(n, _)| n == name).map(|(_, t)| t).ok_or_else(|| Error::invalid(OP, "state_dict", format!("missing key `{name}`")))
        };
        let last_epoch = get("last_epoch")?.item::<i64>()?;
        let step_count = get("_step_count")?.item::<i64>()?;
        let base_lr = get("base_lrs.0")?.item::<f64>()?;
        let last_lr = get("_last_lr.0")?.item::<f64>()?;
        self.lr.set(last_lr)?;
        *self = SchedulerCore { lr: self.lr.clone(), base_lr, last_lr, last_epoch, step_count };
        Ok(())
    }
}
