//! Reductions (sum, max, min, argmax) over any set of axes. The summation order is fixed by
//! the shape alone — blocks of `CHUNK` elements summed with 8 lanes, then the block sums in
//! order — so results do not depend on the number of threads, and eager and graph agree.

use super::parallel::{par_min_len, CHUNK};
use crate::math::Num;
use crate::storage::{standard, Array};
use ndarray::IxDyn;
use rayon::prelude::*;

/// Which reduction to apply.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reduction {
    Sum,
    Max,
    Min,
    Prod,
}

impl Reduction {
    fn identity<T: Num>(self) -> T {
        match self {
            Reduction::Sum => T::zero(),
            Reduction::Max => T::lowest(),
            Reduction::Min => T::highest(),
            Reduction::Prod => T::from_usize(1),
        }
    }

    #[inline(always)]
    fn combine<T: Num>(self, a: T, b: T) -> T {
        match self {
            Reduction::Sum => a.add(b),
            Reduction::Max => a.maximum(b),
            Reduction::Min => a.minimum(b),
            Reduction::Prod => a.mul(b),
        }
    }
}

/// Reduces `a` over `axes` (sorted, distinct), dropping those dims.
pub fn reduce<T: Num>(a: &Array<T>, axes: &[usize], how: Reduction) -> Array<T> {
    let rank = a.ndim();
    let kept: Vec<usize> = (0..rank).filter(|d| !axes.contains(d)).collect();
    let out_dims: Vec<usize> = kept.iter().map(|&d| a.shape()[d]).collect();
    let inner: usize = axes.iter().map(|&d| a.shape()[d]).product();
    let outer: usize = out_dims.iter().product();
    let a = standard(a);
    let trailing = axes.iter().enumerate().all(|(i, &d)| d == rank - axes.len() + i);
    let leading = axes.iter().enumerate().all(|(i, &d)| d == i);
    let data = if trailing {
        reduce_rows(a.as_slice().expect("standard"), inner, outer, how)
    } else if leading {
        reduce_columns(a.as_slice().expect("standard"), inner, outer, how)
    } else {
        let perm: Vec<usize> = kept.iter().chain(axes).copied().collect();
        let moved = standard(&a.permuted_axes(IxDyn(&perm)));
        reduce_rows(moved.as_slice().expect("standard"), inner, outer, how)
    };
    Array::from_shape_vec(IxDyn(&out_dims), data).expect("length matches dims")
}

/// Reduces each of the `rows` consecutive rows of length `len`.
fn reduce_rows<T: Num>(x: &[T], len: usize, rows: usize, how: Reduction) -> Vec<T> {
    let mut out = vec![how.identity(); rows];
    if len == 0 {
        // Reducing an empty dim: every row is the identity (the data is empty, but the rows
        // are not: a [3, 0] tensor summed over dim 1 is [0, 0, 0]).
        return out;
    }
    if x.len() >= par_min_len() && rows > 1 {
        // Blocks of rows of about `CHUNK` elements, a multiple of the rows reduced side by side.
        let per_task = (CHUNK / len).max(1).next_multiple_of(SIDE_BY_SIDE);
        out.par_chunks_mut(per_task).zip(x.par_chunks(per_task * len)).for_each(|(o, x)| reduce_rows_into(x, len, how, o));
    } else {
        reduce_rows_into(x, len, how, &mut out);
    }
    out
}

/// Reduces one row: blocks of `CHUNK`, each over 8 lanes, then the block results in order.
pub fn reduce_row<T: Num>(x: &[T], how: Reduction) -> T {
    if x.len() <= CHUNK {
        return reduce_block(x, how);
    }
    let partials: Vec<T> = if x.len() >= par_min_len() {
        x.par_chunks(CHUNK).map(|c| reduce_block(c, how)).collect()
    } else {
        x.chunks(CHUNK).map(|c| reduce_block(c, how)).collect()
    };
    partials.into_iter().fold(how.identity(), |s, v| how.combine(s, v))
}

fn reduce_block<T: Num>(x: &[T], how: Reduction) -> T {
    let mut out = how.identity();
    reduce_block_into(x, how, &mut out);
    out
}

