//! Adam with bias correction and L2 weight decay (PyTorch's `torch.optim.Adam`).

use super::{check_non_negative, check_params, with_weight_decay, Hyperparameter, Optimizer};
use crate::autograd::NoGradGuard;
use crate::error::Result;
use crate::tensor::Tensor;

/// The hyperparameters of [`Adam`]; the defaults are PyTorch's.
///
/// ```
/// use tensor_core::optim::AdamConfig;
/// let c = AdamConfig { lr: 0.01, ..Default::default() };
/// assert_eq!((c.betas, c.eps, c.weight_decay), ((0.9, 0.999), 1e-8, 0.0));
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamConfig {
    /// The learning rate (default 1e-3).
    pub lr: f64,
    /// The decay rates of the first and second moment estimates (default (0.9, 0.999)).
    pub betas: (f64, f64),
    /// Added to the denominator for stability (default 1e-8).
    pub eps: f64,
    /// L2 penalty: `weight_decay * p` is added to the gradient, as `torch.optim.Adam` does
    /// (not AdamW's decoupled decay). Default 0.
    pub weight_decay: f64,
}

impl Default for AdamConfig {
    fn default() -> Self {
        AdamConfig { lr: 1e-3, betas: (0.9, 0.999), eps: 1e-8, weight_decay: 0.0 }
    }
}

/// Adam with PyTorch's update rule, per parameter `p` with a gradient, at its step `t`
/// (counted per parameter, from 1):
///
/// ```text
/// g = grad + weight_decay * p
/// m = beta1 * m + (1 - beta1) * g
/// v = beta2 * v + (1 - beta2) * g^2
/// p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
/// ```
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::optim::{Adam, Optimizer};
/// let p = Tensor::scalar(1.0f64).requires_grad_(true)?;
/// let mut opt = Adam::new(vec![p.clone()], 0.1)?;
/// (&p * 0.5).backward()?; // grad = 0.5
/// opt.step()?;
/// // m = 0.05, v = 0.00025; corrected: 0.5 and 0.25, so p = 1 - 0.1 * 0.5 / (0.5 + 1e-8)
/// assert!((p.item::<f64>()? - (1.0 - 0.05 / (0.5 + 1e-8))).abs() < 1e-12);
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub struct Adam {
    params: Vec<Tensor>,
    pub(super) hyper: AdamHyperparameters,
    /// Not scheduled: a Rust value, keyed by value when the optimizer is an argument.
    eps: f64,
    state: Vec<AdamState>,
}

/// The hyperparameters a schedule may change, read by the step as tensors.
pub(super) struct AdamHyperparameters {
    pub(super) lr: Hyperparameter,
    beta1: Hyperparameter,
    beta2: Hyperparameter,
    /// The L2 penalty (AdamW keeps its decoupled decay itself and builds this at 0).
    weight_decay: Hyperparameter,
}

/// Adam's state for one parameter, all in tensors made when the optimizer is built.
///
/// The step count is a tensor, not a Rust counter, and the bias corrections are computed
/// from it with tensor ops. A Rust counter would be read once, while tracing, and the
/// corrections `1 - beta^t` baked into the graph as constants: every later call of a traced
/// training step would reuse the first call's `t`. As a tensor, `t` is state the graph reads
/// and increments on each call, so a traced step matches the eager one on every call.
struct AdamState {
    /// Steps taken with a gradient, as an f64 scalar (exact up to 2^53 steps).
    step: Tensor,
    /// The first moment estimate `m`.
    exp_avg: Tensor,
    /// The second moment estimate `v`.
    exp_avg_sq: Tensor,
}

impl Adam {
    /// Adam with learning rate `lr` and PyTorch's other defaults (betas (0.9, 0.999),
    /// eps 1e-8, no weight decay).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::optim::Adam;
    /// let p = Tensor::zeros(&[2], DType::F32).requires_grad_(true)?;
    /// assert_eq!(Adam::new(vec![p], 0.01)?.config().betas, (0.9, 0.999));
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn new(params: Vec<Tensor>, lr: f64) -> Result<Adam> {
        Adam::with_config(params, AdamConfig { lr, ..Default::default() })
    }

