//! Sampling an image at the points of a grid (PyTorch's `F.grid_sample`, ONNX `GridSample`),
//! 2-D and volumetric 3-D, composed from elementwise ops and `gather` (so its gradient, to the
//! image and to the grid's weights, and its graph form come from those). The points are in
//! `[-1, 1]` over each spatial axis; each is denormalized to a source position, moved inside by
//! the padding mode, and read by its taps: 1 (nearest), 2 (linear) or 4 (cubic) per axis.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::shape::UNKNOWN;
use crate::tensor::Tensor;

/// How [`Tensor::grid_sample`] weighs the pixels around a point.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GridMode {
    /// The nearest pixel (halves round to even).
    Nearest,
    /// The 2 nearest pixels along each axis, weighted by distance (bilinear, trilinear).
    Linear,
    /// The 4 nearest pixels along each axis, by cubic convolution (`A = -0.75`).
    Cubic,
}

/// What [`Tensor::grid_sample`] reads outside the image.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GridPadding {
    /// Zeros.
    Zeros,
    /// The edge pixels (points are clamped to the image).
    Border,
    /// The image mirrored at its edges.
    Reflection,
}

/// The options of [`Tensor::grid_sample`].
///
/// ```
/// use tensor_core::ops::{GridMode, GridPadding, GridSampleOptions};
/// let o = GridSampleOptions { mode: GridMode::Linear, padding: GridPadding::Zeros, align_corners: false };
/// assert_eq!(o, GridSampleOptions::default());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GridSampleOptions {
    /// How the pixels around a point are weighed.
    pub mode: GridMode,
    /// What is read outside the image.
    pub padding: GridPadding,
    /// -1 and 1 are the centres of the corner pixels (else their outer edges).
    pub align_corners: bool,
}

impl Default for GridSampleOptions {
    fn default() -> Self {
        GridSampleOptions { mode: GridMode::Linear, padding: GridPadding::Zeros, align_corners: false }
    }
}

impl Tensor {
    /// `self` `[n, c, *spatial]` (2 or 3 spatial axes) sampled at `grid`
    /// `[n, *out, k]`: `k` is the number of spatial axes, each point `(x, y[, z])` with `x`
    /// along the last axis; the result is `[n, c, *out]`.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::ops::GridSampleOptions;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[1, 1, 2, 2])?;
    /// // The centre of the image, and its top-left pixel's centre.
    /// let grid = Tensor::from_vec(vec![0.0f32, 0.0, -0.5, -0.5], &[1, 1, 2, 2])?;
    /// let y = x.grid_sample(&grid, GridSampleOptions::default())?;
    /// assert_eq!(y.to_vec::<f32>()?, vec![2.5, 1.0]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn grid_sample(&self, grid: &Tensor, options: GridSampleOptions) -> Result<Tensor> {
        let (xd, gd) = (self.shape().dims().to_vec(), grid.shape().dims().to_vec());
        let k = xd.len().saturating_sub(2);
        let known = !xd.contains(&UNKNOWN) && !gd.contains(&UNKNOWN);
        if !(k == 2 || k == 3) || !known || gd.len() != k + 2 || gd[0] != xd[0] || gd[k + 1] != k {
            let problem = format!(
                "input {:?} must be [n, c, h, w] or [n, c, d, h, w] and grid {:?} [n, *out, k] for its k spatial axes, with known dims",
                xd, gd
            );
            return Err(Error::invalid("grid_sample", "grid", problem));
        }
        if !self.dtype().is_float() || grid.dtype() != self.dtype() {
            return Err(Error::UnsupportedDType { op: "grid_sample", dtype: grid.dtype(), needs: "a float image and a grid of its dtype" });
        }
        if xd[2..].contains(&0) {
            return Err(Error::invalid("grid_sample", "input", format!("spatial dims {:?} must not be empty", &xd[2..])));
        }
        let (n, c) = (xd[0], xd[1]);
        let points: usize = gd[1..=k].iter().product();
        let grid = grid.reshape(vec![n, points, k])?;
        // Per spatial axis (outermost first): the taps' pixel indices (clamped in range) and
        // weights (0 for a zeros-padded pixel outside), each [n, points].
        let mut axes = Vec::with_capacity(k);
        for (a, &size) in xd[2..].iter().enumerate() {
            let coordinate = grid.narrow(-1, k - 1 - a, 1)?.squeeze(-1)?;
            axes.push(axis_taps(&coordinate, size, options)?);
        }
        let image = self.reshape(vec![n, c, xd[2..].iter().product()])?;
        let mut sum: Option<Tensor> = None;
        for combination in combinations(&axes.iter().map(Vec::len).collect::<Vec<_>>()) {
            let (mut flat, mut weight) = (None::<Tensor>, None::<Tensor>);
            for (a, &t) in combination.iter().enumerate() {
                let (index, w) = &axes[a][t];
                flat = Some(match flat {
                    Some(f) => f.mul(xd[2 + a] as i64)?.add(index)?,
                    None => index.clone(),
                });
                weight = Some(match weight {
                    Some(v) => v.mul(w)?,
                    None => w.clone(),
                });
            }
            let (flat, weight) = (flat.expect("k >= 2"), weight.expect("k >= 2"));
            let index = flat.unsqueeze(1)?.broadcast_to(&[n, c, points])?;
            let term = image.gather(2, &index)?.mul(&weight.unsqueeze(1)?)?;
            sum = Some(match sum {
                Some(s) => s.add(&term)?,
                None => term,
            });
        }
        let mut out = vec![n, c];
        out.extend_from_slice(&gd[1..=k]);
        sum.expect("at least one tap").reshape(out)
    }
}

