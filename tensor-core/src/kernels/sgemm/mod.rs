//! Our own f32 matrix product, `dst = a @ b` (or `dst = dst + a @ b` as one chain, below), for
//! strided operands: packing (`pack.rs`), cache blocking (`blocked.rs`) and one register tile
//! per SIMD level (`avx512.rs`, `avx2.rs`, `portable.rs`), the threads here.
//!
//! **The bits are the definition's, whatever the blocking.** Every output is ONE sequential
//! chain of fused multiply-adds over `p = 0..k` in order, `c = fma(a[i, p], b[p, j], c)`,
//! started at `+0` — or, with `accumulate`, started at the value `dst` holds (the chain
//! continues from it; it is not a product added to `dst` afterwards). Blocking along `k` keeps
//! the chain: a block's partial sums are stored to `dst` and reloaded by the next block, which
//! is exact in f32. `k` is never padded (a padded `fma(0, inf, c)` would be NaN, and `-0 + 0`
//! is `+0`); only the `m` and `n` edges are, with rows and columns computed and dropped. So the
//! bits depend on neither the tile, the block sizes, the thread count, the operands' strides
//! nor the SIMD level: each level's `fma` is correctly rounded (`vfmadd` in the AVX2 and
//! AVX-512 tiles, `f32::mul_add` in the portable one), and the tests compare them all with a
//! scalar `mul_add` reference bit for bit.
//!
//! **Threads.** The output is cut into as many rectangles as threads, along `n` or `m`
//! (whichever leaves each task less to pack), each run by one task with its own packing: the
//! split depends on the shape and the thread count, and the bits on neither.

mod avx2;
mod avx512;
mod blocked;
mod pack;
mod portable;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod timing;

use super::simd::{level, Level};
use rayon::prelude::*;

/// A read-only matrix in memory: element `(i, j)` at `ptr + i * rs + j * cs` (in elements), so
/// a transposed operand is the same buffer with its strides swapped.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Strided {
    pub ptr: *const f32,
    pub rs: isize,
    pub cs: isize,
}

impl Strided {
    /// A row-major matrix with rows `cols` elements apart.
    #[cfg(test)]
    pub(crate) fn row_major(data: &[f32], cols: usize) -> Self {
        Strided { ptr: data.as_ptr(), rs: cols as isize, cs: 1 }
    }

    /// The same matrix read transposed (no copy).
    pub(crate) fn t(self) -> Self {
        Strided { ptr: self.ptr, rs: self.cs, cs: self.rs }
    }

    /// The sub-matrix starting at `(i, j)`.
    fn offset(self, i: usize, j: usize) -> Self {
        Strided { ptr: self.ptr.wrapping_offset(i as isize * self.rs + j as isize * self.cs), ..self }
    }

    /// Element `(i, j)`.
    ///
    /// # Safety
    /// `(i, j)` must address live memory.
    unsafe fn at(self, i: usize, j: usize) -> f32 {
        // SAFETY: the caller's contract.
        unsafe { *self.ptr.offset(i as isize * self.rs + j as isize * self.cs) }
    }
}

/// A register tile: the product of an `MR`-row panel of packed `a` and an `NR`-column panel of
/// packed `b` over `kc` steps, into an `MR x NR` block of `c`.
pub(super) trait Tile {
    /// Rows of the tile.
    const MR: usize;
    /// Columns of the tile.
    const NR: usize;

    /// `c[r, j] = fma(a[p, r], b[p, j], c[r, j])` for `p = 0..kc` in order, each chain started
    /// at `c`'s value (with `load`) or at `+0`; `a` packed `[kc][MR]`, `b`'s `kc` rows of `NR`
    /// values `ldb` apart (packed: `NR`), `c`'s rows `ldc` apart.
    ///
    /// # Safety
    /// The CPU must have the tile's features; `a` must hold `kc * MR` values, `b` its `kc` rows
    /// and `c` its `MR` rows of `NR`.
    unsafe fn run(kc: usize, a: *const f32, b: (*const f32, usize), c: *mut f32, ldc: usize, load: bool);
}

/// Whether `matmul::gemm_raw` runs an f32 product of these sizes here rather than in the
/// `gemm` crate: a function of the sizes alone, so eager and graph runs (which call it with the
/// same sizes) take the same path. Products of at least 2^21 multiply-adds (the size from which
/// products go parallel), where this kernel measured level with gemm or faster on the
/// workloads' shapes (docs/PERFORMANCE.md); smaller ones (W7's attention products per head)
/// measured 5-10% faster in gemm.
pub(crate) fn applies(m: usize, n: usize, k: usize) -> bool {
    m.saturating_mul(n).saturating_mul(k) >= super::matmul::PARALLEL_FLOPS
}

