//! Shapes, indexing and constants: ops whose shape arguments tensor-core takes as Rust
//! values (read from constant inputs when the model runs).

use super::super::decode::{self, Source};
use super::math::scalar;
use super::{known_dims, one, Ctx};
use crate::dtype::{DType, Scalar};
use crate::error::Result;
use crate::tensor::Tensor;

pub(super) fn reshape(c: &Ctx) -> Result<Vec<Tensor>> {
    let x = c.x(0)?;
    let mut spec = c.host_ints(1)?;
    if c.int("allowzero", 0) == 0 && spec.contains(&0) {
        let dims = known_dims(c, &x)?;
        for (i, d) in spec.iter_mut().enumerate() {
            if *d == 0 {
                *d =
                    *dims.get(i).ok_or_else(|| c.err(format!("shape entry {i} is 0 (copy the input's dim) but the input has rank {}", dims.len())))?
                        as i64;
            }
        }
    }
    one(x.reshape(spec)?)
}

pub(super) fn flatten(c: &Ctx) -> Result<Vec<Tensor>> {
    let x = c.x(0)?;
    let dims = x.raw_shape().dims().to_vec();
    let axis = c.int("axis", 1);
    let axis = if axis == dims.len() as i64 { dims.len() } else { c.axis(axis, dims.len())? };
    let inner = known_dims(c, &x).map_or_else(|_| dims[axis..].to_vec(), |d| d[axis..].to_vec());
    if inner.contains(&crate::shape::UNKNOWN) {
        return Err(c.err(format!("needs the dims after axis {axis}, which are unknown in this trace ({})", x.raw_shape())));
    }
    let inner = inner.iter().product::<usize>();
    if dims[..axis].contains(&crate::shape::UNKNOWN) {
        // A dynamic batch: the outer size is inferred (when the graph runs).
        return one(x.reshape([-1, inner as isize])?);
    }
    one(x.reshape([dims[..axis].iter().product::<usize>(), inner])?)
}

fn squeeze_axes(c: &Ctx, x: &Tensor, axes: Option<Vec<i64>>) -> Result<Vec<Tensor>> {
    let dims = known_dims(c, x)?;
    let mut axes = match axes {
        Some(a) => c.axes(&a, dims.len())?,
        None => (0..dims.len()).filter(|&i| dims[i] == 1).collect(),
    };
    axes.sort_unstable();
    axes.dedup();
    let mut y = x.clone();
    for &a in axes.iter().rev() {
        y = y.squeeze(a as isize)?;
    }
    one(y)
}

pub(super) fn squeeze_v1(c: &Ctx) -> Result<Vec<Tensor>> {
    squeeze_axes(c, &c.x(0)?, c.ints("axes"))
}

pub(super) fn squeeze_v13(c: &Ctx) -> Result<Vec<Tensor>> {
    let axes = if c.opt(1).is_some() { Some(c.host_ints(1)?) } else { None };
    squeeze_axes(c, &c.x(0)?, axes)
}

fn unsqueeze_axes(c: &Ctx, x: &Tensor, axes: &[i64]) -> Result<Vec<Tensor>> {
    let mut axes = c.axes(axes, x.rank() + axes.len())?;
    axes.sort_unstable();
    let mut y = x.clone();
    for a in axes {
        y = y.unsqueeze(a as isize)?;
    }
    one(y)
}

pub(super) fn unsqueeze_v1(c: &Ctx) -> Result<Vec<Tensor>> {
    unsqueeze_axes(c, &c.x(0)?, &c.ints("axes").ok_or_else(|| c.err("attribute `axes` is missing"))?)
}

pub(super) fn unsqueeze_v13(c: &Ctx) -> Result<Vec<Tensor>> {
    unsqueeze_axes(c, &c.x(0)?, &c.host_ints(1)?)
}

pub(super) fn transpose(c: &Ctx) -> Result<Vec<Tensor>> {
    let x = c.x(0)?;
    let perm = c.ints("perm").unwrap_or_else(|| (0..x.rank() as i64).rev().collect());
    let perm: Vec<isize> = perm.iter().map(|&p| p as isize).collect();
    one(x.permute(&perm)?)
}

