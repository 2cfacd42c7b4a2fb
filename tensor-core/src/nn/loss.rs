//! Loss functions.

use crate::error::Result;
use crate::tensor::Tensor;

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
