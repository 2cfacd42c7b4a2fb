//! Each op as ONNX nodes (opset 17). An op without a mapping (the gradient-only ops) is an
//! `Err` naming it.

use super::builder::{int, ints, string, Builder};
use crate::dtype::{DType, Scalar};
use crate::error::{Error, Result};
use crate::graph::ValueId;
use crate::math::{BinaryOp, CmpOp, ElementwiseOp, ReduceOp, UnaryOp};
use crate::ops::{ConvOp, Family, IndexOp, LayoutOp, LinalgOp, NnOp, Op, ReductionOp};
use crate::shape::UNKNOWN;

/// Adds the nodes computing op node `op` from `inputs` into `out`.
pub(super) fn map_op(b: &mut Builder, op: &Op, inputs: &[ValueId], out: ValueId) -> Result<()> {
    let ins: Vec<String> = inputs.iter().map(|&v| b.name(v)).collect();
    let y = b.name(out);
    match op {
        Op::Elementwise(e) => elementwise(b, e, ins, y, b.g.values[inputs[0]].dtype),
        Op::Reduction(r) => reduction(b, r, ins, y, b.g.values[inputs[0]].shape.rank()),
        Op::Layout(l) => layout(b, l, inputs, ins, y, out),
        Op::Index(i) => index(b, i, ins, y),
        Op::Linalg(LinalgOp::Matmul { transpose_a, transpose_b }) => {
            let a = transposed_if(b, *transpose_a, ins[0].clone(), inputs[0]);
            let rhs = transposed_if(b, *transpose_b, ins[1].clone(), inputs[1]);
            b.node("MatMul", vec![a, rhs], vec![y], vec![]);
            Ok(())
        }
        Op::Nn(n) => nn(b, n, ins, y),
        Op::Conv(c) => conv(b, c, inputs, ins, y),
        Op::Random(r) => Err(unsupported(r.name(), " (a draw from a generator: export an inference graph, with dropout off)")),
        Op::Collective(c) => Err(unsupported(c.name(), " (a collective across processes: export the forward pass of one rank)")),
        Op::SymShape(_) => Err(unsupported(op.name(), " with sizes computed from symbolic dims (trace with known shapes to export)")),
    }
}

/// `x` with its last two dims swapped by a Transpose node when `flag` is set (a matmul's
/// transposed operand: ONNX's MatMul has no flags, and Gemm takes only 2-d operands).
fn transposed_if(b: &mut Builder, flag: bool, x: String, v: ValueId) -> String {
    if !flag {
        return x;
    }
    let rank = b.g.values[v].shape.rank();
    let mut perm: Vec<usize> = (0..rank).collect();
    perm.swap(rank - 2, rank - 1);
    let out = b.fresh("transposed");
    b.node("Transpose", vec![x], vec![out.clone()], vec![ints("perm", &perm)]);
    out
}

fn unsupported(op: &str, detail: &str) -> Error {
    Error::OnnxUnsupported { op: op.to_string(), detail: detail.to_string() }
}

fn unary_name(u: UnaryOp) -> &'static str {
    match u {
        UnaryOp::Neg => "Neg",
        UnaryOp::Exp => "Exp",
        UnaryOp::Log => "Log",
        UnaryOp::Sqrt => "Sqrt",
        UnaryOp::Tanh => "Tanh",
        UnaryOp::Sigmoid => "Sigmoid",
        UnaryOp::Relu => "Relu",
        UnaryOp::Abs => "Abs",
        UnaryOp::Sign => "Sign",
        UnaryOp::Not => "Not",
        UnaryOp::Erf => "Erf",
        UnaryOp::Sin => "Sin",
        UnaryOp::Cos => "Cos",
        UnaryOp::Floor => "Floor",
        UnaryOp::Ceil => "Ceil",
        UnaryOp::Round => "Round",
        UnaryOp::Trunc => "Trunc",
        UnaryOp::Asin => "Asin",
        UnaryOp::Acos => "Acos",
        UnaryOp::Atan => "Atan",
        UnaryOp::Asinh => "Asinh",
        UnaryOp::Acosh => "Acosh",
        UnaryOp::Atanh => "Atanh",
        UnaryOp::GeluTanh | UnaryOp::GeluErf => unreachable!("GELU is composed (opset 17 has no Gelu)"),
    }
}

