//! The depthwise forward pass of a 3x3 kernel on small planes with AVX2, eight channels at a
//! time: a vector holds one position of eight channels (MobileNetV2's layers onto 7x7, 14x14
//! and 28x28 outputs, at stride 1 and 2).
//!
//! `depthwise_rows` puts one plane's columns in a vector's lanes. On a plane of 7 or 14
//! columns that leaves lanes idle and masks every row's edges, and a plane's fixed costs
//! (its taps' broadcasts, its row pointers) are paid for 49 or 196 outputs. Here a group of
//! eight channels' planes is transposed into one zero-padded buffer of vectors `[hp, wp, 8]`
//! (8 x 8 register transposes), each output vector is nine loads and nine fused multiply-adds
//! with no mask, and the outputs are transposed back into their eight planes. Planes of fewer
//! than eight channels (a group's remainder) go to `depthwise_rows`.
//!
//! **The bits are the general path's.** Each output is a chain of fused multiply-adds over
//! the taps in `(ki, kj)` order from +0, a padding tap included as `fma(w, 0, s)` (the buffer
//! holds zeros there), then the bias added: in registers where it is not NaN (`add_plain`'s
//! bits), with `add` after the plane where it is, as in `depthwise_rows`.

use super::clamp::Clamp;
use super::depthwise::DepthwiseGeom;
use super::depthwise_rows;
use super::simd::{machine_level, tile_level, Level};

/// Channels per group: one vector of f32 with AVX2.
pub(super) const GROUP: usize = 8;

/// Output positions at most for a plane here (28 x 28). Larger planes amortize the path this
/// replaces' fixed costs and fill its vectors. Alone on one thread (`tests::timing`), against
/// `depthwise_rows` at stride 1: 1.8x on 7 x 7 planes, 1.5x on 14 x 14, 1.2x on 28 x 28, 1.0x
/// on 56 x 56; at stride 2 against it or the general path's phases (rows wider than
/// `depthwise_rows` takes): 2.2x on outputs of 7 x 7, 1.9x on 14 x 14, 1.2x on 28 x 28 and
/// 0.9x on 56 x 56.
const MAX_OUT_PLANE: usize = 784;

/// Whether the planes of `g` run here: f32, AVX2 as the tile level in use
/// (`simd::tile_level`), a 3x3 kernel at stride 1 or 2 (the same both ways), dilation 1,
/// padding of at most 2, one filter per channel, at least a group of channels, and an output
/// plane of at most [`MAX_OUT_PLANE`]; with channels in whole groups, or else a geometry
/// `depthwise_rows` takes (a group's remainder goes there).
pub(super) fn applies<T>(g: &DepthwiseGeom) -> bool {
    #[cfg(test)]
    if OFF.with(|off| off.get()) {
        return false;
    }
    std::mem::size_of::<T>() == 4 && tile_level() == Level::Avx2 && fits(g) && (g.c.is_multiple_of(GROUP) || depthwise_rows::fits(g))
}

/// The geometry this kernel computes (its remainder planes aside).
fn fits(g: &DepthwiseGeom) -> bool {
    let stride = g.stride == [1, 1] || g.stride == [2, 2];
    (g.kh, g.kw) == (3, 3)
        && stride
        && g.dilation == [1, 1]
        && g.padding[0] <= 2
        && g.padding[1] <= 2
        && g.m == 1
        && g.c >= GROUP
        && g.out_plane() <= MAX_OUT_PLANE
}

