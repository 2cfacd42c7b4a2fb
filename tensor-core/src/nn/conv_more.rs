//! `Conv1d` and `ConvTranspose2d`: the 1-d and transposed convolution layers.

use super::init::{need_float, outside_trace, torch_default};
use super::module::Module;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::random::Generator;
use crate::tensor::Tensor;

/// Checks the weight's rank and the bias's shape and dtype, and makes both trainable.
fn trainable(
    op: &'static str,
    weight: Tensor,
    bias: Option<Tensor>,
    rank: usize,
    layout: &str,
    out: impl Fn(&[usize]) -> usize,
) -> Result<(Tensor, Option<Tensor>)> {
    if weight.rank() != rank {
        return Err(Error::invalid(op, "weight", format!("must be {rank}-d ({layout}), found shape {}", weight.raw_shape())));
    }
    if let Some(b) = &bias {
        let o = out(weight.raw_shape().dims());
        if b.raw_shape().dims() != [o] {
            return Err(Error::shapes(op, &weight.raw_shape(), &b.raw_shape(), format!("the bias must be [{o}], one value per output channel")));
        }
        if b.dtype() != weight.dtype() {
            return Err(Error::operand_dtypes(op, ("weight", weight.dtype()), ("bias", b.dtype())));
        }
    }
    Ok((weight.requires_grad_(true)?, bias.map(|b| b.requires_grad_(true)).transpose()?))
}

/// The 1-d convolution layer over `[n, c, l]` inputs (PyTorch's `nn.Conv1d`; ONNX `Conv`):
/// `weight` `[out, in / groups, k]` and an optional `bias` `[out]`, initialized as PyTorch
/// does (uniform in `±1/sqrt(fan_in)`).
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::nn::{Conv1d, Module};
/// let conv = Conv1d::new(2, 4, 3, DType::F32, &tensor_core::Generator::new(0))?.with_padding(1);
/// assert_eq!(conv.forward(&Tensor::ones(&[1, 2, 10], DType::F32))?.dims(), vec![1, 4, 10]);
/// assert_eq!(conv.parameters().len(), 2);
/// # Ok::<(), tensor_core::Error>(())
/// ```
#[derive(crate::GraphArg)]
pub struct Conv1d {
    weight: Tensor,
    bias: Option<Tensor>,
    #[graph_arg(static)]
    stride: usize,
    #[graph_arg(static)]
    padding: usize,
    #[graph_arg(static)]
    groups: usize,
}

