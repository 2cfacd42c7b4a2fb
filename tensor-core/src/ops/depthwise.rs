//! The depthwise convolution (`ConvOp::Depthwise2d` and its two adjoints): each input
//! channel convolved with its own filters by one direct kernel (`kernels::depthwise`),
//! instead of one small `conv2d` per group. `conv2d_grouped` and `conv2d_dilated` take this
//! path when `groups` is the input's channel count. The adjoints are ops of their own, so the
//! backward pass traces like any other, and they are differentiable once more.

use super::conv::{known_hw, need_forward_output, need_positive, need_rank4, out_len, ConvOp};
use super::dispatch::apply;
use super::{Family, InputGrads, TypeRef};
use crate::error::{Error, Result};
use crate::kernels::clamp::Clamp;
use crate::kernels::depthwise::{self as kd, DepthwiseGeom};
use crate::shape::{Shape, UNKNOWN};
use crate::storage::Storage;
use crate::tensor::grad_node::BackwardCtx;
use crate::tensor::Tensor;
use smallvec::smallvec;

impl Tensor {
    /// The depthwise 2-d convolution of `self` `[n, c, h, w]` with `weight`
    /// `[c * m, 1, kh, kw]`: input channel `i` convolved with filters `i * m .. (i + 1) * m`,
    /// moved by `stride` over the input zero-padded by `padding` on both sides, taps
    /// `dilation` apart, plus `bias` `[c * m]` if given. The same as
    /// `conv2d_dilated(weight, bias, stride, padding, dilation, c)` (which runs it), by one
    /// direct kernel.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 10.0, 20.0, 30.0], &[1, 2, 1, 3])?;
    /// let w = Tensor::from_vec(vec![1.0f32, -1.0, 0.5, 0.5], &[2, 1, 1, 2])?; // one filter per channel
    /// let y = x.conv2d_depthwise(&w, None, [1, 1], [0, 0], [1, 1])?;
    /// assert_eq!(y.to_vec::<f32>()?, vec![-1.0, -1.0, 15.0, 25.0]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn conv2d_depthwise(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        stride: [usize; 2],
        padding: [usize; 2],
        dilation: [usize; 2],
    ) -> Result<Tensor> {
        let op = ConvOp::Depthwise2d { stride, padding, dilation };
        match bias {
            Some(b) => apply(op, &[self, weight, b]),
            None => apply(op, &[self, weight]),
        }
    }
}

/// The output length of a window of `k` taps `d` apart moved by `s` over `n` padded by `p`
/// on both sides (unknown where `n` or `k` is).
fn dilated_len(op: &'static str, n: usize, k: usize, s: usize, p: usize, d: usize) -> Result<usize> {
    if n == UNKNOWN || k == UNKNOWN {
        return Ok(UNKNOWN);
    }
    let reach = k.checked_sub(1).and_then(|k| k.checked_mul(d)).and_then(|r| r.checked_add(1));
    let padded = p.checked_mul(2).and_then(|p| p.checked_add(n));
    match (reach, padded) {
        (Some(reach), Some(_)) => out_len(op, n, reach, s, p),
        _ => Err(Error::invalid(op, "weight", format!("a kernel of {k} taps {d} apart over {n} padded by {p} is out of range"))),
    }
}

/// The output shape of the depthwise convolution of `x` by `w`.
fn forward_shape(op: &'static str, x: &Shape, w: &Shape, stride: [usize; 2], padding: [usize; 2], dilation: [usize; 2]) -> Result<Shape> {
    need_positive(op, "stride", stride)?;
    need_positive(op, "dilation", dilation)?;
    let oh = dilated_len(op, x[2], w[2], stride[0], padding[0], dilation[0])?;
    let ow = dilated_len(op, x[3], w[3], stride[1], padding[1], dilation[1])?;
    Ok(Shape::new(&[x[0], w[0], oh, ow]))
}

/// Checks that `w` `[c * m, 1, kh, kw]` holds whole groups of filters for `x`'s `c` channels.
fn need_filters_per_channel(op: &'static str, x: &Shape, w: &Shape) -> Result<()> {
    need_rank4(op, "input", x)?;
    need_rank4(op, "weight", w)?;
    let whole = x[1] == UNKNOWN || (x[1] > 0 && w[0].is_multiple_of(x[1]));
    if w[1] != 1 || !whole {
        return Err(Error::shapes(op, x, w, format!("the weight must be [c * m, 1, kh, kw] for the input's {} channels", x[1])));
    }
    Ok(())
}

