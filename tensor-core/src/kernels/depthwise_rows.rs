//! The depthwise forward pass of a 3x3 kernel at stride 1 or 2 (MobileNetV2's body) on CPUs
//! whose tile level is AVX2, reading the input rows where they lie.
//!
//! `depthwise`'s general path copies each input plane into a zero-padded buffer, runs one
//! vector loop over it into a second buffer, and copies the outputs from there. On the
//! small planes of a network's late layers (7x7, 14x14) those copies and the per-row calls
//! cost more than the multiply-adds, and on the large ones the plane makes two extra passes
//! through the cache. Here each vector of 8 outputs reads its taps straight from the input
//! rows: where a vector reaches into the padding, a masked load reads zeros there; a row of
//! padding is a vector of zeros. At stride 2 a vector's taps are every other column of 16,
//! split from two loads (`avx2_rows::evens`, `odds`). Eight output rows are computed
//! together, so each input row is loaded once for the outputs that read it and eight chains
//! run side by side. Where the CPU has AVX-512 (AMD's Zen 4, which runs it at AVX2's rate),
//! `depthwise_rows_avx512` computes the planes instead, with 32 registers and mask
//! registers, and also takes wide rows at stride 2.
//!
//! **The bits are the general path's.** Each output is a chain of fused multiply-adds over
//! the taps in `(ki, kj)` order from +0, a padding tap included as `fma(w, 0, s)` (so an
//! infinite or NaN weight makes it NaN, as there), then the bias added. So the two paths
//! can be chosen by the capped level (`level()`) and tests compare them.

use super::clamp::Clamp;
use super::depthwise::DepthwiseGeom;
use super::simd::{level, machine_level, tile_level, Level};

/// Output rows computed together: 8 chains of fused multiply-adds in flight, enough to
/// cover the instruction's latency at two a cycle.
const ROWS: usize = 8;

/// Whether a plane of `g` runs here: f32, a 3x3 kernel at stride 1 or 2 (the same both ways;
/// at stride 2 on rows of at most [`MAX_STRIDED_WIDTH`] unless AVX-512 is in use), dilation
/// 1, padding of at most 2 (so every output reads at least one input), with AVX2 as the tile
/// level in use (`simd::tile_level`). With full-rate AVX-512 the general path's 16-lane loops
/// run instead.
pub(super) fn applies<T>(g: &DepthwiseGeom) -> bool {
    std::mem::size_of::<T>() == 4 && tile_level() == Level::Avx2 && fits_at(g, level())
}

/// Input columns at most at stride 2 with AVX2: each vector's taps are split from two loads
/// of 16 columns every time a block reads them, and on wider rows the general path, which
/// splits a plane once, measured faster (this kernel's time over the general path's, alone on
/// one thread: 1.15 on MobileNetV2's rows of 112 and 56 columns, 0.88 and 0.64 on 28 and 14).
/// With AVX-512 (`depthwise_rows_avx512`) a permute splits them, and any width runs here.
const MAX_STRIDED_WIDTH: usize = 32;

/// The geometry this kernel computes with AVX2 (with AVX-512 it also takes wider rows at
/// stride 2: [`fits_at`]).
pub(super) fn fits(g: &DepthwiseGeom) -> bool {
    fits_at(g, Level::Avx2)
}

/// The geometry this kernel computes with `level` in use.
fn fits_at(g: &DepthwiseGeom, level: Level) -> bool {
    let wide = level == Level::Avx512 || g.w <= MAX_STRIDED_WIDTH;
    let stride = g.stride == [1, 1] || (g.stride == [2, 2] && wide);
    (g.kh, g.kw) == (3, 3) && stride && g.dilation == [1, 1] && g.padding[0] <= 2 && g.padding[1] <= 2
}

