//! Resizing along axes, one axis at a time: each output position is a weighted sum of a
//! few input positions along the axis ([`Taps`], computed on the host from the sizes), applied
//! by [`Tensor::resample`] as `index_select`s and elementwise ops (so its gradient, the
//! transpose of the same weights, and its graph form come from those). [`Tensor::interpolate`]
//! (PyTorch's nearest and bilinear on NCHW images) and ONNX `Resize` (every mode) build their
//! taps and resample.

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
fn taps(mode: Interpolation, i: usize, n: usize, out: usize) -> (usize, usize, f64) {
    let src = match mode {
        Interpolation::Nearest => return (((i * n) / out).min(n - 1), 0, 0.0),
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
    (i0, i1, src - i0 as f64)
}

/// A resampling along one axis: output position `i` is `Σ_t weight[i][t] · x[index[i][t]]`
/// over the same number of taps for every position, or `fill` where
/// [`with_fill`](Taps::with_fill) marks it (ONNX's `extrapolation_value`).
///
/// ```
/// use tensor_core::ops::Taps;
/// // Two outputs from one input axis: the first input, and the mean of the first two.
/// let taps = Taps::new(2, vec![0, 0, 0, 1], vec![1.0, 0.0, 0.5, 0.5])?;
/// assert_eq!(taps.len(), 2);
/// # Ok::<(), tensor_core::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Taps {
    per_output: usize,
    index: Vec<usize>,
    weight: Vec<f64>,
    fill: Option<(Vec<bool>, f64)>,
}

impl Taps {
    /// `per_output` taps for each output position: `index` and `weight` hold them position by
    /// position (`len = outputs * per_output`).
    pub fn new(per_output: usize, index: Vec<usize>, weight: Vec<f64>) -> Result<Taps> {
        if per_output == 0 || index.len() != weight.len() || !index.len().is_multiple_of(per_output) {
            let problem = format!("{} indices and {} weights do not make whole outputs of {per_output} taps", index.len(), weight.len());
            return Err(Error::invalid("Taps::new", "taps", problem));
        }
        Ok(Taps { per_output, index, weight, fill: None })
    }

    /// One input position per output with weight 1 (nearest): resampling copies, for any dtype.
    pub fn pick(index: Vec<usize>) -> Taps {
        let weight = vec![1.0; index.len()];
        Taps { per_output: 1, index, weight, fill: None }
    }

    /// The outputs where `outside` is true are `value` instead of the weighted sum.
    pub fn with_fill(mut self, outside: Vec<bool>, value: f64) -> Result<Taps> {
        if outside.len() != self.len() {
            return Err(Error::invalid("Taps::with_fill", "outside", format!("{} flags for {} outputs", outside.len(), self.len())));
        }
        self.fill = outside.contains(&true).then_some((outside, value));
        Ok(self)
    }

    /// The number of output positions.
    pub fn len(&self) -> usize {
        self.index.len() / self.per_output
    }

    /// Whether there are no output positions.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// Tap `t` of every output: its indices and weights.
    fn column(&self, t: usize) -> (Vec<i64>, Vec<f64>) {
        (0..self.len()).map(|i| i * self.per_output + t).map(|k| (self.index[k] as i64, self.weight[k])).unzip()
    }

    /// Whether every output copies one input (no arithmetic: exact for any dtype).
    fn is_copy(&self) -> bool {
        self.per_output == 1 && self.weight.iter().all(|&w| w == 1.0) && self.fill.is_none()
    }
}

impl Tensor {
    /// `self` resampled along `axis` by `taps`: that axis becomes `taps.len()` long, each
    /// position the weighted sum of its taps (see [`Taps`]). The gradient is the transpose of
    /// the same weights; traced, it is `index_select`s and elementwise ops.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::ops::Taps;
    /// let x = Tensor::from_vec(vec![1.0f32, 3.0, 10.0, 30.0], &[2, 2])?;
    /// let taps = Taps::new(2, vec![0, 0, 0, 1], vec![1.0, 0.0, 0.5, 0.5])?;
    /// assert_eq!(x.resample(1, &taps)?.to_vec::<f32>()?, vec![1.0, 2.0, 10.0, 20.0]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn resample(&self, axis: isize, taps: &Taps) -> Result<Tensor> {
        let shape = self.shape();
        let rank = shape.rank();
        let ax = crate::shape::normalize_axis(axis, rank)
            .ok_or_else(|| Error::invalid("resample", "axis", format!("{axis} is out of range for rank {rank}")))?;
        let n = shape.dims()[ax];
        if n == UNKNOWN || taps.index.iter().any(|&i| i >= n) {
            return Err(Error::invalid(
                "resample",
                "taps",
                format!("index past the {n} positions of axis {ax} (shape {shape}); axes must be known and indices below their length"),
            ));
        }
        if taps.is_copy() {
            return self.index_select(axis, &Tensor::from_vec(taps.column(0).0, &[taps.len()])?);
        }
        if !self.dtype().is_float() {
            return Err(Error::UnsupportedDType { op: "resample", dtype: self.dtype(), needs: "a float dtype for weighted taps" });
        }
        let mut along = vec![1; rank];
        along[ax] = taps.len();
        let mut sum: Option<Tensor> = None;
        for t in 0..taps.per_output {
            let (index, weight) = taps.column(t);
            let picked = self.index_select(axis, &Tensor::from_vec(index, &[taps.len()])?)?;
            let term = picked.mul(&Tensor::from_vec(weight, &along)?.cast(self.dtype())?)?;
            sum = Some(match sum {
                Some(s) => s.add(&term)?,
                None => term,
            });
        }
        let sum = sum.expect("at least one tap");
        match &taps.fill {
            Some((outside, value)) => Tensor::where_(&Tensor::from_vec(outside.clone(), &along)?, &Tensor::full(&[], *value, self.dtype()), &sum),
            None => Ok(sum),
        }
    }

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
        let t: Vec<(usize, usize, f64)> = (0..out).map(|i| taps(mode, i, n, out)).collect();
        let taps = if mode == Interpolation::Nearest {
            Taps::pick(t.iter().map(|p| p.0).collect())
        } else {
            let index = t.iter().flat_map(|p| [p.0, p.1]).collect();
            Taps::new(2, index, t.iter().flat_map(|p| [1.0 - p.2, p.2]).collect())?
        };
        self.resample(axis as isize, &taps)
    }
}
