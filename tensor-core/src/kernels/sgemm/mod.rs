//! Our own f32 matrix product, `dst = a @ b` (or `dst = dst + a @ b` as one chain, below), for
//! strided operands: packing (`pack.rs`), cache blocking (`blocked.rs`) and one register tile
//! per SIMD level (`vector.rs` for AVX-512 and AVX2, `portable.rs`), the threads here.
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
//! scalar `mul_add` reference bit for bit. (One exception: where two
//! NaNs meet in one `fma`, which payload it returns depends on the instruction's operand order,
//! so it may differ between levels; a NaN stays a NaN.)
//!
//! **Threads.** The output is cut into as many rectangles as threads, along `n` or `m`
//! (whichever leaves each task less to pack), each run by one task with its own packing: the
//! split depends on the shape and the thread count, and the bits on neither.

mod blocked;
mod pack;
mod portable;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod timing;
mod vector;

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

/// Whether `matmul::gemm_raw` runs an f32 product here rather than in the `gemm` crate: by
/// its sizes and whether `b` is read transposed (column-major), which eager and graph runs
/// hand over alike (the sizes, and the op's flags), so both take the same path. Products of at
/// least 2^21 multiply-adds (the size from which products go parallel) with a transposed `b`
/// and `n` a multiple of 32 (no register tile at any level runs past the right edge).
///
/// Measured (docs/PERFORMANCE.md, "Our own f32 GEMM"), one thread: with a transposed `b`
/// this kernel ran 1.21-1.29x gemm's speed (W3's `d2 @ W2ᵀ`, W7's `d @ W_upᵀ`; gemm packs such
/// a `b` slowly, and copying it first costs a pass); on the workloads' other products it was
/// level (0.96-1.11x), so those stay with gemm; with a partial last column panel (`n` = 49,
/// 196: ResNet-18's and MobileNetV2's small planes) it was slower (0.79-0.97x).
pub(crate) fn applies(m: usize, n: usize, k: usize, b_transposed: bool) -> bool {
    b_transposed && n.is_multiple_of(32) && m.saturating_mul(n).saturating_mul(k) >= super::matmul::PARALLEL_FLOPS
}

/// One product's operands: `a` (`m x k`) times `b` (`k x n`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Product {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub a: Strided,
    pub b: Strided,
}

impl Product {
    /// The product's rows `lo..hi`.
    fn rows(self, lo: usize, hi: usize) -> Self {
        Product { m: hi - lo, a: self.a.offset(lo, 0), ..self }
    }

    /// The product's columns `lo..hi`.
    fn cols(self, lo: usize, hi: usize) -> Self {
        Product { n: hi - lo, b: self.b.offset(0, lo), ..self }
    }
}

/// Where a product goes: row-major at `ptr`, rows `rs` elements apart; with `accumulate`
/// each output's chain starts at the value there (see the module doc), else at +0.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Dst {
    pub ptr: *mut f32,
    pub rs: usize,
    pub accumulate: bool,
}

impl Dst {
    /// The output from element `(i, j)` on.
    fn at(self, i: usize, j: usize) -> Self {
        Dst { ptr: self.ptr.wrapping_add(i * self.rs + j), ..self }
    }
}

/// `dst = a @ b`, or each output's chain continued from `dst` (see the module doc), on up to
/// `threads` threads of the pool.
///
/// # Safety
/// `a` and `b` must address live memory for their `m x k` and `k x n` elements, `dst` its `m`
/// rows of `n` (initialized when accumulating), and nothing else may write them during the
/// call.
pub(crate) unsafe fn sgemm(p: Product, dst: Dst, threads: usize) {
    // SAFETY (of each arm): the caller's contract; each tile runs at a level the CPU has.
    unsafe {
        match level() {
            Level::Avx512 => split::<vector::Tile8x32>(p, dst, threads),
            Level::Avx2 => split::<vector::Tile6x16>(p, dst, threads),
            Level::Baseline => split::<portable::Tile4x8>(p, dst, threads),
        }
    }
}

/// A product and its output, shared by the tasks that each write their own rectangle of it.
#[derive(Clone, Copy)]
struct Shared(Product, Dst);
// SAFETY: each task writes only its own rectangle of the output (split below) and only reads
// the operands; `sgemm`'s caller keeps all of them alive, and the output untouched, until the
// tasks are done.
unsafe impl Send for Shared {}
unsafe impl Sync for Shared {}

impl Shared {
    /// The two (a method, so closures capture the whole `Shared`).
    fn get(self) -> (Product, Dst) {
        (self.0, self.1)
    }
}

/// The values each of `threads` tasks packs when the output is cut along `n` (each packs all
/// of `a` and its columns of `b`) or along `m` (its rows of `a` and all of `b`), `b` counting
/// nothing where it is read in place.
fn packed_by_each(p: Product, threads: usize, along_n: bool) -> usize {
    let (rows, cols) = if along_n { (p.m, p.n.div_ceil(threads)) } else { (p.m.div_ceil(threads), p.n) };
    rows * p.k + if blocked::read_in_place(p.b, rows) { 0 } else { p.k * cols }
}

/// Cuts the output into up to `threads` rectangles of whole tiles, along the side that leaves
/// each task less to pack (the side with more tiles when the other has too few), and runs each
/// as one blocked product.
///
/// # Safety
/// As [`sgemm`], and the CPU must have `K`'s features.
pub(super) unsafe fn split<K: Tile>(p: Product, dst: Dst, threads: usize) {
    let (tiles_m, tiles_n) = (p.m.div_ceil(K::MR), p.n.div_ceil(K::NR));
    let along_n =
        if tiles_m < threads || tiles_n < threads { tiles_n > tiles_m } else { packed_by_each(p, threads, true) < packed_by_each(p, threads, false) };
    let tiles = if along_n { tiles_n } else { tiles_m };
    let parts = threads.min(tiles).max(1);
    if parts == 1 {
        // SAFETY: the caller's contract.
        return unsafe { blocked::gemm::<K>(p, dst) };
    }
    let shared = Shared(p, dst);
    (0..parts).into_par_iter().for_each(move |t| {
        let (p, dst) = shared.get();
        let (t0, t1) = (t * tiles / parts, (t + 1) * tiles / parts);
        // SAFETY: part t covers rows (or columns) [lo, hi) of the output alone, and reads
        // the matching rows of `a` (columns of `b`), inside the caller's matrices.
        unsafe {
            if along_n {
                let (lo, hi) = (t0 * K::NR, (t1 * K::NR).min(p.n));
                blocked::gemm::<K>(p.cols(lo, hi), dst.at(0, lo));
            } else {
                let (lo, hi) = (t0 * K::MR, (t1 * K::MR).min(p.m));
                blocked::gemm::<K>(p.rows(lo, hi), dst.at(lo, 0));
            }
        }
    });
}
