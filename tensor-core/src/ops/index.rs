//! Indexing ops: index_select, gather, one_hot, and the scatter-adds that are their gradients.

use super::dispatch::apply;
use super::{Family, InputGrads, Saves, TypeRef};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::kernels::index as k;
use crate::math::op_names;
use crate::shape::{normalize_axis, Shape, UNKNOWN};
use crate::storage::Storage;
use crate::tensor::grad_node::BackwardCtx;
use crate::tensor::Tensor;
use smallvec::smallvec;

impl Tensor {
    /// The entries of `axis` at the positions in `index` (a 1-d i64 or i32 tensor).
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let x = Tensor::from_vec(vec![10i32, 20, 30], &[3])?;
    /// let i = Tensor::from_vec(vec![2i64, 0], &[2])?;
    /// assert_eq!(x.index_select(0, &i)?.to_vec::<i32>()?, vec![30, 10]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn index_select(&self, axis: isize, index: &Tensor) -> Result<Tensor> {
        let rank = self.rank();
        let axis = normalize_axis(axis, rank).ok_or(Error::Axis { op: "index_select", axis, rank })?;
        apply(IndexOp::IndexSelect { axis }, &[self, index])
    }

    /// `out[i][j] = self[i][index[i][j]]` along `axis` (PyTorch's gather): `index` has the
    /// rank of `self` and is i64 or i32.
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2])?;
    /// let i = Tensor::from_vec(vec![1i64, 0], &[2, 1])?;
    /// assert_eq!(x.gather(1, &i)?.to_vec::<f32>()?, vec![2.0, 3.0]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn gather(&self, axis: isize, index: &Tensor) -> Result<Tensor> {
        let rank = self.rank();
        let axis = normalize_axis(axis, rank).ok_or(Error::Axis { op: "gather", axis, rank })?;
        apply(IndexOp::Gather { axis }, &[self, index])
    }

    /// A new last axis of length `classes`, 1 at each index and 0 elsewhere, in `dtype`.
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let l = Tensor::from_vec(vec![2i64, 0], &[2])?;
    /// assert_eq!(l.one_hot(3, DType::F32)?.to_vec::<f32>()?, vec![0.0, 0.0, 1.0, 1.0, 0.0, 0.0]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn one_hot(&self, classes: usize, dtype: DType) -> Result<Tensor> {
        apply(IndexOp::OneHot { classes, dtype }, &[self])
    }

    /// The `k` largest (or, unless `largest`, smallest) entries along `axis` and their
    /// positions (i64), best first (PyTorch's `topk`; ONNX `TopK`). NaN counts as larger than
    /// every number; equal entries come lower position first. The result is always sorted
    /// (an unsorted `topk` may return any order, so `sorted` changes nothing). The values
    /// are `gather(axis, indices)`, so their gradient flows back to the chosen entries.
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let x = Tensor::from_vec(vec![1.0f32, 5.0, 3.0, 5.0], &[4])?;
    /// let (values, indices) = x.topk(3, 0, true, true)?;
    /// assert_eq!(values.to_vec::<f32>()?, vec![5.0, 5.0, 3.0]);
    /// assert_eq!(indices.to_vec::<i64>()?, vec![1, 3, 2]);
    /// let (low, _) = x.topk(1, -1, false, true)?;
    /// assert_eq!(low.to_vec::<f32>()?, vec![1.0]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn topk(&self, k: usize, axis: isize, largest: bool, sorted: bool) -> Result<(Tensor, Tensor)> {
        let _ = sorted; // always sorted, which an unsorted request allows
        let rank = self.rank();
        let axis = normalize_axis(axis, rank).ok_or(Error::Axis { op: "topk", axis, rank })?;
        let indices = apply(IndexOp::TopK { axis, k, largest }, &[self])?;
        Ok((self.gather(axis as isize, &indices)?, indices))
    }
}

/// Selecting and scattering by integer indices. Inputs are listed per variant.
///
/// ```
/// use tensor_core::ops::IndexOp;
/// assert_ne!(IndexOp::Gather { axis: 0 }, IndexOp::IndexSelect { axis: 0 });
/// ```
#[allow(missing_docs)] // the fields are the Tensor methods' arguments
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum IndexOp {
    /// (x, index)
    IndexSelect { axis: usize },
    /// (g, index): index_select's adjoint.
    IndexAdd { axis: usize, size: usize },
    /// (x, index)
    Gather { axis: usize },
    /// (g, index): gather's adjoint.
    ScatterAdd { axis: usize, size: usize },
    /// (index)
    OneHot { classes: usize, dtype: DType },
    /// (x): the i64 positions of the `k` largest (or smallest) entries along `axis`.
    TopK { axis: usize, k: usize, largest: bool },
}

