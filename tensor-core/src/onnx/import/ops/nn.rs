//! Matmul, Gemm, convolution, pooling, softmax and normalization.

use super::math::scalar;
use super::{known_dims, one, Ctx};
use crate::error::Result;
use crate::tensor::Tensor;

pub(super) fn matmul(c: &Ctx) -> Result<Vec<Tensor>> {
    one(c.x(0)?.matmul(&c.x(1)?)?)
}

/// `alpha op(A) op(B) + beta C`; a factor of 1 is no multiplication (the same bits).
pub(super) fn gemm(c: &Ctx) -> Result<Vec<Tensor>> {
    let (a, b) = (c.x(0)?, c.x(1)?);
    let mut y = a.matmul_t(&b, c.int("transA", 0) != 0, c.int("transB", 0) != 0)?;
    let (alpha, beta) = (c.float("alpha", 1.0) as f64, c.float("beta", 1.0) as f64);
    if alpha != 1.0 {
        y = y.mul(alpha)?;
    }
    if let Some(bias) = c.opt(2) {
        let bias = if beta != 1.0 { bias.mul(beta)? } else { bias };
        y = y.add(&bias)?;
    }
    one(y)
}

/// The 2-D begin/end pads of a conv or pool: `pads`, or `auto_pad`'s.
fn pads_2d(c: &Ctx, input: &[usize], kernel: [usize; 2], stride: [usize; 2]) -> Result<[[usize; 2]; 2]> {
    let auto = c.string("auto_pad", "NOTSET");
    if auto == "NOTSET" {
        let p = c.ints("pads").unwrap_or_else(|| vec![0; 4]);
        let p = p.iter().map(|&v| c.size(v, "pad")).collect::<Result<Vec<_>>>()?;
        return match p[..] {
            [t, l, b, r] => Ok([[t, b], [l, r]]),
            _ => Err(c.err(format!("{} pads for 2 spatial dims", p.len()))),
        };
    }
    let mut out = [[0; 2]; 2];
    for d in 0..2 {
        if auto == "VALID" {
            continue;
        }
        let total = (input[d].div_ceil(stride[d]).saturating_sub(1) * stride[d] + kernel[d]).saturating_sub(input[d]);
        let small = total / 2;
        out[d] = if auto == "SAME_LOWER" { [total - small, small] } else { [small, total - small] };
    }
    Ok(out)
}

/// Two values of an attribute given per spatial dim (1-D ops are lifted to 2-D first).
fn pair(c: &Ctx, name: &str, default: usize) -> Result<[usize; 2]> {
    let v = c.ints(name).unwrap_or_else(|| vec![default as i64; 2]);
    match v[..] {
        [a, b] => Ok([c.size(a, name)?, c.size(b, name)?]),
        _ => Err(c.err(format!("attribute `{name}` has {} values; only 1-D and 2-D ops map", v.len()))),
    }
}

/// Pads `x`'s two spatial dims with `value` where the pads differ before and after (what
/// conv2d and max_pool2d's symmetric padding cannot do); returns the symmetric rest.
fn pre_pad(x: &Tensor, pads: [[usize; 2]; 2], value: f64) -> Result<(Tensor, [usize; 2])> {
    let mut y = x.clone();
    for (d, [before, after]) in pads.into_iter().enumerate() {
        if before == 0 && after == 0 {
            continue;
        }
        let axis = 2 + d;
        let mut block = y.shape().dims().to_vec();
        let mut fill = |n: usize| {
            block[axis] = n;
            scalar(value, &y).broadcast_to(&block)
        };
        let (a, b) = (fill(before)?, fill(after)?);
        y = Tensor::concat(&[&a, &y, &b], axis as isize)?;
    }
    Ok((y, [0, 0]))
}

/// 1-D conv and pool inputs as 2-D ones of height 1, the attributes likewise.
fn lifted(c: &Ctx, x: &Tensor) -> Result<bool> {
    match x.rank() {
        3 => Ok(true),
        4 => Ok(false),
        r => Err(c.err(format!("input of rank {r}; only 1-D and 2-D (rank 3 and 4) map"))),
    }
}

/// The attributes of a 1-D op as 2-D ones: an extra leading spatial dim of size 1.
fn pair_1d(c: &Ctx, name: &str, default: usize) -> Result<[usize; 2]> {
    let v = c.ints(name).unwrap_or_else(|| vec![default as i64]);
    match v[..] {
        [a] => Ok([if name == "kernel_shape" { 1 } else { default }, c.size(a, name)?]),
        _ => Err(c.err(format!("attribute `{name}` has {} values for a 1-D op", v.len()))),
    }
}

