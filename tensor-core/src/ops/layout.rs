//! Layout ops: reshape (and squeeze/unsqueeze/flatten), permute (and transpose),
//! broadcast_to, concat (and stack), narrow (and slicing), with their gradients.

use super::dispatch::apply;
use super::{Axes, Family, InputGrads, Saves, SymShapeOp, TypeRef};
use crate::dim::{IntoDims, ShapeArg, SizeAttr};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::kernels::layout as k;
use crate::math::op_names;
use crate::shape::{broadcast_shapes, normalize_axis, Shape, UNKNOWN, UNKNOWN_RANK};
use crate::storage::Storage;
use crate::tensor::grad_node::BackwardCtx;
use crate::tensor::Tensor;
use smallvec::{smallvec, SmallVec};
use std::ops::{Bound, RangeBounds};

/// The dims `reshape` takes: an array, slice or vector of any integer type or of [`Dim`](crate::dim::Dim)s
/// (read from `dims()`; a symbolic one specializes the trace to its value), and literals
/// with `-1` (which infers one dim).
///
/// ```
/// use tensor_core::prelude::*;
/// let x = Tensor::arange(0i64, 6);
/// let d = x.dims();
/// assert_eq!(x.reshape([d[0] / 2, Dim::from(2)])?.dims(), vec![3, 2]); // Dims
/// assert_eq!(x.reshape(&[d.as_slice()[0] / 2, 2])?.dims(), vec![3, 2]); // usize
/// assert_eq!(x.reshape([2, -1])?.dims(), vec![2, 3]);           // i32 literals, one inferred
/// assert_eq!(x.reshape(vec![6isize])?.dims(), vec![6]);
/// assert_eq!(Tensor::ones(&[1, 1], DType::F32).reshape(())?.rank(), 0); // a scalar
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub trait ReshapeDims {
    /// The dims as `isize`s (`-1`: inferred), or `None` if one does not fit.
    fn spec(&self) -> Option<SmallVec<[isize; 4]>>;

    /// The dims as attributes when one of them is a symbolic dim of the function being
    /// traced (the reshape then computes its shape at run time); `None` otherwise.
    fn symbolic(&self) -> Option<SmallVec<[SizeAttr; 4]>> {
        None
    }
}

/// An integer type a reshape dim can be given in.
pub trait Dim: Copy {
    /// The value as `isize`, if it fits.
    fn to_isize(self) -> Option<isize>;

    /// The value as a [`Dim`](crate::dim::Dim), for [`Dim`](crate::dim::Dim)s (`None` for
    /// the integer types).
    fn as_dim(self) -> Option<crate::dim::Dim> {
        None
    }
}

macro_rules! dims {
    ($($t:ty),*) => {$(
        impl Dim for $t {
            fn to_isize(self) -> Option<isize> {
                isize::try_from(self).ok()
            }
        }
    )*};
}
dims!(usize, isize, i32, i64, u32);

/// A symbolic dim of the function being traced makes the reshape compute its shape at run
/// time (see [`ReshapeDims::symbolic`]); `to_isize` specializes (a guard on its value).
impl Dim for crate::dim::Dim {
    fn to_isize(self) -> Option<isize> {
        isize::try_from(usize::from(self)).ok()
    }

    fn as_dim(self) -> Option<crate::dim::Dim> {
        Some(self)
    }
}

impl<T: Dim> ReshapeDims for [T] {
    fn spec(&self) -> Option<SmallVec<[isize; 4]>> {
        self.iter().map(|d| d.to_isize()).collect()
    }

    fn symbolic(&self) -> Option<SmallVec<[SizeAttr; 4]>> {
        let dims: SmallVec<[crate::dim::Dim; 4]> = self.iter().map(|d| d.as_dim()).collect::<Option<_>>()?;
        super::size_attrs(&dims)
    }
}

impl<T: Dim, const N: usize> ReshapeDims for [T; N] {
    fn spec(&self) -> Option<SmallVec<[isize; 4]>> {
        self[..].spec()
    }

