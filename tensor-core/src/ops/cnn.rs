//! The convolution and pooling forms of CNNs composed from the conv family's ops, layout
//! ops and reductions (so their gradients and graph forms come from those): grouped and 1-d
//! convolutions, the transposed convolution (the convolution's input gradient as a forward
//! op), average pooling (a convolution of each channel with a window of ones), adaptive and
//! global average pooling, and the clamped activations `relu6` and `hardtanh`.

use super::conv::ConvOp;
use super::dispatch::apply;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::shape::UNKNOWN;
use crate::tensor::Tensor;

/// The dims of `x`, which must be known and of rank `rank`.
fn known_dims(op: &'static str, arg: &'static str, x: &Tensor, rank: usize, layout: &str) -> Result<Vec<usize>> {
    let shape = x.raw_shape();
    let dims = shape.dims().to_vec();
    if dims.len() != rank {
        return Err(Error::invalid(op, arg, format!("must be {rank}-d ({layout}), found shape {shape}")));
    }
    if dims.contains(&UNKNOWN) {
        return Err(Error::invalid(op, arg, "needs known dims; give the argument a fixed input_signature"));
    }
    Ok(dims)
}

/// `x`'s dims, of which `rank` and the channels (dim 1) must be known; the others may be
/// unknown while tracing.
fn channels_known(op: &'static str, arg: &'static str, x: &Tensor, rank: usize, layout: &str) -> Result<Vec<usize>> {
    let shape = x.raw_shape();
    let dims = shape.dims().to_vec();
    if shape.is_unknown_rank() || dims.len() != rank {
        return Err(Error::invalid(op, arg, format!("must be {rank}-d ({layout}), found shape {shape}")));
    }
    if dims[1] == UNKNOWN {
        return Err(Error::invalid(op, arg, "needs known channels (dim 1); give the argument a fixed input_signature"));
    }
    Ok(dims)
}

/// Checks that `groups` is positive and divides each of `counts`.
fn need_groups(op: &'static str, groups: usize, counts: &[(&str, usize)]) -> Result<()> {
    for (what, n) in counts {
        if groups == 0 || n % groups != 0 {
            return Err(Error::invalid(op, "groups", format!("{groups} must be positive and divide the {n} {what}")));
        }
    }
    Ok(())
}

/// Splits each of `parts` into `groups` along its axis, runs `f` on each group's pieces and
/// concatenates the results along axis 1.
fn per_group(groups: usize, parts: &[(&Tensor, isize)], f: impl Fn(&[Tensor]) -> Result<Tensor>) -> Result<Tensor> {
    if groups == 1 {
        return f(&parts.iter().map(|(t, _)| (*t).clone()).collect::<Vec<_>>());
    }
    let split: Vec<Vec<Tensor>> = parts.iter().map(|(t, axis)| t.chunk(groups, *axis)).collect::<Result<_>>()?;
    let outs: Vec<Tensor> = (0..groups).map(|g| f(&split.iter().map(|s| s[g].clone()).collect::<Vec<_>>())).collect::<Result<_>>()?;
    Tensor::concat(&outs.iter().collect::<Vec<_>>(), 1)
}

/// PyTorch's pooled length of `n` for a window `k` moved by `s` with padding `p`, the last
/// window kept when it starts inside the input or the left padding (`ceil_mode`).
fn pooled_len(n: usize, k: usize, s: usize, p: usize, ceil_mode: bool) -> Option<usize> {
    let span = (n + 2 * p).checked_sub(k)?;
    let mut out = if ceil_mode { span.div_ceil(s) + 1 } else { span / s + 1 };
    if ceil_mode && (out - 1) * s >= n + p {
        out -= 1;
    }
    Some(out)
}

/// The divisor of each of the `out` windows along one axis (PyTorch's `avg_pool2d`).
fn window_counts(n: usize, k: usize, s: usize, p: usize, out: usize, count_include_pad: bool) -> Vec<usize> {
    (0..out)
        .map(|i| {
            let start = (i * s) as isize - p as isize;
            let end = (start + k as isize).min((n + p) as isize);
            if count_include_pad {
                (end - start) as usize
            } else {
                (end.min(n as isize) - start.max(0)) as usize
            }
        })
        .collect()
}

/// The `[rows, cols]` table of `row[i] * col[j]` in `dtype`, or the one value when they are
/// all equal.
fn divisors(rows: &[usize], cols: &[usize], dtype: DType) -> Result<Tensor> {
    let all: Vec<f64> = rows.iter().flat_map(|r| cols.iter().map(move |c| (r * c) as f64)).collect();
    if all.iter().all(|&d| d == all[0]) {
        return Ok(Tensor::full(&[], all[0], dtype));
    }
    Tensor::from_vec(all, &[rows.len(), cols.len()])?.cast(dtype)
}

