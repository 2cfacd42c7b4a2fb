//! Elementwise kernels: map, zip with broadcasting, select. Contiguous inputs take a slice
//! loop the compiler vectorizes; large ones split into chunks over rayon; the result of each
//! element never depends on the split, so threads do not change bits.

use super::parallel::{for_each_chunk, par_min_len, CHUNK};
use crate::shape::Shape;
use crate::storage::Array;
use ndarray::IxDyn;
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
            map_chunks(dst, src, &f);
        } else {
            fill_map(dst, src, &f);
        }
    }
    // SAFETY: every one of the n slots was written by fill_map above.
    unsafe { out.set_len(n) };
    out
}

/// [`map_slice`]'s parallel case, out of line and cold: inlined, it made the serial case of
/// a 16-element op slower (W1 eager, 48 → 54 µs for its 200 ops).
#[cold]
#[inline(never)]
fn map_chunks<T: Copy + Sync, U: Send>(dst: &mut [MaybeUninit<U>], src: &[T], f: &(impl Fn(T) -> U + Sync)) {
    for_each_chunk(dst, CHUNK, &|start, d| fill_map(d, &src[start..start + d.len()], f));
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
            for_each_chunk(dst, CHUNK, &|start, d| {
                let end = start + d.len();
                fill_zip(d, &a[start..end], &b[start..end], &f)
            });
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
    let starts = RowStarts::new(shape.dims(), [av.strides(), bv.strides()]);
    let [sa, sb] = starts.inner;
    from_rows(shape, &|row, out| {
        let [oa, ob] = starts.of(row);
        for (j, o) in (0..).zip(out) {
            // SAFETY: `starts` walks the views' own strides over their own dims.
            o.write(unsafe { f(*av.as_ptr().offset(oa + j * sa), *bv.as_ptr().offset(ob + j * sb)) });
        }
    })
}

/// Where each row (the last dim) of a broadcast output starts in each of `N` operands, viewed
/// as broadcast to the output's dims (stride 0 along a broadcast dim), in elements. Not
/// generic over the element type, so the broadcast kernels share it.
struct RowStarts<const N: usize> {
    /// The output's dims but the last.
    outer: Vec<usize>,
    /// Each operand's strides along `outer`.
    strides: [Vec<isize>; N],
    /// Each operand's stride along the last dim.
    inner: [isize; N],
}

impl<const N: usize> RowStarts<N> {
    fn new(dims: &[usize], strides: [&[isize]; N]) -> Self {
        let split = dims.len().saturating_sub(1);
        RowStarts {
            outer: dims[..split].to_vec(),
            strides: strides.map(|s| s[..split].to_vec()),
            inner: strides.map(|s| s.get(split).copied().unwrap_or(0)),
        }
    }

    /// The offsets of row `row`'s first element (rows counted in row-major order).
    fn of(&self, mut row: usize) -> [isize; N] {
        let mut at = [0isize; N];
        for (d, &len) in self.outer.iter().enumerate().rev() {
            let i = (row % len) as isize;
            row /= len;
            for (a, s) in at.iter_mut().zip(&self.strides) {
                *a += i * s[d];
            }
        }
        at
    }
}

