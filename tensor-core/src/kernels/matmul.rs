//! Matrix multiplication: 2-D and batched with NumPy-broadcast batch dims. Floats go to the
//! `gemm` crate (runtime-selected SIMD kernels, multithreaded for large products); integers to
//! a plain loop.
//!
//! gemm picks its kernel by the operands' strides as well as by the shape: a small product
//! with a row-major left and a column-major right operand goes to a dot-product kernel, some
//! matrix-vector products to kernels that read rows, the rest to its blocked kernel. These sum
//! in different orders, so the same values in another layout could round differently — and
//! eager and graph runs do hand over the same values in different layouts (an eager
//! elementwise op keeps its input's memory order, a fused program writes row-major). So every
//! matrix reaches gemm row-major, with strides computed from the shape: an operand in another
//! layout (a transpose, a slice, a column-major result) is copied first, a tile at a time. The
//! kernel gemm runs, and so the bits, then depend on the shape and the values alone.

use super::parallel::num_threads;
use crate::math::Num;
use crate::storage::Array;
use ndarray::{ArrayView2, Axis, Ix2, IxDyn};
use rayon::prelude::*;
use std::any::TypeId;

/// Products with at least this many multiply-adds use every worker thread.
const PARALLEL_FLOPS: usize = 1 << 21;

/// `a @ b` for a of shape `[..., m, k]` and b of `[..., k, n]`; `batch` is the broadcast of
/// their batch dims (checked by the op's shape rule).
pub fn matmul<T: Num>(a: &Array<T>, b: &Array<T>, batch: &[usize]) -> Array<T> {
    // Row-major first, whatever the layout: the path below, and so the bits, must depend on
    // the shapes alone.
    let (a, b) = (row_major_matrices(a), row_major_matrices(b));
    let (a, b) = (&a, &b);
    if b.ndim() == 2 && a.ndim() > 2 {
        // One matrix for every batch (a layer's weight): a single product with the batch
        // dims folded into the rows, which a GEMM runs far better than many small ones.
        return matmul_rows(a, b);
    }
    let (m, k) = last_two(a);
    let n = b.shape()[b.ndim() - 1];
    let count: usize = batch.iter().product();
    let mut out: Vec<T> = Vec::with_capacity(count * m * n);
    {
        let dst = out.spare_capacity_mut();
        let a3 = as_batches(a, batch);
        let b3 = as_batches(b, batch);
        let parallel_batches = count > 1 && m * n * k < PARALLEL_FLOPS && count * m * n * k >= PARALLEL_FLOPS;
        let one = |(i, d): (usize, &mut [std::mem::MaybeUninit<T>])| {
            let inner_threads = if parallel_batches { 1 } else { num_threads() };
            matmul_2d(&a3[i], &b3[i], d, inner_threads);
        };
        if parallel_batches {
            dst[..count * m * n].par_chunks_mut((m * n).max(1)).enumerate().for_each(one);
        } else {
            dst[..count * m * n].chunks_mut((m * n).max(1)).enumerate().for_each(one);
        }
    }
    // SAFETY: matmul_2d writes all m*n outputs of every batch.
    unsafe { out.set_len(count * m * n) };
    let mut dims = batch.to_vec();
    dims.extend([m, n]);
    Array::from_shape_vec(IxDyn(&dims), out).expect("length matches dims")
}

/// `a @ b` for a standard-layout `a` `[..., m, k]` and a standard-layout 2-d `b`, as one
/// `[rows, k] @ [k, n]` product.
fn matmul_rows<T: Num>(a: &Array<T>, b: &Array<T>) -> Array<T> {
    let k = a.shape()[a.ndim() - 1];
    let rows = a.shape()[..a.ndim() - 1].iter().product();
    let a2 = a.view().into_shape_with_order((rows, k)).expect("standard layout");
    let b2 = b.view().into_dimensionality::<Ix2>().expect("2-d");
    let n = b2.dim().1;
    let mut out: Vec<T> = Vec::with_capacity(rows * n);
    matmul_2d(&a2, &b2, &mut out.spare_capacity_mut()[..rows * n], num_threads());
    // SAFETY: matmul_2d writes all rows * n outputs.
    unsafe { out.set_len(rows * n) };
    let mut dims = a.shape().to_vec();
    *dims.last_mut().expect("rank > 2") = n;
    Array::from_shape_vec(IxDyn(&dims), out).expect("length matches dims")
}