impl Family for IndexOp {
    op_names! { IndexOp {
        IndexSelect { axis } => "index_select", "IndexSelectBackward", format!("axis={axis}");
        IndexAdd { axis, size } => "index_add", "IndexAddBackward", format!("axis={axis} size={size}");
        Gather { axis } => "gather", "GatherBackward", format!("axis={axis}");
        ScatterAdd { axis, size } => "scatter_add", "ScatterAddBackward", format!("axis={axis} size={size}");
        OneHot { classes, dtype } => "one_hot", "NoBackward", format!("classes={classes} dtype={dtype}");
        TopK { axis, k, largest } => "topk", "NoBackward", format!("axis={axis} k={k} largest={largest}");
    }}

    fn infer(&self, inputs: &[TypeRef]) -> Result<(DType, Shape)> {
        infer(self, inputs)
    }

    fn compute(&self, inputs: &[&Storage]) -> Result<Storage> {
        compute(self, inputs)
    }

    fn backward(&self, ctx: &BackwardCtx, g: &Tensor) -> Result<InputGrads> {
        backward(self, ctx, g)
    }

    fn saves(&self) -> Saves {
        match self {
            IndexOp::OneHot { .. } | IndexOp::TopK { .. } => Saves::default(),
            IndexOp::IndexSelect { .. } | IndexOp::IndexAdd { .. } | IndexOp::Gather { .. } | IndexOp::ScatterAdd { .. } => Saves::inputs(0b10),
        }
    }

    fn is_differentiable(&self) -> bool {
        !matches!(self, IndexOp::OneHot { .. } | IndexOp::TopK { .. })
    }
}

fn need_index(op: &'static str, dtype: DType) -> Result<()> {
    match dtype {
        DType::I64 | DType::I32 => Ok(()),
        _ => Err(Error::UnsupportedDType { op, dtype, needs: "an i64 or i32 index tensor" }),
    }
}

fn infer(op: &IndexOp, inputs: &[TypeRef]) -> Result<(DType, Shape)> {
    let x = inputs[0];
    match op {
        IndexOp::IndexSelect { axis } => {
            let i = inputs[1];
            need_index("index_select", i.dtype)?;
            if i.shape.rank() != 1 {
                return Err(Error::invalid("index_select", "index", format!("must be 1-d, found shape {}", i.shape)));
            }
            Ok((x.dtype, x.shape.with_dim(*axis, i.shape[0])))
        }
        IndexOp::IndexAdd { axis, size } => {
            // One index per entry of the source along `axis` (checked where known).
            let i = inputs[1];
            need_index("index_add", i.dtype)?;
            let (d, n) = (x.shape.dims().get(*axis).copied(), i.shape.dims().first().copied());
            if i.shape.rank() != 1 || d.is_none() || !(d == n || d == Some(UNKNOWN) || n == Some(UNKNOWN)) {
                return Err(Error::shapes("index_add", x.shape, i.shape, format!("the index must be 1-d with one entry per row of axis {axis}")));
            }
            Ok((x.dtype, x.shape.with_dim(*axis, *size)))
        }
        IndexOp::Gather { axis } => {
            let i = inputs[1];
            need_index("gather", i.dtype)?;
            let fits = i.shape.rank() == x.shape.rank()
                && (0..x.shape.rank()).all(|d| d == *axis || i.shape[d] == x.shape[d] || i.shape[d] == UNKNOWN || x.shape[d] == UNKNOWN);
            if !fits {
                return Err(Error::shapes(
                    "gather",
                    x.shape,
                    i.shape,
                    format!("the index must have the input's rank and dims except along axis {axis}"),
                ));
            }
            Ok((x.dtype, i.shape.clone()))
        }
        IndexOp::ScatterAdd { axis, size } => {
            // One index per source element (checked where known).
            let i = inputs[1];
            need_index("scatter_add", i.dtype)?;
            let fits = i.shape.rank() == x.shape.rank()
                && *axis < x.shape.rank()
                && x.shape.dims().iter().zip(i.shape.dims()).all(|(&a, &b)| a == b || a == UNKNOWN || b == UNKNOWN);
            if !fits {
                return Err(Error::shapes("scatter_add", x.shape, i.shape, "the index must have the source's shape"));
            }
            Ok((x.dtype, x.shape.with_dim(*axis, *size)))
        }
        IndexOp::OneHot { classes, dtype } => {
            need_index("one_hot", x.dtype)?;
            let mut s = x.shape.clone();
            s.dims_mut().push(*classes);
            Ok((*dtype, s))
        }
        IndexOp::TopK { axis, k, .. } => {
            super::need_numeric("topk", x.dtype)?;
            let n = x.shape[*axis];
            if n != UNKNOWN && *k > n {
                return Err(Error::invalid("topk", "k", format!("{k} is more than the {n} entries along axis {axis}")));
            }
            Ok((DType::I64, x.shape.with_dim(*axis, *k)))
        }
    }
}

