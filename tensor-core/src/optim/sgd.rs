//! Stochastic gradient descent with momentum and weight decay (PyTorch's `torch.optim.SGD`).

use super::{check_params, with_weight_decay, Hyperparameter, Optimizer};
use crate::autograd::NoGradGuard;
use crate::error::Result;
use crate::tensor::Tensor;

/// The hyperparameters of [`Sgd`]; the defaults are PyTorch's.
///
/// ```
/// use tensor_core::optim::SgdConfig;
/// let c = SgdConfig { lr: 0.1, momentum: 0.9, ..Default::default() };
/// assert_eq!(c.weight_decay, 0.0);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SgdConfig {
    /// The learning rate (default 1e-3).
    pub lr: f64,
    /// The momentum factor; 0 (the default) is plain SGD.
    pub momentum: f64,
    /// L2 penalty: `weight_decay * p` is added to the gradient (default 0).
    pub weight_decay: f64,
}

impl Default for SgdConfig {
    fn default() -> Self {
        SgdConfig { lr: 1e-3, momentum: 0.0, weight_decay: 0.0 }
    }
}

/// SGD with PyTorch's update rule, per parameter `p` with a gradient:
///
/// ```text
/// g = grad + weight_decay * p
/// buf = momentum * buf + g        (buf = g on the first step)
/// p -= lr * buf                   (p -= lr * g without momentum)
/// ```
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::optim::{Optimizer, Sgd, SgdConfig};
/// let p = Tensor::scalar(1.0f64).requires_grad_(true)?;
/// let mut opt = Sgd::with_config(vec![p.clone()], SgdConfig { lr: 0.1, momentum: 0.9, ..Default::default() })?;
/// for _ in 0..2 {
///     opt.zero_grad()?;
///     (&p * 0.5).backward()?; // grad = 0.5
///     opt.step()?;
/// }
/// // buf: 0.5, then 0.9 * 0.5 + 0.5 = 0.95; p: 1 - 0.05 - 0.095
/// assert!((p.item::<f64>()? - 0.855).abs() < 1e-12);
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub struct Sgd {
    params: Vec<Tensor>,
    lr: Hyperparameter,
    momentum: Hyperparameter,
    weight_decay: Hyperparameter,
    /// One momentum buffer per parameter (none without momentum). They start at zero, made
    /// when the optimizer is built rather than on the first step (so a first step inside a
    /// traced function finds them): `momentum * 0 + g` is exactly PyTorch's `buf = g`.
    buffers: Vec<Tensor>,
}

impl Sgd {
    /// Plain SGD (no momentum, no weight decay) with learning rate `lr`.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::optim::{Optimizer, Sgd};
    /// let p = Tensor::from_vec(vec![1.0f32, 2.0], &[2])?.requires_grad_(true)?;
    /// let mut opt = Sgd::new(vec![p.clone()], 0.5)?;
    /// p.sum()?.backward()?; // grad = [1, 1]
    /// opt.step()?;
    /// assert_eq!(p.to_vec::<f32>()?, vec![0.5, 1.5]);
    /// assert!(Sgd::new(vec![p.clone()], -1.0).is_err());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn new(params: Vec<Tensor>, lr: f64) -> Result<Sgd> {
        Sgd::with_config(params, SgdConfig { lr, ..Default::default() })
    }

    /// SGD with every hyperparameter given. Each must be finite and at least 0, and the
    /// parameters distinct float tensors.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::optim::{Sgd, SgdConfig};
    /// let p = Tensor::zeros(&[3], DType::F32).requires_grad_(true)?;
    /// let config = SgdConfig { lr: 0.01, momentum: 0.9, weight_decay: 5e-4 };
    /// assert_eq!(Sgd::with_config(vec![p.clone()], config)?.config(), config);
    /// assert!(Sgd::with_config(vec![p.clone(), p], config).is_err()); // p twice
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn with_config(params: Vec<Tensor>, config: SgdConfig) -> Result<Sgd> {
        check_params("Sgd", &params)?;
        let lr = Hyperparameter::new("Sgd", "lr", config.lr)?;
        let momentum = Hyperparameter::optional("Sgd", "momentum", config.momentum)?;
        let weight_decay = Hyperparameter::optional("Sgd", "weight_decay", config.weight_decay)?;
        // Each momentum buffer lives where its parameter does.
        let buffers = match momentum.is_used() {
            true => params.iter().map(|p| p.zeros_like().to_device(p.device())).collect::<Result<_>>()?,
            false => Vec::new(),
        };
        Ok(Sgd { params, lr, momentum, weight_decay, buffers })
    }

    /// The hyperparameters' current values.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let opt = tensor_core::optim::Sgd::new(vec![], 0.1)?;
    /// assert_eq!(opt.config().lr, 0.1);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn config(&self) -> SgdConfig {
        SgdConfig { lr: self.lr.get(), momentum: self.momentum.get(), weight_decay: self.weight_decay.get() }
    }

    /// Changes the learning rate (for a schedule; see also [`lr_scheduler`](super::lr_scheduler)).
    /// The rate is a tensor the step reads, so a step traced into a graph uses the new rate
    /// at its next call, without retracing, with the same bits as an eager step. A value
    /// that is not finite or is below 0 is an `Err` and changes nothing.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::optim::Optimizer;
    /// let mut opt = tensor_core::optim::Sgd::new(vec![], 0.1)?;
    /// opt.set_lr(0.01)?;
    /// assert_eq!(opt.lr(), 0.01);
    /// assert!(opt.set_lr(-1.0).is_err());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn set_lr(&mut self, lr: f64) -> Result<()> {
        self.lr.set(lr)
    }
}