impl Tensor {
    /// The 2-d convolution of `self` `[n, c, h, w]` with `weight` `[o, c / groups, kh, kw]`
    /// in `groups` groups (PyTorch's `conv2d(..., groups)`; ONNX `Conv` with `group`): the
    /// channels split into `groups` equal parts, each convolved with its `o / groups` filters;
    /// `groups == c` is the depthwise convolution, run by one direct kernel
    /// ([`conv2d_depthwise`](Tensor::conv2d_depthwise)), other groupings as one `conv2d` per
    /// group. Plus `bias` `[o]` if given.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0], &[1, 2, 1, 1])?;
    /// let w = Tensor::from_vec(vec![10.0f32, 100.0], &[2, 1, 1, 1])?; // one filter per channel
    /// let y = x.conv2d_grouped(&w, None, [1, 1], [0, 0], 2)?;
    /// assert_eq!(y.to_vec::<f32>()?, vec![10.0, 200.0]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn conv2d_grouped(&self, weight: &Tensor, bias: Option<&Tensor>, stride: [usize; 2], padding: [usize; 2], groups: usize) -> Result<Tensor> {
        if groups == 1 {
            return self.conv2d(weight, bias, stride, padding);
        }
        // Only the channels must be known: a dynamic batch or size traces as conv2d's does.
        let (x, w) = (channels_known("conv2d", "input", self, 4, "NCHW")?, known_dims("conv2d", "weight", weight, 4, "OIHW")?);
        need_groups("conv2d", groups, &[("input channels", x[1]), ("output channels", w[0])])?;
        if x[1] != w[1] * groups {
            return Err(Error::shapes(
                "conv2d",
                &self.raw_shape(),
                &weight.raw_shape(),
                format!("the input has {} channels but the weight expects {} in {groups} groups", x[1], w[1] * groups),
            ));
        }
        if groups == x[1] {
            // One filter group per channel: the direct depthwise kernel, not a conv per group.
            return self.conv2d_depthwise(weight, bias, stride, padding, [1, 1]);
        }
        let mut parts = vec![(self, 1), (weight, 0)];
        parts.extend(bias.map(|b| (b, 0)));
        per_group(groups, &parts, |p| p[0].conv2d(&p[1], p.get(2), stride, padding))
    }

    /// The 1-d convolution of `self` `[n, c, l]` with `weight` `[o, c / groups, k]`, plus
    /// `bias` `[o]` if given (PyTorch's `conv1d`; ONNX `Conv` on 3-d inputs): the 2-d
    /// convolution of a unit height.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[1, 1, 4])?;
    /// let w = Tensor::from_vec(vec![1.0f32, -1.0], &[1, 1, 2])?;
    /// assert_eq!(x.conv1d(&w, None, 1, 0, 1)?.to_vec::<f32>()?, vec![-1.0, -1.0, -1.0]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn conv1d(&self, weight: &Tensor, bias: Option<&Tensor>, stride: usize, padding: usize, groups: usize) -> Result<Tensor> {
        known_dims("conv1d", "input", self, 3, "NCL")?;
        known_dims("conv1d", "weight", weight, 3, "OIK")?;
        self.unsqueeze(2)?.conv2d_grouped(&weight.unsqueeze(2)?, bias, [1, stride], [0, padding], groups)?.squeeze(2)
    }

    /// The transposed 2-d convolution (PyTorch's `conv_transpose2d`; ONNX `ConvTranspose`)
    /// of `self` `[n, c, h, w]` with `weight` `[c, o / groups, kh, kw]`: the gradient of a
    /// convolution with respect to its input, as a forward op. The output is
    /// `[n, o, (h - 1) * stride - 2 * padding + kh + output_padding, ...]`, plus `bias` `[o]`
    /// if given; `output_padding` (below `stride`) picks among the sizes a strided
    /// convolution maps to `h`.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0], &[1, 1, 1, 2])?;
    /// let w = Tensor::ones(&[1, 1, 1, 2], DType::F32);
    /// let y = x.conv_transpose2d(&w, None, [1, 2], [0, 0], [0, 0], 1)?;
    /// assert_eq!(y.to_vec::<f32>()?, vec![1.0, 1.0, 2.0, 2.0]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn conv_transpose2d(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        stride: [usize; 2],
        padding: [usize; 2],
        output_padding: [usize; 2],
        groups: usize,
    ) -> Result<Tensor> {
        const OP: &str = "conv_transpose2d";
        let (x, w) = (known_dims(OP, "input", self, 4, "NCHW")?, known_dims(OP, "weight", weight, 4, "[in, out / groups, kh, kw]")?);
        need_groups(OP, groups, &[("input channels", x[1])])?;
        if x[1] != w[0] {
            return Err(Error::shapes(
                OP,
                &self.raw_shape(),
                &weight.raw_shape(),
                format!("the input has {} channels but the weight expects {}", x[1], w[0]),
            ));
        }
        let mut out_hw = [0; 2];
        for i in 0..2 {
            if stride[i] == 0 || output_padding[i] >= stride[i] {
                return Err(Error::invalid(
                    OP,
                    "output_padding",
                    format!("{output_padding:?} must be below the stride {stride:?}, which must be positive"),
                ));
            }
            out_hw[i] = (x[2 + i].saturating_sub(1) * stride[i] + w[2 + i] + output_padding[i])
                .checked_sub(2 * padding[i])
                .filter(|&n| n > 0)
                .ok_or_else(|| {
                    Error::invalid(OP, "padding", format!("{padding:?} leaves no output for an input of {:?} and a kernel of {:?}", &x[2..], &w[2..]))
                })?;
        }
        let o = w[1] * groups;
        if let Some(b) = bias.filter(|b| b.raw_shape().dims() != [o]) {
            return Err(Error::shapes(OP, &weight.raw_shape(), &b.raw_shape(), format!("the bias must be [{o}], one value per output channel")));
        }
        let op = ConvOp::Conv2dInputGrad { stride, padding, input_hw: out_hw };
        let y = per_group(groups, &[(self, 1), (weight, 0)], |p| apply(op.clone(), &[&p[0], &p[1]]))?;
        match bias {
            Some(b) => y.add(&b.reshape([1, o as isize, 1, 1])?),
            None => Ok(y),
        }
    }

    /// 2-d average pooling of `self` `[n, c, h, w]` (PyTorch's `avg_pool2d`; ONNX
    /// `AveragePool`): the mean of each `kernel` window moved by `stride`, over an input
    /// zero-padded by `padding` (at most half the window) on each side. With `ceil_mode` a
    /// last partial window is kept when it starts inside the input or the left padding;
    /// `count_include_pad` counts the padding's zeros in each window's divisor.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let x = Tensor::arange(0.0f32, 16.0).reshape(&[1, 1, 4, 4])?;
    /// let y = x.avg_pool2d([2, 2], [2, 2], [0, 0], false, true)?;
    /// assert_eq!(y.to_vec::<f32>()?, vec![2.5, 4.5, 10.5, 12.5]);
    /// let x = Tensor::ones(&[1, 1, 2, 2], DType::F32);
    /// let pad = x.avg_pool2d([2, 2], [1, 1], [1, 1], false, true)?; // corners see one 1 in four
    /// assert_eq!(pad.to_vec::<f32>()?[0], 0.25);
    /// let nopad = x.avg_pool2d([2, 2], [1, 1], [1, 1], false, false)?;
    /// assert_eq!(nopad.to_vec::<f32>()?, vec![1.0; 9]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn avg_pool2d(
        &self,
        kernel: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
        ceil_mode: bool,
        count_include_pad: bool,
    ) -> Result<Tensor> {
        const OP: &str = "avg_pool2d";
        let x = known_dims(OP, "input", self, 4, "NCHW")?;
        if kernel.contains(&0) || stride.contains(&0) {
            return Err(Error::invalid(OP, "kernel", format!("the kernel {kernel:?} and stride {stride:?} must be positive")));
        }
        if padding[0] > kernel[0] / 2 || padding[1] > kernel[1] / 2 {
            return Err(Error::invalid(OP, "padding", format!("{padding:?} must be at most half the kernel {kernel:?}")));
        }
        let (mut out, mut counts, mut extra) = ([0; 2], [Vec::new(), Vec::new()], [0; 2]);
        for i in 0..2 {
            let (n, k, s, p) = (x[2 + i], kernel[i], stride[i], padding[i]);
            out[i] = pooled_len(n, k, s, p, ceil_mode)
                .ok_or_else(|| Error::invalid(OP, "kernel", format!("window {k} is larger than the padded input {}", n + 2 * p)))?;
            counts[i] = window_counts(n, k, s, p, out[i], count_include_pad);
            extra[i] = ((out[i] - 1) * s + k).saturating_sub(n + 2 * p);
        }
        let mut planes = self.reshape([(x[0] * x[1]) as isize, 1, x[2] as isize, x[3] as isize])?;
        for (axis, &e) in extra.iter().enumerate().filter(|&(_, &e)| e > 0) {
            planes = planes.pad_axis(2 + axis, 0, e)?;
        }
        let window = Tensor::ones(&[1, 1, kernel[0], kernel[1]], self.dtype());
        let sums = planes.conv2d(&window, None, stride, padding)?.reshape([x[0], x[1], out[0], out[1]])?;
        sums.div(&divisors(&counts[0], &counts[1], self.dtype())?)
    }

    /// 2-d adaptive average pooling of `self` `[n, c, h, w]` to `[n, c, oh, ow]` (PyTorch's
    /// `adaptive_avg_pool2d`): output cell `i` averages the input rows from
    /// `floor(i * h / oh)` to `ceil((i + 1) * h / oh)`, and likewise for columns. `[1, 1]` is
    /// ONNX's `GlobalAveragePool`.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let x = Tensor::arange(0.0f32, 16.0).reshape(&[1, 1, 4, 4])?;
    /// assert_eq!(x.adaptive_avg_pool2d([2, 2])?.to_vec::<f32>()?, vec![2.5, 4.5, 10.5, 12.5]);
    /// let r = Tensor::arange(0.0f32, 3.0).reshape(&[1, 1, 1, 3])?;
    /// assert_eq!(r.adaptive_avg_pool2d([1, 2])?.to_vec::<f32>()?, vec![0.5, 1.5]); // [0, 1], [1, 2]
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn adaptive_avg_pool2d(&self, output_size: [usize; 2]) -> Result<Tensor> {
        const OP: &str = "adaptive_avg_pool2d";
        let x = known_dims(OP, "input", self, 4, "NCHW")?;
        if output_size.contains(&0) {
            return Err(Error::invalid(OP, "output_size", format!("{output_size:?} must be positive")));
        }
        let [oh, ow] = output_size;
        if output_size == [1, 1] {
            return self.global_avg_pool();
        }
        if x[2] % oh == 0 && x[3] % ow == 0 {
            let split = [x[0], x[1], oh, x[2] / oh, ow, x[3] / ow];
            return self.reshape(split)?.mean_axes(&[3, 5], false);
        }
        let windows = |n: usize, out: usize| -> Vec<(usize, usize)> { (0..out).map(|i| (i * n / out, ((i + 1) * n).div_ceil(out))).collect() };
        let (rows, cols) = (windows(x[2], oh), windows(x[3], ow));
        let pool = |t: &Tensor, axis: isize, w: &[(usize, usize)]| -> Result<Tensor> {
            let parts: Vec<Tensor> = w.iter().map(|&(a, b)| t.narrow(axis, a, b - a)?.sum_axes(&[axis], true)).collect::<Result<_>>()?;
            Tensor::concat(&parts.iter().collect::<Vec<_>>(), axis)
        };
        let sums = pool(&pool(self, 2, &rows)?, 3, &cols)?;
        let len = |w: &[(usize, usize)]| w.iter().map(|(a, b)| b - a).collect::<Vec<_>>();
        sums.div(&divisors(&len(&rows), &len(&cols), self.dtype())?)
    }

    /// The mean over every axis after the first two, kept as size-1 axes (ONNX's
    /// `GlobalAveragePool`; PyTorch's `adaptive_avg_pool2d(x, 1)` on `[n, c, h, w]`).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let x = Tensor::arange(0.0f32, 8.0).reshape(&[1, 2, 2, 2])?;
    /// let y = x.global_avg_pool()?;
    /// assert_eq!((y.dims().to_vec(), y.to_vec::<f32>()?), (vec![1, 2, 1, 1], vec![1.5, 5.5]));
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn global_avg_pool(&self) -> Result<Tensor> {
        let rank = self.rank();
        if rank < 3 {
            return Err(Error::invalid("global_avg_pool", "input", format!("must be at least 3-d [n, c, ...], found shape {}", self.raw_shape())));
        }
        self.mean_axes(&(2..rank as isize).collect::<Vec<_>>(), true)
    }

    /// `min(max(x, 0), 6)` (PyTorch's `relu6`; ONNX `Clip(0, 6)`), MobileNet's activation.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let x = Tensor::from_vec(vec![-1.0f32, 3.0, 7.0], &[3])?;
    /// assert_eq!(x.relu6()?.to_vec::<f32>()?, vec![0.0, 3.0, 6.0]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn relu6(&self) -> Result<Tensor> {
        self.hardtanh(0.0, 6.0)
    }

    /// Each element limited to `[min_val, max_val]` (PyTorch's `hardtanh`, default `[-1, 1]`;
    /// ONNX `Clip`); the gradient is 1 strictly inside and 0 outside.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let x = Tensor::from_vec(vec![-2.0f64, 0.5, 2.0], &[3])?;
    /// assert_eq!(x.hardtanh(-1.0, 1.0)?.to_vec::<f64>()?, vec![-1.0, 0.5, 1.0]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn hardtanh(&self, min_val: f64, max_val: f64) -> Result<Tensor> {
        if min_val > max_val {
            return Err(Error::invalid("hardtanh", "min_val", format!("{min_val} must not exceed max_val {max_val}")));
        }
        self.clamp(min_val, max_val)
    }
}