#[cfg(test)]
thread_local! {
    /// Set by the timing test: depthwise layers on this thread take the path they took before.
    pub(super) static OFF: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// The output planes `out` of whole `(image, channel)` pairs from pair `first` on, as
/// `depthwise_rows::planes` takes them (the clamp too): each run of eight channels of one
/// image as a group, the others one by one through `depthwise_rows`.
///
/// # Panics
/// Where the sizes disagree with `g`, the geometry is not this kernel's or the CPU lacks
/// AVX2, or a plane outside a group has a geometry `depthwise_rows` does not take (a
/// caller's bug: see [`applies`]).
pub(super) fn planes(g: &DepthwiseGeom, first: usize, x: &[f32], w: &[f32], bias: Option<&[f32]>, clamp: Option<Clamp>, out: &mut [f32]) {
    let (plane, in_plane) = (g.out_plane(), g.h * g.w);
    let pairs = out.len() / plane.max(1);
    let sizes = out.len() == pairs * plane && (first + pairs) * in_plane <= x.len() && w.len() == g.c * 9 && bias.is_none_or(|b| b.len() == g.c);
    assert!(sizes && fits(g) && machine_level() >= Level::Avx2, "depthwise_channels: {g:?}");
    let padded = Padded::of(g);
    super::scratch::with_scratch(padded.len() + GROUP * plane, |buf: &mut [f32]| {
        let (xb, ob) = buf.split_at_mut(padded.len());
        // The padding's zeros, once: each group writes the interior only.
        xb.fill(0.0);
        let mut k = 0;
        while k < pairs {
            let (pair, channel) = (first + k, (first + k) % g.c);
            if k + GROUP > pairs || channel + GROUP > g.c {
                depthwise_rows::planes(g, pair, x, w, bias, clamp, &mut out[k * plane..][..plane]);
                k += 1;
                continue;
            }
            let bias = bias.map(|b| &b[channel..][..GROUP]);
            // The clamp follows the bias: in registers with it, after a NaN one.
            let nan_bias = bias.is_some_and(|b| b.iter().any(|b| b.is_nan()));
            let group = Group {
                x: &x[pair * in_plane..][..GROUP * in_plane],
                taps: &w[channel * 9..][..GROUP * 9],
                bias,
                clamp: clamp.filter(|_| !nan_bias),
            };
            let o = &mut out[k * plane..][..GROUP * plane];
            #[cfg(target_arch = "x86_64")]
            // SAFETY: the CPU has AVX2 and FMA (checked above); the buffers hold a group's
            // planes, the padded input and the group's outputs.
            unsafe {
                match g.stride[0] {
                    1 => avx2::group::<1>(g, &padded, &group, xb, ob, o),
                    _ => avx2::group::<2>(g, &padded, &group, xb, ob, o),
                }
            };
            #[cfg(not(target_arch = "x86_64"))]
            unreachable!("AVX2 is x86-64 only: {xb:?} {ob:?} {o:?}");
            if let Some(b) = group.bias {
                for (plane_out, &b) in o.chunks_exact_mut(plane).zip(b) {
                    if b.is_nan() {
                        use crate::math::Num;
                        plane_out.iter_mut().for_each(|v| *v = v.add(b));
                    }
                }
            }
            if let Some(c) = clamp.filter(|_| nan_bias) {
                c.slice(o);
            }
            k += GROUP;
        }
    });
}

/// One group's operands: eight consecutive input planes, their filters' taps (`[8, 9]`)
/// and biases, and the clamp its outputs take in registers.
struct Group<'a> {
    x: &'a [f32],
    taps: &'a [f32],
    bias: Option<&'a [f32]>,
    clamp: Option<Clamp>,
}

/// The zero-padded buffer of a group's planes: `hp x wp` positions of 8 channels.
struct Padded {
    hp: usize,
    wp: usize,
}

impl Padded {
    fn of(g: &DepthwiseGeom) -> Padded {
        Padded { hp: g.h + 2 * g.padding[0], wp: g.w + 2 * g.padding[1] }
    }

    /// Values in the buffer.
    fn len(&self) -> usize {
        self.hp * self.wp * GROUP
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{Clamp, DepthwiseGeom, Group, Padded, GROUP};
    use crate::kernels::transpose::avx::transpose8;
    use std::arch::x86_64::*;

    /// Output positions of a row computed together: their chains side by side, sharing the
    /// nine tap vectors (9 + 4 + 1 of the 16 registers). Runs of 6 and 8, and loading each
    /// input of a run's row once at stride 1, measured within the noise.
    const RUN: usize = 4;

    /// The first `n` lanes set.
    #[target_feature(enable = "avx2")]
    #[inline]
    fn first_lanes(n: usize) -> __m256i {
        _mm256_cmpgt_epi32(_mm256_set1_epi32(n as i32), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7))
    }

