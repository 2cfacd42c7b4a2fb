//! Indexing ops whose indices are known when the model runs (initializers, constants,
//! integer inputs): the index arithmetic is done on the host, and the data moves through
//! `index_select` and `where_`, so a traced graph holds the positions as constants and
//! gradients reach the data and the updates.

use super::super::decode;
use super::{known_dims, one, Ctx};
use crate::error::Result;
use crate::tensor::Tensor;

/// `t` flattened, then the elements at `positions` (flat), shaped `dims`.
fn take_flat(t: &Tensor, positions: Vec<i64>, dims: &[usize]) -> Result<Tensor> {
    let n = positions.len();
    let flat = t.reshape([-1isize])?;
    flat.index_select(0, &Tensor::from_vec(positions, &[n])?)?.reshape(dims)
}

/// Row-major strides of `dims`.
fn strides(dims: &[usize]) -> Vec<usize> {
    let mut s = vec![1; dims.len()];
    for d in (0..dims.len().saturating_sub(1)).rev() {
        s[d] = s[d + 1] * dims[d + 1];
    }
    s
}

/// An index along a dim of size `n`, negative counting from the end; an `Err` outside.
fn wrap(c: &Ctx, i: i64, n: usize, what: &str) -> Result<usize> {
    let j = if i < 0 { i + n as i64 } else { i };
    usize::try_from(j).ok().filter(|&j| j < n).ok_or_else(|| c.err(format!("{what} index {i} is out of range for a dim of {n}")))
}

/// `data` with the updates written where `targets` says (`targets[u]`: the flat position
/// update `u` lands on), combined by `reduction` (none: the last write wins; add, mul, max,
/// min: folded in order). Each round writes at most one update per position.
fn scatter(c: &Ctx, data: &Tensor, updates: &Tensor, targets: &[usize], reduction: &str) -> Result<Tensor> {
    let dims = known_dims(c, data)?;
    let numel: usize = dims.iter().product();
    let mut per_position: Vec<Vec<usize>> = vec![Vec::new(); numel];
    for (u, &t) in targets.iter().enumerate() {
        per_position[t].push(u);
    }
    if reduction == "none" {
        for writes in &mut per_position {
            if let Some(&last) = writes.last() {
                *writes = vec![last];
            }
        }
    }
    let rounds = per_position.iter().map(Vec::len).max().unwrap_or(0);
    let mut out = data.clone();
    for r in 0..rounds {
        let source: Vec<i64> = per_position.iter().map(|w| w.get(r).map_or(0, |&u| u as i64)).collect();
        let mask: Vec<bool> = per_position.iter().map(|w| w.len() > r).collect();
        let picked = take_flat(updates, source, &dims)?;
        let value = match reduction {
            "none" => picked,
            "add" => out.add(&picked)?,
            "mul" => out.mul(&picked)?,
            "max" => out.maximum(&picked)?,
            "min" => out.minimum(&picked)?,
            other => return Err(c.err(format!("reduction `{other}` is none of none, add, mul, max, min"))),
        };
        out = Tensor::where_(&Tensor::from_vec(mask, &dims)?, &value, &out)?;
    }
    Ok(out)
}

/// ScatterElements (and the older Scatter): update `i` goes where its own position says,
/// with `indices[i]` along `axis`.
pub(super) fn scatter_elements(c: &Ctx) -> Result<Vec<Tensor>> {
    let (data, indices, updates) = (c.x(0)?, c.x(1)?, c.x(2)?);
    let dims = known_dims(c, &data)?;
    let axis = c.axis(c.int("axis", 0), dims.len())?;
    let index_dims = known_dims(c, &indices)?;
    let (index_strides, data_strides) = (strides(&index_dims), strides(&dims));
    let targets = c
        .host_ints(1)?
        .iter()
        .enumerate()
        .map(|(flat, &i)| {
            let mut target = 0;
            for d in 0..dims.len() {
                let at = flat / index_strides[d] % index_dims[d];
                let at = if d == axis { wrap(c, i, dims[d], "ScatterElements")? } else { at };
                target += at * data_strides[d];
            }
            Ok(target)
        })
        .collect::<Result<Vec<_>>>()?;
    one(scatter(c, &data, &updates, &targets, &c.string("reduction", "none"))?)
}

/// The flat offsets into `data` of each index tuple of `indices` (its last dim `k`), and the
/// size of the slice each one addresses (the dims after the first `k`).
fn tuple_offsets(c: &Ctx, dims: &[usize], index_dims: &[usize], values: &[i64]) -> Result<(Vec<usize>, usize)> {
    let k = *index_dims.last().ok_or_else(|| c.err("indices has rank 0; needs at least 1"))?;
    if k > dims.len() {
        return Err(c.err(format!("index tuples of {k} for data of rank {}", dims.len())));
    }
    let data_strides = strides(dims);
    let inner: usize = dims[k..].iter().product();
    let offsets = values
        .chunks(k.max(1))
        .map(|tuple| tuple.iter().enumerate().try_fold(0, |acc, (d, &i)| Ok(acc + wrap(c, i, dims[d], "tuple")? * data_strides[d])))
        .collect::<Result<Vec<usize>>>()?;
    Ok((offsets, inner))
}

