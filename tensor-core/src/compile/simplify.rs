//! Algebraic simplification that keeps every bit: `x * 1`, `x / 1`, `x - 0`, integer `x ^ 1`
//! and `x + 0`, and float `x + (-0.0)` become `x` (float `x + 0.0` is not `x` when `x` is -0.0,
//! and float `x ^ 1` not when `x` is a negative NaN, so they stay); `-(-x)` is `x`; a reshape of a reshape is one reshape; a permute of a permute is
//! one permute, and the identity permute, a reshape or broadcast to the same shape vanish.

use super::pass::{substitute, use_counts, Pass};
use crate::dtype::Scalar;
use crate::graph::{Graph, NodeKind, ValueId};
use crate::ops::{Axes, BinaryOp, ElementwiseOp, LayoutOp, Op, UnaryOp};
use std::collections::HashMap;

/// Algebraic simplification.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::compile::{Pass, Simplify};
/// use tensor_core::function::ConcreteFunction;
/// let x = Tensor::ones(&[2], DType::F32);
/// let f = ConcreteFunction::trace_with_shapes("f", &[("x", &x)], &[x.shape()], false, || Ok(vec![x.mul(1.0)?.neg()?.neg()?]))?;
/// let mut g = f.traced_graph().clone();
/// assert!(Simplify.run(&mut g));
/// assert_eq!(g.outputs[0], g.inputs[0].0); // `-(-(x * 1))` is `x`
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub struct Simplify;

/// What a node simplifies to.
enum Rewrite {
    /// Its output is this value.
    Forward(ValueId),
    /// It becomes this op on these inputs.
    Replace(Op, Vec<ValueId>),
}

impl Pass for Simplify {
    fn name(&self) -> &'static str {
        "simplify"
    }

    fn run(&self, g: &mut Graph) -> bool {
        let producer: HashMap<ValueId, usize> = g.nodes.iter().enumerate().flat_map(|(i, n)| n.outputs.iter().map(move |&v| (v, i))).collect();
        let uses = use_counts(g);
        let mut map = HashMap::new();
        let mut replaced = Vec::new();
        for (i, node) in g.nodes.iter().enumerate() {
            let NodeKind::Op(op) = &node.kind else { continue };
            // A node nothing reads is left for dead-code elimination.
            if uses[node.outputs[0]] == 0 {
                continue;
            }
            let input_op = |k: usize| {
                producer.get(&node.inputs[k]).and_then(|&p| match &g.nodes[p].kind {
                    NodeKind::Op(o) => Some((o, g.nodes[p].inputs[0])),
                    _ => None,
                })
            };
            match rewrite(g, op, &node.inputs, node.outputs[0], input_op) {
                Some(Rewrite::Forward(v)) => {
                    map.insert(node.outputs[0], v);
                }
                Some(Rewrite::Replace(op, inputs)) => replaced.push((i, op, inputs)),
                None => {}
            }
        }
        let changed = !map.is_empty() || !replaced.is_empty();
        for (i, op, inputs) in replaced {
            g.nodes[i].kind = NodeKind::Op(op);
            g.nodes[i].inputs = inputs.into();
        }
        substitute(g, &map);
        changed
    }
}

