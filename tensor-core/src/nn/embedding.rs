//! `Embedding`: a table of vectors looked up by integer index.

use super::init::need_float;
use super::module::Module;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::random::Generator;
use crate::tensor::Tensor;

/// A lookup table `[num_embeddings, dim]` (PyTorch's `nn.Embedding`): `forward` takes
/// integer indices of any shape (i64 or i32) and gives their rows, shape
/// `indices.dims() + [dim]`. Its gradient adds each looked-up row's gradient into the table.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::nn::{Embedding, Module};
/// let emb = Embedding::new(10, 4, DType::F32, &Generator::new(0))?;
/// let tokens = Tensor::from_vec(vec![1i64, 7, 7], &[1, 3])?;
/// let x = emb.forward(&tokens)?;
/// assert_eq!(x.dims(), vec![1, 3, 4]);
/// x.sum()?.backward()?;
/// let g = emb.weight().grad().unwrap().to_vec::<f32>()?;
/// assert_eq!((g[4], g[28], g[0]), (1.0, 2.0, 0.0)); // row 1 once, row 7 twice, row 0 never
/// # Ok::<(), tensor_core::Error>(())
/// ```
///
/// As a `GraphArg` (derived) the table is the one leaf, `weight` (PyTorch's name).
#[derive(crate::GraphArg)]
pub struct Embedding {
    weight: Tensor,
}

impl Embedding {
    /// A table drawn from the standard normal distribution (PyTorch's default) with
    /// `generator` (see [`init`](super::init)), requiring
    /// grad. `dtype` must be f32 or f64.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let emb = tensor_core::nn::Embedding::new(5, 3, DType::F64, &Generator::new(1))?;
    /// assert_eq!(emb.weight().dims(), vec![5, 3]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn new(num_embeddings: usize, dim: usize, dtype: DType, generator: &Generator) -> Result<Embedding> {
        need_float("Embedding", dtype)?;
        super::init::outside_trace()?;
        Embedding::from_tensor(super::init::normal(&[num_embeddings, dim], 0.0, 1.0, dtype, generator)?)
    }

    /// A layer holding `weight` (`[num_embeddings, dim]`, float), marked
    /// `requires_grad_(true)`.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::nn::Embedding;
    /// assert!(Embedding::from_tensor(Tensor::zeros(&[4], DType::F32)).is_err());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn from_tensor(weight: Tensor) -> Result<Embedding> {
        need_float("Embedding", weight.dtype())?;
        if weight.rank() != 2 {
            return Err(Error::invalid("Embedding", "weight", format!("must be 2-d [num_embeddings, dim], found shape {}", weight.raw_shape())));
        }
        Ok(Embedding { weight: weight.requires_grad_(true)? })
    }

    /// A layer holding pretrained `weight` (`[num_embeddings, dim]`, float), as PyTorch's
    /// `Embedding.from_pretrained(weight, freeze)`: with `freeze` the table does not require
    /// grad and is not among the parameters; otherwise it is trainable.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::nn::{Embedding, Module};
    /// let table = Tensor::from_vec(vec![0.0f32, 1.0, 2.0, 3.0], &[2, 2])?;
    /// let frozen = Embedding::from_pretrained(table.clone(), true)?;
    /// assert!(!frozen.weight().requires_grad() && frozen.parameters().is_empty());
    /// let ids = Tensor::from_vec(vec![1i64], &[1])?;
    /// assert_eq!(frozen.forward(&ids)?.to_vec::<f32>()?, vec![2.0, 3.0]);
    /// assert_eq!(Embedding::from_pretrained(table, false)?.parameters().len(), 1);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn from_pretrained(weight: Tensor, freeze: bool) -> Result<Embedding> {
        let layer = Embedding::from_tensor(weight.detach())?;
        layer.weight.requires_grad_(!freeze)?;
        Ok(layer)
    }

    /// The table, `[num_embeddings, dim]`.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let emb = tensor_core::nn::Embedding::new(2, 3, DType::F32, &Generator::new(0))?;
    /// assert!(emb.weight().requires_grad());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn weight(&self) -> &Tensor {
        &self.weight
    }
}

impl Module for Embedding {
    fn forward(&self, indices: &Tensor) -> Result<Tensor> {
        self.weight.embedding(indices)
    }

    /// `[weight]`, or nothing when the table is frozen.
    fn parameters(&self) -> Vec<Tensor> {
        Some(self.weight.clone()).filter(Tensor::requires_grad).into_iter().collect()
    }
}
