//! Softmax, log-softmax and softmax cross-entropy, each numerically stable (the row maximum
//! is subtracted before exponentiating) and computed row by row along the chosen axis.

use super::parallel::par_min_len;
use super::reduce::{reduce_row, Reduction};
use crate::math::Float;
use crate::storage::{standard, Array};
use ndarray::IxDyn;
use rayon::prelude::*;

/// Applies `row_fn` to every row of `a` along `axis`, returning the same shape.
fn along_axis<T: Float>(a: &Array<T>, axis: usize, row_fn: impl Fn(&[T], &mut [T]) + Sync) -> Array<T> {
    let rank = a.ndim();
    let last = axis + 1 == rank;
    let perm: Vec<usize> = (0..rank).filter(|&d| d != axis).chain([axis]).collect();
    let moved = if last { standard(a) } else { standard(&a.clone().permuted_axes(IxDyn(&perm))) };
    let len = a.shape()[axis].max(1);
    let src = moved.as_slice().expect("standard");
    let mut out = vec![T::zero(); src.len()];
    if src.len() >= par_min_len() {
        out.par_chunks_mut(len).zip(src.par_chunks(len)).for_each(|(o, r)| row_fn(r, o));
    } else {
        out.chunks_mut(len).zip(src.chunks(len)).for_each(|(o, r)| row_fn(r, o));
    }
    let result = Array::from_shape_vec(moved.raw_dim(), out).expect("same shape");
    if last {
        result
    } else {
        let mut inverse = vec![0; rank];
        for (i, &p) in perm.iter().enumerate() {
            inverse[p] = i;
        }
        standard(&result.permuted_axes(IxDyn(&inverse)))
    }
}

/// exp(x - max) / sum(exp(x - max)) along `axis`.
pub fn softmax<T: Float>(a: &Array<T>, axis: usize) -> Array<T> {
    along_axis(a, axis, softmax_row)
}

super::simd::multiversion! {
    /// `out = exp(x - max)`, in the widest build the CPU runs (the same bits in each: see
    /// `kernels::simd`).
    fn exp_shifted<T: Float>(x: &[T], max: T, out: &mut [T]) = exp_shifted_body;
}

#[inline(always)]
fn exp_shifted_body<T: Float>(x: &[T], max: T, out: &mut [T]) {
    for (o, &v) in out.iter_mut().zip(x) {
        *o = v.sub(max).exp();
    }
}

fn softmax_row<T: Float>(x: &[T], out: &mut [T]) {
    let max = reduce_row(x, Reduction::Max);
    exp_shifted(x, max, out);
    let sum = reduce_row(out, Reduction::Sum);
    for o in out.iter_mut() {
        *o = o.div(sum);
    }
}

/// x - max - ln(sum(exp(x - max))) along `axis`.
pub fn log_softmax<T: Float>(a: &Array<T>, axis: usize) -> Array<T> {
    along_axis(a, axis, log_softmax_row)
}

fn log_softmax_row<T: Float>(x: &[T], out: &mut [T]) {
    let max = reduce_row(x, Reduction::Max);
    exp_shifted(x, max, out);
    let lse = reduce_row(out, Reduction::Sum).ln();
    for (o, &v) in out.iter_mut().zip(x) {
        *o = v.sub(max).sub(lse);
    }
}

/// Mean over rows of -log_softmax(logits)[row, label[row]], for logits `[n, c]`.
pub fn cross_entropy<T: Float>(logits: &Array<T>, labels: &[usize]) -> T {
    let ls = log_softmax(logits, 1);
    let ls = ls.as_slice().expect("standard");
    let c = logits.shape()[1];
    let picked: Vec<T> = labels.iter().enumerate().map(|(r, &l)| ls[r * c + l].neg()).collect();
    reduce_row(&picked, Reduction::Sum).div(T::from_usize(labels.len()))
}
