//! The rule of an op given an input whose rank is unknown (a trace relaxed across calls of
//! different ranks by `reduce_retracing`). TF infers a shape of unknown rank for every op and
//! checks at run time; here the ops whose attributes cannot depend on the input's rank have
//! such a rule — elementwise ops (their output is the inputs' broadcast, of unknown rank) and
//! a reshape to `[-1]` (what a reduction over all axes becomes at an unknown rank) — and every
//! other op is an `Err` naming it. The function layer relaxes ranks only for functions whose
//! earlier trace used these ops alone ([`has_unknown_rank_form`]), so this `Err` is only met
//! by code that branches on a rank it reads while tracing. The executor checks every op on
//! its concrete shapes when the graph runs, as for unknown dims.

use super::{LayoutOp, Op, ReductionOp, TypeRef};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::shape::{broadcast_shapes, Shape};
use smallvec::SmallVec;

/// The output type of `op` on `inputs`, at least one of which has an unknown rank.
pub(super) fn infer(op: &Op, inputs: &[TypeRef]) -> Result<(DType, Shape)> {
    match op {
        Op::Elementwise(_) => elementwise(op, inputs),
        Op::Layout(LayoutOp::Reshape(spec)) if spec.as_slice() == [-1] => Ok((inputs[0].dtype, Shape::new(&[crate::shape::UNKNOWN]))),
        _ => Err(Error::invalid(
            op.name(),
            "input",
            "has an unknown rank in this trace (reduce_retracing relaxed it across calls of different ranks), and this op needs the rank; \
             read no rank while tracing, or give the argument a fixed rank with input_signature",
        )),
    }
}

/// An elementwise op: the dtype its rule gives (checked on scalars in place of the inputs of
/// unknown rank), the inputs' broadcast as the shape.
fn elementwise(op: &Op, inputs: &[TypeRef]) -> Result<(DType, Shape)> {
    let scalar = Shape::scalar();
    let probe: SmallVec<[TypeRef; 3]> =
        inputs.iter().map(|t| TypeRef { dtype: t.dtype, shape: if t.shape.is_unknown_rank() { &scalar } else { t.shape } }).collect();
    let (dtype, _) = op.infer(&probe)?;
    let shape = inputs.iter().try_fold(Shape::scalar(), |acc, t| broadcast_shapes(&acc, t.shape)).unwrap_or_else(Shape::unknown_rank);
    Ok((dtype, shape))
}

/// True when `op`, applied to a first input of shape `first` (a known rank), has a rule at an
/// unknown rank or becomes ops that do there: a reduction over all axes is a reshape to
/// `[-1]` and a reduction of its only axis.
pub(crate) fn has_unknown_rank_form(op: &Op, first: &Shape) -> bool {
    match op {
        Op::Elementwise(_) => true,
        Op::Layout(LayoutOp::Reshape(spec)) => spec.as_slice() == [-1],
        Op::Reduction(ReductionOp::Reduce { axes, keepdim: false, .. }) => {
            axes.len() == first.rank() && axes.iter().enumerate().all(|(i, &a)| a == i)
        }
        _ => false,
    }
}