pub(super) fn concat(c: &Ctx) -> Result<Vec<Tensor>> {
    let all = c.all();
    let refs: Vec<&Tensor> = all.iter().collect();
    one(Tensor::concat(&refs, c.int_req("axis")? as isize)?)
}

/// Splits input 0 along `axis` into `sizes`, or into as many equal parts as outputs.
fn split_into(c: &Ctx, sizes: Option<Vec<i64>>) -> Result<Vec<Tensor>> {
    let x = c.x(0)?;
    let dims = known_dims(c, &x)?;
    let axis = c.axis(c.int("axis", 0), dims.len())?;
    let sizes = match sizes {
        Some(s) => s.iter().map(|&v| c.size(v, "split size")).collect::<Result<Vec<_>>>()?,
        None => {
            let parts = if c.has("num_outputs") { c.int("num_outputs", 1) as usize } else { c.node.outputs.len() };
            let each = dims[axis].div_ceil(parts.max(1));
            (0..parts).map(|k| each.min(dims[axis].saturating_sub(k * each))).collect()
        }
    };
    x.split_sizes(&sizes, axis as isize)
}

pub(super) fn split_v1(c: &Ctx) -> Result<Vec<Tensor>> {
    let sizes = c.ints("split").filter(|s| !s.is_empty());
    let sizes = match (sizes, c.opt(1)) {
        (None, Some(_)) => Some(c.host_ints(1)?),
        (s, _) => s,
    };
    split_into(c, sizes)
}

pub(super) fn split_v13(c: &Ctx) -> Result<Vec<Tensor>> {
    let sizes = if c.opt(1).is_some() { Some(c.host_ints(1)?) } else { None };
    split_into(c, sizes)
}

/// Slices `x` along each of `axes` from `starts` to `ends` by `steps`, NumPy's clamping.
fn slice_with(c: &Ctx, x: &Tensor, starts: &[i64], ends: &[i64], axes: Option<Vec<i64>>, steps: Option<Vec<i64>>) -> Result<Vec<Tensor>> {
    let dims = known_dims(c, x)?;
    let axes = axes.unwrap_or_else(|| (0..starts.len() as i64).collect());
    let steps = steps.unwrap_or_else(|| vec![1; starts.len()]);
    if ends.len() != starts.len() || axes.len() != starts.len() || steps.len() != starts.len() {
        return Err(c.err("starts, ends, axes and steps differ in length"));
    }
    let mut y = x.clone();
    for (k, &axis) in axes.iter().enumerate() {
        let axis = c.axis(axis, dims.len())?;
        let (n, step) = (dims[axis] as i64, steps[k]);
        if step == 0 {
            return Err(c.err("a step is 0"));
        }
        let clamp = |v: i64, lo: i64, hi: i64| {
            let v = if v < 0 { v.saturating_add(n) } else { v };
            v.clamp(lo, hi)
        };
        let (start, end) =
            if step > 0 { (clamp(starts[k], 0, n), clamp(ends[k], 0, n)) } else { (clamp(starts[k], -1, n - 1), clamp(ends[k], -1, n - 1)) };
        y = if step == 1 {
            y.narrow(axis as isize, start as usize, (end - start).max(0) as usize)?
        } else {
            let (span, by) = if step > 0 { (end - start, step) } else { (start - end, -step) };
            let count = if span > 0 { (span + by - 1) / by } else { 0 };
            let index: Vec<i64> = (0..count).map(|i| start + i * step).collect();
            y.index_select(axis as isize, &Tensor::from_vec(index, &[count as usize])?)?
        };
    }
    one(y)
}

pub(super) fn slice_v1(c: &Ctx) -> Result<Vec<Tensor>> {
    let (starts, ends) = (c.ints("starts").unwrap_or_default(), c.ints("ends").unwrap_or_default());
    slice_with(c, &c.x(0)?, &starts, &ends, c.ints("axes"), None)
}

pub(super) fn slice_v10(c: &Ctx) -> Result<Vec<Tensor>> {
    let opt = |i: usize| if c.opt(i).is_some() { c.host_ints(i).map(Some) } else { Ok(None) };
    slice_with(c, &c.x(0)?, &c.host_ints(1)?, &c.host_ints(2)?, opt(3)?, opt(4)?)
}

