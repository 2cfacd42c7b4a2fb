//! Direct 2-D convolution of one image for stride 1: no im2col buffer and no GEMM packing,
//! which at small sizes (LeNet's layers on one image) cost more than the products themselves.
//!
//! The image is copied once into a zero-padded plane per channel, `[c, hp, wp]`. Read as one
//! flat array, the input element under output position `(oi, oj)` and kernel tap
//! `(ci, ki, kj)` is at `ci*hp*wp + ki*wp + kj + (oi*wp + oj)`: a fixed offset per tap plus a
//! *wide* position `q = oi*wp + oj`. So one output channel is a sum over taps of contiguous
//! runs of the padded input, and a tile of `MO` channels by `L` wide positions is computed in
//! registers, one broadcast weight per channel and one run of inputs per tap. Wide positions
//! with `oj >= ow` wrap into the next row; they are computed and dropped (why the caller uses
//! this only when `wp` is not much wider than `ow`).
//!
//! Every output is a chain of fused multiply-adds over the taps in `(ci, ki, kj)` order,
//! starting from zero, then the bias added: the order the GEMM of the im2col path uses for a
//! patch of up to 512 taps (one block of its depth), so on a CPU with FMA the two paths give
//! the same bits (tested). The tile shape does not change any element's arithmetic, so every
//! SIMD build gives the same bits too.

use super::conv::ConvGeom;
use super::simd::{level, multiversion, Level};
use crate::math::Float;
use std::cell::RefCell;

/// Taps beyond which the im2col + GEMM path is used: the GEMM's cache blocking wins on large
/// patches, and up to here its summation order is the chain this kernel computes.
const MAX_PATCH: usize = 512;

/// True when [`conv_image`] computes `g`: on a CPU with FMA, stride 1, a patch of at most [`MAX_PATCH`] taps,
/// and at most a third of the wide positions dropped (`wp <= 1.5 * ow`).
pub(super) fn applies(g: &ConvGeom) -> bool {
    level() >= Level::Avx2 && fits(g)
}

/// The geometry half of [`applies`]: what [`conv_image`] itself relies on (the level only
/// decides which of two equal results is cheaper to get, so the kernel does not check it:
/// a test capping the level on another thread must not trip it).
fn fits(g: &ConvGeom) -> bool {
    let (_, ow) = g.out_hw();
    let wp = g.w + 2 * g.padding[1];
    // Only where the CPU has FMA: the baseline build's `mul_add` is the C library's `fma`,
    // which can pick another NaN than the instruction when several operands are NaN.
    // And not where gemm leaves its blocked kernel (so the bits would not be its): a patch of
    // one or two taps, one output channel, or one output position.
    let gemm_blocked = g.patch() >= 3 && g.o >= 2 && g.out_plane() >= 2;
    gemm_blocked && g.stride == [1, 1] && g.patch() <= MAX_PATCH && 2 * wp <= 3 * ow
}

super::simd::multiversion! {
    /// True when a value of `s` is NaN (the direct paths then leave the product to gemm).
    pub(super) fn any_nan<T: Float>(s: &[T]) -> bool = any_nan_body;
}

#[inline(always)]
fn any_nan_body<T: Float>(s: &[T]) -> bool {
    s.iter().fold(false, |seen, v| seen | v.is_nan_value())
}

/// The positions of one register tile. Tiles are as large as keeps their accumulators,
/// inputs and weights in registers: 6 channels by 3 vectors with AVX-512's 32 registers
/// (`wide`), 4 channels by 2 vectors with 16. Must match the `L` of `tiles_wide_body` and
/// `tiles_narrow_body`.
fn tile_positions<T>(wide: bool) -> usize {
    let lanes = 64 / std::mem::size_of::<T>(); // in an AVX-512 register
    if wide {
        3 * lanes
    } else {
        lanes
    }
}

