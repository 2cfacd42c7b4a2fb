//! Indexing kernels: index_select, gather, one_hot, and their scatter-add adjoints used by
//! the gradients. Index values are checked here, since only the data knows them.

use crate::error::{Error, Result};
use crate::math::Num;
use crate::storage::{standard, Array, Storage};
use ndarray::{Axis, IxDyn};

/// The index values of an i64 or i32 tensor, checked against `size`.
pub fn indices(s: &Storage, size: usize, op: &'static str) -> Result<Vec<usize>> {
    let raw: Vec<i64> = match s {
        Storage::I64(a) => a.iter().copied().collect(),
        Storage::I32(a) => a.iter().map(|&v| v as i64).collect(),
        other => return Err(Error::UnsupportedDType { op, dtype: other.dtype(), needs: "an i64 or i32 index tensor" }),
    };
    raw.into_iter().map(|v| if v >= 0 && (v as usize) < size { Ok(v as usize) } else { Err(Error::IndexOutOfRange { op, index: v, size }) }).collect()
}

/// The entries of `a` along `axis` at `idx`, in that order.
pub fn index_select<T: Clone>(a: &Array<T>, axis: usize, idx: &[usize]) -> Array<T> {
    a.select(Axis(axis), idx).into_shared()
}

/// The adjoint of index_select: zeros of `a`'s shape with `axis` of length `size`, and each
/// slice `g[i]` added at position `idx[i]`, in order.
pub fn index_add<T: Num>(g: &Array<T>, axis: usize, idx: &[usize], size: usize) -> Array<T> {
    let mut dims = g.shape().to_vec();
    dims[axis] = size;
    let mut out = ndarray::ArrayD::from_elem(IxDyn(&dims), T::zero());
    for (i, &j) in idx.iter().enumerate() {
        let src = g.index_axis(Axis(axis), i);
        out.index_axis_mut(Axis(axis), j).zip_mut_with(&src, |o, &v| *o = o.add(v));
    }
    out.into_shared()
}

/// `out[..., i, ...] = a[..., index[..., i, ...], ...]` along `axis`; `index` has the output's
/// shape and its values index `a`'s `axis`.
pub fn gather<T: Copy>(a: &Array<T>, axis: usize, idx: &[usize], index_dims: &[usize]) -> Array<T> {
    let a = standard(a);
    let src = a.as_slice().expect("standard");
    let (outer, inner) = split_at_axis(index_dims, axis);
    let (len_a, len_i) = (a.shape()[axis], index_dims[axis]);
    let mut out = Vec::with_capacity(idx.len());
    for o in 0..outer {
        for i in 0..len_i {
            for r in 0..inner {
                let j = idx[(o * len_i + i) * inner + r];
                out.push(src[(o * len_a + j) * inner + r]);
            }
        }
    }
    Array::from_shape_vec(IxDyn(index_dims), out).expect("length matches dims")
}

/// The adjoint of gather: zeros of shape `dims` with `g` added at the gathered positions.
pub fn scatter_add<T: Num>(g: &Array<T>, axis: usize, idx: &[usize], dims: &[usize]) -> Array<T> {
    let g = standard(g);
    let src = g.as_slice().expect("standard");
    let (outer, inner) = split_at_axis(g.shape(), axis);
    let (len_o, len_i) = (dims[axis], g.shape()[axis]);
    let mut out = vec![T::zero(); dims.iter().product()];
    for o in 0..outer {
        for i in 0..len_i {
            for r in 0..inner {
                let k = (o * len_i + i) * inner + r;
                let dst = &mut out[(o * len_o + idx[k]) * inner + r];
                *dst = dst.add(src[k]);
            }
        }
    }
    Array::from_shape_vec(IxDyn(dims), out).expect("length matches dims")
}

/// (product of dims before `axis`, product of dims after it).
fn split_at_axis(dims: &[usize], axis: usize) -> (usize, usize) {
    (dims[..axis].iter().product(), dims[axis + 1..].iter().product())
}

/// A new last axis of length `classes` holding 1 at each index and 0 elsewhere.
pub fn one_hot<T: Num>(idx: &[usize], dims: &[usize], classes: usize) -> Array<T> {
    let mut out = vec![T::zero(); idx.len() * classes];
    for (row, &c) in idx.iter().enumerate() {
        out[row * classes + c] = T::one();
    }
    let mut shape = dims.to_vec();
    shape.push(classes);
    Array::from_shape_vec(IxDyn(&shape), out).expect("length matches dims")
}

/// The positions along `axis` of the `k` largest (or, unless `largest`, smallest) entries of
/// each lane of `a`, best first: NaN counts as larger than every number (as in PyTorch) and
/// equal entries keep their order, the lower position first.
pub fn topk<T: Copy + PartialOrd>(a: &Array<T>, axis: usize, k: usize, largest: bool) -> Array<i64> {
    let a = standard(a);
    let s = a.as_slice().expect("standard layout");
    let dims = a.shape();
    let n = dims[axis];
    let (outer, inner): (usize, usize) = (dims[..axis].iter().product(), dims[axis + 1..].iter().product());
    let mut out = vec![0i64; outer * k * inner];
    let mut lane: Vec<usize> = Vec::with_capacity(n);
    for o in 0..outer {
        for i in 0..inner {
            let at = |j: usize| s[(o * n + j) * inner + i];
            lane.clear();
            lane.extend(0..n);
            lane.sort_by(|&p, &q| {
                let ord = nan_largest(at(p), at(q));
                if largest {
                    ord.reverse()
                } else {
                    ord
                }
            });
            for (r, &j) in lane[..k].iter().enumerate() {
                out[(o * k + r) * inner + i] = j as i64;
            }
        }
    }
    let mut out_dims = dims.to_vec();
    out_dims[axis] = k;
    Array::from_shape_vec(IxDyn(&out_dims), out).expect("length matches dims")
}

/// The order of `a` and `b` with NaN above every number (and equal to NaN).
#[allow(clippy::eq_op)] // `x != x` is the NaN test of any PartialOrd
fn nan_largest<T: PartialOrd>(a: T, b: T) -> std::cmp::Ordering {
    a.partial_cmp(&b).unwrap_or_else(|| (a != a).cmp(&(b != b)))
}
