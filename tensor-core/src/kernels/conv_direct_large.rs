//! Direct convolution for ResNet's 3x3 layers on small planes (long patches), its stride-2
//! 3x3 layers and its stem, with the output channels of one image split over the threads.
//!
//! The same scheme as `conv_direct`: every image copied once into zero-padded planes read as
//! *wide* positions, each output a chain of fused multiply-adds over the taps in
//! `(ci, ki, kj)` order from zero, then the bias added; a register tile of `R` channels by `V`
//! vectors of positions, one broadcast weight per channel and one run of inputs per tap,
//! weights read from their own `[o, c, kh, kw]` layout (no packing). What differs:
//!
//! - Strides: each padded plane is split into its stride phases (as `depthwise.rs` does), so
//!   every tap of a strided convolution still reads a contiguous run ([`Layout`]).
//! - A task is one image's block of `R` output channels over all its positions, and the tasks
//!   of all images run in parallel (batch 1 has as many tasks as blocks). The chain of every
//!   output is the same whatever the tile or the task, so the bits depend neither on the
//!   thread count nor on the SIMD level; the tile is picked per geometry, only for speed.
//! - Tiles store straight into the output (the wrapped wide positions dropped there), with
//!   their bias, so no wide buffer is written and read back.
//! - With AVX-512 and f32 the tile is written with intrinsics (its 24 accumulators stay in
//!   registers); f64, and a level capped below AVX-512, run `conv_direct`'s generic tile (the
//!   kernel is taken only on CPUs with AVX-512: see `applies`).
//!
//! The bits are not the im2col path's (its GEMM sums a patch longer than 512 taps by blocks).
//! NaN inputs still get that path's (the caller's `fallback`), as in `conv`'s other direct
//! kernel: which of several NaNs a fused multiply-add returns depends on the instruction.

use super::conv::ConvGeom;
#[cfg(target_arch = "x86_64")]
use super::fma_tile::{avx512, cast, cast_mut};
use super::fma_tile::{portable_tile, Taps};
use super::parallel::num_threads;
use super::scratch::{with_slot, Slot};
use super::simd::{level, machine_tile_level, multiversion, Level};
use crate::math::Float;
use rayon::prelude::*;

/// True when [`conv2d_into`] (or, with the same bits, `conv_blocked`) computes `g`: the layers
/// of ResNet's shapes where it measured faster than the path they took before
/// (`tests::timing`; docs/PERFORMANCE.md, W9). On CPUs with full-rate AVX-512, this kernel's
/// tiles. Where the tile level is AVX2 (`simd::machine_tile_level`: AVX2 alone, 16 registers
/// of 8 floats, or AVX-512 at AVX2's rate) this kernel's tile measured 1.2-1.6x slower than
/// Winograd or im2col, and 0.95x on 7x7 planes; `conv_blocked`'s (vectors of output channels)
/// measured faster on the layers `conv_blocked::fits` names. The choice follows the machine
/// and the geometry, not the cap of `simd::set_max_level`, so a cap never changes which bits
/// a layer gets (these kernels' are not im2col's).
pub(super) fn applies(g: &ConvGeom) -> bool {
    #[cfg(test)]
    if OFF.with(|off| off.get()) {
        return false;
    }
    match machine_tile_level() {
        Level::Avx512 => fits(g),
        Level::Avx2 => super::conv_blocked::fits(g),
        Level::Baseline => false,
    }
}

