//! Depthwise 2-D convolution (NCHW input, weight `[c * m, 1, kh, kw]`: each input channel
//! convolved with its own `m` filters), computed directly, with its two adjoints. Any
//! stride, padding and dilation.
//!
//! One input plane at a time is copied into its *phases*: the zero-padded plane `xp`
//! `[hp, wp]` split by the stride into `sh * sw` planes `[hq, wq]` with
//! `P[a][b][i][j] = xp[i * sh + a][j * sw + b]`. Output `(oi, oj)` reads tap `(ki, kj)` at
//! `xp[oi * sh + ki * dh][oj * sw + kj * dw]`, which is phase
//! `(ki * dh % sh, kj * dw % sw)` at `(oi + ki * dh / sh, oj + kj * dw / sw)`: a fixed offset
//! per tap plus the *wide position* `q = oi * wq + oj` once the phases are read as one flat
//! array. So every tap reads a contiguous run, whatever the stride, and the forward pass is
//! one vector loop over the wide positions per plane (positions with `oj >= ow` wrap into
//! the next row; they are computed and dropped). The adjoints walk the same runs row by row,
//! over the valid columns only (a wrapped position may sit on a real input, and a zero
//! times an infinite value there would be NaN where the definition has no term).
//!
//! Every output of the forward pass is a chain of fused multiply-adds over the taps in
//! `(ki, kj)` order from zero, then the bias added. The vector length does not change any
//! element's arithmetic, so every SIMD build gives the same bits, and so does any split of
//! the planes over threads. The gradients' summation orders are fixed by the code too.
//! `depthwise_rows` computes the same bits without the phases for 3x3 kernels at stride 1
//! (and at stride 2 on narrow rows) with AVX2, where it measured faster, and on small planes
//! `depthwise_channels` does, eight channels to a vector.

use super::clamp::Clamp;
use super::fma_tile::{cast, cast_mut};
use super::parallel::num_threads;
use super::simd::{level, multiversion, Level};
use super::{depthwise_channels, depthwise_rows};
use crate::math::Float;
use crate::storage::{standard, Array};
use ndarray::IxDyn;
use rayon::prelude::*;
use std::cell::RefCell;

/// The geometry of one depthwise convolution.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DepthwiseGeom {
    pub n: usize,
    pub c: usize,
    pub h: usize,
    pub w: usize,
    /// Output channels per input channel (the channel multiplier): output channel `o` reads
    /// input channel `o / m`.
    pub m: usize,
    pub kh: usize,
    pub kw: usize,
    pub stride: [usize; 2],
    pub padding: [usize; 2],
    pub dilation: [usize; 2],
}

impl DepthwiseGeom {
    /// Output height and width.
    pub fn out_hw(&self) -> (usize, usize) {
        let len = |n: usize, k: usize, s: usize, p: usize, d: usize| (n + 2 * p - (k - 1) * d - 1) / s + 1;
        (
            len(self.h, self.kh, self.stride[0], self.padding[0], self.dilation[0]),
            len(self.w, self.kw, self.stride[1], self.padding[1], self.dilation[1]),
        )
    }

    /// Output channels: `c * m`.
    pub fn out_channels(&self) -> usize {
        self.c * self.m
    }

    /// Elements of one output plane.
    pub fn out_plane(&self) -> usize {
        let (oh, ow) = self.out_hw();
        oh * ow
    }

    fn in_plane(&self) -> usize {
        self.h * self.w
    }

    fn taps(&self) -> usize {
        self.kh * self.kw
    }

    /// Multiply-adds per input channel of one image, for sizing parallel tasks.
    fn work_per_channel(&self) -> usize {
        self.m * self.out_plane() * self.taps()
    }
}

/// The phase layout of a padded input plane (see the module's docs).
struct Phases {
    /// Columns of one phase plane.
    wq: usize,
    oh: usize,
    ow: usize,
    /// The flat offset of each tap `(ki, kj)`, in the weight's order.
    offsets: Vec<usize>,
    /// Where each input row's column phase 0 starts.
    rows: Vec<usize>,
    /// For each column phase holding input columns: its first column `j0` (the others are
    /// `sw` apart) and where it goes relative to the row's start.
    cols: Vec<(usize, usize)>,
    /// Elements of the phases plus the zeros the last vector may read past them.
    len: usize,
    /// What decides which elements of the phases `fill` writes (see `Scratch::clean`).
    key: FillKey,
}

/// The input and the layout of its phases: scratch zeroed outside the input's positions
/// for one key is so for the next plane of the same key.
type FillKey = [usize; 8];