/// `fresh = op(a, scalar)`, returning `fresh`.
fn with_scalar(b: &mut Builder, op: &str, a: String, v: f64, dtype: DType) -> String {
    let (s, out) = (b.scalar(Scalar::Float(v), dtype), b.fresh("gelu"));
    b.node(op, vec![a, s], vec![out.clone()], vec![]);
    out
}

/// `y = 0.5 x (1 + t)`, the last steps of both GELU forms.
fn gelu_tail(b: &mut Builder, x: String, t: String, y: String, dtype: DType) {
    let one_plus = with_scalar(b, "Add", t, 1.0, dtype);
    let times_x = b.fresh("gelu");
    b.node("Mul", vec![x, one_plus], vec![times_x.clone()], vec![]);
    let half = b.scalar(Scalar::Float(0.5), dtype);
    b.node("Mul", vec![times_x, half], vec![y], vec![]);
}

/// GELU, exact form, from ONNX operators: `0.5 x (1 + erf(x / sqrt(2)))`.
fn gelu_erf(b: &mut Builder, x: String, y: String, dtype: DType) {
    let scaled = with_scalar(b, "Mul", x.clone(), std::f64::consts::FRAC_1_SQRT_2, dtype);
    let erf = b.fresh("gelu");
    b.node("Erf", vec![scaled], vec![erf.clone()], vec![]);
    gelu_tail(b, x, erf, y, dtype);
}

/// GELU, tanh form, from ONNX operators: `0.5 x (1 + tanh(k (x + c x^3)))`.
fn gelu_tanh(b: &mut Builder, x: String, y: String, dtype: DType) {
    let (sq, cube, sum) = (b.fresh("gelu"), b.fresh("gelu"), b.fresh("gelu"));
    b.node("Mul", vec![x.clone(), x.clone()], vec![sq.clone()], vec![]);
    b.node("Mul", vec![sq, x.clone()], vec![cube.clone()], vec![]);
    let c_cube = with_scalar(b, "Mul", cube, crate::math::GELU_C, dtype);
    b.node("Add", vec![x.clone(), c_cube], vec![sum.clone()], vec![]);
    let inner = with_scalar(b, "Mul", sum, crate::math::GELU_K, dtype);
    let tanh = b.fresh("gelu");
    b.node("Tanh", vec![inner], vec![tanh.clone()], vec![]);
    gelu_tail(b, x, tanh, y, dtype);
}

fn binary_name(op: BinaryOp) -> &'static str {
    match op {
        BinaryOp::Add => "Add",
        BinaryOp::Sub => "Sub",
        BinaryOp::Mul => "Mul",
        BinaryOp::Div => "Div",
        BinaryOp::Pow => "Pow",
        BinaryOp::Maximum => "Max",
        BinaryOp::Minimum => "Min",
        BinaryOp::Fmod => "Mod",
    }
}

/// `fmod` is ONNX's Mod with `fmod` 1 (the sign of the dividend); the others take none.
fn binary_attrs(op: BinaryOp) -> Vec<super::proto::AttributeProto> {
    if op == BinaryOp::Fmod {
        vec![int("fmod", 1)]
    } else {
        vec![]
    }
}

/// A comparison `a op b` into `y` (`ne` is `Not(Equal)`).
fn compare(b: &mut Builder, op: CmpOp, lhs: String, rhs: String, y: String) {
    let name = match op {
        CmpOp::Eq | CmpOp::Ne => "Equal",
        CmpOp::Lt => "Less",
        CmpOp::Le => "LessOrEqual",
        CmpOp::Gt => "Greater",
        CmpOp::Ge => "GreaterOrEqual",
    };
    if op == CmpOp::Ne {
        let eq = b.fresh("eq");
        b.node(name, vec![lhs, rhs], vec![eq.clone()], vec![]);
        b.node("Not", vec![eq], vec![y], vec![]);
    } else {
        b.node(name, vec![lhs, rhs], vec![y], vec![]);
    }
}

