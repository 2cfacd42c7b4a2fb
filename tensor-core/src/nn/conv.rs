//! `Conv2d`: the 2-d convolution layer over NCHW inputs.

use super::init::{need_float, outside_trace, torch_default};
use super::module::Module;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::random::Generator;
use crate::tensor::Tensor;

/// A 2-d convolution (cross-correlation, as PyTorch's `nn.Conv2d`): input `[n, c, h, w]`,
/// `weight` `[out, c, kh, kw]` (OIHW), `bias` `[out]`, a `stride` and zero `padding` per
/// spatial dim. The forward pass is [`Tensor::conv2d`].
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::nn::{Conv2d, Module};
/// let conv = Conv2d::new(3, 8, [3, 3], DType::F32, &Generator::new(0))?
///     .with_stride([2, 2])
///     .with_padding([1, 1]);
/// let y = conv.forward(&Tensor::zeros(&[2, 3, 8, 8], DType::F32))?;
/// assert_eq!(y.dims(), vec![2, 8, 4, 4]);
/// # Ok::<(), tensor_core::Error>(())
/// ```
///
/// A `Conv2d` is a [`GraphArg`](crate::GraphArg) (stride and padding keyed by value) with
/// state dict entries `weight` and `bias`, PyTorch's names and layout:
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::nn::Conv2d;
/// let conv = Conv2d::new(1, 6, [5, 5], DType::F32, &Generator::new(0))?;
/// let state = conv.state_dict()?;
/// assert_eq!((state[0].0.as_str(), state[0].1.dims().to_vec()), ("weight", vec![6, 1, 5, 5]));
/// # Ok::<(), tensor_core::Error>(())
/// ```
#[derive(crate::GraphArg)]
pub struct Conv2d {
    weight: Tensor,
    bias: Option<Tensor>,
    #[graph_arg(static)]
    stride: [usize; 2],
    #[graph_arg(static)]
    padding: [usize; 2],
    #[graph_arg(static)]
    groups: usize,
}

impl Conv2d {
    /// A layer with a bias, stride 1 and no padding, initialized as PyTorch's `nn.Conv2d`:
    /// weight and bias drawn from `U(-1/sqrt(fan_in), 1/sqrt(fan_in))` with
    /// `fan_in = in_channels * kh * kw`. The parameters require grad.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::nn::Conv2d;
    /// let conv = Conv2d::new(1, 4, [5, 5], DType::F64, &Generator::new(0))?;
    /// assert_eq!(conv.weight().dims(), vec![4, 1, 5, 5]);
    /// assert!(conv.weight().to_vec::<f64>()?.iter().all(|v| v.abs() <= 0.2)); // 1 / sqrt(25)
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn new(in_channels: usize, out_channels: usize, kernel: [usize; 2], dtype: DType, generator: &Generator) -> Result<Conv2d> {
        Self::init(in_channels, out_channels, kernel, true, dtype, generator)
    }