impl Phases {
    fn new<T>(g: &DepthwiseGeom, slack: usize) -> Phases {
        let ([sh, sw], [ph, pw], [dh, dw]) = (g.stride, g.padding, g.dilation);
        let (oh, ow) = g.out_hw();
        let (hq, wq) = ((g.h + 2 * ph).div_ceil(sh), (g.w + 2 * pw).div_ceil(sw));
        let plane = hq * wq;
        let mut offsets = Vec::with_capacity(g.taps());
        for ki in 0..g.kh {
            for kj in 0..g.kw {
                let (r, c) = (ki * dh, kj * dw);
                offsets.push(((r % sh) * sw + c % sw) * plane + (r / sh) * wq + c / sw);
            }
        }
        let rows = (0..g.h).map(|i| ((i + ph) % sh) * sw * plane + ((i + ph) / sh) * wq).collect();
        let cols = (0..sw)
            .filter_map(|b| {
                let j0 = (b + sw - pw % sw) % sw;
                (j0 < g.w).then_some((j0, b * plane + (j0 + pw) / sw))
            })
            .collect();
        let len = sh * sw * plane + slack;
        let key = [g.h, g.w, sh, sw, ph, pw, len, std::mem::size_of::<T>()];
        Phases { wq, oh, ow, offsets, rows, cols, len, key }
    }

    /// The wide positions that hold every output: `(oh - 1) * wq + ow`.
    fn wide(&self) -> usize {
        (self.oh - 1) * self.wq + self.ow
    }

    /// Copies input plane `x` `[h, w]` into the phases `p`. Only the input's own positions
    /// are written: the rest of `p` (padding, the phases' ragged ends, the slack) must be
    /// zero already, and stays so.
    fn fill<T: Float>(&self, g: &DepthwiseGeom, x: &[T], p: &mut [T]) {
        fill_phases(self, g, x, p);
    }

    /// The adjoint of `fill`: input plane `dx` `[h, w]` read back from the phases `p`.
    fn gather<T: Float>(&self, g: &DepthwiseGeom, p: &[T], dx: &mut [T]) {
        let sw = g.stride[1];
        for (row, &start) in dx.chunks_exact_mut(g.w).zip(&self.rows) {
            for &(j0, at) in &self.cols {
                row[j0..].iter_mut().step_by(sw).zip(&p[start + at..]).for_each(|(d, &v)| *d = v);
            }
        }
    }
}

