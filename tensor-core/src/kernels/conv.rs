//! 2-D convolution (NCHW input, OIHW weight) by im2col + GEMM, with its two adjoints.
//! Images are processed in parallel, each with a single-threaded GEMM; a batch smaller than
//! the thread count gives the threads to the GEMM instead. Per-image partial weight
//! gradients are summed in image order, so the result does not depend on the threads.

use super::math::Float;
use super::matmul::{gemm_into, MatRef};
use super::parallel::num_threads;
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

    fn patch(&self) -> usize {
        self.c * self.kh * self.kw
    }

    fn out_plane(&self) -> usize {
        let (oh, ow) = self.out_hw();
        oh * ow
    }

    /// Threads for each image's GEMM: all of them when there are fewer images than threads.
    fn gemm_threads(&self) -> usize {
        if self.n >= num_threads() {
            1
        } else {
            num_threads()
        }
    }
}

/// Unfolds one image `[c, h, w]` into columns `[c*kh*kw, oh*ow]`.
fn im2col<T: Float>(x: &[T], g: &ConvGeom, cols: &mut [T]) {
    let (oh, ow) = g.out_hw();
    let [sh, sw] = g.stride;
    let [ph, pw] = g.padding;
    for c in 0..g.c {
        for ki in 0..g.kh {
            for kj in 0..g.kw {
                let row = &mut cols[((c * g.kh + ki) * g.kw + kj) * oh * ow..][..oh * ow];
                for oi in 0..oh {
                    let ih = (oi * sh + ki) as isize - ph as isize;
                    let dst = &mut row[oi * ow..(oi + 1) * ow];
                    if ih < 0 || ih >= g.h as isize {
                        dst.iter_mut().for_each(|d| *d = T::zero());
                        continue;
                    }
                    let src = &x[(c * g.h + ih as usize) * g.w..][..g.w];
                    for (oj, d) in dst.iter_mut().enumerate() {
                        let iw = (oj * sw + kj) as isize - pw as isize;
                        *d = if iw < 0 || iw >= g.w as isize { T::zero() } else { src[iw as usize] };
                    }
                }
            }
        }
    }
}

/// Folds columns back into one image, adding overlapping contributions (im2col's adjoint).
fn col2im<T: Float>(cols: &[T], g: &ConvGeom, x: &mut [T]) {
    let (oh, ow) = g.out_hw();
    let [sh, sw] = g.stride;
    let [ph, pw] = g.padding;
    x.iter_mut().for_each(|v| *v = T::zero());
    for c in 0..g.c {
        for ki in 0..g.kh {
            for kj in 0..g.kw {
                let row = &cols[((c * g.kh + ki) * g.kw + kj) * oh * ow..][..oh * ow];
                for oi in 0..oh {
                    let ih = (oi * sh + ki) as isize - ph as isize;
                    if ih < 0 || ih >= g.h as isize {
                        continue;
                    }
                    let dst = &mut x[(c * g.h + ih as usize) * g.w..][..g.w];
                    for oj in 0..ow {
                        let iw = (oj * sw + kj) as isize - pw as isize;
                        if iw >= 0 && iw < g.w as isize {
                            dst[iw as usize] = dst[iw as usize].add(row[oi * ow + oj]);
                        }
                    }
                }
            }
        }
    }
}

/// Runs `per_image(n, out_chunk)` over the images, in parallel when there are enough.
fn for_each_image<T: Send>(out: &mut [T], chunk: usize, g: &ConvGeom, per_image: impl Fn(usize, &mut [T]) + Sync) {
    if g.gemm_threads() == 1 && g.n > 1 {
        out.par_chunks_mut(chunk).enumerate().for_each(|(i, o)| per_image(i, o));
    } else {
        out.chunks_mut(chunk).enumerate().for_each(|(i, o)| per_image(i, o));
    }
}

/// The convolution of `x` `[n, c, h, w]` with `w` `[o, c, kh, kw]`, plus `bias` `[o]` if given.
pub fn conv2d<T: Float>(x: &Array<T>, w: &Array<T>, bias: Option<&Array<T>>, g: &ConvGeom) -> Array<T> {
    let (x, w) = (standard(x), standard(w));
    let (xs, ws) = (x.as_slice().expect("standard"), w.as_slice().expect("standard"));
    let bias = bias.map(standard);
    let (plane, patch) = (g.out_plane(), g.patch());
    let mut out = vec![T::zero(); g.n * g.o * plane];
    for_each_image(&mut out, g.o * plane, g, |i, o| {
        let mut cols = vec![T::zero(); patch * plane];
        im2col(&xs[i * g.c * g.h * g.w..][..g.c * g.h * g.w], g, &mut cols);
        gemm_into(MatRef::new(ws, g.o, patch), MatRef::new(&cols, patch, plane), o, false, g.gemm_threads());
        if let Some(b) = &bias {
            for (row, &bv) in o.chunks_mut(plane).zip(b.iter()) {
                row.iter_mut().for_each(|v| *v = v.add(bv));
            }
        }
    });
    let (oh, ow) = g.out_hw();
    Array::from_shape_vec(IxDyn(&[g.n, g.o, oh, ow]), out).expect("length matches dims")
}

/// The gradient with respect to the input, from the output gradient `gy` `[n, o, oh, ow]`.
pub fn conv2d_input_grad<T: Float>(gy: &Array<T>, w: &Array<T>, g: &ConvGeom) -> Array<T> {
    let (gy, w) = (standard(gy), standard(w));
    let (gs, ws) = (gy.as_slice().expect("standard"), w.as_slice().expect("standard"));
    let (plane, patch, image) = (g.out_plane(), g.patch(), g.c * g.h * g.w);
    let mut dx = vec![T::zero(); g.n * image];
    for_each_image(&mut dx, image, g, |i, d| {
        let mut cols = vec![T::zero(); patch * plane];
        let wt = MatRef::new(ws, g.o, patch).t();
        gemm_into(wt, MatRef::new(&gs[i * g.o * plane..][..g.o * plane], g.o, plane), &mut cols, false, g.gemm_threads());
        col2im(&cols, g, d);
    });
    Array::from_shape_vec(IxDyn(&[g.n, g.c, g.h, g.w]), dx).expect("length matches dims")
}

/// The gradient with respect to the weight: the sum over images of `gy[i] @ cols(x[i])^T`.
pub fn conv2d_weight_grad<T: Float>(x: &Array<T>, gy: &Array<T>, g: &ConvGeom) -> Array<T> {
    let (x, gy) = (standard(x), standard(gy));
    let (xs, gs) = (x.as_slice().expect("standard"), gy.as_slice().expect("standard"));
    let (plane, patch, image) = (g.out_plane(), g.patch(), g.c * g.h * g.w);
    let mut partials = vec![T::zero(); g.n * g.o * patch];
    for_each_image(&mut partials, g.o * patch, g, |i, p| {
        let mut cols = vec![T::zero(); patch * plane];
        im2col(&xs[i * image..][..image], g, &mut cols);
        let gi = MatRef::new(&gs[i * g.o * plane..][..g.o * plane], g.o, plane);
        gemm_into(gi, MatRef::new(&cols, patch, plane).t(), p, false, g.gemm_threads());
    });
    let mut dw = vec![T::zero(); g.o * patch];
    for p in partials.chunks(g.o * patch) {
        dw.iter_mut().zip(p).for_each(|(d, &v)| *d = d.add(v));
    }
    Array::from_shape_vec(IxDyn(&[g.o, g.c, g.kh, g.kw]), dw).expect("length matches dims")
}