#[cfg(test)]
thread_local! {
    /// Set by the timing test: convolutions on this thread take the paths they took before.
    pub(super) static OFF: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// The geometry half of [`applies`] (the level only picks the faster of equal results).
/// - 3x3 stride 1 with patches longer than `conv_direct`'s on planes of at most 14x14, at
///   batch 1 or where Winograd has fewer than 16 tiles of 4x4 (7x7 planes up to batch 3). With
///   more tiles Winograd's fewer products win (7x7 at batch 4, 14x14 at batch 2); on larger
///   planes its transforms cost little, and it wins at batch 1 too.
/// - 3x3 stride 2 with such patches (im2col's before): outputs of at most 7x7, at any batch
///   (outputs of 14x14 measured as fast as im2col at batch 1 and slower at batch 8, 28x28
///   slower at batch 1).
/// - 7x7 stride-2 stems of up to 4 channels (im2col by row blocks before), at batch 1 (at
///   batch 8 the kernel alone was faster but the model's step measured slower in half the runs).
fn fits(g: &ConvGeom) -> bool {
    let (oh, ow) = g.out_hw();
    let plane = oh * ow;
    let k3 = |s: usize| g.kh == 3 && g.kw == 3 && g.stride == [s, s] && g.padding == [1, 1] && g.patch() > 512;
    let winograd_tiles = g.n * oh.div_ceil(4) * ow.div_ceil(4);
    let stride1 = k3(1) && plane <= 196 && (g.n == 1 || winograd_tiles < 16);
    let stride2 = k3(2) && plane <= 49;
    let stem = g.kh == 7 && g.kw == 7 && g.stride == [2, 2] && g.padding == [3, 3] && g.c <= 4 && g.n == 1;
    g.o >= 2 && (stride1 || stride2 || stem)
}

/// Whether the kernel computes `g` correctly (any stride and padding that leave an output).
fn computes(g: &ConvGeom) -> bool {
    g.patch() >= 1 && g.o >= 1 && g.out_plane() >= 1
}

/// A register tile: `R` channels by `V` vectors of positions. Must match [`block_body`]'s arms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    /// 6 channels by 4 vectors (AVX-512: 24 accumulators), the 7x7 planes' 61 wide positions.
    C6V4,
    /// 3 channels by 7 vectors (21 accumulators), the 14x14 planes' 222 in two tiles.
    C3V7,
    /// `conv_direct`'s 4 channels by 2 vectors (16 registers: a level capped at AVX2).
    C4V2,
}

impl Shape {
    /// The tile for `g` at AVX-512 (`wide_regs`) or with 16 registers.
    fn for_geom<T>(g: &ConvGeom, wide_regs: bool) -> Shape {
        let lanes = 64 / std::mem::size_of::<T>();
        let (oh, ow) = g.out_hw();
        let positions = (oh - 1) * (g.w + 2 * g.padding[1]).div_ceil(g.stride[1]) + ow;
        match wide_regs {
            false => Shape::C4V2,
            true if positions.div_ceil(lanes) <= 4 => Shape::C6V4,
            true => Shape::C3V7,
        }
    }

    fn channels(self) -> usize {
        match self {
            Shape::C6V4 => 6,
            Shape::C3V7 => 3,
            Shape::C4V2 => 4,
        }
    }

    /// Positions of one tile for `T` (vectors of 64 bytes at AVX-512, 32 with 16 registers).
    fn positions<T>(self) -> usize {
        let (vectors, bytes) = match self {
            Shape::C6V4 => (4, 64),
            Shape::C3V7 => (7, 64),
            Shape::C4V2 => (2, 32),
        };
        vectors * bytes / std::mem::size_of::<T>()
    }
}

/// Where the taps read: each image's channels zero-padded and split into their `sh x sw`
/// stride phases, `[c, sh, sw, hs, ws]` (phase `(a, b)` holds the padded rows `a, a + sh, ..`
/// and columns `b, b + sw, ..`). Tap `(ci, ki, kj)` of output `(oi, oj)` reads padded row
/// `oi*sh + ki`, which is row `oi + ki/sh` of phase `ki % sh` (columns alike): a fixed offset
/// per tap plus the *wide* position `q = oi*ws + oj`, as `conv_direct`'s stride-1 planes
/// (one phase). Wide positions with `oj >= ow` read across a row's end and are dropped.
struct Layout {
    stride: [usize; 2],
    padding: [usize; 2],
    /// Rows and columns of one phase plane.
    hs: usize,
    ws: usize,
    oh: usize,
    ow: usize,
    /// Wide positions computed: a multiple of the tile's positions covering `(oh-1)*ws + ow`.
    len: usize,
    /// Elements of one image's phases, then zeros for the last tile's overrun (the largest
    /// index read is below `c * sh * sw * hs * ws + tile`).
    image: usize,
}

impl Layout {
    fn new(g: &ConvGeom, tile: usize) -> Layout {
        let (oh, ow) = g.out_hw();
        let [sh, sw] = g.stride;
        let (hs, ws) = ((g.h + 2 * g.padding[0]).div_ceil(sh), (g.w + 2 * g.padding[1]).div_ceil(sw));
        let len = ((oh - 1) * ws + ow).div_ceil(tile) * tile;
        Layout { stride: g.stride, padding: g.padding, hs, ws, oh, ow, len, image: g.c * sh * sw * hs * ws + tile }
    }

