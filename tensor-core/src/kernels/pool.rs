//! 2-D max pooling over NCHW input and its adjoint, one (image, channel) plane per parallel
//! task. The gradient goes to the first maximum of each window, as in PyTorch. Padding is
//! taps skipped, the `-inf` borders ONNX's and PyTorch's definitions add, without copying the
//! input into a larger buffer (a window wholly in the padding is `-inf` and passes no
//! gradient). The common 2x2 window has its own unrolled loop, other windows a separable
//! pass (rows, then columns); every path picks the element the row-major scan of the
//! window's in-bounds taps picks, with the same comparison.

use super::parallel::par_min_len;
use super::scratch::with_scratch;
use crate::math::Float;
use crate::storage::{standard, Array};
use ndarray::IxDyn;
use rayon::prelude::*;
use std::mem::MaybeUninit;

/// The geometry of one pooling.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PoolGeom {
    pub h: usize,
    pub w: usize,
    pub kernel: [usize; 2],
    pub stride: [usize; 2],
    /// Skipped taps on each side (top and bottom, left and right).
    pub padding: [usize; 2],
}

impl PoolGeom {
    /// Output height and width.
    pub fn out_hw(&self) -> (usize, usize) {
        let len = |n: usize, d: usize| (n + 2 * self.padding[d] - self.kernel[d]) / self.stride[d] + 1;
        (len(self.h, 0), len(self.w, 1))
    }

    /// The in-bounds input rows (`d` 0) or columns (`d` 1) of output `o`'s window along `d`,
    /// `n` long: the window's span less the padding (empty for a window wholly in it).
    #[inline(always)]
    fn taps(&self, d: usize, o: usize, n: usize) -> std::ops::Range<usize> {
        let (start, p) = (o * self.stride[d], self.padding[d]);
        let end = (start + self.kernel[d]).min(n + p);
        start.max(p) - p..end.max(p) - p
    }
}

/// True when `v` replaces the current best `b`: larger, or NaN (the first NaN wins).
#[inline(always)]
fn better<T: Float>(v: T, b: T) -> bool {
    !b.is_nan_value() && (v.is_nan_value() || v > b)
}

/// The flat index within the plane and the value of the first maximum of the (non-empty)
/// window of rows `rows` and columns `cols`, scanned row by row.
#[inline(always)]
fn window_argmax<T: Float>(plane: &[T], w: usize, rows: std::ops::Range<usize>, cols: std::ops::Range<usize>) -> (usize, T) {
    let start = rows.start * w + cols.start;
    let (mut best, mut bv) = (start, plane[start]);
    for r in rows {
        let row = &plane[r * w + cols.start..r * w + cols.end];
        for (kj, &v) in row.iter().enumerate() {
            if better(v, bv) {
                best = r * w + cols.start + kj;
                bv = v;
            }
        }
    }
    (best, bv)
}

/// Calls `f(output index, argmax index, max value)` for every window of one plane with an
/// in-bounds tap (a window wholly in the padding has no maximum to report).
#[inline(always)]
fn for_each_window<T: Float>(plane: &[T], g: &PoolGeom, mut f: impl FnMut(usize, usize, T)) {
    let (oh, ow) = g.out_hw();
    for oi in 0..oh {
        let rows = g.taps(0, oi, g.h);
        for oj in 0..ow {
            let cols = g.taps(1, oj, g.w);
            if !rows.is_empty() && !cols.is_empty() {
                let (i, v) = window_argmax(plane, g.w, rows.clone(), cols);
                f(oi * ow + oj, i, v);
            }
        }
    }
}

/// Folds `src`'s values, `stride` apart from `src[0]`, into `acc`, each the first maximum of
/// itself and the new value: one tap of a window for `acc.len()` windows at once.
#[inline(always)]
fn fold_first_max<T: Float>(acc: &mut [T], src: &[T], stride: usize) {
    match stride {
        // Unit and pair strides as plain slices, so the loop vectorizes.
        1 => acc.iter_mut().zip(src).for_each(|(a, &v)| *a = first_max_of_2(*a, v)),
        2 => acc.iter_mut().zip(src.chunks(2)).for_each(|(a, v)| *a = first_max_of_2(*a, v[0])),
        _ => acc.iter_mut().zip(src.iter().step_by(stride)).for_each(|(a, &v)| *a = first_max_of_2(*a, v)),
    }
}

