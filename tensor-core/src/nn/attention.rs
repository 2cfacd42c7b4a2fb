//! `CausalSelfAttention`: the attention block of a GPT-style decoder.

use super::dropout::Dropout;
use super::linear::Linear;
use super::module::Module;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::ops::AttentionOptions;
use crate::random::Generator;
use crate::tensor::Tensor;

/// Multi-head causal self-attention (nanoGPT's `CausalSelfAttention`): for `x` `[b, t, c]`,
/// one projection to queries, keys and values (a [`Linear`] from `c` to `3c`, in that order
/// along its output), `heads` heads of `c / heads` dims each attending to the current and
/// earlier positions (scaled dot-product attention with a causal mask), and an output
/// projection (a [`Linear`] from `c` to `c`). With dropout, the attention weights and the
/// output are dropped while training.
///
/// Its state dict uses nanoGPT's names and PyTorch's layouts: `c_attn.weight` `[3c, c]`,
/// `c_attn.bias` `[3c]`, `c_proj.weight` `[c, c]`, `c_proj.bias` `[c]`.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::nn::{CausalSelfAttention, Module};
/// let attn = CausalSelfAttention::new(16, 4, DType::F32, &Generator::new(0))?;
/// let x = Tensor::randn(&[2, 5, 16], DType::F32, 1);
/// let y = attn.forward(&x)?;
/// assert_eq!(y.dims(), vec![2, 5, 16]);
/// // Position 0 sees only itself: changing a later position leaves it as it was.
/// let x2 = Tensor::concat(&[&x.narrow(1, 0, 4)?, &x.narrow(1, 4, 1)?.mul(3.0)?], 1)?;
/// assert_eq!(attn.forward(&x2)?.narrow(1, 0, 4)?.to_vec::<f32>()?, y.narrow(1, 0, 4)?.to_vec::<f32>()?);
/// # Ok::<(), tensor_core::Error>(())
/// ```
#[derive(crate::GraphArg)]
pub struct CausalSelfAttention {
    /// nanoGPT's name: the state dict's `c_attn.weight`.
    c_attn: Linear,
    /// nanoGPT's name: the state dict's `c_proj.weight`.
    c_proj: Linear,
    heads: usize,
    dropout: Option<Dropout>,
}

impl CausalSelfAttention {
    /// A block for width `dim` with `heads` heads (`dim` a multiple of `heads`), its two
    /// projections initialized as [`Linear::new`]; no dropout.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::nn::CausalSelfAttention;
    /// assert!(CausalSelfAttention::new(10, 4, DType::F32, &Generator::new(0)).is_err());
    /// ```
    pub fn new(dim: usize, heads: usize, dtype: DType, generator: &Generator) -> Result<CausalSelfAttention> {
        check_heads(dim, heads)?;
        CausalSelfAttention::from_linears(Linear::new(dim, 3 * dim, dtype, generator)?, Linear::new(dim, dim, dtype, generator)?, heads)
    }

