//! The pointwise convolution with few input channels, computed straight from the image on
//! CPUs whose tile level is AVX2 (`simd::tile_level`: AVX2, or AVX-512 at AVX2's rate; with
//! full-rate AVX-512 gemm's kernel stays):
//! MobileNetV2's expansions (16 -> 96 on 112x112, 24 -> 144 on 56x56, 32 -> 192 on 28x28,
//! 64 -> 384 and 96 -> 576 on 14x14) and its projections of few channels (32 -> 16 on
//! 112x112, 96 -> 24 on 56x56).
//!
//! With at most 96 input channels an output needs at most 96 multiply-adds, so gemm's packing
//! of both operands, its loops and the separate pass that adds the bias cost a good share of
//! the product (those layers ran at 40-85% of the one-core peak through gemm). Here a register
//! tile is 6 output channels by 16 positions: per input channel, two vectors of the image read
//! in place (a channel's row of 16 positions) and six broadcast weights feed twelve
//! accumulators; then the bias is added in registers and the tile stored (where AVX-512 is in
//! use, 24 filters by one 16-lane vector, each weight the broadcast operand of its
//! multiply-add: `avx512::block`). A plane of no whole number of tiles (14x14) ends in a
//! masked tile. The image's rows are a plane apart: a tile reads at most 96 of them (6 KiB),
//! which L1 holds, but rows 12,544 floats apart (112x112) fall in only 4 of its 64 sets, so
//! there the kernel takes at most 32 channels.
//!
//! **The bits**: each output is one chain of fused multiply-adds over the input channels in
//! order from +0, then `+ bias` (`Num::add_plain`): the definition's, and what gemm gave these
//! layers (it sums so few channels in one block). A NaN bias would need `Num::add`'s select,
//! so such a layer is left to gemm. The choice depends on the geometry and on the CPU (never
//! on the cap of `simd::set_max_level`, which gemm does not read either), so eager and graph
//! runs take the same kernel.
#![cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]

use super::clamp::Clamp;
use super::conv::ConvGeom;
use super::parallel::num_threads;
use super::shared_out::SharedOut;
use super::simd::{machine_tile_level, Level};
use crate::math::Float;

/// Input channels at most: the image rows a tile reads (64 bytes each) stay in L1.
const MAX_CHANNELS: usize = 96;
/// Input channels at most on planes larger than [`LARGE_PLANE`], whose rows map to few L1 sets.
const MAX_CHANNELS_LARGE: usize = 32;
/// 56x56: the largest plane measured with more than 32 channels.
const LARGE_PLANE: usize = 3136;
/// Planes of fewer positions are left to the paths before (7x7 ones to `conv_blocked`).
const MIN_PLANE: usize = 196;
/// Output channels of a register tile.
const ROWS: usize = 6;
/// Positions of a register tile: two vectors of 8.
const COLS: usize = 16;
/// Positions per task at most: every filter over 512 positions (96 channels: 192 KiB of
/// output) stays in the core's L2 cache for the caller's epilogue.
const MAX_TASK: usize = 512;

/// Whether [`try_conv2d_into`] takes the pointwise layer `g`: at most [`MAX_CHANNELS`] input
/// channels ([`MAX_CHANNELS_LARGE`] on planes above 56x56), a plane of at least 196 positions,
/// on a CPU whose tile level is AVX2 (`simd::machine_tile_level`). Measured on AVX2
/// (`tests::timing`, best of 30, one thread and two), gemm's path / this kernel: 1.25-1.69x
/// on the four layers of at most 32 channels, 1.11-1.22x on 64 -> 384, 96 -> 576 and 96 ->
/// 24; projections of 144 channels or more ran 0.8-1.08x and keep gemm. (On AMD's Zen 4,
/// 0.92-1.65x; docs/PERFORMANCE.md.)
pub(super) fn takes(g: &ConvGeom) -> bool {
    let plane = g.out_plane();
    let most = if plane > LARGE_PLANE { MAX_CHANNELS_LARGE } else { MAX_CHANNELS };
    machine_tile_level() == Level::Avx2 && super::pointwise::applies(g) && (1..=most).contains(&g.c) && g.o > 0 && plane >= MIN_PLANE
}

