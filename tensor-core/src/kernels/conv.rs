//! 2-D convolution (NCHW input, OIHW weight) by im2col + GEMM, with its two adjoints.
//! Images are processed in parallel, each with a single-threaded GEMM; a batch smaller than
//! the thread count gives the threads to the GEMM instead. Per-image partial weight
//! gradients are summed in image order, so the result does not depend on the threads.
//! Stride-1 forward convolutions of moderate size skip im2col: `conv_direct` computes them
//! with the same summation order. ResNet's 3x3 layers on small planes and its stem skip it
//! too, where `conv_direct_large` (direct, split over the threads within an image; on CPUs
//! with AVX2 and without AVX-512, `conv_blocked`, with the same bits) measured faster than
//! Winograd and im2col. MobileNetV2's 3x3 stride-2 stem of 3 channels runs by `conv_stem` with
//! AVX2, also with im2col's bits. (The op runs a 1x1 kernel with stride 1 and no padding by
//! `pointwise` instead.)

use super::channel_bias;
use super::clamp::Clamp;
use super::conv_blocked;
use super::conv_direct;
use super::conv_direct_large;
use super::conv_stem;
use super::fma_tile::{cast, cast_mut};
use super::matmul::{gemm_into, MatRef};
use super::parallel::num_threads;
use super::scratch::with_scratch;
use super::shared_out::SharedOut;
use super::winograd;
use crate::math::Float;
use crate::storage::{standard, Array};
use ndarray::IxDyn;
use rayon::prelude::*;

/// The geometry of one convolution.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ConvGeom {
    pub n: usize,
    pub c: usize,
    pub h: usize,
    pub w: usize,
    pub o: usize,
    pub kh: usize,
    pub kw: usize,
    pub stride: [usize; 2],
    pub padding: [usize; 2],
}

impl ConvGeom {
    /// Output height and width.
    pub fn out_hw(&self) -> (usize, usize) {
        let oh = (self.h + 2 * self.padding[0] - self.kh) / self.stride[0] + 1;
        let ow = (self.w + 2 * self.padding[1] - self.kw) / self.stride[1] + 1;
        (oh, ow)
    }

    /// Rows of one image's columns: `c * kh * kw`.
    pub fn patch(&self) -> usize {
        self.c * self.kh * self.kw
    }

    /// Columns of one image's columns: `oh * ow`.
    pub fn out_plane(&self) -> usize {
        let (oh, ow) = self.out_hw();
        oh * ow
    }

    fn image(&self) -> usize {
        self.c * self.h * self.w
    }

    /// Threads for each image's GEMM: all of them when there are fewer images than threads.
    fn gemm_threads(&self) -> usize {
        if self.n >= num_threads() {
            1
        } else {
            num_threads()
        }
    }

    /// The output columns `oj` whose input column `oj * sw + kj - pw` lies inside the image:
    /// `lo..hi` (empty when none does).
    #[inline]
    fn valid_cols(&self, kj: usize, ow: usize) -> (usize, usize) {
        let (sw, pw) = (self.stride[1], self.padding[1]);
        let lo = if kj >= pw { 0 } else { (pw - kj).div_ceil(sw) };
        let hi = if self.w + pw > kj { ((self.w - 1 + pw - kj) / sw + 1).min(ow) } else { 0 };
        (lo.min(hi), hi)
    }
}

/// Unfolds one image `[c, h, w]` into columns `[c*kh*kw, oh*ow]` (row-major). Each output
/// row is a zero-padded copy of an input row: contiguous for stride 1, strided otherwise.
fn im2col<T: Float>(x: &[T], g: &ConvGeom, cols: &mut [T]) {
    im2col_rows(x, g, 0..g.out_hw().0, cols);
}

