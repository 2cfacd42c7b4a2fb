//! conv2d (NCHW input, OIHW weight, stride, padding, optional bias) and max_pool2d (padded by
//! skipped taps), with their gradients. The convolution's adjoints are ops of their own, so the backward pass
//! traces like any other, and they are differentiable once more (conv2d's double backward).

use super::depthwise;
use super::dispatch::apply;
use super::{need_float, Family, InputGrads, Saves, TypeRef};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::kernels::clamp::Clamp;
use crate::kernels::conv::{self as kc, ConvGeom};
use crate::kernels::pointwise;
use crate::kernels::pool::{self as kp, PoolGeom};
use crate::math::op_names;
use crate::shape::{Shape, UNKNOWN};
use crate::storage::{Storage, Unwritten};
use crate::tensor::grad_node::BackwardCtx;
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
        let op = ConvOp::Conv2d { stride, padding };
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
        self.max_pool2d_padded(kernel, stride, [0, 0])
    }

    /// [`max_pool2d`](Tensor::max_pool2d) with `padding` rows above and below and columns
    /// left and right that no window's maximum is taken from (PyTorch's and ONNX's `-inf`
    /// padding, without copying the input): a window wholly in the padding gives `-inf`.
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let x = Tensor::arange(0.0f32, 16.0).reshape(&[1, 1, 4, 4])?;
    /// let y = x.max_pool2d_padded([3, 3], [2, 2], [1, 1])?;
    /// assert_eq!(y.to_vec::<f32>()?, vec![5.0, 7.0, 13.0, 15.0]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn max_pool2d_padded(&self, kernel: [usize; 2], stride: [usize; 2], padding: [usize; 2]) -> Result<Tensor> {
        apply(ConvOp::MaxPool2d { kernel, stride, padding }, &[self])
    }
}

/// Convolution and pooling, with their adjoints as ops of their own. Inputs are listed per
/// variant.
///
/// ```
/// use tensor_core::ops::{ConvOp, Op};
/// assert_eq!(Op::Conv(ConvOp::MaxPool2d { kernel: [2, 2], stride: [2, 2], padding: [0, 0] }).name(), "max_pool2d");
/// ```
#[allow(missing_docs)] // the fields are the Tensor methods' arguments
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ConvOp {
    /// (x, w) or (x, w, bias)
    Conv2d { stride: [usize; 2], padding: [usize; 2] },
    /// (gy, w): the gradient with respect to the input.
    Conv2dInputGrad { stride: [usize; 2], padding: [usize; 2], input_hw: [usize; 2] },
    /// (x, gy): the gradient with respect to the weight.
    Conv2dWeightGrad { stride: [usize; 2], padding: [usize; 2], kernel_hw: [usize; 2] },
    /// (x); `padding` taps on each side are skipped.
    MaxPool2d { kernel: [usize; 2], stride: [usize; 2], padding: [usize; 2] },
    /// (x, gy)
    MaxPool2dGrad { kernel: [usize; 2], stride: [usize; 2], padding: [usize; 2] },
    /// (x, w) or (x, w, bias): each input channel convolved with its own `w[0] / c` filters,
    /// `w` `[c * m, 1, kh, kw]`, taps `dilation` apart (the grouped convolution with
    /// `groups == c`; `Tensor::conv2d_depthwise`).
    Depthwise2d { stride: [usize; 2], padding: [usize; 2], dilation: [usize; 2] },
    /// (gy, w): the depthwise convolution's gradient with respect to the input, of
    /// `w[0] / multiplier` channels.
    Depthwise2dInputGrad { stride: [usize; 2], padding: [usize; 2], dilation: [usize; 2], input_hw: [usize; 2], multiplier: usize },
    /// (x, gy): the depthwise convolution's gradient with respect to the weight.
    Depthwise2dWeightGrad { stride: [usize; 2], padding: [usize; 2], dilation: [usize; 2], kernel_hw: [usize; 2] },
}

