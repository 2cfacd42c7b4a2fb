//! The `Module` trait every layer implements.

use crate::error::Result;
use crate::tensor::Tensor;

/// A layer or a model: a function of one tensor with trainable parameters.
///
/// `parameters` returns handles (cheap clones) of the trainable tensors — leaves that
/// require grad — in a fixed order, so an optimizer built from them updates the layer's own
/// tensors in place.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::nn::Module;
///
/// /// y = x * scale, with a trainable scale.
/// struct Scale {
///     scale: Tensor,
/// }
///
/// impl Module for Scale {
///     fn forward(&self, x: &Tensor) -> Result<Tensor> {
///         x.mul(&self.scale)
///     }
///     fn parameters(&self) -> Vec<Tensor> {
///         vec![self.scale.clone()]
///     }
/// }
///
/// let m = Scale { scale: Tensor::scalar(3.0f32).requires_grad_(true)? };
/// let y = m.forward(&Tensor::from_vec(vec![1.0f32, 2.0], &[2])?)?;
/// assert_eq!(y.to_vec::<f32>()?, vec![3.0, 6.0]);
/// assert!(m.parameters()[0].same_as(&m.scale));
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub trait Module {
    /// Applies the layer to `x`.
    fn forward(&self, x: &Tensor) -> Result<Tensor>;

    /// The handles of the trainable tensors (empty for layers without parameters).
    fn parameters(&self) -> Vec<Tensor>;

    /// Clears the `.grad` of every parameter (sets it to `None`, as PyTorch's default).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::nn::{Linear, Module};
    /// let layer = Linear::new(2, 1, DType::F32, &mut tensor_core::seeded_rng(0))?;
    /// layer.forward(&Tensor::ones(&[1, 2], DType::F32))?.sum()?.backward()?;
    /// assert!(layer.weight().grad().is_some());
    /// layer.zero_grad()?;
    /// assert!(layer.parameters().iter().all(|p| p.grad().is_none()));
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    fn zero_grad(&self) -> Result<()> {
        self.parameters().iter().try_for_each(Tensor::zero_grad)
    }
}