super::simd::multiversion! {
    /// One block's reduction into `out`, in the widest build the CPU runs (the same bits in
    /// each: the same lanes, combined in the same order).
    fn reduce_block_into<T: Num>(x: &[T], how: Reduction, out: &mut T) = reduce_block_body;
}

/// Chooses the reduction once, outside the loop, so that each loop is one operation the
/// compiler vectorizes (a choice inside it kept every element's step scalar).
#[inline(always)]
fn reduce_block_body<T: Num>(x: &[T], how: Reduction, out: &mut T) {
    *out = match how {
        Reduction::Sum => lanes(x, T::zero(), |a, b| a.add(b)),
        Reduction::Max => lanes(x, T::lowest(), |a, b| a.maximum(b)),
        Reduction::Min => lanes(x, T::highest(), |a, b| a.minimum(b)),
        Reduction::Prod => lanes(x, T::from_usize(1), |a, b| a.mul(b)),
    };
}

/// `x` combined over 8 lanes, the lanes paired (0 with 4, ...), then the rest in order.
#[inline(always)]
fn lanes<T: Num>(x: &[T], identity: T, f: impl Fn(T, T) -> T + Copy) -> T {
    let mut acc = [identity; 8];
    let chunks = x.chunks_exact(8);
    let rest = chunks.remainder();
    for c in chunks {
        for i in 0..8 {
            acc[i] = f(acc[i], c[i]);
        }
    }
    finish_lanes(acc, rest, f)
}

/// One row's 8 lanes combined as [`lanes`] ends: paired (0 with 4, ...), the pairs
/// `(0 + 2) + (1 + 3)`, then the `rest` of the row in order.
#[inline(always)]
fn finish_lanes<T: Num>(acc: [T; 8], rest: &[T], f: impl Fn(T, T) -> T) -> T {
    let pairs = [f(acc[0], acc[4]), f(acc[1], acc[5]), f(acc[2], acc[6]), f(acc[3], acc[7])];
    let mut s = f(f(pairs[0], pairs[2]), f(pairs[1], pairs[3]));
    for &v in rest {
        s = f(s, v);
    }
    s
}

/// Rows [`reduce_rows_into`] reduces side by side.
const SIDE_BY_SIDE: usize = 4;

/// Reduces each row of length `len` in `x` into `out` (one value per row), each with the bits
/// of [`reduce_row`]. Rows up to `CHUNK` long go four at a time, their lanes side by side:
/// one row's 8 lanes are one chain of dependent steps, each waiting for the last to finish
/// (~4 cycles per 8 elements); four rows' chains overlap and fill the pipeline (~2.5x). Each
/// row still takes its own steps in its own order.
pub fn reduce_rows_into<T: Num>(x: &[T], len: usize, how: Reduction, out: &mut [T]) {
    debug_assert_eq!(x.len(), len * out.len(), "{} rows of {len}", out.len());
    if len == 0 {
        out.fill(how.identity());
        return;
    }
    if !(8..=CHUNK).contains(&len) {
        x.chunks(len).zip(out.iter_mut()).for_each(|(r, o)| *o = reduce_row(r, how));
        return;
    }
    let mut blocks = x.chunks_exact(SIDE_BY_SIDE * len);
    let mut outs = out.chunks_exact_mut(SIDE_BY_SIDE);
    for (b, o) in (&mut blocks).zip(&mut outs) {
        reduce_side_by_side(b, len, how, o);
    }
    // Rows up to `CHUNK` long are one block each: `reduce_row` is `reduce_block` there.
    blocks.remainder().chunks(len).zip(outs.into_remainder()).for_each(|(r, o)| *o = reduce_block(r, how));
}

super::simd::multiversion! {
    /// [`SIDE_BY_SIDE`] rows of `len` (8 to `CHUNK`) reduced into `out`, in the widest build
    /// the CPU runs (the same bits in each: the same lanes, combined in the same order).
    fn reduce_side_by_side<T: Num>(x: &[T], len: usize, how: Reduction, out: &mut [T]) = side_by_side_body;
}