fn elementwise(b: &mut Builder, e: &ElementwiseOp, ins: Vec<String>, y: String, dtype: DType) -> Result<()> {
    match e {
        ElementwiseOp::Unary(UnaryOp::GeluTanh) => gelu_tanh(b, ins[0].clone(), y, dtype),
        ElementwiseOp::Unary(UnaryOp::GeluErf) => gelu_erf(b, ins[0].clone(), y, dtype),
        ElementwiseOp::Unary(u) => b.node(unary_name(*u), ins, vec![y], vec![]),
        ElementwiseOp::Binary(op) => {
            if *op == BinaryOp::Div && dtype.is_int() {
                return Err(unsupported("div", " for integers (tensor-core gives 0 for a zero divisor, ONNX leaves it undefined)"));
            }
            b.node(binary_name(*op), ins, vec![y], binary_attrs(*op))
        }
        ElementwiseOp::BinaryScalar { op, scalar, scalar_first } => {
            if *op == BinaryOp::Div && dtype.is_int() {
                return Err(unsupported("div", " for integers (tensor-core gives 0 for a zero divisor, ONNX leaves it undefined)"));
            }
            let s = b.scalar(scalar.0, dtype);
            let x = ins[0].clone();
            let pair = if *scalar_first { vec![s, x] } else { vec![x, s] };
            b.node(binary_name(*op), pair, vec![y], binary_attrs(*op));
        }
        ElementwiseOp::Compare(op) => compare(b, *op, ins[0].clone(), ins[1].clone(), y),
        ElementwiseOp::CompareScalar { op, scalar } => {
            let s = b.scalar(scalar.0, dtype);
            compare(b, *op, ins[0].clone(), s, y);
        }
        ElementwiseOp::Where => b.node("Where", ins, vec![y], vec![]),
        ElementwiseOp::Clamp { min, max } => {
            let bound = |b: &mut Builder, s: &Option<crate::math::ScalarAttr>| s.map(|s| b.scalar(s.0, dtype)).unwrap_or_default();
            let (lo, hi) = (bound(b, min), bound(b, max));
            b.node("Clip", vec![ins[0].clone(), lo, hi], vec![y], vec![]);
        }
        ElementwiseOp::Cast(to) => b.node("Cast", ins, vec![y], vec![int("to", super::builder::elem_type(*to) as i64)]),
    }
    Ok(())
}

fn reduction(b: &mut Builder, r: &ReductionOp, ins: Vec<String>, y: String, rank: usize) -> Result<()> {
    match r {
        ReductionOp::Reduce { axes, .. } if axes.is_empty() => b.node("Identity", ins, vec![y], vec![]),
        ReductionOp::Reduce { op, axes, keepdim } => {
            let keep = int("keepdims", *keepdim as i64);
            match op {
                // Opset 13 moved ReduceSum's axes to an input; the others follow in opset 18.
                ReduceOp::Sum => {
                    let axes = b.i64s(&axes.iter().map(|&a| a as i64).collect::<Vec<_>>());
                    b.node("ReduceSum", vec![ins[0].clone(), axes], vec![y], vec![keep]);
                }
                ReduceOp::Mean => b.node("ReduceMean", ins, vec![y], vec![ints("axes", axes), keep]),
                ReduceOp::Max => b.node("ReduceMax", ins, vec![y], vec![ints("axes", axes), keep]),
                ReduceOp::Min => b.node("ReduceMin", ins, vec![y], vec![ints("axes", axes), keep]),
                ReduceOp::Prod => b.node("ReduceProd", ins, vec![y], vec![ints("axes", axes), keep]),
            }
        }
        ReductionOp::Argmax { axis, keepdim } => {
            debug_assert!(*axis < rank);
            b.node("ArgMax", ins, vec![y], vec![int("axis", *axis as i64), int("keepdims", *keepdim as i64)]);
        }
    }
    Ok(())
}

