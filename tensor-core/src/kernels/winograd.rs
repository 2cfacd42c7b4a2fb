//! Winograd convolution F(m x m, 3 x 3) for 3x3, stride-1 forward convolutions (Lavin and
//! Gray, "Fast Algorithms for Convolutional Neural Networks", 2016).
//!
//! An output tile of `m x m` positions needs an input tile of `a x a` (`a = m + 2`). With
//! the algorithm's three small matrices, `Y = A^T [(G g G^T) ⊙ (B^T d B)] A` for a kernel
//! `g` and an input tile `d`. Summed over the input channels, the elementwise product becomes
//! one matrix product per transform element `e` (`a * a` of them):
//! `M[e] = U[e] @ V[e]`, with `U[e]` `[o, c]` the transformed weights and `V[e]` `[c, tiles]`
//! the transformed input tiles. F(2x2, 3x3) needs 16 products of `o x c` per 4 outputs
//! instead of 36, F(4x4, 3x3) 36 per 16 instead of 144.
//!
//! The tiles of all images are numbered in one row and cut into fixed blocks; a block (and,
//! when there are few blocks, a range of output channels) is one task: transform its input
//! tiles, run the `a * a` products on one thread, transform back, add the bias, write.
//! Blocks depend only on the geometry, and every output is computed by one task in one fixed
//! order, so the result does not depend on the thread count (eager and graph give the same
//! bits). The weights are transformed per call by one GEMM, `U = C @ W^T` with `C` the
//! `(a*a) x 9` matrix of `G ⊗ G`: weights change every training step, and the products that
//! follow cost more than the transform wherever this path is chosen.
//!
//! The transforms add and subtract input values, so an infinite input gives NaN where the
//! direct sum gives infinity: non-finite inputs and weights stay on the im2col path.

use super::conv::ConvGeom;
use super::matmul::{gemm_into, MatRef};
use super::parallel::num_threads;
use super::simd::multiversion;
use crate::math::Float;
use rayon::prelude::*;
use std::cell::RefCell;

/// One algorithm F(m x m, 3 x 3): its output tile `m` and its matrices, row-major, as
/// written in the paper (`bt` is `a x a`, `g` is `a x 3`, `at` is `m x a`).
pub(super) struct Algorithm {
    m: usize,
    bt: &'static [f64],
    g: &'static [f64],
    at: &'static [f64],
}

/// F(2x2, 3x3): interpolation points 0, 1, -1 and infinity. Its transforms only add,
/// subtract and halve, so its error is that of the direct sum.
#[cfg_attr(not(test), allow(dead_code))]
pub(super) const F2: Algorithm = Algorithm {
    m: 2,
    #[rustfmt::skip]
    bt: &[
        1.0, 0.0, -1.0, 0.0,
        0.0, 1.0, 1.0, 0.0,
        0.0, -1.0, 1.0, 0.0,
        0.0, 1.0, 0.0, -1.0,
    ],
    #[rustfmt::skip]
    g: &[
        1.0, 0.0, 0.0,
        0.5, 0.5, 0.5,
        0.5, -0.5, 0.5,
        0.0, 0.0, 1.0,
    ],
    #[rustfmt::skip]
    at: &[
        1.0, 1.0, 1.0, 0.0,
        0.0, 1.0, -1.0, -1.0,
    ],
};

/// F(4x4, 3x3): interpolation points 0, ±1, ±2 and infinity.
pub(super) const F4: Algorithm = Algorithm {
    m: 4,
    #[rustfmt::skip]
    bt: &[
        4.0, 0.0, -5.0, 0.0, 1.0, 0.0,
        0.0, -4.0, -4.0, 1.0, 1.0, 0.0,
        0.0, 4.0, -4.0, -1.0, 1.0, 0.0,
        0.0, -2.0, -1.0, 2.0, 1.0, 0.0,
        0.0, 2.0, -1.0, -2.0, 1.0, 0.0,
        0.0, 4.0, 0.0, -5.0, 0.0, 1.0,
    ],
    #[rustfmt::skip]
    g: &[
        1.0 / 4.0, 0.0, 0.0,
        -1.0 / 6.0, -1.0 / 6.0, -1.0 / 6.0,
        -1.0 / 6.0, 1.0 / 6.0, -1.0 / 6.0,
        1.0 / 24.0, 1.0 / 12.0, 1.0 / 6.0,
        1.0 / 24.0, -1.0 / 12.0, 1.0 / 6.0,
        0.0, 0.0, 1.0,
    ],
    #[rustfmt::skip]
    at: &[
        1.0, 1.0, 1.0, 1.0, 1.0, 0.0,
        0.0, 1.0, -1.0, 2.0, -2.0, 0.0,
        0.0, 1.0, 1.0, 4.0, 4.0, 0.0,
        0.0, 1.0, -1.0, 8.0, -8.0, 1.0,
    ],
};