    fn symbolic(&self) -> Option<SmallVec<[SizeAttr; 4]>> {
        self[..].symbolic()
    }
}

impl<T: Dim> ReshapeDims for Vec<T> {
    fn spec(&self) -> Option<SmallVec<[isize; 4]>> {
        self[..].spec()
    }

    fn symbolic(&self) -> Option<SmallVec<[SizeAttr; 4]>> {
        self[..].symbolic()
    }
}

/// The dims of a tensor (`x.reshape(&y.dims())`).
impl ReshapeDims for crate::dim::Dims {
    fn spec(&self) -> Option<SmallVec<[isize; 4]>> {
        self.as_dims().spec()
    }

    fn symbolic(&self) -> Option<SmallVec<[SizeAttr; 4]>> {
        self.as_dims().symbolic()
    }
}

/// `()`: no dims, a scalar (as PyTorch's `reshape(())`).
impl ReshapeDims for () {
    fn spec(&self) -> Option<SmallVec<[isize; 4]>> {
        Some(SmallVec::new())
    }
}

/// A tuple mixes kinds: `(n * 2, -1)` (a symbolic [`Dim`](crate::dim::Dim) and an inferred
/// dim), `(1, n)`.
macro_rules! tuple_dims {
    ($($t:ident $i:tt),+) => {
        impl<$($t: Dim),+> ReshapeDims for ($($t,)+) {
            fn spec(&self) -> Option<SmallVec<[isize; 4]>> {
                Some(SmallVec::from_slice(&[$(self.$i.to_isize()?),+]))
            }

            fn symbolic(&self) -> Option<SmallVec<[SizeAttr; 4]>> {
                if ![$(self.$i.as_dim().is_some_and(|d| d.is_symbolic())),+].contains(&true) {
                    return None;
                }
                let attrs: SmallVec<[SizeAttr; 4]> = SmallVec::from_iter([$(reshape_attr(self.$i)?),+]);
                attrs.iter().any(|a| matches!(a, SizeAttr::Sym(_))).then_some(attrs)
            }
        }
    };
}
tuple_dims!(A 0);
tuple_dims!(A 0, B 1);
tuple_dims!(A 0, B 1, C 2);
tuple_dims!(A 0, B 1, C 2, D 3);
tuple_dims!(A 0, B 1, C 2, D 3, E 4);
tuple_dims!(A 0, B 1, C 2, D 3, E 4, F 5);

/// One reshape dim as an attribute (`None` for a negative dim other than -1, which the
/// shape rule then refuses through `spec`).
fn reshape_attr<T: Dim>(d: T) -> Option<SizeAttr> {
    match d.as_dim() {
        Some(d) => Some(super::size_attr(d)),
        None => match d.to_isize()? {
            -1 => Some(SizeAttr::Inferred),
            v => usize::try_from(v).ok().map(SizeAttr::Fixed),
        },
    }
}

impl<D: ReshapeDims + ?Sized> ReshapeDims for &D {
    fn spec(&self) -> Option<SmallVec<[isize; 4]>> {
        (**self).spec()
    }

    fn symbolic(&self) -> Option<SmallVec<[SizeAttr; 4]>> {
        (**self).symbolic()
    }
}