pub(super) fn infer(op: &ConvOp, inputs: &[TypeRef]) -> Result<Shape> {
    let name = op.name();
    match op {
        ConvOp::Depthwise2d { stride, padding, dilation } => {
            let (x, w) = (inputs[0].shape, inputs[1].shape);
            need_filters_per_channel(name, x, w)?;
            if let Some(b) = inputs.get(2)
                && b.shape.dims() != [w[0]]
            {
                return Err(Error::shapes(name, w, b.shape, format!("the bias must be [{}], one value per output channel", w[0])));
            }
            forward_shape(name, x, w, *stride, *padding, *dilation)
        }
        ConvOp::Depthwise2dInputGrad { stride, padding, dilation, input_hw, multiplier } => {
            let (gy, w) = (inputs[0].shape, inputs[1].shape);
            need_rank4(name, "grad_output", gy)?;
            if *multiplier == 0 || (w.rank() == 4 && w[0] != UNKNOWN && !w[0].is_multiple_of(*multiplier)) {
                return Err(Error::invalid(name, "multiplier", format!("{multiplier} must be positive and divide the weight's {w} filters")));
            }
            let channels = if w.rank() == 4 && w[0] != UNKNOWN { w[0] / multiplier } else { UNKNOWN };
            let x = Shape::new(&[gy[0], channels, input_hw[0], input_hw[1]]);
            need_filters_per_channel(name, &x, w)?;
            need_forward_output(op, gy, &forward_shape(name, &x, w, *stride, *padding, *dilation)?)?;
            Ok(x)
        }
        ConvOp::Depthwise2dWeightGrad { stride, padding, dilation, kernel_hw } => {
            let (x, gy) = (inputs[0].shape, inputs[1].shape);
            need_rank4(name, "grad_output", gy)?;
            let w = Shape::new(&[gy[1], 1, kernel_hw[0], kernel_hw[1]]);
            need_filters_per_channel(name, x, &w)?;
            need_forward_output(op, gy, &forward_shape(name, x, &w, *stride, *padding, *dilation)?)?;
            Ok(w)
        }
        _ => unreachable!("not a depthwise op: {op:?}"),
    }
}

fn geom(x: &Shape, filters: usize, kernel_hw: [usize; 2], stride: [usize; 2], padding: [usize; 2], dilation: [usize; 2]) -> DepthwiseGeom {
    let m = filters.checked_div(x[1]).unwrap_or(1);
    DepthwiseGeom { n: x[0], c: x[1], h: x[2], w: x[3], m, kh: kernel_hw[0], kw: kernel_hw[1], stride, padding, dilation }
}

pub(super) fn compute(op: &ConvOp, inputs: &[&Storage]) -> Storage {
    let other = || unreachable!("dtypes checked by infer");
    match op {
        ConvOp::Depthwise2d { stride, padding, dilation } => {
            let (x, w) = (inputs[0].shape(), inputs[1].shape());
            let g = geom(&x, w[0], [w[2], w[3]], *stride, *padding, *dilation);
            let (oh, ow) = g.out_hw();
            super::conv::written_by_conv(op, inputs, &[g.n, g.out_channels(), oh, ow])
        }
        ConvOp::Depthwise2dInputGrad { stride, padding, dilation, input_hw, multiplier } => {
            let (gy, w) = (inputs[0].shape(), inputs[1].shape());
            let x = Shape::new(&[gy[0], w[0] / multiplier, input_hw[0], input_hw[1]]);
            let g = geom(&x, w[0], [w[2], w[3]], *stride, *padding, *dilation);
            match (inputs[0], inputs[1]) {
                (Storage::F32(gy), Storage::F32(w)) => Storage::F32(kd::depthwise2d_input_grad(gy, w, &g)),
                (Storage::F64(gy), Storage::F64(w)) => Storage::F64(kd::depthwise2d_input_grad(gy, w, &g)),
                _ => other(),
            }
        }
        ConvOp::Depthwise2dWeightGrad { stride, padding, dilation, kernel_hw } => {
            let (x, gy) = (inputs[0].shape(), inputs[1].shape());
            let g = geom(&x, gy[1], *kernel_hw, *stride, *padding, *dilation);
            match (inputs[0], inputs[1]) {
                (Storage::F32(x), Storage::F32(gy)) => Storage::F32(kd::depthwise2d_weight_grad(x, gy, &g)),
                (Storage::F64(x), Storage::F64(gy)) => Storage::F64(kd::depthwise2d_weight_grad(x, gy, &g)),
                _ => other(),
            }
        }
        _ => unreachable!("not a depthwise op: {op:?}"),
    }
}