/// Per-thread buffers reused across calls (as u64 words, aligned for any float).
#[derive(Default)]
struct Scratch {
    words: Vec<u64>,
    /// The key of the phases whose `fill` last used the buffer's start, when nothing else
    /// wrote it since: then it is zero outside the input's positions of that layout, and
    /// the next plane of the same layout need not zero it again.
    clean: Option<FillKey>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// Runs `f` on `len` elements of this thread's scratch (or a fresh one, should the thread's
/// be in use). With `phases`, the first `phases.len` elements come zeroed outside the
/// input's positions in that layout, and `f` must write nothing there but through `fill`;
/// without, they are any values and `f` may write anything.
fn with_scratch<T: Float, R>(len: usize, phases: Option<&Phases>, f: impl FnOnce(&mut [T]) -> R) -> R {
    let run = |s: &mut Scratch| {
        let words = (len * std::mem::size_of::<T>()).div_ceil(8);
        if s.words.len() < words {
            s.words.resize(words, 0);
        }
        // SAFETY: T is f32 or f64 (Float), for which every bit pattern is a value; the words
        // hold at least `len` of them and u64 alignment suits both.
        let buf = unsafe { std::slice::from_raw_parts_mut(s.words.as_mut_ptr() as *mut T, len) };
        let key = phases.map(|p| p.key);
        if let Some(p) = phases
            && s.clean != key
        {
            buf[..p.len].fill(T::zero());
        }
        s.clean = key;
        f(buf)
    };
    SCRATCH.with(|s| match s.try_borrow_mut() {
        Ok(mut s) => run(&mut s),
        Err(_) => run(&mut Scratch::default()),
    })
}

/// Elements of the vectors of the forward loop: a long one for the body of a plane and a
/// short one for its end. Long: 8 registers of accumulators with AVX-512's 32 registers,
/// 4 with 16 (`wide`); short: one AVX-512 register. Must match `wide_body`/`narrow_body`.
fn vector_lens<T>(wide: bool) -> (usize, usize) {
    let lanes = 64 / std::mem::size_of::<T>();
    (if wide { 8 * lanes } else { 4 * lanes }, lanes)
}

/// Splits the `(image, channel)` pairs into parallel tasks of whole pairs, enough work per
/// task to pay for handing it to a thread, a multiple of `multiple` pairs (but the last):
/// `(pairs per task, parallel)`.
fn tasks(g: &DepthwiseGeom, multiple: usize) -> (usize, bool) {
    const MIN_TASK_WORK: usize = 32 * 1024;
    let pairs = g.n * g.c;
    let per_task = MIN_TASK_WORK.div_ceil(g.work_per_channel().max(1)).next_multiple_of(multiple).clamp(1, pairs.max(1));
    (per_task, num_threads() > 1 && pairs > per_task)
}

/// Runs `f(first_pair, chunk)` over `out` cut into chunks of `per_pair * pairs_per_task`
/// elements (pairs per task a multiple of `multiple`), one chunk per task, in parallel when
/// `parallel`.
fn over_pairs<T: Float>(out: &mut [T], per_pair: usize, g: &DepthwiseGeom, multiple: usize, f: impl Fn(usize, &mut [T]) + Sync + Send) {
    let (per_task, parallel) = tasks(g, multiple);
    let chunk = (per_pair * per_task).max(1);
    if parallel {
        out.par_chunks_mut(chunk).enumerate().for_each(|(t, o)| f(t * per_task, o));
    } else {
        out.chunks_mut(chunk).enumerate().for_each(|(t, o)| f(t * per_task, o));
    }
}

/// The depthwise convolution of `x` `[n, c, h, w]` with `w` `[c * m, 1, kh, kw]`, plus `bias`
/// `[c * m]` if given.
#[cfg(test)]
pub fn depthwise2d<T: Float>(x: &Array<T>, w: &Array<T>, bias: Option<&Array<T>>, g: &DepthwiseGeom) -> Array<T> {
    // NaN where the kernel writes nothing, so a test sees an element it skips.
    let mut out = vec![T::zero().div(T::zero()); g.n * g.out_channels() * g.out_plane()];
    depthwise2d_into(x, w, bias, g, &mut out, None, &|_, _| {});
    let (oh, ow) = g.out_hw();
    Array::from_shape_vec(IxDyn(&[g.n, g.out_channels(), oh, ow]), out).expect("length matches dims")
}

/// [`depthwise2d`] into `out` (row-major `[n, c * m, oh, ow]`), calling `after(start, len)`
/// as soon as output elements `start..start + len` are final, on the thread that made them —
/// so an epilogue reads them while they are still in that core's cache. With `clamp` (f32
/// only), the outputs are clamped before `after` sees them.
pub fn depthwise2d_into<T: Float>(
    x: &Array<T>,
    w: &Array<T>,
    bias: Option<&Array<T>>,
    g: &DepthwiseGeom,
    out: &mut [T],
    clamp: Option<Clamp>,
    after: &(dyn Fn(usize, usize) + Sync),
) {
    let (x, w, bias) = (standard(x), standard(w), bias.map(standard));
    let (xs, ws, bs) = (slice_of(&x), slice_of(&w), bias.as_ref().map(slice_of));
    // `depthwise_channels`' tasks each start a group of eight channels.
    let kernel: Option<(Planes, usize)> = if depthwise_channels::applies::<T>(g) {
        Some((depthwise_channels::planes, depthwise_channels::GROUP))
    } else if depthwise_rows::applies::<T>(g) {
        Some((depthwise_rows::planes, 1))
    } else {
        None
    };
    if let Some((planes, multiple)) = kernel {
        // SAFETY: both kernels' `applies` take 4-byte floats only, and the Float of 4 bytes
        // is f32.
        return unsafe { by_planes(planes, multiple, cast(xs), cast(ws), bs.map(|b| cast(b)), g, cast_mut(out), clamp, after) };
    }
    let after = &Clamp::before(clamp, out.as_mut_ptr(), out.len(), after);
    by_phases(xs, ws, bs, g, out, after);
}

/// [`depthwise2d_into`] through the phases (the module's docs), for any geometry.
pub(super) fn by_phases<T: Float>(xs: &[T], ws: &[T], bs: Option<&[T]>, g: &DepthwiseGeom, out: &mut [T], after: &(dyn Fn(usize, usize) + Sync)) {
    // Read the level once: the vector lengths fix the slack and the wide length.
    let wide_vectors = level() == Level::Avx512;
    let (_, short) = vector_lens::<T>(wide_vectors);
    let phases = Phases::new::<T>(g, short);
    let wide = phases.wide().div_ceil(short) * short;
    let (per_pair, taps, in_plane) = (g.m * g.out_plane(), g.taps(), g.in_plane());
    over_pairs(out, per_pair, g, 1, |first, chunk| {
        with_scratch(phases.len + wide, Some(&phases), |s: &mut [T]| {
            let (p, acc) = s.split_at_mut(phases.len);
            for (k, o) in chunk.chunks_mut(per_pair).enumerate() {
                let pair = first + k;
                phases.fill(g, &xs[pair * in_plane..][..in_plane], p);
                for (j, plane) in o.chunks_mut(g.out_plane()).enumerate() {
                    let oc = (pair % g.c) * g.m + j;
                    let taps_w = &ws[oc * taps..][..taps];
                    if wide_vectors {
                        wide_loop(p, &phases.offsets, taps_w, acc);
                    } else {
                        narrow_loop(p, &phases.offsets, taps_w, acc);
                    }
                    compact(acc, bs.map(|b| b[oc]), &phases, plane);
                }
            }
        });
        after(first * per_pair, chunk.len());
    });
}

fn slice_of<T>(a: &Array<T>) -> &[T] {
    a.as_slice().expect("standard layout")
}

/// A kernel's f32 planes of whole pairs from a first one (`depthwise_rows::planes`,
/// `depthwise_channels::planes`), the clamp in registers.
type Planes = fn(&DepthwiseGeom, usize, &[f32], &[f32], Option<&[f32]>, Option<Clamp>, &mut [f32]);

/// [`depthwise2d_into`] by `planes`, on f32 data: tasks of whole pairs, a multiple of
/// `multiple` each, each task's outputs handed to `after`.
#[allow(clippy::too_many_arguments)]
fn by_planes(
    planes: Planes,
    multiple: usize,
    xs: &[f32],
    ws: &[f32],
    bs: Option<&[f32]>,
    g: &DepthwiseGeom,
    out: &mut [f32],
    clamp: Option<Clamp>,
    after: &(dyn Fn(usize, usize) + Sync),
) {
    let per_pair = g.m * g.out_plane();
    over_pairs(out, per_pair, g, multiple, |first, chunk| {
        planes(g, first, xs, ws, bs, clamp, chunk);
        after(first * per_pair, chunk.len());
    });
}

multiversion! {
    /// The wide output `acc` of one plane with AVX-512's vector lengths.
    fn wide_loop<T: Float>(p: &[T], offsets: &[usize], w: &[T], acc: &mut [T]) = wide_body;
}

multiversion! {
    /// The wide output `acc` of one plane with the 16-register vector lengths.
    fn narrow_loop<T: Float>(p: &[T], offsets: &[usize], w: &[T], acc: &mut [T]) = narrow_body;
}

#[inline(always)]
fn wide_body<T: Float>(p: &[T], offsets: &[usize], w: &[T], acc: &mut [T]) {
    if std::mem::size_of::<T>() == 4 {
        plane_loop::<T, 128, 16>(p, offsets, w, acc);
    } else {
        plane_loop::<T, 64, 8>(p, offsets, w, acc);
    }
}

#[inline(always)]
fn narrow_body<T: Float>(p: &[T], offsets: &[usize], w: &[T], acc: &mut [T]) {
    if std::mem::size_of::<T>() == 4 {
        plane_loop::<T, 64, 16>(p, offsets, w, acc);
    } else {
        plane_loop::<T, 32, 8>(p, offsets, w, acc);
    }
}

/// Every wide position of `acc` (a multiple of `S` long): runs of `L`, then of `S`.
#[inline(always)]
fn plane_loop<T: Float, const L: usize, const S: usize>(p: &[T], offsets: &[usize], w: &[T], acc: &mut [T]) {
    let mut q = 0;
    while q + L <= acc.len() {
        run::<T, L>(p, offsets, w, q, acc);
        q += L;
    }
    while q < acc.len() {
        run::<T, S>(p, offsets, w, q, acc);
        q += S;
    }
}

/// Wide positions `q..q + N`: each a chain of fused multiply-adds over the taps, in
/// registers.
#[inline(always)]
fn run<T: Float, const N: usize>(p: &[T], offsets: &[usize], w: &[T], q: usize, acc: &mut [T]) {
    let mut sums = [T::zero(); N];
    for (&off, &wt) in offsets.iter().zip(w) {
        let x: &[T; N] = p[off + q..][..N].try_into().expect("N values");
        for l in 0..N {
            sums[l] = wt.mul_add(x[l], sums[l]);
        }
    }
    acc[q..q + N].copy_from_slice(&sums);
}

multiversion! {
    /// Copies input plane `x` into the phases `p` (see [`Phases::fill`]).
    fn fill_phases<T: Float>(phases: &Phases, g: &DepthwiseGeom, x: &[T], p: &mut [T]) = fill_phases_body;
}

#[inline(always)]
fn fill_phases_body<T: Float>(phases: &Phases, g: &DepthwiseGeom, x: &[T], p: &mut [T]) {
    for (row, &start) in x.chunks_exact(g.w).zip(&phases.rows) {
        match (g.stride[1], &phases.cols[..]) {
            (1, _) => p[start + phases.cols[0].1..][..g.w].copy_from_slice(row),
            (2, &[(ja, oa), (_, ob)]) => {
                // The even columns to one phase, the odd ones to the other.
                let (even, odd) = if ja == 0 { (oa, ob) } else { (ob, oa) };
                let (lo, hi) = (even.min(odd), even.max(odd));
                let (first, second) = p[start..].split_at_mut(hi);
                let (first, second) = (&mut first[lo..][..g.w / 2], &mut second[..g.w / 2]);
                let (e, o) = if even < odd { (first, second) } else { (second, first) };
                for ((e, o), pair) in e.iter_mut().zip(o.iter_mut()).zip(row.chunks_exact(2)) {
                    (*e, *o) = (pair[0], pair[1]);
                }
                if g.w % 2 == 1 {
                    p[start + even + g.w / 2] = row[g.w - 1];
                }
            }
            (sw, cols) => {
                for &(j0, at) in cols {
                    p[start + at..].iter_mut().zip(row[j0..].iter().step_by(sw)).for_each(|(d, &v)| *d = v);
                }
            }
        }
    }
}

multiversion! {
    /// Drops the wrapped wide positions and adds the bias: `out[oi, oj] = acc[oi * wq + oj]
    /// (+ bias)`.
    fn compact<T: Float>(acc: &[T], bias: Option<T>, phases: &Phases, out: &mut [T]) = compact_body;
}

#[inline(always)]
fn compact_body<T: Float>(acc: &[T], bias: Option<T>, phases: &Phases, out: &mut [T]) {
    for (oi, row) in out.chunks_exact_mut(phases.ow).enumerate() {
        let from = &acc[oi * phases.wq..][..phases.ow];
        match bias {
            // A bias that is not NaN takes `add`'s bits without its select (see `Num`).
            Some(b) if !b.is_nan_value() => row.iter_mut().zip(from).for_each(|(d, &v)| *d = v.add_plain(b)),
            Some(b) => row.iter_mut().zip(from).for_each(|(d, &v)| *d = v.add(b)),
            None => row.copy_from_slice(from),
        }
    }
}

/// The gradient with respect to the input, from the output gradient `gy`
/// `[n, c * m, oh, ow]` and the weight `w` `[c * m, 1, kh, kw]`. Each input element sums its
/// terms in (output channel, output row, tap) order.
pub fn depthwise2d_input_grad<T: Float>(gy: &Array<T>, w: &Array<T>, g: &DepthwiseGeom) -> Array<T> {
    let (gy, w) = (standard(gy), standard(w));
    let (gs, ws) = (slice_of(&gy), slice_of(&w));
    let phases = Phases::new::<T>(g, 0);
    let (out_plane, taps, in_plane) = (g.out_plane(), g.taps(), g.in_plane());
    let mut dx = vec![T::zero(); g.n * g.c * in_plane];
    over_pairs(&mut dx, in_plane, g, 1, |first, chunk| {
        with_scratch(phases.len, None, |p: &mut [T]| {
            for (k, d) in chunk.chunks_mut(in_plane).enumerate() {
                let pair = first + k;
                p.fill(T::zero());
                for j in 0..g.m {
                    let oc = (pair % g.c) * g.m + j;
                    let gy_plane = &gs[(pair * g.m + j) * out_plane..][..out_plane];
                    scatter_plane(gy_plane, &ws[oc * taps..][..taps], &phases, p);
                }
                phases.gather(g, p, d);
            }
        });
    });
    Array::from_shape_vec(IxDyn(&[g.n, g.c, g.h, g.w]), dx).expect("length matches dims")
}

multiversion! {
    /// Adds one output plane's gradient `gy` `[oh, ow]` times each tap's weight into the
    /// phases `p`, row by row over the valid columns.
    fn scatter_plane<T: Float>(gy: &[T], w: &[T], phases: &Phases, p: &mut [T]) = scatter_plane_body;
}

#[inline(always)]
fn scatter_plane_body<T: Float>(gy: &[T], w: &[T], phases: &Phases, p: &mut [T]) {
    for (oi, row) in gy.chunks_exact(phases.ow).enumerate() {
        for (&off, &wt) in phases.offsets.iter().zip(w) {
            let dst = &mut p[off + oi * phases.wq..][..phases.ow];
            dst.iter_mut().zip(row).for_each(|(d, &v)| *d = wt.mul_add(v, *d));
        }
    }
}

/// Lanes of the weight gradient's dot products (fixed, so the sums do not depend on the
/// SIMD level).
const DOT_LANES: usize = 16;

/// The gradient with respect to the weight: for each output channel and tap, the sum over
/// images and output positions of `gy * x` under that tap, in lanes of [`DOT_LANES`] output
/// columns (the last partial lane group summed apart), the lanes then added in order.
pub fn depthwise2d_weight_grad<T: Float>(x: &Array<T>, gy: &Array<T>, g: &DepthwiseGeom) -> Array<T> {
    let (x, gy) = (standard(x), standard(gy));
    let (xs, gs) = (slice_of(&x), slice_of(&gy));
    let phases = Phases::new::<T>(g, 0);
    let (out_plane, taps, in_plane) = (g.out_plane(), g.taps(), g.in_plane());
    let per_channel = g.m * taps;
    let mut dw = vec![T::zero(); g.c * per_channel];
    let channel = |ci: usize, dw: &mut [T]| {
        with_scratch(phases.len, Some(&phases), |p: &mut [T]| {
            // Per (output channel, tap): the lanes and the partial group's sum.
            let mut lanes = vec![[T::zero(); DOT_LANES]; per_channel];
            let mut tails = vec![T::zero(); per_channel];
            for n in 0..g.n {
                phases.fill(g, &xs[(n * g.c + ci) * in_plane..][..in_plane], p);
                for j in 0..g.m {
                    let gy_plane = &gs[((n * g.c + ci) * g.m + j) * out_plane..][..out_plane];
                    let at = j * taps..(j + 1) * taps;
                    dot_plane(gy_plane, p, &phases, &mut lanes[at.clone()], &mut tails[at]);
                }
            }
            for ((d, l), &t) in dw.iter_mut().zip(&lanes).zip(&tails) {
                *d = l.iter().fold(T::zero(), |s, &v| s.add(v)).add(t);
            }
        });
    };
    if num_threads() > 1 && g.c > 1 && g.n * g.c * g.work_per_channel() >= 64 * 1024 {
        dw.par_chunks_mut(per_channel).enumerate().for_each(|(ci, d)| channel(ci, d));
    } else {
        dw.chunks_mut(per_channel).enumerate().for_each(|(ci, d)| channel(ci, d));
    }
    Array::from_shape_vec(IxDyn(&[g.out_channels(), 1, g.kh, g.kw]), dw).expect("length matches dims")
}

multiversion! {
    /// Adds, for each tap, the products of one output plane's gradient `gy` `[oh, ow]` with
    /// the inputs under that tap into its lanes and tail.
    fn dot_plane<T: Float>(gy: &[T], p: &[T], phases: &Phases, lanes: &mut [[T; DOT_LANES]], tails: &mut [T]) = dot_plane_body;
}

#[inline(always)]
fn dot_plane_body<T: Float>(gy: &[T], p: &[T], phases: &Phases, lanes: &mut [[T; DOT_LANES]], tails: &mut [T]) {
    let whole = phases.ow / DOT_LANES * DOT_LANES;
    for (oi, row) in gy.chunks_exact(phases.ow).enumerate() {
        for ((&off, lane), tail) in phases.offsets.iter().zip(lanes.iter_mut()).zip(tails.iter_mut()) {
            let xs = &p[off + oi * phases.wq..][..phases.ow];
            for (gv, xv) in row[..whole].chunks_exact(DOT_LANES).zip(xs[..whole].chunks_exact(DOT_LANES)) {
                for l in 0..DOT_LANES {
                    lane[l] = gv[l].mul_add(xv[l], lane[l]);
                }
            }
            for (&gv, &xv) in row[whole..].iter().zip(&xs[whole..]) {
                *tail = gv.mul_add(xv, *tail);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The input under tap `(ki, kj)` of output `(oi, oj)` of plane `x`, or zero in the padding.
    fn under(x: &[f64], g: &DepthwiseGeom, oi: usize, oj: usize, ki: usize, kj: usize) -> Option<f64> {
        let ih = (oi * g.stride[0] + ki * g.dilation[0]) as isize - g.padding[0] as isize;
        let iw = (oj * g.stride[1] + kj * g.dilation[1]) as isize - g.padding[1] as isize;
        let inside = ih >= 0 && iw >= 0 && (ih as usize) < g.h && (iw as usize) < g.w;
        inside.then(|| x[ih as usize * g.w + iw as usize])
    }

    /// The convolution by the definition, each output a fused multiply-add chain over the
    /// taps from zero, then the bias added.
    fn naive(x: &[f64], w: &[f64], b: &[f64], g: &DepthwiseGeom) -> Vec<f64> {
        let (oh, ow) = g.out_hw();
        let mut out = Vec::new();
        for n in 0..g.n {
            for oc in 0..g.out_channels() {
                let plane = &x[(n * g.c + oc / g.m) * g.h * g.w..][..g.h * g.w];
                for oi in 0..oh {
                    for oj in 0..ow {
                        let mut s = 0.0f64;
                        for ki in 0..g.kh {
                            for kj in 0..g.kw {
                                let v = under(plane, g, oi, oj, ki, kj).unwrap_or(0.0);
                                s = w[(oc * g.kh + ki) * g.kw + kj].mul_add(v, s);
                            }
                        }
                        out.push(s + b[oc]);
                    }
                }
            }
        }
        out
    }

    fn geoms() -> Vec<DepthwiseGeom> {
        let mut v = Vec::new();
        for (h, w) in [(5, 7), (6, 6), (1, 9)] {
            for (kh, kw) in [(1, 1), (3, 3), (2, 3), (1, 5)] {
                for stride in [[1, 1], [2, 2], [1, 3]] {
                    for padding in [[0, 0], [1, 1], [2, 0]] {
                        for dilation in [[1, 1], [2, 1]] {
                            for m in [1, 2] {
                                let g = DepthwiseGeom { n: 2, c: 3, h, w, m, kh, kw, stride, padding, dilation };
                                if h + 2 * padding[0] > (kh - 1) * dilation[0] && w + 2 * padding[1] > (kw - 1) * dilation[1] {
                                    v.push(g);
                                }
                            }
                        }
                    }
                }
            }
        }
        v
    }

    fn values(len: usize, seed: u64) -> Vec<f64> {
        (0..len as u64).map(|i| ((i * 2654435761 + seed * 97) % 1999) as f64 / 997.0 - 1.0).collect()
    }

    fn array(v: Vec<f64>, dims: &[usize]) -> Array<f64> {
        Array::from_shape_vec(IxDyn(dims), v).unwrap()
    }

    #[test]
    fn a_hand_computed_plane() {
        // x = [[1, 2, 3], [4, 5, 6], [7, 8, 9]], w = [[0, 1, 0], [1, -4, 1], [0, 1, 0]] (the
        // Laplacian), padding 1: corner (0, 0) = -4*1 + 2 + 4 = 2; centre = -20 + 2+4+6+8 = 0;
        // edge (0, 1) = -4*2 + 1 + 3 + 5 = 1. Plus the bias 0.5.
        let g = DepthwiseGeom { n: 1, c: 1, h: 3, w: 3, m: 1, kh: 3, kw: 3, stride: [1, 1], padding: [1, 1], dilation: [1, 1] };
        let x = array((1..=9).map(f64::from).collect(), &[1, 1, 3, 3]);
        let w = array(vec![0.0, 1.0, 0.0, 1.0, -4.0, 1.0, 0.0, 1.0, 0.0], &[1, 1, 3, 3]);
        let b = array(vec![0.5], &[1]);
        let y = depthwise2d(&x, &w, Some(&b), &g);
        let want = [2.0, 1.0, -4.0, -3.0, 0.0, -7.0, -16.0, -11.0, -22.0].map(|v| v + 0.5);
        assert_eq!(y.as_slice().unwrap(), want);
        // Stride 2 keeps the corners.
        let g2 = DepthwiseGeom { stride: [2, 2], ..g };
        assert_eq!(depthwise2d(&x, &w, Some(&b), &g2).as_slice().unwrap(), [2.5, -3.5, -15.5, -21.5]);
    }

    #[test]
    fn the_forward_pass_is_the_definition_bit_for_bit_at_every_level() {
        let _only_this_test_caps_the_level = crate::kernels::simd::LEVEL_CAPS.lock().unwrap_or_else(|e| e.into_inner());
        for g in geoms() {
            let x = values(g.n * g.c * g.h * g.w, 1);
            let w = values(g.out_channels() * g.taps(), 2);
            let b = values(g.out_channels(), 3);
            let want: Vec<u64> = naive(&x, &w, &b, &g).iter().map(|v| v.to_bits()).collect();
            let (xa, wa, ba) = (array(x, &[g.n, g.c, g.h, g.w]), array(w, &[g.out_channels(), 1, g.kh, g.kw]), array(b, &[g.out_channels()]));
            for cap in [Level::Baseline, Level::Avx2, Level::Avx512] {
                crate::kernels::simd::set_max_level(cap);
                let y = depthwise2d(&xa, &wa, Some(&ba), &g);
                crate::kernels::simd::set_max_level(Level::Avx512);
                assert_eq!(y.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), want, "{g:?} at {cap:?}");
            }
        }
    }

    #[test]
    fn the_rows_kernel_gives_the_phases_bits_over_channels_multipliers_and_threads() {
        // f32 3x3 layers at stride 1 and 2 run by `depthwise_rows` with AVX2 in use: every
        // output as the phases path gives it, and the epilogue's hook sees every element once,
        // on one thread and on the pool (a task's planes follow each other in one buffer, which
        // `depthwise_rows`'s stores rely on). Rows wider than 32 at stride 2 keep the phases.
        let _only_this_test_caps_the_level = crate::kernels::simd::LEVEL_CAPS.lock().unwrap_or_else(|e| e.into_inner());
        let cases = [(7, 7, 1, [1, 1], 1), (5, 3, 2, [1, 1], 1), (9, 17, 1, [2, 0], 1), (2, 11, 3, [1, 1], 1), (14, 14, 1, [1, 1], 1)];
        let strided = [(14, 14, 1, [1, 1], 2), (9, 23, 2, [1, 1], 2), (28, 28, 1, [1, 1], 2), (3, 5, 1, [2, 0], 2), (30, 56, 1, [1, 1], 2)];
        for (h, w, m, padding, s) in cases.into_iter().chain(strided) {
            let g = DepthwiseGeom { n: 2, c: 5, h, w, m, kh: 3, kw: 3, stride: [s, s], padding, dilation: [1, 1] };
            let f32s = |len: usize, seed: u64| -> Vec<f32> { crate::kernels::test_values(len, seed).iter().map(|&v| v as f32).collect() };
            let arr = |v: Vec<f32>, d: &[usize]| Array::from_shape_vec(IxDyn(d), v).unwrap();
            let (oc, total) = (g.out_channels(), g.n * g.out_channels() * g.out_plane());
            let (xa, wa, ba) = (arr(f32s(g.n * g.c * h * w, 1), &[g.n, g.c, h, w]), arr(f32s(oc * 9, 2), &[oc, 1, 3, 3]), arr(f32s(oc, 3), &[oc]));
            let phases = {
                let mut out = vec![f32::NAN; total];
                by_phases(slice_of(&xa), slice_of(&wa), Some(slice_of(&ba)), &g, &mut out, &|_, _| {});
                out
            };
            for alone in [true, false] {
                crate::kernels::simd::set_max_level(Level::Avx2);
                let rows = depthwise_rows::applies::<f32>(&g);
                let seen = std::sync::Mutex::new(vec![0; total]);
                let mut out = vec![f32::NAN; total];
                let run = |out: &mut [f32]| {
                    depthwise2d_into(&xa, &wa, Some(&ba), &g, out, None, &|s, l| seen.lock().unwrap()[s..s + l].iter_mut().for_each(|v| *v += 1))
                };
                if alone {
                    crate::kernels::parallel::on_one_thread(|| run(&mut out));
                } else {
                    run(&mut out);
                }
                crate::kernels::simd::set_max_level(Level::Avx512);
                assert_eq!(rows, crate::kernels::simd::machine_level() >= Level::Avx2 && (s == 1 || w <= 32), "{g:?}");
                assert_eq!(
                    out.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                    phases.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                    "{g:?} alone {alone}"
                );
                assert_eq!(seen.into_inner().unwrap(), vec![1; total], "{g:?} alone {alone}");
            }
        }
    }

    #[test]
    fn the_gradients_are_the_adjoints_of_the_forward_pass() {
        // <conv(x, w), gy> == <x, dx(gy, w)> == <w, dw(x, gy)> for integer-valued data (exact
        // in f64).
        let ints = |len: usize, k: usize| (0..len).map(|i| ((i * k) % 7) as f64 - 3.0).collect::<Vec<_>>();
        for g in geoms() {
            let (oc, (oh, ow)) = (g.out_channels(), g.out_hw());
            let (x, w, gy) = (ints(g.n * g.c * g.h * g.w, 5), ints(oc * g.taps(), 3), ints(g.n * oc * oh * ow, 11));
            let (xa, wa, gya) =
                (array(x.clone(), &[g.n, g.c, g.h, g.w]), array(w.clone(), &[oc, 1, g.kh, g.kw]), array(gy.clone(), &[g.n, oc, oh, ow]));
            let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(a, b)| a * b).sum::<f64>();
            let y = depthwise2d(&xa, &wa, None, &g);
            let dx = depthwise2d_input_grad(&gya, &wa, &g);
            let dw = depthwise2d_weight_grad(&xa, &gya, &g);
            assert_eq!(dot(y.as_slice().unwrap(), &gy), dot(&x, dx.as_slice().unwrap()), "dx {g:?}");
            assert_eq!(dot(y.as_slice().unwrap(), &gy), dot(&w, dw.as_slice().unwrap()), "dw {g:?}");
        }
    }

    #[test]
    fn an_infinite_input_on_a_dropped_position_stays_out_of_the_weight_gradient() {
        // Stride 1, no padding, 1x2 kernel on a row of 3: outputs read columns (0, 1) and
        // (1, 2); the wide position after the last output would read column 2 with tap 0.
        let g = DepthwiseGeom { n: 1, c: 1, h: 2, w: 3, m: 1, kh: 1, kw: 2, stride: [1, 1], padding: [0, 0], dilation: [1, 1] };
        let x = array(vec![1.0, 2.0, f64::INFINITY, 1.0, 2.0, 3.0], &[1, 1, 2, 3]);
        let gy = array(vec![1.0, 0.0, 1.0, 1.0], &[1, 1, 2, 2]);
        // Tap 0 reads x[.., 0..2] = 1, 2, 1, 2 against 1, 0, 1, 1; tap 1 reads 2, inf, 2, 3.
        let dw = depthwise2d_weight_grad(&x, &gy, &g);
        assert_eq!(dw.as_slice().unwrap()[0], 1.0 + 1.0 + 2.0);
        assert!(dw.as_slice().unwrap()[1].is_nan(), "0 * inf is a term of tap 1");
    }
}
