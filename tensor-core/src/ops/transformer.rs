//! The ops a transformer is made of, composed from other ops (so their gradients, graph forms
//! and fusion come from those): embedding lookup, layer normalization, masking, causal masks
//! and scaled dot-product attention.

use crate::dim::Dim;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::random::Generator;
use crate::tensor::Tensor;

/// What [`Tensor::scaled_dot_product_attention`] does besides `softmax(q kᵀ * scale) v`.
///
/// ```
/// use tensor_core::ops::AttentionOptions;
/// let o = AttentionOptions { causal: true, ..Default::default() };
/// assert!(o.mask.is_none() && o.scale.is_none() && o.dropout == 0.0);
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct AttentionOptions<'a> {
    /// Hide key `j` from query `i` when `j > i` (top-left aligned, as PyTorch's `is_causal`).
    pub causal: bool,
    /// A bool mask broadcastable to the scores `[.., Tq, Tk]`: true where a query must not
    /// see a key.
    pub mask: Option<&'a Tensor>,
    /// The scale of the scores (default `1 / sqrt(d)`, d the last dim of the queries).
    pub scale: Option<f64>,
    /// Dropout on the attention weights (needs `generator` when above 0).
    pub dropout: f64,
    /// The generator the dropout mask is drawn from.
    pub generator: Option<&'a Generator>,
}