impl Conv1d {
    /// A layer from `in_channels` to `out_channels` with a window of `kernel`, with a bias.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let conv = tensor_core::nn::Conv1d::new(3, 2, 5, DType::F64, &tensor_core::Generator::new(0))?;
    /// assert_eq!(conv.weight().dims(), vec![2, 3, 5]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn new(in_channels: usize, out_channels: usize, kernel: usize, dtype: DType, generator: &Generator) -> Result<Conv1d> {
        Conv1d::new_grouped(in_channels, out_channels, kernel, 1, dtype, generator)
    }

    /// A layer in `groups` groups (`groups == in_channels`: depthwise), with a bias.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let conv = tensor_core::nn::Conv1d::new_grouped(4, 4, 3, 4, DType::F32, &tensor_core::Generator::new(0))?;
    /// assert_eq!(conv.weight().dims(), vec![4, 1, 3]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn new_grouped(in_channels: usize, out_channels: usize, kernel: usize, groups: usize, dtype: DType, generator: &Generator) -> Result<Conv1d> {
        need_float("Conv1d", dtype)?;
        outside_trace()?;
        if groups == 0 || !in_channels.is_multiple_of(groups) || !out_channels.is_multiple_of(groups) {
            return Err(Error::invalid("Conv1d", "groups", format!("{groups} must be positive and divide {in_channels} and {out_channels}")));
        }
        let fan_in = in_channels / groups * kernel;
        let weight = torch_default(&[out_channels, in_channels / groups, kernel], fan_in, dtype, generator)?;
        let bias = torch_default(&[out_channels], fan_in, dtype, generator)?;
        Ok(Conv1d { groups, ..Conv1d::from_tensors(weight, Some(bias))? })
    }

    /// A layer with these tensors (made trainable): `weight` `[out, in, k]`, `bias` `[out]`.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::nn::{Conv1d, Module};
    /// let conv = Conv1d::from_tensors(Tensor::from_vec(vec![1.0f32, -1.0], &[1, 1, 2])?, None)?;
    /// let y = conv.forward(&Tensor::from_vec(vec![1.0f32, 2.0, 4.0], &[1, 1, 3])?)?;
    /// assert_eq!(y.to_vec::<f32>()?, vec![-1.0, -2.0]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn from_tensors(weight: Tensor, bias: Option<Tensor>) -> Result<Conv1d> {
        let (weight, bias) = trainable("Conv1d", weight, bias, 3, "[out, in, k]", |w| w[0])?;
        Ok(Conv1d { weight, bias, stride: 1, padding: 0, groups: 1 })
    }

    /// The same layer with another stride.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let conv = tensor_core::nn::Conv1d::new(1, 1, 2, DType::F32, &tensor_core::Generator::new(0))?.with_stride(2);
    /// assert_eq!(conv.stride(), 2);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn with_stride(mut self, stride: usize) -> Conv1d {
        self.stride = stride;
        self
    }

    /// The same layer with zero padding on both ends.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let conv = tensor_core::nn::Conv1d::new(1, 1, 3, DType::F32, &tensor_core::Generator::new(0))?.with_padding(1);
    /// assert_eq!(conv.padding(), 1);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn with_padding(mut self, padding: usize) -> Conv1d {
        self.padding = padding;
        self
    }

    /// The filters, `[out, in / groups, k]`.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let conv = tensor_core::nn::Conv1d::new(2, 3, 1, DType::F32, &tensor_core::Generator::new(0))?;
    /// assert!(conv.weight().requires_grad() && conv.bias().is_some());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn weight(&self) -> &Tensor {
        &self.weight
    }

    /// The bias, `[out]`, if the layer has one.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let conv = tensor_core::nn::Conv1d::from_tensors(Tensor::ones(&[1, 1, 1], DType::F32), None)?;
    /// assert!(conv.bias().is_none());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn bias(&self) -> Option<&Tensor> {
        self.bias.as_ref()
    }

    /// The stride.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// assert_eq!(tensor_core::nn::Conv1d::from_tensors(Tensor::ones(&[1, 1, 1], DType::F32), None)?.stride(), 1);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn stride(&self) -> usize {
        self.stride
    }

    /// The padding on each end.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// assert_eq!(tensor_core::nn::Conv1d::from_tensors(Tensor::ones(&[1, 1, 1], DType::F32), None)?.padding(), 0);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn padding(&self) -> usize {
        self.padding
    }
}

impl Module for Conv1d {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.conv1d(&self.weight, self.bias.as_ref(), self.stride, self.padding, self.groups)
    }

    fn parameters(&self) -> Vec<Tensor> {
        std::iter::once(self.weight.clone()).chain(self.bias.clone()).collect()
    }
}

/// The transposed 2-d convolution layer over NCHW inputs (PyTorch's `nn.ConvTranspose2d`;
/// ONNX `ConvTranspose`): `weight` `[in, out / groups, kh, kw]` and an optional `bias`
/// `[out]`, initialized as PyTorch does; see [`Tensor::conv_transpose2d`].
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::nn::{ConvTranspose2d, Module};
/// let up = ConvTranspose2d::new(4, 2, [2, 2], DType::F32, &tensor_core::Generator::new(0))?.with_stride([2, 2]);
/// assert_eq!(up.forward(&Tensor::ones(&[1, 4, 5, 5], DType::F32))?.dims(), vec![1, 2, 10, 10]);
/// # Ok::<(), tensor_core::Error>(())
/// ```
#[derive(crate::GraphArg)]
pub struct ConvTranspose2d {
    weight: Tensor,
    bias: Option<Tensor>,
    #[graph_arg(static)]
    stride: [usize; 2],
    #[graph_arg(static)]
    padding: [usize; 2],
    #[graph_arg(static)]
    output_padding: [usize; 2],
    #[graph_arg(static)]
    groups: usize,
}

