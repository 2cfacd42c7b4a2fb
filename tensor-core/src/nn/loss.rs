//! Loss functions, with PyTorch's names, formulas and `reduction` choice.
//!
//! Each is composed from tensor ops, so it differentiates, traces into graphs and exports as
//! those ops do. The element losses are reduced as [`Reduction`] says: their mean (the
//! default), their sum, or none (the per-element losses, in the input's shape).

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// How a loss reduces its element losses, as PyTorch's `reduction="mean" | "sum" | "none"`.
///
/// A unit-like enum: as an argument of a `#[graph_fn]` it keys the trace by value.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::nn::{self, Reduction};
/// let x = Tensor::from_vec(vec![1.0f32, 3.0], &[2])?;
/// let y = Tensor::zeros(&[2], DType::F32);
/// assert_eq!(nn::l1_loss(&x, &y, Reduction::default())?.item::<f32>()?, 2.0);
/// assert_eq!(nn::l1_loss(&x, &y, Reduction::Sum)?.item::<f32>()?, 4.0);
/// assert_eq!(nn::l1_loss(&x, &y, Reduction::None)?.to_vec::<f32>()?, vec![1.0, 3.0]);
/// # Ok::<(), tensor_core::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, crate::GraphArg)]
pub enum Reduction {
    /// The mean of the element losses (a 0-d tensor).
    #[default]
    Mean,
    /// The sum of the element losses (a 0-d tensor).
    Sum,
    /// No reduction: the element losses themselves.
    None,
}

impl Reduction {
    /// Reduces `losses` as `self` says.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::nn::Reduction;
    /// let l = Tensor::from_vec(vec![1.0f64, 2.0, 6.0], &[3])?;
    /// assert_eq!(Reduction::Mean.reduce(&l)?.item::<f64>()?, 3.0);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn reduce(self, losses: &Tensor) -> Result<Tensor> {
        match self {
            Reduction::Mean => losses.mean(),
            Reduction::Sum => losses.sum(),
            Reduction::None => Ok(losses.clone()),
        }
    }
}

/// The mean softmax cross-entropy of `logits` `[n, classes]` against class indices `labels`
/// `[n]` (i64, or i32), as PyTorch's `F.cross_entropy` with `reduction = "mean"`: the
/// average over the batch of `-log_softmax(logits)[i, labels[i]]`, computed stably.
///
/// ```
/// use tensor_core::prelude::*;
/// let logits = Tensor::from_vec(vec![2.0f64, 0.0, 0.0, 0.0, 0.0, 0.0], &[2, 3])?;
/// let labels = Tensor::from_vec(vec![0i64, 2], &[2])?;
/// let loss = tensor_core::nn::cross_entropy(&logits, &labels)?.item::<f64>()?;
/// let e2 = 2f64.exp();
/// let expected = (-(e2 / (e2 + 2.0)).ln() + 3f64.ln()) / 2.0;
/// assert!((loss - expected).abs() < 1e-12);
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub fn cross_entropy(logits: &Tensor, labels: &Tensor) -> Result<Tensor> {
    logits.cross_entropy(labels)
}

/// The squared error `(input - target)^2`, reduced (PyTorch's `F.mse_loss`). `target` must
/// have `input`'s shape and float dtype.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::nn::{self, Reduction};
/// let x = Tensor::from_vec(vec![1.0f32, 2.0, 4.0], &[3])?;
/// let y = Tensor::from_vec(vec![1.0f32, 0.0, 1.0], &[3])?;
/// assert!((nn::mse_loss(&x, &y, Reduction::Mean)?.item::<f32>()? - 13.0 / 3.0).abs() < 1e-6);
/// assert!(nn::mse_loss(&x, &Tensor::zeros(&[2], DType::F32), Reduction::Mean).is_err());
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub fn mse_loss(input: &Tensor, target: &Tensor, reduction: Reduction) -> Result<Tensor> {
    let d = difference("mse_loss", input, target)?;
    reduction.reduce(&d.mul(&d)?)
}

/// The absolute error `|input - target|`, reduced (PyTorch's `F.l1_loss`).
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::nn::{self, Reduction};
/// let x = Tensor::from_vec(vec![1.0f64, -2.0], &[2])?;
/// let y = Tensor::from_vec(vec![0.5f64, 1.0], &[2])?;
/// assert_eq!(nn::l1_loss(&x, &y, Reduction::Sum)?.item::<f64>()?, 3.5);
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub fn l1_loss(input: &Tensor, target: &Tensor, reduction: Reduction) -> Result<Tensor> {
    reduction.reduce(&difference("l1_loss", input, target)?.abs()?)
}

/// The Huber-like smooth L1 error, reduced (PyTorch's `F.smooth_l1_loss`, whose `beta`
/// default is 1.0): with `d = |input - target|`, `0.5 d^2 / beta` where `d < beta` and
/// `d - 0.5 beta` elsewhere. `beta = 0` is the L1 loss; a negative `beta` is an error.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::nn::{self, Reduction};
/// let x = Tensor::from_vec(vec![0.5f64, 3.0], &[2])?;
/// let y = Tensor::zeros(&[2], DType::F64);
/// let l = nn::smooth_l1_loss(&x, &y, 1.0, Reduction::None)?;
/// assert_eq!(l.to_vec::<f64>()?, vec![0.125, 2.5]);
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub fn smooth_l1_loss(input: &Tensor, target: &Tensor, beta: f64, reduction: Reduction) -> Result<Tensor> {
    if beta.is_nan() || beta < 0.0 {
        return Err(Error::invalid("smooth_l1_loss", "beta", format!("{beta} is not >= 0 (PyTorch's default is 1.0)")));
    }
    let d = difference("smooth_l1_loss", input, target)?.abs()?;
    if beta == 0.0 {
        return reduction.reduce(&d);
    }
    // With q = min(d, beta): 0.5 q^2 / beta + (d - q) is each branch of the formula, with no
    // mask, and its gradient is d/beta (sign included) below beta and the sign above.
    let q = d.clamp_max(beta)?;
    let losses = q.mul(&q)?.mul(0.5 / beta)?.add(&d.sub(&q)?)?;
    reduction.reduce(&losses)
}

