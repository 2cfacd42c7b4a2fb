//! Elementwise kernels: map, zip with broadcasting, select. Contiguous inputs take a slice
//! loop the compiler vectorizes; large ones split into chunks over rayon; the result of each
//! element never depends on the split, so threads do not change bits.

use super::parallel::{par_min_len, CHUNK};
use crate::shape::Shape;
use crate::storage::Array;
use ndarray::{IxDyn, Zip};
use rayon::prelude::*;
use std::mem::MaybeUninit;

/// Applies `f` to every element of `src` into a new vector, in parallel when it is large.
pub fn map_slice<T, U, F>(src: &[T], f: F) -> Vec<U>
where
    T: Copy + Send + Sync,
    U: Copy + Send + Sync,
    F: Fn(T) -> U + Sync,
{
    let n = src.len();
    let mut out: Vec<U> = Vec::with_capacity(n);
    {
        let dst = &mut out.spare_capacity_mut()[..n];
        if n >= par_min_len() {
            dst.par_chunks_mut(CHUNK).zip(src.par_chunks(CHUNK)).for_each(|(d, s)| fill_map(d, s, &f));
        } else {
            fill_map(dst, src, &f);
        }
    }
    // SAFETY: every one of the n slots was written by fill_map above.
    unsafe { out.set_len(n) };
    out
}

super::simd::multiversion! {
    fn fill_map<T: Copy, U>(dst: &mut [MaybeUninit<U>], src: &[T], f: &impl Fn(T) -> U) = fill_map_body;
}

#[inline(always)]
fn fill_map_body<T: Copy, U>(dst: &mut [MaybeUninit<U>], src: &[T], f: &impl Fn(T) -> U) {
    for (d, &s) in dst.iter_mut().zip(src) {
        d.write(f(s));
    }
}

/// Applies `f` pairwise to two slices of equal length, in parallel when large.
pub fn zip_slices<T, U, F>(a: &[T], b: &[T], f: F) -> Vec<U>
where
    T: Copy + Send + Sync,
    U: Copy + Send + Sync,
    F: Fn(T, T) -> U + Sync,
{
    let n = a.len();
    debug_assert_eq!(n, b.len());
    let mut out: Vec<U> = Vec::with_capacity(n);
    {
        let dst = &mut out.spare_capacity_mut()[..n];
        if n >= par_min_len() {
            dst.par_chunks_mut(CHUNK).zip(a.par_chunks(CHUNK).zip(b.par_chunks(CHUNK))).for_each(|(d, (x, y))| fill_zip(d, x, y, &f));
        } else {
            fill_zip(dst, a, b, &f);
        }
    }
    // SAFETY: every one of the n slots was written by fill_zip above.
    unsafe { out.set_len(n) };
    out
}

super::simd::multiversion! {
    fn fill_zip<T: Copy, U>(dst: &mut [MaybeUninit<U>], a: &[T], b: &[T], f: &impl Fn(T, T) -> U) = fill_zip_body;
}

#[inline(always)]
fn fill_zip_body<T: Copy, U>(dst: &mut [MaybeUninit<U>], a: &[T], b: &[T], f: &impl Fn(T, T) -> U) {
    for ((d, &x), &y) in dst.iter_mut().zip(a).zip(b) {
        d.write(f(x, y));
    }
}

/// `f` applied to every element of `a`.
pub fn map<T, U, F>(a: &Array<T>, f: F) -> Array<U>
where
    T: Copy + Send + Sync,
    U: Copy + Send + Sync,
    F: Fn(T) -> U + Sync,
{
    match a.as_slice() {
        Some(s) => like(a, map_slice(s, f)),
        None => {
            // Copied to row-major first, so the loop is the dispatched (vectorized) one.
            let a = crate::storage::standard(a);
            like(&a, map_slice(a.as_slice().expect("standard"), f))
        }
    }
}

