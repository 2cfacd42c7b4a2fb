//! AdamW: Adam with decoupled weight decay (Loshchilov & Hutter; PyTorch's
//! `torch.optim.AdamW`).

use super::{Adam, AdamConfig, Hyperparameter, Optimizer};
use crate::autograd::NoGradGuard;
use crate::error::Result;
use crate::tensor::Tensor;

/// AdamW with PyTorch's update rule: per parameter `p` with a gradient, first
/// `p *= 1 - lr * weight_decay` (the decay is applied to the weights, not added to the
/// gradient), then Adam's step with the gradient as it is:
///
/// ```text
/// p *= 1 - lr * weight_decay
/// m = beta1 * m + (1 - beta1) * grad
/// v = beta2 * v + (1 - beta2) * grad^2
/// p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
/// ```
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::optim::{AdamConfig, AdamW, Optimizer};
/// let p = Tensor::scalar(1.0f64).requires_grad_(true)?;
/// let opt = AdamW::with_config(vec![p.clone()], AdamConfig { lr: 0.1, weight_decay: 0.5, ..Default::default() })?;
/// (&p * 0.5).backward()?; // grad = 0.5
/// opt.step()?;
/// // decayed to 1 * (1 - 0.05), then Adam's first step of about lr
/// assert!((p.item::<f64>()? - (0.95 - 0.1 * 0.5 / (0.5 + 1e-8))).abs() < 1e-12);
/// # Ok::<(), tensor_core::Error>(())
/// ```
///
/// An `AdamW` can be an argument of a `#[graph_fn]`, as [`Adam`] can (the `GraphArg` is
/// derived).
#[derive(crate::GraphArg)]
pub struct AdamW {
    /// Adam without weight decay: the moments, step counts and update.
    adam: Adam,
    /// The decoupled decay rate.
    weight_decay: Hyperparameter,
}

impl AdamW {
    /// AdamW with learning rate `lr` and PyTorch's other defaults (betas (0.9, 0.999),
    /// eps 1e-8, weight decay 0.01).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::optim::AdamW;
    /// let p = Tensor::zeros(&[2], DType::F32).requires_grad_(true)?;
    /// assert_eq!(AdamW::new(vec![p], 1e-3)?.config().weight_decay, 0.01);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn new(params: Vec<Tensor>, lr: f64) -> Result<AdamW> {
        AdamW::with_config(params, AdamConfig { lr, weight_decay: 0.01, ..Default::default() })
    }

    /// AdamW with every hyperparameter given (checked as [`Adam::with_config`] checks them);
    /// `weight_decay` is the decoupled decay rate.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::optim::{AdamConfig, AdamW};
    /// let p = Tensor::zeros(&[2], DType::F32).requires_grad_(true)?;
    /// assert!(AdamW::with_config(vec![p], AdamConfig { weight_decay: -1.0, ..Default::default() }).is_err());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn with_config(params: Vec<Tensor>, config: AdamConfig) -> Result<AdamW> {
        let weight_decay = Hyperparameter::optional("AdamW", "weight_decay", config.weight_decay)?;
        let adam = Adam::named("AdamW", params, AdamConfig { weight_decay: 0.0, ..config })?;
        Ok(AdamW { adam, weight_decay })
    }

    /// The hyperparameters' current values (`weight_decay` is the decoupled rate).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let opt = tensor_core::optim::AdamW::new(vec![], 0.1)?;
    /// assert_eq!((opt.config().lr, opt.config().weight_decay), (0.1, 0.01));
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn config(&self) -> AdamConfig {
        AdamConfig { weight_decay: self.weight_decay.get(), ..self.adam.config() }
    }

    /// Changes the learning rate (for a schedule; see also [`lr_scheduler`](super::lr_scheduler)).
    /// The rate is a tensor the step reads, so a step traced into a graph uses the new rate
    /// at its next call, without retracing, with the same bits as an eager step; the
    /// decoupled decay `1 - lr * weight_decay` follows it.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::optim::Optimizer;
    /// let mut opt = tensor_core::optim::AdamW::new(vec![], 0.1)?;
    /// opt.set_lr(0.05)?;
    /// assert_eq!(opt.lr(), 0.05);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn set_lr(&mut self, lr: f64) -> Result<()> {
        self.adam.set_lr(lr)
    }

    /// The number of steps taken by parameter `index`, as an f64 scalar tensor.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::optim::{AdamW, Optimizer};
    /// let p = Tensor::scalar(1.0f32).requires_grad_(true)?;
    /// let opt = AdamW::new(vec![p.clone()], 0.1)?;
    /// (&p * 2.0).backward()?;
    /// opt.step()?;
    /// assert_eq!(opt.step_count(0).unwrap().item::<f64>()?, 1.0);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn step_count(&self, index: usize) -> Option<&Tensor> {
        self.adam.step_count(index)
    }

    /// The optimizer's state under PyTorch's names for `torch.optim.AdamW`:
    /// `state.{i}.step`, `state.{i}.exp_avg` and `state.{i}.exp_avg_sq` per parameter `i`
    /// (detached copies; see [`Adam::state_dict`]). The rates are the schedule's to restore.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::optim::{AdamW, Optimizer};
    /// let p = Tensor::scalar(1.0f32).requires_grad_(true)?;
    /// let opt = AdamW::new(vec![p.clone()], 0.1)?;
    /// (&p * 2.0).backward()?;
    /// opt.step()?;
    /// let names: Vec<String> = opt.state_dict().into_iter().map(|(n, _)| n).collect();
    /// assert_eq!(names, ["state.0.step", "state.0.exp_avg", "state.0.exp_avg_sq"]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn state_dict(&self) -> Vec<(String, Tensor)> {
        self.adam.state_dict()
    }

    /// Loads a [`state_dict`](Self::state_dict) (checked first, as [`Adam::load_state_dict`]
    /// checks it: an `Err` names the entry and changes nothing), so training resumes as if
    /// it had never stopped.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::optim::{AdamW, Optimizer};
    /// let p = Tensor::scalar(1.0f32).requires_grad_(true)?;
    /// let opt = AdamW::new(vec![p.clone()], 0.1)?;
    /// (&p * 2.0).backward()?;
    /// opt.step()?;
    /// let mut resumed = AdamW::new(vec![Tensor::scalar(0.0f32).requires_grad_(true)?], 0.1)?;
    /// resumed.load_state_dict(&opt.state_dict())?;
    /// assert_eq!(resumed.step_count(0).unwrap().item::<f64>()?, 1.0);
    /// assert!(resumed.load_state_dict(&[]).is_err());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn load_state_dict(&mut self, named: &[(String, Tensor)]) -> Result<()> {
        self.adam.load_state_dict(named)
    }
}

impl Optimizer for AdamW {
    fn step(&self) -> Result<()> {
        if self.weight_decay.is_used() {
            let _no_grad = NoGradGuard::new();
            // `1 - lr * weight_decay` in f64, then in each parameter's dtype.
            let decay = self.adam.hyper.lr.tensor().mul(self.weight_decay.tensor())?.neg()?.add(1.0)?;
            for p in self.adam.parameters().iter().filter(|p| p.grad().is_some()) {
                p.mul_(&decay.cast(p.dtype())?)?;
            }
        }
        self.adam.step()
    }

    fn parameters(&self) -> &[Tensor] {
        self.adam.parameters()
    }

    /// Adam's `lr` and `betas`, then the decoupled `weight_decay`.
    fn hyperparameters(&self) -> Vec<&Hyperparameter> {
        let mut all = self.adam.hyperparameters();
        all.truncate(3);
        all.push(&self.weight_decay);
        all
    }
}