/// An array of `shape` whose rows (its last dim) `fill(row, out)` writes, in parallel when
/// it is large. Each task takes whole rows, and no element depends on the split.
fn from_rows<U: Copy + Send>(shape: &Shape, fill: &(dyn Fn(usize, &mut [MaybeUninit<U>]) + Sync)) -> Array<U> {
    let (n, inner) = (shape.numel(), shape.dims().last().copied().unwrap_or(1));
    let mut out: Vec<U> = Vec::with_capacity(n);
    if n > 0 {
        let dst = &mut out.spare_capacity_mut()[..n];
        let rows = |start: usize, d: &mut [MaybeUninit<U>]| {
            for (k, row) in d.chunks_mut(inner).enumerate() {
                fill(start / inner + k, row);
            }
        };
        if n >= par_min_len() {
            for_each_chunk(dst, (CHUNK / inner).max(1) * inner, &rows);
        } else {
            rows(0, dst);
        }
    }
    // SAFETY: every one of the n slots was written: `fill` writes each row it is given.
    unsafe { out.set_len(n) };
    from_vec(shape.dims(), out)
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
            for_each_chunk(dst, per_task * inner, &|start, d| {
                let row = start / inner;
                rows(d, &xs[start..start + d.len()], &ys[row..row + d.len() / inner])
            });
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
    let starts = RowStarts::new(shape.dims(), [c.strides(), x.strides(), y.strides()]);
    let [sc, sx, sy] = starts.inner;
    from_rows(shape, &|row, out| {
        let [oc, ox, oy] = starts.of(row);
        for (j, o) in (0..).zip(out) {
            // SAFETY: `starts` walks the views' own strides over their own dims.
            o.write(unsafe {
                if *c.as_ptr().offset(oc + j * sc) {
                    *x.as_ptr().offset(ox + j * sx)
                } else {
                    *y.as_ptr().offset(oy + j * sy)
                }
            });
        }
    })
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
        ndarray::Zip::from(&a.broadcast(dims.clone()).unwrap()).and(&b.broadcast(dims).unwrap()).map_collect(|&x, &y| x - y).into_iter().collect()
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

    /// The general broadcast walk (`RowStarts`, `from_rows`) of `zip` and `select`: operands
    /// broadcast along leading, middle and trailing dims, a transposed (not row-major) one, a
    /// scalar output and an empty one, small and over the parallel threshold (rows split over
    /// tasks), against ndarray's walk element by element.
    #[test]
    fn the_general_broadcast_walk_matches_ndarrays() {
        let values =
            |dims: &[usize], k: usize| from_vec(dims, (0..dims.iter().product::<usize>()).map(|i| ((i * k) % 89) as f32 * 0.5 - 7.0).collect());
        let cases: [(Vec<usize>, Vec<usize>, Vec<usize>); 6] = [
            (vec![3, 1, 5], vec![1, 4, 1], vec![3, 4, 5]),
            (vec![7], vec![2, 3, 1], vec![2, 3, 7]),
            (vec![], vec![], vec![]),
            (vec![2, 0, 3], vec![1, 1, 3], vec![2, 0, 3]),
            (vec![64, 1, 300], vec![1, 40, 1], vec![64, 40, 300]),
            (vec![1, 300, 1], vec![256, 1, 9], vec![256, 300, 9]),
        ];
        for (da, db, out) in cases {
            let shape = Shape::new(&out);
            let (a, b) = (values(&da, 3), values(&db, 7));
            assert_eq!(zip(&a, &b, &shape, |x, y| x - y).iter().copied().collect::<Vec<_>>(), general(&a, &b, &shape), "{da:?} - {db:?}");
            // `a` transposed (the rank-3 cases), beside a middle-dim broadcast: the walk
            // follows its strides.
            let at = a.clone().reversed_axes();
            if da.len() == 3 && !at.is_standard_layout() {
                let tshape = Shape::new(&out.iter().rev().copied().collect::<Vec<_>>());
                let bt = values(&[1, tshape.dims()[1], 1], 5);
                assert_eq!(zip(&at, &bt, &tshape, |x, y| x - y).iter().copied().collect::<Vec<_>>(), general(&at, &bt, &tshape), "{da:?} transposed");
            }
            let cond = from_vec(&db, (0..db.iter().product::<usize>()).map(|i| i % 3 == 0).collect());
            let dims = IxDyn(shape.dims());
            let expected: Vec<f32> = ndarray::Zip::from(&cond.broadcast(dims.clone()).unwrap())
                .and(&a.broadcast(dims.clone()).unwrap())
                .and(&b.broadcast(dims).unwrap())
                .map_collect(|&c, &x, &y| if c { x } else { y })
                .into_iter()
                .collect();
            assert_eq!(select(&cond, &a, &b, &shape).iter().copied().collect::<Vec<_>>(), expected, "select {db:?} {da:?} {db:?}");
        }
    }
}