/// `f` applied pairwise, broadcasting `a` and `b` to `shape` (their NumPy broadcast).
pub fn zip<T, U, F>(a: &Array<T>, b: &Array<T>, shape: &Shape, f: F) -> Array<U>
where
    T: Copy + Send + Sync,
    U: Copy + Send + Sync,
    F: Fn(T, T) -> U + Sync + Send,
{
    if a.shape() == b.shape()
        && let (Some(x), Some(y)) = (a.as_slice(), b.as_slice())
    {
        return like(a, zip_slices(x, y, f));
    }
    if b.len() == 1 {
        let y = *b.iter().next().expect("one element");
        if a.shape() == shape.dims() {
            return map(a, |x| f(x, y));
        }
    }
    if a.len() == 1 {
        let x = *a.iter().next().expect("one element");
        if b.shape() == shape.dims() {
            return map(b, |y| f(x, y));
        }
    }
    if let Some(inner) = one_per_row(a, b, shape) {
        let (x, ys) = (a.as_slice().expect("standard"), b.as_slice().expect("standard"));
        return like(a, zip_rows(x, ys, inner, &f));
    }
    if let Some(inner) = one_per_row(b, a, shape) {
        let (y, xs) = (b.as_slice().expect("standard"), a.as_slice().expect("standard"));
        return like(b, zip_rows(y, xs, inner, |y, x| f(x, y)));
    }
    let dims = IxDyn(shape.dims());
    let av = a.broadcast(dims.clone()).expect("shapes checked by the op's shape rule");
    let bv = b.broadcast(dims).expect("shapes checked by the op's shape rule");
    let zip = Zip::from(&av).and(&bv);
    if shape.numel() >= par_min_len() {
        zip.par_map_collect(|&x, &y| f(x, y)).into_shared()
    } else {
        zip.map_collect(|&x, &y| f(x, y)).into_shared()
    }
}

/// When `full` has `shape` and `one` holds one value per row of it — `one`'s dims are
/// `shape`'s leading dims, then 1s (a row's mean, `[4, 128, 1]` beside `[4, 128, 256]`) —
/// both in standard layout and not empty: the length of those rows.
fn one_per_row<T>(full: &Array<T>, one: &Array<T>, shape: &Shape) -> Option<usize> {
    let dims = shape.dims();
    if full.shape() != dims || one.ndim() != dims.len() || !full.is_standard_layout() || !one.is_standard_layout() || full.is_empty() {
        return None;
    }
    let kept = one.shape().iter().zip(dims).take_while(|(o, d)| o == d).count();
    let ones = one.shape()[kept..].iter().all(|&o| o == 1);
    (ones && kept < dims.len()).then(|| dims[kept..].iter().product())
}

/// `f(x, y)` for each row of `inner` elements of `xs` with its row's `y` from `ys`: each row
/// a dispatched slice loop (ndarray's general broadcast walk was ~5x slower).
fn zip_rows<T, U, F>(xs: &[T], ys: &[T], inner: usize, f: F) -> Vec<U>
where
    T: Copy + Send + Sync,
    U: Copy + Send + Sync,
    F: Fn(T, T) -> U + Sync,
{
    let n = xs.len();
    let mut out: Vec<U> = Vec::with_capacity(n);
    {
        let dst = &mut out.spare_capacity_mut()[..n];
        let rows = |dst: &mut [MaybeUninit<U>], xs: &[T], ys: &[T]| {
            for ((d, x), &y) in dst.chunks_mut(inner).zip(xs.chunks(inner)).zip(ys) {
                fill_map(d, x, &|x| f(x, y));
            }
        };
        if n >= par_min_len() {
            let per_task = (CHUNK / inner).max(1);
            dst.par_chunks_mut(per_task * inner)
                .zip(xs.par_chunks(per_task * inner).zip(ys.par_chunks(per_task)))
                .for_each(|(d, (x, y))| rows(d, x, y));
        } else {
            rows(dst, xs, ys);
        }
    }
    // SAFETY: every one of the n slots was written: `ys` has one value per row of `xs`.
    unsafe { out.set_len(n) };
    out
}