    /// A group's eight output planes `out` (`[8, oh, ow]`) at stride `S`: its input planes
    /// transposed into `xb` (`padded`), the output vectors into `ob` (`[oh * ow, 8]`), then
    /// transposed into `out`.
    ///
    /// # Safety
    /// The CPU must have AVX2 and FMA; `group.x` holds eight `h x w` planes, `xb` the padded
    /// buffer with zeros in its padding, `ob` and `out` eight output planes.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn group<const S: usize>(g: &DepthwiseGeom, padded: &Padded, group: &Group, xb: &mut [f32], ob: &mut [f32], out: &mut [f32]) {
        let (oh, ow) = g.out_hw();
        let plane = oh * ow;
        assert!(group.x.len() == GROUP * g.h * g.w && xb.len() >= padded.len() && ob.len() >= GROUP * plane && out.len() == GROUP * plane);
        // SAFETY (of the calls below): the sizes checked above.
        unsafe {
            fill(g, padded, group.x, xb);
            outputs::<S>(padded, group, xb, oh, ow, ob);
            unfill(ob, plane, out);
        }
    }

    /// Writes the group's planes `x` into the interior of `xb` (its padding holds zeros
    /// already: see `planes`).
    ///
    /// # Safety
    /// As [`group`].
    #[target_feature(enable = "avx2,fma")]
    unsafe fn fill(g: &DepthwiseGeom, padded: &Padded, x: &[f32], xb: &mut [f32]) {
        let (hw, [ph, pw], wp) = (g.h * g.w, g.padding, padded.wp);
        assert!(x.len() >= GROUP * hw && xb.len() >= padded.len());
        let (x, xb) = (x.as_ptr(), xb.as_mut_ptr());
        for r in 0..g.h {
            // SAFETY (of the loads and stores): row r's columns j0..j0 + cols of each plane
            // are inside `x` (a masked load reads no others), its positions inside `xb`'s
            // interior (both checked above).
            unsafe {
                let from = x.add(r * g.w);
                let to = xb.add(((ph + r) * wp + pw) * GROUP);
                let mut j0 = 0;
                while j0 + GROUP <= g.w {
                    let v: [__m256; GROUP] = std::array::from_fn(|l| _mm256_loadu_ps(from.add(l * hw + j0)));
                    for (q, t) in transpose8(v).into_iter().enumerate() {
                        _mm256_storeu_ps(to.add((j0 + q) * GROUP), t);
                    }
                    j0 += GROUP;
                }
                if j0 < g.w {
                    let cols = g.w - j0;
                    let keep = first_lanes(cols);
                    let v: [__m256; GROUP] = std::array::from_fn(|l| _mm256_maskload_ps(from.add(l * hw + j0), keep));
                    for (q, t) in transpose8(v).into_iter().enumerate().take(cols) {
                        _mm256_storeu_ps(to.add((j0 + q) * GROUP), t);
                    }
                }
            }
        }
    }

    /// The output vectors `ob` (`[oh * ow, 8]`) of the padded group `xb` at stride `S`.
    ///
    /// # Safety
    /// As [`group`].
    #[target_feature(enable = "avx2,fma")]
    unsafe fn outputs<const S: usize>(padded: &Padded, group: &Group, xb: &[f32], oh: usize, ow: usize, ob: &mut [f32]) {
        let tap = |t: usize| {
            let lanes: [f32; 8] = std::array::from_fn(|l| group.taps[l * 9 + t]);
            // SAFETY: 8 values.
            unsafe { _mm256_loadu_ps(lanes.as_ptr()) }
        };
        let taps: [__m256; 9] = std::array::from_fn(tap);
        // The bias where it is not NaN (a NaN one is added after, by the caller).
        let bias = group.bias.map(|b| {
            let lanes: [f32; 8] = std::array::from_fn(|l| if b[l].is_nan() { 0.0 } else { b[l] });
            let keep: [i32; 8] = std::array::from_fn(|l| if b[l].is_nan() { 0 } else { -1 });
            // SAFETY: 8 values each.
            unsafe { (_mm256_loadu_ps(lanes.as_ptr()), _mm256_castsi256_ps(_mm256_loadu_si256(keep.as_ptr().cast()))) }
        });
        let wp = padded.wp;
        let x = xb.as_ptr();
        for oi in 0..oh {
            let mut oj = 0;
            while oj < ow {
                let n = RUN.min(ow - oj);
                // SAFETY: the taps of outputs (oi, oj..oj + n) lie in the padded buffer, and
                // those outputs in `ob`.
                unsafe {
                    let at = |ki: usize, kj: usize, b: usize| x.add(((oi * S + ki) * wp + (oj + b) * S + kj) * GROUP);
                    let o = ob.as_mut_ptr().add((oi * ow + oj) * GROUP);
                    match n {
                        RUN => run::<RUN>(&taps, bias, group.clamp, at, o),
                        3 => run::<3>(&taps, bias, group.clamp, at, o),
                        2 => run::<2>(&taps, bias, group.clamp, at, o),
                        _ => run::<1>(&taps, bias, group.clamp, at, o),
                    }
                }
                oj += n;
            }
        }
    }

    /// `N` consecutive outputs of a row: each a chain over the taps in `(ki, kj)` order from
    /// +0 reading `at(ki, kj, b)`, then the bias where it is kept and the clamp; stored to `o`.
    ///
    /// # Safety
    /// `at` must point at readable vectors and `o` at `N` writable ones.
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    unsafe fn run<const N: usize>(
        taps: &[__m256; 9],
        bias: Option<(__m256, __m256)>,
        clamp: Option<Clamp>,
        at: impl Fn(usize, usize, usize) -> *const f32,
        o: *mut f32,
    ) {
        let mut acc = [_mm256_setzero_ps(); N];
        for ki in 0..3 {
            for kj in 0..3 {
                for (b, a) in acc.iter_mut().enumerate() {
                    // SAFETY: the caller's.
                    *a = _mm256_fmadd_ps(taps[ki * 3 + kj], unsafe { _mm256_loadu_ps(at(ki, kj, b)) }, *a);
                }
            }
        }
        for (b, &a) in acc.iter().enumerate() {
            let a = match bias {
                Some((add, keep)) => _mm256_blendv_ps(a, _mm256_add_ps(a, add), keep),
                None => a,
            };
            // SAFETY: AVX2 implies AVX.
            let a = clamp.map_or(a, |c| unsafe { c.ymm(a) });
            // SAFETY: the caller's.
            unsafe { _mm256_storeu_ps(o.add(b * GROUP), a) };
        }
    }

    /// Transposes the output vectors `ob` (`[plane, 8]`) into the eight planes of `out`.
    ///
    /// # Safety
    /// As [`group`].
    #[target_feature(enable = "avx2,fma")]
    unsafe fn unfill(ob: &[f32], plane: usize, out: &mut [f32]) {
        assert!(ob.len() >= GROUP * plane && out.len() >= GROUP * plane);
        let (ob, out) = (ob.as_ptr(), out.as_mut_ptr());
        // SAFETY (of the loads and stores): positions p0..p0 + 8 (or the plane's last n) are
        // in `ob` and in each of `out`'s planes (checked above).
        unsafe {
            let mut p0 = 0;
            while p0 + GROUP <= plane {
                let v: [__m256; GROUP] = std::array::from_fn(|q| _mm256_loadu_ps(ob.add((p0 + q) * GROUP)));
                for (l, t) in transpose8(v).into_iter().enumerate() {
                    _mm256_storeu_ps(out.add(l * plane + p0), t);
                }
                p0 += GROUP;
            }
            if p0 < plane {
                let n = plane - p0;
                let v: [__m256; GROUP] = std::array::from_fn(|q| if q < n { _mm256_loadu_ps(ob.add((p0 + q) * GROUP)) } else { _mm256_setzero_ps() });
                let keep = first_lanes(n);
                for (l, t) in transpose8(v).into_iter().enumerate() {
                    _mm256_maskstore_ps(out.add(l * plane + p0), keep, t);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::clamp::testing::{clamped, clamps};
    use crate::kernels::depthwise_rows::tests::{bits, naive as rows_naive};
    use crate::kernels::simd::{set_max_level, LEVEL_CAPS};

    /// The definition (`depthwise_rows`' reference), plane by plane.
    fn naive(g: &DepthwiseGeom, x: &[f32], w: &[f32], bias: Option<&[f32]>) -> Vec<f32> {
        let in_plane = g.h * g.w;
        (0..g.n * g.c)
            .flat_map(|pair| {
                let c = pair % g.c;
                rows_naive(g, &x[pair * in_plane..][..in_plane], &w[c * 9..][..9], bias.map(|b| b[c]))
            })
            .collect()
    }

    fn geom(n: usize, c: usize, (h, w): (usize, usize), s: usize, padding: [usize; 2]) -> DepthwiseGeom {
        DepthwiseGeom { n, c, h, w, m: 1, kh: 3, kw: 3, stride: [s, s], padding, dilation: [1, 1] }
    }

    /// The planes of pairs `first..` of `g` (up to the last), on any plane size (`planes`
    /// computes larger ones too and reads the CPU's level, not the cap); `None` on a CPU
    /// without AVX2.
    fn run(g: &DepthwiseGeom, first: usize, x: &[f32], w: &[f32], bias: Option<&[f32]>, clamp: Option<Clamp>) -> Option<Vec<f32>> {
        if machine_level() < Level::Avx2 {
            return None;
        }
        let mut out = vec![f32::NAN; (g.n * g.c - first) * g.out_plane()];
        planes(g, first, x, w, bias, clamp, &mut out);
        Some(out)
    }

    fn values(len: usize, seed: u64) -> Vec<f32> {
        crate::kernels::test_values(len, seed).iter().map(|&v| v as f32).collect()
    }

    #[test]
    fn a_hand_computed_group() {
        // Eight channels of the 3x3 plane [[1, 2, 3], [4, 5, 6], [7, 8, 9]] times k + 1 with
        // the Laplacian, padding 1: corner (0, 0) = -4 + 2 + 4 = 2, centre 0, so channel k
        // is (k + 1) times `depthwise_rows`' hand-computed plane, plus its bias k / 4.
        let g = geom(1, 8, (3, 3), 1, [1, 1]);
        let x: Vec<f32> = (0..8).flat_map(|k| (1..=9).map(move |v| (v * (k + 1)) as f32)).collect();
        let w: Vec<f32> = (0..8).flat_map(|_| [0.0, 1.0, 0.0, 1.0, -4.0, 1.0, 0.0, 1.0, 0.0]).collect();
        let bias: Vec<f32> = (0..8).map(|k| k as f32 / 4.0).collect();
        let Some(y) = run(&g, 0, &x, &w, Some(&bias), None) else { return };
        let plane = [2.0, 1.0, -4.0, -3.0, 0.0, -7.0, -16.0, -11.0, -22.0];
        for k in 0..8 {
            let want: Vec<f32> = plane.iter().map(|v| v * (k + 1) as f32 + k as f32 / 4.0).collect();
            assert_eq!(y[k * 9..][..9], want[..], "channel {k}");
        }
    }

    #[test]
    fn every_output_is_the_definition_bit_for_bit() {
        // Planes across the 8-column transposes' edges and the runs of 4 outputs, each
        // padding, both strides; channel counts with a remainder for `depthwise_rows`, two
        // images (a group never spans them), and a first pair off a group's start.
        // Rows wider than `depthwise_rows` takes at stride 2 (whole groups only there).
        let sizes = [(1, 1), (3, 3), (7, 7), (5, 9), (14, 14), (9, 16), (4, 17), (12, 11), (6, 40), (5, 58)];
        for ((h, w), s) in sizes.into_iter().flat_map(|hw| [(hw, 1), (hw, 2)]) {
            for padding in [[1, 1], [0, 0], [2, 2], [0, 2], [2, 1]] {
                for (n, c, first) in [(1, 8, 0), (2, 13, 0), (1, 24, 3), (2, 16, 5usize)] {
                    let g = geom(n, c, (h, w), s, padding);
                    let whole_groups = c.is_multiple_of(GROUP) && first.is_multiple_of(GROUP);
                    if h + 2 * padding[0] < 3 || w + 2 * padding[1] < 3 || !(whole_groups || depthwise_rows::fits(&g)) {
                        continue;
                    }
                    let x = values(n * c * h * w, (h * 100 + w) as u64);
                    let taps = values(c * 9, 7);
                    let bias = values(c, 11);
                    for bias in [None, Some(&bias[..])] {
                        for clamp in clamps() {
                            let Some(y) = run(&g, first, &x, &taps, bias, clamp) else { return };
                            let want = clamped(naive(&g, &x, &taps, bias), clamp);
                            assert_eq!(bits(&y), bits(&want[first * g.out_plane()..]), "{g:?} from pair {first}, bias {}, {clamp:?}", bias.is_some());
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn infinite_weights_nan_inputs_and_nan_biases_stay_in_their_channels() {
        // Channel 0's tap (0, 0) infinite: its outputs with that tap in the padding (first
        // row and column) are inf * 0 = NaN. Channel 3's bias is NaN: all its outputs are.
        // Channel 5 reads a NaN input. The other channels are finite.
        let g = geom(1, 8, (7, 7), 1, [1, 1]);
        let mut x = values(8 * 49, 3);
        x[5 * 49 + 24] = f32::NAN;
        let mut taps = values(8 * 9, 4);
        taps[0] = f32::INFINITY;
        let mut bias = values(8, 5);
        bias[3] = f32::NAN;
        let Some(y) = run(&g, 0, &x, &taps, Some(&bias), None) else { return };
        assert_eq!(bits(&y), bits(&naive(&g, &x, &taps, Some(&bias))));
        // Clamped, the group holding the NaN bias takes the clamp after it: still NaN.
        let clamp = clamps()[1];
        let Some(c) = run(&g, 0, &x, &taps, Some(&bias), clamp) else { return };
        assert_eq!(bits(&c), bits(&clamped(naive(&g, &x, &taps, Some(&bias)), clamp)));
        assert!(y[..7].iter().all(|v| v.is_nan()) && (0..7).all(|r| y[r * 7].is_nan()), "padding taps count");
        assert!(y[3 * 49..4 * 49].iter().all(|v| v.is_nan()), "the NaN bias reaches every output of its channel");
        assert_eq!(y[5 * 49..6 * 49].iter().filter(|v| v.is_nan()).count(), 9, "a NaN input reaches its nine outputs");
        for k in [1, 2, 4, 6, 7] {
            assert!(y[k * 49..(k + 1) * 49].iter().all(|v| v.is_finite()), "channel {k} stays finite");
        }
    }

    #[test]
    fn only_small_planes_of_whole_groups_with_avx2_in_use() {
        let g = geom(1, 16, (14, 14), 1, [1, 1]);
        let _only_this_test_caps_the_level = LEVEL_CAPS.lock().unwrap_or_else(|e| e.into_inner());
        set_max_level(Level::Baseline);
        assert!(!applies::<f32>(&g), "the general path below AVX2");
        set_max_level(Level::Avx512);
        if machine_level() >= Level::Avx2 {
            set_max_level(Level::Avx2);
            assert!(applies::<f32>(&g));
            assert!(applies::<f32>(&DepthwiseGeom { h: 28, w: 28, ..g }), "784 outputs");
            assert!(applies::<f32>(&DepthwiseGeom { stride: [2, 2], h: 28, w: 28, ..g }));
            assert!(!applies::<f64>(&g));
            assert!(!applies::<f32>(&DepthwiseGeom { h: 29, w: 28, ..g }), "812 outputs at stride 1");
            assert!(!applies::<f32>(&DepthwiseGeom { stride: [2, 2], h: 112, w: 112, ..g }), "3136 outputs at stride 2");
            assert!(!applies::<f32>(&DepthwiseGeom { c: 7, ..g }), "fewer channels than a group");
            assert!(!applies::<f32>(&DepthwiseGeom { m: 2, ..g }), "a channel multiplier");
            assert!(!applies::<f32>(&DepthwiseGeom { kh: 5, kw: 5, ..g }));
            assert!(applies::<f32>(&DepthwiseGeom { stride: [2, 2], h: 56, w: 56, ..g }), "wide rows at stride 2 in whole groups");
            assert!(!applies::<f32>(&DepthwiseGeom { stride: [2, 2], h: 56, w: 56, c: 12, ..g }), "a remainder `depthwise_rows` does not take");
            set_max_level(Level::Avx512);
        }
    }

    /// Times this kernel beside the path it replaces (`depthwise_rows`, or the general
    /// path's phases at stride 2 on wide rows) on MobileNetV2's depthwise layers and their
    /// neighbours: every channel of one image, interleaved, the best of 30. One thread:
    /// `RAYON_NUM_THREADS=1 cargo test --release -p tensor-core --lib
    /// depthwise_channels::tests::timing -- --ignored --nocapture`.
    #[test]
    #[ignore = "a measurement, not a check"]
    fn timing() {
        use crate::kernels::depthwise::depthwise2d_into;
        use crate::storage::Array;
        use ndarray::IxDyn;
        let _only_this_test_caps_the_level = LEVEL_CAPS.lock().unwrap_or_else(|e| e.into_inner());
        if machine_level() < Level::Avx2 {
            return;
        }
        set_max_level(Level::Avx2);
        let layer = |c, hw, s| geom(1, c, (hw, hw), s, [1, 1]);
        let layers = [
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
        ];
        for g in layers {
            let (x, w, b) = (values(g.c * g.h * g.w, 1), values(g.c * 9, 2), values(g.c, 3));
            let array = |v: &[f32], dims: &[usize]| Array::from_shape_vec(IxDyn(dims), v.to_vec()).expect("dims").into_shared();
            let (xa, wa, ba) = (array(&x, &[1, g.c, g.h, g.w]), array(&w, &[g.c, 1, 3, 3]), array(&b, &[g.c]));
            let mut out = vec![0.0f32; g.c * g.out_plane()];
            let (mut ours, mut before) = (f64::MAX, f64::MAX);
            for _ in 0..30 {
                for off in [false, true] {
                    OFF.with(|o| o.set(off));
                    let t = std::time::Instant::now();
                    depthwise2d_into(&xa, &wa, Some(&ba), &g, &mut out, None, &|_, _| {});
                    let ns = t.elapsed().as_secs_f64() * 1e9 / g.c as f64;
                    if off {
                        before = before.min(ns);
                    } else {
                        ours = ours.min(ns);
                    }
                }
            }
            OFF.with(|o| o.set(false));
            let taken = if applies::<f32>(&g) { "taken" } else { "not taken" };
            println!(
                "{} channels at {}x{}, stride {} ({taken}): {ours:.0} ns a plane, before {before:.0} ({:.2}x)",
                g.c,
                g.h,
                g.w,
                g.stride[0],
                before / ours
            );
        }
        set_max_level(Level::Avx512);
    }
}
