//! `conv_direct_large`'s convolution for CPUs with AVX2 and without AVX-512, with the roles
//! of the operands swapped: a vector holds 8 *output channels* of one position, not 8
//! positions of one channel.
//!
//! With 16 registers, `conv_direct_large`'s tile (a broadcast weight times a run of
//! positions) keeps 8 accumulators and loads 6 registers per 8 fused multiply-adds; it ran at
//! 44-60% of the FMA peak. Here the input is copied once per call into blocks of 8 channels,
//! `[c / 8, sh, sw, hs, ws, 8]` (zero-padded and split into its stride phases, as
//! `conv_direct_large`'s), and the weights into panels of 16 output channels, `[o / 16,
//! c * kh * kw, 16]`. A register tile is 16 output channels (two vectors) by 6 positions:
//! per tap, two weight vectors and six broadcast inputs feed twelve accumulators, the shape
//! of a GEMM's microkernel, with no im2col and no packing of the image beyond the one copy.
//!
//! Where the CPU has AVX-512 (at half rate: the tile level is AVX2 here), the tiles are wider:
//! one 16-lane vector of output channels by up to 25 positions, each input an operand of its
//! fused multiply-add (`wide_tiles`), the same chains. A pointwise layer's wide tiles read the
//! image where it lies, with no copy into blocks: their positions are consecutive there too.
//!
//! **The bits are `conv_direct_large`'s**: each output is one chain of fused multiply-adds
//! over the taps in `(ci, ki, kj)` order from zero, then the bias added. So the routing may
//! send a layer here or there (by the CPU, never by the cap of `simd::set_max_level`) and the
//! output stays the same; under a cap below AVX2 the caller runs `conv_direct_large`'s
//! portable tile instead. The kernel needs filters in multiples of 16 (ResNet's all are) and
//! f32. An image of fewer than 8 channels (a stem's 3) makes blocks of that many; a last
//! block short of 8 keeps zeros in its missing lanes, which no tap reads.
#![cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]

use super::conv::ConvGeom;
use super::parallel::num_threads;
use super::scratch::{with_slot, Slot};
use super::simd::{level, machine_level, machine_tile_level, tile_level, Level};
use super::weight_cache::{self, Form};
use crate::math::{Float, Num};
use crate::storage::Array;
use rayon::prelude::*;
use std::sync::atomic::{AtomicBool, Ordering};

/// Output channels of one panel of packed weights and of one register tile.
const PANEL: usize = 16;
/// Input channels of one block (fewer when the image has fewer).
const LANES: usize = 8;
/// Values of an image's blocks from which threads share copying them.
const PARALLEL_FILL: usize = 16 * 1024;
/// Positions of a full register tile.
const TILE: usize = 6;
/// Taps per block of the chains: 16 KB of a panel's weights, a multiple of nine.
const K_BLOCK: usize = 252;
/// Positions of a full wide tile ([`wide_tiles`]): 25 accumulators of AVX-512's 32 registers.
const WIDE: usize = 25;

/// True when the kernel can compute `g` (f32 is the caller's to check).
pub(super) fn computes(g: &ConvGeom) -> bool {
    g.o.is_multiple_of(PANEL) && g.c > 0 && g.o > 0 && g.out_plane() >= 1
}

/// The layers `conv_direct_large` takes on CPUs with AVX2 and without AVX-512, where this
/// kernel measured faster than the path they took before (`tests::timing`, one thread;
/// docs/PERFORMANCE.md): ResNet's 3x3 layers with patches longer than `conv_direct`'s,
/// - at stride 1 on 7x7 planes at batch 1 (im2col before: 1.18-1.21x; 14x14 was level with
///   Winograd, which keeps it);
/// - at stride 2 to outputs of up to 28x28 at batch 1 (im2col by images or by row blocks
///   before: 1.04-1.72x, by layer and run);
/// - its 7x7 stride-2 stem of up to 4 channels at batch 1 (im2col by row blocks before:
///   1.08-1.44x; MobileNetV2's 3x3 stem, 27 taps, measured 0.6-1.6x, and is left to im2col).
///
/// Not taken: ResNet's 1x1 stride-2 projections (0.56-1.02x im2col). MobileNetV2's pointwise
/// layers come through [`takes_pointwise`] instead (with AVX2's tiles against `pointwise`'s
/// gemm: 1.05-1.15x alone on 7x7 planes, level in the model, where their weights come from
/// memory; 0.77-0.96x on 14x14 and 28x28 planes).
pub(super) fn fits(g: &ConvGeom) -> bool {
    let plane = g.out_plane();
    let k3 = |s: usize| g.kh == 3 && g.kw == 3 && g.stride == [s, s] && g.padding == [1, 1] && g.patch() > 512;
    computes(g) && g.n == 1 && ((k3(1) && plane <= 49) || (k3(2) && plane <= 784) || is_stem(g))
}

/// A 7x7 stride-2 stem of up to 4 channels (ResNet's).
fn is_stem(g: &ConvGeom) -> bool {
    g.kh == 7 && g.kw == 7 && g.stride == [2, 2] && g.padding == [3, 3] && g.c <= 4
}