impl Algorithm {
    /// The input tile's side.
    fn alpha(&self) -> usize {
        self.m + 2
    }
}

/// The algorithm the convolution uses.
pub(super) const ALGORITHM: &Algorithm = &F4;

/// Input and output channels from which the transforms pay for themselves (measured on
/// ResNet-18's layers: below, the im2col path is as fast).
const MIN_CHANNELS: usize = 16;

/// Tiles (over all images) from which this path is used: with fewer, each transformed weight
/// is read for too few products and the path is bound by memory.
const MIN_TILES: usize = 16;

/// True when [`conv2d_into`] computes `g`.
pub(super) fn applies(g: &ConvGeom) -> bool {
    let (oh, ow) = g.out_hw();
    g.kh == 3 && g.kw == 3 && g.stride == [1, 1] && g.c >= MIN_CHANNELS && g.o >= MIN_CHANNELS && g.n * tiles_per_image(oh, ow, ALGORITHM.m) >= MIN_TILES
}

fn tiles_per_image(oh: usize, ow: usize, m: usize) -> usize {
    oh.div_ceil(m) * ow.div_ceil(m)
}

/// True when every value of `s` is finite (the transforms need it; see the module docs):
/// `v - v` is zero for finite `v`, NaN for NaN and the infinities.
pub(super) fn all_finite<T: Float>(s: &[T]) -> bool {
    s.iter().fold(true, |ok, &v| ok & (v.sub(v) == T::zero()))
}

/// The tiles of one task: a block of the numbered tiles and a range of output channels.
struct Task {
    tiles: std::ops::Range<usize>,
    outs: std::ops::Range<usize>,
}

/// The geometry of the tiling.
struct Tiling {
    m: usize,
    a: usize,
    oh: usize,
    ow: usize,
    tiles_x: usize,
    per_image: usize,
    total: usize,
}

impl Tiling {
    fn new(g: &ConvGeom, alg: &Algorithm) -> Tiling {
        let (oh, ow) = g.out_hw();
        let tiles_x = ow.div_ceil(alg.m);
        let per_image = tiles_per_image(oh, ow, alg.m);
        Tiling { m: alg.m, a: alg.alpha(), oh, ow, tiles_x, per_image, total: g.n * per_image }
    }

    /// Image, first output row and first output column of tile `t`.
    fn place(&self, t: usize) -> (usize, usize, usize) {
        let (img, r) = (t / self.per_image, t % self.per_image);
        (img, (r / self.tiles_x) * self.m, (r % self.tiles_x) * self.m)
    }
}

/// Tiles per block: as many as keep a block's transformed input (`a*a*c` values a tile)
/// near 512 KiB of f32, between 16 and 128. Depends on the geometry only.
fn block_tiles(g: &ConvGeom, alg: &Algorithm) -> usize {
    let per_tile = alg.alpha() * alg.alpha() * g.c;
    ((128 * 1024) / per_tile).clamp(16, 128)
}

/// The tasks: tile blocks, each split into ranges of output channels when there are fewer
/// than 8 blocks (so that small layers still give every thread work). Depends on the
/// geometry only.
fn tasks(g: &ConvGeom, tiling: &Tiling, block: usize) -> Vec<Task> {
    let blocks = tiling.total.div_ceil(block);
    let out_chunks = if blocks >= 8 { 1 } else { (8 / blocks).min(g.o / 16).max(1) };
    let out_chunk = g.o.div_ceil(out_chunks);
    let mut v = Vec::new();
    for b in 0..blocks {
        let tiles = b * block..((b + 1) * block).min(tiling.total);
        for oc in (0..g.o).step_by(out_chunk) {
            v.push(Task { tiles: tiles.clone(), outs: oc..(oc + out_chunk).min(g.o) });
        }
    }
    v
}

