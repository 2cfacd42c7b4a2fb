//! `OneCycleLR`: the 1cycle policy (Smith & Topin), the rate up to a maximum and down to far
//! below where it started, the momentum the other way.

use super::progress::SchedulerCore;
use super::{impl_lr_scheduler, lr_of, LrScheduler};
use crate::error::{Error, Result};
use crate::optim::{Hyperparameter, Optimizer};
use std::f64::consts::PI;

/// How [`OneCycleLR`] moves between a phase's ends.
///
/// ```
/// use tensor_core::optim::lr_scheduler::AnnealStrategy;
/// assert_eq!(AnnealStrategy::default(), AnnealStrategy::Cos);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AnnealStrategy {
    /// `end + (start - end) / 2 * (cos(pi * pct) + 1)` (PyTorch's `'cos'`, the default).
    #[default]
    Cos,
    /// `(end - start) * pct + start` (PyTorch's `'linear'`).
    Linear,
}

impl AnnealStrategy {
    /// The value `pct` of the way from `start` to `end`, PyTorch's formulas term for term.
    fn anneal(self, start: f64, end: f64, pct: f64) -> f64 {
        match self {
            AnnealStrategy::Cos => end + (start - end) / 2.0 * ((PI * pct).cos() + 1.0),
            AnnealStrategy::Linear => (end - start) * pct + start,
        }
    }
}

/// The settings of [`OneCycleLR`]; [`new`](Self::new) gives PyTorch's defaults.
///
/// ```
/// use tensor_core::optim::lr_scheduler::OneCycleConfig;
/// let c = OneCycleConfig::new(0.1, 100);
/// assert_eq!((c.pct_start, c.div_factor, c.final_div_factor), (0.3, 25.0, 1e4));
/// assert_eq!((c.base_momentum, c.max_momentum, c.cycle_momentum), (0.85, 0.95, true));
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OneCycleConfig {
    /// The highest rate.
    pub max_lr: f64,
    /// The number of steps in the cycle (PyTorch's `total_steps`, or `epochs *
    /// steps_per_epoch`); stepping past it is an `Err`.
    pub total_steps: usize,
    /// The fraction of the cycle spent raising the rate (default 0.3).
    pub pct_start: f64,
    /// Cosine (the default) or linear annealing.
    pub anneal_strategy: AnnealStrategy,
    /// Whether the momentum (SGD's `momentum`, Adam's `betas.0`) moves inversely to the rate,
    /// between `base_momentum` and `max_momentum` (default true).
    pub cycle_momentum: bool,
    /// The momentum at the highest rate (default 0.85).
    pub base_momentum: f64,
    /// The momentum at the lowest rates (default 0.95).
    pub max_momentum: f64,
    /// The initial rate is `max_lr / div_factor` (default 25).
    pub div_factor: f64,
    /// The final rate is the initial one over `final_div_factor` (default 1e4).
    pub final_div_factor: f64,
    /// A third phase: up, back down to the initial rate symmetrically, then down to the final
    /// rate (fast.ai's form is the default two phases).
    pub three_phase: bool,
}

impl OneCycleConfig {
    /// PyTorch's defaults for a cycle of `total_steps` peaking at `max_lr`.
    ///
    /// ```
    /// use tensor_core::optim::lr_scheduler::{AnnealStrategy, OneCycleConfig};
    /// let c = OneCycleConfig::new(0.1, 100);
    /// assert_eq!((c.anneal_strategy, c.three_phase), (AnnealStrategy::Cos, false));
    /// ```
    pub fn new(max_lr: f64, total_steps: usize) -> OneCycleConfig {
        OneCycleConfig {
            max_lr,
            total_steps,
            pct_start: 0.3,
            anneal_strategy: AnnealStrategy::Cos,
            cycle_momentum: true,
            base_momentum: 0.85,
            max_momentum: 0.95,
            div_factor: 25.0,
            final_div_factor: 1e4,
            three_phase: false,
        }
    }
}

/// One phase: it ends at step `end_step` (a float, as PyTorch computes it), going from one
/// (rate, momentum) to another.
#[derive(Clone, Copy, Debug)]
struct Phase {
    end_step: f64,
    lr: (f64, f64),
    momentum: (f64, f64),
}

