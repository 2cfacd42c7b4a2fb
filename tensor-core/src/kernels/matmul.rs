//! Matrix multiplication: 2-D and batched with NumPy-broadcast batch dims, either operand
//! read transposed (BLAS's `transa`/`transb`). Floats go to the `gemm` crate (runtime-selected
//! SIMD kernels, multithreaded for large products) through one call, `gemm_raw`; integers to a
//! plain loop — but for large f32 products whose right operand is read transposed, which
//! `gemm_raw` routes to our own GEMM (`kernels::sgemm`, each output one fma chain over `k`,
//! whatever the strides) by a rule of the sizes and that flag (`sgemm::applies`): there it
//! measured 1.2-1.3x faster, elsewhere level.
//!
//! The gemm crate picks its kernel by the operands' strides as well as by the shape: a small
//! product with a row-major left and a column-major right operand goes to a dot-product kernel, some
//! matrix-vector products to kernels that read rows, the rest to its blocked kernel. These sum
//! in different orders, so the same values in another layout could round differently — and
//! eager and graph runs do hand over the same values in different layouts (an eager
//! elementwise op keeps its input's memory order, a fused program writes row-major). So every
//! stored matrix reaches gemm row-major, with strides computed from the shape and the
//! transpose flags: an operand in another layout (a transpose op's result, a slice, a
//! column-major result) is copied first, a tile at a time. A flagged operand is not copied:
//! its row-major buffer is handed to gemm with its strides swapped.
//!
//! Same bits by construction: eager dispatch and a graph run call this kernel with the same
//! flags (they are attributes of the op) on row-major buffers of the same shapes, so gemm
//! sees the same strides and sizes, picks the same kernel and sums in the same order. The bits
//! depend on the shapes, the flags and the values alone. Where reading a flagged operand in
//! place measures slower than copying it first (`copy_first`), the choice is made from the
//! shape and the flags too, so it keeps that property.

use super::parallel::num_threads;
use super::sgemm::{self, Strided};
use crate::math::Num;
use crate::storage::Array;
use ndarray::{ArrayView2, Axis, Ix2, IxDyn};
use rayon::prelude::*;
use std::any::TypeId;

/// Products with at least this many multiply-adds use every worker thread.
pub(crate) const PARALLEL_FLOPS: usize = 1 << 21;

/// Which operands of a product are read transposed: with `a` set, the left operand holds
/// `[.., k, m]` and the product uses its transpose; with `b` set, the right holds `[.., n, k]`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Transposed {
    /// The left operand is read transposed.
    pub a: bool,
    /// The right operand is read transposed.
    pub b: bool,
}

