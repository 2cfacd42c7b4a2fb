//! Cumulative sums and products along an axis, composed from layout ops and additions or
//! multiplications (a scan of `log2(n)` shifted steps), so their gradients and graph forms
//! come from those.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::shape::{normalize_axis, UNKNOWN};
use crate::tensor::Tensor;

impl Tensor {
    /// The running sums along `axis` (PyTorch's `cumsum`): `out[i] = x[0] + ... + x[i]`.
    /// Bool inputs are summed as i64. The sums are added in a tree (a scan), not left to
    /// right, so float results may differ from a sequential sum in the last bits.
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let x = Tensor::from_vec(vec![1, 2, 3, 4, 5, 6], &[2, 3])?;
    /// assert_eq!(x.cumsum(1)?.to_vec::<i32>()?, vec![1, 3, 6, 4, 9, 15]);
    /// assert_eq!(x.cumsum(0)?.to_vec::<i32>()?, vec![1, 2, 3, 5, 7, 9]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn cumsum(&self, axis: isize) -> Result<Tensor> {
        self.cumulative_sum(axis, false, false)
    }

    /// The running sums along `axis` with ONNX `CumSum`'s two options: `exclusive` leaves
    /// each element out of its own sum (`out[i] = x[0] + ... + x[i - 1]`, 0 first), and
    /// `reverse` sums from the end (`out[i] = x[i] + ... + x[n - 1]`).
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3])?;
    /// assert_eq!(x.cumulative_sum(0, true, false)?.to_vec::<f32>()?, vec![0.0, 1.0, 3.0]);
    /// assert_eq!(x.cumulative_sum(0, false, true)?.to_vec::<f32>()?, vec![6.0, 5.0, 3.0]);
    /// assert_eq!(x.cumulative_sum(0, true, true)?.to_vec::<f32>()?, vec![5.0, 3.0, 0.0]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn cumulative_sum(&self, axis: isize, exclusive: bool, reverse: bool) -> Result<Tensor> {
        self.scan(Combine::Sum, axis, exclusive, reverse)
    }

    /// The cumulative product along `axis` (numeric dtypes; bools as i64), a scan of
    /// `log2(n)` shifted multiplications as `cumulative_sum`'s additions, so its gradient
    /// comes from `mul`'s. `exclusive`: element `i` is the product of those before it (1
    /// first); `reverse`: from the end.
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[4])?;
    /// assert_eq!(x.cumulative_prod(0, false, false)?.to_vec::<f32>()?, vec![1.0, 2.0, 6.0, 24.0]);
    /// assert_eq!(x.cumulative_prod(0, true, false)?.to_vec::<f32>()?, vec![1.0, 1.0, 2.0, 6.0]);
    /// assert_eq!(x.cumulative_prod(0, false, true)?.to_vec::<f32>()?, vec![24.0, 24.0, 12.0, 4.0]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn cumulative_prod(&self, axis: isize, exclusive: bool, reverse: bool) -> Result<Tensor> {
        self.scan(Combine::Product, axis, exclusive, reverse)
    }

    /// The scan both share: `log2(n)` rounds, each combining the running values with
    /// themselves shifted twice as far, the combination's identity shifted in.
    fn scan(&self, combine: Combine, axis: isize, exclusive: bool, reverse: bool) -> Result<Tensor> {
        let (rank, op) = (self.rank(), combine.name());
        let axis = normalize_axis(axis, rank).ok_or(Error::Axis { op, axis, rank })?;
        let n = self.raw_shape()[axis];
        if n == UNKNOWN {
            return Err(Error::invalid(op, "input", "needs a known length along the axis; give the argument a fixed input_signature"));
        }
        let shift = |t: &Tensor, by: usize| match combine {
            Combine::Sum => t.shifted(axis, n, by),
            Combine::Product => t.shifted_ones(axis, n, by),
        };
        let x = if self.dtype() == DType::Bool { self.cast(DType::I64)? } else { self.clone() };
        let x = if reverse { x.flip_axis(axis)? } else { x };
        let mut running = if exclusive { shift(&x, 1)? } else { x };
        let mut step = 1;
        while step < n {
            let shifted = shift(&running, step)?;
            running = match combine {
                Combine::Sum => running.add(&shifted)?,
                Combine::Product => running.mul(&shifted)?,
            };
            step *= 2;
        }
        if reverse {
            running.flip_axis(axis)
        } else {
            Ok(running)
        }
    }

    /// `shifted`, with ones (the product's identity) where it shifts in zeros.
    fn shifted_ones(&self, axis: usize, n: usize, by: usize) -> Result<Tensor> {
        let mut dims = vec![1; self.rank()];
        dims[axis] = n;
        let front: Vec<f64> = (0..n).map(|i| if i < by { 1.0 } else { 0.0 }).collect();
        let ones = Tensor::from_vec(front, &dims)?.cast(self.dtype())?;
        self.shifted(axis, n, by)?.add(&ones)
    }

    /// `self` moved `by` places up `axis` (of length `n`), zeros in front.
    fn shifted(&self, axis: usize, n: usize, by: usize) -> Result<Tensor> {
        if by >= n {
            return Ok(self.zeros_like());
        }
        self.narrow(axis as isize, 0, n - by)?.pad_axis(axis, by, 0)
    }

    /// `self` in reverse order along `axis`.
    fn flip_axis(&self, axis: usize) -> Result<Tensor> {
        let n = self.raw_shape()[axis] as i64;
        let reversed = Tensor::from_vec((0..n).rev().collect::<Vec<i64>>(), &[n as usize])?;
        self.index_select(axis as isize, &reversed)
    }
}

/// What a scan combines its running values with.
#[derive(Clone, Copy)]
enum Combine {
    Sum,
    Product,
}

impl Combine {
    fn name(self) -> &'static str {
        match self {
            Combine::Sum => "cumsum",
            Combine::Product => "cumprod",
        }
    }
}