/// Every choice of one tap per axis, the last axis fastest.
fn combinations(counts: &[usize]) -> Vec<Vec<usize>> {
    counts
        .iter()
        .fold(vec![vec![]], |acc, &count| acc.iter().flat_map(|prefix| (0..count).map(move |t| [prefix.clone(), vec![t]].concat())).collect())
}

/// The taps of one spatial axis of `size` pixels for the normalized coordinates `g`.
fn axis_taps(g: &Tensor, size: usize, o: GridSampleOptions) -> Result<Vec<(Tensor, Tensor)>> {
    let len = size as f64;
    // The source position, and the range that counts as inside the image.
    let (x, lo, hi) = if o.align_corners {
        (g.add(1.0)?.div(2.0)?.mul(len - 1.0)?, 0.0, len - 1.0)
    } else {
        (g.add(1.0)?.mul(len)?.sub(1.0)?.div(2.0)?, -0.5, len - 0.5)
    };
    let x = if o.mode == GridMode::Nearest { round_half_even(&x)? } else { x };
    let outside = or(&x.lt(lo)?, &x.gt(hi)?)?;
    let x = match o.padding {
        GridPadding::Zeros => x,
        GridPadding::Border => Tensor::where_(&outside, &x.clamp(0.0, len - 1.0)?, &x)?,
        GridPadding::Reflection => reflect(&x, lo, hi)?,
    };
    let base = if o.mode == GridMode::Nearest { x.clone() } else { floor(&x)? };
    let t = x.sub(&base)?;
    let (first, weights): (f64, Vec<Tensor>) = match o.mode {
        GridMode::Nearest => (0.0, vec![t.ones_like()]),
        GridMode::Linear => (0.0, vec![t.neg()?.add(1.0)?, t.clone()]),
        GridMode::Cubic => (-1.0, cubic_weights(&t)?),
    };
    weights
        .into_iter()
        .enumerate()
        .map(|(i, w)| {
            let at = base.add(first + i as f64)?;
            pixel(&at, w, size, lo, hi, o.padding)
        })
        .collect()
}