/// The outputs `o` along dim `d` whose window holds tap `k` in bounds (`n` long): `o * stride
/// + k - padding` in `0..n`, as a range of outputs and the input index of its first.
#[inline(always)]
fn tap_outputs(g: &PoolGeom, d: usize, k: usize, n: usize, outs: usize) -> (std::ops::Range<usize>, usize) {
    let (s, p) = (g.stride[d], g.padding[d]);
    let lo = if k >= p { 0 } else { (p - k).div_ceil(s) };
    // The last output whose tap is below n: o * s + k - p <= n - 1.
    let hi = if n + p > k { ((n + p - k - 1) / s + 1).min(outs) } else { 0 };
    let lo = lo.min(hi);
    (lo..hi, (lo * s + k).saturating_sub(p))
}

super::simd::multiversion! {
    /// Max pooling of one plane by any window, separably: each input row's windows along the
    /// width (tap by tap, into `rows`, `h * ow`), then each output the first maximum of its
    /// window's rows. Starting from `-inf` changes no first maximum ("larger, or the first
    /// NaN" never prefers `-inf`, and a later `-inf` never replaces an earlier one), and
    /// leaves `-inf` where a window has no tap. With a stride along the width, each row is
    /// first split into its stride phases (into `phases`, `w` long), so every tap reads a
    /// contiguous run and the folds vectorize.
    fn pool_separable<T: Float>(plane: &[T], g: &PoolGeom, out: &mut [T], rows: &mut [T], phases: &mut [T]) = pool_separable_body;
}

#[inline(always)]
fn pool_separable_body<T: Float>(plane: &[T], g: &PoolGeom, out: &mut [T], rows: &mut [T], phases: &mut [T]) {
    let (oh, ow) = g.out_hw();
    let s = g.stride[1];
    // Each tap's outputs along the width and where its run starts in the split row: the same
    // for every row, so worked out once (the divisions cost as much as the folds).
    let taps: smallvec::SmallVec<[(std::ops::Range<usize>, usize); 8]> = (0..g.kernel[1])
        .map(|kj| tap_outputs(g, 1, kj, g.w, ow))
        .filter(|(outs, _)| !outs.is_empty())
        // Input `first + j * s` is element `first / s + j` of phase `first % s`.
        .map(|(outs, first)| (outs, phase_start(g.w, s, first % s) + first / s))
        .collect();
    rows.fill(T::lowest());
    for (row, acc) in plane.chunks_exact(g.w).zip(rows.chunks_exact_mut(ow)) {
        let src = if s == 1 {
            row
        } else {
            split_phases(row, s, phases);
            &*phases
        };
        for (outs, at) in &taps {
            fold_first_max(&mut acc[outs.clone()], &src[*at..], 1);
        }
    }
    out.fill(T::lowest());
    for ki in 0..g.kernel[0] {
        let (outs, first) = tap_outputs(g, 0, ki, g.h, oh);
        for (o, r) in outs.zip((first..).step_by(g.stride[0])) {
            fold_first_max(&mut out[o * ow..][..ow], &rows[r * ow..][..ow], 1);
        }
    }
}

/// Where phase `b` of a row of `w` split by stride `s` starts: phase `b'` holds
/// `ceil((w - b') / s)` elements, and the phases lie one after another.
#[inline(always)]
fn phase_start(w: usize, s: usize, b: usize) -> usize {
    (0..b).map(|b| (w - b.min(w)).div_ceil(s)).sum()
}

