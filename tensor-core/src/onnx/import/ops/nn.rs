//! Matmul, Gemm, convolution, pooling, softmax and normalization.

use super::math::scalar;
use super::{known_dims, one, window_nd, Ctx};
use crate::error::Result;
use crate::ops::dilated_kernel;
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
        let mut block = y.raw_shape().dims().to_vec();
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
    let dims = x.raw_shape().dims().to_vec();
    let input = [dims[2], dims[3]];
    if input.contains(&crate::shape::UNKNOWN) {
        return Err(c.err(format!("needs the spatial dims of its input, which are unknown in this trace ({}); trace with them known", x.raw_shape())));
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
    if window_nd::needed(c, &x) {
        return window_nd::conv(c);
    }
    let groups = c.size(c.int("group", 1), "group")?;
    let one_d = lifted(c, &x)?;
    let (x, w) = if one_d { (x.unsqueeze(2)?, w.unsqueeze(2)?) } else { (x, w) };
    let wd = known_dims(c, &w)?;
    if wd.len() != 4 {
        return Err(c.err(format!("weight of rank {}, input of rank {}", wd.len(), x.rank())));
    }
    let (_, stride, pads) = window(c, &x, Some([wd[2], wd[3]]), one_d)?;
    // conv2d pads symmetrically (by any amount); asymmetric pads are zeros concatenated first.
    let symmetric = (0..2).all(|d| pads[d][0] == pads[d][1]);
    let (x, padding) = if symmetric { (x, [pads[0][0], pads[1][0]]) } else { pre_pad(&x, pads, 0.0)? };
    let y = x.conv2d_grouped(&w, c.opt(2).as_ref(), stride, padding, groups)?;
    one(if one_d { y.squeeze(2)? } else { y })
}