/// The columns of output rows `rows` only: `[c*kh*kw, rows.len()*ow]`.
fn im2col_rows<T: Float>(x: &[T], g: &ConvGeom, rows: std::ops::Range<usize>, cols: &mut [T]) {
    let (_, ow) = g.out_hw();
    let [sh, sw] = g.stride;
    let [ph, pw] = g.padding;
    let plane = rows.len() * ow;
    for c in 0..g.c {
        for ki in 0..g.kh {
            for kj in 0..g.kw {
                let row = &mut cols[((c * g.kh + ki) * g.kw + kj) * plane..][..plane];
                let (lo, hi) = g.valid_cols(kj, ow);
                for (oi, dst) in rows.clone().zip(row.chunks_exact_mut(ow)) {
                    let ih = oi * sh + ki;
                    if ih < ph || ih - ph >= g.h {
                        dst.fill(T::zero());
                        continue;
                    }
                    let src = &x[(c * g.h + ih - ph) * g.w..][..g.w];
                    dst[..lo].fill(T::zero());
                    dst[hi..].fill(T::zero());
                    // No valid column (a pad past the input with a short output): `lo + kj`
                    // may then be below `pw`, so nothing may be indexed.
                    if lo == hi {
                        continue;
                    }
                    let from = lo * sw + kj - pw;
                    match sw {
                        1 => dst[lo..hi].copy_from_slice(&src[from..from + hi - lo]),
                        // Pairs, so the gather of every other value vectorizes (the stems).
                        2 => gather_pairs(&mut dst[lo..hi], &src[from..]),
                        _ => dst[lo..hi].iter_mut().zip(src[from..].iter().step_by(sw)).for_each(|(d, &v)| *d = v),
                    }
                }
            }
        }
    }
}

super::simd::multiversion! {
    /// `dst[i] = src[2 * i]`.
    fn gather_pairs<T: Float>(dst: &mut [T], src: &[T]) = gather_pairs_body;
}

#[inline(always)]
fn gather_pairs_body<T: Float>(dst: &mut [T], src: &[T]) {
    let (whole, last) = (dst.len().min(src.len() / 2), dst.len());
    dst[..whole].iter_mut().zip(src.chunks_exact(2)).for_each(|(d, p)| *d = p[0]);
    if whole < last {
        dst[whole] = src[2 * whole];
    }
}

/// Folds columns back into one image, adding overlapping contributions (im2col's adjoint).
/// Every input element receives its contributions in (c, ki, kj, oi) order.
fn col2im<T: Float>(cols: &[T], g: &ConvGeom, x: &mut [T]) {
    let (oh, ow) = g.out_hw();
    let [sh, sw] = g.stride;
    let [ph, pw] = g.padding;
    let plane = oh * ow;
    x.fill(T::zero());
    for c in 0..g.c {
        for ki in 0..g.kh {
            for kj in 0..g.kw {
                let row = &cols[((c * g.kh + ki) * g.kw + kj) * plane..][..plane];
                let (lo, hi) = g.valid_cols(kj, ow);
                if lo == hi {
                    continue;
                }
                for (oi, src) in row.chunks_exact(ow).enumerate() {
                    let ih = oi * sh + ki;
                    if ih < ph || ih - ph >= g.h {
                        continue;
                    }
                    let dst = &mut x[(c * g.h + ih - ph) * g.w..][..g.w];
                    if sw == 1 {
                        let dst = &mut dst[lo + kj - pw..hi + kj - pw];
                        for (d, &v) in dst.iter_mut().zip(&src[lo..hi]) {
                            *d = d.add(v);
                        }
                    } else {
                        for (oj, &v) in src[lo..hi].iter().enumerate() {
                            let d = &mut dst[(lo + oj) * sw + kj - pw];
                            *d = d.add(v);
                        }
                    }
                }
            }
        }
    }
}

/// Runs `per_image(scratch, n, out_chunk)` over the images, in parallel when there are
/// enough; each task borrows its thread's scratch buffer of `scratch` elements (kept between
/// calls: a fresh buffer of a few MB per image costs page faults that, at batch 8, cost as
/// much as the GEMMs of the small layers).
fn for_each_image<T: Float, U: Send>(
    out: &mut [U],
    chunk: usize,
    g: &ConvGeom,
    scratch: usize,
    per_image: impl Fn(&mut [T], usize, &mut [U]) + Sync + Send,
) {
    if g.gemm_threads() == 1 && g.n > 1 {
        out.par_chunks_mut(chunk).enumerate().for_each(|(i, o)| with_scratch(scratch, |s| per_image(s, i, o)));
    } else {
        with_scratch(scratch, |s| out.chunks_mut(chunk).enumerate().for_each(|(i, o)| per_image(s, i, o)));
    }
}