/// `row` split into its `s` stride phases, one after another in `dst`: phase `b` holds
/// `row[b]`, `row[b + s]`, ...
#[inline(always)]
fn split_phases<T: Float>(row: &[T], s: usize, dst: &mut [T]) {
    if s == 2 {
        let (even, odd) = dst[..row.len()].split_at_mut(row.len().div_ceil(2));
        for ((e, o), p) in even.iter_mut().zip(odd.iter_mut()).zip(row.chunks_exact(2)) {
            (*e, *o) = (p[0], p[1]);
        }
        if row.len() % 2 == 1 {
            even[even.len() - 1] = row[row.len() - 1];
        }
        return;
    }
    let mut at = 0;
    for b in 0..s.min(row.len()) {
        for (d, &v) in dst[at..].iter_mut().zip(row[b..].iter().step_by(s)) {
            *d = v;
            at += 1;
        }
    }
}

/// The common 2x2 window with stride 2 and no padding: windows do not overlap, and each
/// output row reads two whole input rows, so the loops below vectorize.
fn is_2x2(g: &PoolGeom) -> bool {
    g.kernel == [2, 2] && g.stride == [2, 2] && g.padding == [0, 0]
}

/// The window's four values in scan order (`a b` over `c d`) to the first maximum, and its
/// position in that order: the same choice `window_argmax` makes, as selects.
#[inline(always)]
fn first_max_of_4<T: Float>(a: T, b: T, c: T, d: T) -> (T, u8) {
    let (mut bv, mut at) = (a, 0u8);
    for (k, v) in [(1, b), (2, c), (3, d)] {
        let take = better(v, bv);
        bv = if take { v } else { bv };
        at = if take { k } else { at };
    }
    (bv, at)
}

super::simd::multiversion! {
    /// 2x2/2 max pooling of one plane of width `w` into `out` (`ow` values per row).
    fn pool_2x2<T: Float>(plane: &[T], w: usize, ow: usize, out: &mut [T]) = pool_2x2_body;
}

#[inline(always)]
fn pool_2x2_body<T: Float>(plane: &[T], w: usize, ow: usize, out: &mut [T]) {
    for (oi, o) in out.chunks_exact_mut(ow).enumerate() {
        let (r0, r1) = (&plane[2 * oi * w..][..2 * ow], &plane[(2 * oi + 1) * w..][..2 * ow]);
        for ((o, p), q) in o.iter_mut().zip(r0.chunks_exact(2)).zip(r1.chunks_exact(2)) {
            *o = first_max_of_4(p[0], p[1], q[0], q[1]).0;
        }
    }
}

/// The first maximum of two values in scan order (`a` before `b`).
#[inline(always)]
fn first_max_of_2<T: Float>(a: T, b: T) -> T {
    if better(b, a) {
        b
    } else {
        a
    }
}

super::simd::multiversion! {
    /// `pool_2x2` for a plane of even width `2 * ow`, in two passes whose loops are long
    /// enough to vectorize when rows are short (LeNet's 14 and 5 outputs per row): each
    /// horizontal pair's first maximum over the whole plane at once (every row holds whole
    /// pairs), into `pairs` (`h * ow`), then each output the first maximum of its two pairs.
    /// "Larger, or the first NaN" is a strict weak order, so picking the first maximum of
    /// the two pairs' first maxima picks the element the one-window scan picks.
    fn pool_2x2_even<T: Float>(plane: &[T], ow: usize, out: &mut [T], pairs: &mut [MaybeUninit<T>]) = pool_2x2_even_body;
}

#[inline(always)]
fn pool_2x2_even_body<T: Float>(plane: &[T], ow: usize, out: &mut [T], pairs: &mut [MaybeUninit<T>]) {
    let pairs = &mut pairs[..plane.len() / 2];
    for (d, p) in pairs.iter_mut().zip(plane.chunks_exact(2)) {
        d.write(first_max_of_2(p[0], p[1]));
    }
    // SAFETY: the loop wrote every element of `pairs` (one per pair of the plane).
    let pairs = unsafe { &*(pairs as *const [MaybeUninit<T>] as *const [T]) };
    for (oi, o) in out.chunks_exact_mut(ow).enumerate() {
        let (top, bottom) = (&pairs[2 * oi * ow..][..ow], &pairs[(2 * oi + 1) * ow..][..ow]);
        for ((o, &t), &b) in o.iter_mut().zip(top).zip(bottom) {
            *o = first_max_of_2(t, b);
        }
    }
}