pub(super) fn max_pool(c: &Ctx) -> Result<Vec<Tensor>> {
    let x = c.x(0)?;
    if c.wants(1) {
        return Err(c.err("the Indices output has no tensor-core op"));
    }
    // max_pool2d has no ceil_mode; the separable pool does.
    if window_nd::needed(c, &x) || c.int("ceil_mode", 0) != 0 {
        return window_nd::max_pool(c);
    }
    let one_d = lifted(c, &x)?;
    let x = if one_d { x.unsqueeze(2)? } else { x };
    let (kernel, stride, pads) = window(c, &x, None, one_d)?;
    // The pads both sides share are skipped taps in the kernel; what one side has beyond
    // the other is `-inf` borders concatenated first (a copy of the input, rare).
    let padding = pads.map(|[b, e]| b.min(e));
    let extra = [0, 1].map(|d| pads[d].map(|p| p - padding[d]));
    let (x, _) = pre_pad(&x, extra, f64::NEG_INFINITY)?;
    let y = x.max_pool2d_padded(kernel, stride, padding)?;
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
    let dims = x.raw_shape().dims().to_vec();
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
    let fits = |t: &Tensor| t.raw_shape().dims() == normalized;
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

/// Inference: `(x - mean) / sqrt(var + epsilon) * scale + B` per channel; with
/// `training_mode` the batch's mean and biased variance instead, and the running statistics
/// `input * momentum + batch * (1 - momentum)` as outputs 1 and 2.
pub(super) fn batch_norm(c: &Ctx) -> Result<Vec<Tensor>> {
    let (x, scale, bias, mean, var) = (c.x(0)?, c.x(1)?, c.x(2)?, c.x(3)?, c.x(4)?);
    if c.int("spatial", 1) != 1 {
        return Err(c.err("spatial 0 (statistics per element, not per channel) has no tensor-core op"));
    }
    let eps = c.float("epsilon", 1e-5) as f64;
    if c.int("training_mode", 0) == 0 {
        return one(x.batch_norm(Some(&mean), Some(&var), Some(&scale), Some(&bias), false, 0.0, eps)?);
    }
    let axes: Vec<isize> = std::iter::once(0).chain(2..x.rank() as isize).collect();
    let batch_mean = x.mean_axes(&axes, false)?;
    let centered = x.sub(&x.mean_axes(&axes, true)?)?;
    let batch_var = centered.mul(&centered)?.mean_axes(&axes, false)?;
    let y = x.batch_norm(Some(&batch_mean), Some(&batch_var), Some(&scale), Some(&bias), false, 0.0, eps)?;
    let m = c.float("momentum", 0.9) as f64;
    let run = |old: &Tensor, new: &Tensor| old.mul(m)?.add(&new.mul(1.0 - m)?);
    Ok(vec![y, run(&mean, &batch_mean)?, run(&var, &batch_var)?])
}

pub(super) fn global_avg_pool(c: &Ctx) -> Result<Vec<Tensor>> {
    one(c.x(0)?.global_avg_pool()?)
}

/// Symmetric pads of at most half the kernel go to `avg_pool2d` as they are (with ceil_mode
/// and count_include_pad); others are zeros concatenated first, the divisor then the count of
/// input entries in the window (count_include_pad 0) or the kernel size.
pub(super) fn avg_pool(c: &Ctx) -> Result<Vec<Tensor>> {
    let x = c.x(0)?;
    if window_nd::needed(c, &x) {
        return window_nd::avg_pool(c);
    }
    let one_d = lifted(c, &x)?;
    let x = if one_d { x.unsqueeze(2)? } else { x };
    let (kernel, stride, pads) = window(c, &x, None, one_d)?;
    let (ceil, include) = (c.int("ceil_mode", 0) != 0, c.int("count_include_pad", 0) != 0);
    let direct = (0..2).all(|d| pads[d][0] == pads[d][1] && pads[d][0] <= kernel[d] / 2);
    let y = if direct {
        x.avg_pool2d(kernel, stride, [pads[0][0], pads[1][0]], ceil, include)?
    } else if ceil {
        return window_nd::avg_pool(c);
    } else {
        let (xp, _) = pre_pad(&x, pads, 0.0)?;
        let y = xp.avg_pool2d(kernel, stride, [0, 0], false, true)?;
        if include {
            y
        } else {
            let (ones, _) = pre_pad(&scalar(1.0, &x).broadcast_to(x.raw_shape().dims())?, pads, 0.0)?;
            y.div(&ones.avg_pool2d(kernel, stride, [0, 0], false, true)?)?
        }
    };
    one(if one_d { y.squeeze(2)? } else { y })
}

/// `t` along `axis` with `begin` entries cut from the front and `end` from the back (a
/// negative count pads zeros there instead).
fn crop(t: &Tensor, axis: usize, begin: i64, end: i64) -> Result<Tensor> {
    let mut y = t.clone();
    let n = y.raw_shape().dims()[axis] as i64;
    let (b, e) = (begin.max(0), end.max(0));
    y = y.narrow(axis as isize, b as usize, (n - b - e).max(0) as usize)?;
    let (pb, pe) = ((-begin).max(0) as usize, (-end).max(0) as usize);
    if pb + pe > 0 {
        y = y.pad(&(0..y.rank()).map(|a| if a == axis { (pb, pe) } else { (0, 0) }).collect::<Vec<_>>(), crate::ops::PadMode::Constant(0.0))?;
    }
    Ok(y)
}

/// ConvTranspose as `conv_transpose2d` without padding (the full output), cropped by the
/// pads (from `pads`, `auto_pad` or `output_shape`) and extended by output_padding.
pub(super) fn conv_transpose(c: &Ctx) -> Result<Vec<Tensor>> {
    let (x, w) = (c.x(0)?, c.x(1)?);
    let groups = c.size(c.int("group", 1), "group")?;
    let one_d = lifted(c, &x)?;
    let (x, w) = if one_d { (x.unsqueeze(2)?, w.unsqueeze(2)?) } else { (x, w) };
    let per_dim = |name: &str, default: usize| if one_d { pair_1d(c, name, default) } else { pair(c, name, default) };
    let (stride, out_pad, dilation) = (per_dim("strides", 1)?, per_dim("output_padding", 0)?, per_dim("dilations", 1)?);
    if dilation.contains(&0) {
        return Err(c.err(format!("dilations {dilation:?} must be positive")));
    }
    // Taps `dilation` apart are the kernel with zeros between its taps.
    let w = dilated_kernel(&w, &dilation)?;
    let (xd, wd) = (known_dims(c, &x)?, known_dims(c, &w)?);
    let full = x.conv_transpose2d(&w, None, stride, [0, 0], [0, 0], groups)?;
    let auto = c.string("auto_pad", "NOTSET");
    let lift = |v: Vec<i64>, d: i64| if one_d { vec![d, v[0]] } else { v };
    let mut pads = [[0i64; 2]; 2];
    let out_shape = c.ints("output_shape").map(|v| lift(v, 1));
    for d in 0..2 {
        let natural = (xd[2 + d] as i64 - 1) * stride[d] as i64 + wd[2 + d] as i64 + out_pad[d] as i64;
        let target = match (&out_shape, auto.as_str()) {
            (Some(o), _) => Some(o[o.len() - 2 + d]),
            (None, "SAME_UPPER" | "SAME_LOWER") => Some((xd[2 + d] * stride[d]) as i64),
            _ => None,
        };
        pads[d] = match target {
            Some(t) => {
                // A larger output than the natural one is zeros after (as onnx's reference).
                let total = natural - t;
                if total < 0 {
                    [0, total]
                } else if auto == "SAME_UPPER" {
                    [total / 2, total - total / 2]
                } else {
                    [total - total / 2, total / 2]
                }
            }
            None if auto == "VALID" => [0, 0],
            None => {
                let p = c.ints("pads").map(|p| lift(p.clone(), 0)).unwrap_or_else(|| vec![0; 4]);
                let p = if one_d && p.len() == 3 { vec![0, p[1], 0, p[2]] } else { p };
                if p.len() != 4 {
                    return Err(c.err(format!("{} pads for 2 spatial dims", p.len())));
                }
                [p[d], p[d + 2]]
            }
        };
    }
    let mut y = full;
    for d in 0..2 {
        y = crop(&y, 2 + d, pads[d][0], pads[d][1] - out_pad[d] as i64)?;
    }
    if let Some(b) = c.opt(2) {
        y = y.add(&b.reshape([1, -1, 1, 1])?)?;
    }
    one(if one_d { y.squeeze(2)? } else { y })
}

fn group_norm_with(c: &Ctx, per_group_affine: bool) -> Result<Vec<Tensor>> {
    let (x, scale, bias) = (c.x(0)?, c.x(1)?, c.x(2)?);
    let groups = c.size(c.int_req("num_groups")?, "num_groups")?;
    let eps = c.float("epsilon", 1e-5) as f64;
    let dims = known_dims(c, &x)?;
    if dims.len() < 2 || groups == 0 || dims[1] % groups != 0 {
        return Err(c.err(format!("num_groups {groups} must divide the channels of shape {dims:?}")));
    }
    let per_channel = |t: &Tensor| -> Result<Tensor> {
        let t = if per_group_affine {
            t.reshape([groups as isize, 1])?.broadcast_to(&[groups, dims[1] / groups])?.reshape([dims[1]])?
        } else {
            t.clone()
        };
        let mut shape = vec![1isize; dims.len()];
        shape[1] = -1;
        t.reshape(shape)
    };
    let y = x.group_norm(groups, None, None, eps)?;
    one(y.mul(&per_channel(&scale)?)?.add(&per_channel(&bias)?)?)
}

/// Opset 18: scale and bias per group.
pub(super) fn group_norm_v18(c: &Ctx) -> Result<Vec<Tensor>> {
    group_norm_with(c, true)
}

/// Opset 21: scale and bias per channel.
pub(super) fn group_norm_v21(c: &Ctx) -> Result<Vec<Tensor>> {
    group_norm_with(c, false)
}

/// `x / sqrt(mean(x²) + epsilon) * scale`, the mean over the axes from `axis` on.
pub(super) fn rms_norm(c: &Ctx) -> Result<Vec<Tensor>> {
    let (x, scale) = (c.x(0)?, c.x(1)?);
    let rank = x.rank();
    let axis = c.axis(c.int("axis", -1), rank)?;
    let axes: Vec<isize> = (axis as isize..rank as isize).collect();
    let ms = x.mul(&x)?.mean_axes(&axes, true)?;
    let y = x.div(&ms.add(c.float("epsilon", 1e-5) as f64)?.sqrt()?)?;
    one(y.mul(&scale)?)
}

pub(super) fn einsum(c: &Ctx) -> Result<Vec<Tensor>> {
    let eq: String = c.string("equation", "").chars().filter(|ch| !ch.is_whitespace()).collect();
    let xs = c.all();
    let refs: Vec<&Tensor> = xs.iter().collect();
    one(Tensor::einsum(&eq, &refs)?)
}

/// `-input[n, target[n, ..], ..] * weight[target]`, zero where the target is `ignore_index`,
/// reduced by `reduction` (`mean`: over the weights of the targets not ignored).
fn nll(c: &Ctx, input: &Tensor, target: &Tensor, weight: Option<Tensor>) -> Result<Tensor> {
    let target = target.cast(crate::dtype::DType::I64)?;
    let (safe, keep) = match c.has("ignore_index").then(|| c.int("ignore_index", 0)) {
        Some(ii) => {
            let keep = target.ne(ii)?;
            (Tensor::where_(&keep, &target, &Tensor::scalar(0i64))?, Some(keep.cast(input.dtype())?))
        }
        None => (target.clone(), None),
    };
    let picked = input.gather(1, &safe.unsqueeze(1)?)?.squeeze(1)?;
    let w = match weight {
        Some(w) => Some(w.index_select(0, &safe.flatten_from(0)?)?.reshape(safe.raw_shape().dims())?),
        None => None,
    };
    let w = match (w, keep) {
        (Some(w), Some(k)) => Some(w.mul(&k)?),
        (w, k) => w.or(k),
    };
    let loss = match &w {
        Some(w) => picked.mul(w)?.neg()?,
        None => picked.neg()?,
    };
    match c.string("reduction", "mean").as_str() {
        "none" => Ok(loss),
        "sum" => loss.sum(),
        "mean" => match &w {
            Some(w) => loss.sum()?.div(&w.sum()?),
            None => loss.mean(),
        },
        other => Err(c.err(format!("reduction `{other}` (none, sum and mean are ONNX's)"))),
    }
}

pub(super) fn nll_loss(c: &Ctx) -> Result<Vec<Tensor>> {
    let (input, target) = (c.x(0)?, c.x(1)?);
    one(nll(c, &input, &target, c.opt(2))?)
}

/// `log_softmax` over the classes (axis 1), then the NLL loss; the log-probabilities are
/// output 1 when asked for.
pub(super) fn softmax_cross_entropy(c: &Ctx) -> Result<Vec<Tensor>> {
    let (scores, labels) = (c.x(0)?, c.x(1)?);
    let log_prob = scores.log_softmax(1)?;
    let loss = nll(c, &log_prob, &labels, c.opt(2))?;
    Ok(if c.wants(1) { vec![loss, log_prob] } else { vec![loss] })
}
