//! What a loaded graph must satisfy before `graph::validate` and the executor see it. A traced
//! graph holds these by construction; a file may not, so each node is checked against what
//! the op's user API would have built — input counts, attributes in range, the consistency
//! the kernels rely on — and every size is bounded, so that a damaged or hostile file is an
//! `Err`, never a panic, an out-of-bounds read or a huge allocation.

use crate::dtype::DType;
use crate::math::ElementwiseOp;
use crate::ops::{CollectiveOp, ConvOp, IndexOp, LayoutOp, LinalgOp, NnOp, Op, RandomOp, ReductionOp, SymShapeOp, TypeRef};
use crate::shape::{broadcast_shapes, Shape, UNKNOWN};

/// The largest value a loaded graph may declare: 4 GiB.
pub(super) const MAX_VALUE_BYTES: usize = 1 << 32;

/// Largest padding, width or precision a `tprint!` placeholder may ask for.
pub(super) const MAX_FORMAT_WIDTH: usize = 1 << 16;

/// Deepest nesting of `cond`/`while_loop` subgraphs.
pub(super) const MAX_DEPTH: usize = 32;

/// The element count of a shape whose dims are all known, if it does not overflow.
pub(super) fn known_numel(shape: &Shape) -> Option<usize> {
    shape.dims().iter().try_fold(1usize, |n, &d| if d == UNKNOWN { None } else { n.checked_mul(d) })
}

/// A value's type is within bounds: its known dims make at most `MAX_VALUE_BYTES`.
pub(super) fn check_value(dtype: DType, shape: &Shape) -> Result<(), String> {
    let known = shape.dims().iter().filter(|&&d| d != UNKNOWN).try_fold(1usize, |n, &d| n.checked_mul(d));
    match known.and_then(|n| n.checked_mul(dtype.size_of())) {
        Some(bytes) if bytes <= MAX_VALUE_BYTES => Ok(()),
        _ => Err(format!("a value of {dtype}{shape} is larger than the {} GiB a loaded graph may hold", MAX_VALUE_BYTES >> 30)),
    }
}

/// How many inputs an elementwise op takes.
pub(super) fn elementwise_arity(op: &ElementwiseOp) -> usize {
    match op {
        ElementwiseOp::Unary(_) | ElementwiseOp::BinaryScalar { .. } | ElementwiseOp::CompareScalar { .. } => 1,
        ElementwiseOp::Clamp { .. } | ElementwiseOp::Cast(_) => 1,
        ElementwiseOp::Binary(_) | ElementwiseOp::Compare(_) => 2,
        ElementwiseOp::Where => 3,
    }
}

/// The input counts an op accepts.
fn arity(op: &Op) -> std::ops::RangeInclusive<usize> {
    let n = match op {
        Op::Elementwise(e) => elementwise_arity(e),
        Op::Reduction(_) | Op::Nn(NnOp::Softmax { .. } | NnOp::LogSoftmax { .. }) => 1,
        Op::Layout(LayoutOp::Concat { .. }) => return 1..=usize::MAX,
        Op::Layout(_) | Op::Index(IndexOp::OneHot { .. } | IndexOp::TopK { .. }) => 1,
        Op::Index(_) | Op::Linalg(LinalgOp::Matmul { .. }) | Op::Nn(NnOp::CrossEntropy) => 2,
        Op::Conv(ConvOp::Conv2d { .. } | ConvOp::Depthwise2d { .. }) => return 2..=3,
        Op::Conv(ConvOp::MaxPool2d { .. }) => 1,
        Op::Conv(_) => 2,
        // The generator state, and for a draw shaped like another tensor that tensor.
        Op::Random(_) => return 1..=2,
        Op::Collective(_) | Op::SymShape(_) => 1,
    };
    n..=n
}