/// The pointwise layer `g` of `x` (`[n, c, h, w]`) with `w` (`[o, c]`) and `bias` into `out`
/// (`[n, o, h, w]`), when [`takes`] and the values are f32 and the bias holds no NaN; returns
/// whether it ran (otherwise nothing was written). With `clamp` each output is clamped in
/// registers before it is stored. `after(start, len)` runs on each output channel's part of
/// a group of filters once it is final, on the thread that made it, while it is in L1.
pub(super) fn try_conv2d_into<T: Float>(
    x: &[T],
    w: &[T],
    bias: Option<&[T]>,
    g: &ConvGeom,
    out: &mut [T],
    clamp: Option<Clamp>,
    after: &(dyn Fn(usize, usize) + Sync),
) -> bool {
    #[cfg(target_arch = "x86_64")]
    if takes(g) && std::any::TypeId::of::<T>() == std::any::TypeId::of::<f32>() && !bias.is_some_and(|b| b.iter().any(|v| v.is_nan_value())) {
        use super::fma_tile::{cast, cast_mut};
        // SAFETY: T is f32 (checked above); the casts keep the slices' lengths.
        let (x, w, bias, out) = unsafe { (cast(x), cast(w), bias.map(|b| cast(b)), cast_mut(out)) };
        conv2d_into(x, w, bias, g, out, clamp, after);
        return true;
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (x, w, bias, g, out, clamp, after);
    false
}

/// How one image's output is cut into tasks: about four (an even number of at least four on
/// large planes), so two threads get near-equal shares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tasks {
    /// This many positions (whole tiles, at most [`MAX_TASK`]) of every filter: on large
    /// planes, where a task's part of the image and of the output stay in L2.
    Positions(usize),
    /// This many filters (a multiple of 6) over the whole plane, one run for the caller's
    /// epilogue: on planes of at most [`MAX_TASK`] * 2 positions. There tasks of positions
    /// handed it one short run per filter, and 32 -> 192 on 28x28 took 0.30 ms in the model
    /// against 0.27 by gemm's blocks of filters (0.23 with tasks of filters).
    Filters(usize),
}

impl Tasks {
    fn of(plane: usize, filters: usize) -> Tasks {
        if plane <= 2 * MAX_TASK {
            return Tasks::Filters(filters.div_ceil(4).next_multiple_of(ROWS));
        }
        let tasks = plane.div_ceil(MAX_TASK).max(4).next_multiple_of(2);
        Tasks::Positions((plane / COLS).div_ceil(tasks) * COLS)
    }
}

#[cfg(target_arch = "x86_64")]
fn conv2d_into(
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    g: &ConvGeom,
    out: &mut [f32],
    clamp: Option<Clamp>,
    after: &(dyn Fn(usize, usize) + Sync),
) {
    let (plane, image) = (g.out_plane(), g.c * g.out_plane());
    assert!(x.len() >= g.n * image && w.len() >= g.o * g.c && out.len() >= g.n * g.o * plane, "pointwise_direct: operands of the geometry");
    assert!(bias.is_none_or(|b| b.len() >= g.o), "pointwise_direct: a bias per output channel");
    let cut = Tasks::of(plane, g.o);
    let per_image = match cut {
        Tasks::Positions(len) => plane.div_ceil(len),
        Tasks::Filters(rows) => g.o.div_ceil(rows),
    };
    let dst = SharedOut::new(out);
    let task = |t: usize| {
        let (i, part) = (t / per_image, t % per_image);
        let (x, out) = (&x[i * image..], i * g.o * plane);
        match cut {
            Tasks::Positions(len) => {
                let (q, n) = (part * len, len.min(plane - part * len));
                // SAFETY: the CPU has AVX2 and FMA (`takes`); positions q..q + n of image
                // i's channels are inside `x` and `out` (asserted), and this task alone
                // writes them.
                let done = |r0: usize, m: usize| (r0..r0 + m).for_each(|oc| after(out + oc * plane + q, n));
                unsafe { block(x[q..].as_ptr(), plane, g.c, w, bias, g.o, n, dst.at(out + q), clamp, &done) };
            }
            Tasks::Filters(rows) => {
                let (r0, m) = (part * rows, rows.min(g.o - part * rows));
                // SAFETY: as above, for filters r0..r0 + m over the whole plane.
                let done = |r: usize, k: usize| after(out + (r0 + r) * plane, k * plane);
                unsafe { block(x.as_ptr(), plane, g.c, &w[r0 * g.c..], bias.map(|b| &b[r0..]), m, plane, dst.at(out + r0 * plane), clamp, &done) };
            }
        }
    };
    let tasks = g.n * per_image;
    if tasks > 1 && num_threads() > 1 {
        super::parallel::for_each_task(tasks, &task);
    } else {
        (0..tasks).for_each(task);
    }
}

