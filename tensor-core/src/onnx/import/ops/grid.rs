//! ONNX `GridSample` onto [`Tensor::grid_sample`], and `AffineGrid` (the grid of an affine
//! map: `theta` times the homogeneous positions of the output's pixel centres).

use super::{known_dims, one, Ctx};
use crate::error::Result;
use crate::tensor::Tensor;

/// GridSample (opset 16's `bilinear`/`bicubic` names, 20's `linear`/`cubic` and 3-D) onto
/// [`Tensor::grid_sample`].
pub(super) fn grid_sample(c: &Ctx) -> Result<Vec<Tensor>> {
    use crate::ops::{GridMode, GridPadding, GridSampleOptions};
    let mode = match c.string("mode", "linear").as_str() {
        "nearest" => GridMode::Nearest,
        "linear" | "bilinear" => GridMode::Linear,
        "cubic" | "bicubic" => GridMode::Cubic,
        m => return Err(c.err(format!("mode `{m}`; it must be nearest, linear or cubic"))),
    };
    let padding = match c.string("padding_mode", "zeros").as_str() {
        "zeros" => GridPadding::Zeros,
        "border" => GridPadding::Border,
        "reflection" => GridPadding::Reflection,
        p => return Err(c.err(format!("padding_mode `{p}`; it must be zeros, border or reflection"))),
    };
    let options = GridSampleOptions { mode, padding, align_corners: c.int("align_corners", 0) != 0 };
    one(c.x(0)?.grid_sample(&c.x(1)?, options)?)
}

/// AffineGrid (opset 20): for output size `[n, c, (d,) h, w]`, the points `theta · (x, y,
/// (z,) 1)` over the positions of the pixel centres in `[-1, 1]` (or the corner pixels' with
/// `align_corners`), as `[n, (d,) h, w, k]`.
pub(super) fn affine_grid(c: &Ctx) -> Result<Vec<Tensor>> {
    let theta = c.x(0)?;
    let size = c.host_ints(1)?;
    let spatial = match size.len() {
        4 | 5 => size[2..].iter().map(|&s| c.size(s, "size")).collect::<Result<Vec<_>>>()?,
        n => return Err(c.err(format!("size has {n} values; it must be [n, c, h, w] or [n, c, d, h, w]"))),
    };
    let k = spatial.len();
    let td = known_dims(c, &theta)?;
    if td.len() != 3 || td[1] != k || td[2] != k + 1 {
        return Err(c.err(format!("theta is {td:?}; for {k} spatial dims it must be [n, {k}, {}]", k + 1)));
    }
    let align = c.int("align_corners", 0) != 0;
    let steps: Vec<Vec<f64>> = spatial.iter().map(|&n| positions(n, align)).collect();
    // The homogeneous positions, x (the last axis) first: [k + 1, points].
    let points: usize = spatial.iter().product();
    let mut base = vec![0.0; (k + 1) * points];
    for p in 0..points {
        let mut rest = p;
        for a in (0..k).rev() {
            let i = rest % spatial[a];
            rest /= spatial[a];
            base[(k - 1 - a) * points + p] = steps[a][i];
        }
        base[k * points + p] = 1.0;
    }
    let base = Tensor::from_vec(base, &[k + 1, points])?.cast(theta.dtype())?;
    let mut dims = vec![td[0]];
    dims.extend_from_slice(&spatial);
    dims.push(k);
    one(theta.matmul(&base)?.permute(&[0, 2, 1])?.reshape(dims)?)
}

/// The `n` positions along an axis: pixel centres in `[-1, 1]`, or from -1 to 1 inclusive
/// with `align_corners` (numpy's `arange` as the reference builds them).
fn positions(n: usize, align: bool) -> Vec<f64> {
    if align {
        let step = if n > 1 { 2.0 / (n - 1) as f64 } else { 0.0 };
        (0..n).map(|i| -1.0 + i as f64 * step).collect()
    } else {
        let step = 2.0 / n as f64;
        (0..n).map(|i| -1.0 + step / 2.0 + i as f64 * step).collect()
    }
}
