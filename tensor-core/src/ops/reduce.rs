//! Reductions: sum, mean, max, min over all elements or a list of axes (with keepdim), and
//! argmax along one axis.

use super::dispatch::apply;
use super::{need_float, need_numeric, Axes, Family, InputGrads, ReduceOp, Saves, TypeRef};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::kernels::reduce::{argmax, reduce, Reduction};
use crate::math::op_names;
use crate::math::Num;
use crate::shape::{normalize_axis, Shape, UNKNOWN};
use crate::storage::{Array, Storage};
use crate::tensor::grad_node::BackwardCtx;
use crate::tensor::Tensor;
use smallvec::smallvec;

impl Tensor {
    /// The sum of all elements, as a 0-d tensor (a bool tensor counts its `true`s as i64).
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let x = Tensor::from_vec(vec![1i32, 2, 3], &[3])?;
    /// assert_eq!(x.sum()?.item::<i32>()?, 6);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn sum(&self) -> Result<Tensor> {
        let x = if self.dtype() == DType::Bool { self.cast(DType::I64)? } else { self.clone() };
        x.reduce_all(ReduceOp::Sum)
    }

    /// The mean of all elements (float dtypes), as a 0-d tensor.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 6.0], &[2, 2])?;
    /// assert_eq!(x.mean()?.item::<f32>()?, 3.0);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn mean(&self) -> Result<Tensor> {
        self.reduce_all(ReduceOp::Mean)
    }

    /// The largest element (NaN propagates), as a 0-d tensor.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let x = Tensor::from_vec(vec![1, 7, -3], &[3])?;
    /// assert_eq!(x.max()?.item::<i32>()?, 7);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn max(&self) -> Result<Tensor> {
        self.reduce_all(ReduceOp::Max)
    }

    /// The smallest element (NaN propagates), as a 0-d tensor.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let x = Tensor::from_vec(vec![1, 7, -3], &[3])?;
    /// assert_eq!(x.min()?.item::<i32>()?, -3);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn min(&self) -> Result<Tensor> {
        self.reduce_all(ReduceOp::Min)
    }

    /// The sum over `axes` (negative counts from the end); `keepdim` keeps them as size 1.
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2])?;
    /// assert_eq!(x.sum_axes(&[0], false)?.to_vec::<f32>()?, vec![4.0, 6.0]);
    /// assert_eq!(x.sum_axes(&[-1], true)?.dims(), vec![2, 1]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn sum_axes(&self, axes: &[isize], keepdim: bool) -> Result<Tensor> {
        self.reduce_axes(ReduceOp::Sum, axes, keepdim)
    }

    /// The mean over `axes` (float dtypes).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 6.0], &[2, 2])?;
    /// assert_eq!(x.mean_axes(&[0], false)?.to_vec::<f32>()?, vec![2.0, 4.0]);
    /// assert_eq!(x.mean_axes(&[-1], true)?.dims(), vec![2, 1]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn mean_axes(&self, axes: &[isize], keepdim: bool) -> Result<Tensor> {
        self.reduce_axes(ReduceOp::Mean, axes, keepdim)
    }

    /// The maximum over `axes`.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let x = Tensor::from_vec(vec![1.0f32, 5.0, 3.0, 2.0], &[2, 2])?;
    /// assert_eq!(x.max_axes(&[1], false)?.to_vec::<f32>()?, vec![5.0, 3.0]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn max_axes(&self, axes: &[isize], keepdim: bool) -> Result<Tensor> {
        self.reduce_axes(ReduceOp::Max, axes, keepdim)
    }

    /// The minimum over `axes`.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let x = Tensor::from_vec(vec![1.0f32, 5.0, 3.0, 2.0], &[2, 2])?;
    /// assert_eq!(x.min_axes(&[0], true)?.to_vec::<f32>()?, vec![1.0, 2.0]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn min_axes(&self, axes: &[isize], keepdim: bool) -> Result<Tensor> {
        self.reduce_axes(ReduceOp::Min, axes, keepdim)
    }

    /// The product over `axes` (numeric dtypes; 1 over an empty set); its gradient is the
    /// product of the other elements, zeros included.
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2])?;
    /// assert_eq!(x.prod_axes(&[1], false)?.to_vec::<f32>()?, vec![2.0, 12.0]);
    /// assert_eq!(Tensor::zeros(&[0, 2], DType::F32).prod_axes(&[0], false)?.to_vec::<f32>()?, vec![1.0, 1.0]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn prod_axes(&self, axes: &[isize], keepdim: bool) -> Result<Tensor> {
        self.reduce_axes(ReduceOp::Prod, axes, keepdim)
    }

    /// The index (i64) of the first largest element along `axis`.
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let x = Tensor::from_vec(vec![1.0f32, 9.0, 3.0, 7.0, 2.0, 0.0], &[2, 3])?;
    /// assert_eq!(x.argmax(1, false)?.to_vec::<i64>()?, vec![1, 0]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn argmax(&self, axis: isize, keepdim: bool) -> Result<Tensor> {
        let axis = normalize_axis(axis, self.rank()).ok_or(Error::Axis { op: "argmax", axis, rank: self.rank() })?;
        apply(ReductionOp::Argmax { axis, keepdim }, &[self])
    }

    fn reduce_all(&self, op: ReduceOp) -> Result<Tensor> {
        if self.raw_shape().is_unknown_rank() {
            // Traced at an unknown rank: flattened first, which reduces the elements in the
            // order (and so to the bits) a reduction over all axes does.
            return self.reshape([-1])?.reduce_axes(op, &[0], false);
        }
        let all: Vec<isize> = (0..self.rank() as isize).collect();
        self.reduce_axes(op, &all, false)
    }

    fn reduce_axes(&self, op: ReduceOp, axes: &[isize], keepdim: bool) -> Result<Tensor> {
        let axes = normalize_axes(op.name(), axes, self.rank())?;
        apply(ReductionOp::Reduce { op, axes, keepdim }, &[self])
    }
}