fn compute(op: &IndexOp, inputs: &[&Storage]) -> Result<Storage> {
    let x = inputs[0];
    Ok(match op {
        IndexOp::IndexSelect { axis } => {
            let idx = k::indices(inputs[1], x.shape()[*axis], "index_select")?;
            crate::storage::map_array!(x, a => k::index_select(a, *axis, &idx))
        }
        IndexOp::IndexAdd { axis, size } => {
            let idx = k::indices(inputs[1], *size, "index_add")?;
            crate::storage::map_numeric!(x, a => k::index_add(a, *axis, &idx, *size), bool => unreachable!("gradients are numeric"))
        }
        IndexOp::Gather { axis } => {
            let idx = k::indices(inputs[1], x.shape()[*axis], "gather")?;
            let dims = inputs[1].shape();
            crate::storage::map_array!(x, a => k::gather(a, *axis, &idx, dims.dims()))
        }
        IndexOp::ScatterAdd { axis, size } => {
            let idx = k::indices(inputs[1], *size, "scatter_add")?;
            let dims = x.shape().with_dim(*axis, *size);
            crate::storage::map_numeric!(x, a => k::scatter_add(a, *axis, &idx, dims.dims()), bool => unreachable!("gradients are numeric"))
        }
        IndexOp::OneHot { classes, dtype } => {
            let idx = k::indices(x, *classes, "one_hot")?;
            let dims = x.shape();
            match dtype {
                DType::F32 => Storage::F32(k::one_hot(&idx, dims.dims(), *classes)),
                DType::F64 => Storage::F64(k::one_hot(&idx, dims.dims(), *classes)),
                DType::I32 => Storage::I32(k::one_hot(&idx, dims.dims(), *classes)),
                DType::I64 => Storage::I64(k::one_hot(&idx, dims.dims(), *classes)),
                DType::Bool => Storage::Bool(crate::kernels::elementwise::map(&k::one_hot::<i32>(&idx, dims.dims(), *classes), |v| v != 0)),
            }
        }
        IndexOp::TopK { axis, k: count, largest } => Storage::I64(match x {
            Storage::F32(a) => k::topk(a, *axis, *count, *largest),
            Storage::F64(a) => k::topk(a, *axis, *count, *largest),
            Storage::I32(a) => k::topk(a, *axis, *count, *largest),
            Storage::I64(a) => k::topk(a, *axis, *count, *largest),
            Storage::Bool(_) => unreachable!("topk's dtype rule refuses bool"),
        }),
    })
}

fn backward(op: &IndexOp, ctx: &BackwardCtx, g: &Tensor) -> Result<InputGrads> {
    let index = ctx.input(1)?;
    let in_dim = |axis: usize| ctx.input_shape(0)[axis];
    // The selections scatter-add back; the scatter-adds select again.
    let adjoint = match *op {
        IndexOp::IndexSelect { axis } => IndexOp::IndexAdd { axis, size: in_dim(axis) },
        IndexOp::Gather { axis } => IndexOp::ScatterAdd { axis, size: in_dim(axis) },
        IndexOp::IndexAdd { axis, .. } => IndexOp::IndexSelect { axis },
        IndexOp::ScatterAdd { axis, .. } => IndexOp::Gather { axis },
        IndexOp::OneHot { .. } | IndexOp::TopK { .. } => return Err(Error::NotDifferentiable { op: op.name(), detail: "" }),
    };
    if matches!(adjoint, IndexOp::IndexAdd { size: UNKNOWN, .. } | IndexOp::ScatterAdd { size: UNKNOWN, .. }) {
        return Err(Error::NotDifferentiable { op: op.name(), detail: " along a dim that is unknown in this trace" });
    }
    Ok(smallvec![Some(apply(adjoint, &[g, &index])?), None])
}