impl Family for ConvOp {
    op_names! { ConvOp {
        Conv2d { stride, padding } => "conv2d", "Conv2dBackward", format!("stride={stride:?} padding={padding:?}");
        Conv2dInputGrad { stride, padding, input_hw } => "conv2d_input_grad", "Conv2dInputGradBackward", format!("stride={stride:?} padding={padding:?} input_hw={input_hw:?}");
        Conv2dWeightGrad { stride, padding, kernel_hw } => "conv2d_weight_grad", "Conv2dWeightGradBackward", format!("stride={stride:?} padding={padding:?} kernel_hw={kernel_hw:?}");
        MaxPool2d { kernel, stride, padding } => "max_pool2d", "MaxPool2dBackward", format!("kernel={kernel:?} stride={stride:?}{}", pool_padding_attr(padding));
        MaxPool2dGrad { kernel, stride, padding } => "max_pool2d_grad", "MaxPool2dGradBackward", format!("kernel={kernel:?} stride={stride:?}{}", pool_padding_attr(padding));
        Depthwise2d { stride, padding, dilation } => "depthwise2d", "Depthwise2dBackward", format!("stride={stride:?} padding={padding:?} dilation={dilation:?}");
        Depthwise2dInputGrad { stride, padding, dilation, input_hw, multiplier } => "depthwise2d_input_grad", "Depthwise2dInputGradBackward",
            format!("stride={stride:?} padding={padding:?} dilation={dilation:?} input_hw={input_hw:?} multiplier={multiplier}");
        Depthwise2dWeightGrad { stride, padding, dilation, kernel_hw } => "depthwise2d_weight_grad", "Depthwise2dWeightGradBackward",
            format!("stride={stride:?} padding={padding:?} dilation={dilation:?} kernel_hw={kernel_hw:?}");
    }}

    fn infer(&self, inputs: &[TypeRef]) -> Result<(DType, Shape)> {
        infer(self, inputs)
    }

    fn compute(&self, inputs: &[&Storage]) -> Result<Storage> {
        compute(self, inputs)
    }

    fn backward(&self, ctx: &BackwardCtx, g: &Tensor) -> Result<InputGrads> {
        backward(self, ctx, g)
    }

    fn saves(&self) -> Saves {
        match self {
            ConvOp::MaxPool2d { .. } => Saves::inputs(0b1),
            ConvOp::Conv2d { .. }
            | ConvOp::Conv2dInputGrad { .. }
            | ConvOp::Conv2dWeightGrad { .. }
            | ConvOp::MaxPool2dGrad { .. }
            | ConvOp::Depthwise2d { .. }
            | ConvOp::Depthwise2dInputGrad { .. }
            | ConvOp::Depthwise2dWeightGrad { .. } => Saves::inputs(0b11),
        }
    }

    fn is_differentiable(&self) -> bool {
        true
    }
}

/// A pool's padding in its attributes, left out when zero (as before pools had one).
fn pool_padding_attr(padding: &[usize; 2]) -> String {
    if *padding == [0, 0] {
        String::new()
    } else {
        format!(" padding={padding:?}")
    }
}

pub(super) fn need_rank4(op: &'static str, arg: &'static str, s: &Shape) -> Result<()> {
    if s.rank() == 4 {
        Ok(())
    } else {
        Err(Error::invalid(op, arg, format!("must be 4-d (NCHW / OIHW), found shape {s}")))
    }
}

pub(super) fn need_positive(op: &'static str, arg: &'static str, v: [usize; 2]) -> Result<()> {
    if v[0] > 0 && v[1] > 0 {
        Ok(())
    } else {
        Err(Error::invalid(op, arg, format!("{v:?} must be positive")))
    }
}

/// Output size of a window of `k` moved by `s` over `n` (+ padding on both sides).
pub(super) fn out_len(op: &'static str, n: usize, k: usize, s: usize, p: usize) -> Result<usize> {
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
    for (t, name) in inputs[1..].iter().zip(["weight", "bias"]) {
        if t.dtype != d {
            return Err(Error::operand_dtypes(op, ("input", d), (name, t.dtype)));
        }
    }
    Ok(d)
}