/// The depthwise2d op `op` on `inputs`, written into `out`, with `after(start, len)` called
/// on each block of output positions once it is final (on the thread that made it): the
/// hook an epilogue runs in. With `clamp` (f32 only), every output is clamped first.
///
/// # Safety
/// `out` must point to a buffer of the op's output dtype and element count, in row-major
/// order, that nothing else writes while this runs.
pub(super) unsafe fn depthwise2d_into(op: &ConvOp, inputs: &[&Storage], out: *mut u8, clamp: Option<Clamp>, after: &(dyn Fn(usize, usize) + Sync)) {
    unsafe {
        let ConvOp::Depthwise2d { stride, padding, dilation } = op else { unreachable!("not depthwise2d: {op:?}") };
        let (x, w) = (inputs[0].shape(), inputs[1].shape());
        let g = geom(&x, w[0], [w[2], w[3]], *stride, *padding, *dilation);
        let len = g.n * g.out_channels() * g.out_plane();
        match (inputs[0], inputs[1], inputs.get(2)) {
            (Storage::F32(x), Storage::F32(w), b) => {
                kd::depthwise2d_into(x, w, b.and_then(|b| b.array::<f32>()), &g, std::slice::from_raw_parts_mut(out as *mut f32, len), clamp, after)
            }
            (Storage::F64(x), Storage::F64(w), b) => {
                kd::depthwise2d_into(x, w, b.and_then(|b| b.array::<f64>()), &g, std::slice::from_raw_parts_mut(out as *mut f64, len), clamp, after)
            }
            _ => unreachable!("dtypes checked by infer"),
        }
    }
}

/// Filters per input channel: `filters` over the channels of `x`, which must be known.
fn multiplier(op: &'static str, filters: usize, x: &Shape) -> Result<usize> {
    match x[1] {
        UNKNOWN => Err(Error::NotDifferentiable { op, detail: " with the input's channels unknown in this trace" }),
        c => Ok(filters / c),
    }
}

pub(super) fn backward(op: &ConvOp, ctx: &BackwardCtx, g: &Tensor) -> Result<InputGrads> {
    let name = op.name();
    match *op {
        ConvOp::Depthwise2d { stride, padding, dilation } => {
            let (x, w) = (ctx.input(0)?, ctx.input(1)?);
            let (input_hw, kernel_hw) = (known_hw(name, ctx.input_shape(0))?, known_hw(name, ctx.input_shape(1))?);
            let multiplier = multiplier(name, ctx.input_shape(1)[0], ctx.input_shape(0))?;
            let gx = match ctx.needs_grad(0) {
                true => Some(apply(ConvOp::Depthwise2dInputGrad { stride, padding, dilation, input_hw, multiplier }, &[g, &w])?),
                false => None,
            };
            let gw = match ctx.needs_grad(1) {
                true => Some(apply(ConvOp::Depthwise2dWeightGrad { stride, padding, dilation, kernel_hw }, &[&x, g])?),
                false => None,
            };
            let mut grads = smallvec![gx, gw];
            if ctx.num_inputs() == 3 {
                grads.push(Some(g.sum_axes(&[0, 2, 3], false)?));
            }
            Ok(grads)
        }
        ConvOp::Depthwise2dInputGrad { stride, padding, dilation, .. } => {
            // dx is linear in both inputs; its adjoints are the forward op and the weight grad.
            let (gy, w) = (ctx.input(0)?, ctx.input(1)?);
            let kernel_hw = known_hw(name, ctx.input_shape(1))?;
            let ggy = g.conv2d_depthwise(&w, None, stride, padding, dilation)?;
            let gw = apply(ConvOp::Depthwise2dWeightGrad { stride, padding, dilation, kernel_hw }, &[g, &gy])?;
            Ok(smallvec![Some(ggy), Some(gw)])
        }
        ConvOp::Depthwise2dWeightGrad { stride, padding, dilation, .. } => {
            let (x, gy) = (ctx.input(0)?, ctx.input(1)?);
            let input_hw = known_hw(name, ctx.input_shape(0))?;
            let multiplier = multiplier(name, ctx.input_shape(1)[1], ctx.input_shape(0))?;
            let gx = apply(ConvOp::Depthwise2dInputGrad { stride, padding, dilation, input_hw, multiplier }, &[&gy, g])?;
            let ggy = x.conv2d_depthwise(g, None, stride, padding, dilation)?;
            Ok(smallvec![Some(gx), Some(ggy)])
        }
        _ => unreachable!("not a depthwise op: {op:?}"),
    }
}