impl Tensor {
    /// The same values with new dims; one dim may be `-1` (inferred). Dims can be any
    /// integer type ([`ReshapeDims`]).
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let x = Tensor::arange(0i64, 6).reshape(&[2, -1])?;
    /// assert_eq!(x.dims(), vec![2, 3]);
    /// assert!(x.reshape(&[4, -1]).is_err());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn reshape(&self, dims: impl ReshapeDims) -> Result<Tensor> {
        if let Some(attrs) = dims.symbolic() {
            return apply(SymShapeOp::Reshape(attrs), &[self]);
        }
        let spec = dims.spec().ok_or_else(|| Error::invalid("reshape", "dims", "a dim does not fit in isize"))?;
        apply(LayoutOp::Reshape(spec), &[self])
    }

    /// Reshapes to `shape`, whose unknown dims (at most one) are inferred.
    pub(crate) fn reshape_to(&self, shape: &Shape) -> Result<Tensor> {
        self.reshape(&shape_spec(shape)?[..])
    }

    /// Flattens the dims from `start` on into one (`flatten_from(1)` turns `[n, c, h, w]` into
    /// `[n, c*h*w]`).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let x = Tensor::zeros(&[2, 3, 4, 5], DType::F32);
    /// assert_eq!(x.flatten_from(1)?.dims(), vec![2, 60]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn flatten_from(&self, start: isize) -> Result<Tensor> {
        let rank = self.rank();
        let s = normalize_axis(start, rank.max(1)).ok_or(Error::Axis { op: "flatten", axis: start, rank })?;
        let shape = self.raw_shape();
        let (lead, rest) = shape.dims().split_at(s.min(rank));
        let mut spec: Vec<isize> = lead.iter().map(|&d| if d == UNKNOWN { -1 } else { d as isize }).collect();
        // The flattened size is the product of the rest when it is known: so the one `-1` of
        // an unknown leading dim (a relaxed batch) stays the batch's, and an empty batch
        // flattens (`[0, 1, 5]` to `[0, 5]`, as PyTorch does) where `[0, -1]` is ambiguous.
        match rest.iter().all(|&d| d < UNKNOWN_RANK) {
            true => spec.push(rest.iter().product::<usize>() as isize),
            false => spec.push(-1),
        }
        if spec.iter().filter(|&&d| d == -1).count() > 1 {
            return Err(Error::invalid("flatten", "start", "at most one dim may be unknown while tracing"));
        }
        self.reshape(&spec)
    }

    /// Inserts a dim of size 1 at `axis` (which may be `rank`, or negative).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let x = Tensor::zeros(&[2, 3], DType::F32);
    /// assert_eq!(x.unsqueeze(0)?.dims(), vec![1, 2, 3]);
    /// assert_eq!(x.unsqueeze(-1)?.dims(), vec![2, 3, 1]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn unsqueeze(&self, axis: isize) -> Result<Tensor> {
        let rank = self.rank();
        let a = normalize_axis(axis, rank + 1).ok_or(Error::Axis { op: "unsqueeze", axis, rank: rank + 1 })?;
        self.reshape_to(&self.raw_shape().inserted(a, 1))
    }

    /// Removes the dim at `axis`, which must have size 1.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let x = Tensor::zeros(&[2, 1, 3], DType::F32);
    /// assert_eq!(x.squeeze(1)?.dims(), vec![2, 3]);
    /// assert!(x.squeeze(0).is_err()); // size 2, not 1
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn squeeze(&self, axis: isize) -> Result<Tensor> {
        let shape = self.raw_shape();
        let a = normalize_axis(axis, shape.rank()).ok_or(Error::Axis { op: "squeeze", axis, rank: shape.rank() })?;
        if shape[a] != 1 {
            return Err(Error::invalid("squeeze", "axis", format!("dim {a} of shape {shape} has size {}, not 1", shape[a])));
        }
        self.reshape_to(&shape.removed(a))
    }

    /// Reorders the axes: output axis i is input axis `perm[i]`.
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let x = Tensor::zeros(&[2, 3, 4], DType::F32);
    /// assert_eq!(x.permute(&[2, 0, 1])?.dims(), vec![4, 2, 3]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn permute(&self, perm: &[isize]) -> Result<Tensor> {
        let rank = self.rank();
        let mut axes = Axes::new();
        for &p in perm {
            axes.push(normalize_axis(p, rank).ok_or(Error::Axis { op: "permute", axis: p, rank })?);
        }
        apply(LayoutOp::Permute(axes), &[self])
    }

    /// Swaps two axes.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let x = Tensor::arange(0i32, 6).reshape(&[1, 2, 3])?;
    /// assert_eq!(x.transpose(0, 2)?.dims(), vec![3, 2, 1]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn transpose(&self, a: isize, b: isize) -> Result<Tensor> {
        let rank = self.rank();
        let a = normalize_axis(a, rank).ok_or(Error::Axis { op: "transpose", axis: a, rank })?;
        let b = normalize_axis(b, rank).ok_or(Error::Axis { op: "transpose", axis: b, rank })?;
        let mut perm: Vec<isize> = (0..rank as isize).collect();
        perm.swap(a, b);
        self.permute(&perm)
    }

    /// The transpose of a 2-d tensor (the last two axes of a batch).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let x = Tensor::from_vec(vec![1, 2, 3, 4, 5, 6], &[2, 3])?;
    /// assert_eq!(x.t()?.to_vec::<i32>()?, vec![1, 4, 2, 5, 3, 6]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn t(&self) -> Result<Tensor> {
        self.transpose(-2, -1)
    }

    /// The values repeated along new leading dims and dims of size 1, to `dims`.
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let x = Tensor::from_vec(vec![1i32, 2], &[2])?;
    /// assert_eq!(x.broadcast_to(&[2, 2])?.to_vec::<i32>()?, vec![1, 2, 1, 2]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn broadcast_to(&self, dims: impl IntoDims) -> Result<Tensor> {
        let dims = dims.shape_arg();
        if let Some(dims) = dims.known() {
            return apply(LayoutOp::BroadcastTo(Shape::new(dims)), &[self]);
        }
        match dims_attrs(&dims) {
            Some(attrs) => apply(SymShapeOp::BroadcastTo(attrs), &[self]),
            None => apply(LayoutOp::BroadcastTo(Shape::new(&dims.specialized())), &[self]),
        }
    }

    /// The sum over broadcast dims that gives `shape` (the adjoint of `broadcast_to`).
    pub(crate) fn sum_to(&self, shape: &Shape) -> Result<Tensor> {
        if &self.raw_shape() == shape {
            return Ok(self.clone());
        }
        apply(LayoutOp::SumTo(shape.clone()), &[self])
    }

    /// The tensors joined along `axis`; all other dims must agree.
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let a = Tensor::zeros(&[2, 3], DType::F32);
    /// let b = Tensor::ones(&[1, 3], DType::F32);
    /// assert_eq!(Tensor::concat(&[&a, &b], 0)?.dims(), vec![3, 3]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn concat(tensors: &[&Tensor], axis: isize) -> Result<Tensor> {
        let first = tensors.first().ok_or_else(|| Error::invalid("concat", "tensors", "needs at least one tensor"))?;
        let rank = first.rank();
        let axis = normalize_axis(axis, rank).ok_or(Error::Axis { op: "concat", axis, rank })?;
        apply(LayoutOp::Concat { axis }, tensors)
    }

    /// The tensors stacked along a new `axis`; all shapes must be equal.
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let a = Tensor::zeros(&[3], DType::F32);
    /// assert_eq!(Tensor::stack(&[&a, &a], 0)?.dims(), vec![2, 3]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn stack(tensors: &[&Tensor], axis: isize) -> Result<Tensor> {
        let first = tensors.first().ok_or_else(|| Error::invalid("stack", "tensors", "needs at least one tensor"))?;
        for t in tensors {
            if t.raw_shape() != first.raw_shape() {
                return Err(Error::shapes("stack", &first.raw_shape(), &t.raw_shape(), "stacked tensors must have equal shapes"));
            }
        }
        let rank = first.rank() + 1;
        let a = normalize_axis(axis, rank).ok_or(Error::Axis { op: "stack", axis, rank })?;
        let parts: Vec<Tensor> = tensors.iter().map(|t| t.unsqueeze(a as isize)).collect::<Result<_>>()?;
        let refs: Vec<&Tensor> = parts.iter().collect();
        Tensor::concat(&refs, a as isize)
    }

    /// The `len` entries of `axis` from `start` on.
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let x = Tensor::arange(0i32, 10);
    /// assert_eq!(x.narrow(0, 2, 3)?.to_vec::<i32>()?, vec![2, 3, 4]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn narrow(&self, axis: isize, start: impl Into<crate::dim::Dim>, len: impl Into<crate::dim::Dim>) -> Result<Tensor> {
        let rank = self.rank();
        let axis = normalize_axis(axis, rank).ok_or(Error::Axis { op: "narrow", axis, rank })?;
        let (start, len) = (start.into(), len.into());
        if let (Some(start), Some(len)) = (start.known(), len.known()) {
            return apply(LayoutOp::Narrow { axis, start, len }, &[self]);
        }
        // A start or length computed from the call's dims (a relaxed trace's `n - 1`).
        match (super::size_attr(start), super::size_attr(len)) {
            (SizeAttr::Fixed(start), SizeAttr::Fixed(len)) => apply(LayoutOp::Narrow { axis, start, len }, &[self]),
            (start, len) => apply(SymShapeOp::Narrow { axis, start, len }, &[self]),
        }
    }

    /// The entries of `axis` in `range` (`x.slice(1, 2..5)`, `x.slice(0, ..3)`).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let x = Tensor::arange(0i64, 10);
    /// assert_eq!(x.slice(0, 2..5)?.to_vec::<i64>()?, vec![2, 3, 4]);
    /// assert_eq!(x.slice(0, 8..)?.to_vec::<i64>()?, vec![8, 9]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn slice(&self, axis: isize, range: impl RangeBounds<usize>) -> Result<Tensor> {
        let rank = self.rank();
        let a = normalize_axis(axis, rank).ok_or(Error::Axis { op: "slice", axis, rank })?;
        let start = match range.start_bound() {
            Bound::Included(&s) => s,
            Bound::Excluded(&s) => s + 1,
            Bound::Unbounded => 0,
        };
        // An open end is the dim, which a relaxed trace computes at run time.
        let end = match range.end_bound() {
            Bound::Included(&e) => crate::dim::Dim::from(e + 1),
            Bound::Excluded(&e) => crate::dim::Dim::from(e),
            Bound::Unbounded => self.dim(a),
        };
        if end < start {
            return Err(Error::invalid("slice", "range", format!("start {start} is after end {end}")));
        }
        self.narrow(a as isize, start, end - start)
    }

    /// The entry `index` of `axis`, with that axis removed.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let x = Tensor::from_vec(vec![1, 2, 3, 4, 5, 6], &[2, 3])?;
    /// assert_eq!(x.select(0, 1)?.to_vec::<i32>()?, vec![4, 5, 6]);
    /// assert_eq!(x.select(1, 2)?.to_vec::<i32>()?, vec![3, 6]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn select(&self, axis: isize, index: usize) -> Result<Tensor> {
        self.narrow(axis, index, 1)?.squeeze(axis)
    }

    pub(crate) fn pad_axis(&self, axis: usize, before: usize, after: usize) -> Result<Tensor> {
        apply(LayoutOp::Pad { axis, before, after }, &[self])
    }
}

