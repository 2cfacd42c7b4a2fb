//! The indexing people expect from NumPy and PyTorch, built from the index and layout ops
//! (so each traces, exports and differentiates as they do): `chunk` and `split`, boolean
//! masks (`masked_select`, and `masked_fill_` / `masked_assign_` through a mask), and
//! integer-array indexing (`index`), whose gradient is a scatter-add.

use crate::dim::{Dim, IntoDims, ShapeArg};
use crate::dtype::{DType, Scalar};
use crate::error::{Error, Result};
use crate::shape::{broadcast_shapes, normalize_axis, UNKNOWN};
use crate::tensor::Tensor;
use smallvec::SmallVec;

impl Tensor {
    /// `n` pieces along `axis`, each `ceil(len / n)` long but the last (fewer pieces when
    /// `len` is small), as PyTorch's `chunk`.
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let x = Tensor::arange(0.0f32, 5.0);
    /// let parts: Vec<Vec<f32>> = x.chunk(2, 0)?.iter().map(|p| p.to_vec::<f32>()).collect::<Result<_>>()?;
    /// assert_eq!(parts, vec![vec![0.0, 1.0, 2.0], vec![3.0, 4.0]]);
    /// assert!(x.chunk(0, 0).is_err());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn chunk(&self, n: usize, axis: isize) -> Result<Vec<Tensor>> {
        if n == 0 {
            return Err(Error::invalid("chunk", "n", "0 pieces; ask for at least 1"));
        }
        let len = self.axis_len("chunk", axis)?;
        let size = (len + (n - 1)) / n;
        self.split(if size == 0 { Dim::from(1) } else { size }, axis)
    }

    /// Pieces of `size` along `axis`, the last one shorter when `size` does not divide the
    /// length, as PyTorch's `split(int)`. In a relaxed trace `size` may be a symbolic dim:
    /// the number of pieces is then guarded on, and their lengths are computed at run time.
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let x = Tensor::arange(0.0f32, 5.0);
    /// let lens: Vec<usize> = x.split(2, 0)?.iter().map(|p| p.numel()).collect();
    /// assert_eq!(lens, vec![2, 2, 1]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn split(&self, size: impl Into<Dim>, axis: isize) -> Result<Vec<Tensor>> {
        let size = size.into();
        if size == 0 {
            return Err(Error::invalid("split", "size", "pieces of length 0; use a size of at least 1"));
        }
        let len = self.axis_len("split", axis)?;
        if let (Some(len), Some(size)) = (len.known(), size.known()) {
            let sizes: Vec<usize> = (0..len).step_by(size).map(|start| size.min(len - start)).collect();
            return self.split_sizes(&sizes, axis);
        }
        // `ceil(len / size)` pieces (a guard on the count); all but the last of `size`.
        let count = usize::from((len + size - 1) / size);
        let sizes: Vec<Dim> = (0..count).map(|i| if i + 1 < count { size } else { len - size * (count - 1) }).collect();
        self.split_sizes(sizes, axis)
    }

    /// Pieces of the given lengths along `axis`; they must add up to its length, as
    /// PyTorch's `split(list)`. The lengths may be [`Dim`]s (see [`IntoDims`]).
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let x = Tensor::arange(0.0f32, 6.0).reshape([3, 2])?;
    /// let p = x.split_sizes(&[1, 2], 0)?;
    /// assert_eq!((p[0].dims().to_vec(), p[1].to_vec::<f32>()?), (vec![1, 2], vec![2.0, 3.0, 4.0, 5.0]));
    /// assert!(x.split_sizes(&[1, 1], 0).is_err());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn split_sizes(&self, sizes: impl IntoDims, axis: isize) -> Result<Vec<Tensor>> {
        let len = self.axis_len("split_sizes", axis)?;
        let sizes: SmallVec<[Dim; 4]> = match sizes.shape_arg() {
            ShapeArg::Symbolic(d) => d,
            known => known.known().expect("not symbolic").iter().map(|&d| Dim::from(d)).collect(),
        };
        let total = sizes.iter().fold(Dim::from(0), |sum, &d| sum + d);
        if total != len {
            let reason = format!("the sizes {sizes:?} add up to {total}, but axis {axis} has length {len}");
            return Err(Error::invalid("split_sizes", "sizes", reason));
        }
        let mut start = Dim::from(0);
        sizes
            .iter()
            .map(|&n| {
                let piece = self.narrow(axis, start, n);
                start = start + n;
                piece
            })
            .collect()
    }

    /// The length of `axis` (symbolic in a relaxed trace where the trace can name it).
    fn axis_len(&self, op: &'static str, axis: isize) -> Result<Dim> {
        let rank = self.rank();
        let a = normalize_axis(axis, rank).ok_or(Error::Axis { op, axis, rank })?;
        Ok(self.dim(a))
    }

    /// The values where `mask` (bool, broadcast to `self`'s shape) is true, in row-major
    /// order, as a 1-d tensor (PyTorch's `masked_select`, NumPy's `x[mask]`). The gradient
    /// scatters back to the selected positions.
    ///
    /// Its length depends on the mask's values, so inside a traced function the mask must be
    /// known while tracing (a constant made there): a mask computed from the function's
    /// inputs is an `Err` saying so — use `masked_fill` or `where_`, which keep the shape, or
    /// select outside the function.
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let x = Tensor::from_vec(vec![1.0f32, -2.0, 3.0, -4.0], &[2, 2])?;
    /// let m = x.gt(0.0f32)?;
    /// assert_eq!(x.masked_select(&m)?.to_vec::<f32>()?, vec![1.0, 3.0]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn masked_select(&self, mask: &Tensor) -> Result<Tensor> {
        let positions = self.mask_positions(mask)?;
        self.reshape([-1])?.index_select(0, &positions)
    }

    /// The flat positions where `mask`, broadcast to `self`'s shape, is true, as i64.
    fn mask_positions(&self, mask: &Tensor) -> Result<Tensor> {
        if mask.dtype() != DType::Bool {
            return Err(Error::UnsupportedDType { op: "masked_select", dtype: mask.dtype(), needs: "a bool mask (from a comparison)" });
        }
        let (dims, mask_dims) = (self.raw_dims(), mask.raw_dims());
        if broadcast_shapes(&self.raw_shape(), &mask.raw_shape()).as_ref() != Some(&self.raw_shape()) {
            return Err(Error::shapes("masked_select", &self.raw_shape(), &mask.raw_shape(), "the mask must broadcast to the input's shape"));
        }
        // Read on the host (no broadcast op): a constant mask stays known while tracing.
        let bits = mask.to_vec::<bool>().map_err(|e| match e {
            Error::SymbolicValue { .. } | Error::LeakedTracer { .. } => Error::invalid(
                "masked_select",
                "mask",
                "the output's length depends on the mask's values, which a graph does not know while it is traced; \
                 keep the shape with `masked_fill` or `where_`, or select outside the traced function",
            ),
            e => e,
        })?;
        let bits = broadcast_bits(&bits, &mask_dims, &dims);
        let positions: Vec<i64> = bits.iter().enumerate().filter(|(_, b)| **b).map(|(i, _)| i as i64).collect();
        let n = positions.len();
        Tensor::from_vec(positions, &[n])
    }

    /// Writes `value` where `mask` (bool, broadcast to `self`'s shape) is true, in place
    /// (PyTorch's `masked_fill_`, NumPy's `x[mask] = v`). The in-place rules apply: a leaf
    /// that requires grad is an `Err` outside `no_grad`, and the version counter is bumped.
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let x = Tensor::from_vec(vec![1.0f32, -2.0, 3.0], &[3])?;
    /// x.masked_fill_(&x.lt(0.0f32)?, 0.0f32)?;
    /// assert_eq!((x.to_vec::<f32>()?, x.version()), (vec![1.0, 0.0, 3.0], 1));
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn masked_fill_(&self, mask: &Tensor, value: impl Into<Scalar>) -> Result<()> {
        self.assign_(&self.masked_fill(mask, value)?)
    }

    /// Writes `src` (broadcast to `self`'s shape) where `mask` is true, in place; the
    /// gradient flows to `src` where the mask is true and to the old value elsewhere.
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let x = Tensor::zeros(&[2, 2], DType::F32);
    /// let rows = Tensor::from_vec(vec![true, false], &[2, 1])?;
    /// x.masked_assign_(&rows, &Tensor::from_vec(vec![5.0f32, 6.0], &[2])?)?;
    /// assert_eq!(x.to_vec::<f32>()?, vec![5.0, 6.0, 0.0, 0.0]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn masked_assign_(&self, mask: &Tensor, src: &Tensor) -> Result<()> {
        let new = Tensor::where_(mask, src, self)?;
        if new.raw_shape() != self.raw_shape() {
            return Err(Error::shapes(
                "masked_assign_",
                &self.raw_shape(),
                &new.raw_shape(),
                "the mask and the source must broadcast to the target's shape",
            ));
        }
        self.assign_(&new)
    }

    /// Integer-array (advanced) indexing on the first axis, NumPy's `x[idx]`: the rows of
    /// `self` at every position of `indices` (i64 or i32, any shape), so the result has shape
    /// `indices.shape + self.shape[1..]`. A repeated index gathers the row again; the
    /// gradient adds every use back (a scatter-add).
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[3, 2])?;
    /// let i = Tensor::from_vec(vec![2i64, 0, 2, 1], &[2, 2])?;
    /// let y = x.index(&i)?;
    /// assert_eq!(y.dims(), vec![2, 2, 2]);
    /// assert_eq!(y.to_vec::<f32>()?, vec![5.0, 6.0, 1.0, 2.0, 5.0, 6.0, 3.0, 4.0]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn index(&self, indices: &Tensor) -> Result<Tensor> {
        if self.rank() == 0 {
            return Err(Error::invalid("index", "self", "a scalar has no axis to index; index a tensor of at least 1 dim"));
        }
        let rows = self.index_select(0, &indices.reshape([-1])?)?;
        let mut dims: Vec<isize> = indices.raw_dims().iter().map(|&d| d as isize).collect();
        dims.extend(self.raw_dims()[1..].iter().map(|&d| if d == UNKNOWN { -1 } else { d as isize }));
        rows.reshape(&dims[..])
    }
}

/// `bits` of shape `from` broadcast to `to` (NumPy's rule: `from` aligned to the right, dims
/// of 1 repeated), in row-major order.
fn broadcast_bits(bits: &[bool], from: &[usize], to: &[usize]) -> Vec<bool> {
    let offset = to.len() - from.len();
    let numel: usize = to.iter().product();
    (0..numel)
        .map(|flat| {
            let (mut rest, mut at, mut stride) = (flat, 0, 1);
            for (axis, &len) in to.iter().enumerate().rev() {
                let i = rest % len.max(1);
                rest /= len.max(1);
                if axis >= offset {
                    let f = from[axis - offset];
                    at += if f == 1 { 0 } else { i * stride };
                    stride *= f;
                }
            }
            bits[at]
        })
        .collect()
}