/// Checks an op node's input count and attributes against its input types — what its
/// shape rule (`infer`, run next by the validator) takes for granted.
pub(super) fn check_op(op: &Op, inputs: &[TypeRef]) -> Result<(), String> {
    let accepted = arity(op);
    if !accepted.contains(&inputs.len()) {
        return Err(format!("{} takes {} inputs, not {}", op.name(), range_text(&accepted), inputs.len()));
    }
    let x = inputs[0].shape;
    let axis_ok = |axis: usize| if axis < x.rank() { Ok(()) } else { Err(format!("axis {axis} is out of range for rank {}", x.rank())) };
    match op {
        Op::Elementwise(_) | Op::Linalg(_) | Op::Nn(NnOp::CrossEntropy) => Ok(()),
        Op::Reduction(ReductionOp::Reduce { axes, .. }) => {
            axes.iter().try_for_each(|&a| axis_ok(a))?;
            match axes.windows(2).all(|w| w[0] < w[1]) {
                true => Ok(()),
                false => Err(format!("axes {axes:?} must be distinct and increasing")),
            }
        }
        Op::Reduction(ReductionOp::Argmax { axis, .. }) | Op::Nn(NnOp::Softmax { axis } | NnOp::LogSoftmax { axis }) => axis_ok(*axis),
        Op::Layout(l) => check_layout(l, inputs, axis_ok),
        Op::Index(i) => check_index(i, inputs, axis_ok),
        Op::Conv(c) => check_conv(c, inputs),
        Op::Random(RandomOp::Uniform { dtype, shape } | RandomOp::Normal { dtype, shape }) => match shape {
            Some(shape) => check_value(*dtype, shape),
            None => Ok(()),
        },
        Op::Collective(CollectiveOp::AllReduce { world, .. } | CollectiveOp::AllGather { world }) if (1..=1 << 20).contains(world) => Ok(()),
        Op::Collective(CollectiveOp::Broadcast { root, world }) if (1..=1 << 20).contains(world) && root < world => Ok(()),
        Op::Collective(c) => Err(format!("{c:?}: the world must be 1 to 2^20 ranks and the root one of them")),
        Op::SymShape(SymShapeOp::Narrow { axis, .. }) => axis_ok(*axis),
        Op::SymShape(_) => Ok(()),
    }
}

fn range_text(r: &std::ops::RangeInclusive<usize>) -> String {
    match (*r.start(), *r.end()) {
        (a, b) if a == b => a.to_string(),
        (a, usize::MAX) => format!("{a} or more"),
        (a, b) => format!("{a} to {b}"),
    }
}

fn check_layout(op: &LayoutOp, inputs: &[TypeRef], axis_ok: impl Fn(usize) -> Result<(), String>) -> Result<(), String> {
    let x = inputs[0].shape;
    match op {
        LayoutOp::Reshape(spec) => {
            let known = spec.iter().filter(|&&d| d >= 0).try_fold(1usize, |n, &d| n.checked_mul(d as usize));
            match known {
                Some(n) if n <= MAX_VALUE_BYTES => Ok(()),
                _ => Err(format!("reshape to {spec:?} is larger than a loaded graph may hold")),
            }
        }
        LayoutOp::Permute(perm) => perm.iter().try_for_each(|&p| axis_ok(p)),
        LayoutOp::BroadcastTo(_) => Ok(()),
        LayoutOp::SumTo(target) => {
            if !all_known(inputs) {
                return Ok(());
            }
            match target.rank() <= x.rank() && broadcast_shapes(target, x).as_ref() == Some(x) {
                true => Ok(()),
                false => Err(format!("{x} does not sum to {target}")),
            }
        }
        LayoutOp::Concat { axis } => axis_ok(*axis),
        LayoutOp::Narrow { axis, start, len } => {
            axis_ok(*axis)?;
            start.checked_add(*len).filter(|&end| end < UNKNOWN).map(|_| ()).ok_or_else(|| format!("narrow {start}..+{len} overflows"))
        }
        LayoutOp::Pad { axis, before, after } => {
            axis_ok(*axis)?;
            let d = if x[*axis] == UNKNOWN { 0 } else { x[*axis] };
            d.checked_add(*before).and_then(|v| v.checked_add(*after)).filter(|&v| v < UNKNOWN).map(|_| ()).ok_or_else(|| "pad overflows".to_string())
        }
    }
}

