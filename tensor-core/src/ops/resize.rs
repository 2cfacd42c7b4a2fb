//! Resizing the spatial axes of NCHW images (nearest and bilinear), composed from
//! `index_select` and elementwise ops, one axis at a time (so its gradients and graph forms
//! come from those).

use crate::error::{Error, Result};
use crate::shape::UNKNOWN;
use crate::tensor::Tensor;

/// How [`Tensor::interpolate`] computes each output pixel.
///
/// ```
/// use tensor_core::ops::Interpolation;
/// assert_ne!(Interpolation::Nearest, Interpolation::Bilinear { align_corners: false });
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Interpolation {
    /// The input pixel at `floor(i * in / out)` (PyTorch's `nearest`; ONNX `Resize` with
    /// `mode = nearest`, `coordinate_transformation_mode = asymmetric`, `nearest_mode = floor`).
    Nearest,
    /// The weighted mean of the two nearest input pixels along each axis (PyTorch's
    /// `bilinear`; ONNX `Resize` with `mode = linear` and `coordinate_transformation_mode`
    /// `align_corners` when `align_corners`, else `pytorch_half_pixel`). With
    /// `align_corners` the corner pixels of input and output are aligned
    /// (`src = i * (in - 1) / (out - 1)`); without, their centres
    /// (`src = max((i + 0.5) * in / out - 0.5, 0)`).
    Bilinear {
        /// Align the corner pixels rather than the pixel grids' edges.
        align_corners: bool,
    },
}

/// The two source positions and their weights of output position `i` of `out` along an
/// axis of `n` (linear), or the one position (nearest: weights 1 and 0).
fn taps(mode: Interpolation, i: usize, n: usize, out: usize) -> (i64, i64, f64) {
    let src = match mode {
        Interpolation::Nearest => return (((i * n) / out).min(n - 1) as i64, 0, 0.0),
        Interpolation::Bilinear { align_corners: true } => {
            if out > 1 {
                i as f64 * (n - 1) as f64 / (out - 1) as f64
            } else {
                0.0
            }
        }
        Interpolation::Bilinear { align_corners: false } => ((i as f64 + 0.5) * n as f64 / out as f64 - 0.5).max(0.0),
    };
    let i0 = (src.floor() as usize).min(n - 1);
    let i1 = (i0 + 1).min(n - 1);
    (i0 as i64, i1 as i64, src - i0 as f64)
}

impl Tensor {
    /// `self` `[n, c, h, w]` resized to `[n, c, size[0], size[1]]` (PyTorch's
    /// `F.interpolate(x, size, mode)`; ONNX `Resize` with `sizes`), see [`Interpolation`].
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::ops::Interpolation;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[1, 1, 2, 2])?;
    /// let up = x.interpolate([4, 4], Interpolation::Nearest)?;
    /// assert_eq!(up.to_vec::<f32>()?[..4], [1.0, 1.0, 2.0, 2.0]);
    /// let row = Tensor::from_vec(vec![0.0f32, 4.0], &[1, 1, 1, 2])?;
    /// let lin = row.interpolate([1, 3], Interpolation::Bilinear { align_corners: true })?;
    /// assert_eq!(lin.to_vec::<f32>()?, vec![0.0, 2.0, 4.0]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn interpolate(&self, size: [usize; 2], mode: Interpolation) -> Result<Tensor> {
        let shape = self.raw_shape();
        let dims = shape.dims();
        if dims.len() != 4 || dims.contains(&UNKNOWN) || dims[2] == 0 || dims[3] == 0 {
            return Err(Error::invalid("interpolate", "input", format!("must be 4-d [n, c, h, w] with known, non-empty dims, found shape {shape}")));
        }
        if size.contains(&0) {
            return Err(Error::invalid("interpolate", "size", format!("{size:?} must be positive")));
        }
        if mode != Interpolation::Nearest && !self.dtype().is_float() {
            return Err(Error::UnsupportedDType { op: "interpolate", dtype: self.dtype(), needs: "a float dtype for bilinear interpolation" });
        }
        self.resize_axis(2, size[0], mode)?.resize_axis(3, size[1], mode)
    }

    /// `self` resized along `axis` to `out`.
    fn resize_axis(&self, axis: usize, out: usize, mode: Interpolation) -> Result<Tensor> {
        let n = self.raw_shape()[axis];
        if n == out {
            return Ok(self.clone());
        }
        let t: Vec<(i64, i64, f64)> = (0..out).map(|i| taps(mode, i, n, out)).collect();
        let index = |pick: fn(&(i64, i64, f64)) -> i64| Tensor::from_vec(t.iter().map(pick).collect::<Vec<i64>>(), &[out]);
        let first = self.index_select(axis as isize, &index(|p| p.0)?)?;
        if mode == Interpolation::Nearest {
            return Ok(first);
        }
        let second = self.index_select(axis as isize, &index(|p| p.1)?)?;
        let mut wshape = vec![1; 4];
        wshape[axis] = out;
        let weights =
            |f: fn(f64) -> f64| -> Result<Tensor> { Tensor::from_vec(t.iter().map(|p| f(p.2)).collect::<Vec<f64>>(), &wshape)?.cast(self.dtype()) };
        let (w0, w1) = (weights(|l| 1.0 - l)?, weights(|l| l)?);
        first.mul(&w0)?.add(&second.mul(&w1)?)
    }
}