fn infer(op: &ConvOp, inputs: &[TypeRef]) -> Result<(DType, Shape)> {
    let dtype = same_dtype(op.name(), inputs)?;
    let shape = match op {
        ConvOp::Conv2d { stride, padding } => conv_shape(inputs, *stride, *padding)?,
        ConvOp::Conv2dInputGrad { stride, padding, input_hw } => {
            let (gy, w) = (inputs[0].shape, inputs[1].shape);
            need_grad_inputs(op, gy, w, *stride)?;
            let x = Shape::new(&[gy[0], w[1], input_hw[0], input_hw[1]]);
            need_forward_output(op, gy, &forward_conv(&x, w, *stride, *padding)?)?;
            x
        }
        ConvOp::Conv2dWeightGrad { stride, padding, kernel_hw } => {
            let (x, gy) = (inputs[0].shape, inputs[1].shape);
            need_grad_inputs(op, gy, x, *stride)?;
            let w = Shape::new(&[gy[1], x[1], kernel_hw[0], kernel_hw[1]]);
            need_forward_output(op, gy, &forward_conv(x, &w, *stride, *padding)?)?;
            w
        }
        ConvOp::MaxPool2d { kernel, stride, padding } => pool_shape(op.name(), inputs[0].shape, *kernel, *stride, *padding)?,
        ConvOp::MaxPool2dGrad { kernel, stride, padding } => {
            let (x, gy) = (inputs[0].shape, inputs[1].shape);
            need_forward_output(op, gy, &pool_shape(op.name(), x, *kernel, *stride, *padding)?)?;
            x.clone()
        }
        ConvOp::Depthwise2d { .. } | ConvOp::Depthwise2dInputGrad { .. } | ConvOp::Depthwise2dWeightGrad { .. } => depthwise::infer(op, inputs)?,
    };
    Ok((dtype, shape))
}

/// A gradient op's two 4-d inputs and its stride (the kernels divide by it).
fn need_grad_inputs(op: &ConvOp, gy: &Shape, other: &Shape, stride: [usize; 2]) -> Result<()> {
    need_rank4(op.name(), "grad_output", gy)?;
    need_rank4(op.name(), "input", other)?;
    need_positive(op.name(), "stride", stride)
}

/// The output shape of the convolution a gradient op belongs to (unknown where its input's
/// or weight's dims are).
fn forward_conv(x: &Shape, w: &Shape, stride: [usize; 2], padding: [usize; 2]) -> Result<Shape> {
    let len = |n: usize, k: usize, s: usize, p: usize| if k == UNKNOWN { Ok(UNKNOWN) } else { out_len("conv2d", n, k, s, p) };
    Ok(Shape::new(&[x[0], w[0], len(x[2], w[2], stride[0], padding[0])?, len(x[3], w[3], stride[1], padding[1])?]))
}

/// A gradient op's kernel reads its output gradient as the forward op's output: the dims
/// must agree where both are known (all are when a graph with relaxed dims runs, which
/// checks every op's shape rule first).
pub(super) fn need_forward_output(op: &ConvOp, gy: &Shape, forward: &Shape) -> Result<()> {
    let agree = gy.rank() == forward.rank() && gy.dims().iter().zip(forward.dims()).all(|(&a, &b)| a == b || a == UNKNOWN || b == UNKNOWN);
    match agree {
        true => Ok(()),
        false => Err(Error::shapes(op.name(), gy, forward, "the output gradient must have the forward output's shape")),
    }
}