fn check_index(op: &IndexOp, inputs: &[TypeRef], axis_ok: impl Fn(usize) -> Result<(), String>) -> Result<(), String> {
    match op {
        IndexOp::IndexSelect { axis } | IndexOp::Gather { axis } => axis_ok(*axis),
        IndexOp::OneHot { .. } => Ok(()),
        IndexOp::TopK { axis, .. } => axis_ok(*axis),
        IndexOp::IndexAdd { axis, .. } => {
            axis_ok(*axis)?;
            if !all_known(inputs) {
                return Ok(());
            }
            let (g, index) = (inputs[0].shape, inputs[1].shape);
            match index.rank() == 1 && g[*axis] == index[0] && inputs[1].dtype.is_int() {
                true => Ok(()),
                false => Err(format!("index_add of {g} needs an integer index [{}], found {}{index}", g[*axis], inputs[1].dtype)),
            }
        }
        IndexOp::ScatterAdd { axis, .. } => {
            axis_ok(*axis)?;
            if !all_known(inputs) {
                return Ok(());
            }
            match inputs[0].shape == inputs[1].shape && inputs[1].dtype.is_int() {
                true => Ok(()),
                false => Err(format!(
                    "scatter_add of {} needs an integer index of the same shape, found {}{}",
                    inputs[0].shape, inputs[1].dtype, inputs[1].shape
                )),
            }
        }
    }
}

/// The largest padding a loaded convolution may ask for (it bounds the arithmetic of the
/// output size).
const MAX_PADDING: usize = 1 << 24;

fn check_conv(op: &ConvOp, inputs: &[TypeRef]) -> Result<(), String> {
    let positive = |what: &str, v: [usize; 2]| if v.iter().all(|&s| s > 0) { Ok(()) } else { Err(format!("{what} {v:?} must be positive")) };
    let padding_ok = |p: [usize; 2]| if p.iter().all(|&v| v <= MAX_PADDING) { Ok(()) } else { Err(format!("padding {p:?} is too large")) };
    match op {
        ConvOp::Conv2d { padding, .. } => padding_ok(*padding),
        ConvOp::MaxPool2d { padding, .. } => padding_ok(*padding),
        ConvOp::Conv2dInputGrad { stride, padding, input_hw } => {
            positive("stride", *stride)?;
            padding_ok(*padding)?;
            if !all_known(inputs) {
                return Ok(());
            }
            let (gy, w) = (inputs[0].shape, inputs[1].shape);
            need_rank4(&[gy, w])?;
            let x = Shape::new(&[gy[0], w[1], input_hw[0], input_hw[1]]);
            same_as_forward(op, gy, &conv_out(&x, w, *stride, *padding)?)
        }
        ConvOp::Conv2dWeightGrad { stride, padding, kernel_hw } => {
            positive("stride", *stride)?;
            padding_ok(*padding)?;
            if !all_known(inputs) {
                return Ok(());
            }
            let (x, gy) = (inputs[0].shape, inputs[1].shape);
            need_rank4(&[x, gy])?;
            let w = Shape::new(&[gy[1], x[1], kernel_hw[0], kernel_hw[1]]);
            same_as_forward(op, gy, &conv_out(x, &w, *stride, *padding)?)
        }
        // The shape rule checks the rest, in checked arithmetic.
        ConvOp::Depthwise2d { stride, padding, dilation }
        | ConvOp::Depthwise2dInputGrad { stride, padding, dilation, .. }
        | ConvOp::Depthwise2dWeightGrad { stride, padding, dilation, .. } => {
            positive("stride", *stride)?;
            positive("dilation", *dilation)?;
            padding_ok(*padding)?;
            padding_ok(*dilation)
        }
        ConvOp::MaxPool2dGrad { kernel, stride, padding } => {
            positive("kernel", *kernel)?;
            positive("stride", *stride)?;
            padding_ok(*padding)?;
            if !all_known(inputs) {
                return Ok(());
            }
            let (x, gy) = (inputs[0].shape, inputs[1].shape);
            need_rank4(&[x, gy])?;
            let out = |n: usize, k: usize, s: usize, p: usize| {
                (n + 2 * p).checked_sub(k).map(|r| r / s + 1).ok_or_else(|| format!("window {k} is larger than the padded input {}", n + 2 * p))
            };
            let forward = Shape::new(&[x[0], x[1], out(x[2], kernel[0], stride[0], padding[0])?, out(x[3], kernel[1], stride[1], padding[1])?]);
            same_as_forward(op, gy, &forward)
        }
    }
}