/// One image of the forward convolution from its columns: `w @ cols (+ bias)`.
fn conv_image<T: Float>(cols: &[T], ws: &[T], bias: Option<&[T]>, g: &ConvGeom, out: &mut [T]) {
    let (plane, patch) = (g.out_plane(), g.patch());
    gemm_into(MatRef::new(ws, g.o, patch), MatRef::new(cols, patch, plane), out, false, g.gemm_threads());
    if let Some(b) = bias {
        channel_bias::add(out, b, plane);
    }
}

/// One image's partial weight gradient from its columns: `gy[i] @ cols^T`.
fn weight_grad_image<T: Float>(cols: &[T], gy: &[T], g: &ConvGeom, out: &mut [T]) {
    let (plane, patch) = (g.out_plane(), g.patch());
    gemm_into(MatRef::new(gy, g.o, plane), MatRef::new(cols, patch, plane).t(), out, false, g.gemm_threads());
}

/// The per-image partials `[n, o*patch]` summed in image order.
fn sum_partials<T: Float>(partials: &[T], g: &ConvGeom) -> Array<T> {
    let len = g.o * g.patch();
    let mut dw = vec![T::zero(); len];
    for p in partials.chunks(len) {
        dw.iter_mut().zip(p).for_each(|(d, &v)| *d = d.add(v));
    }
    Array::from_shape_vec(IxDyn(&[g.o, g.c, g.kh, g.kw]), dw).expect("length matches dims")
}

fn slice_of<T>(a: &Array<T>) -> &[T] {
    a.as_slice().expect("standard layout")
}

/// The convolution of `x` `[n, c, h, w]` with `w` `[o, c, kh, kw]`, plus `bias` `[o]` if given.
#[cfg(test)]
pub fn conv2d<T: Float>(x: &Array<T>, w: &Array<T>, bias: Option<&Array<T>>, g: &ConvGeom) -> Array<T> {
    // NaN where the kernel writes nothing, so a test sees an element it skips.
    let mut out = vec![T::zero().div(T::zero()); g.n * g.o * g.out_plane()];
    conv2d_into(x, w, bias, g, &mut out, None, &|_, _| {});
    let (oh, ow) = g.out_hw();
    Array::from_shape_vec(IxDyn(&[g.n, g.o, oh, ow]), out).expect("length matches dims")
}

/// [`conv2d`] into `out` (row-major `[n, o, oh, ow]`), calling `after(start, len)` as soon as
/// `out[start..start + len]` is final, on the thread that made it — so an epilogue reads it
/// while it is still in that core's cache: a whole image at a time, or parts of one where the
/// kernel makes them on several threads (`conv_stem`'s rows). With `clamp` (f32 only), the
/// outputs are clamped before `after` sees them: in registers by `conv_stem`, by a pass over
/// each part otherwise.
pub fn conv2d_into<T: Float>(
    x: &Array<T>,
    w: &Array<T>,
    bias: Option<&Array<T>>,
    g: &ConvGeom,
    out: &mut [T],
    clamp: Option<Clamp>,
    after: &(dyn Fn(usize, usize) + Sync),
) {
    let (x, w, bias) = (standard(x), standard(w), bias.map(standard));
    let (xs, ws, bs) = (slice_of(&x), slice_of(&w), bias.as_ref().map(slice_of));
    let (plane, patch, image) = (g.out_plane(), g.patch(), g.image());
    if conv_stem::applies::<T>(g) {
        // SAFETY: `applies` takes 4-byte floats only, and the Float of 4 bytes is f32.
        if unsafe { conv_stem::conv2d_into(cast(xs), cast(ws), bs.map(|b| cast(b)), g, cast_mut(out), clamp, after) } {
            return;
        }
    }
    let after = &Clamp::before(clamp, out.as_mut_ptr(), out.len(), after);
    let per_image = g.o * plane;
    let after_image = &|i: usize| after(i * per_image, per_image);
    if conv_direct_large::applies(g) {
        // An image with a NaN output (a NaN input, or infinities meeting) is redone by the
        // im2col path below, which NaN inputs took before this kernel.
        let by_im2col = |i: usize, o: &mut [T]| {
            with_scratch(patch * plane, |cols| {
                im2col(&xs[i * image..][..image], g, cols);
                conv_image(cols, ws, bs, g, o);
            })
        };
        if !conv_blocked::try_conv2d_into(xs, &w, bs, g, out, &by_im2col, after_image) {
            conv_direct_large::conv2d_into(xs, ws, bs, g, out, &by_im2col, after_image);
        }
        return;
    }
    // The image's scan on all the threads (at batch 8 ResNet's images are megabytes).
    if winograd::applies(g) && winograd::all_finite_in_parallel(xs) && winograd::try_conv2d_into(xs, &w, bs, g, out, after_image) {
        return;
    }
    // NaN inputs keep the GEMM path: which of several NaNs a fused multiply-add returns
    // depends on its operands' order in the instruction, which differs between the kernels.
    if conv_direct::applies(g) && !conv_direct::any_nan(xs) && !conv_direct::any_nan(ws) {
        // Same bits as the path below (see conv_direct), without its buffers and packing.
        for_each_image(out, g.o * plane, g, 0, |_: &mut [T], i, o| {
            conv_direct::conv_image(&xs[i * image..][..image], ws, bs, g, o);
            after_image(i);
        });
        return;
    }
    if let Some(rows) = block_rows::<T>(g) {
        conv_in_row_blocks(xs, ws, bs, g, rows, out, after_image);
        return;
    }
    for_each_image(out, g.o * plane, g, patch * plane, |cols, i, o| {
        im2col(&xs[i * image..][..image], g, cols);
        conv_image(cols, ws, bs, g, o);
        after_image(i);
    });
}

