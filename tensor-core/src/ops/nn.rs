//! Softmax, log-softmax and softmax cross-entropy (numerically stable), with gradients.

use super::dispatch::apply;
use super::{need_float, Family, InputGrads, Saves, TypeRef};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::kernels::index::indices;
use crate::kernels::softmax as k;
use crate::math::op_names;
use crate::shape::{normalize_axis, Shape, UNKNOWN};
use crate::storage::Storage;
use crate::tensor::grad_node::BackwardCtx;
use crate::tensor::Tensor;
use smallvec::smallvec;

impl Tensor {
    /// exp(x) / sum(exp(x)) along `axis`, computed stably.
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let p = Tensor::from_vec(vec![1.0f64, 1.0], &[2])?.softmax(0)?;
    /// assert_eq!(p.to_vec::<f64>()?, vec![0.5, 0.5]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn softmax(&self, axis: isize) -> Result<Tensor> {
        let axis = self.norm_axis("softmax", axis)?;
        apply(NnOp::Softmax { axis }, &[self])
    }

    /// log(softmax(x)) along `axis`, computed stably.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let x = Tensor::from_vec(vec![0.0f64, 0.0], &[1, 2])?;
    /// let y = x.log_softmax(1)?.to_vec::<f64>()?;
    /// assert!((y[0] - 0.5f64.ln()).abs() < 1e-12 && (y[1] - 0.5f64.ln()).abs() < 1e-12);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn log_softmax(&self, axis: isize) -> Result<Tensor> {
        let axis = self.norm_axis("log_softmax", axis)?;
        apply(NnOp::LogSoftmax { axis }, &[self])
    }

    /// The mean softmax cross-entropy of `self` (logits `[n, c]`) against `labels` (`[n]`,
    /// i64 or i32 class indices).
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let logits = Tensor::zeros(&[2, 4], DType::F32);
    /// let labels = Tensor::from_vec(vec![1i64, 3], &[2])?;
    /// let loss = logits.cross_entropy(&labels)?.item::<f32>()?;
    /// assert!((loss - 4f32.ln()).abs() < 1e-6);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn cross_entropy(&self, labels: &Tensor) -> Result<Tensor> {
        apply(NnOp::CrossEntropy, &[self, labels])
    }

    fn norm_axis(&self, op: &'static str, axis: isize) -> Result<usize> {
        let rank = self.rank();
        normalize_axis(axis, rank).ok_or(Error::Axis { op, axis, rank })
    }
}

/// Softmax, log-softmax and the softmax cross-entropy loss.
///
/// ```
/// use tensor_core::ops::NnOp;
/// assert_eq!(NnOp::Softmax { axis: 1 }, NnOp::Softmax { axis: 1 });
/// ```
#[allow(missing_docs)] // the fields are the Tensor methods' arguments
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum NnOp {
    /// (x)
    Softmax { axis: usize },
    /// (x)
    LogSoftmax { axis: usize },
    /// (logits `[n, c]`, labels `[n]`) -> scalar mean loss
    CrossEntropy,
}

impl Family for NnOp {
    op_names! { NnOp {
        Softmax { axis } => "softmax", "SoftmaxBackward", format!("axis={axis}");
        LogSoftmax { axis } => "log_softmax", "LogSoftmaxBackward", format!("axis={axis}");
        CrossEntropy => "cross_entropy", "CrossEntropyBackward";
    }}

    fn infer(&self, inputs: &[TypeRef]) -> Result<(DType, Shape)> {
        infer(self, inputs)
    }

    fn compute(&self, inputs: &[&Storage]) -> Result<Storage> {
        compute(self, inputs)
    }

    fn backward(&self, ctx: &BackwardCtx, g: &Tensor) -> Result<InputGrads> {
        backward(self, ctx, g)
    }

    fn saves(&self) -> Saves {
        match self {
            NnOp::Softmax { .. } | NnOp::LogSoftmax { .. } => Saves::output(),
            NnOp::CrossEntropy => Saves::inputs(0b11),
        }
    }

    fn is_differentiable(&self) -> bool {
        true
    }
}

fn infer(op: &NnOp, inputs: &[TypeRef]) -> Result<(DType, Shape)> {
    let x = inputs[0];
    need_float(op.name(), x.dtype)?;
    match op {
        NnOp::Softmax { .. } | NnOp::LogSoftmax { .. } => Ok((x.dtype, x.shape.clone())),
        NnOp::CrossEntropy => {
            let l = inputs[1];
            if !matches!(l.dtype, DType::I64 | DType::I32) {
                return Err(Error::UnsupportedDType { op: "cross_entropy", dtype: l.dtype, needs: "i64 or i32 class labels" });
            }
            let ok = x.shape.rank() == 2 && l.shape.rank() == 1 && (x.shape[0] == l.shape[0] || x.shape[0] == UNKNOWN || l.shape[0] == UNKNOWN);
            if !ok {
                return Err(Error::shapes("cross_entropy", x.shape, l.shape, "logits must be [n, classes] and labels [n]"));
            }
            Ok((x.dtype, Shape::scalar()))
        }
    }
}

fn compute(op: &NnOp, inputs: &[&Storage]) -> Result<Storage> {
    let x = inputs[0];
    let other = || unreachable!("checked by infer");
    Ok(match op {
        NnOp::Softmax { axis } => crate::storage::map_float!(x, a => k::softmax(a, *axis), other => other()),
        NnOp::LogSoftmax { axis } => crate::storage::map_float!(x, a => k::log_softmax(a, *axis), other => other()),
        NnOp::CrossEntropy => {
            let labels = indices(inputs[1], x.shape()[1], "cross_entropy")?;
            if labels.len() != x.shape()[0] {
                return Err(Error::shapes("cross_entropy", &x.shape(), &inputs[1].shape(), "logits must be [n, classes] and labels [n]"));
            }
            crate::storage::map_float!(x, a => ndarray::arr0(k::cross_entropy(a, &labels)).into_dyn().into_shared(), other => other())
        }
    })
}

fn backward(op: &NnOp, ctx: &BackwardCtx, g: &Tensor) -> Result<InputGrads> {
    Ok(match op {
        NnOp::Softmax { axis } => {
            let y = ctx.output()?;
            let dot = g.mul(&y)?.sum_axes(&[*axis as isize], true)?;
            smallvec![Some(y.mul(&g.sub(&dot)?)?)]
        }
        NnOp::LogSoftmax { axis } => {
            let y = ctx.output()?;
            let total = g.sum_axes(&[*axis as isize], true)?;
            smallvec![Some(g.sub(&y.exp()?.mul(&total)?)?)]
        }
        NnOp::CrossEntropy => {
            let (x, labels) = (ctx.input(0)?, ctx.input(1)?);
            let shape = ctx.input_shape(0);
            if shape[1] == UNKNOWN {
                return Err(Error::NotDifferentiable {
                    op: "cross_entropy",
                    detail: " with a number of classes unknown in this trace; give the argument a fixed input_signature",
                });
            }
            let target = labels.one_hot(shape[1], x.dtype())?;
            let scale = match shape[0] == UNKNOWN {
                false => g.div(shape[0] as f64)?,
                // A batch unknown in the trace (a relaxed one) is counted when the graph runs,
                // exactly, in integers: the same divisor as the known size's.
                true => g.div(&labels.mul(0.0)?.add(1.0)?.sum()?.cast(x.dtype())?)?,
            };
            smallvec![Some(x.softmax(1)?.sub(&target)?.mul(&scale)?), None]
        }
    })
}
