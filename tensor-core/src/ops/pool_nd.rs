//! Max and average pooling over any number of spatial dims, with dilation, begin/end pads
//! and `ceil_mode` (PyTorch's `max_pool3d`/`avg_pool3d`, ONNX `MaxPool`/`AveragePool` of any
//! rank). Both reductions are separable over a box window, so each spatial axis is pooled in
//! turn: the window's taps along that axis are gathered with one `index_select` into a new
//! axis, which `max_axes`/`sum_axes` then reduce. Being composed from those ops, the pools
//! get their gradients and graph forms (and graph == eager bits) from them.

use super::padding::PadMode;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::shape::UNKNOWN;
use crate::tensor::Tensor;

/// A pooling window along one spatial axis.
#[derive(Clone, Copy, Debug)]
struct AxisWindow {
    /// The input's length.
    n: usize,
    kernel: usize,
    stride: usize,
    dilation: usize,
    /// Padding before and after.
    pads: [usize; 2],
    /// The number of windows.
    out: usize,
}

impl AxisWindow {
    /// The window of `kernel` taps `dilation` apart moved by `stride` over `n` entries padded
    /// by `pads`; with `ceil_mode` a last partial window is kept when it starts inside the
    /// input or the begin padding (PyTorch's and ONNX's rule).
    fn new(op: &'static str, n: usize, kernel: usize, stride: usize, dilation: usize, pads: [usize; 2], ceil_mode: bool) -> Result<AxisWindow> {
        if kernel == 0 || stride == 0 || dilation == 0 {
            return Err(Error::invalid(op, "kernel", format!("the kernel {kernel}, stride {stride} and dilation {dilation} must be positive")));
        }
        let reach = (kernel - 1) * dilation + 1;
        let span = (n + pads[0] + pads[1]).checked_sub(reach).ok_or_else(|| {
            Error::invalid(op, "kernel", format!("a window reaching {reach} entries is longer than the padded input {}", n + pads[0] + pads[1]))
        })?;
        let mut out = if ceil_mode { span.div_ceil(stride) + 1 } else { span / stride + 1 };
        if ceil_mode && (out - 1) * stride >= n + pads[0] {
            out -= 1;
        }
        Ok(AxisWindow { n, kernel, stride, dilation, pads, out })
    }

    /// Where tap `a` of window `i` reads, counted from the start of the padded input.
    fn tap(&self, i: usize, a: usize) -> usize {
        i * self.stride + a * self.dilation
    }

    /// Entries past the end padding that the last (ceil_mode) window reads.
    fn overhang(&self) -> usize {
        (self.tap(self.out - 1, self.kernel - 1) + 1).saturating_sub(self.n + self.pads[0] + self.pads[1])
    }

    /// The positions of every tap, tap-major: `[tap(0, 0), tap(1, 0), ..., tap(out - 1, k - 1)]`.
    fn taps(&self) -> Vec<i64> {
        (0..self.kernel).flat_map(|a| (0..self.out).map(move |i| self.tap(i, a) as i64)).collect()
    }

    /// The divisor of each window: its taps inside the input, or inside the padded input
    /// (`count_include_pad`; the ceil_mode overhang never counts).
    fn counts(&self, count_include_pad: bool) -> Vec<usize> {
        let (lo, hi) = if count_include_pad { (0, self.n + self.pads[0] + self.pads[1]) } else { (self.pads[0], self.pads[0] + self.n) };
        (0..self.out).map(|i| (0..self.kernel).filter(|&a| (lo..hi).contains(&self.tap(i, a))).count()).collect()
    }
}

/// Max or sum over each window.
#[derive(Clone, Copy, PartialEq)]
enum Reduce {
    Max,
    Sum,
}

