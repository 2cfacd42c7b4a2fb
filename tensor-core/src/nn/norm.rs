//! `BatchNorm2d` (with running statistics as state) and `GroupNorm`.

use super::init::need_float;
use super::module::Module;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::function::{Flattener, GraphArg};
use crate::tensor::grad_mode::no_grad;
use crate::tensor::Tensor;

fn need_eps(op: &'static str, eps: f64) -> Result<()> {
    if eps.is_finite() && eps >= 0.0 {
        Ok(())
    } else {
        Err(Error::invalid(op, "eps", format!("must be a finite value >= 0, found {eps}")))
    }
}

/// Batch normalization over the channels of an `[n, c, h, w]` input (PyTorch's
/// `nn.BatchNorm2d(c, eps, momentum)`; ONNX `BatchNormalization`), with a learned per-channel
/// `weight` (ones) and `bias` (zeros).
///
/// In training mode (the default) it normalizes by the batch's statistics and updates the
/// running ones in place (`running_mean`, `running_var` and the i64 count
/// `num_batches_tracked`: state, not parameters, saved in the state dict under PyTorch's
/// names); in evaluation mode (`set_training(false)`) it normalizes by the running statistics.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::nn::{BatchNorm2d, Module};
/// let mut bn = BatchNorm2d::new(2, 1e-5, 0.1, DType::F32)?;
/// let x = Tensor::randn(&[4, 2, 3, 3], DType::F32, 0);
/// let y = bn.forward(&x)?;
/// assert!(y.mean()?.item::<f32>()?.abs() < 1e-5);
/// assert_eq!(bn.num_batches_tracked().item::<i64>()?, 1);
/// let names: Vec<String> = bn.state_dict()?.into_iter().map(|(n, _)| n).collect();
/// assert_eq!(names, ["weight", "bias", "running_mean", "running_var", "num_batches_tracked"]);
/// bn.set_training(false);
/// assert_eq!(bn.forward(&x)?.dims(), vec![4, 2, 3, 3]);
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub struct BatchNorm2d {
    weight: Tensor,
    bias: Tensor,
    running_mean: Tensor,
    running_var: Tensor,
    num_batches_tracked: Tensor,
    eps: f64,
    momentum: f64,
    training: bool,
}

impl BatchNorm2d {
    /// A layer over `num_features` channels: weight 1 and bias 0 (both require grad),
    /// running mean 0 and variance 1, in training mode.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::nn::BatchNorm2d;
    /// assert!(BatchNorm2d::new(3, 1e-5, 1.5, DType::F32).is_err()); // momentum outside [0, 1]
    /// assert!(BatchNorm2d::new(3, 1e-5, 0.1, DType::I64).is_err());
    /// ```
    pub fn new(num_features: usize, eps: f64, momentum: f64, dtype: DType) -> Result<BatchNorm2d> {
        need_float("BatchNorm2d", dtype)?;
        need_eps("BatchNorm2d", eps)?;
        if !(0.0..=1.0).contains(&momentum) {
            return Err(Error::invalid("BatchNorm2d", "momentum", format!("must be in [0, 1], found {momentum}")));
        }
        let c = [num_features];
        Ok(BatchNorm2d {
            weight: Tensor::ones(&c, dtype).requires_grad_(true)?,
            bias: Tensor::zeros(&c, dtype).requires_grad_(true)?,
            running_mean: Tensor::zeros(&c, dtype),
            running_var: Tensor::ones(&c, dtype),
            num_batches_tracked: Tensor::scalar(0i64),
            eps,
            momentum,
            training: true,
        })
    }

    /// Training mode (batch statistics, running ones updated) or evaluation mode (running
    /// statistics), as PyTorch's `train()` / `eval()`.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let mut bn = tensor_core::nn::BatchNorm2d::new(1, 1e-5, 0.1, DType::F32)?;
    /// bn.set_training(false);
    /// assert!(!bn.training());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn set_training(&mut self, training: bool) {
        self.training = training;
    }

    /// True in training mode.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// assert!(tensor_core::nn::BatchNorm2d::new(1, 1e-5, 0.1, DType::F32)?.training());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn training(&self) -> bool {
        self.training
    }

    /// The scale, `[c]`.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let bn = tensor_core::nn::BatchNorm2d::new(2, 1e-5, 0.1, DType::F32)?;
    /// assert_eq!(bn.weight().to_vec::<f32>()?, vec![1.0, 1.0]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn weight(&self) -> &Tensor {
        &self.weight
    }

    /// The shift, `[c]`.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let bn = tensor_core::nn::BatchNorm2d::new(2, 1e-5, 0.1, DType::F32)?;
    /// assert_eq!(bn.bias().to_vec::<f32>()?, vec![0.0, 0.0]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn bias(&self) -> &Tensor {
        &self.bias
    }

    /// The running mean, `[c]` (state: no gradient).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let bn = tensor_core::nn::BatchNorm2d::new(2, 1e-5, 0.1, DType::F32)?;
    /// assert_eq!(bn.running_mean().to_vec::<f32>()?, vec![0.0, 0.0]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn running_mean(&self) -> &Tensor {
        &self.running_mean
    }

    /// The running (unbiased) variance, `[c]` (state: no gradient).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let bn = tensor_core::nn::BatchNorm2d::new(2, 1e-5, 0.1, DType::F32)?;
    /// assert_eq!(bn.running_var().to_vec::<f32>()?, vec![1.0, 1.0]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn running_var(&self) -> &Tensor {
        &self.running_var
    }

    /// How many training batches updated the running statistics (an i64 scalar).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let bn = tensor_core::nn::BatchNorm2d::new(2, 1e-5, 0.1, DType::F32)?;
    /// assert_eq!(bn.num_batches_tracked().item::<i64>()?, 0);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn num_batches_tracked(&self) -> &Tensor {
        &self.num_batches_tracked
    }
}

