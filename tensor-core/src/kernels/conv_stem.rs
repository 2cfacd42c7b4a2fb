//! The stem of image networks (MobileNetV2's: 3 -> 32 channels, 3x3 at stride 2 with
//! padding 1, on 224x224) with AVX2, without im2col.
//!
//! The im2col path spreads 3 input channels into 27 rows of columns (1.35 MB an image) and
//! hands them to a GEMM whose `k` is 27, then copies its tile into place and adds the bias.
//! Here each vector of 8 output columns gathers its 27 inputs once (the stride-2 columns
//! split from two loads, zeros in the padding), and every output channel's filter runs over
//! them, 4 channels by 2 vectors of columns at a time with their accumulators in registers;
//! the bias is added in registers and each vector is stored in its place. A row's taps are
//! gathered once and each block of channels runs along the whole row, so its stores go down
//! four channels' rows. Alone on one Zen 4 thread (`timing` below): 0.27 ms against
//! im2col's 0.30 with warm caches, 0.32 against 0.53 with cold ones. In MobileNetV2's call
//! (docs/PERFORMANCE.md) it takes 0.30 ms at one thread, ONNX Runtime's stem 0.29.
//!
//! **The bits are im2col's.** Each output is a chain of fused multiply-adds over the taps in
//! `(c, ki, kj)` order from +0 (a padding tap as `fma(w, 0, s)`), then the bias added: the
//! order of im2col's rows, which is the GEMM's chain (as in `conv_direct`), except on a plane
//! of one output (see [`applies`]). NaN inputs, weights or biases take the im2col path (which
//! of several NaNs an `fma` returns depends on its operands' order).

use super::clamp::Clamp;
use super::conv::ConvGeom;
use super::parallel::{any_part, for_each_task, num_threads, SCAN_PART};
use super::scratch::with_scratch;
use super::shared_out::SharedOut;
use super::simd::{machine_level, machine_tile_level, Level};

/// Input channels at most: a row's gathered vectors stay in L1 (16 KiB of them for 112
/// output columns of 4 channels).
const MAX_CHANNELS: usize = 4;

/// Output channels per register block (by two vectors of columns: 8 accumulators).
const BLOCK: usize = 4;

/// Output rows per parallel task.
const TASK_ROWS: usize = 4;

/// Whether `g` runs here: f32, 3x3 at stride 2 with padding 1, at most [`MAX_CHANNELS`] input
/// channels and output channels in blocks of [`BLOCK`], on a CPU whose tile level is AVX2
/// (`simd::machine_tile_level`; full-rate AVX-512 was not measured and keeps the im2col
/// path). The choice reads the CPU's level, not the cap: on a plane of a single output the
/// GEMM sums in another order, and a cap must change speed only, never a layer's bits.
pub(super) fn applies<T>(g: &ConvGeom) -> bool {
    std::mem::size_of::<T>() == 4 && machine_tile_level() == Level::Avx2 && fits(g)
}

/// The geometry this kernel computes.
fn fits(g: &ConvGeom) -> bool {
    (g.kh, g.kw) == (3, 3) && g.stride == [2, 2] && g.padding == [1, 1] && g.c <= MAX_CHANNELS && g.o.is_multiple_of(BLOCK)
}

