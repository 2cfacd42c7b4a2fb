//! `Linear`: the fully connected layer `y = x @ Wᵀ + b`, PyTorch's layout.

use super::init::{need_float, outside_trace, torch_default};
use super::module::Module;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::random::Generator;
use crate::tensor::Tensor;

/// A fully connected layer, `y = x @ weightᵀ + bias`, as PyTorch's `nn.Linear`.
///
/// Layout: `weight` is `[out_features, in_features]` and `bias` `[out_features]`, PyTorch's
/// layout and names, so a PyTorch `state_dict` saved as safetensors loads as it is. The
/// product is one [`Tensor::matmul_t`] reading the weight transposed: no transposed tensor is
/// made in eager mode or in a graph (the matmul kernel reads the weight with swapped strides,
/// or packs it itself where that measured faster), and the gradients are a plain product
/// (`g @ W`) and one laid out as the weight (`gᵀ @ x`). The input is `[.., in_features]` (any
/// leading dims) and the output `[.., out_features]`.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::nn::{Linear, Module};
/// // 2 inputs, 3 outputs: the weight is [3, 2], one row per output.
/// let w = Tensor::from_vec(vec![1.0f32, 4.0, 2.0, 5.0, 3.0, 6.0], &[3, 2])?;
/// let b = Tensor::from_vec(vec![0.5f32, 0.0, -0.5], &[3])?;
/// let layer = Linear::from_tensors(w, Some(b))?;
/// let y = layer.forward(&Tensor::from_vec(vec![1.0f32, 1.0], &[1, 2])?)?;
/// assert_eq!(y.to_vec::<f32>()?, vec![5.5, 7.0, 8.5]);
/// # Ok::<(), tensor_core::Error>(())
/// ```
///
/// A `Linear` is a [`GraphArg`](crate::GraphArg): a field of a `#[derive(GraphArg)]` model
/// (its tensors are then leaves of the model's graph functions) whose state dict entries are
/// `weight` and `bias`:
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::nn::Linear;
/// #[derive(GraphArg)]
/// struct Net { fc1: Linear, fc2: Linear }
/// let g = &Generator::new(0);
/// let net = Net { fc1: Linear::new(4, 8, DType::F32, g)?, fc2: Linear::new_without_bias(8, 2, DType::F32, g)? };
/// let names: Vec<String> = net.state_dict()?.into_iter().map(|(n, _)| n).collect();
/// assert_eq!(names, ["fc1.weight", "fc1.bias", "fc2.weight"]);
/// # Ok::<(), tensor_core::Error>(())
/// ```
#[derive(crate::GraphArg)]
pub struct Linear {
    weight: Tensor,
    bias: Option<Tensor>,
}