/// Checks the argument lengths and builds the windows of `x`'s spatial axes.
#[allow(clippy::too_many_arguments)]
fn windows(
    op: &'static str,
    x: &Tensor,
    kernel: &[usize],
    stride: &[usize],
    pads: &[[usize; 2]],
    dilation: &[usize],
    ceil_mode: bool,
) -> Result<Vec<AxisWindow>> {
    let dims = x.raw_shape().dims().to_vec();
    let spatial = kernel.len();
    if dims.len() != spatial + 2 || spatial == 0 {
        return Err(Error::invalid(
            op,
            "input",
            format!("must be [n, c] and {spatial} spatial dims for a {spatial}-d kernel, found shape {}", x.raw_shape()),
        ));
    }
    if dims.contains(&UNKNOWN) {
        return Err(Error::invalid(op, "input", "needs known dims; give the argument a fixed input_signature"));
    }
    for (what, len) in [("stride", stride.len()), ("pads", pads.len()), ("dilation", dilation.len())] {
        if len != spatial {
            return Err(Error::invalid(op, what, format!("has {len} values for a {spatial}-d kernel; give one per spatial dim")));
        }
    }
    (0..spatial).map(|d| AxisWindow::new(op, dims[2 + d], kernel[d], stride[d], dilation[d], pads[d], ceil_mode)).collect()
}

/// `x` pooled along `axis` by `w`: padded with `fill`, the taps gathered into a new axis
/// before `axis`, which `reduce` removes.
fn pool_axis(x: &Tensor, axis: usize, w: &AxisWindow, fill: f64, reduce: Reduce) -> Result<Tensor> {
    let mut dims = x.raw_shape().dims().to_vec();
    let mut pads = vec![(0, 0); dims.len()];
    pads[axis] = (w.pads[0], w.pads[1] + w.overhang());
    let padded = if pads[axis] == (0, 0) { x.clone() } else { x.pad(&pads, PadMode::Constant(fill))? };
    let taps = padded.index_select(axis as isize, &Tensor::from_vec(w.taps(), &[w.kernel * w.out])?)?;
    dims.splice(axis..=axis, [w.kernel, w.out]);
    let split = taps.reshape(dims)?;
    match reduce {
        Reduce::Max => split.max_axes(&[axis as isize], false),
        Reduce::Sum => split.sum_axes(&[axis as isize], false),
    }
}

/// The per-window divisors as a tensor over the spatial output dims (their products), or
/// the one value when all are equal.
fn divisors(windows: &[AxisWindow], count_include_pad: bool, dtype: DType) -> Result<Tensor> {
    let mut all = vec![1.0f64];
    for w in windows {
        all = all.iter().flat_map(|p| w.counts(count_include_pad).into_iter().map(move |c| p * c as f64)).collect();
    }
    if all.iter().all(|&d| d == all[0]) {
        return Ok(Tensor::full(&[], all[0], dtype));
    }
    Tensor::from_vec(all, &windows.iter().map(|w| w.out).collect::<Vec<_>>())?.cast(dtype)
}