    /// Adam with every hyperparameter given: `lr`, `eps` and `weight_decay` finite and at
    /// least 0, each beta in `[0, 1)`, and the parameters distinct float tensors.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::optim::{Adam, AdamConfig};
    /// let p = Tensor::zeros(&[2], DType::F32).requires_grad_(true)?;
    /// let ok = AdamConfig { lr: 0.01, weight_decay: 1e-4, ..Default::default() };
    /// assert!(Adam::with_config(vec![p.clone()], ok).is_ok());
    /// let bad = AdamConfig { betas: (0.9, 1.0), ..Default::default() };
    /// assert!(Adam::with_config(vec![p], bad).is_err());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn with_config(params: Vec<Tensor>, config: AdamConfig) -> Result<Adam> {
        Adam::named("Adam", params, config)
    }

    /// `with_config` with `op` naming the optimizer in errors (AdamW builds one).
    pub(super) fn named(op: &'static str, params: Vec<Tensor>, config: AdamConfig) -> Result<Adam> {
        check_params(op, &params)?;
        check_non_negative(op, "eps", config.eps)?;
        let hyper = AdamHyperparameters {
            lr: Hyperparameter::new(op, "lr", config.lr)?,
            beta1: Hyperparameter::beta(op, "betas.0", config.betas.0)?,
            beta2: Hyperparameter::beta(op, "betas.1", config.betas.1)?,
            weight_decay: Hyperparameter::optional(op, "weight_decay", config.weight_decay)?,
        };
        // The state lives where its parameter does, the step count too (PyTorch's
        // `capturable` Adam): a step on the GPU then reads nothing from the host.
        let on = |p: &Tensor, t: Tensor| t.to_device(p.device());
        let state = params
            .iter()
            .map(|p| Ok(AdamState { step: on(p, Tensor::scalar(0.0f64))?, exp_avg: on(p, p.zeros_like())?, exp_avg_sq: on(p, p.zeros_like())? }))
            .collect::<Result<Vec<_>>>()?;
        Ok(Adam { params, hyper, eps: config.eps, state })
    }

    /// The hyperparameters' current values.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let opt = tensor_core::optim::Adam::new(vec![], 0.1)?;
    /// assert_eq!(opt.config().eps, 1e-8);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn config(&self) -> AdamConfig {
        let h = &self.hyper;
        AdamConfig { lr: h.lr.get(), betas: (h.beta1.get(), h.beta2.get()), eps: self.eps, weight_decay: h.weight_decay.get() }
    }

    /// Changes the learning rate (for a schedule; see also [`lr_scheduler`](super::lr_scheduler)).
    /// The rate is a tensor the step reads, so a step traced into a graph uses the new rate
    /// at its next call, without retracing, with the same bits as an eager step. A value
    /// that is not finite or is below 0 is an `Err` and changes nothing.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::optim::Optimizer;
    /// let mut opt = tensor_core::optim::Adam::new(vec![], 0.1)?;
    /// opt.set_lr(0.05)?;
    /// assert_eq!(opt.lr(), 0.05);
    /// assert!(opt.set_lr(f64::NAN).is_err());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn set_lr(&mut self, lr: f64) -> Result<()> {
        self.hyper.lr.set(lr)
    }

    /// The number of steps taken by parameter `index` (those with a gradient), as an f64
    /// scalar tensor — a live handle to the optimizer's state.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::optim::{Adam, Optimizer};
    /// let p = Tensor::scalar(1.0f32).requires_grad_(true)?;
    /// let mut opt = Adam::new(vec![p.clone()], 0.1)?;
    /// opt.step()?; // no grad yet: skipped
    /// (&p * 2.0).backward()?;
    /// opt.step()?;
    /// assert_eq!(opt.step_count(0).unwrap().item::<f64>()?, 1.0);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn step_count(&self, index: usize) -> Option<&Tensor> {
        self.state.get(index).map(|s| &s.step)
    }
}

impl Adam {
    /// The optimizer's state as named tensors, PyTorch's names for parameter `i` (in the
    /// order the parameters were given): `state.{i}.step`, `state.{i}.exp_avg`,
    /// `state.{i}.exp_avg_sq`. Snapshots (later steps do not change them). The
    /// hyperparameters are not part of it.
    ///
    /// Saved beside the model's state dict, it makes a checkpoint from which training
    /// resumes exactly as if it had never stopped:
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::optim::{Adam, Optimizer};
    /// let step = |w: &Tensor, opt: &Adam| -> Result<f32> {
    ///     opt.zero_grad()?;
    ///     let loss = (w * w).sum()?;
    ///     loss.backward()?;
    ///     opt.step()?;
    ///     loss.item::<f32>()
    /// };
    /// let w = Tensor::from_vec(vec![1.0f32, -2.0], &[2])?.requires_grad_(true)?;
    /// let opt = Adam::new(vec![w.clone()], 0.1)?;
    /// step(&w, &opt)?;
    /// let (saved_w, saved_opt) = (w.detach(), opt.state_dict());
    /// let expected = step(&w, &opt)?;
    ///
    /// // A new run, resumed from the saved state:
    /// let w2 = saved_w.requires_grad_(true)?;
    /// let mut opt2 = Adam::new(vec![w2.clone()], 0.1)?;
    /// opt2.load_state_dict(&saved_opt)?;
    /// assert_eq!(step(&w2, &opt2)?.to_bits(), expected.to_bits());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn state_dict(&self) -> Vec<(String, Tensor)> {
        self.named_state().into_iter().map(|(n, t)| (n, t.detach())).collect()
    }

    /// Loads a state dict made by [`state_dict`](Self::state_dict) of an `Adam` over
    /// parameters of the same dtypes and shapes: every entry is checked first (a missing or
    /// unexpected name, another dtype or shape is an `Err` naming it, and nothing changes),
    /// then the state tensors take the values in place.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::optim::Adam;
    /// let mut opt = Adam::new(vec![Tensor::zeros(&[3], DType::F32).requires_grad_(true)?], 0.1)?;
    /// let other = Adam::new(vec![Tensor::zeros(&[4], DType::F32).requires_grad_(true)?], 0.1)?;
    /// let err = opt.load_state_dict(&other.state_dict()).unwrap_err();
    /// assert!(err.to_string().contains("state.0.exp_avg"), "{err}");
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn load_state_dict(&mut self, named: &[(String, Tensor)]) -> Result<()> {
        crate::io::assign_named("Adam::load_state_dict", &self.named_state(), named)
    }

    /// The state tensors with their names (live handles).
    fn named_state(&self) -> Vec<(String, Tensor)> {
        let mut named = Vec::with_capacity(3 * self.state.len());
        for (i, s) in self.state.iter().enumerate() {
            named.push((format!("state.{i}.step"), s.step.clone()));
            named.push((format!("state.{i}.exp_avg"), s.exp_avg.clone()));
            named.push((format!("state.{i}.exp_avg_sq"), s.exp_avg_sq.clone()));
        }
        named
    }
}