fn layout(b: &mut Builder, l: &LayoutOp, inputs: &[ValueId], ins: Vec<String>, y: String, out: ValueId) -> Result<()> {
    let out_shape = b.g.values[out].shape.clone();
    let x_shape = b.g.values[inputs[0]].shape.clone();
    match l {
        LayoutOp::Reshape(spec) => {
            // The traced output shape when known (no -1 to resolve), else the requested dims.
            let dims: Vec<i64> = match out_shape.is_known() {
                true => out_shape.dims().iter().map(|&d| d as i64).collect(),
                false => spec.iter().map(|&d| d as i64).collect(),
            };
            let allow_zero = dims.contains(&0) as i64;
            let shape = b.i64s(&dims);
            b.node("Reshape", vec![ins[0].clone(), shape], vec![y], vec![int("allowzero", allow_zero)]);
        }
        LayoutOp::Permute(perm) => b.node("Transpose", ins, vec![y], vec![ints("perm", perm)]),
        LayoutOp::BroadcastTo(target) => {
            // Expand broadcasts a 1 against the input's dim: an unknown target dim stays as is.
            let dims: Vec<i64> = target.dims().iter().map(|&d| if d == UNKNOWN { 1 } else { d as i64 }).collect();
            let shape = b.i64s(&dims);
            b.node("Expand", vec![ins[0].clone(), shape], vec![y], vec![]);
        }
        LayoutOp::SumTo(target) => {
            if !x_shape.is_known() || !target.is_known() {
                return Err(unsupported("sum_to", " with unknown dims"));
            }
            let lead = x_shape.rank() - target.rank();
            let axes: Vec<i64> = (0..x_shape.rank()).filter(|&d| d < lead || (target[d - lead] == 1 && x_shape[d] != 1)).map(|d| d as i64).collect();
            let summed = b.fresh("summed");
            let axes = b.i64s(&axes);
            b.node("ReduceSum", vec![ins[0].clone(), axes], vec![summed.clone()], vec![int("keepdims", 1)]);
            let shape = b.i64s(&target.dims().iter().map(|&d| d as i64).collect::<Vec<_>>());
            b.node("Reshape", vec![summed, shape], vec![y], vec![]);
        }
        LayoutOp::Concat { axis } => b.node("Concat", ins, vec![y], vec![int("axis", *axis as i64)]),
        LayoutOp::Narrow { axis, start, len } => {
            let (starts, ends, axes) = (b.i64s(&[*start as i64]), b.i64s(&[(*start + *len) as i64]), b.i64s(&[*axis as i64]));
            b.node("Slice", vec![ins[0].clone(), starts, ends, axes], vec![y], vec![]);
        }
        LayoutOp::Pad { axis, before, after } => {
            let rank = x_shape.rank();
            let mut pads = vec![0i64; 2 * rank];
            pads[*axis] = *before as i64;
            pads[rank + *axis] = *after as i64;
            let pads = b.i64s(&pads);
            b.node("Pad", vec![ins[0].clone(), pads], vec![y], vec![string("mode", "constant")]);
        }
    }
    Ok(())
}

fn index(b: &mut Builder, i: &IndexOp, ins: Vec<String>, y: String) -> Result<()> {
    match i {
        IndexOp::IndexSelect { axis } => b.node("Gather", ins, vec![y], vec![int("axis", *axis as i64)]),
        IndexOp::Gather { axis } => b.node("GatherElements", ins, vec![y], vec![int("axis", *axis as i64)]),
        IndexOp::OneHot { classes, dtype } => {
            let depth = b.i64s(&[*classes as i64]);
            let values = crate::storage::Storage::full(&crate::shape::Shape::new(&[2]), *dtype, crate::dtype::Scalar::Int(0));
            let values = crate::storage::map_array!(&values, a => {
                let mut a = a.clone();
                a[[1]] = crate::storage::Element::one();
                a
            });
            let name = b.fresh("one_hot_values");
            let values = b.initializer(name, &values);
            b.node("OneHot", vec![ins[0].clone(), depth, values], vec![y], vec![int("axis", -1)]);
        }
        // ONNX's TopK gives values and indices; the op is the indices (its values are a
        // `gather` of their own).
        IndexOp::TopK { axis, k, largest } => {
            let (count, values) = (b.i64s(&[*k as i64]), b.fresh("topk_values"));
            let attrs = vec![int("axis", *axis as i64), int("largest", *largest as i64), int("sorted", 1)];
            b.node("TopK", vec![ins[0].clone(), count], vec![values, y], attrs);
        }
        IndexOp::IndexAdd { .. } | IndexOp::ScatterAdd { .. } => {
            return Err(unsupported(crate::ops::Op::Index(i.clone()).name(), " (a gradient op; export the forward pass)"))
        }
    }
    Ok(())
}

