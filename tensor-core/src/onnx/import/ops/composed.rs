//! Ops that are compositions of tensor-core ops: normalizations (LpNormalization,
//! MeanVarianceNormalization, LRN), Shrink, and the window functions (constants).

use super::super::decode;
use super::math::scalar;
use super::{known_dims, one, Ctx};
use crate::error::Result;
use crate::tensor::Tensor;

/// LpNormalization: `x` divided by its L1 (`p` 1) or L2 (`p` 2) norm along `axis` (a zero
/// vector stays zero).
pub(super) fn lp_normalization(c: &Ctx) -> Result<Vec<Tensor>> {
    let x = c.x(0)?;
    let axis = [c.axis(c.int("axis", -1), x.rank())? as isize];
    let norm = match c.int("p", 2) {
        1 => x.abs()?.sum_axes(&axis, true)?,
        2 => x.mul(&x)?.sum_axes(&axis, true)?.sqrt()?,
        p => return Err(c.err(format!("p {p} is neither 1 nor 2"))),
    };
    // A zero vector stays zero (ONNX's reference), not 0 / 0.
    let norm = Tensor::where_(&norm.eq(0.0)?, &scalar(1.0, &norm), &norm)?;
    one(x.div(&norm)?)
}

/// MeanVarianceNormalization over `axes` (default N, H, W), as ONNX's function defines it:
/// `(x - E[x]) / (sqrt(E[x^2] - E[x]^2) + 1e-9)`.
pub(super) fn mean_variance_normalization(c: &Ctx) -> Result<Vec<Tensor>> {
    let x = c.x(0)?;
    let axes: Vec<isize> = c.axes(&c.ints("axes").unwrap_or_else(|| vec![0, 2, 3]), x.rank())?.into_iter().map(|a| a as isize).collect();
    let mean = x.mean_axes(&axes, true)?;
    let variance = x.mul(&x)?.mean_axes(&axes, true)?.sub(&mean.mul(&mean)?)?;
    one(x.sub(&mean)?.div(&variance.sqrt()?.add(1e-9)?)?)
}

/// LRN across channels: `x / (bias + alpha / size * sum of x^2 over the window) ^ beta`, the
/// window `floor((size - 1) / 2)` channels before and `ceil((size - 1) / 2)` after.
pub(super) fn lrn(c: &Ctx) -> Result<Vec<Tensor>> {
    let x = c.x(0)?;
    let dims = known_dims(c, &x)?;
    if dims.len() < 3 {
        return Err(c.err(format!("input of rank {}; LRN needs N, C and spatial dims", dims.len())));
    }
    let size = c.size(c.int_req("size")?, "size")?.max(1);
    let (alpha, beta, bias) = (c.float("alpha", 1e-4) as f64, c.float("beta", 0.75) as f64, c.float("bias", 1.0) as f64);
    let channels = dims[1];
    let before = (size - 1) / 2;
    let mut pads = vec![(0, 0); dims.len()];
    pads[1] = (before, size - 1 - before);
    let squares = x.mul(&x)?.pad(&pads, crate::ops::PadMode::Constant(0.0))?;
    let mut window = squares.narrow(1, 0, channels)?;
    for k in 1..size {
        window = window.add(&squares.narrow(1, k, channels)?)?;
    }
    let scale = window.mul(alpha / size as f64)?.add(bias)?.pow(&scalar(beta, &x))?;
    one(x.div(&scale)?)
}

/// Shrink: `x + bias` below `-lambd`, `x - bias` above `lambd`, 0 between.
pub(super) fn shrink(c: &Ctx) -> Result<Vec<Tensor>> {
    let x = c.x(0)?;
    let (bias, lambd) = (c.float("bias", 0.0) as f64, c.float("lambd", 0.5) as f64);
    let zero = scalar(0.0, &x);
    let above = Tensor::where_(&x.gt(lambd)?, &x.sub(bias)?, &zero)?;
    one(Tensor::where_(&x.lt(-lambd)?, &x.add(bias)?, &above)?)
}

/// A window of `size` (input 0) values `f(2 pi n / d)`, `d` the size (`periodic` 1) or the
/// size less one, in `output_datatype` (float by default).
fn window(c: &Ctx, f: fn(f64) -> f64) -> Result<Vec<Tensor>> {
    let n = match c.host_ints(0)?[..] {
        [n] => c.size(n, "size")?,
        ref v => return Err(c.err(format!("size has {} values; it must have one", v.len()))),
    };
    let d = if c.int("periodic", 1) != 0 { n as f64 } else { n.saturating_sub(1) as f64 };
    let values: Vec<f64> = (0..n).map(|i| f(std::f64::consts::TAU * i as f64 / d)).collect();
    let dtype = decode::dtype(c.int("output_datatype", 1) as i32, || format!("node `{}`'s output_datatype", c.node.name))?;
    one(Tensor::from_vec(values, &[n])?.cast(dtype)?)
}

pub(super) fn hann_window(c: &Ctx) -> Result<Vec<Tensor>> {
    window(c, |t| 0.5 - 0.5 * t.cos())
}

pub(super) fn hamming_window(c: &Ctx) -> Result<Vec<Tensor>> {
    window(c, |t| 25.0 / 46.0 - (1.0 - 25.0 / 46.0) * t.cos())
}

pub(super) fn blackman_window(c: &Ctx) -> Result<Vec<Tensor>> {
    window(c, |t| 0.42 - 0.5 * t.cos() + 0.08 * (2.0 * t).cos())
}