    /// A layer without a bias, initialized as [`Conv2d::new`].
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::nn::{Conv2d, Module};
    /// let conv = Conv2d::new_without_bias(1, 4, [3, 3], DType::F32, &Generator::new(0))?;
    /// assert!(conv.bias().is_none() && conv.parameters().len() == 1);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn new_without_bias(in_channels: usize, out_channels: usize, kernel: [usize; 2], dtype: DType, generator: &Generator) -> Result<Conv2d> {
        Self::init(in_channels, out_channels, kernel, false, dtype, generator)
    }

    fn init(c: usize, o: usize, kernel: [usize; 2], bias: bool, dtype: DType, generator: &Generator) -> Result<Conv2d> {
        need_float("Conv2d", dtype)?;
        outside_trace()?;
        let fan_in = c * kernel[0] * kernel[1];
        let weight = torch_default(&[o, c, kernel[0], kernel[1]], fan_in, dtype, generator)?;
        let bias = bias.then(|| torch_default(&[o], fan_in, dtype, generator)).transpose()?;
        Conv2d::from_tensors(weight, bias)
    }

    /// A layer (stride 1, no padding) from given tensors: `weight` OIHW and an optional `bias`
    /// `[out]` of the same float dtype. They are marked `requires_grad_(true)`; the layer
    /// holds these very handles.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::nn::{Conv2d, Module};
    /// let conv = Conv2d::from_tensors(Tensor::ones(&[1, 1, 2, 2], DType::F32), None)?;
    /// let y = conv.forward(&Tensor::arange(0.0f32, 9.0).reshape(&[1, 1, 3, 3])?)?;
    /// assert_eq!(y.to_vec::<f32>()?, vec![8.0, 12.0, 20.0, 24.0]);
    /// assert!(Conv2d::from_tensors(Tensor::ones(&[2, 2], DType::F32), None).is_err());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn from_tensors(weight: Tensor, bias: Option<Tensor>) -> Result<Conv2d> {
        if weight.rank() != 4 {
            return Err(Error::invalid("Conv2d", "weight", format!("must be 4-d [out, in, kh, kw] (OIHW), found shape {}", weight.raw_shape())));
        }
        if let Some(b) = &bias {
            let out = weight.raw_dims()[0];
            if b.raw_dims() != [out] {
                return Err(Error::shapes(
                    "Conv2d",
                    &weight.raw_shape(),
                    &b.raw_shape(),
                    format!("the bias must be [{out}], one value per output channel"),
                ));
            }
            if b.dtype() != weight.dtype() {
                return Err(Error::operand_dtypes("Conv2d", ("weight", weight.dtype()), ("bias", b.dtype())));
            }
        }
        let weight = weight.requires_grad_(true)?;
        let bias = bias.map(|b| b.requires_grad_(true)).transpose()?;
        Ok(Conv2d { weight, bias, stride: [1, 1], padding: [0, 0], groups: 1 })
    }

    /// A layer with a bias in `groups` groups (PyTorch's `nn.Conv2d(..., groups)`; ONNX
    /// `Conv`'s `group`): weight `[out, in / groups, kh, kw]`, initialized with
    /// `fan_in = in / groups * kh * kw`; `groups == in_channels` is MobileNet's depthwise
    /// convolution. The forward pass is [`Tensor::conv2d_grouped`].
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::nn::{Conv2d, Module};
    /// let dw = Conv2d::new_grouped(8, 8, [3, 3], 8, DType::F32, &tensor_core::Generator::new(0))?.with_padding([1, 1]);
    /// assert_eq!((dw.weight().dims().to_vec(), dw.groups()), (vec![8, 1, 3, 3], 8));
    /// assert_eq!(dw.forward(&Tensor::ones(&[1, 8, 5, 5], DType::F32))?.dims(), vec![1, 8, 5, 5]);
    /// assert!(Conv2d::new_grouped(8, 6, [3, 3], 4, DType::F32, &tensor_core::Generator::new(0)).is_err());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn new_grouped(
        in_channels: usize,
        out_channels: usize,
        kernel: [usize; 2],
        groups: usize,
        dtype: DType,
        generator: &Generator,
    ) -> Result<Conv2d> {
        if groups == 0 || !in_channels.is_multiple_of(groups) || !out_channels.is_multiple_of(groups) {
            return Err(Error::invalid("Conv2d", "groups", format!("{groups} must be positive and divide {in_channels} and {out_channels}")));
        }
        Ok(Conv2d { groups, ..Self::init(in_channels / groups, out_channels, kernel, true, dtype, generator)? })
    }

    /// The same layer in `groups` groups: its weight must be `[out, in / groups, kh, kw]`
    /// (checked by the forward pass), as a grouped layer's from a checkpoint.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::nn::{Conv2d, Module};
    /// let w = Tensor::from_vec(vec![1.0f32, 10.0], &[2, 1, 1, 1])?;
    /// let conv = Conv2d::from_tensors(w, None)?.with_groups(2);
    /// let y = conv.forward(&Tensor::from_vec(vec![1.0f32, 2.0], &[1, 2, 1, 1])?)?;
    /// assert_eq!(y.to_vec::<f32>()?, vec![1.0, 20.0]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn with_groups(mut self, groups: usize) -> Conv2d {
        self.groups = groups;
        self
    }

    /// The number of groups (1 for an ordinary convolution).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// assert_eq!(tensor_core::nn::Conv2d::new(1, 1, [1, 1], DType::F32, &tensor_core::Generator::new(0))?.groups(), 1);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn groups(&self) -> usize {
        self.groups
    }

    /// The same layer with another stride (rows, columns); it must be positive.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let conv = tensor_core::nn::Conv2d::new(1, 1, [1, 1], DType::F32, &Generator::new(0))?;
    /// assert_eq!(conv.with_stride([2, 3]).stride(), [2, 3]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn with_stride(mut self, stride: [usize; 2]) -> Conv2d {
        self.stride = stride;
        self
    }

    /// The same layer with zero padding (rows, columns) on both sides of each spatial dim.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let conv = tensor_core::nn::Conv2d::new(1, 1, [3, 3], DType::F32, &Generator::new(0))?;
    /// assert_eq!(conv.with_padding([1, 1]).padding(), [1, 1]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn with_padding(mut self, padding: [usize; 2]) -> Conv2d {
        self.padding = padding;
        self
    }

    /// The weight, `[out, in, kh, kw]`.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let conv = tensor_core::nn::Conv2d::new(2, 3, [1, 1], DType::F32, &Generator::new(0))?;
    /// assert!(conv.weight().requires_grad() && conv.weight().dims() == vec![3, 2, 1, 1]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn weight(&self) -> &Tensor {
        &self.weight
    }

    /// The bias, `[out]`, if the layer has one.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let conv = tensor_core::nn::Conv2d::new(2, 3, [1, 1], DType::F32, &Generator::new(0))?;
    /// assert_eq!(conv.bias().unwrap().dims(), vec![3]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn bias(&self) -> Option<&Tensor> {
        self.bias.as_ref()
    }

    /// The stride (rows, columns).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let conv = tensor_core::nn::Conv2d::new(1, 1, [1, 1], DType::F32, &Generator::new(0))?;
    /// assert_eq!(conv.stride(), [1, 1]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn stride(&self) -> [usize; 2] {
        self.stride
    }

    /// The zero padding (rows, columns).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let conv = tensor_core::nn::Conv2d::new(1, 1, [1, 1], DType::F32, &Generator::new(0))?;
    /// assert_eq!(conv.padding(), [0, 0]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn padding(&self) -> [usize; 2] {
        self.padding
    }
}

impl Module for Conv2d {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.conv2d_grouped(&self.weight, self.bias.as_ref(), self.stride, self.padding, self.groups)
    }

    /// `[weight, bias]` (or `[weight]` without a bias).
    fn parameters(&self) -> Vec<Tensor> {
        std::iter::once(self.weight.clone()).chain(self.bias.clone()).collect()
    }
}