/// A tap at pixel `at` (a whole number, maybe outside): its index in range and its weight.
fn pixel(at: &Tensor, weight: Tensor, size: usize, lo: f64, hi: f64, padding: GridPadding) -> Result<(Tensor, Tensor)> {
    let last = size as f64 - 1.0;
    let (at, weight) = match padding {
        GridPadding::Zeros => {
            let inside = and(&at.ge(0.0)?, &at.le(last)?)?;
            let zero = Tensor::full(&[], 0.0, weight.dtype());
            (at.clone(), Tensor::where_(&inside, &weight, &zero)?)
        }
        GridPadding::Border => (at.clone(), weight),
        // The reference reflects the pixel and truncates it.
        GridPadding::Reflection => (trunc(&reflect(at, lo, hi)?)?, weight),
    };
    Ok((at.clamp(0.0, last)?.cast(DType::I64)?, weight))
}

/// Elementwise `a || b` of two bool tensors.
fn or(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    Tensor::where_(a, &Tensor::scalar(true), b)
}

/// Elementwise `a && b` of two bool tensors.
fn and(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    Tensor::where_(a, b, &Tensor::scalar(false))
}

/// `x` truncated toward zero (the cast to an integer does that), as a float.
fn trunc(x: &Tensor) -> Result<Tensor> {
    x.cast(DType::I64)?.cast(x.dtype())
}

/// The largest whole number not above `x`.
fn floor(x: &Tensor) -> Result<Tensor> {
    let t = trunc(x)?;
    t.sub(&x.lt(&t)?.cast(x.dtype())?)
}

/// `x` rounded to the nearest whole number, halves to the even one (numpy's `rint`).
fn round_half_even(x: &Tensor) -> Result<Tensor> {
    let f = floor(x)?;
    let d = x.sub(&f)?;
    let odd = f.sub(&floor(&f.div(2.0)?)?.mul(2.0)?)?.ne(0.0)?;
    let up = or(&d.gt(0.5)?, &and(&d.eq(0.5)?, &odd)?)?;
    f.add(&up.cast(x.dtype())?)
}

/// `x` mirrored at `lo` and `hi` until inside (the reference's `_gs_reflect`).
fn reflect(x: &Tensor, lo: f64, hi: f64) -> Result<Tensor> {
    let range = hi - lo;
    let (below, above) = (x.lt(lo)?, x.gt(hi)?);
    let zero = Tensor::full(&[], 0.0, x.dtype());
    let distance = Tensor::where_(&below, &x.neg()?.add(lo)?, &Tensor::where_(&above, &x.sub(hi)?, &zero)?)?;
    let (turns, rest) = if range > 0.0 {
        let turns = trunc(&distance.div(range)?)?;
        let rest = distance.sub(&turns.mul(range)?)?;
        (turns, rest)
    } else {
        (zero.broadcast_to(x.shape().dims())?, zero.broadcast_to(x.shape().dims())?)
    };
    let even = turns.sub(&floor(&turns.div(2.0)?)?.mul(2.0)?)?.eq(0.0)?;
    let (from_lo, from_hi) = (rest.add(lo)?, rest.neg()?.add(hi)?);
    let below_value = Tensor::where_(&even, &from_lo, &from_hi)?;
    let above_value = Tensor::where_(&even, &from_hi, &from_lo)?;
    Tensor::where_(&below, &below_value, &Tensor::where_(&above, &above_value, x)?)
}

/// The cubic convolution weights (`A = -0.75`) of the pixels at `-1, 0, 1, 2` from the
/// left neighbour, for `t` past it in `[0, 1)`.
fn cubic_weights(t: &Tensor) -> Result<Vec<Tensor>> {
    const A: f64 = -0.75;
    // Near (|d| <= 1): (A + 2)|d|^3 - (A + 3)|d|^2 + 1; far (1 < |d| < 2):
    // A|d|^3 - 5A|d|^2 + 8A|d| - 4A.
    let near = |d: &Tensor| -> Result<Tensor> { d.mul(A + 2.0)?.sub(A + 3.0)?.mul(d)?.mul(d)?.add(1.0) };
    let far = |d: &Tensor| -> Result<Tensor> { d.mul(A)?.sub(5.0 * A)?.mul(d)?.add(8.0 * A)?.mul(d)?.sub(4.0 * A) };
    let s = t.neg()?.add(1.0)?;
    Ok(vec![far(&t.add(1.0)?)?, near(t)?, near(&s)?, far(&s.add(1.0)?)?])
}