/// The attributes of dims of which one is symbolic (`None`: all are numbers now).
pub(crate) fn dims_attrs(dims: &ShapeArg) -> Option<SmallVec<[SizeAttr; 4]>> {
    match dims {
        ShapeArg::Symbolic(d) => super::size_attrs(d),
        _ => None,
    }
}

/// A reshape spec for `shape`: its dims, with an unknown dim as `-1` (at most one).
pub(crate) fn shape_spec(shape: &Shape) -> Result<SmallVec<[isize; 4]>> {
    let spec: SmallVec<[isize; 4]> = shape.dims().iter().map(|&d| if d == UNKNOWN { -1 } else { d as isize }).collect();
    if spec.iter().filter(|&&d| d == -1).count() > 1 {
        return Err(Error::invalid("reshape", "shape", format!("{shape} has more than one unknown dim; give the argument a fixed input_signature")));
    }
    Ok(spec)
}

/// Shape changes and data movement. Inputs are listed per variant.
///
/// ```
/// use tensor_core::ops::LayoutOp;
/// assert_eq!(LayoutOp::Narrow { axis: 0, start: 1, len: 2 }, LayoutOp::Narrow { axis: 0, start: 1, len: 2 });
/// ```
#[allow(missing_docs)] // the fields are the Tensor methods' arguments
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum LayoutOp {
    /// (x): the requested dims, one of them possibly -1.
    Reshape(SmallVec<[isize; 4]>),
    /// (x)
    Permute(Axes),
    /// (x)
    BroadcastTo(Shape),
    /// (x): the sum over broadcast dims back to `shape` (a broadcast's adjoint).
    SumTo(Shape),
    /// (x0, x1, ...)
    Concat { axis: usize },
    /// (x)
    Narrow { axis: usize, start: usize, len: usize },
    /// (x): zero padding along one axis (narrow's adjoint).
    Pad { axis: usize, before: usize, after: usize },
}