/// Axes normalized against `rank`, sorted and without repeats.
pub(crate) fn normalize_axes(op: &'static str, axes: &[isize], rank: usize) -> Result<Axes> {
    let mut out = Axes::new();
    for &a in axes {
        let n = normalize_axis(a, rank).ok_or(Error::Axis { op, axis: a, rank })?;
        if out.contains(&n) {
            return Err(Error::invalid(op, "axes", format!("axis {a} is listed twice")));
        }
        out.push(n);
    }
    out.sort_unstable();
    Ok(out)
}

/// The shape after reducing `axes`.
fn reduced_shape(shape: &Shape, axes: &[usize], keepdim: bool) -> Shape {
    let dims: Vec<usize> = (0..shape.rank()).filter_map(|d| if axes.contains(&d) { keepdim.then_some(1) } else { Some(shape[d]) }).collect();
    Shape::from(dims)
}

/// Reductions over axes, and argmax.
///
/// ```
/// use tensor_core::ops::{ReduceOp, ReductionOp};
/// let r = ReductionOp::Argmax { axis: 0, keepdim: false };
/// assert_ne!(r, ReductionOp::Argmax { axis: 1, keepdim: false });
/// ```
#[allow(missing_docs)] // the fields are the Tensor methods' arguments
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ReductionOp {
    /// (x)
    Reduce { op: ReduceOp, axes: Axes, keepdim: bool },
    /// (x) -> i64
    Argmax { axis: usize, keepdim: bool },
}

impl Family for ReductionOp {
    op_names! { ReductionOp {
        Reduce { op, axes, keepdim } => op.name(), op.grad_fn_name(), format!("axes={axes:?} keepdim={keepdim}");
        Argmax { axis, keepdim } => "argmax", "NoBackward", format!("axis={axis} keepdim={keepdim}");
    }}

    fn infer(&self, inputs: &[TypeRef]) -> Result<(DType, Shape)> {
        infer(self, inputs)
    }

    fn compute(&self, inputs: &[&Storage]) -> Result<Storage> {
        compute(self, inputs)
    }

    fn backward(&self, ctx: &BackwardCtx, g: &Tensor) -> Result<InputGrads> {
        match self {
            ReductionOp::Reduce { op, axes, keepdim } => backward(*op, axes, *keepdim, ctx, g),
            ReductionOp::Argmax { .. } => Err(Error::NotDifferentiable { op: "argmax", detail: "" }),
        }
    }

    fn saves(&self) -> Saves {
        match self {
            ReductionOp::Reduce { op: ReduceOp::Max | ReduceOp::Min | ReduceOp::Prod, .. } => Saves { inputs: 0b1, output: true },
            ReductionOp::Reduce { op: ReduceOp::Sum | ReduceOp::Mean, .. } | ReductionOp::Argmax { .. } => Saves::default(),
        }
    }

    fn is_differentiable(&self) -> bool {
        matches!(self, ReductionOp::Reduce { .. })
    }
}

fn infer(op: &ReductionOp, inputs: &[TypeRef]) -> Result<(DType, Shape)> {
    let x = inputs[0];
    match op {
        ReductionOp::Reduce { op: r, axes, keepdim } => {
            match r {
                ReduceOp::Mean => need_float("mean", x.dtype)?,
                _ => need_numeric(r.name(), x.dtype)?,
            }
            if matches!(r, ReduceOp::Max | ReduceOp::Min) && axes.iter().any(|&a| x.shape[a] == 0) {
                return Err(Error::invalid(r.name(), "axes", format!("cannot reduce an empty dim of shape {} (there is no identity)", x.shape)));
            }
            Ok((x.dtype, reduced_shape(x.shape, axes, *keepdim)))
        }
        ReductionOp::Argmax { axis, keepdim } => {
            need_numeric("argmax", x.dtype)?;
            if x.shape[*axis] == 0 {
                return Err(Error::invalid("argmax", "axis", format!("dim {axis} of shape {} is empty", x.shape)));
            }
            Ok((DType::I64, reduced_shape(x.shape, &[*axis], *keepdim)))
        }
    }
}

