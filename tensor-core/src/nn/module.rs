//! The `Module` trait every layer implements.

use crate::error::Result;
use crate::function::{Flattener, GraphArg};
use crate::tensor::Tensor;

/// A layer or a model: a function of one tensor with trainable parameters.
///
/// A module is a [`GraphArg`]: its tensors are leaves of the graph functions it is an
/// argument (or a field of an argument) of, and entries of its state dict under the names
/// its flattening gives them (`weight`, `bias`, `0.weight` in a [`Sequential`](super::Sequential)).
/// `#[derive(GraphArg)]` on a struct of tensors and layers is usually all it takes.
///
/// `parameters` returns handles (cheap clones) of the trainable tensors — leaves that
/// require grad — in a fixed order, so an optimizer built from them updates the layer's own
/// tensors in place. By default they are the tensors of its flattening that require grad,
/// each once, in flattening order.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::nn::Module;
///
/// /// y = x * scale, with a trainable scale.
/// #[derive(GraphArg)]
/// struct Scale {
///     scale: Tensor,
/// }
///
/// impl Module for Scale {
///     fn forward(&self, x: &Tensor) -> Result<Tensor> {
///         x.mul(&self.scale)
///     }
/// }
///
/// let m = Scale { scale: Tensor::scalar(3.0f32).requires_grad_(true)? };
/// let y = m.forward(&Tensor::from_vec(vec![1.0f32, 2.0], &[2])?)?;
/// assert_eq!(y.to_vec::<f32>()?, vec![3.0, 6.0]);
/// assert!(m.parameters()[0].same_as(&m.scale));
/// assert_eq!(m.state_dict()?[0].0, "scale");
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub trait Module: GraphArg {
    /// Applies the layer to `x`.
    fn forward(&self, x: &Tensor) -> Result<Tensor>;

    /// The handles of the trainable tensors (empty for layers without parameters).
    fn parameters(&self) -> Vec<Tensor> {
        trainable_leaves(self)
    }

    /// Clears the `.grad` of every parameter (sets it to `None`, as PyTorch's default).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::nn::{Linear, Module};
    /// let layer = Linear::new(2, 1, DType::F32, &Generator::new(0))?;
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

/// The tensors of `value`'s flattening that require grad, each once, in flattening order.
fn trainable_leaves<T: GraphArg + ?Sized>(value: &T) -> Vec<Tensor> {
    let mut f = Flattener::new();
    value.flatten(&mut f);
    let mut params: Vec<Tensor> = Vec::new();
    for t in f.finish().leaves {
        if t.requires_grad() && !params.iter().any(|p| p.same_as(&t)) {
            params.push(t);
        }
    }
    params
}