/// [`conv2d_into`] where it runs: f32, a geometry it computes, and the tile level AVX2
/// (`simd::tile_level`: not full-rate AVX-512, whose `conv_direct_large` tiles are faster; not
/// below, which has no AVX2). A stem on a CPU with AVX-512 at half rate stays with
/// `conv_direct_large`'s 16-lane tiles, the same bits: on AMD's Zen 4 they measured 1.19x
/// faster on ResNet-18's (docs/PERFORMANCE.md). Returns whether it ran; otherwise nothing was
/// written.
pub(super) fn try_conv2d_into<T: Float>(
    x: &[T],
    w: &Array<T>,
    bias: Option<&[T]>,
    g: &ConvGeom,
    out: &mut [T],
    fallback: &(dyn Fn(usize, &mut [T]) + Sync),
    after_image: &(dyn Fn(usize) + Sync),
) -> bool {
    #[cfg(target_arch = "x86_64")]
    if let Some(w) = (w as &dyn std::any::Any).downcast_ref::<Array<f32>>()
        && tile_level() == Level::Avx2
        && computes(g)
        && !(level() == Level::Avx512 && is_stem(g))
    {
        use super::fma_tile::{cast, cast_mut};
        // SAFETY: T is f32 (its array downcast); the casts keep the slices' lengths.
        let (x, bias, out) = unsafe { (cast(x), bias.map(|b| cast(b)), cast_mut(out)) };
        // SAFETY: as above, back to T for the caller's fallback.
        let fallback = |i: usize, o: &mut [f32]| fallback(i, unsafe { std::slice::from_raw_parts_mut(o.as_mut_ptr() as *mut T, o.len()) });
        conv2d_into(x, w, bias, g, out, Finish::Images { fallback: &fallback, after_image });
        return true;
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (x, w, bias, g, out, fallback, after_image);
    false
}

/// Pointwise layers this kernel takes on planes of at most this many positions: MobileNetV2's
/// 7x7 ones, where gemm's vectors of 16 positions leave lanes idle (49 = 3 x 16 + 1) and this
/// kernel's tiles of 6 and 5 positions do not. On 14x14 and 28x28 planes gemm measured faster
/// (`tests::timing`; docs/PERFORMANCE.md, twenty-first session).
const POINTWISE_PLANE: usize = 49;

/// Projections (at least twice as many channels as filters) this kernel takes on planes of at
/// most this many positions where the CPU has AVX-512 (at half rate): MobileNetV2's 14x14
/// ones, which its wide tiles read in place (576 -> 96 twice at one thread 0.455 -> 0.418 ms
/// in the model against gemm; its 28x28 ones ran slower, 0.193 -> 0.216 for 192 -> 32 twice).
const PROJECTION_PLANE: usize = 196;

/// Whether [`try_pointwise`] takes the pointwise layer `g` (1x1, stride 1, no padding): filters
/// in multiples of 16 on a plane of at most [`POINTWISE_PLANE`] positions (or a projection on
/// one of at most [`PROJECTION_PLANE`] where the CPU has AVX-512), at batch 1, on a CPU whose
/// tile level is AVX2 (`simd::machine_tile_level`). The CPU's levels, not the cap of
/// `simd::set_max_level`: under a cap the layer keeps this kernel's bits through AVX2's tiles
/// or `conv_direct_large`'s portable one.
pub(super) fn takes_pointwise(g: &ConvGeom) -> bool {
    let plane = g.out_plane();
    let projection = machine_level() == Level::Avx512 && g.c >= 2 * g.o && plane <= PROJECTION_PLANE;
    machine_tile_level() == Level::Avx2 && computes(g) && super::pointwise::applies(g) && g.n == 1 && (plane <= POINTWISE_PLANE || projection)
}

/// The pointwise layer `g` by this kernel, when [`takes_pointwise`] and `x`, `w` and `bias` are
/// f32 and finite; returns whether it ran (otherwise nothing was written). `after(start, len)`
/// runs on each panel of 16 output channels once it is final, on the thread that made it.
///
/// Its bits are `conv_direct_large`'s (one chain of fused multiply-adds over the channels from
/// zero, then the bias), not gemm's, wherever the layer runs, eagerly or in a graph, at any
/// cap. Finite operands are required so that no redo is ever needed: a NaN output then can
/// only be the default NaN (an infinity times zero, or infinities of both signs meeting), the
/// same from every kernel, while a NaN operand's payload would come out of the fused
/// multiply-adds in an order that depends on the instruction. Non-finite operands keep the
/// path they took before (`pointwise`'s gemm).
pub(super) fn try_pointwise<T: Float>(
    x: &[T],
    w: &Array<T>,
    bias: Option<&[T]>,
    g: &ConvGeom,
    out: &mut [T],
    after: &(dyn Fn(usize, usize) + Sync),
) -> bool {
    #[cfg(test)]
    if super::conv_direct_large::OFF.with(|off| off.get()) {
        return false;
    }
    #[cfg(target_arch = "x86_64")]
    if let Some(w) = (w as &dyn std::any::Any).downcast_ref::<Array<f32>>()
        && takes_pointwise(g)
    {
        use super::fma_tile::{cast, cast_mut};
        // SAFETY: T is f32 (its array downcast); the casts keep the slices' lengths.
        let (x, bias, out) = unsafe { (cast(x), bias.map(|b| cast(b)), cast_mut(out)) };
        let Some(weights) = w.as_slice() else { return false };
        let finite = super::winograd::all_finite::<f32>;
        // Only finite weights of a 1x1 layer are ever cached as panels (below), so a hit needs
        // no look at them; a miss looks (packing reads them all anyway).
        let cached = weight_cache::hit(w, g.o, g.c, Form::Panels);
        let image_finite = super::winograd::all_finite_in_parallel(x);
        if !image_finite || !bias.is_none_or(finite) || (cached.is_none() && !finite(weights)) {
            return false;
        }
        match cached {
            _ if level() < Level::Avx2 => {
                let per_image = g.o * g.out_plane();
                let no_redo = |_: usize, _: &mut [f32]| {};
                super::conv_direct_large::conv2d_into(x, weights, bias, g, out, &no_redo, &|i| after(i * per_image, per_image));
            }
            Some(panels) => conv_packed(x, &panels, bias, g, out, Finish::Panels(after)),
            None => conv2d_into(x, w, bias, g, out, Finish::Panels(after)),
        }
        return true;
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (x, w, bias, g, out, after);
    false
}

/// The convolution of `x` `[n, c, h, w]` with `w` `[o, c, kh, kw]` (+ `bias` `[o]`) into `out`
/// `[n, o, oh, ow]`, for geometries [`computes`] accepts, with `conv_direct_large`'s bits. The
/// panels come from the weight cache when `w` (its buffer, unchanged) was seen before. What
/// follows each part of the output is `finish`'s.
///
/// # Panics
/// On a CPU without AVX2 and FMA (the caller checks the level).
#[cfg(target_arch = "x86_64")]
pub(super) fn conv2d_into(x: &[f32], w: &Array<f32>, bias: Option<&[f32]>, g: &ConvGeom, out: &mut [f32], finish: Finish) {
    assert!(computes(g) && level() >= Level::Avx2, "conv_blocked: a geometry it computes, on AVX2");
    let weights = w.as_slice().expect("standard layout");
    let form = (Form::Panels, weights.len());
    match weight_cache::cached(w, g.o, g.c, form, |w, p| pack_weights_into(w, g, p)) {
        Some(panels) => conv_packed(x, &panels, bias, g, out, finish),
        // In the calling thread's packing buffer, kept between calls: a fresh one would fault
        // in its pages (ResNet's 512-channel weights are 9.4 MB) on every training step.
        None => with_slot(Slot::Pack, weights.len(), |wp: &mut [f32]| {
            pack_weights_into(weights, g, wp);
            conv_packed(x, wp, bias, g, out, finish)
        }),
    }
}

/// What follows the convolution of each part of the output.
#[derive(Clone, Copy)]
pub(super) enum Finish<'a> {
    /// An image whose output holds a NaN is redone by `fallback(i, out_i)` (which of several
    /// NaNs a fused multiply-add returns depends on the instruction, and the caller's other
    /// path has the same bits otherwise); then `after_image(i)` runs.
    Images { fallback: &'a (dyn Fn(usize, &mut [f32]) + Sync), after_image: &'a (dyn Fn(usize) + Sync) },
    /// `after(start, len)` runs on each panel's outputs (`out[start..start + len]`) on the
    /// thread that made them, while they are in its cache. Nothing is redone: the layer has
    /// this kernel's bits, NaNs included, wherever it runs.
    Panels(&'a (dyn Fn(usize, usize) + Sync)),
}

/// [`conv2d_into`] with the weights packed, `wp`.
#[cfg(target_arch = "x86_64")]
fn conv_packed(x: &[f32], wp: &[f32], bias: Option<&[f32]>, g: &ConvGeom, out: &mut [f32], finish: Finish) {
    let plan = Plan::new(g);
    let (image, plane, patch) = (g.c * g.h * g.w, g.out_plane(), g.patch());
    let parallel = num_threads() > 1;
    let blocks = if plan.in_place { 0 } else { plan.geom.image() };
    with_slot(Slot::Call, blocks, |xb: &mut [f32]| {
        for (i, img) in out.chunks_mut(g.o * plane).enumerate() {
            let x = &x[i * image..][..image];
            let xb = match plan.in_place {
                true => x,
                false => {
                    plan.geom.fill(g, x, xb);
                    &*xb
                }
            };
            // Each task looks for a NaN in its own panel while it is in that core's cache
            // (after the whole image, the look ran on one thread: a stem's output is 3 MB).
            let nan = AtomicBool::new(false);
            let task = |(p, dst): (usize, &mut [f32])| {
                let bias = bias.map(|b| &b[p * PANEL..][..PANEL]);
                panel(xb, &plan, &wp[p * PANEL * patch..], bias, dst);
                match finish {
                    Finish::Images { .. } if super::conv_direct::any_nan(dst) => nan.store(true, Ordering::Relaxed),
                    Finish::Images { .. } => {}
                    Finish::Panels(after) => after((i * g.o + p * PANEL) * plane, dst.len()),
                }
            };
            if parallel {
                img.par_chunks_mut(PANEL * plane).enumerate().for_each(task);
            } else {
                img.chunks_mut(PANEL * plane).enumerate().for_each(task);
            }
            if let Finish::Images { fallback, after_image } = finish {
                if nan.into_inner() {
                    fallback(i, img);
                }
                after_image(i);
            }
        }
    });
}

/// Where the taps read: one image's channels in blocks of 8, each block zero-padded and split
/// into its `sh x sw` stride phases, `[c / 8, sh, sw, hs, ws, 8]`. Tap `(ci, ki, kj)` of output
/// `(oi, oj)` reads padded row `oi * sh + ki`, which is row `oi + ki / sh` of phase `ki % sh`
/// (columns alike): a fixed offset per tap plus a base per output position.
pub(super) struct Blocked {
    /// Channels of one block: 8, or the image's channels when fewer (a stem's 3).
    lanes: usize,
    /// Blocks of one image (the last one's lanes past the channels are zero, never read).
    blocks: usize,
    stride: [usize; 2],
    padding: [usize; 2],
    hs: usize,
    ws: usize,
    oh: usize,
    ow: usize,
    /// Elements of one block of 8 channels' phases.
    block: usize,
}

impl Blocked {
    pub(super) fn new(g: &ConvGeom) -> Blocked {
        let (oh, ow) = g.out_hw();
        let [sh, sw] = g.stride;
        let (hs, ws) = ((g.h + 2 * g.padding[0]).div_ceil(sh), (g.w + 2 * g.padding[1]).div_ceil(sw));
        let lanes = g.c.min(LANES);
        Blocked { lanes, blocks: g.c.div_ceil(lanes), stride: g.stride, padding: g.padding, hs, ws, oh, ow, block: sh * sw * hs * ws * lanes }
    }

    /// Elements of one image's blocks.
    pub(super) fn image(&self) -> usize {
        self.blocks * self.block
    }

    /// The offset of each tap `(ci, ki, kj)` from an output position's base, in the weight's
    /// order.
    fn offsets(&self, g: &ConvGeom) -> Vec<u32> {
        let [sh, sw] = self.stride;
        let plane = self.hs * self.ws;
        let mut offsets = Vec::with_capacity(g.patch());
        for ci in 0..g.c {
            for ki in 0..g.kh {
                for kj in 0..g.kw {
                    let phase = (ki % sh) * sw + kj % sw;
                    let at = ci / self.lanes * self.block + (phase * plane + (ki / sh) * self.ws + kj / sw) * self.lanes + ci % self.lanes;
                    offsets.push(u32::try_from(at).expect("an image's blocks index in u32"));
                }
            }
        }
        offsets
    }

    /// The base of output position `p` (row-major over `[oh, ow]`): its place in phase
    /// `(0, 0)`.
    fn base(&self, p: usize) -> usize {
        (p / self.ow * self.ws + p % self.ow) * self.lanes
    }

    /// Copies image `x` (`[c, h, w]`) into its blocks `xb` (zeros around).
    pub(super) fn fill<T: Float>(&self, g: &ConvGeom, x: &[T], xb: &mut [T]) {
        let ([sh, sw], [ph, pw], plane, lanes) = (self.stride, self.padding, self.hs * self.ws, self.lanes);
        // Where each input row and column goes in a block, in units of a block's lanes.
        let rows: Vec<usize> = (0..g.h).map(|i| ((i + ph) % sh * sw * plane + (i + ph) / sh * self.ws) * lanes).collect();
        let cols: Vec<usize> = (0..g.w).map(|j| ((j + pw) % sw * plane + (j + pw) / sw) * lanes).collect();
        let channel = g.h * g.w;
        // With no padding at stride 1 a block is its 8 channels' planes transposed, `[8, h *
        // w]` to `[h * w, 8]`, every element written: by 8 x 8 register transposes, not a
        // zero fill and a scalar copy (a pointwise layer's 960 channels of 7x7 took ~20 us).
        let whole = [sh, sw, ph, pw] == [1, 1, 0, 0] && plane == channel;
        let fill = |(b, block): (usize, &mut [T])| {
            let x = &x[b * lanes * channel..];
            let live = lanes.min(g.c - b * lanes);
            if whole && live == LANES {
                // SAFETY: T is a float, for which every bit pattern is a value, so an
                // initialized slice may be written as `MaybeUninit`.
                let dst = unsafe { std::slice::from_raw_parts_mut(block.as_mut_ptr().cast::<std::mem::MaybeUninit<T>>(), block.len()) };
                return super::transpose::transpose_band(&x[..(LANES - 1) * channel + channel], LANES, channel, channel, dst);
            }
            block.fill(T::zero());
            match live {
                LANES => fill_block::<T, LANES>(x, channel, g.w, &rows, &cols, block),
                n => (0..n).for_each(|lane| fill_lane(&x[lane * channel..][..channel], g.w, &rows, &cols, &mut block[lane..])),
            }
        };
        // Shared by the threads where it is large enough to pay for the hand-off: at batch 1
        // the copy otherwise runs on one thread while the others wait for the panels (960
        // channels of 7x7, a pointwise layer's 47,000 values, took as long as a panel).
        if num_threads() > 1 && xb.len() >= PARALLEL_FILL {
            xb.par_chunks_exact_mut(self.block).enumerate().for_each(fill);
        } else {
            xb.chunks_exact_mut(self.block).enumerate().for_each(fill);
        }
    }
}

/// A block of `L` channels from `x` (channels `channel` apart, rows `w` long): input `(i, j)`
/// of each to `dst[rows[i] + cols[j]..][..L]`.
#[inline]
fn fill_block<T: Float, const L: usize>(x: &[T], channel: usize, w: usize, rows: &[usize], cols: &[usize], dst: &mut [T]) {
    for (i, &row) in rows.iter().enumerate() {
        let dst = &mut dst[row..];
        for (j, &col) in cols.iter().enumerate() {
            let d: &mut [T; L] = (&mut dst[col..col + L]).try_into().expect("L lanes");
            for (lane, d) in d.iter_mut().enumerate() {
                *d = x[lane * channel + i * w + j];
            }
        }
    }
}

/// One channel `x` (rows `w` long) into `dst`: input `(i, j)` to `dst[rows[i] + cols[j]]`.
fn fill_lane<T: Float>(x: &[T], w: usize, rows: &[usize], cols: &[usize], dst: &mut [T]) {
    for (row, &at) in x.chunks_exact(w).zip(rows) {
        for (&v, &col) in row.iter().zip(cols) {
            dst[at + col] = v;
        }
    }
}

/// The weights `w` (`[o, c, kh, kw]`) as panels of 16 output channels, `[o / 16, patch, 16]`.
#[cfg(test)]
fn pack_weights(w: &[f32], g: &ConvGeom) -> Vec<f32> {
    let mut packed = vec![0.0; w.len()];
    pack_weights_into(w, g, &mut packed);
    packed
}

/// The weights `w` (`[o, c, kh, kw]`) as panels of 16 output channels, `[o / 16, patch, 16]`,
/// into `packed`: each panel, a `[16, patch]` matrix of `w`, transposed.
fn pack_weights_into(w: &[f32], g: &ConvGeom, packed: &mut [f32]) {
    let patch = g.patch();
    for (src, dst) in w.chunks_exact(PANEL * patch).zip(packed.chunks_exact_mut(PANEL * patch)) {
        // SAFETY: f32 has no invalid values, so an initialized slice may be written as
        // `MaybeUninit`; every element is written.
        let dst = unsafe { std::slice::from_raw_parts_mut(dst.as_mut_ptr().cast::<std::mem::MaybeUninit<f32>>(), dst.len()) };
        super::transpose::transpose_band(src, PANEL, patch, patch, dst);
    }
}

/// What every panel of one call reads the same way, made once per call: the blocks' layout,
/// the taps' offsets, the register tiles and their groups.
struct Plan {
    geom: Blocked,
    offsets: Vec<u32>,
    /// `(first position, count)`, in order.
    tiles: Vec<(usize, usize)>,
    /// Ranges of `tiles` whose positions' sums stay in the L1 cache together: at most
    /// [`GROUP_POSITIONS`].
    groups: Vec<std::ops::Range<usize>>,
    /// Whether the tiles are [`wide_tiles`], run on AVX-512's registers.
    wide: bool,
    /// Whether the taps read the image where it lies (`[c, plane]`, a pointwise layer's, on
    /// wide tiles: channel `k` at offset `k * plane`, position `p` at `p`), not its blocks.
    /// The copy into blocks cost more than the reads it saves: MobileNetV2's 7x7 layers took
    /// 0.89 -> 0.82 ms in all at two threads in place (its threads shared the copy, each then
    /// reading the other's half), 1.58 -> 1.55 at one.
    in_place: bool,
}

impl Plan {
    fn new(g: &ConvGeom) -> Plan {
        let geom = Blocked::new(g);
        let wide = level() == Level::Avx512 && geom.lanes == LANES;
        let in_place = wide && super::pointwise::applies(g);
        let offsets = if in_place {
            // Channel k's plane; the last position plus the last offset is the image's last value.
            (0..g.c).map(|k| u32::try_from(k * g.out_plane()).expect("an image indexes in u32")).collect()
        } else {
            let offsets = geom.offsets(g);
            let reach = offsets.iter().copied().max().unwrap_or(0) as usize;
            // The last position's base plus the largest offset is in an image's blocks, so every
            // tile's reads are (`panel` relies on it).
            assert!(geom.base(g.out_plane() - 1) + reach < geom.image(), "the taps stay in the image's blocks");
            offsets
        };
        let tiles = if wide { wide_tiles(&geom) } else { tiles(g.out_plane()) };
        Plan { groups: groups(&tiles), tiles, offsets, geom, wide, in_place }
    }

    /// Where position `p`'s taps start in what they read.
    fn base(&self, p: usize) -> usize {
        if self.in_place {
            p
        } else {
            self.geom.base(p)
        }
    }
}

/// Positions of one group of tiles: their sums (`[120, 16]`, 7.5 KB) stay in the L1 cache
/// while a block of taps goes through them.
const GROUP_POSITIONS: usize = 120;

/// `tiles` cut into runs of at most [`GROUP_POSITIONS`] positions.
fn groups(tiles: &[(usize, usize)]) -> Vec<std::ops::Range<usize>> {
    let mut groups = Vec::new();
    let (mut start, mut positions) = (0, 0);
    for (t, &(_, n)) in tiles.iter().enumerate() {
        if positions + n > GROUP_POSITIONS {
            groups.push(start..t);
            (start, positions) = (t, 0);
        }
        positions += n;
    }
    groups.push(start..tiles.len());
    groups
}

/// Output channels `panel * 16..` of one image at every position: `xb` the image's blocks,
/// `packed` the packed weights from the panel's (`[patch, 16]`, then the later panels'), into
/// `dst` (`[16, oh, ow]`, the image's output from the panel's first channel), the bias added.
#[cfg(target_arch = "x86_64")]
fn panel(xb: &[f32], plan: &Plan, packed: &[f32], bias: Option<&[f32]>, dst: &mut [f32]) {
    let (geom, offsets) = (&plan.geom, &plan.offsets);
    let plane = geom.oh * geom.ow;
    assert!(packed.len() >= offsets.len() * PANEL && dst.len() >= PANEL * plane, "a panel of 16 channels");
    let wp = &packed[..offsets.len() * PANEL];
    assert!(xb.len() >= if plan.in_place { offsets.len() * plane } else { geom.image() }, "an image, or its blocks (whose bounds the plan checked)");
    // The positions by groups of tiles whose sums stay in the L1 cache, and within a group
    // the taps by blocks whose weights stay there too while every position's chain goes
    // through them; each chain continues from the sum the block before stored.
    let mut sums = [[0.0f32; PANEL]; GROUP_POSITIONS];
    for (g, group) in plan.groups.iter().map(|r| &plan.tiles[r.clone()]).enumerate() {
        let (first, last) = (group[0].0, group[group.len() - 1]);
        let sums = &mut sums[..last.0 + last.1 - first];
        sums.fill([0.0; PANEL]);
        for k0 in (0..offsets.len()).step_by(K_BLOCK) {
            let (offsets, w) = (&offsets[k0..(k0 + K_BLOCK).min(offsets.len())], &wp[k0 * PANEL..]);
            // The first group reads each block of weights from memory; it asks for the next
            // block (the next panel's first, after its last) while its tiles run. In a model
            // the weights are cold: MobileNetV2's 7x7 layers at one thread took 0.05-0.09 ms
            // less in all (a layer alone with its caches flushed: 160 -> 960 0.212 -> 0.193 ms,
            // against 0.16 warm).
            let ahead = match g {
                0 => &packed[(k0 + offsets.len()) * PANEL..((k0 + offsets.len() + K_BLOCK) * PANEL).min(packed.len())],
                _ => &[],
            };
            // Each tile asks for its share of the block.
            let share = ahead.len().div_ceil(16).div_ceil(group.len()) * 16;
            for (t, &(p, n)) in group.iter().enumerate() {
                let part = &ahead[(t * share).min(ahead.len())..((t + 1) * share).min(ahead.len())];
                let s = &mut sums[p - first..p - first + n];
                if plan.wide {
                    // SAFETY: the tile's positions are consecutive in the blocks (`wide_tiles`),
                    // or in a pointwise layer's image, which its offsets index, and as below.
                    unsafe { wide_tile(xb.as_ptr().add(plan.base(p)), offsets, w.as_ptr(), part, s, plan.in_place) };
                    continue;
                }
                super::prefetch::lines(part.as_ptr(), part.len());
                macro_rules! tile {
                    ($n:literal) => {{
                        let bases: [usize; $n] = std::array::from_fn(|j| geom.base(p + j));
                        // SAFETY: every base is a position's (below `plane`), which the plan
                        // checked to stay in an image's blocks (`xb`, checked above) with any
                        // offset; the weights hold 16 per offset.
                        unsafe { avx2::tile::<$n>(xb.as_ptr(), &bases, offsets, w.as_ptr(), s.try_into().expect("n sums")) }
                    }};
                }
                match n {
                    6 => tile!(6),
                    5 => tile!(5),
                    4 => tile!(4),
                    3 => tile!(3),
                    2 => tile!(2),
                    _ => tile!(1),
                }
            }
        }
        store(sums, first, bias, plane, dst);
    }
}

/// Writes the sums of positions `first..` (`[positions, 16]`) to their channels' rows of `dst`
/// (`[16, plane]`), adding the bias: transposed by 8 x 8 register blocks, then a vector loop
/// per channel (a scalar scatter of a stem's 800,000 outputs took 4% of ResNet-18's call).
#[cfg(target_arch = "x86_64")]
fn store(sums: &[[f32; PANEL]], first: usize, bias: Option<&[f32]>, plane: usize, dst: &mut [f32]) {
    let n = sums.len();
    let mut rows = [std::mem::MaybeUninit::<f32>::uninit(); GROUP_POSITIONS * PANEL];
    let rows = &mut rows[..n * PANEL];
    super::transpose::transpose_band(sums.as_flattened(), n, PANEL, PANEL, rows);
    // SAFETY: `transpose_band` wrote every element of `rows`.
    let rows = unsafe { &*(rows as *const [std::mem::MaybeUninit<f32>] as *const [f32]) };
    for (l, from) in rows.chunks_exact(n).enumerate() {
        let to = &mut dst[l * plane + first..][..n];
        match bias.map(|b| b[l]) {
            // A bias that is not NaN takes `add`'s bits without its select (see `Num`).
            Some(b) if !Num::is_nan_value(b) => to.iter_mut().zip(from).for_each(|(d, &v)| *d = Num::add_plain(v, b)),
            Some(b) => to.iter_mut().zip(from).for_each(|(d, &v)| *d = Num::add(v, b)),
            None => to.copy_from_slice(from),
        }
    }
}

/// The register tiles covering `plane` positions, `(first, count)`: tiles of 6, and where the
/// plane is no multiple of 6, up to five of 5 before them (49 = 4 x 6 + 5 x 5), or one short
/// tile at the end where that does not cover it.
fn tiles(plane: usize) -> Vec<(usize, usize)> {
    let fives = (0..=5).find(|b| plane >= 5 * b && (plane - 5 * b).is_multiple_of(TILE)).unwrap_or(0);
    let mut out: Vec<(usize, usize)> = (0..fives).map(|b| (5 * b, 5)).collect();
    let mut p = 5 * fives;
    while p < plane {
        let n = TILE.min(plane - p);
        out.push((p, n));
        p += n;
    }
    out
}

/// The tiles on AVX-512's 32 registers, when the blocks are of 8 channels: runs of
/// consecutive positions in the blocks, each cut into tiles of at most [`WIDE`] positions as
/// equal as they come. The whole plane is one run where its rows are not padded (a pointwise
/// layer's 49 positions: 25 and 24), otherwise each output row is (7, or 14 and 14).
///
/// A position's broadcast input is an operand of its fused multiply-add, so a tap costs one
/// weight load and its positions' multiply-adds, where AVX2's tile of 6 positions by two
/// vectors spends six broadcasts and two loads per twelve. On AMD's Zen 4, whose AVX-512
/// runs at half rate per instruction (so the tile level stays AVX2), the same chains ran
/// MobileNetV2's 7x7 layers 1.03-1.06x faster alone at one thread (`tests::timing`: 960 ->
/// 320 0.303 -> 0.287 ms, 105 GFLOP/s of the core's 115), and 1.16x in the model, where
/// the weights come from memory (1.85 -> 1.60 ms for the five kinds); ResNet-18's 3x3 layers
/// on 7x7 planes took 1.2x less (docs/PERFORMANCE.md).
fn wide_tiles(geom: &Blocked) -> Vec<(usize, usize)> {
    let plane = geom.oh * geom.ow;
    let run = if geom.ws == geom.ow { plane } else { geom.ow };
    let mut out = Vec::new();
    for start in (0..plane).step_by(run) {
        let count = run.div_ceil(WIDE);
        let mut p = start;
        for t in 0..count {
            let n = run / count + usize::from(t < run % count);
            out.push((p, n));
            p += n;
        }
    }
    out
}

/// [`avx512::tile`] of `sums.len()` positions, from 1 to [`WIDE`], reading the blocks or (with
/// `in_place`) a pointwise layer's image.
///
/// # Safety
/// As `avx512::tile`'s; the CPU must have AVX-512F.
#[cfg(target_arch = "x86_64")]
unsafe fn wide_tile(x: *const f32, offsets: &[u32], w: *const f32, ahead: &[f32], sums: &mut [[f32; PANEL]], in_place: bool) {
    macro_rules! sizes {
        ($($n:literal)*) => {
            match (sums.len(), in_place) {
                // SAFETY: the caller's.
                $(($n, false) => unsafe { avx512::tile::<$n, LANES>(x, offsets, w, ahead, sums.try_into().expect("n sums")) },)*
                // SAFETY: the caller's.
                $(($n, true) => unsafe { avx512::tile::<$n, 1>(x, offsets, w, ahead, sums.try_into().expect("n sums")) },)*
                (n, _) => unreachable!("a wide tile of {n} positions"),
            }
        };
    }
    sizes!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25)
}

/// Runs `tap(k, offsets[k])` for every tap in order, nine at a time (a 3x3 kernel's channel)
/// unrolled: the loop both tiles run their taps in.
#[inline(always)]
fn each_tap(offsets: &[u32], mut tap: impl FnMut(usize, u32)) {
    let nines = offsets.chunks_exact(9);
    let rest = nines.remainder();
    for (c, group) in nines.enumerate() {
        let group: &[u32; 9] = group.try_into().expect("nine");
        for (t, &off) in group.iter().enumerate() {
            tap(c * 9 + t, off);
        }
    }
    let done = offsets.len() - rest.len();
    for (t, &off) in rest.iter().enumerate() {
        tap(done + t, off);
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::PANEL;
    use std::arch::x86_64::*;

    /// The tile of 16 output channels by `P` positions: accumulator `(j, v)` continues the
    /// chain `w[k, 8v + l] * x[bases[j] + offsets[k]] + s` over the taps `k` in order from
    /// the value `sums` holds (`+0` before a chain's first block), and is stored back there.
    ///
    /// # Safety
    /// The CPU must have AVX2 and FMA; `x + bases[j] + offsets[k]` must be readable for every
    /// `j` and `k`, and `w` must hold `16 * offsets.len()` values.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn tile<const P: usize>(x: *const f32, bases: &[usize; P], offsets: &[u32], w: *const f32, sums: &mut [[f32; PANEL]; P]) {
        let mut acc = [[_mm256_setzero_ps(); 2]; P];
        for (a, s) in acc.iter_mut().zip(sums.iter()) {
            // SAFETY: each row of `sums` holds 16 floats.
            unsafe { *a = [_mm256_loadu_ps(s.as_ptr()), _mm256_loadu_ps(s.as_ptr().add(8))] };
        }
        // SAFETY: the caller's: every base is inside the buffer `x` points into.
        let rows = bases.map(|b| unsafe { x.add(b) });
        // One tap: its two weight vectors times its input at each position.
        let tap = |k: usize, off: u32| {
            // SAFETY: the caller's.
            let (w0, w1) = unsafe { (_mm256_loadu_ps(w.add(k * PANEL)), _mm256_loadu_ps(w.add(k * PANEL + 8))) };
            for j in 0..P {
                // SAFETY: the caller's.
                let xv = unsafe { _mm256_broadcast_ss(&*rows[j].add(off as usize)) };
                acc[j][0] = _mm256_fmadd_ps(w0, xv, acc[j][0]);
                acc[j][1] = _mm256_fmadd_ps(w1, xv, acc[j][1]);
            }
        };
        super::each_tap(offsets, tap);
        for (s, a) in sums.iter_mut().zip(&acc) {
            // SAFETY: each row of `sums` holds 16 floats.
            unsafe {
                _mm256_storeu_ps(s.as_mut_ptr(), a[0]);
                _mm256_storeu_ps(s.as_mut_ptr().add(8), a[1]);
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::PANEL;
    use std::arch::x86_64::*;

    /// [`super::avx2::tile`]'s chains on AVX-512: accumulator `j` continues the chain
    /// `w[k, l] * x[STEP j + offsets[k]] + s` over the taps `k` in order from the value `sums`
    /// holds, one 16-lane vector per position, and is stored back there (`STEP` 8 in the
    /// blocks, 1 in a pointwise layer's image). The same fused multiply-adds in the same
    /// order as the AVX2 tile, so the same bits. Tap `k` also asks for the `k`-th cache line
    /// of `ahead`: a few taps' multiply-adds apart, where a burst of requests at the start of
    /// a tile of 25 positions held the loads up (the 7x7 layers took 3-10% longer in the
    /// model than with AVX2's tiles).
    ///
    /// # Safety
    /// The CPU must have AVX-512F; `x + STEP j + offsets[k]` must be readable for every `j <
    /// P` and `k`, and `w` must hold `16 * offsets.len()` values.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn tile<const P: usize, const STEP: usize>(
        x: *const f32,
        offsets: &[u32],
        w: *const f32,
        ahead: &[f32],
        sums: &mut [[f32; PANEL]; P],
    ) {
        let mut acc = [_mm512_setzero_ps(); P];
        for (a, s) in acc.iter_mut().zip(sums.iter()) {
            // SAFETY: each row of `sums` holds 16 floats.
            *a = unsafe { _mm512_loadu_ps(s.as_ptr()) };
        }
        let tap = |k: usize, off: u32| {
            // SAFETY: the caller's.
            let (wv, at) = unsafe { (_mm512_loadu_ps(w.add(k * PANEL)), x.add(off as usize)) };
            if k * PANEL < ahead.len() {
                super::super::prefetch::lines(ahead[k * PANEL..].as_ptr(), 1);
            }
            for (j, a) in acc.iter_mut().enumerate() {
                // SAFETY: the caller's.
                let xv = _mm512_set1_ps(unsafe { *at.add(j * STEP) });
                *a = _mm512_fmadd_ps(wv, xv, *a);
            }
        };
        super::each_tap(offsets, tap);
        for (s, a) in sums.iter_mut().zip(&acc) {
            // SAFETY: each row of `sums` holds 16 floats.
            unsafe { _mm512_storeu_ps(s.as_mut_ptr(), *a) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::conv_direct::tests::{bits, naive, values};
    use crate::kernels::simd::{machine_level, machine_tile_level, set_max_level, Level, LEVEL_CAPS};
    use ndarray::IxDyn;

    fn array(v: &[f32], dims: &[usize]) -> Array<f32> {
        Array::from_shape_vec(IxDyn(dims), v.to_vec()).unwrap()
    }

    /// `try_conv2d_into` at level AVX2 (on a CPU that has it), or `None`.
    fn run(x: &[f32], w: &Array<f32>, b: &[f32], g: &ConvGeom, fallback: &(dyn Fn(usize, &mut [f32]) + Sync)) -> Option<Vec<f32>> {
        if machine_level() < Level::Avx2 {
            return None;
        }
        let out = run_at(Level::Avx2, x, w, b, g, fallback);
        assert!(out.is_some(), "{g:?} at AVX2");
        out
    }

    /// `try_conv2d_into` with level `cap`, or `None` where it did not run.
    fn run_at(cap: Level, x: &[f32], w: &Array<f32>, b: &[f32], g: &ConvGeom, fallback: &(dyn Fn(usize, &mut [f32]) + Sync)) -> Option<Vec<f32>> {
        let mut out = vec![f32::NAN; g.n * g.o * g.out_plane()];
        set_max_level(cap);
        let ran = try_conv2d_into(x, w, Some(b), g, &mut out, fallback, &|_| {});
        set_max_level(Level::Avx512);
        ran.then_some(out)
    }

    /// The definition's bits (`conv_direct_large`'s): stride 1 and 2, odd planes (tiles of 6,
    /// of 5 and short ones, groups of tiles), patches over several blocks of taps, channels
    /// out of blocks of 8, two images, on the pool and on one thread; with AVX2's tiles, and
    /// with AVX-512's wide ones where the CPU has it at half rate (runs along rows of 7, 5
    /// and 29, and along an unpadded plane of 121 positions in two groups).
    #[test]
    fn matches_the_definition_bit_for_bit_on_any_thread_count() {
        let geoms = [
            ConvGeom { n: 2, c: 64, h: 7, w: 7, o: 32, kh: 3, kw: 3, stride: [1, 1], padding: [1, 1] },
            ConvGeom { n: 1, c: 16, h: 14, w: 13, o: 16, kh: 3, kw: 3, stride: [2, 2], padding: [1, 1] },
            ConvGeom { n: 1, c: 8, h: 3, w: 2, o: 48, kh: 3, kw: 3, stride: [1, 1], padding: [1, 1] },
            ConvGeom { n: 1, c: 24, h: 9, w: 11, o: 16, kh: 3, kw: 2, stride: [3, 2], padding: [2, 0] },
            // A stem's three channels (blocks of 3), and a last block of 4 channels on a plane
            // of several groups of tiles.
            ConvGeom { n: 2, c: 3, h: 23, w: 20, o: 16, kh: 7, kw: 7, stride: [2, 2], padding: [3, 3] },
            ConvGeom { n: 1, c: 12, h: 30, w: 29, o: 16, kh: 3, kw: 3, stride: [1, 1], padding: [1, 1] },
            ConvGeom { n: 1, c: 16, h: 22, w: 22, o: 32, kh: 1, kw: 1, stride: [2, 2], padding: [0, 0] },
        ];
        let _only_this_test_caps_the_level = LEVEL_CAPS.lock().unwrap_or_else(|e| e.into_inner());
        for g in geoms {
            assert!(computes(&g), "{g:?}");
            let (x, w, b) = (values(g.n * g.c * g.h * g.w, 1), values(g.o * g.patch(), 2), values(g.o, 3));
            let wa = array(&w, &[g.o, g.c, g.kh, g.kw]);
            let want = bits(&naive(&x, &w, &b, &g));
            let no_nan = |_: usize, _: &mut [f32]| panic!("no NaN here");
            let Some(pooled) = run(&x, &wa, &b, &g, &no_nan) else { return };
            assert_eq!(bits(&pooled), want, "{g:?}");
            let alone = crate::kernels::parallel::on_one_thread(|| run(&x, &wa, &b, &g, &no_nan)).unwrap();
            assert_eq!(bits(&alone), want, "{g:?}, one thread");
            if let Some(wide) = run_at(Level::Avx512, &x, &wa, &b, &g, &no_nan) {
                assert_eq!(bits(&wide), want, "{g:?} at AVX-512");
            }
        }
    }

    /// The second call packs the panels into the weight cache and the third reads them there:
    /// the same bits each time.
    #[test]
    fn cached_panels_give_the_same_bits() {
        let g = ConvGeom { n: 1, c: 64, h: 7, w: 7, o: 16, kh: 3, kw: 3, stride: [1, 1], padding: [1, 1] };
        let (x, w, b) = (values(g.c * 49, 4), values(g.o * g.patch(), 5), values(g.o, 6));
        let wa = array(&w, &[g.o, g.c, 3, 3]);
        let _only_this_test_caps_the_level = LEVEL_CAPS.lock().unwrap_or_else(|e| e.into_inner());
        let no_nan = |_: usize, _: &mut [f32]| panic!("no NaN here");
        let Some(first) = run(&x, &wa, &b, &g, &no_nan) else { return };
        assert_eq!(bits(&run(&x, &wa, &b, &g, &no_nan).unwrap()), bits(&first));
        let form = (Form::Panels, w.len());
        assert!(weight_cache::cached(&wa, g.o, g.c, form, |_, _| panic!("cached, so not made again")).is_some());
        assert_eq!(bits(&run(&x, &wa, &b, &g, &no_nan).unwrap()), bits(&first));
        assert_eq!(bits(&first), bits(&naive(&x, &w, &b, &g)));
    }

    /// A NaN input sends its image to the fallback after the blocked pass; the other image
    /// keeps its bits.
    #[test]
    fn an_image_with_a_nan_output_is_redone_by_the_fallback() {
        let g = ConvGeom { n: 2, c: 64, h: 7, w: 7, o: 16, kh: 3, kw: 3, stride: [1, 1], padding: [1, 1] };
        let mut x = values(g.n * g.c * 49, 1);
        let (w, b) = (values(g.o * g.patch(), 2), values(g.o, 3));
        x[g.c * 49 + 5] = f32::NAN; // in image 1
        let redone = std::sync::Mutex::new(Vec::new());
        let fallback = |i: usize, o: &mut [f32]| {
            redone.lock().unwrap().push(i);
            o.fill(7.0);
        };
        let _only_this_test_caps_the_level = LEVEL_CAPS.lock().unwrap_or_else(|e| e.into_inner());
        let Some(out) = run(&x, &array(&w, &[g.o, g.c, 3, 3]), &b, &g, &fallback) else { return };
        assert_eq!(redone.into_inner().unwrap(), vec![1]);
        assert!(out[g.o * 49..].iter().all(|&v| v == 7.0));
        assert_eq!(bits(&out[..g.o * 49]), bits(&naive(&x, &w, &b, &g)[..g.o * 49]));
    }

    #[test]
    fn not_for_f64_other_levels_or_filters_out_of_panels() {
        let g = ConvGeom { n: 1, c: 64, h: 7, w: 7, o: 16, kh: 3, kw: 3, stride: [1, 1], padding: [1, 1] };
        let w64 = Array::<f64>::zeros(IxDyn(&[16, 64, 3, 3]));
        let mut out = vec![0.0f64; 16 * 49];
        let _only_this_test_caps_the_level = LEVEL_CAPS.lock().unwrap_or_else(|e| e.into_inner());
        set_max_level(Level::Avx2);
        let f64_ran = try_conv2d_into(&vec![0.0; 64 * 49], &w64, None, &g, &mut out, &|_, _| {}, &|_| {});
        set_max_level(Level::Baseline);
        let w32 = Array::<f32>::zeros(IxDyn(&[16, 64, 3, 3]));
        let mut out32 = vec![0.0f32; 16 * 49];
        let baseline_ran = try_conv2d_into(&vec![0.0; 64 * 49], &w32, None, &g, &mut out32, &|_, _| {}, &|_| {});
        set_max_level(Level::Avx512);
        assert!(!f64_ran && !baseline_ran);
        assert!(computes(&ConvGeom { c: 60, ..g }) && !computes(&ConvGeom { o: 24, ..g }));
    }

    /// A stem runs here at level AVX2, but with AVX-512 in use (also at half rate, where the
    /// tile level is AVX2) it is left to `conv_direct_large`'s 16-lane tiles; a 3x3 layer runs
    /// here wherever the tile level is AVX2.
    #[test]
    fn stems_with_avx512_in_use_are_left_to_the_wide_tiles() {
        let stem = ConvGeom { n: 1, c: 3, h: 23, w: 20, o: 16, kh: 7, kw: 7, stride: [2, 2], padding: [3, 3] };
        let k3 = ConvGeom { n: 1, c: 64, h: 7, w: 7, o: 16, kh: 3, kw: 3, stride: [1, 1], padding: [1, 1] };
        let ran_at = |g: &ConvGeom, cap: Level| {
            let (x, w) = (values(g.c * g.h * g.w, 1), array(&values(g.o * g.patch(), 2), &[g.o, g.c, g.kh, g.kw]));
            let mut out = vec![0.0f32; g.o * g.out_plane()];
            set_max_level(cap);
            let ran = try_conv2d_into(&x, &w, None, g, &mut out, &|_, _| {}, &|_| {});
            set_max_level(Level::Avx512);
            ran
        };
        let _only_this_test_caps_the_level = LEVEL_CAPS.lock().unwrap_or_else(|e| e.into_inner());
        let avx2 = machine_level() >= Level::Avx2;
        assert_eq!((ran_at(&stem, Level::Avx2), ran_at(&k3, Level::Avx2)), (avx2, avx2));
        let half_rate = machine_level() == Level::Avx512 && machine_tile_level() == Level::Avx2;
        assert_eq!(ran_at(&stem, Level::Avx512), machine_level() == Level::Avx2);
        assert_eq!(ran_at(&k3, Level::Avx512), machine_level() == Level::Avx2 || half_rate);
    }

    /// `try_pointwise` with level `cap`, its hook counting how often it saw each output, or
    /// `None` where the layer is not taken (not an AVX2 CPU).
    fn pointwise(x: &[f32], w: &Array<f32>, b: &[f32], g: &ConvGeom, cap: Level) -> Option<(Vec<f32>, bool)> {
        if !takes_pointwise(g) {
            return None;
        }
        let mut out = vec![f32::NAN; g.n * g.o * g.out_plane()];
        let seen = std::sync::Mutex::new(vec![0; out.len()]);
        set_max_level(cap);
        let ran = try_pointwise(x, w, Some(b), g, &mut out, &|s, l| seen.lock().unwrap()[s..s + l].iter_mut().for_each(|v| *v += 1));
        set_max_level(Level::Avx512);
        assert!(ran, "{g:?} at {cap:?}");
        let once = seen.into_inner().unwrap().iter().all(|&v| v == 1);
        Some((out, once))
    }

    /// MobileNetV2's pointwise layers on 7x7 planes (and smaller ones, channels out of blocks
    /// of 8, several panels, several blocks of taps; and a projection on 14x14, two groups of
    /// positions): the definition's bits (one chain over the channels, then the bias), with
    /// AVX-512 in use (its wide tiles reading the image in place, where the CPU has it), at
    /// AVX2 and under a cap below it (`conv_direct_large`'s portable tile), on the
    /// pool and on one thread, with the hook seeing every output once.
    #[test]
    fn pointwise_layers_on_small_planes_have_the_definitions_bits_at_every_cap() {
        let pw = |c, h, w, o| ConvGeom { n: 1, c, h, w, o, kh: 1, kw: 1, stride: [1, 1], padding: [0, 0] };
        let _only_this_test_caps_the_level = LEVEL_CAPS.lock().unwrap_or_else(|e| e.into_inner());
        for g in [pw(160, 7, 7, 48), pw(36, 5, 3, 16), pw(8, 1, 1, 32), pw(300, 7, 7, 16), pw(400, 14, 14, 32)] {
            if !takes_pointwise(&g) {
                continue;
            }
            let (x, w, b) = (values(g.c * g.h * g.w, 7), values(g.o * g.c, 8), values(g.o, 9));
            let wa = array(&w, &[g.o, g.c, 1, 1]);
            let want = bits(&naive(&x, &w, &b, &g));
            for cap in [Level::Avx512, Level::Avx2, Level::Baseline] {
                let Some((pooled, once)) = pointwise(&x, &wa, &b, &g, cap) else { return };
                assert!(once, "{g:?} at {cap:?}: the hook sees each output once");
                assert_eq!(bits(&pooled), want, "{g:?} at {cap:?}");
                let (alone, _) = crate::kernels::parallel::on_one_thread(|| pointwise(&x, &wa, &b, &g, cap)).unwrap();
                assert_eq!(bits(&alone), want, "{g:?} at {cap:?}, one thread");
            }
            // Through the op's pointwise kernel, which hands the layer here.
            let y = crate::kernels::pointwise::conv2d(&array(&x, &[1, g.c, g.h, g.w]), &wa, Some(&array(&b, &[g.o])), &g);
            assert_eq!(bits(y.as_slice().unwrap()), want, "{g:?} through pointwise");
        }
    }

    /// A NaN or an infinity among the operands leaves the layer to gemm, nothing written; so
    /// do weights that became non-finite after finite ones of the same buffer were cached (a
    /// write copies the buffer, so the cache misses).
    #[test]
    fn pointwise_layers_with_non_finite_operands_are_left_to_gemm() {
        let g = ConvGeom { n: 1, c: 32, h: 7, w: 7, o: 16, kh: 1, kw: 1, stride: [1, 1], padding: [0, 0] };
        if !takes_pointwise(&g) {
            return;
        }
        let (x, w, b) = (values(g.c * 49, 1), values(g.o * g.c, 2), values(g.o, 3));
        let mut wa = array(&w, &[g.o, g.c, 1, 1]);
        let run = |x: &[f32], w: &Array<f32>, b: &[f32]| {
            let mut out = vec![7.0f32; g.o * 49];
            let ran = try_pointwise(x, w, Some(b), &g, &mut out, &|_, _| {});
            (ran, out.iter().all(|&v| v == 7.0))
        };
        let with = |v: &[f32], i: usize, value: f32| {
            let mut v = v.to_vec();
            v[i] = value;
            v
        };
        assert_eq!(run(&with(&x, 30, f32::NAN), &wa, &b), (false, true), "a NaN input");
        assert_eq!(run(&x, &wa, &with(&b, 3, f32::INFINITY)), (false, true), "an infinite bias");
        assert_eq!(run(&x, &array(&with(&w, 9, f32::NEG_INFINITY), &[g.o, g.c, 1, 1]), &b), (false, true), "an infinite weight");
        for _ in 0..3 {
            assert!(run(&x, &wa, &b).0, "finite: taken (and the panels cached)");
        }
        let keep = wa.clone();
        wa[[2, 5, 0, 0]] = f32::NAN;
        assert_eq!(run(&x, &wa, &b), (false, true), "weights written after caching");
        drop(keep);
    }

    #[test]
    fn takes_mobilenets_pointwise_layers_on_seven_by_seven_planes_and_its_14x14_projections_with_avx512() {
        let pw = |c, hw, o| ConvGeom { n: 1, c, h: hw, w: hw, o, kh: 1, kw: 1, stride: [1, 1], padding: [0, 0] };
        let avx2 = machine_tile_level() == Level::Avx2;
        for g in [pw(160, 7, 960), pw(960, 7, 160), pw(320, 7, 1280), pw(576, 7, 160)] {
            assert_eq!(takes_pointwise(&g), avx2, "{g:?}");
        }
        let half_rate = avx2 && machine_level() == Level::Avx512;
        for g in [pw(576, 14, 96), pw(384, 14, 64), pw(384, 14, 96), pw(192, 14, 64)] {
            assert_eq!(takes_pointwise(&g), half_rate, "{g:?}");
        }
        let not = [pw(96, 14, 576), pw(32, 28, 192), pw(192, 28, 32), pw(144, 14, 96), pw(160, 7, 24), ConvGeom { n: 2, ..pw(160, 7, 960) }];
        for g in not {
            assert!(!takes_pointwise(&g), "{g:?}");
        }
        assert!(!takes_pointwise(&ConvGeom { kh: 3, kw: 3, padding: [1, 1], ..pw(160, 7, 960) }), "3x3");
        assert!(!takes_pointwise(&ConvGeom { stride: [2, 2], ..pw(160, 7, 960) }), "stride 2");
    }

    /// A pointwise layer's image in blocks of 8 channels: each block its channels' planes
    /// transposed, every element written over what the buffer held (a NaN here), and the
    /// last block's lanes past the channels zero; a padded layer's blocks keep their zeros
    /// around the planes.
    #[test]
    fn blocks_hold_each_channels_plane_with_zeros_only_around_and_past_it() {
        let pw = ConvGeom { n: 1, c: 19, h: 5, w: 7, o: 16, kh: 1, kw: 1, stride: [1, 1], padding: [0, 0] };
        let padded = ConvGeom { kh: 3, kw: 3, padding: [1, 1], ..pw };
        for g in [pw, padded] {
            let b = Blocked::new(&g);
            let x: Vec<f32> = (0..g.c * 35).map(|i| i as f32 + 1.0).collect();
            let mut xb = vec![f32::NAN; b.image()];
            b.fill(&g, &x, &mut xb);
            let mut want = vec![0.0; b.image()];
            for (c, i, j) in (0..g.c).flat_map(|c| (0..5).flat_map(move |i| (0..7).map(move |j| (c, i, j)))) {
                let at = c / 8 * b.block + ((i + g.padding[0]) * b.ws + j + g.padding[1]) * 8 + c % 8;
                want[at] = x[c * 35 + i * 7 + j];
            }
            assert_eq!(bits(&xb), bits(&want), "{g:?}");
        }
    }

    #[test]
    fn tiles_cover_every_position_once_with_few_short_tiles() {
        assert_eq!(tiles(49), [(0, 5), (5, 5), (10, 5), (15, 5), (20, 5), (25, 6), (31, 6), (37, 6), (43, 6)]);
        assert_eq!(tiles(7), [(0, 6), (6, 1)]);
        assert_eq!(tiles(12), [(0, 6), (6, 6)]);
        for plane in 1..200 {
            let t = tiles(plane);
            let mut next = 0;
            for &(p, n) in &t {
                assert!(p == next && (1..=TILE).contains(&n), "{plane}: {t:?}");
                next += n;
            }
            assert_eq!(next, plane);
            assert!(plane < 20 || t.iter().all(|&(_, n)| n >= 5), "{plane}: {t:?}");
        }
    }

    /// Wide tiles run along the plane where its rows are not padded, along each row where they
    /// are, each of at most 25 positions and as equal as they come; groups hold at most 120
    /// positions of whole tiles.
    #[test]
    fn wide_tiles_run_along_rows_of_the_blocks_and_groups_stay_in_l1() {
        let pw = |hw, stride| ConvGeom { n: 1, c: 16, h: hw, w: hw, o: 16, kh: 1, kw: 1, stride: [stride, stride], padding: [0, 0] };
        let k3 = |hw, stride| ConvGeom { kh: 3, kw: 3, padding: [1, 1], ..pw(hw, stride) };
        let wide = |g: &ConvGeom| wide_tiles(&Blocked::new(g));
        assert_eq!(wide(&pw(7, 1)), [(0, 25), (25, 24)]);
        assert_eq!(wide(&pw(5, 1)), [(0, 25)]);
        assert_eq!(wide(&pw(22, 2)), [(0, 25), (25, 24), (49, 24), (73, 24), (97, 24)]);
        assert_eq!(wide(&k3(7, 1)), (0..7).map(|r| (7 * r, 7)).collect::<Vec<_>>());
        assert_eq!(&wide(&k3(56, 2))[..3], [(0, 14), (14, 14), (28, 14)]);
        assert_eq!(groups(&wide(&pw(22, 2))), [0..4, 4..5]);
        assert_eq!(groups(&tiles(49)), vec![std::ops::Range { start: 0, end: 9 }]);
        for g in [pw(7, 1), pw(30, 1), pw(23, 2), k3(7, 1), k3(29, 1), k3(56, 2), k3(13, 2)] {
            let (b, t) = (Blocked::new(&g), wide(&g));
            let mut next = 0;
            for &(p, n) in &t {
                assert!(p == next && (1..=WIDE).contains(&n), "{g:?}: {t:?}");
                // Consecutive in the blocks: each position `lanes` after the one before.
                assert!((p..p + n).all(|q| b.base(q) == b.base(p) + (q - p) * LANES), "{g:?}: {t:?}");
                next += n;
            }
            assert_eq!(next, g.out_plane(), "{g:?}");
            let sizes: Vec<usize> = groups(&t).iter().map(|r| t[r.clone()].iter().map(|&(_, n)| n).sum()).collect();
            assert!(sizes.iter().all(|&s| s <= GROUP_POSITIONS), "{g:?}: {sizes:?}");
        }
    }

    #[test]
    fn takes_resnets_layers_where_they_measured_faster_only() {
        let g = ConvGeom { n: 1, c: 512, h: 7, w: 7, o: 512, kh: 3, kw: 3, stride: [1, 1], padding: [1, 1] };
        assert!(fits(&g) && !fits(&ConvGeom { n: 2, ..g }), "7x7 at batch 1");
        assert!(!fits(&ConvGeom { c: 256, h: 14, w: 14, ..g }), "14x14: Winograd's");
        assert!(!fits(&ConvGeom { c: 56, ..g }), "504 taps");
        let s2 = |c, hw| ConvGeom { c, h: hw, w: hw, o: 2 * c, stride: [2, 2], ..g };
        assert!(fits(&s2(256, 14)) && fits(&s2(128, 28)) && fits(&s2(64, 56)), "stride 2 to 7x7, 14x14, 28x28");
        assert!(!fits(&s2(64, 112)) && !fits(&ConvGeom { n: 8, ..s2(64, 56) }), "to 56x56; batch 8");
        let stem = ConvGeom { n: 1, c: 3, h: 224, w: 224, o: 64, kh: 7, kw: 7, stride: [2, 2], padding: [3, 3] };
        assert!(fits(&stem) && !fits(&ConvGeom { n: 8, ..stem }) && !fits(&ConvGeom { c: 8, ..stem }), "ResNet's stem at batch 1");
        assert!(!fits(&ConvGeom { o: 32, kh: 3, kw: 3, padding: [1, 1], ..stem }), "MobileNetV2's stem");
        let pw = |c, hw, o| ConvGeom { n: 1, c, h: hw, w: hw, o, kh: 1, kw: 1, stride: [1, 1], padding: [0, 0] };
        assert!(!fits(&pw(160, 7, 960)) && !fits(&ConvGeom { stride: [2, 2], ..pw(256, 14, 512) }), "1x1 layers");
    }

    /// Times the layers `fits` and `takes_pointwise` take, and some they leave, by this kernel
    /// and by the path each took before (`conv::conv2d_into`; for the stride-1 1x1 layers the
    /// op's `pointwise`, gemm), interleaved, the best of 12 rounds; release build, one thread:
    /// `RAYON_NUM_THREADS=1 cargo test --release -p tensor-core --lib conv_blocked::tests::timing
    /// -- --ignored --nocapture`.
    #[test]
    #[ignore]
    #[cfg(target_arch = "x86_64")]
    fn timing() {
        use crate::kernels::conv::conv2d_into as conv;
        let layer = |c, hw, o, s| ConvGeom { n: 1, c, h: hw, w: hw, o, kh: 3, kw: 3, stride: [s, s], padding: [1, 1] };
        let project = |c, hw| ConvGeom { n: 1, c, h: hw, w: hw, o: 2 * c, kh: 1, kw: 1, stride: [2, 2], padding: [0, 0] };
        let pw = |c, hw, o| ConvGeom { n: 1, c, h: hw, w: hw, o, kh: 1, kw: 1, stride: [1, 1], padding: [0, 0] };
        let stem = |o, k| ConvGeom { n: 1, c: 3, h: 224, w: 224, o, kh: k, kw: k, stride: [2, 2], padding: [k / 2, k / 2] };
        let layers = [
            layer(512, 7, 512, 1),
            layer(256, 14, 512, 2),
            layer(128, 28, 256, 2),
            layer(64, 56, 128, 2),
            layer(256, 14, 256, 1),
            stem(64, 7),
            stem(32, 3),
            project(64, 56),
            project(128, 28),
            project(256, 14),
            pw(160, 7, 960),
            pw(320, 7, 1280),
            pw(960, 7, 160),
            pw(960, 7, 320),
            pw(576, 7, 160),
            pw(96, 14, 576),
            pw(576, 14, 96),
            pw(32, 28, 192),
        ];
        for g in layers {
            let (x, w) = (values(g.c * g.h * g.w, 1), values(g.o * g.patch(), 2));
            let (xa, wa) = (array(&x, &[1, g.c, g.h, g.w]), array(&w, &[g.o, g.c, g.kh, g.kw]));
            let wp = pack_weights(&w, &g);
            let mut out = vec![0.0f32; g.o * g.out_plane()];
            let mut best = [f64::MAX; 3];
            for round in 0..14 {
                for (v, best) in best.iter_mut().enumerate() {
                    let t = std::time::Instant::now();
                    match v {
                        0 => {
                            crate::kernels::conv_direct_large::OFF.with(|off| off.set(true));
                            if super::super::pointwise::applies(&g) {
                                super::super::pointwise::conv2d_into(&xa, &wa, None, &g, &mut out, None, &|_, _| {});
                            } else {
                                conv(&xa, &wa, None, &g, &mut out, None, &|_, _| {});
                            }
                            crate::kernels::conv_direct_large::OFF.with(|off| off.set(false));
                        }
                        1 => conv_packed(&x, &wp, None, &g, &mut out, Finish::Panels(&|_, _| {})),
                        _ => drop(std::hint::black_box(pack_weights(&w, &g))),
                    }
                    if round > 1 {
                        *best = best.min(t.elapsed().as_secs_f64() * 1e3);
                    }
                }
            }
            let gf = 2.0 * (g.o * g.patch() * g.out_plane()) as f64 / 1e6;
            println!(
                "{} -> {} {}x{} /{} ({}): before {:.3} ms ({:.0} GFLOP/s), blocked {:.3} ms ({:.0} GFLOP/s, {:.2}x), packing the weights {:.3} ms",
                g.c,
                g.o,
                g.h,
                g.w,
                g.stride[0],
                if fits(&g) || takes_pointwise(&g) { "taken" } else { "not taken" },
                best[0],
                gf / best[0],
                best[1],
                gf / best[1],
                best[0] / best[1],
                best[2]
            );
        }
    }
}