/// The transformed weights `U` `[a*a, o, c]`: `U = C @ W^T`, `C = G ⊗ G` (`(a*a) x 9`).
fn transform_weights<T: Float>(w: &[T], g: &ConvGeom, alg: &Algorithm) -> Vec<T> {
    let a = alg.alpha();
    let mut c = Vec::with_capacity(a * a * 9);
    for r in 0..a {
        for s in 0..a {
            for i in 0..3 {
                for j in 0..3 {
                    c.push(T::from_f64(alg.g[r * 3 + i] * alg.g[s * 3 + j]));
                }
            }
        }
    }
    let mut u = vec![T::zero(); a * a * g.o * g.c];
    gemm_into(MatRef::new(&c, a * a, 9), MatRef::new(w, g.o * g.c, 9).t(), &mut u, false, num_threads());
    u
}

/// `out[i] = sum_k coef[i][k] * input[k]` for `p x q` coefficients over slabs of `slab`
/// values (`input[k]` starts at `k * in_stride`, `out[i]` at `i * slab`). Zero coefficients
/// are skipped; the sum runs in `k` order.
#[inline(always)]
fn mix_body<T: Float>(coef: &[T], q: usize, input: &[T], in_stride: usize, slab: usize, out: &mut [T]) {
    for (i, o) in out.chunks_exact_mut(slab).enumerate() {
        let row = &coef[i * q..][..q];
        let mut first = true;
        for (k, &cf) in row.iter().enumerate() {
            if cf == T::zero() {
                continue;
            }
            let src = &input[k * in_stride..][..slab];
            if first {
                o.iter_mut().zip(src).for_each(|(d, &v)| *d = cf.mul_plain(v));
                first = false;
            } else {
                o.iter_mut().zip(src).for_each(|(d, &v)| *d = d.add_plain(cf.mul_plain(v)));
            }
        }
        if first {
            o.fill(T::zero());
        }
    }
}

multiversion! {
    fn mix<T: Float>(coef: &[T], q: usize, input: &[T], in_stride: usize, slab: usize, out: &mut [T]) = mix_body;
}

