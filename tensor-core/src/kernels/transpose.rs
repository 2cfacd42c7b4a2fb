//! Copying a row-major matrix to its transpose, row-major. A product whose transposed
//! operand gemm would pack slowly copies it first (see `matmul::copy_first`), and `sgemm`
//! packs its panels with the same blocks, so the copy sits on a training step's path and must
//! cost little beside the product: f32 matrices go through
//! 8 x 8 register transposes (AVX), other types and CPUs through a tiled scalar loop. Either
//! way the result is the same values: a copy does not round.

use std::mem::MaybeUninit;
use std::ops::Range;

/// Side of the square blocks both loops walk, so the rows read and the rows written of a
/// block stay in L1.
const BLOCK: usize = 32;

/// `dst[j * rows + i] = src[i * cols + j]` for the row-major `rows x cols` matrix `src`
/// (`dst` may be uninitialized: every element is written). A large matrix is split into two
/// bands of columns, one per worker, when kernels use several threads and this thread is a
/// worker (a graph run): from outside the pool, handing a band over and waiting for it cost
/// more than the band (40 µs against 16 µs for a 512 x 256 matrix).
pub fn transpose<T: Copy + Send + Sync + 'static>(src: &[T], rows: usize, cols: usize, dst: &mut [MaybeUninit<T>]) {
    assert!(src.len() >= rows * cols && dst.len() >= rows * cols, "transpose: buffers of rows * cols elements");
    let split = rows * cols >= super::parallel::par_min_len() && cols >= 32 && rayon::current_thread_index().is_some();
    if !split {
        return transpose_band(src, rows, cols, cols, &mut dst[..rows * cols]);
    }
    // The bands' columns are the destination's rows, so each band writes its own part.
    let half = cols / 2 / 16 * 16;
    let (left, right) = dst[..rows * cols].split_at_mut(half * rows);
    rayon::join(|| transpose_band(src, rows, half, cols, left), || transpose_band(&src[half..], rows, cols - half, cols, right));
}

/// The transpose of the `rows x cols` matrix whose rows start `stride` elements apart in
/// `src`, into `dst` (`cols x rows`, row-major).
pub(super) fn transpose_band<T: Copy + 'static>(src: &[T], rows: usize, cols: usize, stride: usize, dst: &mut [MaybeUninit<T>]) {
    #[cfg(target_arch = "x86_64")]
    if std::any::TypeId::of::<T>() == std::any::TypeId::of::<f32>() && super::simd::level() >= super::simd::Level::Avx2 {
        // SAFETY: T is f32 (checked above), so the casts only rename the type; the CPU has
        // AVX (implied by the AVX2 level).
        unsafe {
            let src = std::slice::from_raw_parts(src.as_ptr().cast::<f32>(), src.len());
            let dst = std::slice::from_raw_parts_mut(dst.as_mut_ptr().cast::<MaybeUninit<f32>>(), dst.len());
            avx::transpose_f32(src, rows, cols, stride, dst);
        }
        return;
    }
    transpose_scalar(src, (rows, stride), dst, 0..rows, 0..cols);
}