/// The output planes `out` of whole `(image, channel)` pairs from pair `first` on (`m`
/// planes each, as `depthwise2d_into` lays them out), of input `x` `[n, c, h, w]` and filters
/// `w` `[c * m, 1, 3, 3]`, plus `bias` `[c * m]`, then clamped by `clamp` (in registers, or
/// after a NaN bias).
///
/// # Panics
/// If the buffers' sizes disagree with `g`, the geometry is not this kernel's or the CPU
/// lacks AVX2 (a caller's bug: see [`applies`]).
pub(super) fn planes(g: &DepthwiseGeom, first: usize, x: &[f32], w: &[f32], bias: Option<&[f32]>, clamp: Option<Clamp>, out: &mut [f32]) {
    let (oh, ow) = g.out_hw();
    let (in_plane, per_pair) = (g.h * g.w, g.m * oh * ow);
    let pairs = out.len() / per_pair.max(1);
    let sizes = out.len() == pairs * per_pair
        && (first + pairs) * in_plane <= x.len()
        && w.len() == g.c * g.m * 9
        && bias.is_none_or(|b| b.len() == g.c * g.m);
    // The level read once, so that every plane of the call takes the same kernel.
    let in_use = level();
    let wide = in_use == Level::Avx512;
    // A row of padding, for `depthwise_rows_avx512`.
    let zeros = if wide { vec![0.0f32; g.w] } else { Vec::new() };
    assert!(sizes && fits_at(g, in_use) && machine_level() >= Level::Avx2, "depthwise_rows: {g:?}");
    let mut channel = first % g.c;
    // Stores may run past a row into outputs written after them, up to here (see `block`).
    let end = out.as_mut_ptr_range().end;
    for (k, o) in out.chunks_exact_mut(per_pair).enumerate() {
        let xp = &x[(first + k) * in_plane..][..in_plane];
        for (j, plane) in o.chunks_exact_mut(oh * ow).enumerate() {
            let oc = channel * g.m + j;
            let taps: &[f32; 9] = w[oc * 9..][..9].try_into().expect("9 taps");
            let b = bias.map(|b| b[oc]);
            // A NaN bias takes `add`'s select (its payload when the sum is not NaN), so it is
            // added after, element by element; any other in registers, with `add_plain`'s bits.
            let in_registers = b.filter(|b| !b.is_nan());
            // The clamp follows the bias: in registers with it, after a NaN one.
            let nan_bias = b.is_some_and(|b| b.is_nan());
            let clamp_in_registers = clamp.filter(|_| !nan_bias);
            #[cfg(target_arch = "x86_64")]
            // SAFETY: the CPU has AVX2 and FMA, and AVX-512 (F and VL, which the level
            // requires) where `wide`; the planes' lengths match the geometry (both checked
            // above).
            unsafe {
                use super::depthwise_rows_avx512 as avx512;
                match (g.stride[0], wide) {
                    (1, false) => avx2::plane::<1>(xp, g.h, g.w, g.padding, taps, in_registers, clamp_in_registers, plane, oh, ow, end),
                    (_, false) => avx2::plane::<2>(xp, g.h, g.w, g.padding, taps, in_registers, clamp_in_registers, plane, oh, ow, end),
                    (1, true) => avx512::plane::<1>(xp, g.h, g.w, g.padding, taps, in_registers, clamp_in_registers, plane, oh, ow, &zeros),
                    (_, true) => avx512::plane::<2>(xp, g.h, g.w, g.padding, taps, in_registers, clamp_in_registers, plane, oh, ow, &zeros),
                }
            };
            #[cfg(not(target_arch = "x86_64"))]
            unreachable!("AVX2 is x86-64 only: {in_registers:?} {taps:?} {xp:?} {plane:?}");
            if let Some(b) = b.filter(|b| b.is_nan()) {
                use crate::math::Num;
                plane.iter_mut().for_each(|v| *v = v.add(b));
                if let Some(c) = clamp {
                    c.slice(plane);
                }
            }
        }
        channel = if channel + 1 == g.c { 0 } else { channel + 1 };
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::super::avx2_rows;
    use super::{Clamp, ROWS};
    use std::arch::x86_64::*;

    /// Input rows a block of output rows reads at most: `(ROWS - 1) * 2 + 3` at stride 2.
    const INPUT_ROWS: usize = 2 * ROWS + 1;

    /// One output plane `out` `[oh, ow]` of input plane `x` `[h, w]` and the 9 taps of its
    /// filter at stride `S`, plus `bias` (not NaN).
    ///
    /// # Safety
    /// The CPU must have AVX2 and FMA; `x` holds `h x w`, `out` `oh x ow`, the output size of
    /// a 3x3 kernel at stride `S` with `pad`; from `out` to `end` is writable, and what
    /// follows `out` there is written after this plane.
    #[target_feature(enable = "avx2,fma")]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn plane<const S: usize>(
        x: &[f32],
        h: usize,
        w: usize,
        pad: [usize; 2],
        taps: &[f32; 9],
        bias: Option<f32>,
        clamp: Option<Clamp>,
        out: &mut [f32],
        oh: usize,
        ow: usize,
        end: *mut f32,
    ) {
        let wv = taps.map(|t| _mm256_set1_ps(t));
        let mut oi = 0;
        while oi < oh {
            let rows = ROWS.min(oh - oi);
            // The input rows the block reads, `None` in the padding.
            let mut input = [None; INPUT_ROWS];
            for (t, r) in input.iter_mut().enumerate().take((rows - 1) * S + 3) {
                let row = (oi * S + t) as isize - pad[0] as isize;
                *r = (row >= 0 && row < h as isize).then(|| x[row as usize * w..].as_ptr());
            }
            let o = out[oi * ow..].as_mut_ptr();
            let run = Run { input: &input, w, pw: pad[1], wv: &wv, bias, clamp, o, ow, end };
            // SAFETY: the rows' pointers start `w`-long rows of `x`; the block's outputs are
            // rows `oi..oi + rows` of `out`.
            unsafe {
                match rows {
                    ROWS => row_block::<ROWS, S>(run),
                    7 => row_block::<7, S>(run),
                    6 => row_block::<6, S>(run),
                    5 => row_block::<5, S>(run),
                    4 => row_block::<4, S>(run),
                    3 => row_block::<3, S>(run),
                    2 => row_block::<2, S>(run),
                    _ => row_block::<1, S>(run),
                }
            }
            oi += rows;
        }
    }

    /// A block of output rows: its input rows (`None` in the padding), their width, the
    /// left padding, the taps, the bias, its first output, the output rows' width, and
    /// where the stores must stop (see `block`).
    #[derive(Clone, Copy)]
    struct Run<'a> {
        input: &'a [Option<*const f32>; INPUT_ROWS],
        w: usize,
        pw: usize,
        wv: &'a [__m256; 9],
        bias: Option<f32>,
        clamp: Option<Clamp>,
        o: *mut f32,
        ow: usize,
        end: *mut f32,
    }

    /// `R` output rows of `run`, vector by vector of 8 columns: masked loads where a tap
    /// reaches past either end of the row (within `pw` of it), plain ones in between. A last
    /// vector of fewer than 8 columns goes first: its store runs into the next row's first
    /// columns, which the vectors after it write again (see `block`).
    ///
    /// # Safety
    /// As [`plane`]; each `Some` row holds `w` values.
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    unsafe fn row_block<const R: usize, const S: usize>(run: Run) {
        let (vectors, partial) = (run.ow.div_ceil(8), !run.ow.is_multiple_of(8));
        let order = partial.then_some(vectors - 1).into_iter().chain(0..vectors - usize::from(partial));
        // The columns one vector's taps read: 8 + 2, or at stride 2 the 16 + 2 its
        // deinterleaved loads span.
        let span = 8 * S + 2;
        for v in order {
            let oj = 8 * v;
            let col = (S * oj) as isize - run.pw as isize;
            let cols = (run.ow - oj).min(8);
            // SAFETY: the caller's contract; the block's columns are inside the rows.
            unsafe {
                if col >= 0 && col as usize + span <= run.w {
                    block::<R, S, false>(run, col, oj, cols);
                } else {
                    block::<R, S, true>(run, col, oj, cols);
                }
            }
        }
    }

    /// `R` output rows by 8 columns from output column `oj` of `run`, whose first output reads
    /// its tap (0, 0) at column `col` of `input[0]`; the first `cols` columns are outputs.
    /// With `MASKED`, loads read zeros outside the rows' `w` columns; without, every tap must
    /// lie inside. A row of fewer than `cols` columns is stored whole all the same (one plain
    /// store) where its 8 values end before `end`: the values past it land on outputs written
    /// later; only where they would pass `end` is the store masked.
    ///
    /// # Safety
    /// As [`row_block`].
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    unsafe fn block<const R: usize, const S: usize, const MASKED: bool>(run: Run, col: isize, oj: usize, cols: usize) {
        let w = run.w;
        let lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        // At stride 1, tap column kj's lanes inside the row.
        // SAFETY: the CPU has AVX2 (this function's features).
        let inside = [0, 1, 2].map(|kj| unsafe { avx2_rows::inside(col + kj, w) });
        // SAFETY (of the loads): without MASKED the columns lie inside the row (the caller's
        // check); masked, only the lanes inside are read.
        let load = |p: *const f32, c: isize| unsafe {
            if MASKED {
                avx2_rows::load(p, c, w)
            } else {
                _mm256_loadu_ps(p.wrapping_offset(c))
            }
        };
        let mut acc = [_mm256_setzero_ps(); R];
        // Input row `t` is row `ki = t - S * r` of output row `r`'s taps: taking t, then kj,
        // in order gives every output its taps in (ki, kj) order.
        for (t, row) in run.input.iter().enumerate().take((R - 1) * S + 3) {
            let x: [__m256; 3] = match row {
                None => [_mm256_setzero_ps(); 3],
                // SAFETY: as `load`'s.
                Some(p) if S == 1 => std::array::from_fn(|kj| unsafe {
                    let at = p.wrapping_offset(col + kj as isize);
                    if MASKED {
                        _mm256_maskload_ps(at, inside[kj])
                    } else {
                        _mm256_loadu_ps(at)
                    }
                }),
                Some(p) => {
                    let p = *p;
                    // Tap kj of column oj + l reads column col + kj + 2l: every other value of
                    // 16 from col + kj (kj = 1: the odd ones of kj = 0's 16).
                    let (a, b) = (load(p, col), load(p, col + 8));
                    let (c, d) = (load(p, col + 2), load(p, col + 10));
                    [avx2_rows::evens(a, b), avx2_rows::odds(a, b), avx2_rows::evens(c, d)]
                }
            };
            for (kj, &x) in x.iter().enumerate() {
                for (r, a) in acc.iter_mut().enumerate() {
                    if t >= S * r && t - S * r < 3 {
                        *a = _mm256_fmadd_ps(run.wv[(t - S * r) * 3 + kj], x, *a);
                    }
                }
            }
        }
        let keep = _mm256_cmpgt_epi32(_mm256_set1_epi32(cols as i32), lanes);
        for (r, &a) in acc.iter().enumerate() {
            let a = match run.bias {
                Some(b) => _mm256_add_ps(a, _mm256_set1_ps(b)),
                None => a,
            };
            // SAFETY: AVX2 implies AVX.
            let a = run.clamp.map_or(a, |c| unsafe { c.ymm(a) });
            let at = run.o.wrapping_add(r * run.ow + oj);
            // SAFETY: the first `cols` columns of the block's row `r` are outputs, and up to
            // `end` lie outputs written after this block (the caller's contract).
            unsafe {
                if cols == 8 || at.wrapping_add(8) <= run.end {
                    _mm256_storeu_ps(at, a);
                } else {
                    _mm256_maskstore_ps(at, keep, a);
                }
            }
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::kernels::clamp::testing::{clamped, clamps};
    use crate::kernels::simd::{set_max_level, LEVEL_CAPS};

    /// The definition: each output a chain of `mul_add` over the taps from +0 (zero in the
    /// padding), then the bias added with `add`.
    pub(in crate::kernels) fn naive(g: &DepthwiseGeom, x: &[f32], taps: &[f32], bias: Option<f32>) -> Vec<f32> {
        use crate::math::Num;
        let (oh, ow) = g.out_hw();
        let mut out = Vec::with_capacity(oh * ow);
        for oi in 0..oh {
            for oj in 0..ow {
                let mut s = 0.0f32;
                for ki in 0..3 {
                    for kj in 0..3 {
                        let (i, j) =
                            ((oi * g.stride[0] + ki) as isize - g.padding[0] as isize, (oj * g.stride[1] + kj) as isize - g.padding[1] as isize);
                        let inside = i >= 0 && j >= 0 && (i as usize) < g.h && (j as usize) < g.w;
                        let v = if inside { x[i as usize * g.w + j as usize] } else { 0.0 };
                        s = taps[ki * 3 + kj].mul_add(v, s);
                    }
                }
                out.push(bias.map_or(s, |b| s.add(b)));
            }
        }
        out
    }

    fn geom(h: usize, w: usize, padding: [usize; 2]) -> DepthwiseGeom {
        DepthwiseGeom { n: 1, c: 1, h, w, m: 1, kh: 3, kw: 3, stride: [1, 1], padding, dilation: [1, 1] }
    }

    fn strided(h: usize, w: usize, padding: [usize; 2], s: usize) -> DepthwiseGeom {
        DepthwiseGeom { stride: [s, s], ..geom(h, w, padding) }
    }

    /// Bits, with every NaN as one (which NaN an `fma` of two returns is the instruction's).
    pub(in crate::kernels) fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|x| if x.is_nan() { u32::MAX } else { x.to_bits() }).collect()
    }

    /// The kernel's planes with AVX2 in use, or `None` on a CPU without it (a geometry it
    /// does not take is a test's mistake); on a CPU with AVX-512, also checks that
    /// `depthwise_rows_avx512`'s plane gives the same bits (run directly: where AVX-512 has
    /// its full rate, `planes` does not choose it).
    fn run(g: &DepthwiseGeom, x: &[f32], taps: &[f32], bias: Option<f32>) -> Option<Vec<f32>> {
        run_clamped(g, x, taps, bias, None)
    }

    /// [`run`], the outputs clamped by `clamp`.
    fn run_clamped(g: &DepthwiseGeom, x: &[f32], taps: &[f32], bias: Option<f32>, clamp: Option<Clamp>) -> Option<Vec<f32>> {
        let _only_this_test_caps_the_level = LEVEL_CAPS.lock().unwrap_or_else(|e| e.into_inner());
        assert!(fits(g), "{g:?}");
        set_max_level(Level::Avx2);
        let (oh, ow) = g.out_hw();
        let out = applies::<f32>(g).then(|| {
            let mut out = vec![f32::NAN; oh * ow];
            planes(g, 0, x, taps, bias.as_ref().map(std::slice::from_ref), clamp, &mut out);
            out
        });
        set_max_level(Level::Avx512);
        #[cfg(target_arch = "x86_64")]
        if let Some(want) = &out
            && machine_level() == Level::Avx512
        {
            let wide = avx512_plane(g, x, taps, bias, clamp);
            assert_eq!(bits(&wide), bits(want), "AVX-512's plane against AVX2's: {g:?} bias {bias:?}");
        }
        out
    }

    /// `depthwise_rows_avx512`'s plane of `g` (one image, one channel), a NaN bias added
    /// after as `planes` does; the output starts as NaN, so a lane not written shows.
    #[cfg(target_arch = "x86_64")]
    fn avx512_plane(g: &DepthwiseGeom, x: &[f32], taps: &[f32], bias: Option<f32>, clamp: Option<Clamp>) -> Vec<f32> {
        assert!(machine_level() == Level::Avx512, "a CPU with AVX-512");
        let (oh, ow) = g.out_hw();
        let mut y = vec![f32::NAN; oh * ow];
        let (taps, zeros): (&[f32; 9], _) = (taps.try_into().expect("9 taps"), vec![0.0; g.w]);
        let in_registers = bias.filter(|b| !b.is_nan());
        let clamp_in_registers = clamp.filter(|_| !bias.is_some_and(|b| b.is_nan()));
        use super::super::depthwise_rows_avx512::plane;
        // SAFETY: the CPU has AVX-512 (F and VL, which the level requires).
        unsafe {
            match g.stride[0] {
                1 => plane::<1>(x, g.h, g.w, g.padding, taps, in_registers, clamp_in_registers, &mut y, oh, ow, &zeros),
                _ => plane::<2>(x, g.h, g.w, g.padding, taps, in_registers, clamp_in_registers, &mut y, oh, ow, &zeros),
            }
        }
        if let Some(b) = bias.filter(|b| b.is_nan()) {
            use crate::math::Num;
            y.iter_mut().for_each(|v| *v = v.add(b));
            clamp.inspect(|c| c.slice(&mut y));
        }
        y
    }

    #[test]
    fn a_hand_computed_plane() {
        // The Laplacian over [[1, 2, 3], [4, 5, 6], [7, 8, 9]] with padding 1, as in
        // `depthwise`'s test: corner (0, 0) = -4 + 2 + 4 = 2, centre 0, plus the bias 0.5.
        let x: Vec<f32> = (1..=9).map(|v| v as f32).collect();
        let taps = [0.0, 1.0, 0.0, 1.0, -4.0, 1.0, 0.0, 1.0, 0.0];
        let Some(y) = run(&geom(3, 3, [1, 1]), &x, &taps, Some(0.5)) else { return };
        assert_eq!(y, [2.0, 1.0, -4.0, -3.0, 0.0, -7.0, -16.0, -11.0, -22.0].map(|v| v + 0.5));
    }

    #[test]
    fn every_output_is_the_definition_bit_for_bit() {
        // Widths across the vector and block edges (at stride 2, of the 16 columns a vector
        // reads), heights across the row blocks, each padding, both strides; planes of 1 x 1
        // up to 37 x 19.
        let sizes = [(1, 1), (2, 3), (3, 7), (5, 8), (7, 7), (6, 9), (9, 15), (4, 16), (8, 17), (13, 31), (14, 14), (18, 32), (37, 19)];
        for ((h, w), s) in sizes.into_iter().flat_map(|hw| [(hw, 1), (hw, 2)]) {
            for padding in [[0, 0], [1, 1], [2, 2], [0, 2], [2, 1]] {
                let g = strided(h, w, padding, s);
                if h + 2 * padding[0] < 3 || w + 2 * padding[1] < 3 {
                    continue;
                }
                let x: Vec<f32> = crate::kernels::test_values(h * w, (h * 100 + w) as u64).iter().map(|&v| v as f32).collect();
                let taps: Vec<f32> = crate::kernels::test_values(9, 7).iter().map(|&v| v as f32).collect();
                for (bias, clamp) in [None, Some(0.375f32)].into_iter().flat_map(|b| clamps().map(|c| (b, c))) {
                    let Some(y) = run_clamped(&g, &x, &taps, bias, clamp) else { return };
                    assert_eq!(bits(&y), bits(&clamped(naive(&g, &x, &taps, bias), clamp)), "{g:?} bias {bias:?} {clamp:?}");
                }
            }
        }
    }

    #[test]
    fn avx512_planes_of_wide_rows_are_the_definition_bit_for_bit() {
        // Rows wider than AVX2's kernel takes at stride 2, and at stride 1 widths across the
        // pairs of vectors and their edges; heights across the blocks of 6 and 8 rows.
        if machine_level() < Level::Avx512 {
            return;
        }
        let sizes = [(9, 33), (7, 47), (13, 40), (5, 64), (17, 56), (12, 112), (3, 15), (2, 24)];
        for ((h, w), s) in sizes.into_iter().flat_map(|hw| [(hw, 1), (hw, 2)]) {
            for padding in [[0, 0], [1, 1], [2, 2], [1, 0], [0, 2]] {
                let g = strided(h, w, padding, s);
                if h + 2 * padding[0] < 3 {
                    continue;
                }
                let x: Vec<f32> = crate::kernels::test_values(h * w, (h * 100 + w) as u64).iter().map(|&v| v as f32).collect();
                let taps: Vec<f32> = crate::kernels::test_values(9, 11).iter().map(|&v| v as f32).collect();
                for (bias, clamp) in [None, Some(-0.625f32)].into_iter().flat_map(|b| clamps().map(|c| (b, c))) {
                    #[cfg(target_arch = "x86_64")]
                    let y = avx512_plane(&g, &x, &taps, bias, clamp);
                    #[cfg(not(target_arch = "x86_64"))]
                    let y: Vec<f32> = unreachable!("AVX-512 is x86-64 only");
                    assert_eq!(bits(&y), bits(&clamped(naive(&g, &x, &taps, bias), clamp)), "{g:?} bias {bias:?} {clamp:?}");
                }
            }
        }
    }

    #[test]
    fn an_infinite_weight_makes_the_padded_outputs_nan_and_a_nan_bias_reaches_every_output() {
        // Tap (0, 0) infinite: every output whose tap (0, 0) lies in the padding (the first
        // row and column) is inf * 0 = NaN; the others are +-inf or NaN as the inputs make them.
        let g = geom(5, 11, [1, 1]);
        let x: Vec<f32> = (0..55).map(|i| (i % 5) as f32 - 2.0).collect();
        if let Some(y) = run(&strided(5, 11, [1, 1], 2), &x, &[f32::INFINITY; 9], None) {
            assert!(y.iter().all(|v| v.is_nan()), "at stride 2 every output has a padding tap");
        }
        let mut taps = [0.5f32; 9];
        taps[0] = f32::INFINITY;
        let Some(y) = run(&g, &x, &taps, None) else { return };
        let want = naive(&g, &x, &taps, None);
        assert_eq!(bits(&y), bits(&want));
        assert!(y[..11].iter().all(|v| v.is_nan()) && (0..5).all(|r| y[r * 11].is_nan()), "padding taps count");
        let Some(y) = run(&g, &x, &[0.25; 9], Some(f32::NAN)) else { return };
        assert!(y.iter().all(|v| v.is_nan()));
        // A clamp after a NaN bias keeps the NaN (it runs after the bias, not in registers).
        let Some(y) = run_clamped(&g, &x, &[0.25; 9], Some(f32::NAN), clamps()[1]) else { return };
        assert!(y.iter().all(|v| v.is_nan()));
    }

    #[test]
    fn only_f32_3x3_at_stride_1_or_2_with_avx2_in_use() {
        let g = geom(8, 8, [1, 1]);
        let _only_this_test_caps_the_level = LEVEL_CAPS.lock().unwrap_or_else(|e| e.into_inner());
        set_max_level(Level::Baseline);
        assert!(!applies::<f32>(&g), "the general path below AVX2");
        set_max_level(Level::Avx512);
        if crate::kernels::simd::machine_level() >= Level::Avx2 {
            set_max_level(Level::Avx2);
            assert!(applies::<f32>(&g));
            assert!(!applies::<f64>(&g));
            assert!(applies::<f32>(&DepthwiseGeom { stride: [2, 2], ..g }));
            assert!(!applies::<f32>(&DepthwiseGeom { stride: [2, 2], w: 33, ..g }), "wide rows at stride 2 with AVX2");
            assert!(!applies::<f32>(&DepthwiseGeom { stride: [3, 3], ..g }));
            assert!(!applies::<f32>(&DepthwiseGeom { stride: [1, 2], ..g }));
            assert!(!applies::<f32>(&DepthwiseGeom { kh: 5, kw: 5, ..g }));
            assert!(!applies::<f32>(&DepthwiseGeom { dilation: [2, 2], ..g }));
            assert!(!applies::<f32>(&DepthwiseGeom { padding: [3, 3], ..g }));
            set_max_level(Level::Avx512);
            let wide = DepthwiseGeom { stride: [2, 2], w: 112, h: 112, ..g };
            let half_rate = machine_level() == Level::Avx512 && tile_level() == Level::Avx2;
            assert_eq!(applies::<f32>(&wide), half_rate, "wide rows at stride 2 where AVX-512 runs at AVX2's rate");
        }
    }

    /// Times `planes` on MobileNetV2's depthwise layers with AVX2 and with AVX-512 in use
    /// (where the CPU has it), and the general path's phases, interleaved, every channel of
    /// one image on one thread, the best of 30: `cargo test --release -p tensor-core --lib
    /// depthwise_rows::tests::timing -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn timing() {
        let _only_this_test_caps_the_level = LEVEL_CAPS.lock().unwrap_or_else(|e| e.into_inner());
        let layer = |c, hw, s| DepthwiseGeom { c, ..strided(hw, hw, [1, 1], s) };
        for g in [
            layer(960, 7, 1),
            layer(384, 14, 1),
            layer(576, 14, 1),
            layer(192, 28, 1),
            layer(144, 56, 1),
            layer(32, 112, 1),
            layer(576, 14, 2),
            layer(192, 28, 2),
            layer(144, 56, 2),
            layer(96, 112, 2),
        ] {
            let (oh, ow) = g.out_hw();
            let x: Vec<f32> = (0..g.c * g.h * g.w).map(|i| (i % 97) as f32 / 97.0).collect();
            let w: Vec<f32> = (0..g.c * 9).map(|i| (i % 13) as f32 / 13.0 - 0.5).collect();
            let b: Vec<f32> = (0..g.c).map(|i| i as f32 / 100.0).collect();
            let mut out = vec![0.0f32; g.c * oh * ow];
            let mut best = [f64::MAX; 3];
            for _ in 0..30 {
                for (v, best) in best.iter_mut().enumerate() {
                    let cap = [Level::Avx2, Level::Avx512, Level::Avx512][v];
                    set_max_level(cap);
                    if v < 2 && (machine_level() < cap || !fits_at(&g, level())) {
                        continue;
                    }
                    let t = std::time::Instant::now();
                    match v {
                        2 => super::super::depthwise::by_phases(&x, &w, Some(&b), &g, &mut out, &|_, _| {}),
                        _ => planes(&g, 0, &x, &w, Some(&b), None, &mut out),
                    }
                    *best = best.min(t.elapsed().as_secs_f64() * 1e6);
                }
            }
            set_max_level(Level::Avx512);
            let show = |t: f64| if t == f64::MAX { "-".to_string() } else { format!("{t:.1} us") };
            println!(
                "{} channels at {}x{}, stride {}: AVX2 {}, AVX-512 {}, phases {}",
                g.c,
                g.h,
                g.w,
                g.stride[0],
                show(best[0]),
                show(best[1]),
                show(best[2])
            );
        }
    }
}