fn rewrite<'a>(g: &Graph, op: &Op, inputs: &[ValueId], out: ValueId, input_op: impl Fn(usize) -> Option<(&'a Op, ValueId)>) -> Option<Rewrite> {
    let x = inputs[0];
    let same_shape =
        |v: ValueId| g.values[v].shape == g.values[out].shape && g.values[v].shape.is_known() && g.values[v].dtype == g.values[out].dtype;
    match op {
        // With the scalar first only the commutative ops keep their identities (`1 / x` is not x).
        Op::Elementwise(ElementwiseOp::BinaryScalar { op: b, scalar, scalar_first })
            if (!scalar_first || matches!(b, BinaryOp::Add | BinaryOp::Mul)) && is_identity(*b, scalar.0, g.values[x].dtype.is_float()) =>
        {
            Some(Rewrite::Forward(x))
        }
        Op::Elementwise(ElementwiseOp::Unary(UnaryOp::Neg)) => match input_op(0) {
            Some((Op::Elementwise(ElementwiseOp::Unary(UnaryOp::Neg)), inner)) => Some(Rewrite::Forward(inner)),
            _ => None,
        },
        Op::Layout(LayoutOp::Reshape(spec)) => {
            if same_shape(x) {
                return Some(Rewrite::Forward(x));
            }
            match input_op(0) {
                Some((Op::Layout(LayoutOp::Reshape(_)), inner)) => {
                    // The outer spec may infer a dim (-1) from a size the inner reshape fixed
                    // but `inner` leaves unknown; its known output dims say the same exactly.
                    let out_shape = &g.values[out].shape;
                    let spec = if out_shape.is_known() { out_shape.dims().iter().map(|&d| d as isize).collect() } else { spec.clone() };
                    Some(Rewrite::Replace(LayoutOp::Reshape(spec).into(), vec![inner]))
                }
                _ => None,
            }
        }
        Op::Layout(LayoutOp::Permute(p)) => {
            if p.iter().enumerate().all(|(i, &a)| i == a) {
                return Some(Rewrite::Forward(x));
            }
            match input_op(0) {
                Some((Op::Layout(LayoutOp::Permute(q)), inner)) => {
                    let composed: Axes = p.iter().map(|&a| q[a]).collect();
                    Some(Rewrite::Replace(LayoutOp::Permute(composed).into(), vec![inner]))
                }
                _ => None,
            }
        }
        Op::Layout(LayoutOp::BroadcastTo(_) | LayoutOp::SumTo(_)) if same_shape(x) => Some(Rewrite::Forward(x)),
        Op::Elementwise(ElementwiseOp::Cast(d)) if g.values[x].dtype == *d => Some(Rewrite::Forward(x)),
        _ => None,
    }
}

/// True when `x op s == x` bit for bit for every `x` (of a float dtype if `float`).
fn is_identity(op: BinaryOp, s: Scalar, float: bool) -> bool {
    let v = s.as_f64();
    let negative_zero = matches!(s, Scalar::Float(f) if f == 0.0 && f.is_sign_negative());
    match op {
        BinaryOp::Mul | BinaryOp::Div => v == 1.0,
        // A float `x ^ 1` is `powf(x, 1)`, which gives a NaN without `x`'s sign (-NaN ^ 1
        // is +NaN); integer powers are exact.
        BinaryOp::Pow => v == 1.0 && !float,
        BinaryOp::Sub => v == 0.0 && !negative_zero,
        BinaryOp::Add => v == 0.0 && (negative_zero || !float),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compile::tests::{assert_same, traced};
    use crate::compile::Dce;
    use crate::prelude::*;

    #[test]
    fn removes_identities_and_merges_layout_ops() -> Result<()> {
        let x = Tensor::from_vec(vec![-0.0f32, 1.5, -2.0, 3.0, 0.0, 7.0], &[2, 3])?;
        let mut g = traced(&[&x], || {
            let a = x.mul(1.0)?.div(1.0)?.sub(0.0)?.add(-0.0)?.neg()?.neg()?;
            let b = a.reshape([3, 2])?.reshape([6])?.reshape([2, 3])?;
            let c = b.transpose(0, 1)?.transpose(0, 1)?;
            let kept = c.add(0.0)?; // -0.0 + 0.0 is +0.0: not an identity
            Ok(vec![kept])
        });
        let before = g.clone();
        while Simplify.run(&mut g) {}
        Dce.run(&mut g);
        assert_eq!(g.nodes.len(), 1, "{}", g.to_text());
        assert_eq!(g.count_op("add"), 1);
        assert_same(&before, &g, &[&x]);
        Ok(())
    }

    #[test]
    fn identity_table_keeps_bits() {
        assert!(is_identity(BinaryOp::Add, Scalar::Float(-0.0), true));
        assert!(!is_identity(BinaryOp::Add, Scalar::Float(0.0), true));
        assert!(is_identity(BinaryOp::Add, Scalar::Int(0), false));
        assert!(is_identity(BinaryOp::Sub, Scalar::Float(0.0), true));
        assert!(!is_identity(BinaryOp::Sub, Scalar::Float(-0.0), true));
        assert!(is_identity(BinaryOp::Mul, Scalar::Int(1), false));
        assert!(!is_identity(BinaryOp::Pow, Scalar::Float(1.0), true));
        assert!(is_identity(BinaryOp::Pow, Scalar::Int(1), false));
    }
}
