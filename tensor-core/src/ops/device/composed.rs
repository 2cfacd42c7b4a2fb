//! Softmax, log-softmax and cross-entropy on the GPU, with the CPU's formulas: one row kernel
//! for a softmax along the last axis, else composed of the elementwise kernels and reductions.

use super::movement::one_hot;
use super::{compute_on, fixed, Fixed};
use crate::cuda::source::TcIndex;
use crate::cuda::{self as backend, DeviceStorage};
use crate::error::Result;
use crate::math::{BinaryOp, ElementwiseOp, ReduceOp, UnaryOp};
use crate::ops::{Op, ReductionOp};

fn unary(u: UnaryOp, x: &DeviceStorage) -> Result<DeviceStorage> {
    compute_on(&Op::Elementwise(ElementwiseOp::Unary(u)), &[x])
}

fn binary(b: BinaryOp, x: &DeviceStorage, y: &DeviceStorage) -> Result<DeviceStorage> {
    compute_on(&Op::Elementwise(ElementwiseOp::Binary(b)), &[x, y])
}

fn reduce_keep(r: ReduceOp, x: &DeviceStorage, axis: usize) -> Result<DeviceStorage> {
    compute_on(&Op::Reduction(ReductionOp::Reduce { op: r, axes: smallvec::smallvec![axis], keepdim: true }), &[x])
}

/// Softmax (or its log) along `axis`: `exp(x - max) / sum` (`(x - max) - log(sum)`), the
/// CPU's formula (within 1e-5 relative, as reductions are). Along the last axis, one kernel
/// does every step (a block per row); along another, the GPU's reductions and elementwise
/// kernels do them one by one, with the same bits.
pub(super) fn softmax(x: &DeviceStorage, axis: usize, log: bool) -> Result<DeviceStorage> {
    if axis + 1 == x.shape.rank() && x.shape[axis] > 0 {
        let mut ix = TcIndex::default();
        ix.dims[0] = x.shape[axis] as i64;
        return backend::rows(&fixed(Fixed::Softmax(x.dtype, log)), &ix, x);
    }
    let shifted = binary(BinaryOp::Sub, x, &reduce_keep(ReduceOp::Max, x, axis)?)?;
    let e = unary(UnaryOp::Exp, &shifted)?;
    let total = reduce_keep(ReduceOp::Sum, &e, axis)?;
    match log {
        true => binary(BinaryOp::Sub, &shifted, &unary(UnaryOp::Log, &total)?),
        false => binary(BinaryOp::Div, &e, &total),
    }
}

/// The mean over rows of `-log_softmax(logits)[label]`.
pub(super) fn cross_entropy(logits: &DeviceStorage, labels: &DeviceStorage) -> Result<DeviceStorage> {
    let picked = binary(BinaryOp::Mul, &softmax(logits, 1, true)?, &one_hot(labels, logits.shape[1], logits.dtype)?)?;
    let per_row = compute_on(&Op::Reduction(ReductionOp::Reduce { op: ReduceOp::Sum, axes: smallvec::smallvec![1], keepdim: false }), &[&picked])?;
    let mean = compute_on(&Op::Reduction(ReductionOp::Reduce { op: ReduceOp::Mean, axes: smallvec::smallvec![0], keepdim: false }), &[&per_row])?;
    unary(UnaryOp::Neg, &mean)
}