fn last_two<T>(a: &Array<T>) -> (usize, usize) {
    let r = a.ndim();
    (a.shape()[r - 2], a.shape()[r - 1])
}

/// `a` in standard layout (each matrix row-major and contiguous), shared when it already is.
/// A matrix in another layout is copied in square tiles, so a transposed one is read and
/// written a cache line at a time.
fn row_major_matrices<T: Num>(a: &Array<T>) -> Array<T> {
    if a.is_standard_layout() {
        return a.clone();
    }
    let (m, k) = last_two(a);
    let lead = &a.shape()[..a.ndim() - 2];
    let mut data: Vec<T> = Vec::with_capacity(a.len());
    for (b, matrix) in as_batches(a, lead).iter().enumerate() {
        // SAFETY: matrix `b` fills elements [b*m*k, (b+1)*m*k) of the capacity.
        unsafe { copy_tiled(matrix, data.as_mut_ptr().add(b * m * k)) };
    }
    // SAFETY: the loop above wrote every element.
    unsafe { data.set_len(a.len()) };
    Array::from_shape_vec(a.raw_dim(), data).expect("length matches dims")
}

/// Copies `src` row-major to `dst`, in `TILE x TILE` blocks (both the rows read and the rows
/// written of a block stay in cache, whichever way `src` is laid out).
///
/// # Safety
/// `dst` must be valid for writing `src.len()` elements.
unsafe fn copy_tiled<T: Copy>(src: &ArrayView2<T>, dst: *mut T) {
    const TILE: usize = 32;
    let (m, k) = src.dim();
    let (rs, cs) = (src.strides()[0], src.strides()[1]);
    let p = src.as_ptr();
    for i0 in (0..m).step_by(TILE) {
        for j0 in (0..k).step_by(TILE) {
            for i in i0..(i0 + TILE).min(m) {
                for j in j0..(j0 + TILE).min(k) {
                    // SAFETY: (i, j) is inside the view, and i*k + j inside dst.
                    unsafe { *dst.add(i * k + j) = *p.offset(i as isize * rs + j as isize * cs) };
                }
            }
        }
    }
}

/// The 2-D matrices of `a` for each index of the broadcast batch dims, in row-major order.
fn as_batches<'a, T>(a: &'a Array<T>, batch: &[usize]) -> Vec<ArrayView2<'a, T>> {
    let (m, k) = last_two(a);
    let mut full = batch.to_vec();
    full.extend([m, k]);
    let view = a.broadcast(IxDyn(&full)).expect("batch dims checked by the shape rule");
    let count: usize = batch.iter().product();
    (0..count)
        .map(|flat| {
            let mut v = view.clone();
            for i in unravel(flat, batch) {
                v = v.index_axis_move(Axis(0), i);
            }
            v.into_dimensionality::<Ix2>().expect("2-d once the batch dims are indexed")
        })
        .collect()
}

/// The multi-index of row-major position `flat` in `dims`.
fn unravel(mut flat: usize, dims: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; dims.len()];
    for (i, &d) in dims.iter().enumerate().rev() {
        idx[i] = flat % d;
        flat /= d;
    }
    idx
}

/// One `m x k` by `k x n` product into `dst` (row-major `m x n`).
fn matmul_2d<T: Num>(a: &ArrayView2<T>, b: &ArrayView2<T>, dst: &mut [std::mem::MaybeUninit<T>], threads: usize) {
    let (m, k) = a.dim();
    let n = b.dim().1;
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        dst.iter_mut().for_each(|d| {
            d.write(T::zero());
        });
        return;
    }
    if super::matvec::applies::<T>(m, k, n) {
        // One row: gemm's matrix-vector order, with the outputs kept in registers.
        let (a, b) = (a.as_slice().expect("row-major"), b.as_slice().expect("row-major"));
        if super::matvec::matvec(a, b, n, dst) {
            return;
        }
    }
    if T::DTYPE.is_float() {
        let parallelism = if threads > 1 && m * n * k >= PARALLEL_FLOPS { gemm::Parallelism::Rayon(threads) } else { gemm::Parallelism::None };
        gemm_float(a, b, dst, parallelism);
    } else {
        int_matmul(a, b, dst);
    }
}