/// Per-thread buffers reused across calls: the padded image and the wide output (as u64
/// words, aligned for any float), and the taps' offsets.
#[derive(Default)]
struct Scratch {
    words: Vec<u64>,
    offsets: Vec<usize>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// Runs `f` on this thread's scratch (or a fresh one, should the thread's be in use).
fn with_scratch<R>(f: impl FnOnce(&mut Scratch) -> R) -> R {
    SCRATCH.with(|s| match s.try_borrow_mut() {
        Ok(mut s) => f(&mut s),
        Err(_) => f(&mut Scratch::default()),
    })
}

/// The geometry of the padded image and its wide positions.
struct Wide {
    hp: usize,
    wp: usize,
    oh: usize,
    ow: usize,
    /// Wide positions computed: a multiple of the tile's positions covering `(oh-1)*wp + ow`.
    len: usize,
}

impl Wide {
    fn new(g: &ConvGeom, tile: usize) -> Wide {
        let (oh, ow) = g.out_hw();
        let (hp, wp) = (g.h + 2 * g.padding[0], g.w + 2 * g.padding[1]);
        let len = ((oh - 1) * wp + ow).div_ceil(tile) * tile;
        Wide { hp, wp, oh, ow, len }
    }

    /// Elements of the padded image: its planes, then zeros for the last tile's overrun
    /// (the largest index read is below `c*hp*wp + positions`).
    fn padded_len(&self, g: &ConvGeom, tile: usize) -> usize {
        g.c * self.hp * self.wp + tile
    }
}

/// One image of the convolution: `x` `[c, h, w]`, `w` `[o, c, kh, kw]`, `bias` `[o]`, into
/// `out` `[o, oh, ow]`. Only for geometries [`applies`] accepts.
pub(super) fn conv_image<T: Float>(x: &[T], w: &[T], bias: Option<&[T]>, g: &ConvGeom, out: &mut [T]) {
    debug_assert!(fits(g));
    // Read the level once: the tile shape fixes the wide length the tile loops step through.
    let wide_tiles = level() == Level::Avx512;
    let tile = tile_positions::<T>(wide_tiles);
    let wide = Wide::new(g, tile);
    let padded = wide.padded_len(g, tile);
    with_scratch(|s| {
        let words = (padded + g.o * wide.len).div_ceil(8 / std::mem::size_of::<T>());
        if s.words.len() < words {
            s.words.resize(words, 0);
        }
        // SAFETY: T is f32 or f64 (Float), for which every bit pattern is a value; the words
        // hold at least `padded + o * len` of them and u64 alignment suits both.
        let all = unsafe { std::slice::from_raw_parts_mut(s.words.as_mut_ptr() as *mut T, padded + g.o * wide.len) };
        let (xp, acc) = all.split_at_mut(padded);
        pad_image(x, g, &wide, xp);
        tap_offsets(g, &wide, &mut s.offsets);
        if wide_tiles {
            tiles_wide(xp, &s.offsets, w, g.o, wide.len, acc);
        } else {
            tiles_narrow(xp, &s.offsets, w, g.o, wide.len, acc);
        }
        compact(acc, bias, &wide, out);
    });
}

/// Copies the image into zero-padded planes `[c, hp, wp]` followed by zeros.
fn pad_image<T: Float>(x: &[T], g: &ConvGeom, wide: &Wide, xp: &mut [T]) {
    let [ph, pw] = g.padding;
    xp.fill(T::zero());
    for (ci, plane) in x.chunks_exact(g.h * g.w).enumerate() {
        for (i, row) in plane.chunks_exact(g.w).enumerate() {
            xp[(ci * wide.hp + i + ph) * wide.wp + pw..][..g.w].copy_from_slice(row);
        }
    }
}

/// The flat offset of each tap `(ci, ki, kj)`, in the weight's order.
fn tap_offsets(g: &ConvGeom, wide: &Wide, offsets: &mut Vec<usize>) {
    offsets.clear();
    for ci in 0..g.c {
        for ki in 0..g.kh {
            offsets.extend((0..g.kw).map(|kj| (ci * wide.hp + ki) * wide.wp + kj));
        }
    }
}

multiversion! {
    /// Drops the wrapped wide positions and adds the bias: `out[o, oi, oj] = acc[o, oi*wp + oj]
    /// (+ bias[o])`.
    fn compact<T: Float>(acc: &[T], bias: Option<&[T]>, wide: &Wide, out: &mut [T]) = compact_body;
}

#[inline(always)]
fn compact_body<T: Float>(acc: &[T], bias: Option<&[T]>, wide: &Wide, out: &mut [T]) {
    let plane = wide.oh * wide.ow;
    for (o, dst) in out.chunks_exact_mut(plane).enumerate() {
        let src = &acc[o * wide.len..][..wide.len];
        let b = bias.map(|b| b[o]);
        for (oi, row) in dst.chunks_exact_mut(wide.ow).enumerate() {
            let from = &src[oi * wide.wp..][..wide.ow];
            match b {
                // A bias that is not NaN takes `add`'s bits without its select (see `Num`).
                Some(b) if !b.is_nan_value() => row.iter_mut().zip(from).for_each(|(d, &v)| *d = v.add_plain(b)),
                Some(b) => row.iter_mut().zip(from).for_each(|(d, &v)| *d = v.add(b)),
                None => row.copy_from_slice(from),
            }
        }
    }
}

multiversion! {
    /// Every tile of the wide output with AVX-512's tile shape.
    fn tiles_wide<T: Float>(xp: &[T], offsets: &[usize], w: &[T], o: usize, len: usize, acc: &mut [T]) = tiles_wide_body;
}

multiversion! {
    /// Every tile of the wide output with the 16-register tile shape.
    fn tiles_narrow<T: Float>(xp: &[T], offsets: &[usize], w: &[T], o: usize, len: usize, acc: &mut [T]) = tiles_narrow_body;
}

#[inline(always)]
fn tiles_wide_body<T: Float>(xp: &[T], offsets: &[usize], w: &[T], o: usize, len: usize, acc: &mut [T]) {
    if std::mem::size_of::<T>() == 4 {
        all_tiles::<T, 6, 48>(xp, offsets, w, o, len, acc);
    } else {
        all_tiles::<T, 6, 24>(xp, offsets, w, o, len, acc);
    }
}

#[inline(always)]
fn tiles_narrow_body<T: Float>(xp: &[T], offsets: &[usize], w: &[T], o: usize, len: usize, acc: &mut [T]) {
    if std::mem::size_of::<T>() == 4 {
        all_tiles::<T, 4, 16>(xp, offsets, w, o, len, acc);
    } else {
        all_tiles::<T, 4, 8>(xp, offsets, w, o, len, acc);
    }
}

/// The wide output `acc` `[o, len]`, in tiles of up to `MO` channels by `L` positions.
#[inline(always)]
fn all_tiles<T: Float, const MO: usize, const L: usize>(xp: &[T], offsets: &[usize], w: &[T], o: usize, len: usize, acc: &mut [T]) {
    let patch = offsets.len();
    let mut o0 = 0;
    while o0 < o {
        let rows = (o - o0).min(MO);
        let (w, acc) = (&w[o0 * patch..(o0 + rows) * patch], &mut acc[o0 * len..(o0 + rows) * len]);
        for q in (0..len).step_by(L) {
            match rows {
                1 => tile::<T, 1, L>(xp, offsets, w, q, len, acc),
                2 => tile::<T, 2, L>(xp, offsets, w, q, len, acc),
                3 => tile::<T, 3, L>(xp, offsets, w, q, len, acc),
                4 => tile::<T, 4, L>(xp, offsets, w, q, len, acc),
                5 => tile::<T, 5, L>(xp, offsets, w, q, len, acc),
                _ => tile::<T, MO, L>(xp, offsets, w, q, len, acc),
            }
        }
        o0 += rows;
    }
}

/// One tile: channels `0..R` of `w` (`[R, patch]`) at wide positions `q..q + L`, written to
/// `acc` (`[R, len]`). Each accumulator is a chain of fused multiply-adds over the taps.
#[inline(always)]
pub(super) fn tile<T: Float, const R: usize, const L: usize>(xp: &[T], offsets: &[usize], w: &[T], q: usize, len: usize, acc: &mut [T]) {
    let patch = offsets.len();
    let rows: [&[T]; R] = std::array::from_fn(|r| &w[r * patch..][..patch]);
    let mut sums = [[T::zero(); L]; R];
    for (p, &off) in offsets.iter().enumerate() {
        let x: &[T; L] = xp[off + q..][..L].try_into().expect("L values");
        let wv: [T; R] = std::array::from_fn(|r| rows[r][p]);
        // Positions outermost, so each input vector is loaded once for all R channels.
        for l in 0..L {
            for r in 0..R {
                sums[r][l] = wv[r].mul_add(x[l], sums[r][l]);
            }
        }
    }
    for (r, s) in sums.iter().enumerate() {
        acc[r * len + q..][..L].copy_from_slice(s);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The convolution by the definition, each output a fused multiply-add chain over the taps
    /// in (ci, ki, kj) order from zero, then the bias added; any batch and stride.
    pub(crate) fn naive<T: Float>(x: &[T], w: &[T], b: &[T], g: &ConvGeom) -> Vec<T> {
        let (oh, ow) = g.out_hw();
        let mut out = Vec::new();
        for i in 0..g.n {
            for o in 0..g.o {
                for oi in 0..oh {
                    for oj in 0..ow {
                        let mut s = T::zero();
                        for ci in 0..g.c {
                            for ki in 0..g.kh {
                                for kj in 0..g.kw {
                                    let ih = (oi * g.stride[0] + ki) as isize - g.padding[0] as isize;
                                    let iw = (oj * g.stride[1] + kj) as isize - g.padding[1] as isize;
                                    let inside = ih >= 0 && iw >= 0 && (ih as usize) < g.h && (iw as usize) < g.w;
                                    let v = if inside { x[((i * g.c + ci) * g.h + ih as usize) * g.w + iw as usize] } else { T::zero() };
                                    s = w[((o * g.c + ci) * g.kh + ki) * g.kw + kj].mul_add(v, s);
                                }
                            }
                        }
                        out.push(s.add(b[o]));
                    }
                }
            }
        }
        out
    }

    /// The values' bit patterns, for assertions of same bits.
    pub(crate) fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|v| v.to_bits()).collect()
    }

