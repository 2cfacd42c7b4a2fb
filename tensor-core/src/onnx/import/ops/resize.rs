//! ONNX `Resize` (opsets 10 to 19) and `Upsample`: for each resized axis, the source
//! position of every output position (`coordinate_transformation_mode`), then its taps and
//! weights (`mode`: nearest with its `nearest_mode`, linear, cubic with `cubic_coeff_a` and
//! `exclude_outside`, both with `antialias`), computed here on the host in f64 as onnx's
//! reference does, and applied by [`Tensor::resample`], one axis at a time.

use super::{known_dims, one, Ctx};
use crate::error::Result;
use crate::ops::Taps;
use crate::tensor::Tensor;

/// How the taps of one output position are weighted.
#[derive(Clone, PartialEq)]
enum Mode {
    /// One source position, by `nearest_mode`.
    Nearest(String),
    Linear,
    /// Cubic convolution with this `A`.
    Cubic(f64),
}

/// The attributes that shape every axis's taps.
struct Spec {
    mode: Mode,
    coordinates: String,
    antialias: bool,
    exclude_outside: bool,
    extrapolation: f64,
}

/// One axis to resize: its input length, scale, output length and region of interest.
struct Axis {
    input: usize,
    scale: f64,
    output: usize,
    roi: (f64, f64),
}

pub(super) fn resize_v11(c: &Ctx) -> Result<Vec<Tensor>> {
    let x = c.x(0)?;
    let dims = known_dims(c, &x)?;
    let given = |i: usize| c.opt(i).filter(|t| t.numel() > 0).is_some();
    let roi = if given(1) { Some(c.host_floats(1)?) } else { None };
    let axes = match c.ints("axes") {
        Some(a) => c.axes(&a, dims.len())?,
        None => (0..dims.len()).collect(),
    };
    let (scales, outputs) = if given(3) {
        sized(c, &dims, &axes, &c.host_ints(3)?)?
    } else if given(2) {
        let scales = c.host_floats(2)?;
        if scales.len() != axes.len() {
            return Err(c.err(format!("{} scales for {} axes", scales.len(), axes.len())));
        }
        let outputs = axes.iter().zip(&scales).map(|(&d, &s)| (s * dims[d] as f64) as usize).collect();
        (scales, outputs)
    } else {
        return Err(c.err("neither `scales` nor `sizes` is given; one of them must be"));
    };
    if roi.as_ref().is_some_and(|r| r.len() != 2 * axes.len()) {
        return Err(c.err(format!("roi has {} values for {} axes; it needs 2 per axis", roi.map_or(0, |r| r.len()), axes.len())));
    }
    let spec = Spec {
        mode: mode(c, true)?,
        coordinates: c.string("coordinate_transformation_mode", "half_pixel"),
        antialias: c.int("antialias", 0) != 0,
        exclude_outside: c.int("exclude_outside", 0) != 0,
        extrapolation: c.float("extrapolation_value", 0.0) as f64,
    };
    let mut y = x;
    for (i, &d) in axes.iter().enumerate() {
        let roi = roi.as_ref().map_or((0.0, 1.0), |r| (r[i], r[axes.len() + i]));
        let axis = Axis { input: dims[d], scale: scales[i], output: outputs[i], roi };
        if is_close(axis.scale, 1.0) && axis.output == axis.input && is_close(roi.0, 0.0) && is_close(roi.1, 1.0) {
            continue;
        }
        y = y.resample(d as isize, &taps(c, &spec, &axis)?)?;
    }
    one(y)
}

/// Resize before opset 11 and Upsample: `scales` for every axis (input 1, or Upsample-7's
/// attribute), source positions `i / scale` (asymmetric), nearest rounding down.
pub(super) fn resize_v10(c: &Ctx) -> Result<Vec<Tensor>> {
    let x = c.x(0)?;
    let dims = known_dims(c, &x)?;
    let scales = match c.floats("scales") {
        Some(s) => s.into_iter().map(f64::from).collect(),
        None => c.host_floats(1)?,
    };
    if scales.len() != dims.len() {
        return Err(c.err(format!("{} scales for an input of rank {}", scales.len(), dims.len())));
    }
    let spec = Spec { mode: mode(c, false)?, coordinates: "asymmetric".into(), antialias: false, exclude_outside: false, extrapolation: 0.0 };
    let mut y = x;
    for (d, &scale) in scales.iter().enumerate() {
        let axis = Axis { input: dims[d], scale, output: (scale * dims[d] as f64) as usize, roi: (0.0, 1.0) };
        if axis.output != axis.input || !is_close(scale, 1.0) {
            y = y.resample(d as isize, &taps(c, &spec, &axis)?)?;
        }
    }
    one(y)
}