    /// Elements of one channel's phases.
    fn channel(&self) -> usize {
        self.stride[0] * self.stride[1] * self.hs * self.ws
    }

    /// The flat offset of each tap `(ci, ki, kj)`, in the weight's order.
    fn taps(&self, g: &ConvGeom) -> Taps {
        let [sh, sw] = self.stride;
        let mut offsets = Vec::with_capacity(g.patch());
        for ci in 0..g.c {
            for ki in 0..g.kh {
                for kj in 0..g.kw {
                    let phase = ((ci * sh + ki % sh) * sw + kj % sw) * self.hs * self.ws;
                    offsets.push(phase + (ki / sh) * self.ws + kj / sw);
                }
            }
        }
        Taps::new(offsets)
    }

    /// Copies channel `x` (`[h, w]`) into its phases `xp` (zeros around).
    fn split_channel<T: Float>(&self, x: &[T], w: usize, xp: &mut [T]) {
        let ([sh, sw], [ph, pw], plane) = (self.stride, self.padding, self.hs * self.ws);
        xp.fill(T::zero());
        for (i, row) in x.chunks_exact(w).enumerate() {
            let (r, a) = ((i + ph) / sh, (i + ph) % sh);
            if sw == 1 {
                xp[a * plane + r * self.ws + pw..][..w].copy_from_slice(row);
                continue;
            }
            if sw == 2 {
                // Even input columns go to phase `pw % 2` from column `pw / 2`, odd ones to
                // the other phase from column `(pw + 1) / 2`.
                let (lo, hi) = ((a * 2) * plane + r * self.ws, (a * 2 + 1) * plane + r * self.ws);
                let (first, second) = xp.split_at_mut(hi);
                let (phase0, phase1) = (&mut first[lo..][..self.ws], &mut second[..self.ws]);
                let (even, odd) = if pw % 2 == 0 { (phase0, phase1) } else { (phase1, phase0) };
                deinterleave(row, &mut even[pw / 2..], &mut odd[pw.div_ceil(2)..]);
                continue;
            }
            for b in 0..sw {
                // Input columns j with (j + pw) % sw == b, from the first such j.
                let first = (b + sw - pw % sw) % sw;
                let dst = &mut xp[(a * sw + b) * plane + r * self.ws + (first + pw) / sw..];
                row.iter().skip(first).step_by(sw).zip(dst).for_each(|(&v, d)| *d = v);
            }
        }
    }
}

multiversion! {
    /// `even[k] = src[2k]`, `odd[k] = src[2k + 1]` for the values `src` has.
    fn deinterleave<T: Float>(src: &[T], even: &mut [T], odd: &mut [T]) = deinterleave_body;
}

#[inline(always)]
fn deinterleave_body<T: Float>(src: &[T], even: &mut [T], odd: &mut [T]) {
    let pairs = src.chunks_exact(2);
    if let [last] = pairs.remainder() {
        even[src.len() / 2] = *last;
    }
    for ((e, o), p) in even.iter_mut().zip(odd.iter_mut()).zip(pairs) {
        (*e, *o) = (p[0], p[1]);
    }
}