fn nn(b: &mut Builder, n: &NnOp, ins: Vec<String>, y: String) -> Result<()> {
    match n {
        NnOp::Softmax { axis } => b.node("Softmax", ins, vec![y], vec![int("axis", *axis as i64)]),
        NnOp::LogSoftmax { axis } => b.node("LogSoftmax", ins, vec![y], vec![int("axis", *axis as i64)]),
        // -mean(log_softmax(logits)[i, label_i]) in operators every runtime has (tract, for
        // one, lacks SoftmaxCrossEntropyLoss).
        NnOp::CrossEntropy => {
            let (log_probs, column, picked, mean) = (b.fresh("log_probs"), b.fresh("labels"), b.fresh("picked"), b.fresh("mean"));
            b.node("LogSoftmax", vec![ins[0].clone()], vec![log_probs.clone()], vec![int("axis", 1)]);
            let shape = b.i64s(&[-1, 1]);
            b.node("Reshape", vec![ins[1].clone(), shape], vec![column.clone()], vec![]);
            b.node("GatherElements", vec![log_probs, column], vec![picked.clone()], vec![int("axis", 1)]);
            b.node("ReduceMean", vec![picked], vec![mean.clone()], vec![ints("axes", &[0, 1]), int("keepdims", 0)]);
            b.node("Neg", vec![mean], vec![y], vec![]);
        }
    }
    Ok(())
}

fn conv(b: &mut Builder, c: &ConvOp, inputs: &[ValueId], ins: Vec<String>, y: String) -> Result<()> {
    match c {
        ConvOp::Conv2d { stride, padding } => {
            let pads = [padding[0], padding[1], padding[0], padding[1]];
            b.node("Conv", ins, vec![y], vec![ints("strides", stride), ints("pads", &pads)]);
        }
        ConvOp::Depthwise2d { stride, padding, dilation } => {
            let channels = b.g.values[inputs[0]].shape[1];
            if channels == UNKNOWN {
                return Err(unsupported("depthwise2d", " with the input's channels unknown in this trace"));
            }
            let pads = [padding[0], padding[1], padding[0], padding[1]];
            let attrs = vec![ints("strides", stride), ints("pads", &pads), ints("dilations", dilation), int("group", channels as i64)];
            b.node("Conv", ins, vec![y], attrs);
        }
        ConvOp::MaxPool2d { kernel, stride, padding } => {
            let pads = [padding[0], padding[1], padding[0], padding[1]];
            b.node("MaxPool", ins, vec![y], vec![ints("kernel_shape", kernel), ints("strides", stride), ints("pads", &pads)]);
        }
        // `conv_transpose2d`: the output size its attributes give, made up to `input_hw`
        // by ONNX's `output_padding`.
        ConvOp::Conv2dInputGrad { stride, padding, input_hw } => {
            let (gy, w) = (&b.g.values[inputs[0]].shape, &b.g.values[inputs[1]].shape);
            let mut extra = [0; 2];
            for i in 0..2 {
                let full = (gy[2 + i] != UNKNOWN).then(|| (gy[2 + i] - 1) * stride[i] + w[2 + i]).and_then(|n| n.checked_sub(2 * padding[i]));
                extra[i] = full
                    .and_then(|n| input_hw[i].checked_sub(n))
                    .ok_or_else(|| unsupported("conv_transpose2d", " with an input size unknown in this trace"))?;
            }
            let pads = [padding[0], padding[1], padding[0], padding[1]];
            let attrs = vec![ints("strides", stride), ints("pads", &pads), ints("output_padding", &extra)];
            b.node("ConvTranspose", ins, vec![y], attrs);
        }
        other => return Err(unsupported(Op::Conv(other.clone()).name(), " (a gradient op; export the forward pass)")),
    }
    Ok(())
}
