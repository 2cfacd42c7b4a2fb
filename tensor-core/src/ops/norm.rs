//! Batch and group normalization, composed from other ops (so their gradients, graph forms
//! and fusion come from those). Batch normalization in training mode also updates the
//! running statistics it is given, in place and outside autograd, as PyTorch does.

use crate::error::{Error, Result};
use crate::shape::UNKNOWN;
use crate::tensor::grad_mode::no_grad;
use crate::tensor::Tensor;

/// The dims of `x`, which must be known and of rank at least 2 (`[n, c, ...]`).
fn channel_dims(op: &'static str, x: &Tensor) -> Result<Vec<usize>> {
    let shape = x.raw_shape();
    let dims = shape.dims().to_vec();
    if dims.len() < 2 {
        return Err(Error::invalid(op, "input", format!("must be at least 2-d [n, c, ...], found shape {shape}")));
    }
    if dims.contains(&UNKNOWN) {
        return Err(Error::invalid(op, "input", "needs known dims; give the argument a fixed input_signature"));
    }
    Ok(dims)
}

/// The dims of batch_norm's input: its rank and channels must be known; the other dims
/// only in training, where the running variance's unbiased update counts the elements (a
/// dynamic batch traces an inference batch norm as it does any elementwise op).
fn batch_norm_dims(x: &Tensor, training: bool) -> Result<Vec<usize>> {
    if training {
        return channel_dims("batch_norm", x);
    }
    let shape = x.raw_shape();
    let dims = shape.dims().to_vec();
    if shape.is_unknown_rank() || dims.len() < 2 || dims[1] == UNKNOWN {
        let problem = format!("must be at least 2-d [n, c, ...] with known channels, found shape {shape}");
        return Err(Error::invalid("batch_norm", "input", problem));
    }
    Ok(dims)
}

/// `[1, c, 1, ...]` of rank `rank`: a per-channel vector broadcast over `[n, c, ...]`.
fn per_channel(rank: usize, c: usize) -> Vec<usize> {
    let mut s = vec![1; rank];
    s[1] = c;
    s
}

/// Checks that each given tensor is `[c]`.
fn need_channels(op: &'static str, c: usize, args: [(&'static str, Option<&Tensor>); 4]) -> Result<()> {
    for (arg, t) in args {
        if let Some(t) = t.filter(|t| t.raw_shape().dims() != [c]) {
            return Err(Error::invalid(op, arg, format!("must have shape [{c}], one value per channel, found {}", t.raw_shape())));
        }
    }
    Ok(())
}

/// `y * weight + bias` with per-channel `weight` and `bias` where given.
fn affine(y: Tensor, weight: Option<&Tensor>, bias: Option<&Tensor>, shape: &[usize]) -> Result<Tensor> {
    let mut y = y;
    if let Some(w) = weight {
        y = y.mul(&w.reshape(shape)?)?;
    }
    if let Some(b) = bias {
        y = y.add(&b.reshape(shape)?)?;
    }
    Ok(y)
}