/// Bytes of im2col columns per block of output rows: within the L2 cache, so the columns are
/// written and read by the GEMM there rather than through memory.
const BLOCK_BYTES: usize = 512 * 1024;

/// Output rows per block where one image's columns are larger than two blocks (the ResNet
/// stem's 7x7 stride-2 columns are 7.4 MB per image, MobileNetV2's stem's 1.35 MB), else
/// `None` (the whole image at once).
fn block_rows<T>(g: &ConvGeom) -> Option<usize> {
    let (oh, ow) = g.out_hw();
    let row_bytes = g.patch() * ow * std::mem::size_of::<T>();
    (row_bytes * oh > 2 * BLOCK_BYTES).then(|| (BLOCK_BYTES / row_bytes).clamp(1, oh))
}

/// The im2col path by blocks of `rows` output rows, each block's columns and product kept in
/// the cache: per block, its columns, `w @ columns` into a tile `[o, block]`, the bias on the
/// tile, then each channel's row of the tile copied to its place in the output. Blocks run
/// in parallel over a batch smaller than the thread count, images in parallel otherwise;
/// every block's GEMM gets one thread, so the bits depend on the geometry alone.
fn conv_in_row_blocks<T: Float>(
    xs: &[T],
    ws: &[T],
    bs: Option<&[T]>,
    g: &ConvGeom,
    rows: usize,
    out: &mut [T],
    after_image: &(dyn Fn(usize) + Sync),
) {
    let ((oh, ow), plane, patch, image) = (g.out_hw(), g.out_plane(), g.patch(), g.image());
    let blocks = oh.div_ceil(rows);
    // Block `b` of image `i` into the image's output at `dst`.
    let block = |i: usize, b: usize, dst: &SharedOut<T>| {
        let span = b * rows..((b + 1) * rows).min(oh);
        let len = span.len() * ow;
        with_scratch((patch + g.o) * len, |s: &mut [T]| {
            let (cols, tile) = s.split_at_mut(patch * len);
            im2col_rows(&xs[i * image..][..image], g, span.clone(), cols);
            gemm_into(MatRef::new(ws, g.o, patch), MatRef::new(cols, patch, len), tile, false, 1);
            if let Some(b) = bs {
                channel_bias::add(tile, b, len);
            }
            for (c, src) in tile.chunks_exact(len).enumerate() {
                // SAFETY: `dst` is image i's output, `o * plane` long; this block's elements of
                // channel c (columns span.start * ow.. + len) are in it and no other task's.
                unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), dst.at(c * plane + span.start * ow), len) };
            }
        });
    };
    if g.gemm_threads() == 1 && g.n > 1 {
        out.par_chunks_mut(g.o * plane).enumerate().for_each(|(i, o)| {
            let dst = SharedOut::new(o);
            (0..blocks).for_each(|b| block(i, b, &dst));
            after_image(i);
        });
    } else {
        for (i, o) in out.chunks_mut(g.o * plane).enumerate() {
            let dst = SharedOut::new(o);
            (0..blocks).into_par_iter().for_each(|b| block(i, b, &dst));
            after_image(i);
        }
    }
}