    /// A block from its projections: `qkv` from `c` to `3c` (queries, keys, values along the
    /// output; weight `[3c, c]`) and `proj` from `c` to `c`.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::nn::{CausalSelfAttention, Linear};
    /// let qkv = Linear::from_tensors(Tensor::zeros(&[24, 8], DType::F32), None)?;
    /// let proj = Linear::from_tensors(Tensor::zeros(&[8, 8], DType::F32), None)?;
    /// assert_eq!(CausalSelfAttention::from_linears(qkv, proj, 2)?.heads(), 2);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn from_linears(qkv: Linear, proj: Linear, heads: usize) -> Result<CausalSelfAttention> {
        let (out, c) = (qkv.weight().raw_dims()[0], qkv.weight().raw_dims()[1]);
        check_heads(c, heads)?;
        if out != 3 * c || proj.weight().raw_dims() != [c, c] {
            return Err(Error::shapes(
                "CausalSelfAttention",
                &qkv.weight().raw_shape(),
                &proj.weight().raw_shape(),
                format!("the projections' weights must be [{}, {c}] and [{c}, {c}] ([out, in])", 3 * c),
            ));
        }
        Ok(CausalSelfAttention { c_attn: qkv, c_proj: proj, heads, dropout: None })
    }

    /// The same block with dropout `p` on the attention weights and on its output, drawn
    /// from `generator`.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::nn::CausalSelfAttention;
    /// let g = Generator::new(0);
    /// let attn = CausalSelfAttention::new(8, 2, DType::F32, &Generator::new(0))?.with_dropout(0.1, &g)?;
    /// assert!(attn.training());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn with_dropout(mut self, p: f64, generator: &Generator) -> Result<CausalSelfAttention> {
        self.dropout = Some(Dropout::new(p, generator)?);
        Ok(self)
    }

    /// Switches dropout between training and evaluation mode (no effect without dropout).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::nn::CausalSelfAttention;
    /// let mut attn = CausalSelfAttention::new(8, 2, DType::F32, &Generator::new(0))?.with_dropout(0.1, &Generator::new(0))?;
    /// attn.set_training(false);
    /// assert!(!attn.training());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn set_training(&mut self, training: bool) {
        if let Some(d) = &mut self.dropout {
            d.set_training(training);
        }
    }

    /// True when dropout is on and in training mode.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let attn = tensor_core::nn::CausalSelfAttention::new(8, 2, DType::F32, &Generator::new(0))?;
    /// assert!(!attn.training());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn training(&self) -> bool {
        self.dropout.as_ref().is_some_and(|d| d.training() && d.p() > 0.0)
    }

    /// The number of heads.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let attn = tensor_core::nn::CausalSelfAttention::new(8, 2, DType::F32, &Generator::new(0))?;
    /// assert_eq!(attn.heads(), 2);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn heads(&self) -> usize {
        self.heads
    }

    /// `x` `[b, t, h * d]` as `[b, h, t, d]`.
    fn split_heads(&self, x: &Tensor) -> Result<Tensor> {
        let (b, t, c) = (x.raw_dims()[0], x.raw_dims()[1], x.raw_dims()[2]);
        x.reshape([b, t, self.heads, c / self.heads])?.transpose(1, 2)
    }
}

fn check_heads(dim: usize, heads: usize) -> Result<()> {
    if heads == 0 || !dim.is_multiple_of(heads) {
        return Err(Error::invalid("CausalSelfAttention", "heads", format!("the width {dim} must be a positive multiple of the {heads} heads")));
    }
    Ok(())
}

impl Module for CausalSelfAttention {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        if x.rank() != 3 || !x.raw_shape().is_known() {
            return Err(Error::invalid(
                "CausalSelfAttention",
                "x",
                format!("must be [batch, time, channels] with known dims, found shape {}", x.raw_shape()),
            ));
        }
        let (b, t, c) = (x.raw_dims()[0], x.raw_dims()[1], x.raw_dims()[2]);
        let qkv = self.c_attn.forward(x)?;
        let q = self.split_heads(&qkv.narrow(2, 0, c)?)?;
        let k = self.split_heads(&qkv.narrow(2, c, c)?)?;
        let v = self.split_heads(&qkv.narrow(2, 2 * c, c)?)?;
        let drop = self.dropout.as_ref().filter(|_| self.training());
        let options =
            AttentionOptions { causal: true, dropout: drop.map_or(0.0, Dropout::p), generator: drop.map(|d| d.generator()), ..Default::default() };
        let y = q.scaled_dot_product_attention(&k, &v, options)?.transpose(1, 2)?.reshape([b, t, c])?;
        let y = self.c_proj.forward(&y)?;
        match drop {
            Some(d) => d.forward(&y),
            None => Ok(y),
        }
    }

    /// The query-key-value projection's weight and bias, then the output projection's.
    fn parameters(&self) -> Vec<Tensor> {
        let mut p = self.c_attn.parameters();
        p.extend(self.c_proj.parameters());
        p
    }
}