/// As [`reduce_block_body`]: the reduction chosen once, outside the loop.
#[inline(always)]
fn side_by_side_body<T: Num>(x: &[T], len: usize, how: Reduction, out: &mut [T]) {
    match how {
        Reduction::Sum => side_by_side(x, len, T::zero(), |a, b| a.add(b), out),
        Reduction::Max => side_by_side(x, len, T::lowest(), |a, b| a.maximum(b), out),
        Reduction::Min => side_by_side(x, len, T::highest(), |a, b| a.minimum(b), out),
        Reduction::Prod => side_by_side(x, len, T::from_usize(1), |a, b| a.mul(b), out),
    }
}

/// [`lanes`] of [`SIDE_BY_SIDE`] rows at once: row `r`'s lane `i` takes the same elements in
/// the same order as [`lanes`] would.
#[inline(always)]
fn side_by_side<T: Num>(x: &[T], len: usize, identity: T, f: impl Fn(T, T) -> T + Copy, out: &mut [T]) {
    let rows: [&[T]; SIDE_BY_SIDE] = std::array::from_fn(|r| &x[r * len..(r + 1) * len]);
    let whole = len / 8 * 8;
    let mut acc = [[identity; 8]; SIDE_BY_SIDE];
    let mut k = 0;
    while k < whole {
        for (a, row) in acc.iter_mut().zip(&rows) {
            let c = &row[k..k + 8];
            for i in 0..8 {
                a[i] = f(a[i], c[i]);
            }
        }
        k += 8;
    }
    finish_side_by_side(&acc, &rows, whole, f, out);
}

/// The rows' lanes finished as [`lanes`] finishes one. Out of line on purpose: inlined, the
/// pairing of lanes 0 with 4 (...) led the compiler to keep each row's lanes in four 2-wide
/// registers instead of one 8-wide one, spilling, and the loop ran slower than row by row.
#[inline(never)]
fn finish_side_by_side<T: Num>(acc: &[[T; 8]; SIDE_BY_SIDE], rows: &[&[T]; SIDE_BY_SIDE], whole: usize, f: impl Fn(T, T) -> T + Copy, out: &mut [T]) {
    for ((o, a), row) in out.iter_mut().zip(acc).zip(rows) {
        *o = finish_lanes(*a, &row[whole..], f);
    }
}

/// Reduces over the leading `rows` rows of a `rows x cols` matrix, row after row.
fn reduce_columns<T: Num>(x: &[T], rows: usize, cols: usize, how: Reduction) -> Vec<T> {
    let mut out = vec![how.identity::<T>(); cols];
    if x.len() >= par_min_len() && cols >= 2 * CHUNK / 8 {
        let width = CHUNK / 8;
        out.par_chunks_mut(width).enumerate().for_each(|(k, o)| {
            for r in 0..rows {
                let row = &x[r * cols + k * width..][..o.len()];
                combine_into(o, row, how);
            }
        });
    } else {
        for r in 0..rows {
            combine_into(&mut out, &x[r * cols..(r + 1) * cols], how);
        }
    }
    out
}

super::simd::multiversion! {
    /// `acc[j] = acc[j] (op) row[j]`, in the widest build the CPU runs.
    fn combine_into<T: Num>(acc: &mut [T], row: &[T], how: Reduction) = combine_into_body;
}

#[inline(always)]
fn combine_into_body<T: Num>(acc: &mut [T], row: &[T], how: Reduction) {
    #[inline(always)]
    fn each<T: Num>(acc: &mut [T], row: &[T], f: impl Fn(T, T) -> T) {
        for (a, &v) in acc.iter_mut().zip(row) {
            *a = f(*a, v);
        }
    }
    match how {
        Reduction::Sum => each(acc, row, |a, b| a.add(b)),
        Reduction::Max => each(acc, row, |a, b| a.maximum(b)),
        Reduction::Min => each(acc, row, |a, b| a.minimum(b)),
        Reduction::Prod => each(acc, row, |a, b| a.mul(b)),
    }
}

/// The index of the first largest element along `axis` (NaN counts as largest, as in
/// PyTorch), dropping that dim.
pub fn argmax<T: Num>(a: &Array<T>, axis: usize) -> Array<i64> {
    let rank = a.ndim();
    let perm: Vec<usize> = (0..rank).filter(|&d| d != axis).chain([axis]).collect();
    let moved = standard(&a.clone().permuted_axes(IxDyn(&perm)));
    let len = a.shape()[axis];
    let out_dims: Vec<usize> = perm[..rank - 1].iter().map(|&d| a.shape()[d]).collect();
    let data: Vec<i64> = moved.as_slice().expect("standard").chunks(len.max(1)).map(argmax_row).collect();
    Array::from_shape_vec(IxDyn(&out_dims), data).expect("length matches dims")
}