impl Tensor {
    /// The rows of `self` (a table `[n, d]`) at `indices` (i64 or i32, any shape): shape
    /// `indices.dims() + [d]`. The gradient scatter-adds into the table's rows (repeated
    /// indices add up).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let table = Tensor::from_vec(vec![0.0f32, 0.5, 1.0, 1.5, 2.0, 2.5], &[3, 2])?;
    /// let tokens = Tensor::from_vec(vec![2i64, 0, 2, 1], &[2, 2])?;
    /// let e = table.embedding(&tokens)?;
    /// assert_eq!(e.dims(), vec![2, 2, 2]);
    /// assert_eq!(e.to_vec::<f32>()?, vec![2.0, 2.5, 0.0, 0.5, 2.0, 2.5, 1.0, 1.5]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn embedding(&self, indices: &Tensor) -> Result<Tensor> {
        if self.rank() != 2 {
            return Err(Error::invalid("embedding", "table", format!("must be 2-d [rows, dim], found shape {}", self.raw_shape())));
        }
        let mut dims: Vec<isize> = indices.raw_dims().iter().map(|&d| d as isize).collect();
        if indices.raw_shape().is_known() {
            dims.push(self.raw_dims()[1] as isize);
        } else {
            return Err(Error::invalid("embedding", "indices", "needs known dims; give the argument a fixed input_signature"));
        }
        self.index_select(0, &indices.reshape([-1])?)?.reshape(&dims)
    }

    /// Layer normalization (PyTorch's `layer_norm`) over the trailing dims
    /// `normalized_shape`: `(x - mean) / sqrt(var + eps)` with the biased variance, then
    /// `* weight + bias` where given (each of shape `normalized_shape`).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let x = Tensor::from_vec(vec![1.0f64, 2.0, 3.0, 10.0, 10.0, 10.0], &[2, 3])?;
    /// let y = x.layer_norm(&[3], None, None, 1e-5)?.to_vec::<f64>()?;
    /// let s = (2.0f64 / 3.0 + 1e-5).sqrt();
    /// assert!((y[0] + 1.0 / s).abs() < 1e-12 && y[1].abs() < 1e-12 && y[3] == 0.0);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn layer_norm(&self, normalized_shape: &[usize], weight: Option<&Tensor>, bias: Option<&Tensor>, eps: f64) -> Result<Tensor> {
        let k = normalized_shape.len();
        let dims = self.raw_dims();
        if k == 0 || k > dims.len() || dims[dims.len() - k..] != *normalized_shape {
            return Err(Error::invalid(
                "layer_norm",
                "normalized_shape",
                format!("{normalized_shape:?} must be the trailing dims of the input's shape {}", self.raw_shape()),
            ));
        }
        for (arg, t) in [("weight", weight), ("bias", bias)] {
            if let Some(t) = t.filter(|t| t.raw_dims() != normalized_shape) {
                return Err(Error::invalid("layer_norm", arg, format!("must have shape {normalized_shape:?}, found {}", t.raw_shape())));
            }
        }
        let axes: Vec<isize> = (1..=k as isize).map(|i| -i).collect();
        let centered = self.sub(&self.mean_axes(&axes, true)?)?;
        let var = centered.mul(&centered)?.mean_axes(&axes, true)?;
        let mut y = centered.div(&var.add(eps)?.sqrt()?)?;
        if let Some(w) = weight {
            y = y.mul(w)?;
        }
        if let Some(b) = bias {
            y = y.add(b)?;
        }
        Ok(y)
    }

    /// `value` where `mask` is true, else `self` (PyTorch's `masked_fill`); `mask` is bool and
    /// broadcasts to `self`'s shape.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2])?;
    /// let y = x.masked_fill(&Tensor::causal_mask(2), f32::NEG_INFINITY)?;
    /// assert_eq!(y.to_vec::<f32>()?, vec![1.0, f32::NEG_INFINITY, 3.0, 4.0]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn masked_fill(&self, mask: &Tensor, value: impl Into<crate::dtype::Scalar>) -> Result<Tensor> {
        let fill = Tensor::full(&[], value, self.dtype());
        let out = Tensor::where_(mask, &fill, self)?;
        if out.raw_shape() != self.raw_shape() {
            return Err(Error::shapes("masked_fill", &self.raw_shape(), &mask.raw_shape(), "the mask must broadcast to the input's shape"));
        }
        Ok(out)
    }

    /// The causal mask of `size` positions: bool `[size, size]`, true where the column (a
    /// later position) is after the row — the entries attention must hide.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let m = Tensor::causal_mask(3).to_vec::<bool>()?;
    /// assert_eq!(m, vec![false, true, true, false, false, true, false, false, false]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn causal_mask(size: usize) -> Tensor {
        let data: Vec<bool> = (0..size * size).map(|i| i % size > i / size).collect();
        Tensor::from_vec(data, &[size, size]).expect("size * size values")
    }

    /// The causal mask of `size` positions where `size` may be a [`Dim`]: in a relaxed trace
    /// a symbolic size builds the mask from `arange` comparisons, computed at each call for
    /// that call's size (the same bools [`Tensor::causal_mask`] gives).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let m = Tensor::causal_mask_dim(3)?.to_vec::<bool>()?;
    /// assert_eq!(m, Tensor::causal_mask(3).to_vec::<bool>()?);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn causal_mask_dim(size: impl Into<Dim>) -> Result<Tensor> {
        let size = size.into();
        causal_mask_of(size, size)
    }

    /// Scaled dot-product attention: `softmax(q kᵀ * scale + mask) v` over the last two dims
    /// of `self` (queries `[.., Tq, d]`), `key` `[.., Tk, d]` and `value` `[.., Tk, dv]`
    /// (leading dims broadcast). Hidden entries get `-inf` before the softmax, so their
    /// weights are exactly 0. Written with matmul (reading the key transposed, without a copy), masking,
    /// softmax and dropout, so the gradient is theirs.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::ops::AttentionOptions;
    /// let q = Tensor::randn(&[2, 4, 8], DType::F32, 1);
    /// let (k, v) = (Tensor::randn(&[2, 4, 8], DType::F32, 2), Tensor::randn(&[2, 4, 8], DType::F32, 3));
    /// let y = q.scaled_dot_product_attention(&k, &v, AttentionOptions { causal: true, ..Default::default() })?;
    /// assert_eq!(y.dims(), vec![2, 4, 8]);
    /// // The first query sees only the first key: its output is the first value.
    /// assert_eq!(y.narrow(1, 0, 1)?.to_vec::<f32>()?, v.narrow(1, 0, 1)?.to_vec::<f32>()?);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn scaled_dot_product_attention(&self, key: &Tensor, value: &Tensor, options: AttentionOptions) -> Result<Tensor> {
        if self.rank() < 2 || key.rank() < 2 || value.rank() < 2 {
            return Err(Error::shapes(
                "scaled_dot_product_attention",
                &self.raw_shape(),
                &key.raw_shape(),
                "queries, keys and values need at least 2 dims",
            ));
        }
        let d = self.raw_dims()[self.rank() - 1];
        let scale = options.scale.unwrap_or(1.0 / (d as f64).sqrt());
        let mut scores = self.matmul_t(key, false, true)?.mul(scale)?;
        if options.causal {
            let (tq, tk) = (scores.dim(scores.rank() - 2), scores.dim(scores.rank() - 1));
            let mask = causal_mask_of(tq, tk)?.to_device(scores.device())?;
            scores = scores.masked_fill(&mask, f64::NEG_INFINITY)?;
        }
        if let Some(mask) = options.mask {
            if mask.dtype() != DType::Bool {
                return Err(Error::UnsupportedDType { op: "scaled_dot_product_attention", dtype: mask.dtype(), needs: "a bool mask (true: hidden)" });
            }
            scores = scores.masked_fill(mask, f64::NEG_INFINITY)?;
        }
        let mut weights = scores.softmax(-1)?;
        if options.dropout > 0.0 {
            let g = options.generator.ok_or_else(|| {
                Error::invalid("scaled_dot_product_attention", "generator", "dropout above 0 needs a generator to draw its mask from")
            })?;
            weights = weights.dropout(options.dropout, g)?;
        }
        weights.matmul(value)
    }
}

/// The `[tq, tk]` causal mask (true where the key comes after the query): made on the host
/// for known sizes (a constant of the graph when traced), else from `arange` comparisons
/// whose sizes each call computes.
fn causal_mask_of(tq: Dim, tk: Dim) -> Result<Tensor> {
    if let (Some(tq), Some(tk)) = (tq.known(), tk.known()) {
        return Tensor::causal_mask(tq.max(tk)).narrow(0, 0, tq)?.narrow(1, 0, tk);
    }
    let rows = Tensor::arange_len(tq, DType::I64)?.reshape([tq, Dim::from(1)])?;
    let cols = Tensor::arange_len(tk, DType::I64)?.reshape([Dim::from(1), tk])?;
    cols.gt(&rows)
}