/// `op(a) @ op(b)`, where `op` transposes the last two dims of an operand whose flag is set:
/// `op(a)` is `[..., m, k]` and `op(b)` `[..., k, n]`; `batch` is the broadcast of their batch
/// dims (checked by the op's shape rule).
pub fn matmul<T: Num>(a: &Array<T>, b: &Array<T>, batch: &[usize], t: Transposed) -> Array<T> {
    // Row-major first, whatever the layout: the path below, and so the bits, must depend on
    // the shapes and flags alone.
    let (a, b) = (row_major_matrices(a), row_major_matrices(b));
    let (a, b) = (&a, &b);
    if b.ndim() == 2 && a.ndim() > 2 && !t.a {
        // One matrix for every batch (a layer's weight): a single product with the batch
        // dims folded into the rows, which a GEMM runs far better than many small ones.
        return matmul_rows(a, b, t.b);
    }
    let (m, k) = logical_dims(last_two(a), t.a);
    let n = logical_dims(last_two(b), t.b).1;
    let count: usize = batch.iter().product();
    let mut out: Vec<T> = Vec::with_capacity(count * m * n);
    {
        let dst = out.spare_capacity_mut();
        let a3 = as_batches(a, batch);
        let b3 = as_batches(b, batch);
        let parallel_batches = count > 1 && m * n * k < PARALLEL_FLOPS && count * m * n * k >= PARALLEL_FLOPS;
        let one = |(i, d): (usize, &mut [std::mem::MaybeUninit<T>])| {
            let inner_threads = if parallel_batches { 1 } else { num_threads() };
            matmul_2d(&a3[i], &b3[i], t, d, inner_threads);
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

/// `a @ op(b)` for a standard-layout `a` `[..., m, k]` and a standard-layout 2-d `b`, as one
/// `[rows, k] @ [k, n]` product.
fn matmul_rows<T: Num>(a: &Array<T>, b: &Array<T>, transpose_b: bool) -> Array<T> {
    let k = a.shape()[a.ndim() - 1];
    let rows = a.shape()[..a.ndim() - 1].iter().product();
    let a2 = a.view().into_shape_with_order((rows, k)).expect("standard layout");
    let b2 = b.view().into_dimensionality::<Ix2>().expect("2-d");
    let n = logical_dims(b2.dim(), transpose_b).1;
    let mut out: Vec<T> = Vec::with_capacity(rows * n);
    let t = Transposed { a: false, b: transpose_b };
    matmul_2d(&a2, &b2, t, &mut out.spare_capacity_mut()[..rows * n], num_threads());
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

/// The (rows, cols) of a stored `rows x cols` matrix as the product reads it.
fn logical_dims((rows, cols): (usize, usize), transposed: bool) -> (usize, usize) {
    if transposed {
        (cols, rows)
    } else {
        (rows, cols)
    }
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

/// One product `op(a) @ op(b)` of stored row-major matrices into `dst` (row-major `m x n`).
fn matmul_2d<T: Num>(a: &ArrayView2<T>, b: &ArrayView2<T>, t: Transposed, dst: &mut [std::mem::MaybeUninit<T>], threads: usize) {
    let (m, k) = logical_dims(a.dim(), t.a);
    let n = logical_dims(b.dim(), t.b).1;
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        dst.iter_mut().for_each(|d| {
            d.write(T::zero());
        });
        return;
    }
    if !t.a && !t.b && super::matvec::applies::<T>(m, k, n) {
        // One row of stored (unflagged) operands: gemm's matrix-vector order, with the
        // outputs kept in registers. Flagged operands keep gemm: the path is still a function
        // of the shapes and the flags.
        let (a, b) = (a.as_slice().expect("row-major"), b.as_slice().expect("row-major"));
        if super::matvec::matvec(a, b, n, dst) {
            return;
        }
    }
    if let Some(part) = outputs_per_thread::<T>(m, n, k, t, threads) {
        // One input through a wide layer: each thread computes a part of the outputs with the
        // weights' rows they read (see `outputs_per_thread`).
        dst[..n].par_chunks_mut(part).enumerate().for_each(|(i, d)| {
            let rows = b.slice(ndarray::s![i * part..i * part + d.len(), ..]);
            gemm_float(a, &rows, t, copy_first::<T>(m, k, d.len(), t), d, gemm::Parallelism::None);
        });
        return;
    }
    if T::DTYPE.is_float() {
        let parallelism = if threads > 1 && m * n * k >= PARALLEL_FLOPS { gemm::Parallelism::Rayon(threads) } else { gemm::Parallelism::None };
        gemm_float(a, b, t, copy_first::<T>(m, k, n, t), dst, parallelism);
    } else {
        int_matmul(&read_as(*a, t.a), &read_as(*b, t.b), dst);
    }
}

/// Weights at least this large (bytes) make a product of one row memory-bound.
const SPLIT_OUTPUTS_BYTES: usize = 1 << 20;

/// Outputs per thread for a product of one row by a transposed right operand (`[1, k] @ [n,
/// k]ᵀ`, a dense layer on one input such as a classifier's 1280 x 1000 weights, 5 MB) whose
/// weights take at least [`SPLIT_OUTPUTS_BYTES`]; `None` to leave it whole. gemm runs it with
/// its matrix-vector kernel on one thread at any parallelism, and it is bound by reading the
/// weights, which two cores do faster than one.
///
/// The bits stay gemm's: that kernel computes each output alone, a dot product over `k` in
/// one fixed order, whichever other outputs share its call. A part keeps every condition of
/// gemm's choice of that kernel (more than 256 outputs: gemm sends products of at most 256
/// outputs to another kernel) and of `sgemm::applies` (false for the whole and for each part),
/// so each output takes the same kernel as in the whole product.
fn outputs_per_thread<T: Num>(m: usize, n: usize, k: usize, t: Transposed, threads: usize) -> Option<usize> {
    let is_f32 = TypeId::of::<T>() == TypeId::of::<f32>();
    let ours = |n: usize| is_f32 && sgemm::applies(m, n, k, true);
    let bytes = n.saturating_mul(k).saturating_mul(std::mem::size_of::<T>());
    if !T::DTYPE.is_float() || m != 1 || !t.b || k < 3 || threads < 2 || bytes < SPLIT_OUTPUTS_BYTES || ours(n) {
        return None;
    }
    let part = n.div_ceil(threads);
    let last = n - (n.div_ceil(part) - 1) * part;
    (last > 256 && !ours(part) && !ours(last)).then_some(part)
}

/// A stored matrix as the product reads it: itself, or its transpose (a view, no copy).
fn read_as<T>(x: ArrayView2<'_, T>, transposed: bool) -> ArrayView2<'_, T> {
    if transposed {
        x.reversed_axes()
    } else {
        x
    }
}

/// Which flagged operands to copy row-major before the product, rather than read in place:
/// a function of the shape and the flags only (see the module doc).
///
/// Measured (docs/PERFORMANCE.md, "W3 ahead of JAX"): gemm packs a transposed
/// right operand by gathering its rows at a stride of `k` elements, which ran 1.1-1.6x slower
/// than an 8 x 8 register transpose (`kernels::transpose`) followed by the plain product, for
/// every large product of the workloads' backward passes (W3's `d @ W2ᵀ` 1.21x, W7's
/// `[512, 1024] @ [256, 1024]ᵀ` 1.6x); small products gain nothing from it. Below 128 rows the
/// gain at the kernel (1.09x for W4's `[64, 120] @ [400, 120]ᵀ`) did not hold in the step: W4
/// eager ran 1.06x slower with that copy (the allocator faulted more pages in), so those keep
/// reading in place. A transposed left operand packs well in place (copying it was level or
/// slower), so it is never copied.
///
/// Products that `kernels::sgemm` runs copy nothing: its packing transposes the operand where
/// it lies, in the pass it makes anyway (W3's `[128, 256] @ [512, 256]ᵀ` ran 1.21x faster so
/// than gemm reading it in place, at one thread; docs/PERFORMANCE.md, "Our own f32 GEMM"), so
/// a transposed copy would only add a pass.
fn copy_first<T: Num>(m: usize, k: usize, n: usize, t: Transposed) -> Transposed {
    let ours = TypeId::of::<T>() == TypeId::of::<f32>() && sgemm::applies(m, n, k, true);
    Transposed { a: false, b: t.b && !ours && m >= 128 && m * n * k >= PARALLEL_FLOPS }
}

/// The stored row-major `rows x cols` matrix `a` copied to its transpose, row-major.
fn transposed_copy<T: Num>(a: &ArrayView2<T>) -> Vec<T> {
    let (rows, cols) = a.dim();
    let mut data = Vec::with_capacity(a.len());
    super::transpose::transpose(a.as_slice().expect("row-major"), rows, cols, &mut data.spare_capacity_mut()[..a.len()]);
    // SAFETY: transpose wrote all a.len() elements.
    unsafe { data.set_len(a.len()) };
    data
}

/// One float product through gemm. `a` and `b` are stored row-major; a flagged one is read
/// with swapped strides, or copied to the product's layout first when `copy` says so.
fn gemm_float<T: Num>(
    a: &ArrayView2<T>,
    b: &ArrayView2<T>,
    t: Transposed,
    copy: Transposed,
    dst: &mut [std::mem::MaybeUninit<T>],
    par: gemm::Parallelism,
) {
    let (m, k) = logical_dims(a.dim(), t.a);
    let n = logical_dims(b.dim(), t.b).1;
    // Strides from the shape and flags, never the views' own (see the module doc): both
    // operands are row-major (a dim of length 1 may have any stride in ndarray's standard
    // layout).
    debug_assert!(a.is_standard_layout() && b.is_standard_layout());
    let a_copy = (t.a && copy.a).then(|| transposed_copy(a));
    let b_copy = (t.b && copy.b).then(|| transposed_copy(b));
    let (ap, a_t) = match &a_copy {
        Some(c) => (c.as_ptr(), false),
        None => (a.as_ptr(), t.a),
    };
    let (bp, b_t) = match &b_copy {
        Some(c) => (c.as_ptr(), false),
        None => (b.as_ptr(), t.b),
    };
    let (ars, acs) = if a_t { (1, m as isize) } else { (k as isize, 1) };
    let (brs, bcs) = if b_t { (1, k as isize) } else { (n as isize, 1) };
    let d = dst.as_mut_ptr() as *mut T;
    // SAFETY: `ap` and `bp` point at contiguous row-major buffers of m*k and k*n elements
    // (stored as the flags say), so the pointers and strides describe live memory, as does the
    // m*n output buffer; with read_dst = false gemm only writes dst. T is f32 or f64 (checked
    // by the caller).
    unsafe { gemm_raw(Dims { m, n, k }, (d, n as isize), false, (ap, ars, acs), (bp, brs, bcs), T::zero(), par) }
}

/// A product's sizes: `a` is `m x k`, `b` is `k x n`.
#[derive(Clone, Copy)]
struct Dims {
    m: usize,
    n: usize,
    k: usize,
}

/// The one call into gemm: `dst = alpha * dst + a @ b` (with `read_dst`; else `dst = a @ b`),
/// `dst` row-major `m x n` with its rows `drs` elements apart, each operand a pointer with its
/// row and column strides in elements. `T` must be f32 or f64.
///
/// # Safety
/// Each operand's pointer and strides must address live memory for its `m x k` or `k x n`
/// elements, and `dst` must hold its `m` rows of `n` (initialized when `read_dst`).
unsafe fn gemm_raw<T: Num>(
    Dims { m, n, k }: Dims,
    (dst, drs): (*mut T, isize),
    read_dst: bool,
    (ap, ars, acs): (*const T, isize, isize),
    (bp, brs, bcs): (*const T, isize, isize),
    alpha: T,
    par: gemm::Parallelism,
) {
    // SAFETY: the caller's contract; the casts are to T itself (checked by its TypeId).
    unsafe {
        if TypeId::of::<T>() == TypeId::of::<f32>() {
            let (d, a, b) = (dst as *mut f32, ap as *const f32, bp as *const f32);
            if sgemm::applies(m, n, k, bcs != 1) {
                // Our own kernel: each output one fma chain over k, started at dst's value when
                // reading it (alpha is then 1: the callers accumulate).
                debug_assert!(!read_dst || alpha.to_f64() == 1.0);
                let threads = if let gemm::Parallelism::Rayon(t) = par { t } else { 1 };
                let (a, b) = (Strided { ptr: a, rs: ars, cs: acs }, Strided { ptr: b, rs: brs, cs: bcs });
                let product = sgemm::Product { m, n, k, a, b };
                return sgemm::sgemm(product, sgemm::Dst { ptr: d, rs: drs as usize, accumulate: read_dst }, threads);
            }
            gemm::gemm::<f32>(m, n, k, d, 1, drs, read_dst, a, acs, ars, b, bcs, brs, alpha.to_f64() as f32, 1.0, false, false, false, par);
        } else {
            debug_assert_eq!(TypeId::of::<T>(), TypeId::of::<f64>());
            let (d, a, b) = (dst as *mut f64, ap as *const f64, bp as *const f64);
            gemm::gemm::<f64>(m, n, k, d, 1, drs, read_dst, a, acs, ars, b, bcs, brs, alpha.to_f64(), 1.0, false, false, false, par);
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
    let (m, n) = (a.rows, b.cols);
    assert!(dst.len() >= m * n, "gemm_into: the output holds {} of {m} x {n}", dst.len());
    // SAFETY: checked just above; `dst` is borrowed mutably for the call.
    unsafe { gemm_into_ptr(a, b, dst.as_mut_ptr(), n, accumulate, threads) }
}

/// [`gemm_into`] into raw memory whose rows are `row_stride` elements apart, for tasks that each write their own rows' columns of
/// one shared buffer (a pointwise convolution's blocks of positions).
///
/// # Safety
/// `dst` must be valid for reads and writes of `a.rows` rows of `b.cols` elements, `row_stride`
/// (at least `b.cols`) apart, and nothing else may access those elements during the call.
pub(crate) unsafe fn gemm_into_ptr<T: Num>(a: MatRef<T>, b: MatRef<T>, dst: *mut T, row_stride: usize, accumulate: bool, threads: usize) {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    assert!(T::DTYPE.is_float() && b.rows == k && row_stride >= n, "gemm_into: float operands of matching shapes");
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        if !accumulate {
            // SAFETY: the caller's contract covers these m rows of n.
            (0..m).for_each(|i| unsafe { std::slice::from_raw_parts_mut(dst.add(i * row_stride), n) }.fill(T::zero()));
        }
        return;
    }
    let par = if threads > 1 && m * n * k >= PARALLEL_FLOPS { gemm::Parallelism::Rayon(threads) } else { gemm::Parallelism::None };
    let alpha = if accumulate { T::one() } else { T::zero() };
    let (ap, bp) = ((a.data.as_ptr(), a.row_stride, a.col_stride), (b.data.as_ptr(), b.row_stride, b.col_stride));
    // SAFETY: the MatRefs describe live slices with in-bounds strides (callers build them from
    // row-major buffers of the stated sizes); the caller vouches for dst's rows. T is f32 or
    // f64.
    unsafe { gemm_raw(Dims { m, n, k }, (dst, row_stride as isize), accumulate, ap, bp, alpha, par) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::{Axis, Slice};

    /// Deterministic values with many mantissa bits, so sums in another order round differently.
    fn values(len: usize, seed: u64) -> Vec<f32> {
        // Exact: the shared values have 24 significant bits.
        crate::kernels::test_values(len, seed).into_iter().map(|v| v as f32).collect()
    }

    fn array(dims: &[usize], seed: u64) -> Array<f32> {
        Array::from_shape_vec(IxDyn(dims), values(dims.iter().product(), seed)).unwrap()
    }

    /// A classifier's product, one row by 1000 x 1280 transposed weights, split between two
    /// threads: every output has the bits of the whole product on one thread.
    #[test]
    fn a_row_through_wide_transposed_weights_has_the_same_bits_in_parts() {
        let (k, n) = (1280, 1000);
        let (a, b) = (array(&[1, k], 1), array(&[n, k], 2));
        let t = Transposed { a: false, b: true };
        assert_eq!(outputs_per_thread::<f32>(1, n, k, t, 2), Some(500));
        let product = |threads| {
            let (av, bv) = (a.view().into_dimensionality::<Ix2>().unwrap(), b.view().into_dimensionality::<Ix2>().unwrap());
            let mut dst = vec![std::mem::MaybeUninit::<f32>::uninit(); n];
            matmul_2d(&av, &bv, t, &mut dst, threads);
            // SAFETY: the product wrote all n outputs.
            dst.iter().map(|v| unsafe { v.assume_init() }.to_bits()).collect::<Vec<_>>()
        };
        let whole = product(1);
        assert_eq!(product(2), whole);
        assert_eq!(product(3), whole, "three parts of 334, 334 and 332");
        let want: Vec<f64> = (0..n).map(|j| (0..k).map(|i| a[[0, i]] as f64 * b[[j, i]] as f64).sum()).collect();
        assert!(whole.iter().zip(&want).all(|(&v, &w)| (f32::from_bits(v) as f64 - w).abs() < 1e-3), "the products");
    }

    #[test]
    fn only_large_transposed_products_of_one_row_are_split() {
        let t = Transposed { a: false, b: true };
        assert_eq!(outputs_per_thread::<f64>(1, 1000, 1280, t, 2), Some(500));
        assert_eq!(outputs_per_thread::<f32>(1, 1000, 1280, t, 1), None, "one thread");
        assert_eq!(outputs_per_thread::<f32>(1, 1000, 100, t, 2), None, "400 KB of weights");
        assert_eq!(outputs_per_thread::<f32>(1, 500, 1280, t, 2), None, "parts of 250 outputs go to another kernel");
        assert_eq!(outputs_per_thread::<f32>(2, 1000, 1280, t, 2), None, "two rows");
        assert_eq!(outputs_per_thread::<f32>(1, 1000, 1280, Transposed::default(), 2), None, "weights not transposed");
        assert_eq!(outputs_per_thread::<i64>(1, 1000, 1280, t, 2), None, "integers");
        assert_eq!(outputs_per_thread::<f32>(1, 2048, 1024, t, 2), None, "sgemm's");
        assert_eq!(outputs_per_thread::<f32>(1, 2111, 2048, t, 2), None, "a part of 1056 outputs would be sgemm's");
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

    const FLAGS: [Transposed; 4] =
        [Transposed { a: false, b: false }, Transposed { a: true, b: false }, Transposed { a: false, b: true }, Transposed { a: true, b: true }];

    /// The stored dims of an operand that the product reads as `rows x cols`.
    fn stored(batch: &[usize], (rows, cols): (usize, usize), transposed: bool) -> Vec<usize> {
        let (r, c) = logical_dims((rows, cols), transposed);
        batch.iter().copied().chain([r, c]).collect()
    }

    #[test]
    fn the_result_does_not_depend_on_the_operands_layout() {
        // Small outputs (gemm's dot-product kernel for some layouts), vectors (its
        // matrix-vector kernels), k over one block of 512, and a batched product; each with
        // every combination of transpose flags.
        let shapes = [(4, 3, 4), (1, 7, 5), (6, 9, 1), (1, 300, 1), (16, 16, 16), (17, 40, 20), (3, 700, 5), (70, 30, 66)];
        for (i, &(m, k, n)) in shapes.iter().enumerate() {
            for batch in [vec![], vec![2]] {
                for t in FLAGS {
                    let a = array(&stored(&batch, (m, k), t.a), 2 * i as u64);
                    let b = array(&stored(&batch, (k, n), t.b), 2 * i as u64 + 1);
                    let expected = bits(&matmul(&a, &b, &batch, t));
                    for a2 in std::iter::once(a.clone()).chain(relayouts(&a)) {
                        for b2 in std::iter::once(b.clone()).chain(relayouts(&b)) {
                            assert_eq!(
                                bits(&matmul(&a2, &b2, &batch, t)),
                                expected,
                                "m={m} k={k} n={n} batch={batch:?} {t:?} strides {:?} {:?}",
                                a2.strides(),
                                b2.strides()
                            );
                        }
                    }
                }
            }
        }
    }

    /// A large product whose right operand is read transposed runs on `kernels::sgemm`: every
    /// output is the definition's chain, `fma` over `k` in order from +0, on one thread and on
    /// the pool. With `k` = 2048 gemm (which adds its blocks' sums along `k`) rounds otherwise,
    /// so this fails on gemm's path. The same product with a row-major right operand stays
    /// with gemm, and a partial last column panel (`n` = 500) too.
    #[test]
    fn transposed_right_operands_of_large_products_take_the_definitions_chain() {
        assert!(sgemm::applies(128, 512, 256, true) && !sgemm::applies(128, 512, 256, false));
        assert!(!sgemm::applies(128, 500, 256, true) && !sgemm::applies(16, 32, 64, true));
        let (m, k, n) = (64, 2048, 64);
        let a = array(&[m, k], 11);
        let b = array(&[n, k], 12);
        let (av, bv) = (a.as_slice().unwrap(), b.as_slice().unwrap());
        let want: Vec<u32> = (0..m * n).map(|o| (0..k).fold(0.0f32, |c, p| av[o / n * k + p].mul_add(bv[o % n * k + p], c)).to_bits()).collect();
        let t = Transposed { a: false, b: true };
        assert_eq!(bits(&matmul(&a, &b, &[], t)), want);
        let mut out = vec![0f32; m * n];
        matmul_2d(&a.view().into_dimensionality().unwrap(), &b.view().into_dimensionality().unwrap(), t, as_uninit(&mut out), 1);
        assert_eq!(out.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), want, "one thread");
    }

    fn as_uninit(v: &mut [f32]) -> &mut [std::mem::MaybeUninit<f32>] {
        // SAFETY: MaybeUninit<f32> has f32's layout, and every f32 is a valid MaybeUninit.
        unsafe { &mut *(v as *mut [f32] as *mut [std::mem::MaybeUninit<f32>]) }
    }

    /// The transposes of the last two dims of `a`, as a standard-layout copy.
    fn t_copy<T: Clone>(a: &Array<T>) -> Array<T> {
        let r = a.ndim();
        let mut swap: Vec<usize> = (0..r).collect();
        swap.swap(r - 1, r - 2);
        a.clone().permuted_axes(IxDyn(&swap)).as_standard_layout().into_owned().into_shared()
    }

    /// a's batch dims, b's, their broadcast, and (m, k, n).
    type Case = (&'static [usize], &'static [usize], &'static [usize], (usize, usize, usize));

    #[test]
    fn flags_read_the_operands_transposed() {
        // Integers sum exactly, so a flagged product equals the plain product of transposed
        // copies; floats agree to rounding. Batched with broadcast batch dims, and a 2-d right
        // operand under a batched left one (the rows-folded path).
        // (a's batch dims, b's, their broadcast, (m, k, n))
        let cases: [Case; 4] =
            [(&[], &[], &[], (3, 4, 5)), (&[2, 1], &[3], &[2, 3], (4, 6, 2)), (&[3], &[], &[3], (5, 2, 7)), (&[], &[2], &[2], (1, 5, 1))];
        for (ba, bb, batch, (m, k, n)) in cases {
            for t in FLAGS {
                let a = array(&stored(ba, (m, k), t.a), 7);
                let b = array(&stored(bb, (k, n), t.b), 8);
                let ai = a.mapv(|v| (v * 8.0).round() as i64).into_shared();
                let bi = b.mapv(|v| (v * 8.0).round() as i64).into_shared();
                let plain = |x: &Array<i64>, f| if f { t_copy(x) } else { x.clone() };
                let expected = matmul(&plain(&ai, t.a), &plain(&bi, t.b), batch, Transposed::default());
                assert_eq!(matmul(&ai, &bi, batch, t), expected, "{t:?} {ba:?} {bb:?}");
                let plainf = |x: &Array<f32>, f| if f { t_copy(x) } else { x.clone() };
                let expected = matmul(&plainf(&a, t.a), &plainf(&b, t.b), batch, Transposed::default());
                let got = matmul(&a, &b, batch, t);
                assert_eq!(got.shape(), expected.shape());
                assert!(got.iter().zip(expected.iter()).all(|(x, y)| (x - y).abs() < 1e-5), "{t:?} {ba:?} {bb:?}");
            }
        }
    }

    #[test]
    fn copying_a_flagged_operand_first_gives_the_product_of_the_flags() {
        // Both forms gemm_float can take for a flag compute op(a) @ op(b).
        let (m, k, n) = (9, 33, 7);
        for t in FLAGS {
            let a = array(&stored(&[], (m, k), t.a), 3);
            let b = array(&stored(&[], (k, n), t.b), 4);
            let (a2, b2) = (a.view().into_dimensionality::<Ix2>().unwrap(), b.view().into_dimensionality::<Ix2>().unwrap());
            let run = |copy| {
                let mut out = vec![std::mem::MaybeUninit::<f32>::uninit(); m * n];
                gemm_float(&a2, &b2, t, copy, &mut out, gemm::Parallelism::None);
                out.iter().map(|v| unsafe { v.assume_init() }).collect::<Vec<f32>>()
            };
            let (direct, copied) = (run(Transposed::default()), run(Transposed { a: true, b: true }));
            assert!(direct.iter().zip(&copied).all(|(x, y)| (x - y).abs() < 1e-5), "{t:?}");
        }
    }

    fn view(x: &Array<f32>) -> ArrayView2<'_, f32> {
        x.view().into_dimensionality::<Ix2>().unwrap()
    }

    /// Times each flagged product read in place against copied first, for the products of
    /// the workloads' backward passes (W3, W4, W7). Run with
    /// `cargo test --release -p tensor-core --lib -- --ignored --nocapture transposed_operand_timings`.
    #[test]
    #[ignore = "a measurement, not a check"]
    fn transposed_operand_timings() {
        use std::time::Instant;
        let products = [
            ("W3 dx2", 128, 256, 512, Transposed { a: false, b: true }),
            ("W3 dx3", 128, 10, 256, Transposed { a: false, b: true }),
            ("W3 dW1", 784, 128, 512, Transposed { a: true, b: false }),
            ("W3 dW2", 512, 128, 256, Transposed { a: true, b: false }),
            ("W3 dW3", 256, 128, 10, Transposed { a: true, b: false }),
            ("W4 dx", 64, 120, 400, Transposed { a: false, b: true }),
            ("W4 dW", 400, 64, 120, Transposed { a: true, b: false }),
            ("W7 qk^T", 128, 64, 128, Transposed { a: false, b: true }),
            ("W7 dK", 128, 128, 64, Transposed { a: true, b: false }),
            ("W7 dx qkv", 512, 768, 256, Transposed { a: false, b: true }),
            ("W7 dW qkv", 256, 512, 768, Transposed { a: true, b: false }),
            ("W7 dx fc", 512, 1024, 256, Transposed { a: false, b: true }),
            ("W7 dW fc", 256, 512, 1024, Transposed { a: true, b: false }),
            ("W7 dx head", 512, 1024, 256, Transposed { a: false, b: true }),
            ("W7 dW proj", 256, 512, 256, Transposed { a: true, b: false }),
            ("W7 dx proj", 512, 256, 256, Transposed { a: false, b: true }),
            ("W7 dx fc2", 512, 256, 1024, Transposed { a: false, b: true }),
            ("k 512", 512, 512, 256, Transposed { a: false, b: true }),
            ("k 1536", 512, 1536, 256, Transposed { a: false, b: true }),
            ("k 1000", 512, 1000, 256, Transposed { a: false, b: true }),
        ];
        for (name, m, k, n, t) in products {
            let a = array(&stored(&[], (m, k), t.a), 1);
            let b = array(&stored(&[], (k, n), t.b), 2);
            let (pa, pb) = (array(&[m, k], 1), array(&[k, n], 2));
            let par = if m * n * k >= PARALLEL_FLOPS { gemm::Parallelism::Rayon(2) } else { gemm::Parallelism::None };
            let mut out = vec![std::mem::MaybeUninit::<f32>::uninit(); m * n];
            let mut once = |a: ArrayView2<f32>, b: ArrayView2<f32>, t, copy| {
                let reps = (1_000_000_000 / (m * n * k)).clamp(10, 50_000);
                let start = Instant::now();
                for _ in 0..reps {
                    gemm_float(&a, &b, t, copy, &mut out, par);
                }
                start.elapsed().as_secs_f64() * 1e6 / reps as f64
            };
            // Interleaved rounds, the minimum of each form (the machine is shared).
            let all = Transposed { a: true, b: true };
            let (mut direct, mut copied, mut plain) = (f64::INFINITY, f64::INFINITY, f64::INFINITY);
            for _ in 0..9 {
                direct = direct.min(once(view(&a), view(&b), t, Transposed::default()));
                copied = copied.min(once(view(&a), view(&b), t, all));
                plain = plain.min(once(view(&pa), view(&pb), Transposed::default(), all));
            }
            println!(
                "{name:11} m={m:4} k={k:4} n={n:4} a={:5} b={:5}: in place {direct:7.1} µs, copied first {copied:7.1} µs (in place / copied {:.2}), untransposed {plain:7.1} µs",
                t.a,
                t.b,
                direct / copied
            );
        }
    }

    /// Inter-op parallelism measured: two independent products of one training step (W3's
    /// two backward products of its second layer, W7's of an MLP block) run one after the
    /// other on both threads, against both at once on one thread each. Run with
    /// `cargo test --release -p tensor-core --lib -- --ignored --nocapture independent_product_timings`.
    #[test]
    #[ignore = "a measurement, not a check"]
    fn independent_product_timings() {
        use std::time::Instant;
        // (name, (m, k, n, flags) of the first product, of the second)
        type P = (usize, usize, usize, Transposed);
        let (tb, ta) = (Transposed { a: false, b: true }, Transposed { a: true, b: false });
        let pairs: [(&str, P, P); 3] = [
            ("W3 dx2 | dW2", (128, 256, 512, tb), (512, 128, 256, ta)),
            ("W3 dW1 | dW2", (784, 128, 512, ta), (512, 128, 256, ta)),
            ("W7 dx fc | dW fc", (512, 1024, 256, tb), (256, 512, 1024, ta)),
        ];
        let operands = |(m, k, n, t): P| (array(&stored(&[], (m, k), t.a), 1), array(&stored(&[], (k, n), t.b), 2));
        let product = |(m, _, n, t): P, (a, b): &(Array<f32>, Array<f32>), threads: usize| {
            let mut out = vec![std::mem::MaybeUninit::<f32>::uninit(); m * n];
            matmul_2d(&view(a), &view(b), t, &mut out, threads);
            std::hint::black_box(out);
        };
        for (name, p, q) in pairs {
            let (x, y) = (operands(p), operands(q));
            let time = |f: &dyn Fn()| {
                let start = Instant::now();
                for _ in 0..50 {
                    f();
                }
                start.elapsed().as_secs_f64() * 1e6 / 50.0
            };
            let in_turn = || {
                product(p, &x, 2);
                product(q, &y, 2);
            };
            let side_by_side = || {
                rayon::join(|| product(p, &x, 1), || product(q, &y, 1));
            };
            let (mut turn, mut side) = (f64::INFINITY, f64::INFINITY);
            for _ in 0..7 {
                // On a worker, as a graph run is.
                turn = turn.min(rayon::scope(|_| time(&in_turn)));
                side = side.min(rayon::scope(|_| time(&side_by_side)));
            }
            println!("{name:18}: in turn on 2 threads {turn:7.1} µs, side by side on 1 thread each {side:7.1} µs (side / turn {:.2})", side / turn);
        }
    }

    #[test]
    fn a_product_has_the_same_bits_on_one_thread_as_on_two() {
        // The graph executor runs two independent products side by side on one thread each
        // (`compile::plan`'s pairs); eager dispatch runs them on both threads. The bits must
        // not depend on it: gemm splits the output between threads, not the sum over k.
        for (m, k, n) in [(128, 256, 512), (512, 128, 256), (100, 300, 200), (64, 1000, 96)] {
            for t in FLAGS {
                let (a, b) = (array(&stored(&[], (m, k), t.a), 5), array(&stored(&[], (k, n), t.b), 6));
                let run = |threads| {
                    let mut out = vec![std::mem::MaybeUninit::<f32>::uninit(); m * n];
                    matmul_2d(&view(&a), &view(&b), t, &mut out, threads);
                    out.iter().map(|v| unsafe { v.assume_init() }.to_bits()).collect::<Vec<u32>>()
                };
                assert_eq!(run(1), run(2), "({m}, {k}, {n}) {t:?}");
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