/// The scalar copy of the block `is` x `js` of the transpose of a matrix of `rows` rows with
/// row stride `stride`, tile by tile.
fn transpose_scalar<T: Copy>(src: &[T], (rows, stride): (usize, usize), dst: &mut [MaybeUninit<T>], is: Range<usize>, js: Range<usize>) {
    for ib in is.clone().step_by(BLOCK) {
        for jb in js.clone().step_by(BLOCK) {
            for i in ib..(ib + BLOCK).min(is.end) {
                for j in jb..(jb + BLOCK).min(js.end) {
                    dst[j * rows + i].write(src[i * stride + j]);
                }
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
pub(super) mod avx {
    use super::transpose_scalar;
    use std::arch::x86_64::*;
    use std::mem::MaybeUninit;

    /// The transpose of a row-major f32 matrix: 8 x 8 register transposes over the whole
    /// blocks, the scalar loop over the ragged edges.
    ///
    /// The blocks are walked down strips of 16 source columns (a cache line of each source
    /// row), so each destination row of the strip is written front to back, a line at a
    /// time. Square blocks of 32 measured 4-8x slower on matrices whose destination rows are
    /// 2 or 4 KiB apart: their rows map to a few L1 sets and evict each other. Rows 4 KiB
    /// apart all map to one set, and 16 of them exceed its ways, so those take strips of 8
    /// (2.2x faster than 16 for a 1024 x 256 matrix).
    ///
    /// # Safety
    /// The CPU must support AVX; `src` holds the `rows x cols` matrix with row stride
    /// `stride`, `dst` its `cols x rows` transpose.
    #[target_feature(enable = "avx")]
    pub(super) unsafe fn transpose_f32(src: &[f32], rows: usize, cols: usize, stride: usize, dst: &mut [MaybeUninit<f32>]) {
        assert!(rows == 0 || cols == 0 || (src.len() >= (rows - 1) * stride + cols && dst.len() >= rows * cols));
        let (r8, c8) = (rows / 8 * 8, cols / 8 * 8);
        let strip = if (rows * 4).is_multiple_of(4096) { 8 } else { 16 };
        for j0 in (0..c8).step_by(strip) {
            for i in (0..r8).step_by(8) {
                for j in (j0..(j0 + strip).min(c8)).step_by(8) {
                    // SAFETY: i + 8 <= rows and j + 8 <= cols, so the 8 x 8 block read
                    // and the one written are inside the buffers.
                    unsafe { block8(src.as_ptr().add(i * stride + j), stride, dst.as_mut_ptr().add(j * rows + i).cast(), rows) };
                }
            }
        }
        transpose_scalar(src, (rows, stride), dst, 0..r8, c8..cols);
        transpose_scalar(src, (rows, stride), dst, r8..rows, 0..cols);
    }

    /// Transposes the 8 x 8 block at `s` (rows `s_stride` apart) into the one at `d`.
    ///
    /// # Safety
    /// Both blocks must be in bounds; the CPU must support AVX.
    #[target_feature(enable = "avx")]
    unsafe fn block8(s: *const f32, s_stride: usize, d: *mut f32, d_stride: usize) {
        // SAFETY: in bounds (the caller's contract).
        let r: [__m256; 8] = std::array::from_fn(|k| unsafe { _mm256_loadu_ps(s.add(k * s_stride)) });
        // SAFETY: the CPU supports AVX (the caller's contract).
        for (k, row) in unsafe { transpose8(r) }.into_iter().enumerate() {
            // SAFETY: in bounds (the caller's contract).
            unsafe { _mm256_storeu_ps(d.add(k * d_stride), row) };
        }
    }

    /// The transpose of the 8 x 8 matrix whose rows are `r`: lane `l` of row `k` is lane `k`
    /// of `r[l]`.
    ///
    /// # Safety
    /// The CPU must support AVX.
    #[target_feature(enable = "avx")]
    #[inline]
    pub(in crate::kernels) unsafe fn transpose8(r: [__m256; 8]) -> [__m256; 8] {
        // Interleave pairs of rows, then pairs of pairs: each 128-bit half then holds four
        // columns of four rows; the last step joins the halves of rows k and k + 4.
        let t: [__m256; 8] = std::array::from_fn(|k| {
            let (a, b) = (r[k / 2 * 2], r[k / 2 * 2 + 1]);
            if k % 2 == 0 {
                _mm256_unpacklo_ps(a, b)
            } else {
                _mm256_unpackhi_ps(a, b)
            }
        });
        let u: [__m256; 8] = std::array::from_fn(|k| {
            let base = k / 4 * 4;
            let (a, b) = (t[base + k % 4 / 2], t[base + 2 + k % 4 / 2]);
            if k % 2 == 0 {
                _mm256_shuffle_ps::<0x44>(a, b)
            } else {
                _mm256_shuffle_ps::<0xEE>(a, b)
            }
        });
        std::array::from_fn(|k| if k < 4 { _mm256_permute2f128_ps::<0x20>(u[k], u[k + 4]) } else { _mm256_permute2f128_ps::<0x31>(u[k - 4], u[k]) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::simd::{set_max_level, Level};

    #[test]
    fn every_element_lands_at_its_transposed_place() {
        let _only_this_test_caps_the_level = crate::kernels::simd::LEVEL_CAPS.lock().unwrap_or_else(|e| e.into_inner());
        // Whole 8 x 8 blocks, ragged edges on either side, one dim below 8, and matrices
        // large enough to be split between two threads (evenly and not).
        for (rows, cols) in [(8, 8), (16, 40), (13, 21), (3, 17), (40, 5), (1, 9), (67, 33), (512, 256), (300, 333)] {
            let src: Vec<f32> = (0..rows * cols).map(|v| v as f32).collect();
            // On this thread, and on a pool worker (where large ones are split in two).
            for (level, on_worker) in [(Level::Baseline, false), (Level::Avx512, false), (Level::Avx512, true), (Level::Baseline, true)] {
                set_max_level(level);
                let mut dst = vec![MaybeUninit::new(-1.0f32); rows * cols];
                if on_worker {
                    rayon::scope(|_| transpose(&src, rows, cols, &mut dst));
                } else {
                    transpose(&src, rows, cols, &mut dst);
                }
                // SAFETY: initialized above.
                let dst: Vec<f32> = dst.iter().map(|v| unsafe { v.assume_init() }).collect();
                for i in 0..rows {
                    for j in 0..cols {
                        assert_eq!(dst[j * rows + i], (i * cols + j) as f32, "{rows}x{cols} at ({i}, {j}), {level:?}, worker: {on_worker}");
                    }
                }
            }
            set_max_level(Level::Avx512);
        }
        let src: Vec<f64> = (0..6).map(f64::from).collect();
        let mut dst = vec![MaybeUninit::new(0.0); 6];
        transpose(&src, 2, 3, &mut dst);
        // SAFETY: initialized above.
        assert_eq!(dst.iter().map(|v| unsafe { v.assume_init() }).collect::<Vec<f64>>(), [0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
    }
}

#[cfg(test)]
mod timing {
    /// Times the transpose of the workloads' matrices. Run with
    /// `cargo test --release -p tensor-core --lib -- --ignored --nocapture transpose_timings`.
    #[test]
    #[ignore = "a measurement, not a check"]
    fn transpose_timings() {
        for (rows, cols) in [(512, 256), (256, 512), (1024, 256), (256, 1024), (128, 784), (768, 256)] {
            let src: Vec<f32> = (0..rows * cols).map(|v| v as f32).collect();
            let mut dst = vec![std::mem::MaybeUninit::new(0.0f32); rows * cols];
            let mut time = || {
                let mut best = f64::INFINITY;
                for _ in 0..9 {
                    let start = std::time::Instant::now();
                    for _ in 0..100 {
                        super::transpose(&src, rows, cols, &mut dst);
                    }
                    best = best.min(start.elapsed().as_secs_f64() * 1e4);
                }
                best
            };
            let here = time();
            let worker = rayon::scope(|_| time());
            println!(
                "{rows:5} x {cols:5}: {here:7.1} µs here, {worker:7.1} µs on a worker ({:.3} ns per element)",
                worker * 1e3 / (rows * cols) as f64
            );
        }
    }
}
