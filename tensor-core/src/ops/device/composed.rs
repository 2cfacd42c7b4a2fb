//! Ops composed on the GPU from its elementwise kernels and reductions: softmax, log-softmax
//! and cross-entropy, with the CPU's formulas.

use super::compute_on;
use super::movement::one_hot;
use crate::cuda::DeviceStorage;
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

/// Softmax (or its log) along `axis`, from the GPU's reductions and elementwise kernels:
/// `exp(x - max) / sum` (`(x - max) - log(sum)`), the CPU's formula in other kernels (within
/// 1e-5 relative, as reductions are).
pub(super) fn softmax(x: &DeviceStorage, axis: usize, log: bool) -> Result<DeviceStorage> {
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
