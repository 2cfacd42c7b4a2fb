//! Conv, MaxPool and AveragePool where the 2-d kernels do not take them directly: dilations,
//! 3-D (rank-5) inputs, and pooling with `ceil_mode` the 2-d path lacks. Convolutions go to
//! `conv2d_dilated` (1-D lifted to 2-D) and `conv3d`; pools to the separable
//! `max_pool_nd`/`avg_pool_nd`, which take any rank, dilation and begin/end pads; LpPool
//! (any rank) to `lp_pool_nd`.

use super::{known_dims, one, Ctx};
use crate::error::Result;
use crate::ops::PadMode;
use crate::tensor::Tensor;

/// Whether the node needs this path: a rank-5 input or a dilation other than 1.
pub(super) fn needed(c: &Ctx, x: &Tensor) -> bool {
    x.rank() == 5 || c.ints("dilations").is_some_and(|d| d.iter().any(|&v| v != 1))
}

/// The number of spatial dims of `dims` (1 to 3).
fn spatial_rank(c: &Ctx, dims: &[usize]) -> Result<usize> {
    match dims.len() {
        3..=5 => Ok(dims.len() - 2),
        r => Err(c.err(format!("input of rank {r}; only 1-D, 2-D and 3-D (rank 3 to 5) map"))),
    }
}

/// One value per spatial dim of attribute `name`, or `default` for each.
fn per_dim(c: &Ctx, name: &str, spatial: usize, default: usize) -> Result<Vec<usize>> {
    let v = c.ints(name).unwrap_or_else(|| vec![default as i64; spatial]);
    if v.len() != spatial {
        return Err(c.err(format!("attribute `{name}` has {} values for {spatial} spatial dims", v.len())));
    }
    v.iter().map(|&a| c.size(a, name)).collect()
}

/// The `[begin, end]` pads of each spatial dim: `pads`, or `auto_pad`'s (SAME keeps
/// `ceil(n / stride)` outputs, the odd pad at the end for SAME_UPPER, the start for
/// SAME_LOWER).
fn pads(c: &Ctx, input: &[usize], kernel: &[usize], stride: &[usize], dilation: &[usize]) -> Result<Vec<[usize; 2]>> {
    let spatial = input.len();
    match c.string("auto_pad", "NOTSET").as_str() {
        "NOTSET" => {
            let p = per_dim(c, "pads", 2 * spatial, 0)?;
            Ok((0..spatial).map(|d| [p[d], p[spatial + d]]).collect())
        }
        "VALID" => Ok(vec![[0, 0]; spatial]),
        same @ ("SAME_UPPER" | "SAME_LOWER") => Ok((0..spatial)
            .map(|d| {
                let reach = (kernel[d] - 1) * dilation[d] + 1;
                let total = (input[d].div_ceil(stride[d]).saturating_sub(1) * stride[d] + reach).saturating_sub(input[d]);
                let small = total / 2;
                if same == "SAME_LOWER" {
                    [total - small, small]
                } else {
                    [small, total - small]
                }
            })
            .collect()),
        other => Err(c.err(format!("auto_pad `{other}` is not one of NOTSET, VALID, SAME_UPPER, SAME_LOWER"))),
    }
}

/// A pool's input dims, kernel, strides, dilations and pads.
type PoolWindow = (Vec<usize>, Vec<usize>, Vec<[usize; 2]>, Vec<usize>);

fn pool_window(c: &Ctx, x: &Tensor) -> Result<PoolWindow> {
    let dims = known_dims(c, x)?;
    let spatial = spatial_rank(c, &dims)?;
    if c.ints("kernel_shape").is_none() {
        return Err(c.err("the attribute `kernel_shape` is missing; a pool needs its window"));
    }
    let kernel = per_dim(c, "kernel_shape", spatial, 1)?;
    let (stride, dilation) = (per_dim(c, "strides", spatial, 1)?, per_dim(c, "dilations", spatial, 1)?);
    if kernel.contains(&0) || stride.contains(&0) {
        return Err(c.err(format!("kernel_shape {kernel:?} and strides {stride:?} must be positive")));
    }
    let pads = pads(c, &dims[2..], &kernel, &stride, &dilation)?;
    Ok((kernel, stride, pads, dilation))
}