/// `out` `[n, o, oh, ow]` = the convolution of `x` `[n, c, h, w]` with `w` `[o, c, 3, 3]`,
/// plus `bias`, calling `after(start, len)` on each task's rows of each channel once they are
/// final, on the thread that made them (a 112x112 stem's 1.6 MB output is then finished by its
/// epilogue in the cores' caches and on every thread, not after the whole image on one);
/// false (and nothing written) where a value of `x`, `w` or `bias` is NaN, which the caller
/// computes another way.
///
/// # Panics
/// If the buffers' sizes disagree with `g`, the geometry is not this kernel's or the CPU
/// lacks AVX2 (a caller's bug: see [`applies`]).
pub(super) fn conv2d_into(
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    g: &ConvGeom,
    out: &mut [f32],
    clamp: Option<Clamp>,
    after: &(dyn Fn(usize, usize) + Sync),
) -> bool {
    let (oh, ow) = g.out_hw();
    let (image, per_image) = (g.c * g.h * g.w, g.o * oh * ow);
    let sizes = x.len() == g.n * image && w.len() == g.o * g.patch() && bias.is_none_or(|b| b.len() == g.o) && out.len() == g.n * per_image;
    assert!(sizes && fits(g) && machine_level() >= Level::Avx2, "conv_stem: {g:?}");
    let nan = |s: &[f32]| super::conv_direct::any_nan(s);
    if nan_in_parallel(x) || nan(w) || bias.is_some_and(nan) {
        return false;
    }
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the CPU has AVX2 (checked above).
    let w = &unsafe { avx2::Filters::new(w, g.o, g.patch()) };
    for (i, o) in out.chunks_exact_mut(per_image).enumerate() {
        let x = &x[i * image..][..image];
        let dst = SharedOut::new(o);
        let rows = |t: usize| {
            let span = t * TASK_ROWS..((t + 1) * TASK_ROWS).min(oh);
            // SAFETY: the CPU has AVX2 and FMA (checked above); `x`, `w` and `bias` hold the
            // geometry's values, `dst` image i's output, of which this task writes rows
            // `span` of every channel alone.
            #[cfg(target_arch = "x86_64")]
            with_scratch(avx2::gather_space(g), |gathered| unsafe { avx2::rows(g, x, w, bias, clamp, span.clone(), &dst, gathered) });
            #[cfg(not(target_arch = "x86_64"))]
            unreachable!("AVX2 is x86-64 only: {span:?} {:?}", dst.at(0));
            for oc in 0..g.o {
                after((i * g.o + oc) * oh * ow + span.start * ow, span.len() * ow);
            }
        };
        let tasks = oh.div_ceil(TASK_ROWS);
        if num_threads() > 1 {
            for_each_task(tasks, &rows);
        } else {
            (0..tasks).for_each(rows);
        }
    }
    true
}

