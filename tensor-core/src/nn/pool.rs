//! `MaxPool2d`: 2-d max pooling over NCHW inputs.

use super::module::Module;
use crate::error::Result;
use crate::tensor::Tensor;

/// 2-d max pooling (PyTorch's `nn.MaxPool2d` without padding or dilation): the maximum of
/// each `kernel` window of an `[n, c, h, w]` input, moved by `stride`. No parameters; as a
/// [`GraphArg`](crate::GraphArg), its window and stride are keyed by value.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::nn::{MaxPool2d, Module};
/// let pool = MaxPool2d::new([2, 2], [2, 2]);
/// let x = Tensor::arange(0.0f32, 16.0).reshape(&[1, 1, 4, 4])?;
/// assert_eq!(pool.forward(&x)?.to_vec::<f32>()?, vec![5.0, 7.0, 13.0, 15.0]);
/// assert!(pool.parameters().is_empty());
/// # Ok::<(), tensor_core::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, crate::GraphArg)]
pub struct MaxPool2d {
    /// The window (rows, columns).
    pub kernel: [usize; 2],
    /// How far the window moves (rows, columns).
    pub stride: [usize; 2],
}

impl MaxPool2d {
    /// Pooling with this window and stride (PyTorch's usual choice is `stride == kernel`).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::nn::{MaxPool2d, Module};
    /// let y = MaxPool2d::new([3, 3], [1, 1]).forward(&Tensor::zeros(&[2, 4, 5, 5], DType::F64))?;
    /// assert_eq!(y.dims(), vec![2, 4, 3, 3]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn new(kernel: [usize; 2], stride: [usize; 2]) -> MaxPool2d {
        MaxPool2d { kernel, stride }
    }
}

impl Module for MaxPool2d {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.max_pool2d(self.kernel, self.stride)
    }

    fn parameters(&self) -> Vec<Tensor> {
        Vec::new()
    }
}
