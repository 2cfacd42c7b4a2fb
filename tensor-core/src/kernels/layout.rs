//! Kernels that move data without arithmetic: reshape, permute, broadcast, concat, narrow,
//! pad. Permute and narrow share the input's buffer (the storage is copy-on-write, so no
//! tensor can observe the sharing).

use super::reduce::{reduce, Reduction};
use crate::math::Num;
use crate::storage::{standard, Array};
use ndarray::{Axis, IxDyn, Slice};

/// `a` with new dims of the same element count.
pub fn reshape<T: Clone>(a: &Array<T>, dims: &[usize]) -> Array<T> {
    standard(a).into_shape_with_order(IxDyn(dims)).expect("element count checked by the shape rule")
}

/// `a` with its axes reordered: output axis i is input axis `perm[i]`.
pub fn permute<T: Clone>(a: &Array<T>, perm: &[usize]) -> Array<T> {
    a.clone().permuted_axes(IxDyn(perm))
}

/// `a` repeated along broadcast dims to `dims`.
pub fn broadcast_to<T: Clone>(a: &Array<T>, dims: &[usize]) -> Array<T> {
    if a.shape() == dims {
        return a.clone();
    }
    a.broadcast(IxDyn(dims)).expect("checked by the shape rule").to_owned().into_shared()
}

/// Sums `a` over the dims a broadcast to its shape would have added, giving `dims`.
pub fn sum_to<T: Num>(a: &Array<T>, dims: &[usize]) -> Array<T> {
    if a.shape() == dims {
        return a.clone();
    }
    let lead = a.ndim() - dims.len();
    let axes: Vec<usize> = (0..a.ndim()).filter(|&d| d < lead || (dims[d - lead] == 1 && a.shape()[d] != 1)).collect();
    reshape(&reduce(a, &axes, Reduction::Sum), dims)
}

/// The inputs joined along `axis`. Parts in standard layout are copied as contiguous blocks
/// (one per part and index of the axes before `axis`): ndarray's general `concatenate` walks
/// them element by element, which at ResNet-18's batch 8 cost more than its pooling.
pub fn concat<T: Clone>(parts: &[&Array<T>], axis: usize) -> Array<T> {
    let slices: Option<Vec<&[T]>> = parts.iter().map(|p| p.as_slice()).collect();
    if let (Some(slices), Some(first)) = (slices, parts.first()) {
        let mut dims = first.shape().to_vec();
        dims[axis] = parts.iter().map(|p| p.shape()[axis]).sum();
        let outer: usize = dims[..axis].iter().product();
        let inner: usize = dims[axis + 1..].iter().product();
        let mut out = Vec::with_capacity(dims.iter().product());
        for o in 0..outer {
            for (p, s) in parts.iter().zip(&slices) {
                let block = p.shape()[axis] * inner;
                out.extend_from_slice(&s[o * block..][..block]);
            }
        }
        return Array::from_shape_vec(IxDyn(&dims), out).expect("length matches dims");
    }
    let views: Vec<_> = parts.iter().map(|p| p.view()).collect();
    ndarray::concatenate(Axis(axis), &views).expect("checked by the shape rule").into_shared()
}

/// The `len` entries of `axis` starting at `start`.
pub fn narrow<T: Clone>(a: &Array<T>, axis: usize, start: usize, len: usize) -> Array<T> {
    let mut v = a.clone();
    v.slice_axis_inplace(Axis(axis), Slice::from(start..start + len));
    v
}

/// `a` with `before` zeros in front of and `after` zeros behind it along `axis`.
pub fn pad<T: Num>(a: &Array<T>, axis: usize, before: usize, after: usize) -> Array<T> {
    let mut dims = a.shape().to_vec();
    dims[axis] += before + after;
    let mut out = ndarray::ArrayD::from_elem(IxDyn(&dims), T::zero());
    out.slice_axis_mut(Axis(axis), Slice::from(before..before + a.shape()[axis])).assign(a);
    out.into_shared()
}