/// ScatterND: each index tuple of `indices` names a slice of `data` that its update replaces
/// (or is combined with).
pub(super) fn scatter_nd(c: &Ctx) -> Result<Vec<Tensor>> {
    let (data, indices, updates) = (c.x(0)?, c.x(1)?, c.x(2)?);
    let dims = known_dims(c, &data)?;
    let (offsets, inner) = tuple_offsets(c, &dims, &known_dims(c, &indices)?, &c.host_ints(1)?)?;
    let targets: Vec<usize> = offsets.iter().flat_map(|&o| (0..inner).map(move |s| o + s)).collect();
    one(scatter(c, &data, &updates, &targets, &c.string("reduction", "none"))?)
}

/// GatherND with `batch_dims`: per batch, the slices the index tuples name.
pub(super) fn gather_nd(c: &Ctx) -> Result<Vec<Tensor>> {
    let (data, indices) = (c.x(0)?, c.x(1)?);
    let (dims, index_dims) = (known_dims(c, &data)?, known_dims(c, &indices)?);
    let b = c.size(c.int("batch_dims", 0), "batch_dims")?;
    if b >= index_dims.len() || b > dims.len() {
        return Err(c.err(format!("batch_dims {b} does not fit indices of rank {} and data of rank {}", index_dims.len(), dims.len())));
    }
    let batches: usize = dims[..b].iter().product();
    let batch_data: usize = dims[b..].iter().product();
    let values = c.host_ints(1)?;
    let per_batch = values.len() / batches.max(1);
    let mut positions = Vec::new();
    for (batch, chunk) in values.chunks(per_batch.max(1)).enumerate().take(batches) {
        let (offsets, size) = tuple_offsets(c, &dims[b..], &index_dims[b..], chunk)?;
        positions.extend(offsets.iter().flat_map(|&o| (0..size).map(move |s| (batch * batch_data + o + s) as i64)));
    }
    let k = index_dims[index_dims.len() - 1];
    let out: Vec<usize> = index_dims[..index_dims.len() - 1].iter().chain(&dims[b + k..]).copied().collect();
    one(take_flat(&data, positions, &out)?)
}

/// Compress: the slices along `axis` (or of the flattened input) where `condition` is true.
pub(super) fn compress(c: &Ctx) -> Result<Vec<Tensor>> {
    let x = c.x(0)?;
    let keep: Vec<i64> = c.host_ints(1)?.iter().enumerate().filter(|(_, v)| **v != 0).map(|(i, _)| i as i64).collect();
    let (x, axis) = match c.has("axis") {
        true => (x.clone(), c.axis(c.int("axis", 0), x.rank())?),
        false => (x.reshape([-1isize])?, 0),
    };
    let n = known_dims(c, &x)?[axis];
    if keep.iter().any(|&i| i as usize >= n) {
        return Err(c.err(format!("condition selects past the {n} slices of the axis")));
    }
    let count = keep.len();
    one(x.index_select(axis as isize, &Tensor::from_vec(keep, &[count])?)?)
}

/// ReverseSequence: along `time_axis`, the first `sequence_lens[b]` steps of batch `b`
/// reversed, the rest as they are.
pub(super) fn reverse_sequence(c: &Ctx) -> Result<Vec<Tensor>> {
    let x = c.x(0)?;
    let dims = known_dims(c, &x)?;
    let (t_axis, b_axis) = (c.axis(c.int("time_axis", 0), dims.len())?, c.axis(c.int("batch_axis", 1), dims.len())?);
    let lens = c.host_ints(1)?;
    let s = strides(&dims);
    let numel: usize = dims.iter().product();
    let positions = (0..numel)
        .map(|flat| {
            let (t, b) = (flat / s[t_axis] % dims[t_axis], flat / s[b_axis] % dims[b_axis]);
            let len = lens.get(b).copied().unwrap_or(0).clamp(0, dims[t_axis] as i64) as usize;
            let source_t = if t < len { len - 1 - t } else { t };
            (flat + source_t * s[t_axis] - t * s[t_axis]) as i64
        })
        .collect();
    one(take_flat(&x, positions, &dims)?)
}