impl Tensor {
    /// Batch normalization over the channel axis 1 of `self` `[n, c, ...]` (PyTorch's
    /// `F.batch_norm`; ONNX `BatchNormalization`): `(x - mean) / sqrt(var + eps) * weight +
    /// bias`, per channel, `weight` and `bias` `[c]` where given.
    ///
    /// In training mode (`training`), or without running statistics, `mean` and `var` are
    /// the batch's (over every axis but 1, the variance biased); in training mode the
    /// running statistics given are then updated in place, outside autograd:
    /// `running = (1 - momentum) * running + momentum * batch`, with the unbiased batch
    /// variance for `running_var`. In evaluation mode with running statistics, those are the
    /// `mean` and `var`.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let x = Tensor::from_vec(vec![1.0f64, 3.0, 10.0, 10.0], &[2, 2])?; // n = 2, c = 2
    /// let (rm, rv) = (Tensor::zeros(&[2], DType::F64), Tensor::ones(&[2], DType::F64));
    /// let y = x.batch_norm(Some(&rm), Some(&rv), None, None, true, 0.5, 0.0)?;
    /// assert_eq!(y.to_vec::<f64>()?, vec![-1.0, -1.0, 1.0, 1.0]);
    /// assert_eq!(rm.to_vec::<f64>()?, vec![2.75, 3.25]); // 0.5 * 0 + 0.5 * [5.5, 6.5]
    /// let e = x.batch_norm(Some(&rm), Some(&rv), None, None, false, 0.5, 0.0)?; // eval
    /// assert_eq!(e.shape(), x.shape());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    #[allow(clippy::too_many_arguments)] // PyTorch's signature
    pub fn batch_norm(
        &self,
        running_mean: Option<&Tensor>,
        running_var: Option<&Tensor>,
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        training: bool,
        momentum: f64,
        eps: f64,
    ) -> Result<Tensor> {
        let dims = batch_norm_dims(self, training)?;
        let c = dims[1];
        need_channels("batch_norm", c, [("running_mean", running_mean), ("running_var", running_var), ("weight", weight), ("bias", bias)])?;
        let shape = per_channel(dims.len(), c);
        let (centered, var) = match (running_mean, running_var) {
            (Some(rm), Some(rv)) if !training => (self.sub(&rm.reshape(&shape)?)?, rv.reshape(&shape)?),
            _ => {
                let axes: Vec<isize> = std::iter::once(0).chain(2..dims.len() as isize).collect();
                let mean = self.mean_axes(&axes, true)?;
                let centered = self.sub(&mean)?;
                let var = centered.mul(&centered)?.mean_axes(&axes, true)?;
                if training {
                    let count = dims.iter().product::<usize>() / c.max(1);
                    update_running(running_mean, running_var, &mean, &var, count, momentum)?;
                }
                (centered, var)
            }
        };
        affine(centered.div(&var.add(eps)?.sqrt()?)?, weight, bias, &shape)
    }

    /// Group normalization (PyTorch's `F.group_norm`; ONNX `GroupNormalization`): the
    /// channels of `self` `[n, c, ...]` split into `num_groups` groups, each group of each
    /// sample normalized by its own mean and biased variance, then `* weight + bias` per
    /// channel where given (`[c]`).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let x = Tensor::from_vec(vec![1.0f64, 3.0, 5.0, 9.0], &[1, 4])?;
    /// let y = x.group_norm(2, None, None, 0.0)?;
    /// assert_eq!(y.to_vec::<f64>()?, vec![-1.0, 1.0, -1.0, 1.0]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn group_norm(&self, num_groups: usize, weight: Option<&Tensor>, bias: Option<&Tensor>, eps: f64) -> Result<Tensor> {
        let dims = channel_dims("group_norm", self)?;
        let c = dims[1];
        if num_groups == 0 || c % num_groups != 0 {
            return Err(Error::invalid("group_norm", "num_groups", format!("{num_groups} must be positive and divide the {c} channels")));
        }
        need_channels("group_norm", c, [("weight", weight), ("bias", bias), ("weight", None), ("bias", None)])?;
        let grouped = self.reshape([dims[0] as isize, num_groups as isize, -1])?;
        let centered = grouped.sub(&grouped.mean_axes(&[2], true)?)?;
        let var = centered.mul(&centered)?.mean_axes(&[2], true)?;
        let y = centered.div(&var.add(eps)?.sqrt()?)?.reshape(&dims)?;
        affine(y, weight, bias, &per_channel(dims.len(), c))
    }
}

/// `running = (1 - momentum) * running + momentum * batch` for each running statistic
/// given, the variance unbiased (`count` values per channel), outside autograd.
fn update_running(
    running_mean: Option<&Tensor>,
    running_var: Option<&Tensor>,
    mean: &Tensor,
    var: &Tensor,
    count: usize,
    momentum: f64,
) -> Result<()> {
    if running_mean.is_none() && running_var.is_none() {
        return Ok(());
    }
    if count < 2 {
        return Err(Error::invalid("batch_norm", "input", format!("training needs more than 1 value per channel, found {count}")));
    }
    no_grad(|| {
        let update = |running: &Tensor, batch: Tensor| -> Result<()> {
            let batch = batch.detach().reshape([-1])?;
            running.assign_(&running.mul(1.0 - momentum)?.add(&batch.mul(momentum)?)?)
        };
        if let Some(rm) = running_mean {
            update(rm, mean.clone())?;
        }
        if let Some(rv) = running_var {
            update(rv, var.mul(count as f64 / (count - 1) as f64)?)?;
        }
        Ok(())
    })
}