/// `dst = a @ b` (`m x k` by `k x n`) or, with `accumulate`, each output's chain started at
/// `dst`'s value (see the module doc); `dst` row-major with rows `drs` apart, run on up to
/// `threads` threads of the pool.
///
/// # Safety
/// `a` and `b` must address live memory for their `m x k` and `k x n` elements, `dst` its `m`
/// rows of `n` (initialized when `accumulate`), and nothing else may write them during the call.
pub(crate) unsafe fn sgemm(m: usize, n: usize, k: usize, a: Strided, b: Strided, dst: *mut f32, drs: usize, accumulate: bool, threads: usize) {
    // SAFETY (of each arm): the caller's contract; each tile runs at a level the CPU has.
    unsafe {
        match level() {
            Level::Avx512 => split::<avx512::Tile8x32>(m, n, k, a, b, dst, drs, accumulate, threads),
            Level::Avx2 => split::<avx2::Tile6x16>(m, n, k, a, b, dst, drs, accumulate, threads),
            Level::Baseline => split::<portable::Tile4x8>(m, n, k, a, b, dst, drs, accumulate, threads),
        }
    }
}

/// The output, shared by the tasks that each write their own rectangle of it.
#[derive(Clone, Copy)]
struct SharedDst(*mut f32);
// SAFETY: each task writes only its own rectangle (split below), and `sgemm`'s caller keeps
// the memory alive and untouched until they are done. The operands are only read.
unsafe impl Send for SharedDst {}
unsafe impl Sync for SharedDst {}
#[derive(Clone, Copy)]
struct SharedSrc(Strided);
// SAFETY: read only, alive for the call (sgemm's contract).
unsafe impl Send for SharedSrc {}
unsafe impl Sync for SharedSrc {}

/// The values each of `threads` tasks packs when the output is cut along `n` (each packs all
/// of `a` and its columns of `b`) or along `m` (its rows of `a` and all of `b`), `b` counting
/// nothing where it is read in place.
fn packed_by_each(m: usize, n: usize, k: usize, b: Strided, threads: usize, along_n: bool) -> usize {
    let (rows, cols) = if along_n { (m, n.div_ceil(threads)) } else { (m.div_ceil(threads), n) };
    rows * k + if blocked::read_in_place(b, rows) { 0 } else { k * cols }
}

/// Cuts the output into up to `threads` rectangles of whole tiles, along the side that leaves
/// each task less to pack (the side with more tiles when the other has too few), and runs each
/// as one blocked product.
///
/// # Safety
/// As [`sgemm`], and the CPU must have `K`'s features.
pub(super) unsafe fn split<K: Tile>(m: usize, n: usize, k: usize, a: Strided, b: Strided, dst: *mut f32, drs: usize, accumulate: bool, threads: usize) {
    let (tiles_m, tiles_n) = (m.div_ceil(K::MR), n.div_ceil(K::NR));
    let along_n = if tiles_m < threads || tiles_n < threads { tiles_n > tiles_m } else { packed_by_each(m, n, k, b, threads, true) < packed_by_each(m, n, k, b, threads, false) };
    let tiles = if along_n { tiles_n } else { tiles_m };
    let parts = threads.min(tiles).max(1);
    if parts == 1 {
        // SAFETY: the caller's contract.
        return unsafe { blocked::gemm::<K>(m, n, k, a, b, dst, drs, accumulate) };
    }
    let (out, a, b) = (SharedDst(dst), SharedSrc(a), SharedSrc(b));
    (0..parts).into_par_iter().for_each(move |t| {
        let (out, a, b) = (out, a, b);
        let (t0, t1) = (t * tiles / parts, (t + 1) * tiles / parts);
        // SAFETY: part t covers rows (or columns) [lo, hi) of the output alone, and reads
        // the matching rows of `a` (columns of `b`), inside the caller's matrices.
        unsafe {
            if along_n {
                let (lo, hi) = (t0 * K::NR, (t1 * K::NR).min(n));
                blocked::gemm::<K>(m, hi - lo, k, a.0, b.0.offset(0, lo), out.0.add(lo), drs, accumulate);
            } else {
                let (lo, hi) = (t0 * K::MR, (t1 * K::MR).min(m));
                blocked::gemm::<K>(hi - lo, n, k, a.0.offset(lo, 0), b.0, out.0.add(lo * drs), drs, accumulate);
            }
        }
    });
}