/// Indices with negative ones counted from the end of a dim of size `n`, as i64.
fn wrap_indices(c: &Ctx, i: &Tensor, n: usize) -> Result<Tensor> {
    let i = i.cast(DType::I64)?;
    if i.is_symbolic() {
        return Tensor::where_(&i.lt(0i64)?, &i.add(n as i64)?, &i);
    }
    let values = crate::tensor::context::eagerly(|| i.to_vec::<i64>())?;
    let fixed: Vec<i64> = values.iter().map(|&v| if v < 0 { v + n as i64 } else { v }).collect();
    if let Some(bad) = fixed.iter().find(|&&v| v < 0 || v >= n as i64) {
        return Err(c.err(format!("index {} is out of range for a dim of size {n}", bad - if *bad < 0 { n as i64 } else { 0 })));
    }
    Tensor::from_vec(fixed, i.raw_shape().dims())
}

pub(super) fn gather(c: &Ctx) -> Result<Vec<Tensor>> {
    let (x, i) = (c.x(0)?, c.x(1)?);
    let dims = known_dims(c, &x)?;
    let axis = c.axis(c.int("axis", 0), dims.len())?;
    let i = wrap_indices(c, &i, dims[axis])?;
    let idims = known_dims(c, &i)?;
    let flat = i.reshape([idims.iter().product::<usize>()])?;
    let picked = x.index_select(axis as isize, &flat)?;
    let out: Vec<usize> = dims[..axis].iter().chain(&idims).chain(&dims[axis + 1..]).copied().collect();
    one(picked.reshape(out)?)
}

pub(super) fn gather_elements(c: &Ctx) -> Result<Vec<Tensor>> {
    let (x, i) = (c.x(0)?, c.x(1)?);
    let dims = known_dims(c, &x)?;
    let axis = c.axis(c.int("axis", 0), dims.len())?;
    one(x.gather(axis as isize, &wrap_indices(c, &i, dims[axis])?)?)
}

pub(super) fn expand(c: &Ctx) -> Result<Vec<Tensor>> {
    let x = c.x(0)?;
    let dims = known_dims(c, &x)?;
    let shape = c.host_ints(1)?.iter().map(|&d| c.size(d, "shape entry")).collect::<Result<Vec<_>>>()?;
    let rank = dims.len().max(shape.len());
    let pad = |d: &[usize]| std::iter::repeat_n(1, rank - d.len()).chain(d.iter().copied()).collect::<Vec<_>>();
    let (a, b) = (pad(&dims), pad(&shape));
    let out = a.iter().zip(&b).map(|(&p, &q)| {
        if p == 1 {
            Ok(q)
        } else if q == 1 || q == p {
            Ok(p)
        } else {
            Err(c.err(format!("cannot expand {dims:?} to {shape:?}")))
        }
    });
    let out = out.collect::<Result<Vec<_>>>()?;
    one(x.reshape(a)?.broadcast_to(&out)?)
}

pub(super) fn tile(c: &Ctx) -> Result<Vec<Tensor>> {
    let x = c.x(0)?;
    let repeats = c.host_ints(1)?;
    if repeats.len() != x.rank() {
        return Err(c.err(format!("{} repeats for rank {}", repeats.len(), x.rank())));
    }
    let mut y = x;
    for (axis, &r) in repeats.iter().enumerate() {
        let r = c.size(r, "repeat")?;
        y = if r == 0 { y.narrow(axis as isize, 0, 0)? } else { Tensor::concat(&vec![&y; r], axis as isize)? };
    }
    one(y)
}

/// Pads (or crops, for negative pads) `x` along each axis: constant, edge or reflect.
fn pad_with(c: &Ctx, x: &Tensor, pads: &[i64], axes: Vec<usize>, mode: &str, value: Option<Tensor>) -> Result<Vec<Tensor>> {
    if pads.len() != 2 * axes.len() {
        return Err(c.err(format!("{} pads for {} axes", pads.len(), axes.len())));
    }
    let mut y = x.clone();
    for (k, &axis) in axes.iter().enumerate() {
        let (before, after) = (pads[k], pads[k + axes.len()]);
        let n = known_dims(c, &y)?[axis] as i64;
        let (cut0, cut1) = ((-before).max(0), (-after).max(0));
        if cut0 + cut1 > n {
            return Err(c.err(format!("pads {before}, {after} crop more than the dim of {n}")));
        }
        y = y.narrow(axis as isize, cut0 as usize, (n - cut0 - cut1) as usize)?;
        y = pad_axis(c, &y, axis, before.max(0) as usize, after.max(0) as usize, mode, value.as_ref())?;
    }
    one(y)
}

