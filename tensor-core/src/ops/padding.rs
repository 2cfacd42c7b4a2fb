//! Padding with a constant, a reflection, the edge values or a wrap-around, composed from
//! `concat` and `index_select` (so its gradients and graph forms come from those).

use crate::error::{Error, Result};
use crate::shape::UNKNOWN;
use crate::tensor::Tensor;

/// What [`Tensor::pad`] fills the new entries with (PyTorch's `mode`, ONNX `Pad`'s `mode`).
///
/// ```
/// use tensor_core::ops::PadMode;
/// assert_ne!(PadMode::Reflect, PadMode::Replicate);
/// assert_eq!(PadMode::Constant(0.0), PadMode::Constant(0.0));
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PadMode {
    /// This value (in the tensor's dtype): PyTorch's `constant`, ONNX `constant`.
    Constant(f64),
    /// The entries mirrored about the edge, the edge itself not repeated: `[2, 1 | 1, 2, 3 | 2]`
    /// (PyTorch's and ONNX's `reflect`); each pad must be shorter than the axis.
    Reflect,
    /// The edge entry repeated (PyTorch's `replicate`, ONNX `edge`).
    Replicate,
    /// The entries of the other end (PyTorch's `circular`, ONNX `wrap`); each pad at most the
    /// axis's length.
    Circular,
}

/// The source position of padded position `i` (from `-before`) along an axis of `n`.
fn source(mode: PadMode, i: i64, n: i64) -> i64 {
    match mode {
        PadMode::Reflect => {
            let r = i.abs();
            if r < n {
                r
            } else {
                2 * (n - 1) - r
            }
        }
        PadMode::Replicate => i.clamp(0, n - 1),
        PadMode::Circular => i.rem_euclid(n),
        PadMode::Constant(_) => unreachable!("a constant pad reads no source"),
    }
}

impl Tensor {
    /// `self` padded by `pads[d] = (before, after)` entries along each axis `d` (one pair per
    /// axis, in axis order, as ONNX `Pad`'s begins and ends; PyTorch's `F.pad` lists them from
    /// the last axis), filled as `mode` says.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::ops::PadMode;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3])?;
    /// assert_eq!(x.pad(&[(2, 1)], PadMode::Constant(9.0))?.to_vec::<f32>()?, vec![9.0, 9.0, 1.0, 2.0, 3.0, 9.0]);
    /// assert_eq!(x.pad(&[(2, 1)], PadMode::Reflect)?.to_vec::<f32>()?, vec![3.0, 2.0, 1.0, 2.0, 3.0, 2.0]);
    /// assert_eq!(x.pad(&[(2, 1)], PadMode::Replicate)?.to_vec::<f32>()?, vec![1.0, 1.0, 1.0, 2.0, 3.0, 3.0]);
    /// assert_eq!(x.pad(&[(2, 1)], PadMode::Circular)?.to_vec::<f32>()?, vec![2.0, 3.0, 1.0, 2.0, 3.0, 1.0]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn pad(&self, pads: &[(usize, usize)], mode: PadMode) -> Result<Tensor> {
        if pads.len() != self.rank() {
            return Err(Error::invalid(
                "pad",
                "pads",
                format!("needs one (before, after) pair per axis: {} for shape {}", self.rank(), self.raw_shape()),
            ));
        }
        let mut out = self.clone();
        for (axis, &(before, after)) in pads.iter().enumerate().filter(|&(_, &(b, a))| b + a > 0) {
            out = out.pad_one_axis(axis, before, after, mode)?;
        }
        Ok(out)
    }

    fn pad_one_axis(&self, axis: usize, before: usize, after: usize, mode: PadMode) -> Result<Tensor> {
        let shape = self.raw_shape();
        let n = shape[axis];
        if n == UNKNOWN {
            return Err(Error::invalid("pad", "input", "needs a known length along each padded axis; give the argument a fixed input_signature"));
        }
        if let PadMode::Constant(value) = mode {
            let side = |len: usize| Tensor::full(shape.with_dim(axis, len).dims(), value, self.dtype());
            let (b, a) = (side(before), side(after));
            return Tensor::concat(&[&b, self, &a], axis as isize);
        }
        let too_long = match mode {
            PadMode::Reflect => before.max(after) >= n,
            PadMode::Circular => before.max(after) > n,
            PadMode::Replicate | PadMode::Constant(_) => false,
        };
        if n == 0 || too_long {
            return Err(Error::invalid("pad", "pads", format!("({before}, {after}) is too long for {mode:?} along an axis of {n}")));
        }
        let n = n as i64;
        let index: Vec<i64> = (-(before as i64)..n + after as i64).map(|i| source(mode, i, n)).collect();
        let len = index.len();
        self.index_select(axis as isize, &Tensor::from_vec(index, &[len])?)
    }
}
