//! 2-D max pooling over NCHW input (no padding) and its adjoint, one (image, channel) plane
//! per parallel task. The gradient goes to the first maximum of each window, as in PyTorch.

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

    /// The flat index within the plane of the first maximum of window (oi, oj).
    #[inline]
    fn argmax<T: Float>(&self, plane: &[T], oi: usize, oj: usize) -> usize {
        let mut best = (oi * self.stride[0]) * self.w + oj * self.stride[1];
        for ki in 0..self.kernel[0] {
            let row = (oi * self.stride[0] + ki) * self.w;
            for kj in 0..self.kernel[1] {
                let i = row + oj * self.stride[1] + kj;
                let (v, b) = (plane[i], plane[best]);
                if !b.is_nan_value() && (v.is_nan_value() || v > b) {
                    best = i;
                }
            }
        }
        best
    }
}

fn planes<T: Send>(out: &mut [T], len: usize, total: usize, f: impl Fn(usize, &mut [T]) + Sync) {
    if total >= par_min_len() / 4 {
        out.par_chunks_mut(len).enumerate().for_each(|(p, o)| f(p, o));
    } else {
        out.chunks_mut(len).enumerate().for_each(|(p, o)| f(p, o));
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
        for oi in 0..oh {
            for oj in 0..ow {
                o[oi * ow + oj] = plane[g.argmax(plane, oi, oj)];
            }
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
        for oi in 0..oh {
            for oj in 0..ow {
                let i = g.argmax(plane, oi, oj);
                d[i] = d[i].add(gp[oi * ow + oj]);
            }
        }
    });
    Array::from_shape_vec(x.raw_dim(), dx).expect("same shape")
}