/// `avx2::block`, or its AVX-512 form where that is in use (for at most [`MAX_CHANNELS`],
/// which it copies to the stack): the same outputs, bit for bit.
///
/// # Safety
/// As `avx2::block`'s.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
unsafe fn block(
    x: *const f32,
    plane: usize,
    c: usize,
    w: &[f32],
    bias: Option<&[f32]>,
    o: usize,
    n: usize,
    out: *mut f32,
    clamp: Option<Clamp>,
    done: &dyn Fn(usize, usize),
) {
    // SAFETY: the caller's; the level says the CPU has AVX-512F.
    unsafe {
        match super::simd::level() {
            Level::Avx512 if c <= MAX_CHANNELS => avx512::block(x, plane, c, w, bias, o, n, out, clamp, done),
            _ => avx2::block(x, plane, c, w, bias, o, n, out, clamp, done),
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{Clamp, COLS, ROWS};
    use std::arch::x86_64::*;

    /// Every output channel over `n` positions from `x` (the first position of channel 0;
    /// channels `plane` apart) into `out` (rows `plane` apart), by groups of 6 filters, each
    /// swept along the positions: its outputs are written in 6 long runs, and the task's part
    /// of the image is read again from L1 or L2 by the next group. (Every group at each 16
    /// positions in turn, writing 96 rows a little at a time, measured 1.1-1.3x slower.) A
    /// last tile of fewer than 16 positions reads and writes its live lanes only. Each output
    /// takes the bias, then `clamp`, in registers; `done(r0, m)` runs once filters `r0..r0 +
    /// m` are stored, while their runs are in L1.
    ///
    /// # Safety
    /// The CPU must have AVX2 and FMA; `x` must hold `c` channels of `n` positions, `plane`
    /// apart, and `out` `o` rows of `n`; `w` `o * c` weights, `bias` (if any) `o` values.
    #[target_feature(enable = "avx2,fma")]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn block(
        x: *const f32,
        plane: usize,
        c: usize,
        w: &[f32],
        bias: Option<&[f32]>,
        o: usize,
        n: usize,
        out: *mut f32,
        clamp: Option<Clamp>,
        done: &dyn Fn(usize, usize),
    ) {
        assert!(w.len() >= o * c && bias.is_none_or(|b| b.len() >= o));
        let (whole, rest) = (n / COLS * COLS, n % COLS);
        // Lane l of the last tile's two vectors is live when l < rest (resp. l + 8 < rest).
        let lanes = |from: i32| _mm256_setr_epi32(from, from + 1, from + 2, from + 3, from + 4, from + 5, from + 6, from + 7);
        let live = [_mm256_cmpgt_epi32(_mm256_set1_epi32(rest as i32), lanes(0)), _mm256_cmpgt_epi32(_mm256_set1_epi32(rest as i32), lanes(8))];
        for r0 in (0..o).step_by(ROWS) {
            let (w, bias, out) = (w[r0 * c..].as_ptr(), bias.map(|b| b[r0..].as_ptr()), out.wrapping_add(r0 * plane));
            macro_rules! sweep {
                ($r:literal) => {{
                    for q in (0..whole).step_by(COLS) {
                        // SAFETY: the caller's bounds (and the assertion), at filters r0..
                        // and positions q..q + 16.
                        unsafe { tile::<$r, false>(x.add(q), plane, c, w, bias, clamp, out.add(q), live) };
                    }
                    if rest > 0 {
                        // SAFETY: as above; the tile touches its live lanes only.
                        unsafe { tile::<$r, true>(x.add(whole), plane, c, w, bias, clamp, out.add(whole), live) };
                    }
                }};
            }
            match o - r0 {
                1 => sweep!(1),
                2 => sweep!(2),
                3 => sweep!(3),
                4 => sweep!(4),
                5 => sweep!(5),
                _ => sweep!(6),
            }
            done(r0, ROWS.min(o - r0));
        }
    }

    /// `R` filters (rows of `w`, `c` apart) by 16 positions (with `MASKED`, the `live` lanes
    /// only): each output's chain over the channels in order from +0, then its bias added,
    /// stored at `out` (rows `plane` apart).
    ///
    /// # Safety
    /// As [`block`], for `R` filters (`R * c` weights, `R` biases) at one tile's positions
    /// (its live ones with `MASKED`).
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    #[allow(clippy::too_many_arguments)]
    unsafe fn tile<const R: usize, const MASKED: bool>(
        x: *const f32,
        plane: usize,
        c: usize,
        w: *const f32,
        bias: Option<*const f32>,
        clamp: Option<Clamp>,
        out: *mut f32,
        live: [__m256i; 2],
    ) {
        let mut acc = [[_mm256_setzero_ps(); 2]; R];
        for k in 0..c {
            // SAFETY: channel k's positions of the tile (its live ones with MASKED) are
            // inside x, filter r's weight k inside w (the caller's).
            unsafe {
                let row = x.add(k * plane);
                let (x0, x1) = match MASKED {
                    false => (_mm256_loadu_ps(row), _mm256_loadu_ps(row.add(8))),
                    true => (_mm256_maskload_ps(row, live[0]), _mm256_maskload_ps(row.add(8), live[1])),
                };
                for (r, acc) in acc.iter_mut().enumerate() {
                    let wv = _mm256_broadcast_ss(&*w.add(r * c + k));
                    acc[0] = _mm256_fmadd_ps(wv, x0, acc[0]);
                    acc[1] = _mm256_fmadd_ps(wv, x1, acc[1]);
                }
            }
        }
        for (r, acc) in acc.iter().enumerate() {
            // SAFETY: row r's positions of the tile are inside out, its bias inside bias (the
            // caller's).
            unsafe {
                // `v + b` is `Num::add_plain`'s bits (the bias is not NaN).
                let [lo, hi] = match bias {
                    Some(b) => [_mm256_add_ps(acc[0], _mm256_broadcast_ss(&*b.add(r))), _mm256_add_ps(acc[1], _mm256_broadcast_ss(&*b.add(r)))],
                    None => [acc[0], acc[1]],
                };
                let [lo, hi] = match clamp {
                    Some(c) => [c.ymm(lo), c.ymm(hi)],
                    None => [lo, hi],
                };
                let to = out.add(r * plane);
                match MASKED {
                    false => (_mm256_storeu_ps(to, lo), _mm256_storeu_ps(to.add(8), hi)),
                    true => (_mm256_maskstore_ps(to, live[0], lo), _mm256_maskstore_ps(to.add(8), live[1], hi)),
                };
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::{Clamp, COLS, MAX_CHANNELS};
    use std::arch::x86_64::*;

    /// Filters of one wide tile: 24 accumulators of AVX-512's 32 registers.
    const WIDE_ROWS: usize = 24;

    /// [`super::avx2::block`]'s outputs with AVX-512: groups of 24 filters, each swept along
    /// the positions by tiles of one 16-lane vector. A group's weights are first copied
    /// channel-major, so that each is the broadcast operand of its fused multiply-add: per
    /// channel a tile loads its 16 positions and runs 24 multiply-adds, where AVX2's tile of
    /// 6 filters by two vectors spends six broadcasts and two loads per twelve. The same
    /// chains, bias and clamp, so the same bits. A last tile of fewer than 16 positions reads
    /// and writes its live lanes only.
    ///
    /// # Safety
    /// The CPU must have AVX-512F; otherwise as `avx2::block`, with `c` at most 96.
    #[target_feature(enable = "avx512f")]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn block(
        x: *const f32,
        plane: usize,
        c: usize,
        w: &[f32],
        bias: Option<&[f32]>,
        o: usize,
        n: usize,
        out: *mut f32,
        clamp: Option<Clamp>,
        done: &dyn Fn(usize, usize),
    ) {
        assert!(w.len() >= o * c && bias.is_none_or(|b| b.len() >= o) && c <= MAX_CHANNELS);
        let (whole, rest) = (n / COLS * COLS, n % COLS);
        let live: __mmask16 = ((1u32 << rest) - 1) as u16;
        let mut packed = [0.0f32; MAX_CHANNELS * WIDE_ROWS];
        for r0 in (0..o).step_by(WIDE_ROWS) {
            let rows = WIDE_ROWS.min(o - r0);
            for (r, filter) in w[r0 * c..(r0 + rows) * c].chunks_exact(c).enumerate() {
                filter.iter().enumerate().for_each(|(k, &v)| packed[k * rows + r] = v);
            }
            let (wp, bias, out) = (packed.as_ptr(), bias.map(|b| b[r0..].as_ptr()), out.wrapping_add(r0 * plane));
            macro_rules! sweep {
                ($($r:literal)*) => {
                    match rows {
                        $($r => {
                            for q in (0..whole).step_by(COLS) {
                                // SAFETY: the caller's bounds (and the assertion), at filters
                                // r0.. and positions q..q + 16; `packed` holds `c` channels
                                // of `rows` weights.
                                unsafe { tile::<$r, false>(x.add(q), plane, c, wp, bias, clamp, out.add(q), live) };
                            }
                            if rest > 0 {
                                // SAFETY: as above; the tile touches its live lanes only.
                                unsafe { tile::<$r, true>(x.add(whole), plane, c, wp, bias, clamp, out.add(whole), live) };
                            }
                        })*
                        _ => unreachable!("at most 24 filters a group"),
                    }
                };
            }
            sweep!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24);
            done(r0, rows);
        }
    }

    /// `R` filters (`w` channel-major: channel `k`'s `R` weights from `w + k R`) by 16
    /// positions (with `MASKED`, the `live` lanes only): each output's chain over the
    /// channels in order from +0, then its bias, then `clamp`, stored at `out` (rows `plane`
    /// apart).
    ///
    /// # Safety
    /// As [`block`], for `R` filters (`R * c` weights, `R` biases) at one tile's positions
    /// (its live ones with `MASKED`).
    #[target_feature(enable = "avx512f")]
    #[inline]
    #[allow(clippy::too_many_arguments)]
    unsafe fn tile<const R: usize, const MASKED: bool>(
        x: *const f32,
        plane: usize,
        c: usize,
        w: *const f32,
        bias: Option<*const f32>,
        clamp: Option<Clamp>,
        out: *mut f32,
        live: __mmask16,
    ) {
        let mut acc = [_mm512_setzero_ps(); R];
        for k in 0..c {
            // SAFETY: channel k's positions of the tile (its live ones with MASKED) are
            // inside x, its R weights inside w (the caller's).
            unsafe {
                let row = x.add(k * plane);
                let xv = match MASKED {
                    false => _mm512_loadu_ps(row),
                    true => _mm512_maskz_loadu_ps(live, row),
                };
                let wk = w.add(k * R);
                for (r, acc) in acc.iter_mut().enumerate() {
                    *acc = _mm512_fmadd_ps(_mm512_set1_ps(*wk.add(r)), xv, *acc);
                }
            }
        }
        for (r, acc) in acc.iter().enumerate() {
            // SAFETY: row r's positions of the tile are inside out, its bias inside bias (the
            // caller's).
            unsafe {
                // `v + b` is `Num::add_plain`'s bits (the bias is not NaN).
                let v = match bias {
                    Some(b) => _mm512_add_ps(*acc, _mm512_set1_ps(*b.add(r))),
                    None => *acc,
                };
                let v = match clamp {
                    Some(c) => c.zmm(v),
                    None => v,
                };
                let to = out.add(r * plane);
                match MASKED {
                    false => _mm512_storeu_ps(to, v),
                    true => _mm512_mask_storeu_ps(to, live, v),
                }
            }
        }
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;
    use crate::kernels::clamp::testing::{clamped, clamps};
    use crate::kernels::depthwise_rows::tests::bits;
    use crate::kernels::simd::{set_max_level, LEVEL_CAPS};

    fn pw(n: usize, c: usize, h: usize, w: usize, o: usize) -> ConvGeom {
        ConvGeom { n, c, h, w, o, kh: 1, kw: 1, stride: [1, 1], padding: [0, 0] }
    }

    /// The definition (`conv_direct`'s reference: each output's chain over the channels in
    /// order from +0, then the bias). Without a bias, a +0 one: a chain from +0 never ends at
    /// -0, so adding +0 changes no output's bits.
    fn naive(x: &[f32], w: &[f32], b: Option<&[f32]>, g: &ConvGeom) -> Vec<f32> {
        crate::kernels::conv_direct::tests::naive(x, w, b.unwrap_or(&vec![0.0; g.o]), g)
    }

    fn values(len: usize, seed: u64) -> Vec<f32> {
        crate::kernels::test_values(len, seed).into_iter().map(|v| v as f32).collect()
    }

    /// Runs the kernel (whatever `takes` says: small planes here), the hook counting each
    /// output it is handed.
    fn run(x: &[f32], w: &[f32], b: Option<&[f32]>, g: &ConvGeom, clamp: Option<Clamp>) -> (Vec<f32>, bool) {
        let total = g.n * g.o * g.out_plane();
        let (mut out, seen) = (vec![f32::NAN; total], std::sync::Mutex::new(vec![0u8; total]));
        conv2d_into(x, w, b, g, &mut out, clamp, &|s, l| seen.lock().unwrap()[s..s + l].iter_mut().for_each(|v| *v += 1));
        (out, seen.into_inner().unwrap().iter().all(|&v| v == 1))
    }

    fn has_avx2() -> bool {
        crate::kernels::simd::machine_level() >= Level::Avx2
    }

    /// Two images of three channels at 32 positions into 7 filters (a group of 6 and one
    /// of 1), by hand: channel k holds k + 1 everywhere but position 5, which holds -1 in
    /// every channel; filter f weighs channel k by f - k.
    #[test]
    fn a_hand_computed_layer() {
        if !has_avx2() {
            return;
        }
        let g = pw(2, 3, 4, 8, 7);
        let x: Vec<f32> = (0..2 * 3 * 32).map(|i| if i % 32 == 5 { -1.0 } else { (i / 32 % 3 + 1) as f32 }).collect();
        let w: Vec<f32> = (0..7 * 3).map(|i| (i / 3) as f32 - (i % 3) as f32).collect();
        let b: Vec<f32> = (0..7).map(|f| 0.5 * f as f32).collect();
        let (out, once) = run(&x, &w, Some(&b), &g, None);
        assert!(once, "the hook sees each output once");
        for (i, f, p) in (0..2).flat_map(|i| (0..7).flat_map(move |f| (0..32).map(move |p| (i, f, p)))) {
            // sum over k of (f - k) * (k + 1) = 6f - 8; at position 5, -(3f - 3).
            let want = if p == 5 { -(3.0 * f as f32 - 3.0) } else { 6.0 * f as f32 - 8.0 } + 0.5 * f as f32;
            assert_eq!(out[(i * 7 + f) * 32 + p], want, "image {i} filter {f} position {p}");
        }
    }

    /// The definition's bits: filters in groups of 6 (AVX2) or 24 (AVX-512, where the CPU has
    /// it) with each remainder, one to 96 channels, one and two images, tasks of filters and
    /// (on 1,089 and 1,152 positions) of positions, planes of whole tiles and ragged ones, with
    /// and without bias, with and without a clamp (the definition's outputs clamped after, as
    /// the graph's program clamps them); on the pool and on one thread. The output starts as
    /// NaN, so a position not written shows.
    #[test]
    fn every_output_has_the_definitions_bits_on_any_thread_count() {
        if !has_avx2() {
            return;
        }
        let _only_this_test_caps_the_level = LEVEL_CAPS.lock().unwrap_or_else(|e| e.into_inner());
        #[rustfmt::skip]
        let geoms = [
            (pw(1, 16, 16, 32, 96), true), (pw(2, 32, 8, 144, 16), true), (pw(1, 1, 4, 4, 5), false), (pw(1, 24, 16, 48, 13), true),
            (pw(2, 7, 2, 16, 4), false),
            // Planes of no whole number of tiles: 196 positions (a last tile of 4), 9 (one
            // tile of 9), 1,089 (tasks of positions, the last one ragged).
            (pw(1, 96, 14, 14, 20), true), (pw(2, 5, 3, 3, 7), true), (pw(1, 8, 33, 33, 6), false),
            // Groups of 24 and a remainder: tasks of 18, 18 and 14 filters; 40 filters at
            // each task of positions.
            (pw(1, 96, 14, 14, 50), true), (pw(1, 12, 33, 33, 40), true),
        ];
        for (g, bias) in geoms {
            let plane = g.out_plane();
            let (x, w, b) = (values(g.n * g.c * plane, 1), values(g.o * g.c, 2), values(g.o, 3));
            let b = bias.then_some(&b[..]);
            for (clamp, cap) in clamps().into_iter().flat_map(|c| [(c, Level::Avx512), (c, Level::Avx2)]) {
                let want = bits(&clamped(naive(&x, &w, b, &g), clamp));
                set_max_level(cap);
                let (pooled, once) = run(&x, &w, b, &g, clamp);
                let (alone, _) = crate::kernels::parallel::on_one_thread(|| run(&x, &w, b, &g, clamp));
                set_max_level(Level::Avx512);
                assert!(once, "{g:?}");
                assert_eq!(bits(&pooled), want, "{g:?}, {clamp:?}, {cap:?}");
                assert_eq!(bits(&alone), want, "{g:?}, {clamp:?}, {cap:?}, one thread");
            }
        }
    }

    #[test]
    fn tasks_are_whole_tiles_of_at_most_512_positions_or_groups_of_filters_on_small_planes() {
        assert_eq!(Tasks::of(12544, 96), Tasks::Positions(496));
        assert_eq!(Tasks::of(3136, 144), Tasks::Positions(400));
        assert_eq!(Tasks::of(784, 192), Tasks::Filters(48));
        assert_eq!(Tasks::of(32, 7), Tasks::Filters(6));
        for plane in (1040..20_000).step_by(16) {
            let Tasks::Positions(len) = Tasks::of(plane, 8) else { panic!("{plane}") };
            assert!(len.is_multiple_of(COLS) && len <= MAX_TASK && plane.div_ceil(len) >= 4, "{plane}: {len}");
        }
    }

    /// MobileNetV2's pointwise layers of at most 96 input channels on planes from 14x14 up
    /// (at most 32 on 112x112) are taken on an AVX2 CPU; more channels, smaller planes, other
    /// kernels and strides are not.
    #[test]
    fn takes_few_input_channels_on_planes_from_14x14() {
        let avx2 = machine_tile_level() == Level::Avx2;
        #[rustfmt::skip]
        let taken = [
            pw(1, 16, 112, 112, 96), pw(1, 32, 112, 112, 16), pw(1, 24, 56, 56, 144), pw(1, 32, 28, 28, 192), pw(1, 96, 56, 56, 24),
            pw(1, 64, 14, 14, 384), pw(1, 96, 14, 14, 576), pw(8, 16, 112, 112, 96), pw(1, 96, 20, 30, 8),
        ];
        for g in taken {
            assert_eq!(takes(&g), avx2, "{g:?}");
        }
        for g in [
            pw(1, 144, 56, 56, 24),
            pw(1, 192, 28, 28, 32),
            pw(1, 384, 14, 14, 64),
            pw(1, 64, 112, 112, 16),
            pw(1, 16, 7, 7, 8),
            pw(1, 16, 13, 15, 8),
        ] {
            assert!(!takes(&g), "{g:?}");
        }
        let g = pw(1, 16, 112, 112, 96);
        assert!(!takes(&ConvGeom { kh: 3, kw: 3, padding: [1, 1], ..g }) && !takes(&ConvGeom { stride: [2, 2], ..g }));
    }

    /// A NaN bias (which would need `add`'s select) and f64 leave the layer to gemm, nothing
    /// written; a NaN or an infinity in the image or the weights stays in its own outputs.
    #[test]
    fn a_nan_bias_and_f64_are_left_to_gemm_non_finite_values_stay_in_their_outputs() {
        let g = pw(1, 16, 32, 32, 8);
        if !takes(&g) {
            return;
        }
        let (x, w) = (values(16 * 1024, 4), values(8 * 16, 5));
        let mut b = values(8, 6);
        b[3] = f32::NAN;
        let mut out = vec![7.0f32; 8 * 1024];
        assert!(!try_conv2d_into(&x, &w, Some(&b), &g, &mut out, None, &|_, _| {}));
        assert!(out.iter().all(|&v| v == 7.0), "nothing written");
        let (x64, w64) = (vec![0.0f64; 16 * 1024], vec![0.0f64; 8 * 16]);
        assert!(!try_conv2d_into(&x64, &w64, None, &g, &mut vec![0.0f64; 8 * 1024], None, &|_, _| {}));
        let mut x = x;
        x[5 * 1024 + 40] = f32::NAN; // channel 5, position 40: every filter's output there
        let mut w = w;
        w[2 * 16 + 9] = f32::INFINITY; // filter 2, channel 9
        let b = values(8, 6);
        assert!(try_conv2d_into(&x, &w, Some(&b), &g, &mut out, None, &|_, _| {}));
        for (f, p) in (0..8).flat_map(|f| (0..1024).map(move |p| (f, p))) {
            let v = out[f * 1024 + p];
            assert_eq!(v.is_nan(), p == 40 || (f == 2 && x[9 * 1024 + p] == 0.0), "filter {f} position {p}");
            assert_eq!(v.is_infinite(), f == 2 && p != 40 && x[9 * 1024 + p] != 0.0, "filter {f} position {p}");
        }
        assert_eq!(bits(&out), bits(&naive(&x, &w, Some(&b), &g)));
    }

    /// The op's pointwise kernel hands MobileNetV2's 16 -> 96 layer here: the definition's
    /// bits through `pointwise::conv2d`.
    #[test]
    fn the_ops_pointwise_kernel_hands_the_layer_here() {
        let g = pw(1, 16, 112, 112, 96);
        let (x, w, b) = (values(16 * 12544, 7), values(96 * 16, 8), values(96, 9));
        let arr = |v: &[f32], d: &[usize]| crate::storage::Array::from_shape_vec(ndarray::IxDyn(d), v.to_vec()).unwrap();
        let y = crate::kernels::pointwise::conv2d(&arr(&x, &[1, 16, 112, 112]), &arr(&w, &[96, 16, 1, 1]), Some(&arr(&b, &[96])), &g);
        assert_eq!(bits(y.as_slice().unwrap()), bits(&naive(&x, &w, Some(&b), &g)));
    }

    /// Times MobileNetV2's pointwise layers on planes from 14x14 up (those `takes` takes and the
    /// projections of more channels, which it leaves) by gemm's path and by this kernel, the
    /// latter with AVX2's tiles (a cap), with the tiles of the level in use (AVX-512's where
    /// the CPU has it), and with those and ReLU6 in registers, interleaved, the best of 30:
    /// `cargo test --release -p tensor-core --lib pointwise_direct::tests::timing -- --ignored
    /// --nocapture` (`RAYON_NUM_THREADS=1` for one thread).
    #[test]
    #[ignore]
    fn timing() {
        #[rustfmt::skip]
        let layers = [
            pw(1, 16, 112, 112, 96), pw(1, 32, 112, 112, 16), pw(1, 24, 56, 56, 144), pw(1, 32, 28, 28, 192), pw(1, 96, 56, 56, 24),
            pw(1, 144, 56, 56, 24), pw(1, 144, 28, 28, 32), pw(1, 192, 28, 28, 32), pw(1, 64, 14, 14, 384), pw(1, 96, 14, 14, 576),
            pw(1, 192, 14, 14, 64), pw(1, 384, 14, 14, 64), pw(1, 384, 14, 14, 96), pw(1, 576, 14, 14, 96),
        ];
        for g in layers {
            let (x, w, b) = (values(g.c * g.out_plane(), 1), values(g.o * g.c, 2), values(g.o, 3));
            let mut out = vec![0.0f32; g.o * g.out_plane()];
            let mut best = [f64::MAX; 4];
            let _only_this_test_caps_the_level = LEVEL_CAPS.lock().unwrap_or_else(|e| e.into_inner());
            crate::kernels::parallel::on_worker(|| {
                for round in 0..32 {
                    for (v, best) in best.iter_mut().enumerate() {
                        let relu6 = Clamp::new(Some(0.0), Some(6.0));
                        set_max_level(if v == 1 { Level::Avx2 } else { Level::Avx512 });
                        let t = std::time::Instant::now();
                        match v {
                            0 => crate::kernels::pointwise::by_gemm(&x, &w, Some(&b), &g, &mut out),
                            1 | 2 => conv2d_into(&x, &w, Some(&b), &g, &mut out, None, &|_, _| {}),
                            _ => conv2d_into(&x, &w, Some(&b), &g, &mut out, relu6, &|_, _| {}),
                        }
                        if round > 1 {
                            *best = best.min(t.elapsed().as_secs_f64() * 1e3);
                        }
                    }
                }
            });
            let mut by_gemm = vec![0.0f32; out.len()];
            crate::kernels::pointwise::by_gemm(&x, &w, Some(&b), &g, &mut by_gemm);
            conv2d_into(&x, &w, Some(&b), &g, &mut out, None, &|_, _| {});
            let same = bits(&by_gemm) == bits(&out);
            println!(
                "{} -> {} at {}x{}: gemm {:.3} ms, direct with AVX2 {:.3} ms ({:.2}x), at the level in use {:.3}, with ReLU6 {:.3}, same bits as gemm: {same}",
                g.c,
                g.o,
                g.h,
                g.w,
                best[0],
                best[1],
                best[0] / best[1],
                best[2],
                best[3]
            );
        }
    }
}