impl Optimizer for Adam {
    fn step(&self) -> Result<()> {
        // The update must not be recorded for backward (and an in-place op on a leaf that
        // requires grad is only allowed with grad mode off).
        let _no_grad = NoGradGuard::new();
        for (p, s) in self.params.iter().zip(&self.state) {
            if let Some(grad) = p.grad() {
                s.update(p, grad, &self.hyper, self.eps)?;
            }
        }
        Ok(())
    }

    fn parameters(&self) -> &[Tensor] {
        &self.params
    }

    fn hyperparameters(&self) -> Vec<&Hyperparameter> {
        let h = &self.hyper;
        vec![&h.lr, &h.beta1, &h.beta2, &h.weight_decay]
    }
}

impl AdamState {
    /// One Adam step of `p`, with tensor ops only (so it traces).
    ///
    /// The hyperparameters are f64 tensors (see [`Hyperparameter`]); each is used as the
    /// Rust `f64` it replaces was: in the parameter's dtype where that was a scalar operand
    /// (`beta1`, `1 - beta1`, ...), in f64 in the bias corrections and the step size.
    fn update(&self, p: &Tensor, grad: Tensor, h: &AdamHyperparameters, eps: f64) -> Result<()> {
        let dtype = p.dtype();
        self.step.add_(1.0)?;
        let g = with_weight_decay(grad, p, &h.weight_decay)?;
        self.exp_avg.mul_(&h.beta1.in_dtype(dtype)?)?;
        self.exp_avg.add_(&g.mul(&h.beta1.one_minus(dtype)?)?)?;
        self.exp_avg_sq.mul_(&h.beta2.in_dtype(dtype)?)?;
        self.exp_avg_sq.add_(&g.mul(&g)?.mul(&h.beta2.one_minus(dtype)?)?)?;
        // The bias corrections, in f64 from the step tensor (see `AdamState`), then in the
        // parameter's dtype as PyTorch applies its Python-float corrections.
        let correction1 = self.bias_correction(&h.beta1)?;
        let correction2 = self.bias_correction(&h.beta2)?;
        let step_size = h.lr.tensor().div(&correction1)?.cast(dtype)?;
        let denom = self.exp_avg_sq.sqrt()?.div(&correction2.sqrt()?.cast(dtype)?)?.add(eps)?;
        p.sub_(&self.exp_avg.div(&denom)?.mul(&step_size)?)
    }

    /// `1 - beta^t` as an f64 scalar tensor.
    fn bias_correction(&self, beta: &Hyperparameter) -> Result<Tensor> {
        beta.tensor().pow(&self.step)?.neg()?.add(1.0)
    }
}

/// An `Adam` can be an argument of a `#[graph_fn]`: its hyperparameters, parameters and
/// state are tensor leaves (read, and the state updated, by the graph in place; a new
/// learning rate does not retrace); `eps` and whether it has weight decay are keyed.
impl crate::function::GraphArg for Adam {
    fn flatten(&self, f: &mut crate::function::Flattener) {
        f.f64(self.eps);
        f.bool(self.hyper.weight_decay.is_used());
        self.hyperparameters().into_iter().for_each(|h| h.flatten(f));
        self.params.flatten(f);
        for s in &self.state {
            s.step.flatten(f);
            s.exp_avg.flatten(f);
            s.exp_avg_sq.flatten(f);
        }
    }
}