fn compute(op: &ReductionOp, inputs: &[&Storage]) -> Result<Storage> {
    let x = inputs[0];
    match op {
        ReductionOp::Reduce { op: r, axes, keepdim } => {
            let out_shape = reduced_shape(&x.shape(), axes, *keepdim);
            let reduced = crate::storage::map_numeric!(x, a => reduce_kernel(a, axes, *r), bool => unreachable!("checked by infer"));
            Ok(reshape_storage(reduced, &out_shape))
        }
        ReductionOp::Argmax { axis, keepdim } => {
            let out_shape = reduced_shape(&x.shape(), &[*axis], *keepdim);
            let idx = argmax_any(x, *axis);
            Ok(reshape_storage(Storage::I64(idx), &out_shape))
        }
    }
}

fn reduce_kernel<T: Num>(a: &Array<T>, axes: &[usize], r: ReduceOp) -> Array<T> {
    match r {
        ReduceOp::Sum => reduce(a, axes, Reduction::Sum),
        ReduceOp::Max => reduce(a, axes, Reduction::Max),
        ReduceOp::Min => reduce(a, axes, Reduction::Min),
        ReduceOp::Prod => reduce(a, axes, Reduction::Prod),
        ReduceOp::Mean => {
            let count: usize = axes.iter().map(|&d| a.shape()[d]).product();
            let s = reduce(a, axes, Reduction::Sum);
            let n = T::from_usize(count);
            crate::kernels::elementwise::map(&s, move |v| v.div(n))
        }
    }
}

fn argmax_any(x: &Storage, axis: usize) -> Array<i64> {
    match x {
        Storage::F32(a) => argmax(a, axis),
        Storage::F64(a) => argmax(a, axis),
        Storage::I32(a) => argmax(a, axis),
        Storage::I64(a) => argmax(a, axis),
        Storage::Bool(_) => unreachable!("checked by infer"),
    }
}

fn reshape_storage(s: Storage, shape: &Shape) -> Storage {
    crate::storage::map_array!(&s, a => crate::kernels::layout::reshape(a, shape.dims()))
}

/// d prod(x) / d x_i is the product of the others: `prod / x_i` where no element is 0. With
/// zeros, the product of the non-zero elements where `x_i` is the only zero, 0 elsewhere
/// (division would give NaN there).
fn prod_grad(x: &Tensor, axes: &[usize], g_keep: &Tensor) -> Result<Tensor> {
    let axes: Vec<isize> = axes.iter().map(|&a| a as isize).collect();
    let zero = x.eq(0.0)?;
    let one = Tensor::ones(&[], x.dtype());
    let nonzero = Tensor::where_(&zero, &one, x)?;
    let others = nonzero.prod_axes(&axes, true)?;
    let zeros = zero.cast(x.dtype())?.sum_axes(&axes, true)?;
    // Where x_i is not 0: the others' product is `others / x_i` if no other is 0, else 0.
    let at_nonzero = Tensor::where_(&zeros.eq(0.0)?, &others.div(&nonzero)?, &Tensor::zeros(&[], x.dtype()))?;
    let at_zero = Tensor::where_(&zeros.eq(1.0)?, &others, &Tensor::zeros(&[], x.dtype()))?;
    Tensor::where_(&zero, &at_zero, &at_nonzero)?.mul(g_keep)
}

fn backward(r: ReduceOp, axes: &[usize], keepdim: bool, ctx: &BackwardCtx, g: &Tensor) -> Result<InputGrads> {
    let in_shape = ctx.input_shape(0).clone();
    if axes.iter().any(|&a| in_shape[a] == UNKNOWN) {
        return Err(Error::NotDifferentiable {
            op: r.name(),
            detail: " over a dim that is unknown in this trace; use a fixed input_signature for this argument",
        });
    }
    let keep_shape = reduced_shape(&in_shape, axes, true);
    let g_keep = if keepdim { g.clone() } else { g.reshape_to(&keep_shape)? };
    let grad = match r {
        ReduceOp::Sum => g_keep.broadcast_to(in_shape.dims())?,
        ReduceOp::Mean => {
            let count: usize = axes.iter().map(|&a| in_shape[a]).product();
            g_keep.div(count as f64)?.broadcast_to(in_shape.dims())?
        }
        ReduceOp::Max | ReduceOp::Min => {
            // The gradient is shared equally by every element equal to the extreme.
            let (x, y) = (ctx.input(0)?, ctx.output()?);
            let y_keep = if keepdim { y } else { y.reshape_to(&keep_shape)? };
            let mask = x.eq(&y_keep)?.cast(x.dtype())?;
            let axes_i: Vec<isize> = axes.iter().map(|&a| a as isize).collect();
            let count = mask.sum_axes(&axes_i, true)?;
            mask.mul(&g_keep.div(&count)?)?
        }
        ReduceOp::Prod => prod_grad(&ctx.input(0)?, axes, &g_keep)?,
    };
    Ok(smallvec![Some(grad)])
}