fn pads_1d(c: &Ctx, input: &[usize], kernel: [usize; 2], stride: [usize; 2]) -> Result<[[usize; 2]; 2]> {
    if c.string("auto_pad", "NOTSET") != "NOTSET" {
        return pads_2d(c, input, kernel, stride).map(|p| [[0, 0], p[1]]);
    }
    let p = c.ints("pads").unwrap_or_else(|| vec![0; 2]);
    match p[..] {
        [b, e] => Ok([[0, 0], [c.size(b, "pad")?, c.size(e, "pad")?]]),
        _ => Err(c.err(format!("{} pads for 1 spatial dim", p.len()))),
    }
}

/// A conv's or pool's kernel, strides and begin/end pads, per spatial dim.
type Window = ([usize; 2], [usize; 2], [[usize; 2]; 2]);

/// Kernel, stride and pads of a 1-D or 2-D conv/pool on `x` (lifted to 2-D).
fn window(c: &Ctx, x: &Tensor, kernel_from_weight: Option<[usize; 2]>, one_d: bool) -> Result<Window> {
    // The spatial dims must be known (auto_pad and the kernel read them); the batch may not.
    let dims = x.shape().dims().to_vec();
    let input = [dims[2], dims[3]];
    if input.contains(&crate::shape::UNKNOWN) {
        return Err(c.err(format!("needs the spatial dims of its input, which are unknown in this trace ({}); trace with them known", x.shape())));
    }
    let kernel = match kernel_from_weight {
        Some(k) => k,
        None if one_d => pair_1d(c, "kernel_shape", 1)?,
        None => pair(c, "kernel_shape", 1)?,
    };
    let stride = if one_d { pair_1d(c, "strides", 1)? } else { pair(c, "strides", 1)? };
    let dil = if one_d { pair_1d(c, "dilations", 1)? } else { pair(c, "dilations", 1)? };
    if dil != [1, 1] {
        return Err(c.err(format!("dilations {dil:?}: only 1 maps")));
    }
    let pads = if one_d { pads_1d(c, &input, kernel, stride)? } else { pads_2d(c, &input, kernel, stride)? };
    Ok((kernel, stride, pads))
}

pub(super) fn conv(c: &Ctx) -> Result<Vec<Tensor>> {
    let (x, w) = (c.x(0)?, c.x(1)?);
    if c.int("group", 1) != 1 {
        return Err(c.err(format!("group {}: only 1 maps (grouped convolution has no tensor-core op)", c.int("group", 1))));
    }
    let one_d = lifted(c, &x)?;
    let (x, w) = if one_d { (x.unsqueeze(2)?, w.unsqueeze(2)?) } else { (x, w) };
    let wd = known_dims(c, &w)?;
    if wd.len() != 4 {
        return Err(c.err(format!("weight of rank {}, input of rank {}", wd.len(), x.rank())));
    }
    let (kernel, stride, pads) = window(c, &x, Some([wd[2], wd[3]]), one_d)?;
    // conv2d pads symmetrically, by less than the kernel and the input (its im2col assumes
    // so: it panics on a pad of 2 around a width of 1); other pads are zeros concatenated first.
    let spatial = [x.shape().dims()[2], x.shape().dims()[3]];
    let symmetric = (0..2).all(|d| pads[d][0] == pads[d][1] && pads[d][0] < kernel[d] && pads[d][0] < spatial[d]);
    let (x, padding) = if symmetric { (x, [pads[0][0], pads[1][0]]) } else { pre_pad(&x, pads, 0.0)? };
    let y = x.conv2d(&w, c.opt(2).as_ref(), stride, padding)?;
    one(if one_d { y.squeeze(2)? } else { y })
}

pub(super) fn max_pool(c: &Ctx) -> Result<Vec<Tensor>> {
    let x = c.x(0)?;
    if c.wants(1) {
        return Err(c.err("the Indices output has no tensor-core op"));
    }
    if c.int("ceil_mode", 0) != 0 {
        return Err(c.err("ceil_mode 1 has no tensor-core op"));
    }
    let one_d = lifted(c, &x)?;
    let x = if one_d { x.unsqueeze(2)? } else { x };
    let (kernel, stride, pads) = window(c, &x, None, one_d)?;
    let (x, _) = pre_pad(&x, pads, f64::NEG_INFINITY)?;
    let y = x.max_pool2d(kernel, stride)?;
    one(if one_d { y.squeeze(2)? } else { y })
}

pub(super) fn global_max_pool(c: &Ctx) -> Result<Vec<Tensor>> {
    let x = c.x(0)?;
    let axes: Vec<isize> = (2..x.rank() as isize).collect();
    one(x.max_axes(&axes, true)?)
}

