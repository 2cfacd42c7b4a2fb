//! Dilated and 3-d convolutions composed from the grouped 2-d convolution (so their
//! gradients and graph forms come from it and from layout ops). A dilated kernel is the
//! kernel with `dilation - 1` zeros between its taps (gathered by `index_select` from the
//! kernel padded by one zero); a 3-d convolution is the sum, over the kernel's depth taps, of
//! 2-d convolutions of the depth slices each tap reads (folded into the batch).

use super::padding::PadMode;
use crate::error::{Error, Result};
use crate::shape::UNKNOWN;
use crate::tensor::Tensor;

/// `weight` `[o, i, k1, ..., kj]` with `dilation[d] - 1` zeros between the taps of spatial
/// axis `d`.
pub(crate) fn dilated_kernel(weight: &Tensor, dilation: &[usize]) -> Result<Tensor> {
    let mut w = weight.clone();
    for (d, &dil) in dilation.iter().enumerate().filter(|&(_, &dil)| dil > 1) {
        let axis = 2 + d;
        let k = w.raw_shape().dims()[axis];
        let mut pads = vec![(0, 0); w.rank()];
        pads[axis] = (0, 1);
        // Position j of the dilated axis reads tap j / dil, or the appended zero at k.
        let index: Vec<i64> = (0..(k - 1) * dil + 1).map(|j| if j % dil == 0 { (j / dil) as i64 } else { k as i64 }).collect();
        w = w.pad(&pads, PadMode::Constant(0.0))?.index_select(axis as isize, &Tensor::from_vec(index, &[(k - 1) * dil + 1])?)?;
    }
    Ok(w)
}

/// The dims of `x`, which must be known and of rank `rank`.
fn known(op: &'static str, arg: &'static str, x: &Tensor, rank: usize, layout: &str) -> Result<Vec<usize>> {
    let dims = x.raw_shape().dims().to_vec();
    if dims.len() != rank {
        return Err(Error::invalid(op, arg, format!("must be {rank}-d ({layout}), found shape {}", x.raw_shape())));
    }
    if dims.contains(&UNKNOWN) {
        return Err(Error::invalid(op, arg, "needs known dims; give the argument a fixed input_signature"));
    }
    Ok(dims)
}

fn need_dilation(op: &'static str, dilation: &[usize]) -> Result<()> {
    if dilation.contains(&0) {
        return Err(Error::invalid(op, "dilation", format!("{dilation:?} must be positive")));
    }
    Ok(())
}

impl Tensor {
    /// The 2-d convolution of `self` `[n, c, h, w]` with `weight` `[o, c / groups, kh, kw]`
    /// whose taps are `dilation` apart (PyTorch's `conv2d(..., dilation, groups)`; ONNX
    /// `Conv` with `dilations`), plus `bias` `[o]` if given.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let x = Tensor::arange(0.0f32, 5.0).reshape(&[1, 1, 1, 5])?;
    /// let w = Tensor::from_vec(vec![1.0f32, 10.0], &[1, 1, 1, 2])?;
    /// // Taps 3 apart: x[j] + 10 x[j + 3].
    /// let y = x.conv2d_dilated(&w, None, [1, 1], [0, 0], [1, 3], 1)?;
    /// assert_eq!(y.to_vec::<f32>()?, vec![30.0, 41.0]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn conv2d_dilated(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        stride: [usize; 2],
        padding: [usize; 2],
        dilation: [usize; 2],
        groups: usize,
    ) -> Result<Tensor> {
        need_dilation("conv2d", &dilation)?;
        if dilation == [1, 1] {
            return self.conv2d_grouped(weight, bias, stride, padding, groups);
        }
        known("conv2d", "weight", weight, 4, "OIHW")?;
        if groups > 1 && self.raw_shape().dims().get(1) == Some(&groups) && weight.raw_shape().dims()[1] == 1 {
            // Depthwise: the direct kernel takes the dilation itself.
            return self.conv2d_depthwise(weight, bias, stride, padding, dilation);
        }
        self.conv2d_grouped(&dilated_kernel(weight, &dilation)?, bias, stride, padding, groups)
    }

    /// The 3-d convolution of `self` `[n, c, d, h, w]` with `weight`
    /// `[o, c / groups, kd, kh, kw]` (PyTorch's `conv3d`; ONNX `Conv` on 5-d inputs), moved
    /// by `stride`, over the input zero-padded by `padding` on both sides, taps `dilation`
    /// apart, in `groups` groups, plus `bias` `[o]` if given.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let x = Tensor::arange(0.0f32, 8.0).reshape(&[1, 1, 2, 2, 2])?;
    /// let w = Tensor::from_vec(vec![1.0f32, 10.0], &[1, 1, 2, 1, 1])?; // depth taps only
    /// let y = x.conv3d(&w, None, [1, 1, 1], [0, 0, 0], [1, 1, 1], 1)?;
    /// assert_eq!(y.to_vec::<f32>()?, vec![40.0, 51.0, 62.0, 73.0]); // x[0] + 10 x[1]
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn conv3d(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        stride: [usize; 3],
        padding: [usize; 3],
        dilation: [usize; 3],
        groups: usize,
    ) -> Result<Tensor> {
        const OP: &str = "conv3d";
        let (x, w) = (known(OP, "input", self, 5, "NCDHW")?, known(OP, "weight", weight, 5, "[o, c / groups, kd, kh, kw]")?);
        need_dilation(OP, &dilation)?;
        if w[2..].contains(&0) {
            return Err(Error::invalid(OP, "weight", format!("the kernel {:?} must be positive", &w[2..])));
        }
        if stride[0] == 0 {
            return Err(Error::invalid(OP, "stride", format!("{stride:?} must be positive")));
        }
        let (n, o, kd) = (x[0], w[0], w[2]);
        let reach = (kd - 1) * dilation[0] + 1;
        let out_d = (x[2] + 2 * padding[0]).checked_sub(reach).map(|span| span / stride[0] + 1).ok_or_else(|| {
            Error::invalid(OP, "weight", format!("a depth window reaching {reach} is longer than the padded input depth {}", x[2] + 2 * padding[0]))
        })?;
        let padded = if padding[0] == 0 {
            self.clone()
        } else {
            self.pad(&[(0, 0), (0, 0), (padding[0], padding[0]), (0, 0), (0, 0)], PadMode::Constant(0.0))?
        };
        let mut sum: Option<Tensor> = None;
        for a in 0..kd {
            // The depth slices tap `a` reads, one per output depth, folded into the batch.
            let depths: Vec<i64> = (0..out_d).map(|i| (i * stride[0] + a * dilation[0]) as i64).collect();
            let slices = padded.index_select(2, &Tensor::from_vec(depths, &[out_d])?)?.permute(&[0, 2, 1, 3, 4])?;
            let slices = slices.reshape([(n * out_d) as isize, x[1] as isize, x[3] as isize, x[4] as isize])?;
            let tap = weight.narrow(2, a, 1)?.squeeze(2)?;
            let y = slices.conv2d_dilated(&tap, None, [stride[1], stride[2]], [padding[1], padding[2]], [dilation[1], dilation[2]], groups)?;
            sum = Some(match sum {
                Some(s) => s.add(&y)?,
                None => y,
            });
        }
        let y = sum.expect("a kernel has at least one depth tap");
        let hw = y.raw_shape().dims()[2..].to_vec();
        let y = y.reshape([n, out_d, o, hw[0], hw[1]])?.permute(&[0, 2, 1, 3, 4])?;
        match bias {
            Some(b) => y.add(&b.reshape([1, o as isize, 1, 1, 1])?),
            None => Ok(y),
        }
    }
}
