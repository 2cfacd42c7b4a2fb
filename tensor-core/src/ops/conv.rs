//! conv2d (NCHW input, OIHW weight, stride, padding, optional bias) and max_pool2d, with
//! their gradients. The convolution's adjoints are ops of their own, so the backward pass
//! traces like any other, and they are differentiable once more (conv2d's double backward).

use super::dispatch::apply;
use super::{need_float, InputGrads, Op, TypeRef};
use crate::autograd::BackwardCtx;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::kernels::conv::{self as kc, ConvGeom};
use crate::kernels::pool::{self as kp, PoolGeom};
use crate::shape::{Shape, UNKNOWN};
use crate::storage::Storage;
use crate::tensor::Tensor;
use smallvec::smallvec;

impl Tensor {
    /// The 2-d convolution (cross-correlation, as in PyTorch) of `self` `[n, c, h, w]` with
    /// `weight` `[o, c, kh, kw]`, plus `bias` `[o]` if given.
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let x = Tensor::ones(&[1, 1, 4, 4], DType::F32);
    /// let w = Tensor::ones(&[2, 1, 3, 3], DType::F32);
    /// let y = x.conv2d(&w, None, [1, 1], [1, 1])?;
    /// assert_eq!(y.dims(), vec![1, 2, 4, 4]);
    /// assert_eq!(y.to_vec::<f32>()?[5], 9.0); // an inner position sees all 9 ones
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn conv2d(&self, weight: &Tensor, bias: Option<&Tensor>, stride: [usize; 2], padding: [usize; 2]) -> Result<Tensor> {
        let op = Op::Conv2d { stride, padding };
        match bias {
            Some(b) => apply(op, &[self, weight, b]),
            None => apply(op, &[self, weight]),
        }
    }

    /// 2-d max pooling of `self` `[n, c, h, w]` with a `kernel` window moved by `stride`
    /// (no padding).
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let x = Tensor::arange(0.0f32, 16.0).reshape(&[1, 1, 4, 4])?;
    /// let y = x.max_pool2d([2, 2], [2, 2])?;
    /// assert_eq!(y.to_vec::<f32>()?, vec![5.0, 7.0, 13.0, 15.0]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn max_pool2d(&self, kernel: [usize; 2], stride: [usize; 2]) -> Result<Tensor> {
        apply(Op::MaxPool2d { kernel, stride }, &[self])
    }
}

fn need_rank4(op: &'static str, arg: &'static str, s: &Shape) -> Result<()> {
    if s.rank() == 4 {
        Ok(())
    } else {
        Err(Error::invalid(op, arg, format!("must be 4-d (NCHW / OIHW), found shape {s}")))
    }
}

fn need_positive(op: &'static str, arg: &'static str, v: [usize; 2]) -> Result<()> {
    if v[0] > 0 && v[1] > 0 {
        Ok(())
    } else {
        Err(Error::invalid(op, arg, format!("{v:?} must be positive")))
    }
}

/// Output size of a window of `k` moved by `s` over `n` (+ padding on both sides).
fn out_len(op: &'static str, n: usize, k: usize, s: usize, p: usize) -> Result<usize> {
    if n == UNKNOWN {
        return Ok(UNKNOWN);
    }
    if n + 2 * p < k {
        return Err(Error::invalid(op, "kernel", format!("window {k} is larger than the padded input {}", n + 2 * p)));
    }
    Ok((n + 2 * p - k) / s + 1)
}

fn same_dtype(op: &'static str, inputs: &[TypeRef]) -> Result<DType> {
    let d = inputs[0].dtype;
    need_float(op, d)?;
    for t in &inputs[1..] {
        if t.dtype != d {
            return Err(Error::dtype_mismatch(op, d, t.dtype));
        }
    }
    Ok(d)
}

pub(super) fn infer(op: &Op, inputs: &[TypeRef]) -> Result<(DType, Shape)> {
    let dtype = same_dtype(op.name(), inputs)?;
    let shape = match op {
        Op::Conv2d { stride, padding } => conv_shape(inputs, *stride, *padding)?,
        Op::Conv2dInputGrad { input_hw, .. } => {
            let (gy, w) = (inputs[0].shape, inputs[1].shape);
            Shape::new(&[gy[0], w[1], input_hw[0], input_hw[1]])
        }
        Op::Conv2dWeightGrad { kernel_hw, .. } => {
            let (x, gy) = (inputs[0].shape, inputs[1].shape);
            Shape::new(&[gy[1], x[1], kernel_hw[0], kernel_hw[1]])
        }
        Op::MaxPool2d { kernel, stride } => {
            let x = inputs[0].shape;
            need_rank4("max_pool2d", "input", x)?;
            need_positive("max_pool2d", "kernel", *kernel)?;
            need_positive("max_pool2d", "stride", *stride)?;
            let oh = out_len("max_pool2d", x[2], kernel[0], stride[0], 0)?;
            let ow = out_len("max_pool2d", x[3], kernel[1], stride[1], 0)?;
            Shape::new(&[x[0], x[1], oh, ow])
        }
        Op::MaxPool2dGrad { .. } => inputs[0].shape.clone(),
        _ => unreachable!("not a conv op: {op:?}"),
    };
    Ok((dtype, shape))
}