/// The output shape of max pooling `x`.
fn pool_shape(op: &'static str, x: &Shape, kernel: [usize; 2], stride: [usize; 2], padding: [usize; 2]) -> Result<Shape> {
    need_rank4(op, "input", x)?;
    need_positive(op, "kernel", kernel)?;
    need_positive(op, "stride", stride)?;
    let oh = out_len(op, x[2], kernel[0], stride[0], padding[0])?;
    let ow = out_len(op, x[3], kernel[1], stride[1], padding[1])?;
    Ok(Shape::new(&[x[0], x[1], oh, ow]))
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

fn compute(op: &ConvOp, inputs: &[&Storage]) -> Result<Storage> {
    let other = || unreachable!("dtypes checked by infer");
    Ok(match op {
        ConvOp::Conv2d { stride, padding } => {
            let g = geom(&inputs[0].shape(), &inputs[1].shape(), *stride, *padding);
            let (oh, ow) = g.out_hw();
            written_by_conv(op, inputs, &[g.n, g.o, oh, ow])
        }
        ConvOp::Conv2dInputGrad { stride, padding, input_hw } => {
            let (gy, w) = (inputs[0].shape(), inputs[1].shape());
            let x = Shape::new(&[gy[0], w[1], input_hw[0], input_hw[1]]);
            let g = geom(&x, &w, *stride, *padding);
            match (inputs[0], inputs[1]) {
                (Storage::F32(gy), Storage::F32(w)) => Storage::F32(kc::conv2d_input_grad(gy, w, &g)),
                (Storage::F64(gy), Storage::F64(w)) => Storage::F64(kc::conv2d_input_grad(gy, w, &g)),
                _ => other(),
            }
        }
        ConvOp::Conv2dWeightGrad { stride, padding, kernel_hw } => {
            let (x, gy) = (inputs[0].shape(), inputs[1].shape());
            let w = Shape::new(&[gy[1], x[1], kernel_hw[0], kernel_hw[1]]);
            let g = geom(&x, &w, *stride, *padding);
            match (inputs[0], inputs[1]) {
                (Storage::F32(x), Storage::F32(gy)) => Storage::F32(kc::conv2d_weight_grad(x, gy, &g)),
                (Storage::F64(x), Storage::F64(gy)) => Storage::F64(kc::conv2d_weight_grad(x, gy, &g)),
                _ => other(),
            }
        }
        ConvOp::MaxPool2d { kernel, stride, padding } => {
            let s = inputs[0].shape();
            let g = PoolGeom { h: s[2], w: s[3], kernel: *kernel, stride: *stride, padding: *padding };
            crate::storage::map_float!(inputs[0], x => kp::max_pool2d(x, &g), other => other())
        }
        ConvOp::MaxPool2dGrad { kernel, stride, padding } => {
            let s = inputs[0].shape();
            let g = PoolGeom { h: s[2], w: s[3], kernel: *kernel, stride: *stride, padding: *padding };
            match (inputs[0], inputs[1]) {
                (Storage::F32(x), Storage::F32(gy)) => Storage::F32(kp::max_pool2d_grad(x, gy, &g)),
                (Storage::F64(x), Storage::F64(gy)) => Storage::F64(kp::max_pool2d_grad(x, gy, &g)),
                _ => other(),
            }
        }
        ConvOp::Depthwise2d { .. } | ConvOp::Depthwise2dInputGrad { .. } | ConvOp::Depthwise2dWeightGrad { .. } => depthwise::compute(op, inputs),
    })
}

/// The output `dims` of the conv2d or depthwise2d op `op` on `inputs`, in a buffer not
/// zeroed first: the kernels write every element.
pub(super) fn written_by_conv(op: &ConvOp, inputs: &[&Storage], dims: &[usize]) -> Storage {
    let out = Unwritten::new(inputs[0].dtype(), dims.iter().product());
    // SAFETY: a buffer of the op's output dtype and element count, written by this call
    // alone, which writes every element.
    unsafe {
        conv2d_into(op, inputs, out.ptr_at(0), None, &|_, _| {});
        out.assume_written(dims)
    }
}

/// The conv2d or depthwise2d op `op` on `inputs`, written into `out` image by image, with
/// `after_image(start, len)` called on each image's output positions once they are final (on
/// the thread that made them): the hook an epilogue runs in. With `clamp` (f32 only), every
/// output is clamped before `after_image` sees it (in registers where the kernel can).
///
/// # Safety
/// `out` must point to a buffer of the op's output dtype and element count, in row-major
/// order, that nothing else writes while this runs.
pub(crate) unsafe fn conv2d_into(op: &ConvOp, inputs: &[&Storage], out: *mut u8, clamp: Option<Clamp>, after_image: &(dyn Fn(usize, usize) + Sync)) {
    unsafe {
        if let ConvOp::Depthwise2d { .. } = op {
            return depthwise::depthwise2d_into(op, inputs, out, clamp, after_image);
        }
        let ConvOp::Conv2d { stride, padding } = op else { unreachable!("not conv2d: {op:?}") };
        let g = geom(&inputs[0].shape(), &inputs[1].shape(), *stride, *padding);
        let len = g.n * g.o * g.out_plane();
        if pointwise::applies(&g) {
            return match (inputs[0], inputs[1], inputs.get(2)) {
                (Storage::F32(x), Storage::F32(w), b) => pointwise::conv2d_into(
                    x,
                    w,
                    b.and_then(|b| b.array::<f32>()),
                    &g,
                    std::slice::from_raw_parts_mut(out as *mut f32, len),
                    clamp,
                    after_image,
                ),
                (Storage::F64(x), Storage::F64(w), b) => pointwise::conv2d_into(
                    x,
                    w,
                    b.and_then(|b| b.array::<f64>()),
                    &g,
                    std::slice::from_raw_parts_mut(out as *mut f64, len),
                    clamp,
                    after_image,
                ),
                _ => unreachable!("dtypes checked by infer"),
            };
        }
        match (inputs[0], inputs[1], inputs.get(2)) {
            (Storage::F32(x), Storage::F32(w), b) => {
                kc::conv2d_into(x, w, b.and_then(|b| b.array::<f32>()), &g, std::slice::from_raw_parts_mut(out as *mut f32, len), clamp, after_image)
            }
            (Storage::F64(x), Storage::F64(w), b) => {
                kc::conv2d_into(x, w, b.and_then(|b| b.array::<f64>()), &g, std::slice::from_raw_parts_mut(out as *mut f64, len), clamp, after_image)
            }
            _ => unreachable!("dtypes checked by infer"),
        }
    }
}

pub(super) fn known_hw(op: &'static str, s: &Shape) -> Result<[usize; 2]> {
    if s[2] == UNKNOWN || s[3] == UNKNOWN {
        return Err(Error::NotDifferentiable { op, detail: " with a height or width unknown in this trace" });
    }
    Ok([s[2], s[3]])
}

fn backward(op: &ConvOp, ctx: &BackwardCtx, g: &Tensor) -> Result<InputGrads> {
    match op {
        ConvOp::Conv2d { stride, padding } => {
            let (x, w) = (ctx.input(0)?, ctx.input(1)?);
            let (input_hw, kernel_hw) = (known_hw("conv2d", ctx.input_shape(0))?, known_hw("conv2d", ctx.input_shape(1))?);
            let (stride, padding) = (*stride, *padding);
            let gx = if ctx.needs_grad(0) { Some(apply(ConvOp::Conv2dInputGrad { stride, padding, input_hw }, &[g, &w])?) } else { None };
            let gw = if ctx.needs_grad(1) { Some(apply(ConvOp::Conv2dWeightGrad { stride, padding, kernel_hw }, &[&x, g])?) } else { None };
            let mut grads = smallvec![gx, gw];
            if ctx.num_inputs() == 3 {
                grads.push(Some(g.sum_axes(&[0, 2, 3], false)?));
            }
            Ok(grads)
        }
        ConvOp::Conv2dInputGrad { stride, padding, .. } => {
            // dx = conv_transpose(gy, w): linear in both; its adjoints are conv2d and the weight grad.
            let (gy, w) = (ctx.input(0)?, ctx.input(1)?);
            let kernel_hw = known_hw("conv2d_input_grad", ctx.input_shape(1))?;
            let ggy = g.conv2d(&w, None, *stride, *padding)?;
            let gw = apply(ConvOp::Conv2dWeightGrad { stride: *stride, padding: *padding, kernel_hw }, &[g, &gy])?;
            Ok(smallvec![Some(ggy), Some(gw)])
        }
        ConvOp::Conv2dWeightGrad { stride, padding, .. } => {
            let (x, gy) = (ctx.input(0)?, ctx.input(1)?);
            let input_hw = known_hw("conv2d_weight_grad", ctx.input_shape(0))?;
            let gx = apply(ConvOp::Conv2dInputGrad { stride: *stride, padding: *padding, input_hw }, &[&gy, g])?;
            let ggy = x.conv2d(g, None, *stride, *padding)?;
            Ok(smallvec![Some(gx), Some(ggy)])
        }
        ConvOp::MaxPool2d { kernel, stride, padding } => {
            let x = ctx.input(0)?;
            Ok(smallvec![Some(apply(ConvOp::MaxPool2dGrad { kernel: *kernel, stride: *stride, padding: *padding }, &[&x, g])?)])
        }
        ConvOp::MaxPool2dGrad { .. } => {
            Err(Error::NotDifferentiable { op: "max_pool2d", detail: " twice (second-order gradients of max pooling are not supported)" })
        }
        ConvOp::Depthwise2d { .. } | ConvOp::Depthwise2dInputGrad { .. } | ConvOp::Depthwise2dWeightGrad { .. } => depthwise::backward(op, ctx, g),
    }
}