/// `mode` and its options (`nearest_mode` and `cubic_coeff_a` from opset 11).
fn mode(c: &Ctx, v11: bool) -> Result<Mode> {
    match c.string("mode", "nearest").as_str() {
        "nearest" => Ok(Mode::Nearest(if v11 { c.string("nearest_mode", "round_prefer_floor") } else { "floor".into() })),
        "linear" | "bilinear" => Ok(Mode::Linear),
        "cubic" => Ok(Mode::Cubic(c.float("cubic_coeff_a", -0.75) as f64)),
        m => Err(c.err(format!("mode `{m}`; it must be nearest, linear or cubic"))),
    }
}

/// Scales and output lengths from `sizes`, under `keep_aspect_ratio_policy`.
fn sized(c: &Ctx, dims: &[usize], axes: &[usize], sizes: &[i64]) -> Result<(Vec<f64>, Vec<usize>)> {
    if sizes.len() != axes.len() {
        return Err(c.err(format!("{} sizes for {} axes", sizes.len(), axes.len())));
    }
    let sizes = sizes.iter().map(|&s| c.size(s, "size")).collect::<Result<Vec<_>>>()?;
    let scales: Vec<f64> = axes.iter().zip(&sizes).map(|(&d, &s)| s as f64 / dims[d] as f64).collect();
    let one_scale = match c.string("keep_aspect_ratio_policy", "stretch").as_str() {
        "stretch" => return Ok((scales, sizes)),
        "not_larger" => scales.iter().copied().fold(f64::INFINITY, f64::min),
        "not_smaller" => scales.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        p => return Err(c.err(format!("keep_aspect_ratio_policy `{p}`; it must be stretch, not_larger or not_smaller"))),
    };
    let outputs = axes.iter().map(|&d| (one_scale * dims[d] as f64 + 0.5) as usize).collect();
    Ok((vec![one_scale; axes.len()], outputs))
}

/// Python's `math.isclose` with its default tolerance.
fn is_close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs())
}

/// The taps of every output position along one axis.
fn taps(c: &Ctx, spec: &Spec, axis: &Axis) -> Result<Taps> {
    if axis.input == 0 {
        return Err(c.err("an axis of length 0 cannot be resized to a nonzero length"));
    }
    let (mut index, mut weight, mut outside) = (Vec::new(), Vec::new(), Vec::new());
    let mut per_output = 0;
    for y in 0..axis.output {
        let (x, out) = source(c, spec, axis, y as f64)?;
        outside.push(out);
        let floor = x.floor();
        let ratio = if x == floor { 1.0 } else { x - floor };
        let mut w = weights(spec, ratio, axis.scale);
        let idx = neighbours(x, w.len());
        if spec.exclude_outside {
            for (w, &i) in w.iter_mut().zip(&idx) {
                if i < 0 || i >= axis.input as i64 {
                    *w = 0.0;
                }
            }
            let sum: f64 = w.iter().sum();
            let sum = if sum == 0.0 { 1.0 } else { sum };
            w.iter_mut().for_each(|w| *w /= sum);
        }
        let clamp = |i: i64| i.clamp(0, axis.input as i64 - 1) as usize;
        if matches!(spec.mode, Mode::Nearest(_)) {
            // One tap: the neighbour whose weight is 1.
            let k = w.iter().position(|&w| w != 0.0).unwrap_or(0);
            index.push(clamp(idx[k]));
            weight.push(1.0);
        } else {
            index.extend(idx.iter().map(|&i| clamp(i)));
            weight.extend_from_slice(&w);
        }
        per_output = if matches!(spec.mode, Mode::Nearest(_)) { 1 } else { w.len() };
    }
    if axis.output == 0 {
        return Err(c.err("an output length of 0 (the scale rounds the axis away)"));
    }
    Taps::new(per_output, index, weight)?.with_fill(outside, spec.extrapolation)
}