super::simd::multiversion! {
    /// The gradient of `pool_2x2` for one plane: each output gradient goes to its window's
    /// first maximum (as `0 + g`, the sum the general path makes), zeros elsewhere; `dx` is
    /// zero-filled by the caller (rows and columns no window covers stay zero).
    fn pool_2x2_grad<T: Float>(plane: &[T], gy: &[T], w: usize, ow: usize, dx: &mut [T]) = pool_2x2_grad_body;
}

#[inline(always)]
fn pool_2x2_grad_body<T: Float>(plane: &[T], gy: &[T], w: usize, ow: usize, dx: &mut [T]) {
    for (oi, gr) in gy.chunks_exact(ow).enumerate() {
        let (r0, r1) = (&plane[2 * oi * w..][..2 * ow], &plane[(2 * oi + 1) * w..][..2 * ow]);
        let (d0, d1) = dx[2 * oi * w..][..2 * w].split_at_mut(w);
        let (d0, d1) = (&mut d0[..2 * ow], &mut d1[..2 * ow]);
        for ((((&g, p), q), e), f) in
            gr.iter().zip(r0.chunks_exact(2)).zip(r1.chunks_exact(2)).zip(d0.chunks_exact_mut(2)).zip(d1.chunks_exact_mut(2))
        {
            let at = first_max_of_4(p[0], p[1], q[0], q[1]).1;
            let v = T::zero().add_plain(g); // zero is not NaN: the plain sum has add's bits
            e[0] = if at == 0 { v } else { T::zero() };
            e[1] = if at == 1 { v } else { T::zero() };
            f[0] = if at == 2 { v } else { T::zero() };
            f[1] = if at == 3 { v } else { T::zero() };
        }
    }
}

fn planes<T: Send>(out: &mut [T], len: usize, total: usize, f: impl Fn(usize, &mut [T]) + Sync) {
    if total >= par_min_len() / 4 {
        out.par_chunks_mut(len.max(1)).enumerate().with_min_len(4).for_each(|(p, o)| f(p, o));
    } else {
        out.chunks_mut(len.max(1)).enumerate().for_each(|(p, o)| f(p, o));
    }
}

/// Max pooling of `x` `[n, c, h, w]`.
pub fn max_pool2d<T: Float>(x: &Array<T>, g: &PoolGeom) -> Array<T> {
    let x = standard(x);
    let xs = x.as_slice().expect("standard");
    let (n, c) = (x.shape()[0], x.shape()[1]);
    let (oh, ow) = g.out_hw();
    let mut out = vec![T::zero(); n * c * oh * ow];
    planes(&mut out, oh * ow, xs.len(), |p, o| {
        let plane = &xs[p * g.h * g.w..][..g.h * g.w];
        if is_2x2(g) && g.w == 2 * ow {
            // Scratch for the pairs on the stack for planes up to 64x32 (no allocation).
            let mut stack = [const { MaybeUninit::uninit() }; 1024];
            let mut heap: Vec<T> = Vec::new();
            let pairs = if g.h * ow <= stack.len() {
                &mut stack[..]
            } else {
                heap.reserve_exact(g.h * ow);
                &mut heap.spare_capacity_mut()[..g.h * ow]
            };
            pool_2x2_even(plane, ow, o, pairs);
        } else if is_2x2(g) {
            pool_2x2(plane, g.w, ow, o);
        } else {
            with_scratch(g.h * ow + g.w, |s| {
                let (rows, phases) = s.split_at_mut(g.h * ow);
                pool_separable(plane, g, o, rows, phases)
            });
        }
    });
    Array::from_shape_vec(IxDyn(&[n, c, oh, ow]), out).expect("length matches dims")
}