/// The 1cycle learning-rate policy (PyTorch's `OneCycleLR`): from `max_lr / div_factor` up
/// to `max_lr` over the first `pct_start` of `total_steps`, then down to
/// `initial / final_div_factor`; with `cycle_momentum`, the optimizer's momentum (SGD's
/// `momentum`, Adam's and AdamW's `betas.0`) goes from `max_momentum` down to
/// `base_momentum` and back. Call `step()` after every batch.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::optim::lr_scheduler::{LrScheduler, OneCycleLR};
/// use tensor_core::optim::{Adam, Optimizer};
/// let opt = Adam::new(vec![], 1e-3)?;
/// let mut sched = OneCycleLR::new(&opt, 1.0, 10)?;
/// assert!((opt.lr() - 0.04).abs() < 1e-15); // 1.0 / 25
/// sched.step()?;
/// sched.step()?; // step 2 = 0.3 * 10 - 1: the peak
/// assert_eq!(opt.lr(), 1.0);
/// assert_eq!(opt.config().betas.0, 0.85);
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub struct OneCycleLR {
    core: SchedulerCore,
    total_steps: i64,
    phases: Vec<Phase>,
    anneal: AnnealStrategy,
    /// The optimizer's momentum or beta1, with `cycle_momentum`.
    momentum: Option<Hyperparameter>,
}

impl OneCycleLR {
    /// A one-cycle schedule with PyTorch's defaults (see [`OneCycleConfig::new`]).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::optim::lr_scheduler::OneCycleLR;
    /// let opt = tensor_core::optim::Sgd::new(vec![], 0.1)?; // no momentum to cycle
    /// let err = OneCycleLR::new(&opt, 1.0, 10).err().unwrap();
    /// assert!(err.to_string().contains("momentum"), "{err}");
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn new(opt: &(impl Optimizer + ?Sized), max_lr: f64, total_steps: usize) -> Result<OneCycleLR> {
        OneCycleLR::with_config(opt, OneCycleConfig::new(max_lr, total_steps))
    }

    /// A one-cycle schedule with every setting given: `total_steps` at least 1, `pct_start`
    /// in `[0, 1]`, the rates and momenta finite and at least 0, the factors above 0. With
    /// `cycle_momentum`, the optimizer must have a momentum it uses (SGD built with a non-zero
    /// momentum, or Adam/AdamW). Sets the rate (and momentum) of step 0.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::optim::lr_scheduler::{OneCycleConfig, OneCycleLR};
    /// use tensor_core::optim::{Optimizer, Sgd};
    /// let opt = Sgd::new(vec![], 0.1)?;
    /// let config = OneCycleConfig { cycle_momentum: false, ..OneCycleConfig::new(1.0, 10) };
    /// OneCycleLR::with_config(&opt, config)?;
    /// assert!((opt.lr() - 0.04).abs() < 1e-15);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn with_config(opt: &(impl Optimizer + ?Sized), c: OneCycleConfig) -> Result<OneCycleLR> {
        check(&c)?;
        let initial_lr = c.max_lr / c.div_factor;
        let momentum = if c.cycle_momentum { Some(momentum_of(opt)?) } else { None };
        if let Some(m) = &momentum {
            m.set(c.max_momentum)?;
        }
        let core = SchedulerCore::new(lr_of(opt)?, initial_lr);
        let phases = phases(&c, initial_lr);
        let mut sched = OneCycleLR { core, total_steps: c.total_steps as i64, phases, anneal: c.anneal_strategy, momentum };
        sched.step()?;
        Ok(sched)
    }

    /// The rate and momentum of `step` (PyTorch's `get_lr`, term for term).
    fn values_at(&self, step: i64) -> Result<(f64, f64)> {
        if step > self.total_steps {
            let why = format!("stepped {step} times; the cycle has {} steps (total_steps)", self.total_steps);
            return Err(Error::invalid("OneCycleLR::step", "total_steps", why));
        }
        let step_num = step as f64;
        let mut start_step = 0.0;
        for (i, phase) in self.phases.iter().enumerate() {
            if step_num <= phase.end_step || i == self.phases.len() - 1 {
                let pct = (step_num - start_step) / (phase.end_step - start_step);
                let lr = self.anneal.anneal(phase.lr.0, phase.lr.1, pct);
                return Ok((lr, self.anneal.anneal(phase.momentum.0, phase.momentum.1, pct)));
            }
            start_step = phase.end_step;
        }
        unreachable!("the last phase always matches")
    }

    /// The rate of `step`; sets the momentum as PyTorch's `get_lr` does.
    fn lr_at(&self, step: i64) -> Result<f64> {
        let (lr, momentum) = self.values_at(step)?;
        if let Some(m) = &self.momentum {
            m.set(momentum)?;
        }
        Ok(lr)
    }

    /// The momentum of the loaded step (PyTorch restores it from the optimizer's state dict).
    fn after_load(&self) -> Result<()> {
        match &self.momentum {
            Some(m) => m.set(self.values_at(self.core.last_epoch)?.1),
            None => Ok(()),
        }
    }
}

impl_lr_scheduler!(OneCycleLR);