fn gemm_float<T: Num>(a: &ArrayView2<T>, b: &ArrayView2<T>, dst: &mut [std::mem::MaybeUninit<T>], par: gemm::Parallelism) {
    let (m, k) = a.dim();
    let n = b.dim().1;
    // Strides from the shape, never the views' own (see the module doc): both operands are
    // row-major (a dim of length 1 may have any stride in ndarray's standard layout).
    debug_assert!(a.is_standard_layout() && b.is_standard_layout());
    let (ars, acs, brs, bcs) = (k as isize, 1, n as isize, 1);
    let d = dst.as_mut_ptr() as *mut T;
    // SAFETY: `a` and `b` are contiguous row-major m x k and k x n matrices, so the pointers
    // and strides describe live memory, as does the m*n output buffer; with read_dst = false
    // gemm only writes dst. T is f32 or f64 (checked by the caller).
    unsafe {
        if TypeId::of::<T>() == TypeId::of::<f32>() {
            gemm::gemm::<f32>(
                m,
                n,
                k,
                d as *mut f32,
                1,
                n as isize,
                false,
                a.as_ptr() as *const f32,
                acs,
                ars,
                b.as_ptr() as *const f32,
                bcs,
                brs,
                0.0,
                1.0,
                false,
                false,
                false,
                par,
            );
        } else {
            gemm::gemm::<f64>(
                m,
                n,
                k,
                d as *mut f64,
                1,
                n as isize,
                false,
                a.as_ptr() as *const f64,
                acs,
                ars,
                b.as_ptr() as *const f64,
                bcs,
                brs,
                0.0,
                1.0,
                false,
                false,
                false,
                par,
            );
        }
    }
}

fn int_matmul<T: Num>(a: &ArrayView2<T>, b: &ArrayView2<T>, dst: &mut [std::mem::MaybeUninit<T>]) {
    let (m, k) = a.dim();
    let n = b.dim().1;
    let mut row = vec![T::zero(); n];
    for i in 0..m {
        row.iter_mut().for_each(|r| *r = T::zero());
        for p in 0..k {
            let av = a[[i, p]];
            for (j, r) in row.iter_mut().enumerate() {
                *r = r.add(av.mul(b[[p, j]]));
            }
        }
        for (j, &r) in row.iter().enumerate() {
            dst[i * n + j].write(r);
        }
    }
}

/// A row-major-or-strided matrix over a slice, for kernels (conv) that call gemm directly.
#[derive(Clone, Copy)]
pub struct MatRef<'a, T> {
    pub data: &'a [T],
    pub rows: usize,
    pub cols: usize,
    pub row_stride: isize,
    pub col_stride: isize,
}

impl<'a, T> MatRef<'a, T> {
    /// A row-major `rows x cols` matrix.
    pub fn new(data: &'a [T], rows: usize, cols: usize) -> Self {
        debug_assert!(data.len() >= rows * cols);
        MatRef { data, rows, cols, row_stride: cols as isize, col_stride: 1 }
    }

    /// The transpose (no copy).
    pub fn t(self) -> Self {
        MatRef { data: self.data, rows: self.cols, cols: self.rows, row_stride: self.col_stride, col_stride: self.row_stride }
    }
}