/// The im2col path of [`conv2d_into`] alone (for timing it against Winograd).
#[cfg(test)]
pub(super) fn conv2d_im2col<T: Float>(x: &Array<T>, w: &Array<T>, bias: Option<&Array<T>>, g: &ConvGeom, out: &mut [T]) {
    let (xs, ws, bs) = (slice_of(x), slice_of(w), bias.map(slice_of));
    let (plane, patch, image) = (g.out_plane(), g.patch(), g.image());
    for_each_image(out, g.o * plane, g, patch * plane, |cols, i, o| {
        im2col(&xs[i * image..][..image], g, cols);
        conv_image(cols, ws, bs, g, o);
    });
}

/// The gradient with respect to the input, from the output gradient `gy` `[n, o, oh, ow]`.
pub fn conv2d_input_grad<T: Float>(gy: &Array<T>, w: &Array<T>, g: &ConvGeom) -> Array<T> {
    let (gy, w) = (standard(gy), standard(w));
    let (gs, ws) = (slice_of(&gy), slice_of(&w));
    let (plane, patch, image) = (g.out_plane(), g.patch(), g.image());
    let mut dx = vec![T::zero(); g.n * image];
    for_each_image(&mut dx, image, g, patch * plane, |cols, i, d| {
        let wt = MatRef::new(ws, g.o, patch).t();
        gemm_into(wt, MatRef::new(&gs[i * g.o * plane..][..g.o * plane], g.o, plane), cols, false, g.gemm_threads());
        col2im(cols, g, d);
    });
    Array::from_shape_vec(IxDyn(&[g.n, g.c, g.h, g.w]), dx).expect("length matches dims")
}