fn conv_shape(inputs: &[TypeRef], stride: [usize; 2], padding: [usize; 2]) -> Result<Shape> {
    let (x, w) = (inputs[0].shape, inputs[1].shape);
    need_rank4("conv2d", "input", x)?;
    need_rank4("conv2d", "weight", w)?;
    need_positive("conv2d", "stride", stride)?;
    if x[1] != w[1] && x[1] != UNKNOWN {
        return Err(Error::shapes("conv2d", x, w, format!("the input has {} channels but the weight expects {}", x[1], w[1])));
    }
    if let Some(b) = inputs.get(2)
        && b.shape.dims() != [w[0]]
    {
        return Err(Error::shapes("conv2d", w, b.shape, format!("the bias must be [{}], one value per output channel", w[0])));
    }
    let oh = out_len("conv2d", x[2], w[2], stride[0], padding[0])?;
    let ow = out_len("conv2d", x[3], w[3], stride[1], padding[1])?;
    Ok(Shape::new(&[x[0], w[0], oh, ow]))
}

fn geom(x: &Shape, w: &Shape, stride: [usize; 2], padding: [usize; 2]) -> ConvGeom {
    ConvGeom { n: x[0], c: x[1], h: x[2], w: x[3], o: w[0], kh: w[2], kw: w[3], stride, padding }
}

pub(super) fn compute(op: &Op, inputs: &[&Storage]) -> Result<Storage> {
    let other = || unreachable!("dtypes checked by infer");
    Ok(match op {
        Op::Conv2d { stride, padding } => {
            let g = geom(&inputs[0].shape(), &inputs[1].shape(), *stride, *padding);
            match (inputs[0], inputs[1], inputs.get(2)) {
                (Storage::F32(x), Storage::F32(w), b) => Storage::F32(kc::conv2d(x, w, b.and_then(|b| b.array::<f32>()), &g)),
                (Storage::F64(x), Storage::F64(w), b) => Storage::F64(kc::conv2d(x, w, b.and_then(|b| b.array::<f64>()), &g)),
                _ => other(),
            }
        }
        Op::Conv2dInputGrad { stride, padding, input_hw } => {
            let (gy, w) = (inputs[0].shape(), inputs[1].shape());
            let x = Shape::new(&[gy[0], w[1], input_hw[0], input_hw[1]]);
            let g = geom(&x, &w, *stride, *padding);
            match (inputs[0], inputs[1]) {
                (Storage::F32(gy), Storage::F32(w)) => Storage::F32(kc::conv2d_input_grad(gy, w, &g)),
                (Storage::F64(gy), Storage::F64(w)) => Storage::F64(kc::conv2d_input_grad(gy, w, &g)),
                _ => other(),
            }
        }
        Op::Conv2dWeightGrad { stride, padding, kernel_hw } => {
            let (x, gy) = (inputs[0].shape(), inputs[1].shape());
            let w = Shape::new(&[gy[1], x[1], kernel_hw[0], kernel_hw[1]]);
            let g = geom(&x, &w, *stride, *padding);
            match (inputs[0], inputs[1]) {
                (Storage::F32(x), Storage::F32(gy)) => Storage::F32(kc::conv2d_weight_grad(x, gy, &g)),
                (Storage::F64(x), Storage::F64(gy)) => Storage::F64(kc::conv2d_weight_grad(x, gy, &g)),
                _ => other(),
            }
        }
        Op::MaxPool2d { kernel, stride } => {
            let s = inputs[0].shape();
            let g = PoolGeom { h: s[2], w: s[3], kernel: *kernel, stride: *stride };
            crate::map_float!(inputs[0], x => kp::max_pool2d(x, &g), other => other())
        }
        Op::MaxPool2dGrad { kernel, stride } => {
            let s = inputs[0].shape();
            let g = PoolGeom { h: s[2], w: s[3], kernel: *kernel, stride: *stride };
            match (inputs[0], inputs[1]) {
                (Storage::F32(x), Storage::F32(gy)) => Storage::F32(kp::max_pool2d_grad(x, gy, &g)),
                (Storage::F64(x), Storage::F64(gy)) => Storage::F64(kp::max_pool2d_grad(x, gy, &g)),
                _ => other(),
            }
        }
        _ => unreachable!("not a conv op: {op:?}"),
    })
}