fn argmax_row<T: Num>(row: &[T]) -> i64 {
    let mut best = 0;
    for (i, &v) in row.iter().enumerate().skip(1) {
        let b = row[best];
        if !b.is_nan_value() && (v.is_nan_value() || v > b) {
            best = i;
        }
    }
    best as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arr(v: Vec<f64>, dims: &[usize]) -> Array<f64> {
        Array::from_shape_vec(IxDyn(dims), v).unwrap()
    }

    #[test]
    fn reduces_leading_trailing_and_middle_axes() {
        let a = arr((0..24).map(|v| v as f64).collect(), &[2, 3, 4]);
        let s = reduce(&a, &[0], Reduction::Sum);
        assert_eq!(s.shape(), &[3, 4]);
        assert_eq!(s[[0, 0]], 12.0);
        let s = reduce(&a, &[2], Reduction::Sum);
        assert_eq!(s.iter().copied().collect::<Vec<_>>(), vec![6.0, 22.0, 38.0, 54.0, 70.0, 86.0]);
        let s = reduce(&a, &[1], Reduction::Max);
        assert_eq!(s.iter().copied().collect::<Vec<_>>(), vec![8.0, 9.0, 10.0, 11.0, 20.0, 21.0, 22.0, 23.0]);
        let s = reduce(&a, &[0, 2], Reduction::Min);
        assert_eq!(s.iter().copied().collect::<Vec<_>>(), vec![0.0, 4.0, 8.0]);
    }

    /// The loops' fixed order, written out with one scalar step per element: 8 lanes,
    /// paired 0-4, 1-5, 2-6, 3-7, then (0+2)+(1+3), then the rest in order.
    fn by_hand(x: &[f32], how: Reduction) -> f32 {
        let mut acc = [how.identity::<f32>(); 8];
        let whole = x.len() / 8 * 8;
        for (i, &v) in x[..whole].iter().enumerate() {
            acc[i % 8] = how.combine(acc[i % 8], v);
        }
        let p: Vec<f32> = (0..4).map(|i| how.combine(acc[i], acc[i + 4])).collect();
        x[whole..].iter().fold(how.combine(how.combine(p[0], p[2]), how.combine(p[1], p[3])), |s, &v| how.combine(s, v))
    }

    #[test]
    fn rows_and_columns_give_the_scalar_steps_bits_at_every_level() {
        use crate::kernels::simd::{set_max_level, Level};
        let quiet_nan = f32::from_bits(0x7fc0_1234);
        let mut x: Vec<f32> = crate::kernels::test_values(203, 11).into_iter().map(|v| v as f32).collect();
        x[5] = -0.0;
        x[6] = 0.0;
        x[40] = f32::INFINITY;
        let mut with_nan = x.clone();
        with_nan[77] = quiet_nan;
        let _only_this_test_caps_the_level = crate::kernels::simd::LEVEL_CAPS.lock().unwrap_or_else(|e| e.into_inner());
        for how in [Reduction::Sum, Reduction::Max, Reduction::Min, Reduction::Prod] {
            for data in [&x, &with_nan] {
                for len in [0, 7, 8, 9, 64, 203] {
                    let row = &data[..len];
                    let want = by_hand(row, how).to_bits();
                    // Columns: 7 rows of 29, each column by hand.
                    let cols: Vec<u32> =
                        (0..29).map(|c| (0..7).fold(how.identity::<f32>(), |a, r| how.combine(a, data[r * 29 + c])).to_bits()).collect();
                    for cap in [Level::Baseline, Level::Avx2, Level::Avx512] {
                        set_max_level(cap);
                        let got = reduce_row(row, how).to_bits();
                        let got_cols: Vec<u32> = reduce_columns(&data[..203], 7, 29, how).iter().map(|v| v.to_bits()).collect();
                        set_max_level(Level::Avx512);
                        assert_eq!(got, want, "{how:?} of {len} at {cap:?}");
                        assert_eq!(got_cols, cols, "{how:?} columns at {cap:?}");
                    }
                }
            }
        }
        // A NaN anywhere makes max and min NaN; signed zeros keep the first seen.
        assert!(reduce_row(&with_nan[..100], Reduction::Max).is_nan());
        assert_eq!(reduce_row(&[-0.0f32, 0.0], Reduction::Max).to_bits(), (-0.0f32).to_bits());
        assert_eq!(reduce_row(&[1.0f32, 5.0, -2.0, 3.0, 4.0, 0.5, 2.0, 1.0, 6.0], Reduction::Max), 6.0);
        assert_eq!(reduce_row(&[1.0f32, 5.0, -2.0, 3.0, 4.0, 0.5, 2.0, 1.0, 6.0], Reduction::Sum), 20.5);
    }

    /// Rows reduced side by side give each row's own bits: every reduction, row lengths below,
    /// at and above one lane group, row counts that leave 1 to 3 rows after the groups of 4,
    /// NaNs of two payloads, signed zeros and infinities, at every level.
    #[test]
    fn rows_side_by_side_give_each_rows_bits_at_every_level() {
        use crate::kernels::simd::{set_max_level, Level};
        let mut x: Vec<f32> = crate::kernels::test_values(9 * 203, 12).into_iter().map(|v| v as f32).collect();
        // Row 1 of 203 has zeros of both signs as its largest values (max keeps the first
        // seen), row 2 a NaN, row 5 another NaN and an infinity.
        for v in &mut x[203..406] {
            *v = -v.abs() - 1.0;
        }
        x[203 + 10] = 0.0;
        x[203 + 3] = -0.0;
        x[406 + 17] = f32::from_bits(0x7fc0_1234);
        x[1015 + 40] = f32::from_bits(0xffc0_0042);
        x[1015 + 41] = f32::INFINITY;
        let _only_this_test_caps_the_level = crate::kernels::simd::LEVEL_CAPS.lock().unwrap_or_else(|e| e.into_inner());
        for how in [Reduction::Sum, Reduction::Max, Reduction::Min, Reduction::Prod] {
            for len in [0, 7, 8, 9, 64, 203] {
                for rows in 1..=9 {
                    let data = &x[..rows * len];
                    let want: Vec<u32> = (0..rows).map(|r| by_hand(&data[r * len..(r + 1) * len], how).to_bits()).collect();
                    for cap in [Level::Baseline, Level::Avx2, Level::Avx512] {
                        set_max_level(cap);
                        let mut got = vec![0.0f32; rows];
                        reduce_rows_into(data, len, how, &mut got);
                        set_max_level(Level::Avx512);
                        assert_eq!(got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), want, "{how:?}, {rows} rows of {len} at {cap:?}");
                    }
                }
            }
        }
        // By hand: two rows of 5 (one by one), four of 16 (side by side).
        let m = [7.0f32, 2.0, 1.0, 0.5, 3.0, 1.0, -0.0, 0.0, -2.0, -3.0];
        let mut out = [0.0f32; 2];
        reduce_rows_into(&m, 5, Reduction::Sum, &mut out);
        assert_eq!(out, [13.5, -4.0]);
        let long: Vec<f32> = (0..4 * 16).map(|i| (i % 16) as f32 - (i / 16) as f32).collect();
        let mut out = [0.0f32; 4];
        reduce_rows_into(&long, 16, Reduction::Max, &mut out);
        assert_eq!(out, [15.0, 14.0, 13.0, 12.0]);
        reduce_rows_into(&long, 16, Reduction::Sum, &mut out);
        assert_eq!(out, [120.0, 104.0, 88.0, 72.0]);
    }

    #[test]
    fn long_rows_sum_in_fixed_blocks() {
        let n = 3 * CHUNK + 17;
        let x: Vec<f64> = (0..n).map(|i| (i % 7) as f64).collect();
        let expected: f64 = x.iter().sum();
        assert_eq!(reduce_row(&x, Reduction::Sum), expected);
    }

    #[test]
    fn argmax_takes_first_max_and_nan() {
        assert_eq!(argmax_row(&[1.0, 3.0, 3.0]), 1);
        assert_eq!(argmax_row(&[1.0, f64::NAN, 3.0]), 1);
    }
}