fn pad_axis(c: &Ctx, y: &Tensor, axis: usize, before: usize, after: usize, mode: &str, value: Option<&Tensor>) -> Result<Tensor> {
    if before == 0 && after == 0 {
        return Ok(y.clone());
    }
    let n = known_dims(c, y)?[axis] as i64;
    if mode == "constant" {
        let mut block = known_dims(c, y)?;
        let fill = |len: usize, block: &mut Vec<usize>| -> Result<Tensor> {
            block[axis] = len;
            match value {
                Some(v) => v.reshape(())?.cast(y.dtype())?.broadcast_to(&block[..]),
                None => Ok(Tensor::zeros(&block[..], y.dtype())),
            }
        };
        let (a, b) = (fill(before, &mut block)?, fill(after, &mut block)?);
        return Tensor::concat(&[&a, y, &b], axis as isize);
    }
    if n == 0 {
        return Err(c.err(format!("{mode} padding of an empty dim")));
    }
    let source = |i: i64| -> i64 {
        match mode {
            "edge" => i.clamp(0, n - 1),
            "wrap" => i.rem_euclid(n),
            _ if n == 1 => 0,
            // reflect: mirror without repeating the edge
            _ => {
                let period = 2 * (n - 1);
                let m = i.rem_euclid(period);
                if m < n {
                    m
                } else {
                    period - m
                }
            }
        }
    };
    let index: Vec<i64> = (-(before as i64)..n + after as i64).map(source).collect();
    let len = index.len();
    y.index_select(axis as isize, &Tensor::from_vec(index, &[len])?)
}

fn pad_mode(c: &Ctx) -> Result<String> {
    let mode = c.string("mode", "constant");
    match mode.as_str() {
        "constant" | "edge" | "reflect" | "wrap" => Ok(mode),
        other => Err(c.err(format!("pad mode `{other}` is not supported (constant, edge, reflect, wrap are)"))),
    }
}

pub(super) fn pad_v2(c: &Ctx) -> Result<Vec<Tensor>> {
    let x = c.x(0)?;
    let pads = c.ints("pads").ok_or_else(|| c.err("attribute `pads` is missing"))?;
    let value = scalar(c.float("value", 0.0) as f64, &x);
    pad_with(c, &x, &pads, (0..x.rank()).collect(), &pad_mode(c)?, Some(value))
}

pub(super) fn pad_v11(c: &Ctx) -> Result<Vec<Tensor>> {
    let x = c.x(0)?;
    let pads = c.host_ints(1)?;
    let axes = match c.opt(3) {
        Some(_) => c.axes(&c.host_ints(3)?, x.rank())?,
        None => (0..x.rank()).collect(),
    };
    pad_with(c, &x, &pads, axes, &pad_mode(c)?, c.opt(2))
}

pub(super) fn shape(c: &Ctx) -> Result<Vec<Tensor>> {
    let dims = known_dims(c, &c.x(0)?)?;
    let rank = dims.len() as i64;
    let bound = |v: i64| (if v < 0 { v + rank } else { v }).clamp(0, rank) as usize;
    let (start, end) = (bound(c.int("start", 0)), bound(c.int("end", rank)));
    let dims: Vec<i64> = dims[start..end.max(start)].iter().map(|&d| d as i64).collect();
    let n = dims.len();
    one(Tensor::from_vec(dims, &[n])?)
}

pub(super) fn size(c: &Ctx) -> Result<Vec<Tensor>> {
    let dims = known_dims(c, &c.x(0)?)?;
    one(Tensor::scalar(dims.iter().product::<usize>() as i64))
}