impl Family for LayoutOp {
    op_names! { LayoutOp {
        Reshape(d) => "reshape", "ReshapeBackward", format!("shape={d:?}");
        Permute(p) => "permute", "PermuteBackward", format!("perm={p:?}");
        BroadcastTo(s) => "broadcast_to", "BroadcastToBackward", format!("shape={s}");
        SumTo(s) => "sum_to", "SumToBackward", format!("shape={s}");
        Concat { axis } => "concat", "ConcatBackward", format!("axis={axis}");
        Narrow { axis, start, len } => "narrow", "NarrowBackward", format!("axis={axis} start={start} len={len}");
        Pad { axis, before, after } => "pad", "PadBackward", format!("axis={axis} before={before} after={after}");
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
        Saves::default()
    }

    fn is_differentiable(&self) -> bool {
        true
    }
}

// ------------------------------------------------------------------------ shape and dtype rules

fn infer(op: &LayoutOp, inputs: &[TypeRef]) -> Result<(DType, Shape)> {
    let x = inputs[0];
    let shape = match op {
        LayoutOp::Reshape(spec) => reshape_shape(x.shape, spec)?,
        LayoutOp::Permute(perm) => permute_shape(x.shape, perm)?,
        LayoutOp::BroadcastTo(target) => {
            match broadcast_shapes(x.shape, target) {
                Some(b) if target.admits(&b) || &b == target => {}
                _ => {
                    return Err(Error::shapes(
                        "broadcast_to",
                        x.shape,
                        target,
                        "each dim must equal the target's or be 1, and the target may only add leading dims",
                    ))
                }
            }
            target.clone()
        }
        LayoutOp::SumTo(target) => {
            // The kernel sums the axes `target` lacks or holds as 1; every other dim must be
            // the input's (checked where known: a graph with relaxed dims checks at run time).
            let lead = x.shape.rank().checked_sub(target.rank());
            let fits = lead.is_some_and(|lead| {
                target.dims().iter().zip(&x.shape.dims()[lead..]).all(|(&t, &d)| t == d || t == 1 || t == UNKNOWN || d == UNKNOWN)
            });
            if !fits {
                return Err(Error::shapes("sum_to", x.shape, target, "the input must broadcast from the target shape"));
            }
            target.clone()
        }
        LayoutOp::Concat { axis } => concat_shape(inputs, *axis)?,
        LayoutOp::Narrow { axis, start, len } => {
            let d = x.shape[*axis];
            if d != UNKNOWN && start + len > d {
                return Err(Error::invalid(
                    "narrow",
                    "start/len",
                    format!("entries {start}..{} do not fit in dim {axis} of size {d} (shape {})", start + len, x.shape),
                ));
            }
            x.shape.with_dim(*axis, *len)
        }
        LayoutOp::Pad { axis, before, after } => {
            let d = x.shape[*axis];
            x.shape.with_dim(*axis, if d == UNKNOWN { UNKNOWN } else { d + before + after })
        }
    };
    Ok((x.dtype, shape))
}

fn reshape_shape(from: &Shape, spec: &[isize]) -> Result<Shape> {
    let bad = |hint| Error::Reshape { from: from.clone(), to: format!("{spec:?}"), numel: from.numel(), hint };
    if spec.iter().filter(|&&d| d == -1).count() > 1 {
        return Err(bad("only one dim may be -1"));
    }
    if spec.iter().any(|&d| d < -1) {
        return Err(bad("dims must be positive or -1"));
    }
    let known: usize = spec.iter().filter(|&&d| d >= 0).map(|&d| d as usize).product();
    let infer = |total: usize| -> Result<usize> {
        if known == 0 || !total.is_multiple_of(known) {
            return Err(bad("the element counts differ"));
        }
        Ok(total / known)
    };
    let dims: Vec<usize> = if from.is_known() {
        let total = from.numel();
        let missing = if spec.contains(&-1) { infer(total)? } else { 0 };
        if !spec.contains(&-1) && known != total {
            return Err(bad("the element counts differ"));
        }
        spec.iter().map(|&d| if d == -1 { missing } else { d as usize }).collect()
    } else {
        spec.iter().map(|&d| if d == -1 { UNKNOWN } else { d as usize }).collect()
    };
    Ok(Shape::from(dims))
}

fn permute_shape(from: &Shape, perm: &[usize]) -> Result<Shape> {
    let mut seen = vec![false; from.rank()];
    if perm.len() != from.rank() || perm.iter().any(|&p| std::mem::replace(&mut seen[p], true)) {
        return Err(Error::invalid("permute", "perm", format!("{perm:?} is not a permutation of the {} axes of shape {from}", from.rank())));
    }
    Ok(Shape::from(perm.iter().map(|&p| from[p]).collect::<Vec<_>>()))
}

fn concat_shape(inputs: &[TypeRef], axis: usize) -> Result<Shape> {
    let first = inputs[0];
    let mut total = 0usize;
    for (i, t) in inputs.iter().enumerate() {
        if t.dtype != first.dtype {
            return Err(Error::operand_dtypes("concat", ("tensors[0]", first.dtype), (format!("tensors[{i}]"), t.dtype)));
        }
        let same_rest = t.shape.rank() == first.shape.rank() && (0..first.shape.rank()).all(|d| d == axis || t.shape[d] == first.shape[d]);
        if !same_rest {
            return Err(Error::shapes("concat", first.shape, t.shape, format!("all dims but the concat axis {axis} must agree")));
        }
        total = if total == UNKNOWN || t.shape[axis] == UNKNOWN { UNKNOWN } else { total + t.shape[axis] };
    }
    Ok(first.shape.with_dim(axis, total))
}

// ------------------------------------------------------------------------------------ kernels

fn compute(op: &LayoutOp, inputs: &[&Storage]) -> Result<Storage> {
    let x = inputs[0];
    Ok(match op {
        LayoutOp::Reshape(_) => {
            let (_, shape) = infer(op, &[TypeRef { dtype: x.dtype(), shape: &x.shape() }])?;
            crate::storage::map_array!(x, a => k::reshape(a, shape.dims()))
        }
        LayoutOp::Permute(perm) => crate::storage::map_array!(x, a => k::permute(a, perm)),
        LayoutOp::BroadcastTo(target) => {
            let dims = resolve_unknown(target, &x.shape());
            crate::storage::map_array!(x, a => k::broadcast_to(a, &dims))
        }
        LayoutOp::SumTo(target) => {
            let dims = resolve_unknown(target, &x.shape());
            crate::storage::map_numeric!(x, a => k::sum_to(a, &dims), bool => unreachable!("sum_to is only used on gradients"))
        }
        LayoutOp::Concat { axis } => concat(inputs, *axis),
        LayoutOp::Narrow { axis, start, len } => {
            check_narrow(x, *axis, *start, *len)?;
            crate::storage::map_array!(x, a => k::narrow(a, *axis, *start, *len))
        }
        LayoutOp::Pad { axis, before, after } => {
            crate::storage::map_numeric!(x, a => k::pad(a, *axis, *before, *after), bool => unreachable!("pad is only used on gradients"))
        }
    })
}

/// A target's dims with unknown dims taken from `from` (aligned from the right).
fn resolve_unknown(target: &Shape, from: &Shape) -> Vec<usize> {
    let lead = target.rank().saturating_sub(from.rank());
    target.dims().iter().enumerate().map(|(i, &d)| if d == UNKNOWN && i >= lead { from[i - lead] } else { d }).collect()
}

/// Narrow on a dim that was unknown when traced is checked when the graph runs.
fn check_narrow(x: &Storage, axis: usize, start: usize, len: usize) -> Result<()> {
    let d = x.shape()[axis];
    if start + len > d {
        return Err(Error::invalid("narrow", "start/len", format!("entries {start}..{} do not fit in dim {axis} of size {d}", start + len)));
    }
    Ok(())
}

fn concat(inputs: &[&Storage], axis: usize) -> Storage {
    macro_rules! join {
        ($variant:ident) => {{
            let parts: Vec<_> = inputs
                .iter()
                .map(|s| match s {
                    Storage::$variant(a) => a,
                    _ => unreachable!("dtypes checked by infer"),
                })
                .collect();
            Storage::$variant(k::concat(&parts, axis))
        }};
    }
    match inputs[0] {
        Storage::F32(_) => join!(F32),
        Storage::F64(_) => join!(F64),
        Storage::I32(_) => join!(I32),
        Storage::I64(_) => join!(I64),
        Storage::Bool(_) => join!(Bool),
    }
}

// ---------------------------------------------------------------------------------- gradients

fn backward(op: &LayoutOp, ctx: &BackwardCtx, g: &Tensor) -> Result<InputGrads> {
    Ok(match op {
        LayoutOp::Reshape(_) => smallvec![Some(g.reshape_to(ctx.input_shape(0))?)],
        LayoutOp::Permute(perm) => {
            let mut inverse = vec![0isize; perm.len()];
            for (i, &p) in perm.iter().enumerate() {
                inverse[p] = i as isize;
            }
            smallvec![Some(g.permute(&inverse)?)]
        }
        LayoutOp::BroadcastTo(_) => smallvec![Some(g.sum_to(ctx.input_shape(0))?)],
        LayoutOp::SumTo(_) => smallvec![Some(g.broadcast_to(ctx.input_shape(0).dims())?)],
        LayoutOp::Concat { axis } => {
            let mut start = 0;
            let mut grads = InputGrads::new();
            for i in 0..ctx.num_inputs() {
                let len = ctx.input_shape(i)[*axis];
                if len == UNKNOWN {
                    return Err(Error::NotDifferentiable { op: "concat", detail: " along a dim that is unknown in this trace" });
                }
                grads.push(Some(g.narrow(*axis as isize, start, len)?));
                start += len;
            }
            grads
        }
        LayoutOp::Narrow { axis, start, len } => {
            let d = ctx.input_shape(0)[*axis];
            if d == UNKNOWN {
                return Err(Error::NotDifferentiable { op: "narrow", detail: " along a dim that is unknown in this trace" });
            }
            smallvec![Some(g.pad_axis(*axis, *start, d - start - len)?)]
        }
        LayoutOp::Pad { axis, before, .. } => {
            let len = ctx.input_shape(0)[*axis];
            smallvec![Some(g.narrow(*axis as isize, *before, len)?)]
        }
    })
}