/// The gradient with respect to the weight: the sum over images of `gy[i] @ cols(x[i])^T`.
pub fn conv2d_weight_grad<T: Float>(x: &Array<T>, gy: &Array<T>, g: &ConvGeom) -> Array<T> {
    let (x, gy) = (standard(x), standard(gy));
    let (xs, gs) = (slice_of(&x), slice_of(&gy));
    let (plane, patch, image) = (g.out_plane(), g.patch(), g.image());
    let mut partials = vec![T::zero(); g.n * g.o * patch];
    for_each_image(&mut partials, g.o * patch, g, patch * plane, |cols, i, p| {
        im2col(&xs[i * image..][..image], g, cols);
        weight_grad_image(cols, &gs[i * g.o * plane..][..g.o * plane], g, p);
    });
    sum_partials(&partials, g)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// im2col by the definition, one element at a time.
    fn im2col_naive(x: &[f64], g: &ConvGeom) -> Vec<f64> {
        let (oh, ow) = g.out_hw();
        let mut out = Vec::new();
        for c in 0..g.c {
            for ki in 0..g.kh {
                for kj in 0..g.kw {
                    for oi in 0..oh {
                        for oj in 0..ow {
                            let ih = (oi * g.stride[0] + ki) as isize - g.padding[0] as isize;
                            let iw = (oj * g.stride[1] + kj) as isize - g.padding[1] as isize;
                            let inside = ih >= 0 && iw >= 0 && (ih as usize) < g.h && (iw as usize) < g.w;
                            out.push(if inside { x[(c * g.h + ih as usize) * g.w + iw as usize] } else { 0.0 });
                        }
                    }
                }
            }
        }
        out
    }

    fn geoms() -> Vec<ConvGeom> {
        let mut v = Vec::new();
        for (h, w) in [(5, 7), (6, 6), (3, 4)] {
            for (kh, kw) in [(1, 1), (3, 3), (2, 3), (3, 5)] {
                for stride in [[1, 1], [2, 1], [1, 3], [2, 2]] {
                    for padding in [[0, 0], [1, 1], [2, 0], [0, 3]] {
                        if h + 2 * padding[0] >= kh && w + 2 * padding[1] >= kw {
                            v.push(ConvGeom { n: 1, c: 2, h, w, o: 1, kh, kw, stride, padding });
                        }
                    }
                }
            }
        }
        v
    }

    /// A cap on the SIMD level changes no convolution's bits: which path computes a layer
    /// follows the CPU (`simd::machine_level`), and each path gives its bits at every level.
    /// The layers have the shapes the direct kernels take (`conv_direct_large` on AVX-512 CPUs,
    /// `conv_blocked` on AVX2 ones), whose bits are not im2col's (a patch of 576 taps): a 7x7
    /// plane and a stride-2 layer to one. (Before, a cap below AVX2 sent them to im2col.)
    #[test]
    fn a_level_cap_changes_no_convolutions_bits() {
        use crate::kernels::simd::{set_max_level, Level};
        let _only_this_test_caps_the_level = crate::kernels::simd::LEVEL_CAPS.lock().unwrap_or_else(|e| e.into_inner());
        let layers = [
            ConvGeom { n: 1, c: 64, h: 7, w: 7, o: 3, kh: 3, kw: 3, stride: [1, 1], padding: [1, 1] },
            ConvGeom { n: 1, c: 64, h: 14, w: 14, o: 3, kh: 3, kw: 3, stride: [2, 2], padding: [1, 1] },
            // Filters in multiples of 16: on AVX2 CPUs `conv_blocked`'s.
            ConvGeom { n: 1, c: 64, h: 7, w: 7, o: 16, kh: 3, kw: 3, stride: [1, 1], padding: [1, 1] },
            ConvGeom { n: 1, c: 64, h: 14, w: 13, o: 32, kh: 3, kw: 3, stride: [2, 2], padding: [1, 1] },
        ];
        let array = |dims: &[usize], seed| {
            let v = crate::kernels::test_values(dims.iter().product(), seed).into_iter().map(|v| v as f32).collect();
            Array::from_shape_vec(IxDyn(dims), v).unwrap()
        };
        for g in layers {
            let (x, w, b) = (array(&[g.n, g.c, g.h, g.w], 1), array(&[g.o, g.c, g.kh, g.kw], 2), array(&[g.o], 3));
            let at = |cap| {
                set_max_level(cap);
                let y = conv2d(&x, &w, Some(&b), &g);
                set_max_level(Level::Avx512);
                y.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
            };
            let uncapped = at(Level::Avx512);
            for cap in [Level::Baseline, Level::Avx2] {
                assert_eq!(at(cap), uncapped, "{g:?} capped at {cap:?}");
            }
        }
    }

    #[test]
    fn im2col_matches_the_definition() {
        for g in geoms() {
            let x: Vec<f64> = (0..g.c * g.h * g.w).map(|i| i as f64 + 1.0).collect();
            let mut cols = vec![f64::NAN; g.patch() * g.out_plane()];
            im2col(&x, &g, &mut cols);
            assert_eq!(cols, im2col_naive(&x, &g), "{g:?}");
        }
    }

    #[test]
    fn the_direct_kernel_gives_the_im2col_paths_bits() {
        if !std::arch::is_x86_feature_detected!("fma") {
            return; // without FMA, gemm multiplies and adds separately
        }
        // `applies` reads the level, which the level tests cap.
        let _no_cap_meanwhile = crate::kernels::simd::LEVEL_CAPS.lock().unwrap_or_else(|e| e.into_inner());
        let lenet =
            [(1, 28, 6, 2), (6, 14, 16, 0)].map(|(c, hw, o, p)| ConvGeom { n: 1, c, h: hw, w: hw, o, kh: 5, kw: 5, stride: [1, 1], padding: [p, p] });
        let odd = ConvGeom { n: 1, c: 7, h: 9, w: 11, o: 19, kh: 3, kw: 4, stride: [1, 1], padding: [1, 2] };
        for g in lenet.into_iter().chain([odd]) {
            assert!(conv_direct::applies(&g), "{g:?}");
            let vals = |len: usize, s: u64| (0..len as u64).map(|i| ((i * 2654435761 + s) % 1999) as f32 / 997.0 - 1.0).collect::<Vec<_>>();
            let (x, w, b) = (vals(g.image(), 1), vals(g.o * g.patch(), 2), vals(g.o, 3));
            let mut cols = vec![0.0; g.patch() * g.out_plane()];
            im2col(&x, &g, &mut cols);
            let (mut via_gemm, mut direct) = (vec![0.0; g.o * g.out_plane()], vec![0.0; g.o * g.out_plane()]);
            conv_image(&cols, &w, Some(&b), &g, &mut via_gemm);
            conv_direct::conv_image(&x, &w, Some(&b), &g, &mut direct);
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&direct), bits(&via_gemm), "{g:?}");
        }
    }

    /// Blocks of output rows give the whole image's bits (each output is the same chain over
    /// the patch), at batch 1 (blocks in parallel) and 3 (images in parallel), with a last
    /// block shorter than the others; and the columns of a row range are that range of the
    /// whole image's columns.
    #[test]
    fn row_blocks_give_the_whole_images_bits() {
        // A ResNet stem on 88x88 f64 images: 44x44 outputs, columns of 147 x 1936 (2.3 MB).
        let g = ConvGeom { n: 1, c: 3, h: 88, w: 88, o: 5, kh: 7, kw: 7, stride: [2, 2], padding: [3, 3] };
        let rows = block_rows::<f64>(&g).expect("blocked");
        assert_eq!(rows, 512 * 1024 / (147 * 44 * 8));
        assert_ne!(44 % rows, 0, "a short last block");
        let x: Vec<f64> = crate::kernels::test_values(3 * g.image(), 1);
        let w: Vec<f64> = crate::kernels::test_values(g.o * g.patch(), 2);
        let b: Vec<f64> = crate::kernels::test_values(g.o, 3);
        let mut cols = vec![0.0; g.patch() * g.out_plane()];
        im2col(&x[..g.image()], &g, &mut cols);
        let mut part = vec![f64::NAN; g.patch() * 4 * 44];
        im2col_rows(&x[..g.image()], &g, 10..14, &mut part);
        for (r, p) in cols.chunks_exact(g.out_plane()).zip(part.chunks_exact(4 * 44)) {
            assert_eq!(&r[10 * 44..14 * 44], p);
        }
        for n in [1, 3] {
            let g = ConvGeom { n, ..g };
            let (xa, wa, ba) = (
                Array::from_shape_vec(IxDyn(&[n, 3, 88, 88]), x[..n * g.image()].to_vec()).unwrap(),
                Array::from_shape_vec(IxDyn(&[5, 3, 7, 7]), w.clone()).unwrap(),
                Array::from_shape_vec(IxDyn(&[5]), b.clone()).unwrap(),
            );
            let (mut whole, mut blocked) = (vec![0.0; n * 5 * 1936], vec![f64::NAN; n * 5 * 1936]);
            conv2d_im2col(&xa, &wa, Some(&ba), &g, &mut whole);
            let seen = std::sync::Mutex::new(Vec::new());
            conv2d_into(&xa, &wa, Some(&ba), &g, &mut blocked, None, &|s, l| seen.lock().unwrap().push((s / l, l)));
            let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&blocked), bits(&whole), "batch {n}");
            let mut seen = seen.into_inner().unwrap();
            seen.sort();
            assert_eq!(seen, (0..n).map(|i| (i, 5 * 1936)).collect::<Vec<_>>(), "each image's hook once");
        }
    }

    #[test]
    fn gather_pairs_takes_every_other_value_to_the_last() {
        let src = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0];
        let (mut odd, mut even) = ([0.0; 4], [0.0; 3]);
        gather_pairs(&mut odd, &src); // the last value has no pair
        gather_pairs(&mut even, &src[..6]);
        assert_eq!((odd, even), ([1.0, 3.0, 5.0, 7.0], [1.0, 3.0, 5.0]));
    }

    #[test]
    fn col2im_is_the_adjoint_of_im2col() {
        // <im2col(x), c> == <x, col2im(c)> for integer-valued data (exact in f64).
        for g in geoms() {
            let x: Vec<f64> = (0..g.c * g.h * g.w).map(|i| (i % 7) as f64 - 3.0).collect();
            let c: Vec<f64> = (0..g.patch() * g.out_plane()).map(|i| (i % 5) as f64 - 2.0).collect();
            let cols = im2col_naive(&x, &g);
            let mut back = vec![f64::NAN; x.len()];
            col2im(&c, &g, &mut back);
            let lhs: f64 = cols.iter().zip(&c).map(|(a, b)| a * b).sum();
            let rhs: f64 = x.iter().zip(&back).map(|(a, b)| a * b).sum();
            assert_eq!(lhs, rhs, "{g:?}");
        }
    }
}
