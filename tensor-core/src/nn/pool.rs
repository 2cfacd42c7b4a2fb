//! `MaxPool2d`, `AvgPool2d` and `AdaptiveAvgPool2d`: 2-d pooling over NCHW inputs.

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

/// 2-d average pooling (PyTorch's `nn.AvgPool2d`; ONNX `AveragePool`): the mean of each
/// `kernel` window of an `[n, c, h, w]` input, moved by `stride`, over the input zero-padded
/// by `padding`; see [`Tensor::avg_pool2d`] for `ceil_mode` and `count_include_pad`
/// (PyTorch's defaults: `false` and `true`). No parameters; its settings are keyed by value.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::nn::{AvgPool2d, Module};
/// let pool = AvgPool2d::new([2, 2], [2, 2]);
/// let x = Tensor::arange(0.0f32, 16.0).reshape(&[1, 1, 4, 4])?;
/// assert_eq!(pool.forward(&x)?.to_vec::<f32>()?, vec![2.5, 4.5, 10.5, 12.5]);
/// let padded = AvgPool2d { padding: [1, 1], count_include_pad: false, ..AvgPool2d::new([3, 3], [1, 1]) };
/// assert_eq!(padded.forward(&x)?.dims(), vec![1, 1, 4, 4]);
/// # Ok::<(), tensor_core::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, crate::GraphArg)]
pub struct AvgPool2d {
    /// The window (rows, columns).
    pub kernel: [usize; 2],
    /// How far the window moves (rows, columns).
    pub stride: [usize; 2],
    /// Zeros added on each side (rows, columns), at most half the window.
    pub padding: [usize; 2],
    /// Keep a last partial window (sizes rounded up).
    pub ceil_mode: bool,
    /// Count the padding's zeros in each window's divisor.
    pub count_include_pad: bool,
}

impl AvgPool2d {
    /// Pooling with this window and stride, no padding, PyTorch's defaults otherwise.
    ///
    /// ```
    /// use tensor_core::nn::AvgPool2d;
    /// let p = AvgPool2d::new([3, 3], [2, 2]);
    /// assert!(p.count_include_pad && !p.ceil_mode && p.padding == [0, 0]);
    /// ```
    pub fn new(kernel: [usize; 2], stride: [usize; 2]) -> AvgPool2d {
        AvgPool2d { kernel, stride, padding: [0, 0], ceil_mode: false, count_include_pad: true }
    }
}

impl Module for AvgPool2d {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.avg_pool2d(self.kernel, self.stride, self.padding, self.ceil_mode, self.count_include_pad)
    }

    fn parameters(&self) -> Vec<Tensor> {
        Vec::new()
    }
}

/// 2-d adaptive average pooling to a fixed `[oh, ow]` (PyTorch's `nn.AdaptiveAvgPool2d`;
/// `[1, 1]` is ONNX's `GlobalAveragePool`), whatever the input's height and width.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::nn::{AdaptiveAvgPool2d, Module};
/// let pool = AdaptiveAvgPool2d::new([1, 1]);
/// let y = pool.forward(&Tensor::arange(0.0f32, 8.0).reshape(&[1, 2, 2, 2])?)?;
/// assert_eq!((y.dims().to_vec(), y.to_vec::<f32>()?), (vec![1, 2, 1, 1], vec![1.5, 5.5]));
/// # Ok::<(), tensor_core::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, crate::GraphArg)]
pub struct AdaptiveAvgPool2d {
    /// The output's height and width.
    pub output_size: [usize; 2],
}

impl AdaptiveAvgPool2d {
    /// Pooling to `output_size`.
    ///
    /// ```
    /// use tensor_core::nn::AdaptiveAvgPool2d;
    /// assert_eq!(AdaptiveAvgPool2d::new([7, 7]).output_size, [7, 7]);
    /// ```
    pub fn new(output_size: [usize; 2]) -> AdaptiveAvgPool2d {
        AdaptiveAvgPool2d { output_size }
    }
}

impl Module for AdaptiveAvgPool2d {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.adaptive_avg_pool2d(self.output_size)
    }

    fn parameters(&self) -> Vec<Tensor> {
        Vec::new()
    }
}