/// Before opset 13: the input as 2-D `[outer, inner]` split at `axis`, `f` over dim 1.
fn coerced(c: &Ctx, f: impl Fn(&Tensor) -> Result<Tensor>) -> Result<Vec<Tensor>> {
    let x = c.x(0)?;
    let dims = known_dims(c, &x)?;
    let axis = c.int("axis", 1);
    let axis = if axis == dims.len() as i64 { dims.len() } else { c.axis(axis, dims.len())? };
    let flat = x.reshape([dims[..axis].iter().product::<usize>(), dims[axis..].iter().product::<usize>()])?;
    one(f(&flat)?.reshape(dims)?)
}

fn along(c: &Ctx, f: impl Fn(&Tensor, isize) -> Result<Tensor>) -> Result<Vec<Tensor>> {
    let x = c.x(0)?;
    let axis = c.axis(c.int("axis", -1), x.rank())?;
    one(f(&x, axis as isize)?)
}

fn hardmax_of(x: &Tensor, axis: isize) -> Result<Tensor> {
    let dims = x.shape().dims().to_vec();
    let a = crate::shape::normalize_axis(axis, dims.len()).unwrap_or(0);
    let i = x.argmax(axis, true)?;
    let mut classes = vec![1; dims.len()];
    classes[a] = dims[a];
    let classes = Tensor::arange(0i64, dims[a] as i64).reshape(classes)?;
    i.eq(&classes)?.cast(x.dtype())
}

pub(super) fn softmax_v1(c: &Ctx) -> Result<Vec<Tensor>> {
    coerced(c, |x| x.softmax(1))
}

pub(super) fn softmax_v13(c: &Ctx) -> Result<Vec<Tensor>> {
    along(c, |x, a| x.softmax(a))
}

pub(super) fn log_softmax_v1(c: &Ctx) -> Result<Vec<Tensor>> {
    coerced(c, |x| x.log_softmax(1))
}

pub(super) fn log_softmax_v13(c: &Ctx) -> Result<Vec<Tensor>> {
    along(c, |x, a| x.log_softmax(a))
}

pub(super) fn hardmax_v1(c: &Ctx) -> Result<Vec<Tensor>> {
    coerced(c, |x| hardmax_of(x, 1))
}

pub(super) fn hardmax_v13(c: &Ctx) -> Result<Vec<Tensor>> {
    along(c, hardmax_of)
}

pub(super) fn layer_norm(c: &Ctx) -> Result<Vec<Tensor>> {
    let x = c.x(0)?;
    let dims = known_dims(c, &x)?;
    let axis = c.axis(c.int("axis", -1), dims.len())?;
    let eps = c.float("epsilon", 1e-5) as f64;
    let normalized = &dims[axis..];
    let (w, b) = (c.x(1)?, c.opt(2));
    let fits = |t: &Tensor| t.shape().dims() == normalized;
    let y = if fits(&w) && b.as_ref().is_none_or(fits) {
        x.layer_norm(normalized, Some(&w), b.as_ref(), eps)?
    } else {
        let y = x.layer_norm(normalized, None, None, eps)?.mul(&w)?;
        match b {
            Some(b) => y.add(&b)?,
            None => y,
        }
    };
    let mut outs = vec![y];
    if c.wants(1) || c.wants(2) {
        // Mean and 1 / standard deviation over the normalized axes, kept as dims of 1.
        let axes: Vec<isize> = (axis as isize..dims.len() as isize).collect();
        let mean = x.mean_axes(&axes, true)?;
        let centered = x.sub(&mean)?;
        let inv_std = scalar(1.0, &x).div(&centered.mul(&centered)?.mean_axes(&axes, true)?.add(eps)?.sqrt()?)?;
        outs.extend([mean, inv_std]);
    }
    Ok(outs)
}

pub(super) fn instance_norm(c: &Ctx) -> Result<Vec<Tensor>> {
    let (x, scale, bias) = (c.x(0)?, c.x(1)?, c.x(2)?);
    let rank = x.rank();
    if rank < 3 {
        return Err(c.err(format!("input of rank {rank}; needs (N, C, spatial...)")));
    }
    let axes: Vec<isize> = (2..rank as isize).collect();
    let mean = x.mean_axes(&axes, true)?;
    let centered = x.sub(&mean)?;
    let var = centered.mul(&centered)?.mean_axes(&axes, true)?;
    let per_channel = |t: &Tensor| -> Result<Tensor> {
        let mut d = vec![1isize; rank - 1];
        d[0] = -1;
        t.reshape(d)
    };
    let y = centered.div(&var.add(c.float("epsilon", 1e-5) as f64)?.sqrt()?)?;
    one(y.mul(&per_channel(&scale)?)?.add(&per_channel(&bias)?)?)
}