/// Output position `y`'s source position, and whether it falls outside the input
/// (`tf_crop_and_resize`, which then gives `extrapolation_value`).
fn source(c: &Ctx, spec: &Spec, a: &Axis, y: f64) -> Result<(f64, bool)> {
    let (input, width) = (a.input as f64, a.scale * a.input as f64);
    let x = match spec.coordinates.as_str() {
        "align_corners" if width == 1.0 => 0.0,
        "align_corners" => y * (input - 1.0) / (width - 1.0),
        "asymmetric" => y / a.scale,
        "tf_crop_and_resize" => {
            let (r0, r1) = a.roi;
            let x = if width == 1.0 { (r1 - r0) * (input - 1.0) / 2.0 } else { y * (r1 - r0) * (input - 1.0) / (width - 1.0) };
            let x = x + r0 * (input - 1.0);
            return Ok((x, x < 0.0 || x > input - 1.0));
        }
        "pytorch_half_pixel" if width == 1.0 => -0.5,
        "pytorch_half_pixel" | "half_pixel" => (y + 0.5) / a.scale - 0.5,
        "half_pixel_symmetric" => {
            let adjustment = a.output as f64 / width;
            let offset = input / 2.0 * (1.0 - adjustment);
            offset + (y + 0.5) / a.scale - 0.5
        }
        m => return Err(c.err(format!("coordinate_transformation_mode `{m}` is not one ONNX defines"))),
    };
    Ok((x, false))
}

/// The weights of the neighbours of a source position `ratio` past its left neighbour
/// (in `(0, 1]`), as onnx's reference computes them.
fn weights(spec: &Spec, ratio: f64, scale: f64) -> Vec<f64> {
    match &spec.mode {
        Mode::Nearest(rounding) => {
            let right = ratio == 1.0
                || match rounding.as_str() {
                    "round_prefer_ceil" => ratio >= 0.5,
                    "floor" => false,
                    "ceil" => true,
                    _ => ratio > 0.5,
                };
            if right {
                vec![0.0, 1.0]
            } else {
                vec![1.0, 0.0]
            }
        }
        Mode::Linear if spec.antialias => {
            let s = scale.min(1.0);
            let start = (-1.0 / s).floor() as i64 + 1;
            let w: Vec<f64> = (start..2 - start).map(|i| (1.0 - ((i as f64 - ratio) * s).abs()).clamp(0.0, 1.0)).collect();
            normalized(w)
        }
        Mode::Linear => vec![1.0 - ratio, ratio],
        Mode::Cubic(a) if spec.antialias => {
            let s = scale.min(1.0);
            let start = (-2.0 / s).floor() as i64 + 1;
            normalized((start..2 - start).map(|i| cubic(*a, s * (i as f64 - ratio))).collect())
        }
        Mode::Cubic(a) => {
            let a = *a;
            let (r, l) = (ratio, 1.0 - ratio);
            vec![
                ((a * (r + 1.0) - 5.0 * a) * (r + 1.0) + 8.0 * a) * (r + 1.0) - 4.0 * a,
                ((a + 2.0) * r - (a + 3.0)) * r * r + 1.0,
                ((a + 2.0) * l - (a + 3.0)) * l * l + 1.0,
                ((a * (l + 1.0) - 5.0 * a) * (l + 1.0) + 8.0 * a) * (l + 1.0) - 4.0 * a,
            ]
        }
    }
}

/// The cubic convolution kernel at distance `x`.
fn cubic(a: f64, x: f64) -> f64 {
    let x = x.abs();
    let (x2, x3) = (x * x, x * x * x);
    if x <= 1.0 {
        (a + 2.0) * x3 - (a + 3.0) * x2 + 1.0
    } else if x < 2.0 {
        a * x3 - 5.0 * a * x2 + 8.0 * a * x - 4.0 * a
    } else {
        0.0
    }
}

fn normalized(w: Vec<f64>) -> Vec<f64> {
    let sum: f64 = w.iter().sum();
    w.into_iter().map(|w| w / sum).collect()
}

/// The `n` positions nearest `x` (ties to the smaller), possibly outside the input (the
/// caller clamps them: the edge padding of the reference).
fn neighbours(x: f64, n: usize) -> Vec<i64> {
    let pad = n.div_ceil(2) as i64;
    let padded = x + pad as f64;
    let p = padded.floor();
    let frac = padded - p;
    let half = (n / 2) as i64;
    let offset = if n.is_multiple_of(2) {
        if frac == 0.0 {
            -half
        } else {
            1 - half
        }
    } else {
        let base = -(((n - 1) / 2) as i64);
        if frac <= 0.5 {
            base
        } else {
            base + 1
        }
    };
    let start = p as i64 + offset;
    (0..n as i64).map(|k| start + k - pad).collect()
}