/// The output shape of a convolution of `x` by `w`.
fn conv_out(x: &Shape, w: &Shape, stride: [usize; 2], padding: [usize; 2]) -> Result<Shape, String> {
    let len = |n: usize, k: usize, s: usize, p: usize| {
        (n + 2 * p).checked_sub(k).map(|r| r / s + 1).ok_or_else(|| format!("window {k} is larger than the padded input {}", n + 2 * p))
    };
    Ok(Shape::new(&[x[0], w[0], len(x[2], w[2], stride[0], padding[0])?, len(x[3], w[3], stride[1], padding[1])?]))
}

fn same_as_forward(op: &ConvOp, gy: &Shape, forward: &Shape) -> Result<(), String> {
    match gy == forward {
        true => Ok(()),
        false => Err(format!("{} is given a gradient {gy} for a forward output {forward}", Op::Conv(op.clone()).name())),
    }
}

fn need_rank4(shapes: &[&Shape]) -> Result<(), String> {
    match shapes.iter().all(|s| s.rank() == 4) {
        true => Ok(()),
        false => Err("the inputs must be 4-d (NCHW)".to_string()),
    }
}

/// The gradient ops (`sum_to`, `index_add`, `scatter_add`, the convolution and pooling
/// gradients) are checked here against their forward op when their inputs' shapes are all
/// known. With dims unknown in the trace (a relaxed batch), their shape rules check the same
/// where dims are known, at load, and again on the call's shapes before the kernel runs (a
/// graph with unknown dims checks every op's shape rule as it runs).
fn all_known(inputs: &[TypeRef]) -> bool {
    inputs.iter().all(|t| t.shape.is_known())
}

