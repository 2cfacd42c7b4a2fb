//! `LayerNorm`: normalization over the last dim with a learned scale and shift.

use super::init::need_float;
use super::module::Module;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// Layer normalization over the last dim of size `dim` (PyTorch's `nn.LayerNorm(dim)`):
/// `(x - mean) / sqrt(var + eps) * weight + bias`, with `weight` starting at ones and `bias`
/// at zeros.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::nn::{LayerNorm, Module};
/// let ln = LayerNorm::new(4, 1e-5, DType::F64)?;
/// let y = ln.forward(&Tensor::from_vec(vec![1.0f64, 2.0, 3.0, 4.0], &[1, 4])?)?;
/// assert!(y.mean()?.item::<f64>()?.abs() < 1e-12);
/// assert_eq!(ln.parameters().len(), 2);
/// # Ok::<(), tensor_core::Error>(())
/// ```
///
/// As a `GraphArg` (derived) the scale and shift are leaves, `weight` and `bias` (PyTorch's
/// names), and `eps` is keyed by value.
#[derive(crate::GraphArg)]
pub struct LayerNorm {
    weight: Tensor,
    bias: Tensor,
    eps: f64,
}

impl LayerNorm {
    /// A layer over a last dim of size `dim`, weight 1 and bias 0 (both require grad).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// assert!(tensor_core::nn::LayerNorm::new(4, -1.0, DType::F32).is_err());
    /// ```
    pub fn new(dim: usize, eps: f64, dtype: DType) -> Result<LayerNorm> {
        need_float("LayerNorm", dtype)?;
        if !(eps.is_finite() && eps >= 0.0) {
            return Err(Error::invalid("LayerNorm", "eps", format!("must be a finite value >= 0, found {eps}")));
        }
        Ok(LayerNorm { weight: Tensor::ones(&[dim], dtype).requires_grad_(true)?, bias: Tensor::zeros(&[dim], dtype).requires_grad_(true)?, eps })
    }

    /// The scale, `[dim]`.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let ln = tensor_core::nn::LayerNorm::new(3, 1e-5, DType::F32)?;
    /// assert_eq!(ln.weight().to_vec::<f32>()?, vec![1.0; 3]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn weight(&self) -> &Tensor {
        &self.weight
    }

    /// The shift, `[dim]`.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let ln = tensor_core::nn::LayerNorm::new(3, 1e-5, DType::F32)?;
    /// assert_eq!(ln.bias().to_vec::<f32>()?, vec![0.0; 3]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn bias(&self) -> &Tensor {
        &self.bias
    }
}

impl Module for LayerNorm {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.layer_norm(&self.weight.raw_dims(), Some(&self.weight), Some(&self.bias), self.eps)
    }

    /// `[weight, bias]`.
    fn parameters(&self) -> Vec<Tensor> {
        vec![self.weight.clone(), self.bias.clone()]
    }
}