/// NonZero: the indices of the non-zero elements, one row per dim (its input is read on the
/// host: it must be known when the model runs).
pub(super) fn non_zero(c: &Ctx) -> Result<Vec<Tensor>> {
    let x = c.x(0)?;
    let dims = known_dims(c, &x)?;
    let values = c.host_floats(0)?;
    let s = strides(&dims);
    let hits: Vec<usize> = values.iter().enumerate().filter(|(_, v)| **v != 0.0).map(|(i, _)| i).collect();
    let rows: Vec<i64> = (0..dims.len()).flat_map(|d| hits.iter().map(|&h| (h / s[d] % dims[d]) as i64).collect::<Vec<_>>()).collect();
    one(Tensor::from_vec(rows, &[dims.len(), hits.len()])?)
}

/// EyeLike: ones on diagonal `k` of a matrix shaped like the input, in `dtype` (or the
/// input's).
pub(super) fn eye_like(c: &Ctx) -> Result<Vec<Tensor>> {
    let x = c.x(0)?;
    let dims = known_dims(c, &x)?;
    let [rows, cols] = dims[..] else { return Err(c.err(format!("input of rank {}; EyeLike takes a matrix", dims.len()))) };
    let dtype = match c.has("dtype") {
        true => decode::dtype(c.int("dtype", 1) as i32, || format!("node `{}` (EyeLike)'s dtype", c.node.name))?,
        false => x.dtype(),
    };
    let k = c.int("k", 0);
    let eye: Vec<f64> = (0..rows * cols).map(|i| f64::from(u8::from((i % cols) as i64 - (i / cols) as i64 == k))).collect();
    one(Tensor::from_vec(eye, &dims)?.cast(dtype)?)
}

/// SpaceToDepth: each `blocksize` x `blocksize` block of the image as channels.
pub(super) fn space_to_depth(c: &Ctx) -> Result<Vec<Tensor>> {
    let x = c.x(0)?;
    let (n, ch, h, w, b) = image_and_block(c, &x)?;
    if h % b != 0 || w % b != 0 {
        return Err(c.err(format!("height {h} and width {w} must be multiples of blocksize {b}")));
    }
    let blocks = x.reshape([n, ch, h / b, b, w / b, b])?.permute(&[0, 3, 5, 1, 2, 4])?;
    one(blocks.reshape([n, ch * b * b, h / b, w / b])?)
}

/// DepthToSpace (`DCR`, depth-column-row, or `CRD`): channels back into blocks of the image.
pub(super) fn depth_to_space(c: &Ctx) -> Result<Vec<Tensor>> {
    let x = c.x(0)?;
    let (n, ch, h, w, b) = image_and_block(c, &x)?;
    if ch % (b * b) != 0 {
        return Err(c.err(format!("{ch} channels are not a multiple of blocksize {b} squared")));
    }
    let moved = match c.string("mode", "DCR").as_str() {
        "DCR" => x.reshape([n, b, b, ch / (b * b), h, w])?.permute(&[0, 3, 4, 1, 5, 2])?,
        "CRD" => x.reshape([n, ch / (b * b), b, b, h, w])?.permute(&[0, 1, 4, 2, 5, 3])?,
        other => return Err(c.err(format!("mode `{other}` is neither DCR nor CRD"))),
    };
    one(moved.reshape([n, ch / (b * b), h * b, w * b])?)
}

/// An NCHW input's dims and the `blocksize` attribute, as reshape sizes.
fn image_and_block(c: &Ctx, x: &Tensor) -> Result<(usize, usize, usize, usize, usize)> {
    let dims = known_dims(c, x)?;
    let [n, ch, h, w] = dims[..] else { return Err(c.err(format!("input of rank {}; needs NCHW", dims.len()))) };
    let b = c.size(c.int_req("blocksize")?, "blocksize")?;
    if b == 0 {
        return Err(c.err("blocksize is 0"));
    }
    Ok((n, ch, h, w, b))
}

/// CenterCropPad: each axis cropped (centered, the extra element at the end) or zero-padded
/// (centered, the extra zero at the end) to the size asked.
pub(super) fn center_crop_pad(c: &Ctx) -> Result<Vec<Tensor>> {
    let mut x = c.x(0)?;
    let sizes = c.host_ints(1)?;
    let rank = x.rank();
    let axes = match c.ints("axes") {
        Some(a) => c.axes(&a, rank)?,
        None => (0..rank).collect(),
    };
    if axes.len() != sizes.len() {
        return Err(c.err(format!("{} sizes for {} axes", sizes.len(), axes.len())));
    }
    for (&axis, &size) in axes.iter().zip(&sizes) {
        let (dim, size) = (known_dims(c, &x)?[axis], c.size(size, "size")?);
        if dim > size {
            x = x.narrow(axis as isize, (dim - size) / 2, size)?;
        } else if dim < size {
            let before = (size - dim) / 2;
            let mut pads = vec![(0, 0); rank];
            pads[axis] = (before, size - dim - before);
            x = x.pad(&pads, crate::ops::PadMode::Constant(0.0))?;
        }
    }
    one(x)
}