/// `if cond { a } else { b }` per element, broadcasting all three to `shape`.
pub fn select<T: Copy + Send + Sync>(cond: &Array<bool>, a: &Array<T>, b: &Array<T>, shape: &Shape) -> Array<T> {
    let dims = IxDyn(shape.dims());
    let c = cond.broadcast(dims.clone()).expect("shapes checked by the op's shape rule");
    let x = a.broadcast(dims.clone()).expect("shapes checked by the op's shape rule");
    let y = b.broadcast(dims).expect("shapes checked by the op's shape rule");
    let zip = Zip::from(&c).and(&x).and(&y);
    let pick = |&c: &bool, &x: &T, &y: &T| if c { x } else { y };
    if shape.numel() >= par_min_len() {
        zip.par_map_collect(pick).into_shared()
    } else {
        zip.map_collect(pick).into_shared()
    }
}

/// An array of `a`'s dims from row-major data (`a` in standard layout): reuses `a`'s
/// dimension value instead of building one from a slice.
#[inline]
fn like<T, U>(a: &Array<T>, v: Vec<U>) -> Array<U> {
    debug_assert!(a.is_standard_layout() && v.len() == a.len());
    // SAFETY: `v` holds one element per position of `a`'s dims, in row-major order.
    unsafe { Array::from_shape_vec_unchecked(a.raw_dim(), v) }
}

/// An array of the given dims from row-major data.
pub fn from_vec<T>(dims: &[usize], v: Vec<T>) -> Array<T> {
    Array::from_shape_vec(IxDyn(dims), v).expect("length matches dims")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `a - b` through ndarray's general broadcast walk, the path the per-row one replaces.
    fn general(a: &Array<f32>, b: &Array<f32>, shape: &Shape) -> Vec<f32> {
        let dims = IxDyn(shape.dims());
        Zip::from(&a.broadcast(dims.clone()).unwrap()).and(&b.broadcast(dims).unwrap()).map_collect(|&x, &y| x - y).into_iter().collect()
    }

    /// One value per row on either side, per-row ranks of 1 and 2 trailing dims, small and over
    /// the parallel threshold: each element is `f(a's, b's)`, in that order (a subtraction).
    #[test]
    fn one_value_per_row_on_either_side() {
        let a = from_vec(&[2, 3], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let b = from_vec(&[2, 1], vec![10.0f32, 20.0]);
        let shape = Shape::new(&[2, 3]);
        assert_eq!(one_per_row(&a, &b, &shape), Some(3));
        assert_eq!(zip(&a, &b, &shape, |x, y| x - y).iter().copied().collect::<Vec<_>>(), [-9.0, -8.0, -7.0, -16.0, -15.0, -14.0]);
        assert_eq!(zip(&b, &a, &shape, |x, y| x - y).iter().copied().collect::<Vec<_>>(), [9.0, 8.0, 7.0, 16.0, 15.0, 14.0]);
        for (full, per_row) in [(vec![4, 3, 50], vec![4, 3, 1]), (vec![4, 3, 50], vec![4, 1, 1]), (vec![3, 200, 128], vec![3, 200, 1])] {
            let n: usize = full.iter().product();
            let a = from_vec(&full, (0..n).map(|i| (i % 97) as f32 * 0.37 - 11.0).collect());
            let m: usize = per_row.iter().product();
            let b = from_vec(&per_row, (0..m).map(|i| (i % 13) as f32 * 1.7 - 5.0).collect());
            let shape = Shape::new(&full);
            assert_eq!(zip(&a, &b, &shape, |x, y| x - y).iter().copied().collect::<Vec<_>>(), general(&a, &b, &shape), "{full:?} - {per_row:?}");
            assert_eq!(zip(&b, &a, &shape, |x, y| x - y).iter().copied().collect::<Vec<_>>(), general(&b, &a, &shape), "{per_row:?} - {full:?}");
        }
        // Not one value per row: a broadcast leading dim, or a rank short of the output's.
        assert_eq!(one_per_row(&a, &from_vec(&[1, 3], vec![1.0f32; 3]), &shape), None);
        assert_eq!(one_per_row(&a, &from_vec(&[3], vec![1.0f32; 3]), &shape), None);
        assert_eq!(one_per_row(&a, &from_vec(&[2, 3], vec![1.0f32; 6]), &shape), None);
    }
}