impl Module for BatchNorm2d {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        if x.rank() != 4 {
            return Err(Error::invalid("BatchNorm2d", "input", format!("must be 4-d [n, c, h, w], found shape {}", x.raw_shape())));
        }
        let (rm, rv) = (Some(&self.running_mean), Some(&self.running_var));
        let y = x.batch_norm(rm, rv, Some(&self.weight), Some(&self.bias), self.training, self.momentum, self.eps)?;
        if self.training {
            no_grad(|| self.num_batches_tracked.add_(1))?;
        }
        Ok(y)
    }

    /// `[weight, bias]`.
    fn parameters(&self) -> Vec<Tensor> {
        vec![self.weight.clone(), self.bias.clone()]
    }
}

/// The parameters and the running statistics are leaves with PyTorch's names; `eps`,
/// `momentum` and the mode are keyed by value.
impl GraphArg for BatchNorm2d {
    fn flatten(&self, f: &mut Flattener) {
        f.f64(self.eps);
        f.f64(self.momentum);
        f.bool(self.training);
        for (name, t) in [
            ("weight", &self.weight),
            ("bias", &self.bias),
            ("running_mean", &self.running_mean),
            ("running_var", &self.running_var),
            ("num_batches_tracked", &self.num_batches_tracked),
        ] {
            f.field(name);
            t.flatten(f);
            f.end_field();
        }
    }
}

/// Group normalization (PyTorch's `nn.GroupNorm(num_groups, c, eps)`; ONNX
/// `GroupNormalization`): each sample's channels in `num_groups` groups, each group
/// normalized by its own statistics, then a learned per-channel `weight` (ones) and `bias`
/// (zeros).
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::nn::{GroupNorm, Module};
/// let gn = GroupNorm::new(2, 4, 1e-5, DType::F64)?;
/// let y = gn.forward(&Tensor::randn(&[3, 4, 5], DType::F64, 0))?;
/// assert!(y.mean()?.item::<f64>()?.abs() < 1e-12);
/// assert_eq!(gn.parameters().len(), 2);
/// assert!(GroupNorm::new(3, 4, 1e-5, DType::F64).is_err()); // 3 does not divide 4
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub struct GroupNorm {
    weight: Tensor,
    bias: Tensor,
    num_groups: usize,
    eps: f64,
}

impl GroupNorm {
    /// A layer over `num_channels` channels in `num_groups` groups, weight 1 and bias 0.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let gn = tensor_core::nn::GroupNorm::new(1, 3, 1e-5, DType::F32)?;
    /// assert_eq!(gn.weight().dims(), vec![3]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn new(num_groups: usize, num_channels: usize, eps: f64, dtype: DType) -> Result<GroupNorm> {
        need_float("GroupNorm", dtype)?;
        need_eps("GroupNorm", eps)?;
        if num_groups == 0 || !num_channels.is_multiple_of(num_groups) {
            return Err(Error::invalid("GroupNorm", "num_groups", format!("{num_groups} must be positive and divide the {num_channels} channels")));
        }
        let c = [num_channels];
        Ok(GroupNorm { weight: Tensor::ones(&c, dtype).requires_grad_(true)?, bias: Tensor::zeros(&c, dtype).requires_grad_(true)?, num_groups, eps })
    }

    /// The scale, `[c]`.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let gn = tensor_core::nn::GroupNorm::new(1, 2, 1e-5, DType::F32)?;
    /// assert_eq!(gn.weight().to_vec::<f32>()?, vec![1.0, 1.0]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn weight(&self) -> &Tensor {
        &self.weight
    }

    /// The shift, `[c]`.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let gn = tensor_core::nn::GroupNorm::new(1, 2, 1e-5, DType::F32)?;
    /// assert_eq!(gn.bias().to_vec::<f32>()?, vec![0.0, 0.0]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn bias(&self) -> &Tensor {
        &self.bias
    }
}

impl Module for GroupNorm {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.group_norm(self.num_groups, Some(&self.weight), Some(&self.bias), self.eps)
    }

    /// `[weight, bias]`.
    fn parameters(&self) -> Vec<Tensor> {
        vec![self.weight.clone(), self.bias.clone()]
    }
}

/// `weight` and `bias` are leaves; the group count and `eps` are keyed by value.
impl GraphArg for GroupNorm {
    fn flatten(&self, f: &mut Flattener) {
        f.uint(self.num_groups as u64);
        f.f64(self.eps);
        f.field("weight");
        self.weight.flatten(f);
        f.end_field();
        f.field("bias");
        self.bias.flatten(f);
        f.end_field();
    }
}