impl Linear {
    /// A layer with a bias, initialized as PyTorch's `nn.Linear`: weight and bias drawn from
    /// `U(-1/sqrt(in), 1/sqrt(in))` from `generator` (see [`init`](super::init)). The parameters require grad. `dtype` must be
    /// f32 or f64.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::nn::{Linear, Module};
    /// let layer = Linear::new(4, 2, DType::F32, &Generator::new(0))?;
    /// assert_eq!(layer.weight().dims(), vec![2, 4]); // [out, in]
    /// assert_eq!(layer.forward(&Tensor::ones(&[5, 4], DType::F32))?.dims(), vec![5, 2]);
    /// assert!(Linear::new(4, 2, DType::I32, &Generator::new(0)).is_err());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn new(in_features: usize, out_features: usize, dtype: DType, generator: &Generator) -> Result<Linear> {
        Self::init(in_features, out_features, true, dtype, generator)
    }

    /// A layer without a bias (`y = x @ W`), initialized as [`Linear::new`].
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::nn::{Linear, Module};
    /// let layer = Linear::new_without_bias(4, 2, DType::F64, &Generator::new(0))?;
    /// assert!(layer.bias().is_none());
    /// assert_eq!(layer.parameters().len(), 1);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn new_without_bias(in_features: usize, out_features: usize, dtype: DType, generator: &Generator) -> Result<Linear> {
        Self::init(in_features, out_features, false, dtype, generator)
    }

    fn init(in_features: usize, out_features: usize, bias: bool, dtype: DType, generator: &Generator) -> Result<Linear> {
        need_float("Linear", dtype)?;
        outside_trace()?;
        let weight = torch_default(&[out_features, in_features], in_features, dtype, generator)?;
        let bias = bias.then(|| torch_default(&[out_features], in_features, dtype, generator)).transpose()?;
        Linear::from_tensors(weight, bias)
    }

    /// A layer from given tensors: `weight` `[out, in]` and an optional `bias` `[out]` of the
    /// same float dtype (for example from [`init`](super::init)). They are marked
    /// `requires_grad_(true)`; the layer holds these very handles.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::nn::Linear;
    /// let w = Tensor::zeros(&[2, 3], DType::F32); // 3 inputs, 2 outputs
    /// let layer = Linear::from_tensors(w.clone(), None)?;
    /// assert!(layer.weight().same_as(&w) && w.requires_grad());
    /// assert!(Linear::from_tensors(w, Some(Tensor::zeros(&[3], DType::F32))).is_err());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn from_tensors(weight: Tensor, bias: Option<Tensor>) -> Result<Linear> {
        if weight.rank() != 2 {
            return Err(Error::invalid("Linear", "weight", format!("must be 2-d [out, in] (PyTorch's layout), found shape {}", weight.raw_shape())));
        }
        if let Some(b) = &bias {
            let out = weight.raw_dims()[0];
            if b.raw_dims() != [out] {
                return Err(Error::shapes("Linear", &weight.raw_shape(), &b.raw_shape(), format!("the bias must be [{out}], one value per output")));
            }
            if b.dtype() != weight.dtype() {
                return Err(Error::operand_dtypes("Linear", ("weight", weight.dtype()), ("bias", b.dtype())));
            }
        }
        let weight = weight.requires_grad_(true)?;
        let bias = bias.map(|b| b.requires_grad_(true)).transpose()?;
        Ok(Linear { weight, bias })
    }

    /// The weight, `[out_features, in_features]`.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let layer = tensor_core::nn::Linear::new(3, 2, DType::F32, &Generator::new(0))?;
    /// assert!(layer.weight().requires_grad() && layer.weight().is_leaf());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn weight(&self) -> &Tensor {
        &self.weight
    }

    /// The bias, `[out_features]`, if the layer has one.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let layer = tensor_core::nn::Linear::new(3, 2, DType::F32, &Generator::new(0))?;
    /// assert_eq!(layer.bias().unwrap().dims(), vec![2]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn bias(&self) -> Option<&Tensor> {
        self.bias.as_ref()
    }
}

impl Linear {
    /// An input whose last dim is not `in_features` is an error naming the layer's layout
    /// (the product's own message would show the weight `[out, in]` as its right operand).
    fn check_input(&self, x: &Tensor) -> Result<()> {
        let (shape, in_features) = (x.raw_shape(), self.weight.raw_dims()[1]);
        match shape.dims().last() {
            Some(&d) if d == in_features || d == crate::shape::UNKNOWN => Ok(()),
            _ => {
                let (w, out) = (self.weight.raw_shape(), self.weight.raw_dims()[0]);
                let hint = format!("the input's last dim must be in_features = {in_features} (the weight is [out, in] = [{out}, {in_features}])");
                Err(Error::shapes("Linear", &shape, &w, hint))
            }
        }
    }
}

impl Module for Linear {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.check_input(x)?;
        // x @ Wᵀ with W read transposed where it lies: no transpose node or copy to fold away.
        let y = x.matmul_t(&self.weight, false, true)?;
        match &self.bias {
            Some(b) => y.add(b),
            None => Ok(y),
        }
    }

    /// `[weight, bias]` (or `[weight]` without a bias).
    fn parameters(&self) -> Vec<Tensor> {
        std::iter::once(self.weight.clone()).chain(self.bias.clone()).collect()
    }
}