/// The binary cross-entropy of `sigmoid(input)` against probabilities `target` (PyTorch's
/// `F.binary_cross_entropy_with_logits`), computed stably as
/// `max(x, 0) - x y + log(1 + exp(-|x|))`. PyTorch's `weight` and `pos_weight` arguments
/// are not offered: multiply the unreduced losses (`Reduction::None`) by a weight instead.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::nn::{self, Reduction};
/// let x = Tensor::from_vec(vec![0.0f64, 100.0, -100.0], &[3])?;
/// let y = Tensor::from_vec(vec![1.0f64, 1.0, 1.0], &[3])?;
/// let l = nn::bce_with_logits(&x, &y, Reduction::None)?.to_vec::<f64>()?;
/// assert!((l[0] - 2f64.ln()).abs() < 1e-15 && l[1] < 1e-40 && l[2] == 100.0); // no overflow
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub fn bce_with_logits(input: &Tensor, target: &Tensor, reduction: Reduction) -> Result<Tensor> {
    check_pair("bce_with_logits", input, target)?;
    let abs = input.abs()?;
    // max(x, 0) written as x/2 + |x|/2 (the same value, exactly): its gradient at x = 0 is
    // 1/2, so the whole loss has PyTorch's gradient sigmoid(x) - y there too.
    let positive = input.mul(0.5)?.add(&abs.mul(0.5)?)?;
    let softplus = abs.neg()?.exp()?.add(1.0)?.log()?;
    reduction.reduce(&positive.sub(&input.mul(target)?)?.add(&softplus)?)
}

/// The negative log-likelihood of log-probabilities `input` `[n, classes]` (as
/// [`Tensor::log_softmax`] gives) at class indices `target` `[n]` (i64 or i32): the element
/// losses are `-input[i, target[i]]` (PyTorch's `F.nll_loss`, without its `weight` and
/// `ignore_index`).
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::nn::{self, Reduction};
/// let logp = Tensor::from_vec(vec![-0.5f32, -1.0, -2.0, -0.25], &[2, 2])?;
/// let labels = Tensor::from_vec(vec![1i64, 0], &[2])?;
/// assert_eq!(nn::nll_loss(&logp, &labels, Reduction::None)?.to_vec::<f32>()?, vec![1.0, 2.0]);
/// assert_eq!(nn::nll_loss(&logp, &labels, Reduction::Mean)?.item::<f32>()?, 1.5);
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub fn nll_loss(input: &Tensor, target: &Tensor, reduction: Reduction) -> Result<Tensor> {
    check_nll(input, target)?;
    let picked = input.gather(1, &target.unsqueeze(1)?)?.squeeze(1)?;
    reduction.reduce(&picked.neg()?)
}

/// `input - target` after [`check_pair`].
fn difference(op: &'static str, input: &Tensor, target: &Tensor) -> Result<Tensor> {
    check_pair(op, input, target)?;
    input.sub(target)
}

/// `input` is a float tensor and `target` has its dtype and shape.
fn check_pair(op: &'static str, input: &Tensor, target: &Tensor) -> Result<()> {
    if !input.dtype().is_float() {
        return Err(Error::UnsupportedDType { op, dtype: input.dtype(), needs: "a float `input` (f32 or f64)" });
    }
    if target.dtype() != input.dtype() {
        let reason =
            format!("its dtype {} differs from `input`'s {}; cast it: target.cast(DType::{:?})", target.dtype(), input.dtype(), input.dtype());
        return Err(Error::invalid(op, "target", reason));
    }
    if target.raw_shape() != input.raw_shape() {
        let hint = "`target` must have the shape of `input` (no broadcasting); reshape it";
        return Err(Error::shapes(op, &input.raw_shape(), &target.raw_shape(), hint));
    }
    Ok(())
}

/// `input` is float `[n, classes]` and `target` an i64/i32 `[n]`.
fn check_nll(input: &Tensor, target: &Tensor) -> Result<()> {
    let op = "nll_loss";
    if !input.dtype().is_float() || input.rank() != 2 {
        let reason = format!("log-probabilities of shape [n, classes] and a float dtype are needed, found {} {}", input.dtype(), input.raw_shape());
        return Err(Error::invalid(op, "input", reason));
    }
    if !matches!(target.dtype(), DType::I64 | DType::I32) || target.rank() != 1 {
        let reason = format!("class indices of shape [n] and dtype i64 or i32 are needed, found {} {}", target.dtype(), target.raw_shape());
        return Err(Error::invalid(op, "target", reason));
    }
    let (n, m) = (input.raw_shape()[0], target.raw_shape()[0]);
    if n != m {
        return Err(Error::shapes(op, &input.raw_shape(), &target.raw_shape(), "`target` needs one class index per row of `input`"));
    }
    Ok(())
}