impl Tensor {
    /// Max pooling of `self` `[n, c, d1, ..., dk]` over its `k` spatial dims: the largest
    /// entry of each window of `kernel[i]` taps `dilation[i]` apart, moved by `stride[i]`,
    /// over the input padded by `pads[i] = [before, after]` (padding never wins). With
    /// `ceil_mode` a last partial window is kept when it starts inside the input or the
    /// begin padding. ONNX's `MaxPool` of any rank; PyTorch's `max_pool1d/2d/3d`.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let x = Tensor::from_vec(vec![1.0f32, 5.0, 2.0, 0.0, 3.0], &[1, 1, 5])?;
    /// // Taps 2 apart: windows {1, 2}, {5, 0}, {2, 3}.
    /// let y = x.max_pool_nd(&[2], &[1], &[[0, 0]], &[2], false)?;
    /// assert_eq!(y.to_vec::<f32>()?, vec![2.0, 5.0, 3.0]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn max_pool_nd(&self, kernel: &[usize], stride: &[usize], pads: &[[usize; 2]], dilation: &[usize], ceil_mode: bool) -> Result<Tensor> {
        let ws = windows("max_pool_nd", self, kernel, stride, pads, dilation, ceil_mode)?;
        ws.iter().enumerate().try_fold(self.clone(), |y, (d, w)| pool_axis(&y, 2 + d, w, f64::NEG_INFINITY, Reduce::Max))
    }

    /// Average pooling of `self` `[n, c, d1, ..., dk]` over its `k` spatial dims, windows as
    /// in [`Tensor::max_pool_nd`]: each window's sum over zero padding, divided by its taps
    /// inside the input, or inside the padded input with `count_include_pad`. ONNX's
    /// `AveragePool` of any rank; PyTorch's `avg_pool1d/2d/3d`.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let x = Tensor::from_vec(vec![2.0f32, 4.0, 6.0], &[1, 1, 3])?;
    /// // One zero of padding each side, windows of 2: {0, 2}, {4, 6}.
    /// let y = x.avg_pool_nd(&[2], &[2], &[[1, 1]], &[1], false, false)?;
    /// assert_eq!(y.to_vec::<f32>()?, vec![2.0, 5.0]);
    /// let y = x.avg_pool_nd(&[2], &[2], &[[1, 1]], &[1], false, true)?; // the pad counts
    /// assert_eq!(y.to_vec::<f32>()?, vec![1.0, 5.0]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    #[allow(clippy::too_many_arguments)]
    pub fn avg_pool_nd(
        &self,
        kernel: &[usize],
        stride: &[usize],
        pads: &[[usize; 2]],
        dilation: &[usize],
        ceil_mode: bool,
        count_include_pad: bool,
    ) -> Result<Tensor> {
        let ws = windows("avg_pool_nd", self, kernel, stride, pads, dilation, ceil_mode)?;
        let sums = ws.iter().enumerate().try_fold(self.clone(), |y, (d, w)| pool_axis(&y, 2 + d, w, 0.0, Reduce::Sum))?;
        sums.div(&divisors(&ws, count_include_pad, self.dtype())?)
    }

    /// Lp pooling of `self` `[n, c, d1, ..., dk]` (ONNX's `LpPool`; PyTorch's `lp_pool1d/2d`
    /// over zero padding): `(sum |x|^p)^(1/p)` over each window, windows as in
    /// [`Tensor::max_pool_nd`]. `p` must be positive.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let x = Tensor::from_vec(vec![3.0f32, -4.0, 0.0, 5.0], &[1, 1, 4])?;
    /// let y = x.lp_pool_nd(2.0, &[2], &[2], &[[0, 0]], &[1], false)?;
    /// assert_eq!(y.to_vec::<f32>()?, vec![5.0, 5.0]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn lp_pool_nd(&self, p: f64, kernel: &[usize], stride: &[usize], pads: &[[usize; 2]], dilation: &[usize], ceil_mode: bool) -> Result<Tensor> {
        if !(p > 0.0 && p.is_finite()) {
            return Err(Error::invalid("lp_pool_nd", "p", format!("{p} must be positive and finite")));
        }
        let ws = windows("lp_pool_nd", self, kernel, stride, pads, dilation, ceil_mode)?;
        let powers = self.abs()?.powf(p)?;
        let sums = ws.iter().enumerate().try_fold(powers, |y, (d, w)| pool_axis(&y, 2 + d, w, 0.0, Reduce::Sum))?;
        sums.powf(1.0 / p)
    }

    /// 3-d max pooling of `self` `[n, c, d, h, w]` (PyTorch's `max_pool3d`), `padding` on
    /// both sides of each spatial dim; see [`Tensor::max_pool_nd`].
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let x = Tensor::arange(0.0f32, 8.0).reshape(&[1, 1, 2, 2, 2])?;
    /// let y = x.max_pool3d([2, 1, 2], [1, 1, 1], [0, 0, 0], [1, 1, 1], false)?;
    /// assert_eq!(y.to_vec::<f32>()?, vec![5.0, 7.0]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn max_pool3d(&self, kernel: [usize; 3], stride: [usize; 3], padding: [usize; 3], dilation: [usize; 3], ceil_mode: bool) -> Result<Tensor> {
        self.max_pool_nd(&kernel, &stride, &padding.map(|p| [p, p]), &dilation, ceil_mode)
    }

    /// 3-d average pooling of `self` `[n, c, d, h, w]` (PyTorch's `avg_pool3d`), `padding`
    /// on both sides of each spatial dim; see [`Tensor::avg_pool_nd`].
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let x = Tensor::arange(0.0f32, 8.0).reshape(&[1, 1, 2, 2, 2])?;
    /// let y = x.avg_pool3d([2, 2, 2], [2, 2, 2], [0, 0, 0], false, true)?;
    /// assert_eq!(y.to_vec::<f32>()?, vec![3.5]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn avg_pool3d(
        &self,
        kernel: [usize; 3],
        stride: [usize; 3],
        padding: [usize; 3],
        ceil_mode: bool,
        count_include_pad: bool,
    ) -> Result<Tensor> {
        self.avg_pool_nd(&kernel, &stride, &padding.map(|p| [p, p]), &[1; 3], ceil_mode, count_include_pad)
    }
}