/// `dst (+)= a @ b` for float `T`, `dst` row-major `a.rows x b.cols`; with `accumulate` the
/// product is added to what `dst` holds.
pub fn gemm_into<T: Num>(a: MatRef<T>, b: MatRef<T>, dst: &mut [T], accumulate: bool, threads: usize) {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    assert!(T::DTYPE.is_float() && b.rows == k && dst.len() >= m * n, "gemm_into: float operands of matching shapes");
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        if !accumulate {
            dst[..m * n].iter_mut().for_each(|d| *d = T::zero());
        }
        return;
    }
    let par = if threads > 1 && m * n * k >= PARALLEL_FLOPS { gemm::Parallelism::Rayon(threads) } else { gemm::Parallelism::None };
    let (alpha, d) = (if accumulate { T::one() } else { T::zero() }, dst.as_mut_ptr());
    // SAFETY: the MatRefs describe live slices with in-bounds strides (callers build them from
    // row-major buffers of the stated sizes); dst holds m*n elements. T is f32 or f64.
    unsafe {
        if TypeId::of::<T>() == TypeId::of::<f32>() {
            gemm::gemm::<f32>(
                m,
                n,
                k,
                d as *mut f32,
                1,
                n as isize,
                accumulate,
                a.data.as_ptr() as *const f32,
                a.col_stride,
                a.row_stride,
                b.data.as_ptr() as *const f32,
                b.col_stride,
                b.row_stride,
                alpha.to_f64() as f32,
                1.0,
                false,
                false,
                false,
                par,
            );
        } else {
            gemm::gemm::<f64>(
                m,
                n,
                k,
                d as *mut f64,
                1,
                n as isize,
                accumulate,
                a.data.as_ptr() as *const f64,
                a.col_stride,
                a.row_stride,
                b.data.as_ptr() as *const f64,
                b.col_stride,
                b.row_stride,
                alpha.to_f64(),
                1.0,
                false,
                false,
                false,
                par,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::{Axis, Slice};

    /// Deterministic values with many mantissa bits, so sums in another order round differently.
    fn values(len: usize, seed: u64) -> Vec<f32> {
        let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (0..len)
            .map(|_| {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
            })
            .collect()
    }

    fn array(dims: &[usize], seed: u64) -> Array<f32> {
        Array::from_shape_vec(IxDyn(dims), values(dims.iter().product(), seed)).unwrap()
    }

    /// The same values as `a` (a matrix or a stack of them) in other memory layouts: each
    /// matrix column-major, and a slice of a wider array.
    fn relayouts(a: &Array<f32>) -> Vec<Array<f32>> {
        let r = a.ndim();
        let mut swap: Vec<usize> = (0..r).collect();
        swap.swap(r - 1, r - 2);
        let column_major = standard_of(&a.clone().permuted_axes(IxDyn(&swap))).permuted_axes(IxDyn(&swap));
        let mut wide_dims = a.shape().to_vec();
        wide_dims[r - 1] += 3;
        let mut wide = Array::from_elem(IxDyn(&wide_dims), f32::NAN);
        wide.slice_axis_mut(Axis(r - 1), Slice::from(1..1 + a.shape()[r - 1])).assign(a);
        wide.slice_axis_inplace(Axis(r - 1), Slice::from(1..1 + a.shape()[r - 1]));
        vec![column_major, wide]
    }

    fn standard_of(a: &Array<f32>) -> Array<f32> {
        a.as_standard_layout().into_owned().into_shared()
    }

    fn bits(a: &Array<f32>) -> Vec<u32> {
        a.iter().map(|v| v.to_bits()).collect()
    }

    #[test]
    fn the_result_does_not_depend_on_the_operands_layout() {
        // Small outputs (gemm's dot-product kernel for some layouts), vectors (its
        // matrix-vector kernels), k over one block of 512, and a batched product.
        let shapes = [(4, 3, 4), (1, 7, 5), (6, 9, 1), (1, 300, 1), (16, 16, 16), (17, 40, 20), (3, 700, 5), (70, 30, 66)];
        for (i, &(m, k, n)) in shapes.iter().enumerate() {
            for batch in [vec![], vec![2]] {
                let dims = |r, c| batch.iter().copied().chain([r, c]).collect::<Vec<_>>();
                let (a, b) = (array(&dims(m, k), 2 * i as u64), array(&dims(k, n), 2 * i as u64 + 1));
                let expected = bits(&matmul(&a, &b, &batch));
                for a2 in std::iter::once(a.clone()).chain(relayouts(&a)) {
                    for b2 in std::iter::once(b.clone()).chain(relayouts(&b)) {
                        assert_eq!(
                            bits(&matmul(&a2, &b2, &batch)),
                            expected,
                            "m={m} k={k} n={n} batch={batch:?} strides {:?} {:?}",
                            a2.strides(),
                            b2.strides()
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn row_major_matrices_keeps_the_values() {
        let a = array(&[2, 37, 70], 9);
        for r in relayouts(&a) {
            let s = row_major_matrices(&r);
            assert!(s.is_standard_layout());
            assert_eq!(bits(&s), bits(&a));
        }
    }
}