/// The convolution of `x` `[n, c, h, w]` with `w` `[o, c, kh, kw]` (+ `bias` `[o]`) into `out`
/// `[n, o, oh, ow]`, for geometries [`applies`] accepts. An image whose output holds a NaN is
/// redone by `fallback(i, out_i)` (see the module docs); then `after_image(i)` runs.
pub(super) fn conv2d_into<T: Float>(
    x: &[T],
    w: &[T],
    bias: Option<&[T]>,
    g: &ConvGeom,
    out: &mut [T],
    fallback: &(dyn Fn(usize, &mut [T]) + Sync),
    after_image: &(dyn Fn(usize) + Sync),
) {
    debug_assert!(computes(g));
    // The level is read once: it fixes the tile, and the tile the wide length.
    let shape = Shape::for_geom::<T>(g, level() == Level::Avx512);
    let tile_len = shape.positions::<T>();
    let wide = Layout::new(g, tile_len);
    let (padded, image, plane, patch) = (wide.image, g.c * g.h * g.w, g.out_plane(), g.patch());
    let taps = wide.taps(g);
    let block = shape.channels();
    let parallel = num_threads() > 1;
    with_slot(Slot::Call, g.n * padded, |xp: &mut [T]| {
        let split = |(p, x): (&mut [T], &[T])| wide.split_channel(x, g.w, p);
        for (p, x) in xp.chunks_mut(padded).zip(x.chunks(image)) {
            let (channels, tail) = p.split_at_mut(g.c * wide.channel());
            tail.fill(T::zero());
            if parallel {
                channels.par_chunks_mut(wide.channel()).zip(x.par_chunks(g.h * g.w)).for_each(split);
            } else {
                channels.chunks_mut(wide.channel()).zip(x.chunks(g.h * g.w)).for_each(split);
            }
        }
        let xp = &*xp;
        // Block `b` of image `i`'s output channels into `dst`.
        let task = |i: usize, b: usize, dst: &mut [T]| {
            let rows = b * block..b * block + dst.len() / plane;
            let (w, bias) = (&w[rows.start * patch..rows.end * patch], bias.map(|bs| &bs[rows]));
            channel_block(&xp[i * padded..][..padded], &taps, w, bias, &wide, shape, dst);
        };
        let image_done = |i: usize, img: &mut [T]| {
            if super::conv_direct::any_nan(img) {
                fallback(i, img);
            }
            after_image(i);
        };
        if parallel {
            out.par_chunks_mut(g.o * plane).enumerate().for_each(|(i, img)| {
                img.par_chunks_mut(block * plane).enumerate().for_each(|(b, dst)| task(i, b, dst));
                image_done(i, img);
            });
        } else {
            for (i, img) in out.chunks_mut(g.o * plane).enumerate() {
                img.chunks_mut(block * plane).enumerate().for_each(|(b, dst)| task(i, b, dst));
                image_done(i, img);
            }
        }
    });
}

multiversion! {
    /// One task: channels `w` (`[rows, patch]`) at every position of the padded image `xp`,
    /// into `dst` (`[rows, oh, ow]`), tile by tile.
    fn channel_block<T: Float>(xp: &[T], taps: &Taps, w: &[T], bias: Option<&[T]>, wide: &Layout, shape: Shape, dst: &mut [T]) = block_body;
}

#[inline(always)]
fn block_body<T: Float>(xp: &[T], taps: &Taps, w: &[T], bias: Option<&[T]>, wide: &Layout, shape: Shape, dst: &mut [T]) {
    let (patch, plane) = (taps.offsets.len(), wide.oh * wide.ow);
    let rows = dst.len() / plane;
    let tile_len = shape.positions::<T>();
    let mut sums = [T::zero(); 6 * 64]; // channels x positions of the largest tile (C6V4, f32)
    let sums = &mut sums[..shape.channels() * tile_len];
    debug_assert_eq!(w.len(), rows * patch);
    for q in (0..wide.len).step_by(tile_len) {
        match shape {
            #[cfg(target_arch = "x86_64")]
            Shape::C6V4 if std::mem::size_of::<T>() == 4 && level() == Level::Avx512 => {
                // SAFETY: the level says the CPU has AVX-512; T is f32 (the only 4-byte Float).
                unsafe { avx512::tile::<6, 4>(cast(xp), taps, cast(w), rows, q, cast_mut(sums)) }
            }
            #[cfg(target_arch = "x86_64")]
            Shape::C3V7 if std::mem::size_of::<T>() == 4 && level() == Level::Avx512 => {
                // SAFETY: as above.
                unsafe { avx512::tile::<3, 7>(cast(xp), taps, cast(w), rows, q, cast_mut(sums)) }
            }
            // f64, AVX2, or a level capped since the shape was picked: the portable tile.
            _ => portable_tile(xp, &taps.offsets, w, rows, q, tile_len, sums),
        }
        store(sums, tile_len, rows, q, wide, bias, dst);
    }
}