/// A task's buffers, reused across its calls: the gathered tile, its half-transformed and
/// transformed values, and the products.
#[derive(Default)]
struct Scratch {
    words: Vec<u64>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// Runs `f` on `len` values of this thread's scratch (or a fresh one, should it be in use).
fn with_scratch<T: Float, R>(len: usize, f: impl FnOnce(&mut [T]) -> R) -> R {
    let run = |s: &mut Scratch| {
        let words = (len * std::mem::size_of::<T>()).div_ceil(8);
        if s.words.len() < words {
            s.words.resize(words, 0);
        }
        // SAFETY: T is f32 or f64 (Float), for which every bit pattern is a value; the words
        // hold at least `len` of them and u64 alignment suits both.
        f(unsafe { std::slice::from_raw_parts_mut(s.words.as_mut_ptr() as *mut T, len) })
    };
    SCRATCH.with(|s| match s.try_borrow_mut() {
        Ok(mut s) => run(&mut s),
        Err(_) => run(&mut Scratch::default()),
    })
}

/// The output buffer, written by tasks at disjoint positions.
#[derive(Clone, Copy)]
struct OutPtr<T>(*mut T);
// SAFETY: tasks write disjoint positions (each output belongs to one tile and one channel,
// and each (tile, channel) to one task), and the buffer outlives them.
unsafe impl<T> Send for OutPtr<T> {}
unsafe impl<T> Sync for OutPtr<T> {}

/// The algorithm's matrices in `T`.
struct Coefs<T> {
    bt: Vec<T>,
    at: Vec<T>,
}

/// The convolution of `x` `[n, c, h, w]` with `w` `[o, c, 3, 3]` (+ `bias` `[o]`) into `out`
/// `[n, o, oh, ow]`, calling `after_image(i)` for every image once all are written. Only for
/// geometries [`applies`] accepts, with finite `x` and `w`.
pub(super) fn conv2d_into<T: Float>(x: &[T], w: &[T], bias: Option<&[T]>, g: &ConvGeom, out: &mut [T], after_image: &(dyn Fn(usize) + Sync)) {
    debug_assert!(applies(g));
    conv_with(ALGORITHM, x, w, bias, g, out, after_image)
}

/// [`conv2d_into`] by `alg`, for any 3x3 stride-1 geometry.
fn conv_with<T: Float>(alg: &Algorithm, x: &[T], w: &[T], bias: Option<&[T]>, g: &ConvGeom, out: &mut [T], after_image: &(dyn Fn(usize) + Sync)) {
    debug_assert!(g.kh == 3 && g.kw == 3 && g.stride == [1, 1]);
    let tiling = Tiling::new(g, alg);
    let block = block_tiles(g, alg);
    let u = transform_weights(w, g, alg);
    let coefs = Coefs { bt: alg.bt.iter().map(|&v| T::from_f64(v)).collect(), at: alg.at.iter().map(|&v| T::from_f64(v)).collect() };
    let dst = OutPtr(out.as_mut_ptr());
    let run = |task: &Task| {
        let dst = dst;
        run_task(task, x, &u, bias, g, &tiling, &coefs, block, dst)
    };
    let tasks = tasks(g, &tiling, block);
    if num_threads() > 1 && tasks.len() > 1 {
        tasks.par_iter().for_each(run);
        (0..g.n).into_par_iter().for_each(after_image);
    } else {
        tasks.iter().for_each(run);
        (0..g.n).for_each(after_image);
    }
}

/// One task: transform its tiles' inputs, multiply per transform element, transform back.
#[allow(clippy::too_many_arguments)]
fn run_task<T: Float>(task: &Task, x: &[T], u: &[T], bias: Option<&[T]>, g: &ConvGeom, tiling: &Tiling, coefs: &Coefs<T>, block: usize, dst: OutPtr<T>) {
    let (a, m) = (tiling.a, tiling.m);
    let (ee, nt, no) = (a * a, task.tiles.len(), task.outs.len());
    let v_len = ee * g.c * nt;
    let m_len = ee * no * nt;
    let tile_len = ee * block;
    with_scratch::<T, _>(v_len + m_len + 3 * tile_len, |s| {
        let (v, rest) = s.split_at_mut(v_len);
        let (prod, rest) = rest.split_at_mut(m_len);
        let (d, rest) = rest.split_at_mut(tile_len);
        let (half, rest) = rest.split_at_mut(tile_len);
        let full = &mut rest[..tile_len];
        let (d, half, full) = (&mut d[..ee * nt], &mut half[..ee * nt], &mut full[..ee * nt]);
        for ci in 0..g.c {
            gather(x, ci, task, g, tiling, d);
            // B^T d B: rows first (a slab is a row of tiles), then columns.
            mix(&coefs.bt, a, d, a * nt, a * nt, half);
            for r in 0..a {
                mix(&coefs.bt, a, &half[r * a * nt..], nt, nt, &mut full[r * a * nt..][..a * nt]);
            }
            for e in 0..ee {
                v[(e * g.c + ci) * nt..][..nt].copy_from_slice(&full[e * nt..][..nt]);
            }
        }
        for e in 0..ee {
            let ue = MatRef::new(&u[(e * g.o + task.outs.start) * g.c..], no, g.c);
            gemm_into(ue, MatRef::new(&v[e * g.c * nt..], g.c, nt), &mut prod[e * no * nt..][..no * nt], false, 1);
        }
        for (k, oc) in task.outs.clone().enumerate() {
            for e in 0..ee {
                d[e * nt..][..nt].copy_from_slice(&prod[(e * no + k) * nt..][..nt]);
            }
            // A^T M A: rows (m x a slabs of a row of tiles), then columns.
            mix(&coefs.at, a, d, a * nt, a * nt, &mut half[..m * a * nt]);
            for r in 0..m {
                mix(&coefs.at, a, &half[r * a * nt..], nt, nt, &mut full[r * m * nt..][..m * nt]);
            }
            let b = bias.map_or(T::zero(), |b| b[oc]);
            scatter(&full[..m * m * nt], b, bias.is_some(), oc, task, g, tiling, dst);
        }
    });
}

/// Copies channel `ci` of the task's input tiles into `d` `[a, a, tiles]`, zeros outside the
/// image (the padding and beyond).
fn gather<T: Float>(x: &[T], ci: usize, task: &Task, g: &ConvGeom, tiling: &Tiling, d: &mut [T]) {
    let (a, nt) = (tiling.a, task.tiles.len());
    for (k, t) in task.tiles.clone().enumerate() {
        let (img, oy, ox) = tiling.place(t);
        let plane = &x[(img * g.c + ci) * g.h * g.w..][..g.h * g.w];
        for r in 0..a {
            let iy = (oy + r).wrapping_sub(g.padding[0]);
            for s in 0..a {
                let ix = (ox + s).wrapping_sub(g.padding[1]);
                d[(r * a + s) * nt + k] = if iy < g.h && ix < g.w { plane[iy * g.w + ix] } else { T::zero() };
            }
        }
    }
}

/// Writes the output tiles `y` `[m, m, tiles]` of channel `oc`, plus the bias, dropping the
/// positions past the output's edge.
#[allow(clippy::too_many_arguments)]
fn scatter<T: Float>(y: &[T], bias: T, has_bias: bool, oc: usize, task: &Task, g: &ConvGeom, tiling: &Tiling, dst: OutPtr<T>) {
    let (m, nt) = (tiling.m, task.tiles.len());
    for (k, t) in task.tiles.clone().enumerate() {
        let (img, oy, ox) = tiling.place(t);
        let base = (img * g.o + oc) * tiling.oh * tiling.ow;
        for i in 0..m.min(tiling.oh - oy) {
            for j in 0..m.min(tiling.ow - ox) {
                let v = y[(i * m + j) * nt + k];
                let v = if has_bias { v.add_plain(bias) } else { v };
                // SAFETY: the position is inside `out` (image, channel, row and column in
                // range), and no other task writes it (see `OutPtr`).
                unsafe { *dst.0.add(base + (oy + i) * tiling.ow + ox + j) = v };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The convolution by its definition, in f64.
    fn direct(x: &[f64], w: &[f64], bias: Option<&[f64]>, g: &ConvGeom) -> Vec<f64> {
        let (oh, ow) = g.out_hw();
        let mut out = Vec::with_capacity(g.n * g.o * oh * ow);
        for n in 0..g.n {
            for o in 0..g.o {
                for oi in 0..oh {
                    for oj in 0..ow {
                        let mut s = bias.map_or(0.0, |b| b[o]);
                        for c in 0..g.c {
                            for ki in 0..3 {
                                for kj in 0..3 {
                                    let (ih, iw) = ((oi + ki).wrapping_sub(g.padding[0]), (oj + kj).wrapping_sub(g.padding[1]));
                                    if ih < g.h && iw < g.w {
                                        s += x[((n * g.c + c) * g.h + ih) * g.w + iw] * w[((o * g.c + c) * 3 + ki) * 3 + kj];
                                    }
                                }
                            }
                        }
                        out.push(s);
                    }
                }
            }
        }
        out
    }

    fn geom(n: usize, c: usize, hw: (usize, usize), o: usize, pad: usize) -> ConvGeom {
        ConvGeom { n, c, h: hw.0, w: hw.1, o, kh: 3, kw: 3, stride: [1, 1], padding: [pad, pad] }
    }

    fn run<T: Float>(alg: &Algorithm, x: &[T], w: &[T], bias: Option<&[T]>, g: &ConvGeom) -> Vec<T> {
        let (oh, ow) = g.out_hw();
        let mut out = vec![T::from_f64(f64::NAN); g.n * g.o * oh * ow];
        conv_with(alg, x, w, bias, g, &mut out, &|_| {});
        out
    }

    /// Deterministic values in [-1, 1) with many mantissa bits.
    fn values(len: usize, seed: u64) -> Vec<f64> {
        let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (0..len)
            .map(|_| {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                ((s >> 40) as f64 / (1u64 << 24) as f64) * 2.0 - 1.0
            })
            .collect()
    }

    #[test]
    fn a_4x4_image_by_hand() {
        // x = 1..16 in a 4x4 image, a kernel of ones: each output is the sum of a 3x3 window,
        // 1+2+3+5+6+7+9+10+11 = 54 at the top left, then +9 per column and +36 per row.
        // Padding 1 adds a border: the top left corner sees 1+2+5+6 = 14.
        let x: Vec<f64> = (1..=16).map(f64::from).collect();
        let w = vec![1.0; 9];
        for alg in [&F2, &F4] {
            let y = run(alg, &x, &w, Some(&[0.5]), &geom(1, 1, (4, 4), 1, 0));
            assert!(y.iter().zip([54.5, 63.5, 90.5, 99.5]).all(|(a, b)| (a - b).abs() < 1e-12), "m = {}: {y:?}", alg.m);
            let y = run(alg, &x, &w, None, &geom(1, 1, (4, 4), 1, 1));
            let corners = [y[0], y[3], y[12], y[15]];
            assert!(corners.iter().zip([14.0, 22.0, 46.0, 54.0]).all(|(a, b)| (a - b).abs() < 1e-12), "m = {}: {y:?}", alg.m);
            assert!((y[5] - 54.0).abs() < 1e-12, "m = {}: {y:?}", alg.m);
        }
    }

    #[test]
    fn matches_the_definition_on_odd_shapes() {
        // Odd sizes (tiles cut at the edges), padding 0 and 1, batches 1 and 3, channel counts
        // that are multiples of nothing, and more tiles than a block holds.
        let cases = [(1, 3, (5, 7), 2, 0), (3, 5, (9, 6), 7, 1), (1, 17, (13, 11), 19, 1), (3, 19, (7, 23), 5, 0), (2, 2, (40, 33), 3, 1)];
        for (n, c, hw, o, pad) in cases {
            let g = geom(n, c, hw, o, pad);
            let (x, w, b) = (values(n * c * hw.0 * hw.1, 1), values(o * c * 9, 2), values(o, 3));
            let want = direct(&x, &w, Some(&b), &g);
            for alg in [&F2, &F4] {
                let got = run(alg, &x, &w, Some(&b), &g);
                let err = got.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
                assert!(err < 1e-12, "{g:?}, m = {}: max error {err:e}", alg.m);
                // f32: the error of F(4x4) is a few times F(2x2)'s; both stay near rounding.
                let f = |v: &[f64]| v.iter().map(|&v| v as f32).collect::<Vec<_>>();
                let got = run(alg, &f(&x), &f(&w), Some(&f(&b)), &g);
                let err = got.iter().zip(&want).map(|(&a, b)| (f64::from(a) - b).abs()).fold(0.0, f64::max);
                let scale = (c * 9) as f64;
                assert!(err < 2e-6 * scale.sqrt() * if alg.m == 4 { 4.0 } else { 1.0 }, "{g:?}, m = {}: f32 max error {err:e}", alg.m);
            }
        }
    }

    #[test]
    fn the_result_does_not_depend_on_the_threads() {
        let g = geom(2, 20, (17, 15), 24, 1);
        let (x, w) = (values(2 * 20 * 17 * 15, 4), values(24 * 20 * 9, 5));
        let f = |v: &[f64]| v.iter().map(|&v| v as f32).collect::<Vec<_>>();
        let (x, w) = (f(&x), f(&w));
        let parallel = run(&F4, &x, &w, None, &g);
        let serial = crate::kernels::parallel::on_one_thread(|| run(&F4, &x, &w, None, &g));
        assert_eq!(parallel.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), serial.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
    }

    #[test]
    fn non_finite_values_are_found() {
        assert!(all_finite(&[1.0f32, -2.0, 0.0, f32::MAX]));
        assert!(!all_finite(&[1.0f32, f32::INFINITY]));
        assert!(!all_finite(&[f64::NEG_INFINITY, 1.0]));
        assert!(!all_finite(&[1.0, f64::NAN]));
    }
}
