//! Softmax, log-softmax and softmax cross-entropy, each numerically stable (the row maximum
//! is subtracted before exponentiating) and computed row by row along the chosen axis.

use super::parallel::{par_min_len, CHUNK};
use super::reduce::{reduce_row, reduce_rows_into, Reduction};
use crate::math::Float;
use crate::storage::{standard, Array};
use ndarray::IxDyn;
use rayon::prelude::*;

/// Applies `rows_fn` to the rows of `a` along `axis` (`rows_fn(rows, len, out)`: whole rows of
/// `len`, in blocks), returning the same shape.
fn along_axis<T: Float>(a: &Array<T>, axis: usize, rows_fn: impl Fn(&[T], usize, &mut [T]) + Sync) -> Array<T> {
    let rank = a.ndim();
    let last = axis + 1 == rank;
    let perm: Vec<usize> = (0..rank).filter(|&d| d != axis).chain([axis]).collect();
    let moved = if last { standard(a) } else { standard(&a.clone().permuted_axes(IxDyn(&perm))) };
    let len = a.shape()[axis].max(1);
    let src = moved.as_slice().expect("standard");
    let mut out = vec![T::zero(); src.len()];
    // Blocks of whole rows, about `CHUNK` elements each: rows go through each step together
    // (see `softmax_rows`), and a task is worth handing to a thread.
    let block = (CHUNK / len).max(1) * len;
    if src.len() >= par_min_len() {
        out.par_chunks_mut(block).zip(src.par_chunks(block)).for_each(|(o, r)| rows_fn(r, len, o));
    } else {
        out.chunks_mut(block).zip(src.chunks(block)).for_each(|(o, r)| rows_fn(r, len, o));
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
    along_axis(a, axis, softmax_rows)
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

super::simd::multiversion! {
    /// `out = out / sum`, in the widest build the CPU runs (division is correctly rounded at
    /// every width).
    fn divide_by<T: Float>(out: &mut [T], sum: T) = divide_by_body;
}

#[inline(always)]
fn divide_by_body<T: Float>(out: &mut [T], sum: T) {
    for o in out.iter_mut() {
        *o = o.div(sum);
    }
}

super::simd::multiversion! {
    /// `out = x - max - lse`, in the widest build the CPU runs.
    fn shift_by<T: Float>(x: &[T], max: T, lse: T, out: &mut [T]) = shift_by_body;
}

#[inline(always)]
fn shift_by_body<T: Float>(x: &[T], max: T, lse: T, out: &mut [T]) {
    for (o, &v) in out.iter_mut().zip(x) {
        *o = v.sub(max).sub(lse);
    }
}

/// Rows of a group: those whose reductions run side by side (see [`reduce_rows_into`]).
const GROUP: usize = 4;

/// Rows (of `len`) a group at a time, each step over the group's rows before the next, so
/// their reductions overlap; each row's values are computed exactly as one row alone would
/// be: its max, `exp(x - max)` into `out`, their sum, then `tail(x, max, sum, out)`.
fn rows_in_groups<T: Float>(x: &[T], len: usize, out: &mut [T], tail: impl Fn(&[T], T, T, &mut [T])) {
    for (x, out) in x.chunks(GROUP * len).zip(out.chunks_mut(GROUP * len)) {
        let (max, sum) = exp_group(x, len, out);
        for (((x, o), &m), &s) in x.chunks(len).zip(out.chunks_mut(len)).zip(&max).zip(&sum) {
            tail(x, m, s, o);
        }
    }
}

/// For up to [`GROUP`] rows of `len` in `x`: `out = exp(x - max)` row by row, and each row's
/// max and sum of those (rows past the group's end: zeros).
fn exp_group<T: Float>(x: &[T], len: usize, out: &mut [T]) -> ([T; GROUP], [T; GROUP]) {
    let rows = x.len() / len;
    let mut max = [T::zero(); GROUP];
    reduce_rows_into(x, len, Reduction::Max, &mut max[..rows]);
    for ((x, o), &m) in x.chunks(len).zip(out.chunks_mut(len)).zip(&max) {
        exp_shifted(x, m, o);
    }
    let mut sum = [T::zero(); GROUP];
    reduce_rows_into(&out[..x.len()], len, Reduction::Sum, &mut sum[..rows]);
    (max, sum)
}

fn softmax_rows<T: Float>(x: &[T], len: usize, out: &mut [T]) {
    rows_in_groups(x, len, out, |_, _, sum, o| divide_by(o, sum));
}

/// x - max - ln(sum(exp(x - max))) along `axis`.
pub fn log_softmax<T: Float>(a: &Array<T>, axis: usize) -> Array<T> {
    along_axis(a, axis, log_softmax_rows)
}

fn log_softmax_rows<T: Float>(x: &[T], len: usize, out: &mut [T]) {
    rows_in_groups(x, len, out, |x, max, sum, o| shift_by(x, max, sum.ln(), o));
}

/// Mean over rows of -log_softmax(logits)[row, label[row]], for logits `[n, c]`: per row,
/// `-(x[label] - max - ln(sum(exp(x - max))))`, the very steps of [`log_softmax`] for the one
/// element the loss reads, without the rest of the row's log-softmax.
pub fn cross_entropy<T: Float>(logits: &Array<T>, labels: &[usize]) -> T {
    let logits = standard(logits);
    let x = logits.as_slice().expect("standard");
    let c = logits.shape()[1];
    let mut picked = vec![T::zero(); labels.len()];
    // No classes, no rows to read (a label would be out of range).
    if let Some(rows_in_chunk) = CHUNK.checked_div(c) {
        // Tasks of whole groups of rows, about `CHUNK` elements each.
        let rows = rows_in_chunk.max(1).next_multiple_of(GROUP);
        let task = |(x, (labels, picked)): (&[T], (&[usize], &mut [T]))| picked_losses(x, c, labels, picked);
        if x.len() >= par_min_len() {
            x.par_chunks(rows * c).zip(labels.par_chunks(rows).zip(picked.par_chunks_mut(rows))).for_each(task);
        } else {
            x.chunks(rows * c).zip(labels.chunks(rows).zip(picked.chunks_mut(rows))).for_each(task);
        }
    }
    reduce_row(&picked, Reduction::Sum).div(T::from_usize(labels.len()))
}

/// `-log_softmax(row)[label]` for each row of `c` in `x`, into `picked`.
fn picked_losses<T: Float>(x: &[T], c: usize, labels: &[usize], picked: &mut [T]) {
    let mut exps = vec![T::zero(); GROUP * c];
    for ((x, labels), picked) in x.chunks(GROUP * c).zip(labels.chunks(GROUP)).zip(picked.chunks_mut(GROUP)) {
        let (max, sum) = exp_group(x, c, &mut exps);
        for (r, (&l, p)) in labels.iter().zip(picked.iter_mut()).enumerate() {
            *p = x[r * c + l].sub(max[r]).sub(sum[r].ln()).neg();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::simd::{set_max_level, Level};
    use crate::math::Num;

    /// One row the way the kernel computed it before rows went in groups: its max, `exp(x -
    /// max)`, their sum and the quotients, each step with the scalar functions alone (the
    /// crate's `Float::exp`, not `f32`'s own).
    fn softmax_row_by_hand(x: &[f32]) -> Vec<f32> {
        let max = reduce_row(x, Reduction::Max);
        let e: Vec<f32> = x.iter().map(|&v| Float::exp(v.sub(max))).collect();
        let sum = reduce_row(&e, Reduction::Sum);
        e.iter().map(|&v| v.div(sum)).collect()
    }

    fn log_softmax_row_by_hand(x: &[f32]) -> Vec<f32> {
        let max = reduce_row(x, Reduction::Max);
        let e: Vec<f32> = x.iter().map(|&v| Float::exp(v.sub(max))).collect();
        let lse = reduce_row(&e, Reduction::Sum).ln();
        x.iter().map(|&v| v.sub(max).sub(lse)).collect()
    }

    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|v| v.to_bits()).collect()
    }

    /// Every row of every shape gives the bits it gave alone, at every level: rows shorter
    /// than a lane group and longer, row counts that leave 1 to 3 after the groups of 4, a
    /// row with a NaN, one with an infinity, one of -inf only; softmax over a middle axis too.
    #[test]
    fn rows_in_groups_keep_each_rows_bits_at_every_level() {
        let _only_this_test_caps_the_level = crate::kernels::simd::LEVEL_CAPS.lock().unwrap_or_else(|e| e.into_inner());
        for (rows, len) in [(1, 5), (6, 7), (5, 8), (7, 9), (13, 128), (3, 1000)] {
            let mut x: Vec<f32> = crate::kernels::test_values(rows * len, len as u64).into_iter().map(|v| (v * 30.0) as f32).collect();
            if rows > 2 {
                x[len + 1] = f32::NAN;
                x[2 * len] = f32::INFINITY;
            }
            if rows > 4 {
                x[4 * len..5 * len].fill(f32::NEG_INFINITY);
            }
            let a = Array::from_shape_vec(IxDyn(&[rows, len]), x.clone()).unwrap().into_shared();
            let want: Vec<u32> = x.chunks(len).flat_map(|r| bits(&softmax_row_by_hand(r))).collect();
            let want_log: Vec<u32> = x.chunks(len).flat_map(|r| bits(&log_softmax_row_by_hand(r))).collect();
            // The same rows along axis 0 of the transpose.
            let t = standard(&a.clone().reversed_axes());
            for cap in [Level::Baseline, Level::Avx2, Level::Avx512] {
                set_max_level(cap);
                let got = bits(softmax(&a, 1).as_slice().unwrap());
                let got_log = bits(log_softmax(&a, 1).as_slice().unwrap());
                let got_t = bits(standard(&softmax(&t, 0).reversed_axes()).as_slice().unwrap());
                set_max_level(Level::Avx512);
                assert_eq!(got, want, "softmax of {rows} rows of {len} at {cap:?}");
                assert_eq!(got_log, want_log, "log_softmax of {rows} rows of {len} at {cap:?}");
                assert_eq!(got_t, want, "softmax over axis 0 of {len} x {rows} at {cap:?}");
            }
        }
    }

    /// The loss reads the log-softmax's bits at each label, as when the whole log-softmax was
    /// computed first, at every level (and with a NaN row, which makes the loss NaN).
    #[test]
    fn cross_entropy_reads_the_log_softmax_bits_at_every_level() {
        let _only_this_test_caps_the_level = crate::kernels::simd::LEVEL_CAPS.lock().unwrap_or_else(|e| e.into_inner());
        for (rows, c, nan) in [(1, 3, false), (13, 9, false), (70, 1000, false), (6, 16, true)] {
            let mut x: Vec<f32> = crate::kernels::test_values(rows * c, c as u64).into_iter().map(|v| (v * 20.0) as f32).collect();
            if nan {
                x[c + 2] = f32::NAN;
            }
            let labels: Vec<usize> = (0..rows).map(|r| (r * 7) % c).collect();
            let a = Array::from_shape_vec(IxDyn(&[rows, c]), x.clone()).unwrap().into_shared();
            let picked: Vec<f32> = x.chunks(c).zip(&labels).map(|(r, &l)| log_softmax_row_by_hand(r)[l].neg()).collect();
            let want = reduce_row(&picked, Reduction::Sum).div(rows as f32);
            assert_eq!(want.is_nan(), nan);
            for cap in [Level::Baseline, Level::Avx2, Level::Avx512] {
                set_max_level(cap);
                let got = cross_entropy(&a, &labels);
                set_max_level(Level::Avx512);
                assert_eq!(got.to_bits(), want.to_bits(), "{rows} rows of {c} at {cap:?}");
            }
        }
        // By hand: logits [ln 3, 0] against label 0 and 1: -ln(3/4) and -ln(1/4), mean ln(4/sqrt(3)).
        let a = Array::from_shape_vec(IxDyn(&[2, 2]), vec![3f64.ln(), 0.0, 3f64.ln(), 0.0]).unwrap().into_shared();
        assert!((cross_entropy(&a, &[0, 1]) - (4.0 / 3f64.sqrt()).ln()).abs() < 1e-15);
    }

    /// By hand: equal logits share evenly, and e^(ln 3) against e^0 is 3 to 1.
    #[test]
    fn softmax_by_hand() {
        let a = Array::from_shape_vec(IxDyn(&[2, 8]), [[0.0f64; 8], [3f64.ln(), 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]].concat()).unwrap().into_shared();
        let p = softmax(&a, 1);
        let p = p.as_slice().unwrap();
        assert!(p[..8].iter().all(|&v| v == 0.125), "{p:?}");
        assert!((p[8] - 0.3).abs() < 1e-15 && p[9..].iter().all(|&v| (v - 0.1).abs() < 1e-15), "{p:?}");
        let l = log_softmax(&a, 1);
        assert!(l.as_slice().unwrap()[..8].iter().all(|&v| v == -(8f64.ln())));
    }
}