impl Sgd {
    /// The optimizer's state as named tensors: with momentum, PyTorch's
    /// `state.{i}.momentum_buffer` for parameter `i`; without, none. Snapshots (later steps
    /// do not change them). The hyperparameters are not part of it.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::optim::{Optimizer, Sgd, SgdConfig};
    /// let w = Tensor::scalar(1.0f64).requires_grad_(true)?;
    /// let opt = Sgd::with_config(vec![w.clone()], SgdConfig { lr: 0.1, momentum: 0.9, ..Default::default() })?;
    /// (&w * 3.0).backward()?;
    /// opt.step()?;
    /// let state = opt.state_dict();
    /// assert_eq!(state[0].0, "state.0.momentum_buffer");
    /// assert_eq!(state[0].1.item::<f64>()?, 3.0);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn state_dict(&self) -> Vec<(String, Tensor)> {
        self.named_state().into_iter().map(|(n, t)| (n, t.detach())).collect()
    }

    /// Loads a state dict made by [`state_dict`](Self::state_dict) of an `Sgd` with the same
    /// momentum setting over parameters of the same dtypes and shapes: all checked first
    /// (an `Err` names the first mismatch, and nothing changes), then loaded in place.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::optim::{Sgd, SgdConfig};
    /// let config = SgdConfig { lr: 0.1, momentum: 0.9, ..Default::default() };
    /// let p = || Tensor::zeros(&[2], DType::F32).requires_grad_(true);
    /// let saved = Sgd::with_config(vec![p()?], config)?.state_dict();
    /// let mut opt = Sgd::with_config(vec![p()?], config)?;
    /// opt.load_state_dict(&saved)?;
    /// let mut plain = Sgd::new(vec![p()?], 0.1)?; // no momentum: no buffers to load
    /// assert!(plain.load_state_dict(&saved).is_err());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn load_state_dict(&mut self, named: &[(String, Tensor)]) -> Result<()> {
        crate::io::assign_named("Sgd::load_state_dict", &self.named_state(), named)
    }

    /// The momentum buffers with their names (live handles).
    fn named_state(&self) -> Vec<(String, Tensor)> {
        self.buffers.iter().enumerate().map(|(i, b)| (format!("state.{i}.momentum_buffer"), b.clone())).collect()
    }
}

impl Optimizer for Sgd {
    fn step(&self) -> Result<()> {
        // The update must not be recorded for backward (and an in-place op on a leaf that
        // requires grad is only allowed with grad mode off).
        let _no_grad = NoGradGuard::new();
        for (i, p) in self.params.iter().enumerate() {
            let Some(grad) = p.grad() else { continue };
            // The hyperparameters in the parameter's dtype, as Rust scalars would take it.
            let dtype = p.dtype();
            let g = with_weight_decay(grad, p, &self.weight_decay)?;
            let update = match self.buffers.get(i) {
                Some(buf) => {
                    buf.mul_(&self.momentum.in_dtype(dtype)?)?;
                    buf.add_(&g)?;
                    buf.clone()
                }
                None => g,
            };
            p.sub_(&update.mul(&self.lr.in_dtype(dtype)?)?)?;
        }
        Ok(())
    }

    fn parameters(&self) -> &[Tensor] {
        &self.params
    }

    fn hyperparameters(&self) -> Vec<&Hyperparameter> {
        vec![&self.lr, &self.momentum, &self.weight_decay]
    }
}

/// An `Sgd` can be an argument of a `#[graph_fn]`: its hyperparameters, parameters and
/// momentum buffers are tensor leaves (a new learning rate does not retrace); whether it
/// has weight decay is keyed (the step has a term for it or not).
impl crate::function::GraphArg for Sgd {
    fn flatten(&self, f: &mut crate::function::Flattener) {
        f.bool(self.weight_decay.is_used());
        self.hyperparameters().into_iter().for_each(|h| h.flatten(f));
        self.params.flatten(f);
        self.buffers.flatten(f);
    }
}