/// Writes the tile's valid positions (those inside the output: `oj < ow`, `oi < oh`) of its
/// first `rows` channels to `dst` `[rows, oh, ow]`, adding the bias.
#[inline(always)]
fn store<T: Float>(sums: &[T], len: usize, rows: usize, q: usize, wide: &Layout, bias: Option<&[T]>, dst: &mut [T]) {
    let plane = wide.oh * wide.ow;
    for r in 0..rows {
        let (src, out) = (&sums[r * len..][..len], &mut dst[r * plane..][..plane]);
        let b = bias.map(|b| b[r]);
        let mut p = q;
        while p < q + len && p / wide.ws < wide.oh {
            let (oi, oj) = (p / wide.ws, p % wide.ws);
            let end = (oi * wide.ws + wide.ow).min(q + len);
            if oj < wide.ow {
                let (to, from) = (&mut out[oi * wide.ow + oj..][..end - p], &src[p - q..end - q]);
                match b {
                    // A bias that is not NaN takes `add`'s bits without its select (see `Num`).
                    Some(b) if !b.is_nan_value() => to.iter_mut().zip(from).for_each(|(d, &v)| *d = v.add_plain(b)),
                    Some(b) => to.iter_mut().zip(from).for_each(|(d, &v)| *d = v.add(b)),
                    None => to.copy_from_slice(from),
                }
            }
            p = (oi + 1) * wide.ws;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::conv_direct::tests::{bits, naive, values};

    fn run(x: &[f32], w: &[f32], b: &[f32], g: &ConvGeom) -> Vec<f32> {
        let mut out = vec![f32::NAN; g.n * g.o * g.out_plane()];
        conv2d_into(x, w, Some(b), g, &mut out, &|_, _| panic!("no NaN here"), &|_| {});
        out
    }

    /// Both AVX-512 tiles (7x7 and 14x14 planes, with a last block of fewer channels) and the
    /// AVX2 one give the definition's bits, on one thread and on the pool, at batch 1 and 2,
    /// for stride 1 and through stride phases.
    #[test]
    fn matches_the_definition_bit_for_bit_at_every_level_and_thread_count() {
        let geoms = [
            ConvGeom { n: 2, c: 60, h: 7, w: 7, o: 13, kh: 3, kw: 3, stride: [1, 1], padding: [1, 1] },
            ConvGeom { n: 1, c: 64, h: 14, w: 14, o: 8, kh: 3, kw: 3, stride: [1, 1], padding: [1, 1] },
            ConvGeom { n: 1, c: 58, h: 9, w: 12, o: 7, kh: 3, kw: 3, stride: [1, 1], padding: [1, 1] },
            // Stride phases: ResNet's stride-2 layers and stem, odd sizes, mixed strides, 3.
            ConvGeom { n: 1, c: 20, h: 14, w: 13, o: 7, kh: 3, kw: 3, stride: [2, 2], padding: [1, 1] },
            ConvGeom { n: 2, c: 3, h: 23, w: 20, o: 8, kh: 7, kw: 7, stride: [2, 2], padding: [3, 3] },
            ConvGeom { n: 1, c: 5, h: 11, w: 9, o: 5, kh: 3, kw: 4, stride: [2, 1], padding: [0, 2] },
            ConvGeom { n: 1, c: 4, h: 13, w: 14, o: 3, kh: 3, kw: 3, stride: [3, 3], padding: [1, 2] },
            ConvGeom { n: 1, c: 6, h: 9, w: 11, o: 4, kh: 3, kw: 3, stride: [2, 2], padding: [0, 2] },
        ];
        let _only_this_test_caps_the_level = crate::kernels::simd::LEVEL_CAPS.lock().unwrap_or_else(|e| e.into_inner());
        for g in geoms {
            assert!(computes(&g), "{g:?}");
            let (x, w, b) = (values(g.n * g.c * g.h * g.w, 1), values(g.o * g.patch(), 2), values(g.o, 3));
            let want = bits(&naive(&x, &w, &b, &g));
            for cap in [Level::Avx2, Level::Avx512] {
                crate::kernels::simd::set_max_level(cap);
                let pooled = run(&x, &w, &b, &g);
                let alone = crate::kernels::parallel::on_one_thread(|| run(&x, &w, &b, &g));
                crate::kernels::simd::set_max_level(Level::Avx512);
                assert_eq!(bits(&pooled), want, "{g:?} at {cap:?}");
                assert_eq!(bits(&alone), want, "{g:?} at {cap:?}, one thread");
            }
        }
    }

    /// f64 (the generic tile at every level, in sub-tiles of one vector) gives the
    /// definition's bits too.
    #[test]
    fn f64_matches_the_definition_bit_for_bit_at_every_level() {
        let geoms = [
            ConvGeom { n: 1, c: 60, h: 7, w: 7, o: 8, kh: 3, kw: 3, stride: [1, 1], padding: [1, 1] },
            ConvGeom { n: 2, c: 3, h: 17, w: 16, o: 7, kh: 7, kw: 7, stride: [2, 2], padding: [3, 3] },
        ];
        let _only_this_test_caps_the_level = crate::kernels::simd::LEVEL_CAPS.lock().unwrap_or_else(|e| e.into_inner());
        for g in geoms {
            let f64s = |v: Vec<f32>| v.into_iter().map(f64::from).collect::<Vec<_>>();
            let (x, w, b) = (f64s(values(g.n * g.c * g.h * g.w, 1)), f64s(values(g.o * g.patch(), 2)), f64s(values(g.o, 3)));
            let want: Vec<u64> = naive(&x, &w, &b, &g).iter().map(|v| v.to_bits()).collect();
            for cap in [Level::Avx2, Level::Avx512] {
                crate::kernels::simd::set_max_level(cap);
                let mut out = vec![f64::NAN; want.len()];
                conv2d_into(&x, &w, Some(&b), &g, &mut out, &|_, _| panic!("no NaN here"), &|_| {});
                crate::kernels::simd::set_max_level(Level::Avx512);
                assert_eq!(out.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), want, "{g:?} at {cap:?}");
            }
        }
    }

    /// A NaN input sends its image to the fallback (the im2col path in `conv`), after the
    /// direct pass; the other images keep theirs.
    #[test]
    fn an_image_with_a_nan_output_is_redone_by_the_fallback() {
        let g = ConvGeom { n: 2, c: 60, h: 7, w: 7, o: 4, kh: 3, kw: 3, stride: [1, 1], padding: [1, 1] };
        let mut x = values(g.n * g.c * 49, 1);
        let (w, b) = (values(g.o * g.patch(), 2), values(g.o, 3));
        x[g.c * 49 + 5] = f32::NAN; // in image 1
        let mut out = vec![0.0; g.n * g.o * 49];
        let redone = std::sync::Mutex::new(Vec::new());
        conv2d_into(
            &x,
            &w,
            Some(&b),
            &g,
            &mut out,
            &|i, o| {
                redone.lock().unwrap().push(i);
                o.fill(7.0);
            },
            &|_| {},
        );
        assert_eq!(redone.into_inner().unwrap(), vec![1]);
        assert!(out[g.o * 49..].iter().all(|&v| v == 7.0));
        assert_eq!(bits(&out[..g.o * 49]), bits(&naive(&x, &w, &b, &g)[..g.o * 49]));
    }

    #[test]
    fn takes_resnets_layers_where_they_measured_faster_only() {
        let g = ConvGeom { n: 1, c: 512, h: 7, w: 7, o: 512, kh: 3, kw: 3, stride: [1, 1], padding: [1, 1] };
        assert!(fits(&g) && fits(&ConvGeom { n: 3, ..g }), "7x7 up to batch 3");
        assert!(!fits(&ConvGeom { n: 4, ..g }), "16 tiles at batch 4: Winograd's");
        assert!(fits(&ConvGeom { c: 256, h: 14, w: 14, ..g }) && !fits(&ConvGeom { n: 2, c: 256, h: 14, w: 14, ..g }), "14x14 at batch 1 only");
        assert!(!fits(&ConvGeom { c: 56, ..g }), "504 taps: conv_direct's");
        assert!(!fits(&ConvGeom { h: 28, w: 28, ..g }), "28x28: Winograd's");
        assert!(!fits(&ConvGeom { kh: 5, kw: 5, padding: [2, 2], ..g }), "5x5");
        let s2 = |n, c, hw| ConvGeom { n, c, h: hw, w: hw, o: 2 * c, stride: [2, 2], ..g };
        assert!(fits(&s2(8, 256, 14)) && fits(&s2(1, 256, 14)), "stride 2 to 7x7");
        assert!(!fits(&s2(1, 128, 28)) && !fits(&s2(1, 64, 56)), "stride 2 to 14x14, to 28x28");
        let stem = ConvGeom { n: 1, c: 3, h: 224, w: 224, o: 64, kh: 7, kw: 7, stride: [2, 2], padding: [3, 3] };
        assert!(fits(&stem) && !fits(&ConvGeom { n: 8, ..stem }) && !fits(&ConvGeom { c: 8, ..stem }), "the stem at batch 1");
        assert_eq!(Shape::for_geom::<f32>(&g, true), Shape::C6V4);
        assert_eq!(Shape::for_geom::<f32>(&ConvGeom { h: 14, w: 14, ..g }, true), Shape::C3V7);
        assert_eq!(Shape::for_geom::<f32>(&g, false), Shape::C4V2);
    }

    /// Times ResNet-18's layers this kernel could take, by it and by the path each took before
    /// (Winograd, im2col by rows or by images), interleaved, the best of 15 rounds each (`1t`:
    /// on one thread); release build: `SIZES=1,8 cargo test --release -p tensor-core --lib
    /// conv_direct_large::tests::timing -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn timing() {
        use crate::kernels::conv::conv2d_into as conv;
        use crate::kernels::parallel::on_one_thread;
        use crate::storage::Array;
        use ndarray::IxDyn;
        let sizes = std::env::var("SIZES").unwrap_or("1,8".into());
        let layer = |n, c, hw, o, k, s| ConvGeom { n, c, h: hw, w: hw, o, kh: k, kw: k, stride: [s, s], padding: [k / 2, k / 2] };
        for n in sizes.split(',').map(|s| s.parse::<usize>().unwrap()) {
            let layers = [
                layer(n, 64, 56, 64, 3, 1),
                layer(n, 128, 28, 128, 3, 1),
                layer(n, 256, 14, 256, 3, 1),
                layer(n, 512, 7, 512, 3, 1),
                layer(n, 64, 56, 128, 3, 2),
                layer(n, 128, 28, 256, 3, 2),
                layer(n, 256, 14, 512, 3, 2),
                layer(n, 3, 224, 64, 7, 2),
            ];
            for g in layers {
                let xa = Array::from_shape_vec(IxDyn(&[n, g.c, g.h, g.w]), values(n * g.c * g.h * g.w, 1)).unwrap();
                let wa = Array::from_shape_vec(IxDyn(&[g.o, g.c, g.kh, g.kw]), values(g.o * g.patch(), 2)).unwrap();
                let (xs, ws) = (xa.as_slice().unwrap(), wa.as_slice().unwrap());
                let mut out = vec![0.0f32; n * g.o * g.out_plane()];
                let before = |o: &mut [f32]| {
                    OFF.with(|off| off.set(true));
                    conv(&xa, &wa, None, &g, o, None, &|_, _| {});
                    OFF.with(|off| off.set(false));
                };
                type Path<'a> = (&'static str, Box<dyn FnMut(&mut [f32]) + 'a>);
                let mut paths: [Path; 3] = [
                    ("direct", Box::new(|o| conv2d_into(xs, ws, None, &g, o, &|_, _| {}, &|_| {}))),
                    ("direct 1t", Box::new(|o| on_one_thread(|| conv2d_into(xs, ws, None, &g, o, &|_, _| {}, &|_| {})))),
                    ("before", Box::new(before)),
                ];
                let mut best = [f64::MAX; 3];
                for round in 0..16 {
                    for (b, (_, f)) in best.iter_mut().zip(paths.iter_mut()) {
                        let t = std::time::Instant::now();
                        f(&mut out);
                        if round > 0 {
                            *b = b.min(t.elapsed().as_secs_f64() * 1e3);
                        }
                    }
                }
                let gflop = 2.0 * (n * g.o * g.patch() * g.out_plane()) as f64 / 1e6;
                let line: Vec<String> =
                    paths.iter().zip(&best).map(|((name, _), t)| format!("{name} {t:.3} ms ({:.0} GFLOP/s)", gflop / t)).collect();
                // `applies`, not `fits`: on a CPU without AVX-512 no layer is taken.
                let fits = if applies(&g) { "taken" } else { "not taken" };
                println!("n {n} {} -> {} {}x{} /{} ({fits}): {}", g.c, g.o, g.h, g.w, g.stride[0], line.join(", "));
            }
        }
    }
}