    pub(crate) fn values(len: usize, seed: u32) -> Vec<f32> {
        (0..len as u32).map(|i| ((i.wrapping_mul(2654435761).wrapping_add(seed) >> 8) % 2000) as f32 / 997.0 - 1.0).collect()
    }

    #[test]
    fn matches_the_definition_bit_for_bit_at_every_level() {
        let geoms = [
            ConvGeom { n: 1, c: 1, h: 28, w: 28, o: 6, kh: 5, kw: 5, stride: [1, 1], padding: [2, 2] },
            ConvGeom { n: 1, c: 6, h: 14, w: 14, o: 16, kh: 5, kw: 5, stride: [1, 1], padding: [0, 0] },
            ConvGeom { n: 1, c: 3, h: 7, w: 9, o: 13, kh: 3, kw: 2, stride: [1, 1], padding: [1, 0] },
            ConvGeom { n: 1, c: 3, h: 1, w: 5, o: 2, kh: 1, kw: 1, stride: [1, 1], padding: [0, 0] },
        ];
        let _only_this_test_caps_the_level = crate::kernels::simd::LEVEL_CAPS.lock().unwrap_or_else(|e| e.into_inner());
        for g in geoms {
            assert!(applies(&g), "{g:?}");
            let (x, w, b) = (values(g.c * g.h * g.w, 1), values(g.o * g.patch(), 2), values(g.o, 3));
            let want: Vec<u32> = naive(&x, &w, &b, &g).iter().map(|v| v.to_bits()).collect();
            for cap in [Level::Avx2, Level::Avx512] {
                crate::kernels::simd::set_max_level(cap);
                let mut out = vec![f32::NAN; want.len()];
                conv_image(&x, &w, Some(&b), &g, &mut out);
                crate::kernels::simd::set_max_level(Level::Avx512);
                assert_eq!(out.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), want, "{g:?} at {cap:?}");
            }
        }
    }

    #[test]
    fn takes_stride_one_with_little_wrap_only() {
        // `applies` reads the level, which the level tests cap.
        let _no_cap_meanwhile = crate::kernels::simd::LEVEL_CAPS.lock().unwrap_or_else(|e| e.into_inner());
        let g = ConvGeom { n: 1, c: 6, h: 14, w: 14, o: 16, kh: 5, kw: 5, stride: [1, 1], padding: [0, 0] };
        assert!(applies(&g));
        assert!(!applies(&ConvGeom { stride: [2, 2], ..g }), "stride 2");
        assert!(!applies(&ConvGeom { kw: 9, ..g }), "ow 6 of wp 14");
        assert!(!applies(&ConvGeom { c: 21, ..g }), "525 taps");
        assert!(!applies(&ConvGeom { c: 2, kh: 1, kw: 1, ..g }), "2 taps: gemm's own kernel");
        assert!(!applies(&ConvGeom { o: 1, ..g }), "one channel: gemm's matrix-vector kernel");
    }
}