/// The conv2d op `op` on `inputs`, written into `out` image by image, with
/// `after_image(start, len)` called on each image's output positions once they are final (on
/// the thread that made them): the hook an epilogue runs in.
///
/// # Safety
/// `out` must point to a buffer of the op's output dtype and element count, in row-major
/// order, that nothing else writes while this runs.
pub(crate) unsafe fn conv2d_into(op: &Op, inputs: &[&Storage], out: *mut u8, after_image: &(dyn Fn(usize, usize) + Sync)) {
    unsafe {
        let Op::Conv2d { stride, padding } = op else { unreachable!("not conv2d: {op:?}") };
        let g = geom(&inputs[0].shape(), &inputs[1].shape(), *stride, *padding);
        let per_image = g.o * g.out_plane();
        let len = g.n * per_image;
        let after = |i: usize| after_image(i * per_image, per_image);
        match (inputs[0], inputs[1], inputs.get(2)) {
            (Storage::F32(x), Storage::F32(w), b) => {
                kc::conv2d_into(x, w, b.and_then(|b| b.array::<f32>()), &g, std::slice::from_raw_parts_mut(out as *mut f32, len), &after)
            }
            (Storage::F64(x), Storage::F64(w), b) => {
                kc::conv2d_into(x, w, b.and_then(|b| b.array::<f64>()), &g, std::slice::from_raw_parts_mut(out as *mut f64, len), &after)
            }
            _ => unreachable!("dtypes checked by infer"),
        }
    }
}

fn known_hw(op: &'static str, s: &Shape) -> Result<[usize; 2]> {
    if s[2] == UNKNOWN || s[3] == UNKNOWN {
        return Err(Error::NotDifferentiable { op, detail: " with a height or width unknown in this trace" });
    }
    Ok([s[2], s[3]])
}

pub(super) fn backward(op: &Op, ctx: &BackwardCtx, g: &Tensor) -> Result<InputGrads> {
    match op {
        Op::Conv2d { stride, padding } => {
            let (x, w) = (ctx.input(0)?, ctx.input(1)?);
            let (input_hw, kernel_hw) = (known_hw("conv2d", ctx.input_shape(0))?, known_hw("conv2d", ctx.input_shape(1))?);
            let (stride, padding) = (*stride, *padding);
            let gx = if ctx.needs_grad(0) { Some(apply(Op::Conv2dInputGrad { stride, padding, input_hw }, &[g, &w])?) } else { None };
            let gw = if ctx.needs_grad(1) { Some(apply(Op::Conv2dWeightGrad { stride, padding, kernel_hw }, &[&x, g])?) } else { None };
            let mut grads = smallvec![gx, gw];
            if ctx.num_inputs() == 3 {
                grads.push(Some(g.sum_axes(&[0, 2, 3], false)?));
            }
            Ok(grads)
        }
        Op::Conv2dInputGrad { stride, padding, .. } => {
            // dx = conv_transpose(gy, w): linear in both; its adjoints are conv2d and the weight grad.
            let (gy, w) = (ctx.input(0)?, ctx.input(1)?);
            let kernel_hw = known_hw("conv2d_input_grad", ctx.input_shape(1))?;
            let ggy = g.conv2d(&w, None, *stride, *padding)?;
            let gw = apply(Op::Conv2dWeightGrad { stride: *stride, padding: *padding, kernel_hw }, &[g, &gy])?;
            Ok(smallvec![Some(ggy), Some(gw)])
        }
        Op::Conv2dWeightGrad { stride, padding, .. } => {
            let (x, gy) = (ctx.input(0)?, ctx.input(1)?);
            let input_hw = known_hw("conv2d_weight_grad", ctx.input_shape(0))?;
            let gx = apply(Op::Conv2dInputGrad { stride: *stride, padding: *padding, input_hw }, &[&gy, g])?;
            let ggy = x.conv2d(g, None, *stride, *padding)?;
            Ok(smallvec![Some(gx), Some(ggy)])
        }
        Op::MaxPool2d { kernel, stride } => {
            let x = ctx.input(0)?;
            Ok(smallvec![Some(apply(Op::MaxPool2dGrad { kernel: *kernel, stride: *stride }, &[&x, g])?)])
        }
        Op::MaxPool2dGrad { .. } => {
            Err(Error::NotDifferentiable { op: "max_pool2d", detail: " twice (second-order gradients of max pooling are not supported)" })
        }
        _ => unreachable!("not a conv op: {op:?}"),
    }
}
