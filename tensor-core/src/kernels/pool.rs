//! 2-D max pooling over NCHW input (no padding) and its adjoint, one (image, channel) plane
//! per parallel task. The gradient goes to the first maximum of each window, as in PyTorch.
//! The common 2x2 window has its own unrolled loop; every window is scanned in the same
//! row-major order with the same comparison, so all paths pick the same element.

use super::math::Float;
use super::parallel::par_min_len;
use crate::storage::{standard, Array};
use ndarray::IxDyn;
use rayon::prelude::*;

/// The geometry of one pooling.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PoolGeom {
    pub h: usize,
    pub w: usize,
    pub kernel: [usize; 2],
    pub stride: [usize; 2],
}

impl PoolGeom {
    /// Output height and width.
    pub fn out_hw(&self) -> (usize, usize) {
        ((self.h - self.kernel[0]) / self.stride[0] + 1, (self.w - self.kernel[1]) / self.stride[1] + 1)
    }
}

/// True when `v` replaces the current best `b`: larger, or NaN (the first NaN wins).
#[inline(always)]
fn better<T: Float>(v: T, b: T) -> bool {
    !b.is_nan_value() && (v.is_nan_value() || v > b)
}

/// The flat index within the plane and the value of the first maximum of the `kh x kw`
/// window whose top-left element is at `start`, scanned row by row.
#[inline(always)]
fn window_argmax<T: Float>(plane: &[T], w: usize, start: usize, kh: usize, kw: usize) -> (usize, T) {
    let (mut best, mut bv) = (start, plane[start]);
    for ki in 0..kh {
        let row = &plane[start + ki * w..][..kw];
        for (kj, &v) in row.iter().enumerate() {
            if better(v, bv) {
                best = start + ki * w + kj;
                bv = v;
            }
        }
    }
    (best, bv)
}

/// Calls `f(output index, argmax index, max value)` for every window of one plane.
#[inline(always)]
fn for_each_window<T: Float>(plane: &[T], g: &PoolGeom, mut f: impl FnMut(usize, usize, T)) {
    let (oh, ow) = g.out_hw();
    let [sh, sw] = g.stride;
    match g.kernel {
        // The same scan as the general case, unrolled.
        [2, 2] => {
            for oi in 0..oh {
                let top = oi * sh * g.w;
                for oj in 0..ow {
                    let (i, v) = window_argmax(plane, g.w, top + oj * sw, 2, 2);
                    f(oi * ow + oj, i, v);
                }
            }
        }
        [kh, kw] => {
            for oi in 0..oh {
                let top = oi * sh * g.w;
                for oj in 0..ow {
                    let (i, v) = window_argmax(plane, g.w, top + oj * sw, kh, kw);
                    f(oi * ow + oj, i, v);
                }
            }
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
        for_each_window(plane, g, |k, _, v| o[k] = v);
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
        for_each_window(plane, g, |k, i, _| d[i] = d[i].add(gp[k]));
    });
    Array::from_shape_vec(x.raw_dim(), dx).expect("same shape")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first maximum by the definition (NaN counts as the largest).
    fn naive(plane: &[f64], g: &PoolGeom) -> Vec<(usize, f64)> {
        let (oh, ow) = g.out_hw();
        let mut out = Vec::new();
        for oi in 0..oh {
            for oj in 0..ow {
                let mut best: Option<usize> = None;
                for ki in 0..g.kernel[0] {
                    for kj in 0..g.kernel[1] {
                        let i = (oi * g.stride[0] + ki) * g.w + oj * g.stride[1] + kj;
                        best = match best {
                            Some(b) if plane[b].is_nan() || !(plane[i].is_nan() || plane[i] > plane[b]) => Some(b),
                            _ => Some(i),
                        };
                    }
                }
                let b = best.unwrap();
                out.push((b, plane[b]));
            }
        }
        out
    }

    #[test]
    fn windows_pick_the_first_maximum() {
        let plane: Vec<f64> = (0..42).map(|i| [1.0, 3.0, 3.0, -1.0, f64::NAN, 2.0, 0.0][(i * 5) % 7]).collect();
        for kernel in [[2, 2], [3, 2], [1, 3]] {
            for stride in [[2, 2], [1, 1], [1, 2]] {
                let g = PoolGeom { h: 6, w: 7, kernel, stride };
                let mut got = Vec::new();
                for_each_window(&plane, &g, |k, i, v| got.push((k, i, v)));
                let want = naive(&plane, &g);
                assert_eq!(got.len(), want.len());
                for (n, ((k, i, v), (j, u))) in got.into_iter().zip(want).enumerate() {
                    assert_eq!((k, i), (n, j), "{g:?} window {n}");
                    assert_eq!(v.to_bits(), u.to_bits());
                }
            }
        }
    }
}