pub(super) fn max_pool(c: &Ctx) -> Result<Vec<Tensor>> {
    let x = c.x(0)?;
    if c.wants(1) {
        return Err(c.err("the Indices output has no tensor-core op"));
    }
    let (kernel, stride, pads, dilation) = pool_window(c, &x)?;
    one(x.max_pool_nd(&kernel, &stride, &pads, &dilation, c.int("ceil_mode", 0) != 0)?)
}

pub(super) fn avg_pool(c: &Ctx) -> Result<Vec<Tensor>> {
    let x = c.x(0)?;
    let (kernel, stride, pads, dilation) = pool_window(c, &x)?;
    let (ceil, include) = (c.int("ceil_mode", 0) != 0, c.int("count_include_pad", 0) != 0);
    one(x.avg_pool_nd(&kernel, &stride, &pads, &dilation, ceil, include)?)
}

pub(super) fn conv(c: &Ctx) -> Result<Vec<Tensor>> {
    let (x, w, bias) = (c.x(0)?, c.x(1)?, c.opt(2));
    let (dims, wd) = (known_dims(c, &x)?, known_dims(c, &w)?);
    let spatial = spatial_rank(c, &dims)?;
    if wd.len() != dims.len() {
        return Err(c.err(format!("weight of rank {}, input of rank {}", wd.len(), dims.len())));
    }
    let groups = c.size(c.int("group", 1), "group")?;
    let (stride, dilation) = (per_dim(c, "strides", spatial, 1)?, per_dim(c, "dilations", spatial, 1)?);
    if stride.contains(&0) || wd[2..].contains(&0) {
        return Err(c.err(format!("strides {stride:?} and the kernel {:?} must be positive", &wd[2..])));
    }
    let pads = pads(c, &dims[2..], &wd[2..], &stride, &dilation)?;
    // The convolutions pad symmetrically; asymmetric pads are zeros added first.
    let (x, padding) = if pads.iter().all(|p| p[0] == p[1]) {
        (x, pads.iter().map(|p| p[0]).collect::<Vec<_>>())
    } else {
        let mut all = vec![(0, 0); 2];
        all.extend(pads.iter().map(|p| (p[0], p[1])));
        (x.pad(&all, PadMode::Constant(0.0))?, vec![0; spatial])
    };
    let b = bias.as_ref();
    one(match spatial {
        1 => x.unsqueeze(2)?.conv2d_dilated(&w.unsqueeze(2)?, b, [1, stride[0]], [0, padding[0]], [1, dilation[0]], groups)?.squeeze(2)?,
        2 => x.conv2d_dilated(&w, b, [stride[0], stride[1]], [padding[0], padding[1]], [dilation[0], dilation[1]], groups)?,
        _ => {
            x.conv3d(&w, b, [stride[0], stride[1], stride[2]], [padding[0], padding[1], padding[2]], [dilation[0], dilation[1], dilation[2]], groups)?
        }
    })
}

/// `(sum |x|^p)^(1/p)` over each window (zero padding adds nothing).
pub(super) fn lp_pool(c: &Ctx) -> Result<Vec<Tensor>> {
    let x = c.x(0)?;
    let (kernel, stride, pads, dilation) = pool_window(c, &x)?;
    let p = c.int("p", 2);
    if p <= 0 {
        return Err(c.err(format!("p {p} must be positive")));
    }
    one(x.lp_pool_nd(p as f64, &kernel, &stride, &pads, &dilation, c.int("ceil_mode", 0) != 0)?)
}