/// The gradient of max pooling with respect to `x`, from the output gradient `gy`.
pub fn max_pool2d_grad<T: Float>(x: &Array<T>, gy: &Array<T>, g: &PoolGeom) -> Array<T> {
    let (x, gy) = (standard(x), standard(gy));
    let (xs, gs) = (x.as_slice().expect("standard"), gy.as_slice().expect("standard"));
    let (oh, ow) = g.out_hw();
    let mut dx = vec![T::zero(); xs.len()];
    planes(&mut dx, g.h * g.w, xs.len(), |p, d| {
        let plane = &xs[p * g.h * g.w..][..g.h * g.w];
        let gp = &gs[p * oh * ow..][..oh * ow];
        if is_2x2(g) {
            pool_2x2_grad(plane, gp, g.w, ow, d);
        } else {
            for_each_window(plane, g, |k, i, _| d[i] = d[i].add(gp[k]));
        }
    });
    Array::from_shape_vec(x.raw_dim(), dx).expect("same shape")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first maximum by the definition (NaN counts as the largest) of each window's
    /// in-bounds taps, scanned row by row: `None` for a window wholly in the padding.
    fn naive(plane: &[f64], g: &PoolGeom) -> Vec<Option<(usize, f64)>> {
        let (oh, ow) = g.out_hw();
        let mut out = Vec::new();
        for oi in 0..oh {
            for oj in 0..ow {
                let mut best: Option<usize> = None;
                for ki in 0..g.kernel[0] {
                    for kj in 0..g.kernel[1] {
                        let (r, c) =
                            ((oi * g.stride[0] + ki) as isize - g.padding[0] as isize, (oj * g.stride[1] + kj) as isize - g.padding[1] as isize);
                        if r < 0 || c < 0 || r >= g.h as isize || c >= g.w as isize {
                            continue;
                        }
                        let i = r as usize * g.w + c as usize;
                        best = match best {
                            Some(b) if plane[b].is_nan() || !(plane[i].is_nan() || plane[i] > plane[b]) => Some(b),
                            _ => Some(i),
                        };
                    }
                }
                out.push(best.map(|b| (b, plane[b])));
            }
        }
        out
    }

    /// The 2x2/2 loops against the general scan, on planes with ties, NaNs, signed zeros and
    /// odd sizes (a row and a column no window covers).
    #[test]
    fn the_2x2_loops_match_the_general_scan_bit_for_bit() {
        let vals = [1.0, 3.0, 3.0, -1.0, f64::NAN, 2.0, 0.0, -0.0, 3.0];
        for (h, w) in [(6, 8), (7, 9), (2, 2), (3, 5), (5, 4), (8, 28)] {
            let plane: Vec<f64> = (0..h * w).map(|i| vals[(i * 5 + i / 7) % vals.len()]).collect();
            let gy_of = |k: usize| if k.is_multiple_of(3) { -0.0 } else { k as f64 - 4.5 };
            let g = PoolGeom { h, w, kernel: [2, 2], stride: [2, 2], padding: [0, 0] };
            let (oh, ow) = g.out_hw();
            let gy: Vec<f64> = (0..oh * ow).map(gy_of).collect();
            let (mut fast, mut slow) = (vec![f64::NAN; oh * ow], vec![f64::NAN; oh * ow]);
            let (mut dfast, mut dslow) = (vec![0.0; h * w], vec![0.0; h * w]);
            pool_2x2(&plane, w, ow, &mut fast);
            pool_2x2_grad(&plane, &gy, w, ow, &mut dfast);
            if w % 2 == 0 {
                let (mut even, mut pairs) = (vec![f64::NAN; oh * ow], vec![MaybeUninit::uninit(); h * ow]);
                pool_2x2_even(&plane, ow, &mut even, &mut pairs);
                assert_eq!(
                    even.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                    fast.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                    "even, {h}x{w}"
                );
            }
            for_each_window(&plane, &g, |k, i, v| {
                slow[k] = v;
                dslow[i] += gy[k];
            });
            let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&fast), bits(&slow), "forward, {h}x{w}");
            assert_eq!(bits(&dfast), bits(&dslow), "gradient, {h}x{w}");
        }
    }

    #[test]
    fn windows_pick_the_first_maximum() {
        let plane: Vec<f64> = (0..42).map(|i| [1.0, 3.0, 3.0, -1.0, f64::NAN, 2.0, 0.0][(i * 5) % 7]).collect();
        for kernel in [[2, 2], [3, 2], [1, 3], [3, 3]] {
            for stride in [[2, 2], [1, 1], [1, 2], [3, 2]] {
                for padding in [[0, 0], [1, 1], [1, 0], [0, 2], [2, 3]] {
                    let g = PoolGeom { h: 6, w: 7, kernel, stride, padding };
                    let mut got = Vec::new();
                    for_each_window(&plane, &g, |k, i, v| got.push((k, i, v)));
                    let want: Vec<_> = naive(&plane, &g).into_iter().enumerate().filter_map(|(k, b)| b.map(|(i, v)| (k, i, v))).collect();
                    assert_eq!(got.len(), want.len(), "{g:?}");
                    for ((k, i, v), (j, l, u)) in got.into_iter().zip(want) {
                        assert_eq!((k, i), (j, l), "{g:?}");
                        assert_eq!(v.to_bits(), u.to_bits());
                    }
                }
            }
        }
    }

    /// The separable pass against the definition, bit for bit, on planes with ties, NaNs and
    /// signed zeros, over windows, strides and paddings (windows wholly in the padding
    /// included: `-inf`), through the public entry.
    #[test]
    fn the_separable_pass_matches_the_definition_bit_for_bit() {
        let vals = [1.0, 3.0, 3.0, -1.0, f64::NAN, 2.0, 0.0, -0.0, 3.0, f64::NEG_INFINITY];
        // Rows of outputs longer than a vector too (37 and 50 columns).
        for (h, w) in [(6, 7), (5, 9), (1, 4), (8, 8), (3, 37), (2, 50)] {
            let plane: Vec<f64> = (0..2 * h * w).map(|i| vals[(i * 7 + i / 5) % vals.len()]).collect();
            for kernel in [[3, 3], [2, 3], [1, 1], [4, 2]] {
                for stride in [[2, 2], [1, 1], [2, 3], [1, 4]] {
                    for padding in [[0, 0], [1, 1], [0, 2], [3, 1]] {
                        let g = PoolGeom { h, w, kernel, stride, padding };
                        if h + 2 * padding[0] < kernel[0] || w + 2 * padding[1] < kernel[1] {
                            continue;
                        }
                        let x = Array::from_shape_vec(IxDyn(&[1, 2, h, w]), plane.clone()).unwrap();
                        let got = max_pool2d(&x, &g);
                        let want: Vec<f64> =
                            plane.chunks(h * w).flat_map(|p| naive(p, &g).into_iter().map(|b| b.map_or(f64::NEG_INFINITY, |(_, v)| v))).collect();
                        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                        assert_eq!(bits(got.as_slice().unwrap()), bits(&want), "{g:?}");
                    }
                }
            }
        }
    }

    /// f32 planes with rows of several vectors of outputs (ResNet's pool and others), with
    /// NaN payloads, signed zeros and infinities: each output the bits of the value the
    /// definition picks.
    #[test]
    fn f32_rows_of_several_vectors_match_the_definition_bit_for_bit() {
        let vals = [1.0f32, 3.0, 3.0, -1.0, f32::from_bits(0x7fc0_1234), 2.0, 0.0, -0.0, 3.0, f32::NEG_INFINITY, -f32::NAN, 7.5];
        for (h, w, kernel, stride, padding) in
            [(23, 45, [3, 3], [2, 2], [1, 1]), (9, 70, [3, 3], [1, 1], [1, 1]), (7, 66, [2, 5], [1, 3], [0, 2]), (4, 17, [3, 3], [2, 2], [1, 1])]
        {
            let g = PoolGeom { h, w, kernel, stride, padding };
            let plane: Vec<f32> = (0..2 * h * w).map(|i| vals[(i * 7 + i / 5) % vals.len()]).collect();
            let x = Array::from_shape_vec(IxDyn(&[1, 2, h, w]), plane.clone()).unwrap();
            let got: Vec<u32> = max_pool2d(&x, &g).iter().map(|v| v.to_bits()).collect();
            let want: Vec<u32> = plane
                .chunks(h * w)
                .flat_map(|p| {
                    let wide: Vec<f64> = p.iter().map(|&v| v as f64).collect();
                    naive(&wide, &g).into_iter().map(|b| b.map_or(f32::NEG_INFINITY, |(i, _)| p[i]).to_bits()).collect::<Vec<_>>()
                })
                .collect();
            assert_eq!(got, want, "{g:?}");
        }
    }

    /// ResNet's stem pool (3x3, stride 2, padding 1) on a 4x4 plane, by hand: the top-left
    /// window sees rows 0-1 and columns 0-1 only; the gradient goes to each window's maximum,
    /// summed where windows share it.
    #[test]
    fn a_padded_pool_by_hand() {
        #[rustfmt::skip]
        let x = Array::from_shape_vec(IxDyn(&[1, 1, 4, 4]), vec![
            1.0, 5.0, 2.0, 0.0,
            3.0, 4.0, 9.0, 8.0,
            7.0, 6.0, -1.0, 2.0,
            0.0, 1.0, 3.0, 4.0,
        ]).unwrap();
        let g = PoolGeom { h: 4, w: 4, kernel: [3, 3], stride: [2, 2], padding: [1, 1] };
        assert_eq!(g.out_hw(), (2, 2));
        // Windows: rows -1..2 x cols -1..2 -> max of {1,5,3,4} = 5; rows -1..2 x cols 1..4 ->
        // {5,2,0,4,9,8} = 9; rows 1..4 x cols -1..2 -> {3,4,7,6,0,1} = 7; rows 1..4 x cols
        // 1..4 -> {4,9,8,6,-1,2,1,3,4} = 9.
        assert_eq!(max_pool2d(&x, &g).as_slice().unwrap(), &[5.0, 9.0, 7.0, 9.0]);
        let gy = Array::from_shape_vec(IxDyn(&[1, 1, 2, 2]), vec![1.0, 2.0, 3.0, 4.0]).unwrap();
        #[rustfmt::skip]
        let want = [
            0.0, 1.0, 0.0, 0.0,
            0.0, 0.0, 6.0, 0.0,
            3.0, 0.0, 0.0, 0.0,
            0.0, 0.0, 0.0, 0.0,
        ];
        assert_eq!(max_pool2d_grad(&x, &gy, &g).as_slice().unwrap(), &want);
        // Padding larger than the input's reach: the window over rows 2..5 of a 2-row plane
        // is wholly padding, so -inf.
        let g = PoolGeom { h: 2, w: 1, kernel: [1, 1], stride: [2, 1], padding: [2, 0] };
        let x = Array::from_shape_vec(IxDyn(&[1, 1, 2, 1]), vec![1.0, 2.0]).unwrap();
        assert_eq!(max_pool2d(&x, &g).as_slice().unwrap(), &[f64::NEG_INFINITY, 1.0, f64::NEG_INFINITY]);
    }

    /// Times ResNet-18's pool (64 planes of 112x112, 3x3/2, padding 1), best of 400 (release
    /// build: `cargo test --release -p tensor-core --lib pool::tests::timing -- --ignored
    /// --nocapture`, with `RAYON_NUM_THREADS` 1 or 2).
    #[test]
    #[ignore]
    fn timing() {
        let g = PoolGeom { h: 112, w: 112, kernel: [3, 3], stride: [2, 2], padding: [1, 1] };
        let x: Vec<f32> = (0..64 * 112 * 112).map(|i| ((i * 7919) % 1000) as f32 / 7.0).collect();
        let x = Array::from_shape_vec(IxDyn(&[1, 64, 112, 112]), x).unwrap();
        let mut best = f64::MAX;
        for _ in 0..400 {
            let t = std::time::Instant::now();
            std::hint::black_box(max_pool2d(&x, &g));
            best = best.min(t.elapsed().as_secs_f64() * 1e3);
        }
        println!("max pool 3x3/2 of 64 x 112x112: {best:.3} ms");
    }
}