/// Whether a value of `x` is NaN, its parts looked at by all the threads. The stem's image
/// comes from memory (a 224x224 image of 3 channels is 588 KiB), and on one thread the look
/// took as long as a tenth of the convolution on two (the stem 0.174 -> 0.163 ms in
/// MobileNetV2 at two threads).
fn nan_in_parallel(x: &[f32]) -> bool {
    any_part(x, SCAN_PART, &|p| super::conv_direct::any_nan(p))
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::super::avx2_rows::{evens, load, odds};
    use super::super::conv::ConvGeom;
    use super::super::shared_out::SharedOut;
    use super::{Clamp, BLOCK};
    use std::arch::x86_64::*;

    /// Values of a row's gathered taps (see [`rows`]): each step of 16 output columns, each tap,
    /// two vectors of 8.
    fn gathered_len(g: &ConvGeom) -> usize {
        g.out_hw().1.div_ceil(16) * g.c * 9 * 16
    }

    /// What [`rows`] needs for them: 7 values more, to start them on a 32-byte boundary.
    pub(super) fn gather_space(g: &ConvGeom) -> usize {
        gathered_len(g) + 7
    }

    /// Output rows `span` of every channel of one image (see [`super::conv2d_into`]), with
    /// `gathered` (at least [`gathered_len`] values) to gather a row's taps into.
    ///
    /// # Safety
    /// The CPU must have AVX2 and FMA; `x` holds the image `[c, h, w]`, `w` the filters
    /// `[o, c, 3, 3]`, `bias` (if any) `o` values, `dst` the image's output `[o, oh, ow]`, whose rows
    /// `span` no one else writes meanwhile.
    #[target_feature(enable = "avx2,fma")]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn rows(
        g: &ConvGeom,
        x: &[f32],
        w: &Filters,
        bias: Option<&[f32]>,
        clamp: Option<Clamp>,
        span: std::ops::Range<usize>,
        dst: &SharedOut<f32>,
        gathered: &mut [f32],
    ) {
        let (oh, ow) = g.out_hw();
        let taps = g.c * 9;
        // A row's taps, by steps of two vectors of output columns side by side: gathered once,
        // then each block of channels runs along the whole row, so that its stores go down
        // four channels' rows. (Storing each step to every channel, whose planes lie 1 KiB
        // apart modulo 4 KiB at 112x112, took 0.46-0.59 ms with cold caches instead of 0.31.)
        // Vectors on 32-byte boundaries, so that no load of a tap crosses a cache line.
        let aligned = gathered.as_ptr().align_offset(32);
        let gathered = &mut gathered[aligned..][..gathered_len(g)];
        let lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        for oi in span {
            for (step, gathered) in gathered.chunks_exact_mut(taps * 16).enumerate() {
                for v in 0..2 {
                    // SAFETY: the caller's contract (columns past `ow` read zeros or real
                    // inputs, and are not stored).
                    unsafe { gather(g, x, oi, 16 * step + 8 * v, v, gathered) };
                }
            }
            for (blk, filters) in w.0.chunks_exact(taps).enumerate() {
                let o0 = blk * BLOCK;
                for (step, gathered) in gathered.chunks_exact(taps * 16).enumerate() {
                    let oj = 16 * step;
                    let mut acc = [[_mm256_setzero_ps(); 2]; BLOCK];
                    for (xv, weights) in gathered.chunks_exact(16).zip(filters) {
                        // SAFETY: a tap's two vectors are its 16 values.
                        let xv = unsafe { [_mm256_loadu_ps(xv.as_ptr()), _mm256_loadu_ps(xv[8..].as_ptr())] };
                        for (a, &wt) in acc.iter_mut().zip(weights) {
                            a[0] = _mm256_fmadd_ps(wt, xv[0], a[0]);
                            a[1] = _mm256_fmadd_ps(wt, xv[1], a[1]);
                        }
                    }
                    for (k, a) in acc.iter().enumerate() {
                        // Without a bias, nothing is added (`+0` would turn an underflowed `-0`
                        // into `+0`).
                        // Then the clamp, if any.
                        let with_bias = |a| {
                            let a = bias.map_or(a, |b| _mm256_add_ps(a, _mm256_set1_ps(b[o0 + k])));
                            // SAFETY: AVX2 implies AVX.
                            clamp.map_or(a, |c| unsafe { c.ymm(a) })
                        };
                        for (v, &a) in a.iter().enumerate() {
                            let oj = oj + 8 * v;
                            let at = dst.at(((o0 + k) * oh + oi) * ow).wrapping_add(oj);
                            // SAFETY: the first `min(8, ow - oj)` columns from `at` are outputs
                            // of this task's row `oi` (none past `ow`: the mask is empty).
                            unsafe {
                                if oj + 8 <= ow {
                                    _mm256_storeu_ps(at, with_bias(a));
                                } else {
                                    let keep = _mm256_cmpgt_epi32(_mm256_set1_epi32((ow - oj.min(ow)) as i32), lanes);
                                    _mm256_maskstore_ps(at, keep, with_bias(a));
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    /// The filters' weights broadcast to vectors, by blocks of [`BLOCK`] output channels:
    /// block `b`'s tap `p` holds the weights of channels `b * BLOCK..` at `p`.
    pub(super) struct Filters(Vec<[__m256; BLOCK]>);

    impl Filters {
        /// From `w` `[o, taps]`, `o` a multiple of [`BLOCK`].
        ///
        /// # Safety
        /// The CPU must have AVX2.
        #[target_feature(enable = "avx2")]
        pub(super) unsafe fn new(w: &[f32], o: usize, taps: usize) -> Filters {
            let block = |b: usize, p: usize| std::array::from_fn(|k| _mm256_set1_ps(w[(b * BLOCK + k) * taps + p]));
            Filters((0..o / BLOCK).flat_map(|b| (0..taps).map(move |p| block(b, p))).collect())
        }
    }

    /// The 9 taps of every input channel under output columns `oj..oj + 8` of row `oi`, in
    /// `(c, ki, kj)` order: tap `(ki, kj)` of column `oj + l` reads input column
    /// `2 * (oj + l) + kj - 1`, so each is every other value of 16 from `2 * oj + kj - 1`.
    ///
    /// # Safety
    /// As [`rows`].
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    unsafe fn gather(g: &ConvGeom, x: &[f32], oi: usize, oj: usize, v: usize, out: &mut [f32]) {
        let first = 2 * oj as isize - 1;
        for c in 0..g.c {
            for ki in 0..3 {
                let row = (2 * oi + ki) as isize - 1;
                // Tap (c, ki, kj)'s vector v.
                let mut put = |kj: usize, t: __m256| {
                    let at = &mut out[(((c * 3 + ki) * 3 + kj) * 2 + v) * 8..][..8];
                    // SAFETY: `at` holds 8 values.
                    unsafe { _mm256_storeu_ps(at.as_mut_ptr(), t) };
                };
                if row < 0 || row >= g.h as isize {
                    (0..3).for_each(|kj| put(kj, _mm256_setzero_ps()));
                    continue;
                }
                let p = x[(c * g.h + row as usize) * g.w..].as_ptr();
                // SAFETY: `p` starts a row of `w` values.
                let pair = |col: isize| unsafe { (load(p, col, g.w), load(p, col + 8, g.w)) };
                let (a, b) = pair(first);
                put(0, evens(a, b));
                put(1, odds(a, b));
                let (a, b) = pair(first + 2);
                put(2, evens(a, b));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::clamp::testing::{clamped, clamps};
    use crate::kernels::conv_direct::tests::{bits, naive, values};
    use crate::kernels::simd::{set_max_level, LEVEL_CAPS};

    /// Runs the kernel, or `None` on a CPU it is not for.
    fn run(g: &ConvGeom, x: &[f32], w: &[f32], b: Option<&[f32]>, after: &(dyn Fn(usize, usize) + Sync)) -> Option<(bool, Vec<f32>)> {
        run_clamped(g, x, w, b, None, after)
    }

    /// [`run`], the outputs clamped by `clamp`.
    fn run_clamped(
        g: &ConvGeom,
        x: &[f32],
        w: &[f32],
        b: Option<&[f32]>,
        clamp: Option<Clamp>,
        after: &(dyn Fn(usize, usize) + Sync),
    ) -> Option<(bool, Vec<f32>)> {
        applies::<f32>(g).then(|| {
            let mut out = vec![f32::NAN; g.n * g.o * g.out_plane()];
            (conv2d_into(x, w, b, g, &mut out, clamp, after), out)
        })
    }

    #[test]
    fn a_hand_computed_corner() {
        // One channel of 1..=16 as 4x4, a filter of ones but -1 at the centre, bias 0.5.
        // Output (0, 0) reads rows -1..=1 and columns -1..=1: the padding, then taps (1, 1) =
        // x[0][0] = 1 (the centre, so -1), (1, 2) = 2, (2, 1) = 5, (2, 2) = 6: 12, plus 0.5.
        let g = ConvGeom { n: 1, c: 1, h: 4, w: 4, o: 8, kh: 3, kw: 3, stride: [2, 2], padding: [1, 1] };
        let x: Vec<f32> = (1..=16).map(|v| v as f32).collect();
        let mut w = vec![1f32; 8 * 9];
        w.iter_mut().skip(4).step_by(9).for_each(|v| *v = -1.0);
        let Some((true, y)) = run(&g, &x, &w, Some(&[0.5; 8]), &|_, _| {}) else { return };
        assert_eq!(y[0], 12.5);
        // Output (1, 1) reads rows 1..4, columns 1..4: 6 7 8 / 10 11 12 / 14 15 16, the
        // centre 11 negated: 99 - 22 = 77.
        assert_eq!(y[3], 77.5);
        assert_eq!(&y[4..8], &y[0..4], "every channel has the same filter");
    }

    #[test]
    fn every_output_is_the_definition_bit_for_bit() {
        // MobileNetV2's stem at a smaller plane, odd sizes (a partial last vector, the right
        // edge's padding), one to four channels, two images.
        for (n, c, h, w, o) in [(1, 3, 32, 32, 32), (2, 1, 9, 7, 8), (1, 4, 13, 37, 16), (1, 2, 2, 2, 8), (1, 3, 224, 224, 32)] {
            let g = ConvGeom { n, c, h, w, o, kh: 3, kw: 3, stride: [2, 2], padding: [1, 1] };
            let (x, wt, b) = (values(n * c * h * w, 1), values(o * c * 9, 2), values(o, 3));
            let seen = std::sync::Mutex::new(vec![0; n * o * g.out_plane()]);
            let hook = |s: usize, l: usize| seen.lock().unwrap()[s..s + l].iter_mut().for_each(|v| *v += 1);
            let Some((true, y)) = run(&g, &x, &wt, Some(&b), &hook) else { return };
            assert_eq!(bits(&y), bits(&naive(&x, &wt, &b, &g)), "{g:?}");
            let arr = |v: &[f32], d: &[usize]| crate::storage::Array::from_shape_vec(ndarray::IxDyn(d), v.to_vec()).unwrap();
            let mut im2col = vec![f32::NAN; y.len()];
            let (xa, wa, ba) = (arr(&x, &[n, c, h, w]), arr(&wt, &[o, c, 3, 3]), arr(&b, &[o]));
            crate::kernels::conv::conv2d_im2col(&xa, &wa, Some(&ba), &g, &mut im2col);
            // (On a plane of one output the GEMM takes another path and sums otherwise, so
            // the choice of this kernel reads the CPU's level, never the cap.)
            assert!(g.out_plane() == 1 || bits(&y) == bits(&im2col), "the path it replaces, {g:?}");
            assert!(seen.into_inner().unwrap().iter().all(|&v| v == 1), "each output announced once, {g:?}");
            // Clamped in registers: the definition's outputs, clamped after.
            let clamp = clamps()[1];
            let Some((true, c)) = run_clamped(&g, &x, &wt, Some(&b), clamp, &|_, _| {}) else { return };
            assert_eq!(bits(&c), bits(&clamped(naive(&x, &wt, &b, &g), clamp)), "clamped, {g:?}");
        }
    }

    #[test]
    fn without_a_bias_an_underflowed_sum_stays_minus_zero_as_in_im2col() {
        // A product of -1e-30 and 1e-20 is -1e-50, which rounds to -0 in f32; adding a bias
        // of +0 would make it +0.
        let g = ConvGeom { n: 1, c: 1, h: 4, w: 16, o: 4, kh: 3, kw: 3, stride: [2, 2], padding: [1, 1] };
        let (x, w) = (vec![1e-20f32; 64], vec![-1e-30f32; 36]);
        let Some((true, y)) = run(&g, &x, &w, None, &|_, _| {}) else { return };
        assert!(y.iter().all(|v| v.to_bits() == (-0.0f32).to_bits()), "{y:?}");
        let arr = |v: &[f32], d: &[usize]| crate::storage::Array::from_shape_vec(ndarray::IxDyn(d), v.to_vec()).unwrap();
        let mut im2col = vec![f32::NAN; y.len()];
        crate::kernels::conv::conv2d_im2col(&arr(&x, &[1, 1, 4, 16]), &arr(&w, &[4, 1, 3, 3]), None, &g, &mut im2col);
        assert_eq!(bits(&y), bits(&im2col));
    }

    #[test]
    fn nan_values_leave_the_convolution_to_im2col() {
        let g = ConvGeom { n: 1, c: 3, h: 8, w: 8, o: 8, kh: 3, kw: 3, stride: [2, 2], padding: [1, 1] };
        let (mut x, w, b) = (values(3 * 64, 1), values(8 * 27, 2), values(8, 3));
        x[17] = f32::NAN;
        let Some((done, y)) = run(&g, &x, &w, Some(&b), &|_, _| panic!("no output is announced")) else { return };
        assert!(!done && y.iter().all(|v| v.is_nan()), "nothing written");
        let nan_bias = [f32::NAN; 8];
        if let Some((done, _)) = run(&g, &values(3 * 64, 1), &w, Some(&nan_bias), &|_, _| {}) {
            assert!(!done, "a NaN bias");
        }
    }

    #[test]
    fn a_nan_anywhere_in_a_large_image_is_seen_by_the_parallel_look() {
        // Parts of `SCAN_PART` values: a NaN in the first, a middle and the last (short) part,
        // and at the very ends.
        let mut x = values(100_000, 4);
        assert!(!nan_in_parallel(&x));
        for at in [0, 40_000, 99_999] {
            x[at] = f32::NAN;
            assert!(nan_in_parallel(&x), "a NaN at {at}");
            x[at] = 1.0;
        }
        x[70_000] = f32::INFINITY;
        assert!(!nan_in_parallel(&x), "an infinity is not a NaN");
    }

    #[test]
    fn only_f32_3x3_stride_2_stems_on_an_avx2_cpu_whatever_the_cap() {
        let g = ConvGeom { n: 1, c: 3, h: 16, w: 16, o: 32, kh: 3, kw: 3, stride: [2, 2], padding: [1, 1] };
        let here = machine_tile_level() == Level::Avx2;
        let _only_this_test_caps_the_level = LEVEL_CAPS.lock().unwrap_or_else(|e| e.into_inner());
        set_max_level(Level::Baseline);
        let capped = applies::<f32>(&g);
        set_max_level(Level::Avx512);
        assert_eq!((applies::<f32>(&g), capped), (here, here));
        assert!(!applies::<f64>(&g));
        for other in [
            ConvGeom { c: 5, ..g },
            ConvGeom { o: 30, ..g },
            ConvGeom { stride: [1, 1], ..g },
            ConvGeom { padding: [0, 0], ..g },
            ConvGeom { kh: 7, kw: 7, ..g },
        ] {
            assert!(!applies::<f32>(&other), "{other:?}");
        }
    }
}

/// A timing beside the im2col path, with caches warm and cold (64 MB touched between calls),
/// on one thread: `cargo test --release -p tensor-core --lib conv_stem::timing -- --ignored
/// --nocapture`.
#[cfg(test)]
mod timing {
    use super::*;
    use std::time::Instant;

    #[test]
    #[ignore = "timing, release mode: --ignored --nocapture"]
    fn stem_beside_im2col() {
        let g = ConvGeom { n: 1, c: 3, h: 224, w: 224, o: 32, kh: 3, kw: 3, stride: [2, 2], padding: [1, 1] };
        let x: Vec<f32> = crate::kernels::test_values(3 * 224 * 224, 1).iter().map(|&v| v as f32).collect();
        let w: Vec<f32> = crate::kernels::test_values(32 * 27, 2).iter().map(|&v| v as f32).collect();
        let b: Vec<f32> = crate::kernels::test_values(32, 3).iter().map(|&v| v as f32).collect();
        let arr = |v: &[f32], d: &[usize]| crate::storage::Array::from_shape_vec(ndarray::IxDyn(d), v.to_vec()).unwrap();
        let (xa, wa, ba) = (arr(&x, &[1, 3, 224, 224]), arr(&w, &[32, 3, 3, 3]), arr(&b, &[32]));
        let mut junk = vec![1u8; 64 << 20];
        for cold in [false, true] {
            let mut out = vec![0f32; 32 * 112 * 112];
            let mut best = [f64::MAX; 2];
            // The two interleaved, so that a busy spell of the machine slows both alike.
            for k in 0..100 {
                for (stem, best) in [true, false].into_iter().zip(&mut best) {
                    if cold {
                        junk.iter_mut().step_by(64).for_each(|v| *v = v.wrapping_add(k as u8));
                    }
                    let s = Instant::now();
                    crate::kernels::parallel::on_one_thread(|| {
                        if stem {
                            assert!(conv2d_into(&x, &w, Some(&b), &g, &mut out, None, &|_, _| {}));
                        } else {
                            crate::kernels::conv::conv2d_im2col(&xa, &wa, Some(&ba), &g, &mut out);
                        }
                    });
                    *best = best.min(s.elapsed().as_secs_f64());
                }
            }
            println!("cold {cold}: stem {:.3} ms, im2col {:.3} ms", best[0] * 1e3, best[1] * 1e3);
        }
    }
}