fn check(c: &OneCycleConfig) -> Result<()> {
    const OP: &str = "OneCycleLR";
    if c.total_steps == 0 {
        return Err(Error::invalid(OP, "total_steps", "must be at least 1, found 0"));
    }
    if !(0.0..=1.0).contains(&c.pct_start) {
        return Err(Error::invalid(OP, "pct_start", format!("must be in [0, 1], found {}", c.pct_start)));
    }
    for (arg, v) in [("max_lr", c.max_lr), ("base_momentum", c.base_momentum), ("max_momentum", c.max_momentum)] {
        crate::optim::check_non_negative(OP, arg, v)?;
    }
    for (arg, v) in [("div_factor", c.div_factor), ("final_div_factor", c.final_div_factor)] {
        if !(v.is_finite() && v > 0.0) {
            return Err(Error::invalid(OP, arg, format!("must be a finite value > 0, found {v}")));
        }
    }
    Ok(())
}

/// The optimizer's momentum: Adam's `betas.0`, else SGD's `momentum`.
fn momentum_of(opt: &(impl Optimizer + ?Sized)) -> Result<Hyperparameter> {
    opt.hyperparameter("betas.0")
        .or_else(|_| opt.hyperparameter("momentum"))
        .cloned()
        .map_err(|_| Error::invalid("OneCycleLR", "cycle_momentum", "the optimizer has no momentum or beta1 to cycle; set cycle_momentum to false"))
}

/// PyTorch's `_schedule_phases`.
fn phases(c: &OneCycleConfig, initial_lr: f64) -> Vec<Phase> {
    let total = c.total_steps as f64;
    let min_lr = initial_lr / c.final_div_factor;
    let (max_lr, base_m, max_m) = (c.max_lr, c.base_momentum, c.max_momentum);
    let up = Phase { end_step: c.pct_start * total - 1.0, lr: (initial_lr, max_lr), momentum: (max_m, base_m) };
    if c.three_phase {
        vec![
            up,
            Phase { end_step: 2.0 * c.pct_start * total - 2.0, lr: (max_lr, initial_lr), momentum: (base_m, max_m) },
            Phase { end_step: total - 1.0, lr: (initial_lr, min_lr), momentum: (max_m, max_m) },
        ]
    } else {
        vec![up, Phase { end_step: total - 1.0, lr: (max_lr, min_lr), momentum: (base_m, max_m) }]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optim::Adam;

    #[test]
    fn one_cycle_with_pytorchs_defaults_gives_its_rates_and_betas() -> Result<()> {
        let opt = Adam::new(vec![], 1e-3)?;
        let mut sched = OneCycleLR::new(&opt, 1.0, 10)?;
        let mut got = vec![(opt.lr(), opt.config().betas.0)];
        for _ in 0..10 {
            sched.step()?;
            got.push((opt.lr(), opt.config().betas.0));
        }
        // PyTorch's OneCycleLR(max_lr=1.0, total_steps=10): initial 0.04, peak at step
        // 0.3 * 10 - 1 = 2, final 0.04 / 1e4 at step 9 (its step 10 is allowed and goes on).
        let lrs = [
            0.040000000000000036,
            0.52,
            1.0,
            0.9504846320134737,
            0.8117456539497631,
            0.6112620219362893,
            0.38874197806371075,
            0.18825834605023697,
            0.049519367986526286,
            4e-06,
            0.04951936798652623,
        ];
        let betas = [
            0.95,
            0.8999999999999999,
            0.85,
            0.854951556604879,
            0.8688255099070633,
            0.8888739533021842,
            0.9111260466978157,
            0.9311744900929366,
            0.945048443395121,
            0.95,
            0.945048443395121,
        ];
        for (t, ((lr, beta), (want_lr, want_beta))) in got.iter().zip(lrs.iter().zip(betas)).enumerate() {
            assert!((lr - want_lr).abs() < 1e-15 && (beta - want_beta).abs() < 1e-15, "step {t}: ({lr}, {beta})");
        }
        let err = sched.step().unwrap_err();
        assert!(err.to_string().contains("stepped 11 times; the cycle has 10 steps"), "{err}");
        assert_eq!((sched.last_epoch(), opt.lr()), (10, got[10].0)); // the Err changed nothing
        Ok(())
    }

    #[test]
    fn a_loaded_state_dict_restores_the_rate_and_the_momentum() -> Result<()> {
        let opt = Adam::new(vec![], 1e-3)?;
        let mut sched = OneCycleLR::new(&opt, 1.0, 10)?;
        (0..4).try_for_each(|_| sched.step())?;
        let mut opt2 = Adam::new(vec![], 1e-3)?;
        let mut resumed = OneCycleLR::new(&opt2, 1.0, 10)?;
        opt2.set_lr(0.5)?;
        resumed.load_state_dict(&sched.state_dict())?;
        assert_eq!((opt2.lr(), opt2.config().betas.0), (opt.lr(), opt.config().betas.0));
        sched.step()?;
        resumed.step()?;
        assert_eq!(opt2.lr(), opt.lr());
        Ok(())
    }
}