impl ConvTranspose2d {
    /// A layer from `in_channels` to `out_channels` with a `kernel` window, with a bias.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let up = tensor_core::nn::ConvTranspose2d::new(3, 2, [3, 3], DType::F32, &tensor_core::Generator::new(0))?;
    /// assert_eq!(up.weight().dims(), vec![3, 2, 3, 3]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn new(in_channels: usize, out_channels: usize, kernel: [usize; 2], dtype: DType, generator: &Generator) -> Result<ConvTranspose2d> {
        need_float("ConvTranspose2d", dtype)?;
        outside_trace()?;
        let fan_in = out_channels * kernel[0] * kernel[1];
        let weight = torch_default(&[in_channels, out_channels, kernel[0], kernel[1]], fan_in, dtype, generator)?;
        let bias = torch_default(&[out_channels], fan_in, dtype, generator)?;
        ConvTranspose2d::from_tensors(weight, Some(bias), 1)
    }

    /// A layer with these tensors (made trainable): `weight` `[in, out / groups, kh, kw]`,
    /// `bias` `[out]`, in `groups` groups.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::nn::{ConvTranspose2d, Module};
    /// let up = ConvTranspose2d::from_tensors(Tensor::ones(&[1, 1, 2, 2], DType::F32), None, 1)?;
    /// let y = up.forward(&Tensor::from_vec(vec![3.0f32], &[1, 1, 1, 1])?)?;
    /// assert_eq!(y.to_vec::<f32>()?, vec![3.0; 4]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn from_tensors(weight: Tensor, bias: Option<Tensor>, groups: usize) -> Result<ConvTranspose2d> {
        if groups == 0 {
            return Err(Error::invalid("ConvTranspose2d", "groups", "must be positive"));
        }
        let (weight, bias) = trainable("ConvTranspose2d", weight, bias, 4, "[in, out / groups, kh, kw]", |w| w[1] * groups)?;
        Ok(ConvTranspose2d { weight, bias, stride: [1, 1], padding: [0, 0], output_padding: [0, 0], groups })
    }

    /// The same layer with another stride.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let up = tensor_core::nn::ConvTranspose2d::new(1, 1, [2, 2], DType::F32, &tensor_core::Generator::new(0))?.with_stride([2, 2]);
    /// assert_eq!(up.stride(), [2, 2]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn with_stride(mut self, stride: [usize; 2]) -> ConvTranspose2d {
        self.stride = stride;
        self
    }

    /// The same layer with `padding` taken off each side of the output.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let up = tensor_core::nn::ConvTranspose2d::new(1, 1, [3, 3], DType::F32, &tensor_core::Generator::new(0))?.with_padding([1, 1]);
    /// assert_eq!(up.padding(), [1, 1]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn with_padding(mut self, padding: [usize; 2]) -> ConvTranspose2d {
        self.padding = padding;
        self
    }

    /// The same layer with `output_padding` added to one side of the output (below the
    /// stride).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::nn::{ConvTranspose2d, Module};
    /// let up = ConvTranspose2d::new(1, 1, [3, 3], DType::F32, &tensor_core::Generator::new(0))?
    ///     .with_stride([2, 2]).with_padding([1, 1]).with_output_padding([1, 1]);
    /// assert_eq!(up.forward(&Tensor::ones(&[1, 1, 4, 4], DType::F32))?.dims(), vec![1, 1, 8, 8]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn with_output_padding(mut self, output_padding: [usize; 2]) -> ConvTranspose2d {
        self.output_padding = output_padding;
        self
    }

    /// The filters, `[in, out / groups, kh, kw]`.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let up = tensor_core::nn::ConvTranspose2d::new(2, 3, [1, 1], DType::F32, &tensor_core::Generator::new(0))?;
    /// assert!(up.weight().requires_grad() && up.bias().is_some());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn weight(&self) -> &Tensor {
        &self.weight
    }

    /// The bias, `[out]`, if the layer has one.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let up = tensor_core::nn::ConvTranspose2d::from_tensors(Tensor::ones(&[1, 1, 1, 1], DType::F32), None, 1)?;
    /// assert!(up.bias().is_none());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn bias(&self) -> Option<&Tensor> {
        self.bias.as_ref()
    }

    /// The stride.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// assert_eq!(tensor_core::nn::ConvTranspose2d::from_tensors(Tensor::ones(&[1, 1, 1, 1], DType::F32), None, 1)?.stride(), [1, 1]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn stride(&self) -> [usize; 2] {
        self.stride
    }

    /// The padding taken off each side.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// assert_eq!(tensor_core::nn::ConvTranspose2d::from_tensors(Tensor::ones(&[1, 1, 1, 1], DType::F32), None, 1)?.padding(), [0, 0]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn padding(&self) -> [usize; 2] {
        self.padding
    }
}

impl Module for ConvTranspose2d {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.conv_transpose2d(&self.weight, self.bias.as_ref(), self.stride, self.padding, self.output_padding, self.groups)
    }

    fn parameters(&self) -> Vec<Tensor> {
        std::iter::once(self.weight.clone()).chain(self.bias.clone()).collect()
    }
}
