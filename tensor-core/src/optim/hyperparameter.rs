//! A hyperparameter a schedule may change (the learning rate, a momentum, a beta, a weight
//! decay), held as a 0-d f64 tensor that a traced step reads like any captured state.

use crate::autograd::NoGradGuard;
use crate::error::{Error, Result};
use crate::tensor::Tensor;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// One hyperparameter of an optimizer, a live handle (clones share it), as TF's optimizers
/// keep `learning_rate` in a variable.
///
/// The value is a 0-d f64 tensor the update reads with tensor ops, so a step traced into a
/// `#[graph_fn]` reads the current value at every call: [`set`](Self::set) never retraces,
/// and the traced step uses the new value with the same bits as an eager step. The update
/// computes with it exactly as with the Rust `f64` it replaces (in f64, or cast to the
/// parameter's dtype where a Rust scalar would have been).
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::optim::{Optimizer, Sgd};
/// let opt = Sgd::new(vec![], 0.1)?;
/// let lr = opt.hyperparameter("lr")?;
/// lr.set(0.05)?;
/// assert_eq!((lr.get(), opt.lr()), (0.05, 0.05));
/// assert_eq!(lr.tensor().item::<f64>()?, 0.05);
/// assert!(lr.set(-1.0).is_err());
/// # Ok::<(), tensor_core::Error>(())
/// ```
///
/// As a `GraphArg` (derived) the value is a tensor leaf of a `#[graph_fn]` argument, read at
/// each call and never keyed by value; whether the step has a term for it is keyed.
#[derive(Clone, crate::GraphArg)]
pub struct Hyperparameter {
    /// The optimizer's name, for errors.
    #[graph_arg(skip)]
    op: &'static str,
    /// PyTorch's `param_groups` key (`"lr"`, `"momentum"`, `"betas.0"`, ...).
    #[graph_arg(skip)]
    name: &'static str,
    /// Values must lie in `[0, upper)` (betas) or `[0, inf)` (the others).
    #[graph_arg(skip)]
    upper: Option<f64>,
    /// Built as 0 with no state or term for it (SGD without momentum, no weight decay): the
    /// step leaves the term out, so only 0 may be set.
    zero_only: bool,
    /// What the graph reads.
    value: Tensor,
    /// The same value as Rust bits, so `get` never reads a tensor (it works inside a trace).
    #[graph_arg(skip)]
    bits: Arc<AtomicU64>,
}

impl Hyperparameter {
    /// A hyperparameter `name` of `op` at `value`, checked to lie in `[0, inf)`.
    pub(crate) fn new(op: &'static str, name: &'static str, value: f64) -> Result<Hyperparameter> {
        Hyperparameter::build(op, name, value, None)
    }

    /// A beta: its value must lie in `[0, 1)`.
    pub(crate) fn beta(op: &'static str, name: &'static str, value: f64) -> Result<Hyperparameter> {
        Hyperparameter::build(op, name, value, Some(1.0))
    }

    /// A term the step leaves out when built as 0 (SGD's momentum, a weight decay): then it
    /// stays 0.
    pub(crate) fn optional(op: &'static str, name: &'static str, value: f64) -> Result<Hyperparameter> {
        let h = Hyperparameter::build(op, name, value, None)?;
        Ok(Hyperparameter { zero_only: value == 0.0, ..h })
    }

    fn build(op: &'static str, name: &'static str, value: f64, upper: Option<f64>) -> Result<Hyperparameter> {
        let h = Hyperparameter { op, name, upper, zero_only: false, value: Tensor::scalar(value), bits: Arc::new(AtomicU64::new(value.to_bits())) };
        h.check(value)?;
        Ok(h)
    }

    /// PyTorch's name for it in a param group (`"lr"`, `"momentum"`, `"betas.0"`,
    /// `"betas.1"`, `"weight_decay"`).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::optim::{Adam, Optimizer};
    /// let opt = Adam::new(vec![], 0.1)?;
    /// let names: Vec<_> = opt.hyperparameters().iter().map(|h| h.name()).collect();
    /// assert_eq!(names, ["lr", "betas.0", "betas.1", "weight_decay"]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The current value.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::optim::{Adam, Optimizer};
    /// let opt = Adam::new(vec![], 0.1)?;
    /// assert_eq!(opt.hyperparameter("betas.0")?.get(), 0.9);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn get(&self) -> f64 {
        f64::from_bits(self.bits.load(Ordering::Relaxed))
    }

    /// Sets the value in place: every step after it, eager or traced, uses it (no retrace).
    /// The value is checked first (finite and at least 0; a beta below 1; a hyperparameter
    /// built as 0 with no state for it, SGD's momentum or a weight decay, stays 0), and an
    /// `Err` changes nothing.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::optim::{Optimizer, Sgd};
    /// let opt = Sgd::new(vec![], 0.1)?; // no momentum: no buffers to use one
    /// let err = opt.hyperparameter("momentum")?.set(0.9).unwrap_err();
    /// assert!(err.to_string().contains("built with momentum 0"), "{err}");
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn set(&self, value: f64) -> Result<()> {
        self.check(value)?;
        // Not recorded for backward; the handle is shared, so the optimizer sees it.
        let _no_grad = NoGradGuard::new();
        self.value.assign_(&Tensor::scalar(value))?;
        self.bits.store(value.to_bits(), Ordering::Relaxed);
        Ok(())
    }

    /// The 0-d f64 tensor the step reads (a live handle).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::optim::{Optimizer, Sgd};
    /// let opt = Sgd::new(vec![], 0.1)?;
    /// let t = opt.hyperparameter("lr")?.tensor().clone();
    /// assert_eq!((t.dtype(), t.dims().to_vec()), (DType::F64, vec![]));
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn tensor(&self) -> &Tensor {
        &self.value
    }

    /// The value in `dtype` (f64, or cast as a Rust `f64` scalar would take a tensor's
    /// dtype), for the update's tensor ops.
    pub(crate) fn in_dtype(&self, dtype: crate::dtype::DType) -> Result<Tensor> {
        self.value.cast(dtype)
    }

    /// `1 - value` in f64, then in `dtype` (as `1.0 - beta` in Rust, then taken as a scalar).
    pub(crate) fn one_minus(&self, dtype: crate::dtype::DType) -> Result<Tensor> {
        self.value.neg()?.add(1.0)?.cast(dtype)
    }

    /// Whether it was built non-zero (so the step has a term for it).
    pub(crate) fn is_used(&self) -> bool {
        !self.zero_only
    }

    fn check(&self, value: f64) -> Result<()> {
        let (op, name) = (self.op, self.name);
        if !(value.is_finite() && value >= 0.0) {
            return Err(Error::invalid(op, name, format!("must be a finite value >= 0, found {value}")));
        }
        if let Some(upper) = self.upper.filter(|u| value >= *u) {
            return Err(Error::invalid(op, name, format!("must be in [0, {upper}), found {value}")));
        }
        if self.zero_only && value != 0.0 {
            let why = format!("the optimizer was built with {name} 0 and keeps no state or term for it; build it with a non-zero {name} to change it, found {value}");
            return Err(Error::invalid(op, name, why));
        }
        Ok(())
    }
}

impl std::fmt::Debug for Hyperparameter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}={}", self.name, self.get())
    }
}