/// Checks a `tprint!` placeholder's size limits.
pub(super) fn check_format(width: Option<usize>, precision: Option<usize>) -> Result<(), String> {
    match width.unwrap_or(0).max(precision.unwrap_or(0)) <= MAX_FORMAT_WIDTH {
        true => Ok(()),
        false => Err(format!("a tprint! placeholder asks for more than {MAX_FORMAT_WIDTH} characters")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::math::{BinaryOp, ReduceOp};

    fn t(dtype: DType, shape: &Shape) -> TypeRef<'_> {
        TypeRef { dtype, shape }
    }

    #[test]
    fn input_counts_and_attributes_out_of_range_are_named() {
        let (x, w) = (Shape::new(&[1, 1, 4, 4]), Shape::new(&[2, 1, 3, 3]));
        let add = Op::Elementwise(ElementwiseOp::Binary(BinaryOp::Add));
        assert_eq!(check_op(&add, &[t(DType::F32, &x)]).unwrap_err(), "add takes 2 inputs, not 1");
        let sum = Op::Reduction(ReductionOp::Reduce { op: ReduceOp::Sum, axes: [1, 4].into_iter().collect(), keepdim: false });
        assert_eq!(check_op(&sum, &[t(DType::F32, &x)]).unwrap_err(), "axis 4 is out of range for rank 4");
        let softmax = Op::Nn(NnOp::Softmax { axis: 9 });
        assert!(check_op(&softmax, &[t(DType::F32, &x)]).is_err());
        let grad = Op::Conv(ConvOp::Conv2dInputGrad { stride: [1, 1], padding: [0, 0], input_hw: [5, 5] });
        let gy = Shape::new(&[1, 2, 2, 2]);
        assert!(check_op(&grad, &[t(DType::F32, &gy), t(DType::F32, &w)]).unwrap_err().contains("forward output [1, 2, 3, 3]"));
        let ok = Op::Conv(ConvOp::Conv2dInputGrad { stride: [1, 1], padding: [0, 0], input_hw: [4, 4] });
        assert!(check_op(&ok, &[t(DType::F32, &gy), t(DType::F32, &w)]).is_ok());
        let concat = Op::Layout(LayoutOp::Concat { axis: 0 });
        assert_eq!(check_op(&concat, &[]).unwrap_err(), "concat takes 1 or more inputs, not 0");
    }

    /// With a relaxed batch the gradient ops load; their shape rules check each call's
    /// shapes against the forward op's before a kernel could read past a buffer.
    #[test]
    fn gradient_ops_with_unknown_dims_load_and_their_shape_rules_check_each_call() {
        let (f, i, u) = (DType::F32, DType::I64, UNKNOWN);
        let s = |d: &[usize]| Shape::new(d);
        // (op, the traced input types, a call's consistent shapes, a call's inconsistent ones)
        type Case = (Op, Vec<(DType, Shape)>, Vec<Shape>, Vec<Shape>);
        let cases: Vec<Case> = vec![
            (
                Op::Conv(ConvOp::MaxPool2dGrad { kernel: [2, 2], stride: [2, 2], padding: [0, 0] }),
                vec![(f, s(&[u, 6, 4, 4])), (f, s(&[u, 6, 2, 2]))],
                vec![s(&[3, 6, 4, 4]), s(&[3, 6, 2, 2])],
                vec![s(&[3, 6, 4, 4]), s(&[2, 6, 2, 2])],
            ),
            (
                Op::Conv(ConvOp::Conv2dWeightGrad { stride: [1, 1], padding: [0, 0], kernel_hw: [3, 3] }),
                vec![(f, s(&[u, 1, 5, 5])), (f, s(&[u, 2, 3, 3]))],
                vec![s(&[4, 1, 5, 5]), s(&[4, 2, 3, 3])],
                vec![s(&[4, 1, 5, 5]), s(&[5, 2, 3, 3])],
            ),
            (
                Op::Conv(ConvOp::Conv2dInputGrad { stride: [1, 1], padding: [0, 0], input_hw: [5, 5] }),
                vec![(f, s(&[u, 2, 3, 3])), (f, s(&[2, 1, 3, 3]))],
                vec![s(&[4, 2, 3, 3]), s(&[2, 1, 3, 3])],
                vec![s(&[4, 2, 3, 4]), s(&[2, 1, 3, 3])],
            ),
            (Op::Layout(LayoutOp::SumTo(s(&[120]))), vec![(f, s(&[u, 120]))], vec![s(&[7, 120])], vec![s(&[7, 121])]),
            (
                Op::Index(IndexOp::IndexAdd { axis: 0, size: 10 }),
                vec![(f, s(&[u, 4])), (i, s(&[u]))],
                vec![s(&[3, 4]), s(&[3])],
                vec![s(&[3, 4]), s(&[2])],
            ),
            (
                Op::Index(IndexOp::ScatterAdd { axis: 1, size: 5 }),
                vec![(f, s(&[u, 3])), (i, s(&[u, 3]))],
                vec![s(&[2, 3]), s(&[2, 3])],
                vec![s(&[2, 3]), s(&[3, 3])],
            ),
        ];
        for (op, traced, good, bad) in &cases {
            // The op's shape rule on the traced dtypes and the given shapes.
            let infer = |shapes: &[Shape]| {
                let types: Vec<TypeRef> = traced.iter().zip(shapes).map(|((d, _), s)| t(*d, s)).collect();
                op.infer(&types).map(|_| ())
            };
            let traced_shapes: Vec<Shape> = traced.iter().map(|(_, s)| s.clone()).collect();
            let traced_types: Vec<TypeRef> = traced.iter().map(|(d, s)| t(*d, s)).collect();
            assert_eq!(check_op(op, &traced_types), Ok(()), "{} loads with unknown dims", op.name());
            assert!(infer(&traced_shapes).is_ok(), "{} validates with unknown dims", op.name());
            assert!(infer(good).is_ok(), "{} runs on consistent shapes", op.name());
            assert!(infer(bad).is_err(), "{} refuses {bad:?}", op.name());
        }
    }

    #[test]
    fn sizes_are_bounded_without_overflow() {
        assert!(check_value(DType::F32, &Shape::new(&[1 << 20, 1 << 20])).is_err());
        assert!(check_value(DType::F64, &Shape::new(&[usize::MAX / 2, 4])).is_err());
        assert!(check_value(DType::F32, &Shape::new(&[UNKNOWN, 784])).is_ok());
        assert_eq!(known_numel(&Shape::new(&[usize::MAX / 2, 3])), None);
        assert!(check_format(Some(1 << 40), None).is_err());
    }
}