pub(super) fn constant(c: &Ctx) -> Result<Vec<Tensor>> {
    if let Some(t) = c.tensor_attr("value") {
        return one(decode::tensor(t, &Source { what: &c.node.name, dir: None })?);
    }
    if c.has("value_float") {
        return one(Tensor::scalar(c.float("value_float", 0.0)));
    }
    if c.has("value_int") {
        return one(Tensor::scalar(c.int("value_int", 0)));
    }
    if let Some(v) = c.floats("value_floats") {
        let n = v.len();
        return one(Tensor::from_vec(v, &[n])?);
    }
    if let Some(v) = c.ints("value_ints") {
        let n = v.len();
        return one(Tensor::from_vec(v, &[n])?);
    }
    Err(crate::error::Error::OnnxDType { what: format!("node `{}` (Constant)'s value", c.node.name), dtype: "a string or sparse tensor".into() })
}

pub(super) fn constant_of_shape(c: &Ctx) -> Result<Vec<Tensor>> {
    let dims = c.host_ints(0)?.iter().map(|&d| c.size(d, "dim")).collect::<Result<Vec<_>>>()?;
    if dims.iter().try_fold(1usize, |n, &d| n.checked_mul(d)).is_none_or(|n| n > 1 << 31) {
        return Err(c.err(format!("dims {dims:?} are too large")));
    }
    let value = match c.tensor_attr("value") {
        Some(t) => decode::tensor(t, &Source { what: &c.node.name, dir: None })?,
        None => Tensor::scalar(0.0f32),
    };
    if value.numel() != 1 {
        return Err(c.err("its value has more than one element"));
    }
    let v = value.reshape(())?;
    one(v.broadcast_to(&dims)?)
}

pub(super) fn range(c: &Ctx) -> Result<Vec<Tensor>> {
    let x = c.x(0)?;
    let (start, limit, delta) = (c.host_floats(0)?, c.host_floats(1)?, c.host_floats(2)?);
    let (&[start], &[limit], &[delta]) = (&start[..], &limit[..], &delta[..]) else {
        return Err(c.err("start, limit and delta must be scalars"));
    };
    if delta == 0.0 {
        return Err(c.err("delta is 0"));
    }
    let n = ((limit - start) / delta).ceil().max(0.0);
    if n > (1u64 << 31) as f64 {
        return Err(c.err(format!("{n} elements are too many")));
    }
    let n = n as usize;
    let t = match x.dtype() {
        DType::F32 => Tensor::from_vec((0..n).map(|i| start as f32 + i as f32 * delta as f32).collect::<Vec<f32>>(), &[n])?,
        DType::F64 => Tensor::from_vec((0..n).map(|i| start + i as f64 * delta).collect::<Vec<f64>>(), &[n])?,
        d => Tensor::from_vec((0..n as i64).map(|i| start as i64 + i * delta as i64).collect::<Vec<i64>>(), &[n])?.cast(d)?,
    };
    one(t)
}

pub(super) fn one_hot(c: &Ctx) -> Result<Vec<Tensor>> {
    let (indices, values) = (c.x(0)?, c.x(2)?);
    let depth = c.host_floats(1)?.first().copied().ok_or_else(|| c.err("depth is empty"))?;
    let depth = c.size(depth as i64, "depth")?;
    let rank = indices.rank() + 1;
    let axis = c.axis(c.int("axis", -1), rank)?;
    let i = indices.cast(DType::I64)?;
    let i = Tensor::where_(&i.lt(0i64)?, &i.add(depth as i64)?, &i)?.unsqueeze(axis as isize)?;
    let mut classes = vec![1; rank];
    classes[axis] = depth;
    let classes = Tensor::arange(0i64, depth as i64).reshape(classes)?;
    let (off, on) = (values.narrow(0, 0, 1)?.reshape(())?, values.narrow(0, 1, 1)?.reshape(())?);
    one(Tensor::where_(&i.eq(&classes)?, &on, &off)?)
}

pub(super) fn dropout(c: &Ctx) -> Result<Vec<Tensor>> {
    let x = c.x(0)?;
    let training = c.opt(2).is_some() && c.host_floats(2)?.iter().any(|&t| t != 0.0);
    let ratio = if c.opt(1).is_some() { c.host_floats(1)?.first().copied().unwrap_or(0.5) } else { 0.5 };
    if training && ratio != 0.0 {
        return Err(c.err("training_mode is on with a ratio above 0; import runs inference (Dropout is the identity)"));
    }
    let mut outs = vec![x.clone()];
    if c.wants(1) {
        outs.push(Tensor::full(&known_dims(c, &x)?, Scalar::Bool(true), DType::Bool));
    }
    Ok(outs)
}
