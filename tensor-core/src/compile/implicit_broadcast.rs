//! Implicit broadcasts: an elementwise op that reads `broadcast_to(x)` reads `x` instead when
//! broadcasting `x` with its other operands gives the op's output shape anyway — the op
//! broadcasts it itself, by indexing, so no copy of the broadcast is made. The gradient of a
//! sum or mean over an axis (`g.broadcast_to(..)`, as in LayerNorm's backward) is the case
//! this is for: the broadcast was a full-size copy of a value one element per row.
//!
//! Why this keeps bits: an elementwise op computes each output element from the operand
//! elements at the broadcast index; reading `x` there is reading the very element the copy
//! held. A `broadcast_to` no one reads any more is left for dead-code elimination.

use super::pass::Pass;
use crate::graph::{Graph, NodeKind, ValueId};
use crate::ops::{ElementwiseOp, LayoutOp, Op};
use crate::shape::{broadcast_shapes, Shape};
use std::collections::HashMap;

/// Elementwise ops read broadcast operands without the `broadcast_to` copy.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::compile::{ImplicitBroadcast, Pass};
/// use tensor_core::function::ConcreteFunction;
/// let (x, row) = (Tensor::ones(&[2, 3], DType::F32), Tensor::ones(&[2, 1], DType::F32));
/// let f = ConcreteFunction::trace_with_shapes("f", &[("x", &x), ("row", &row)], &[x.shape(), row.shape()], false, || {
///     Ok(vec![x.add(&row.broadcast_to(&[2, 3])?)?])
/// })?;
/// let mut g = f.traced_graph().clone();
/// assert!(ImplicitBroadcast.run(&mut g));
/// assert!(g.to_text().contains("add(x, row)"), "{}", g.to_text());
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub struct ImplicitBroadcast;

impl Pass for ImplicitBroadcast {
    fn name(&self) -> &'static str {
        "implicit_broadcast"
    }

    fn run(&self, g: &mut Graph) -> bool {
        let sources = broadcast_sources(g);
        if sources.is_empty() {
            return false;
        }
        let mut changed = false;
        for i in 0..g.nodes.len() {
            if !broadcasts_its_operands(&g.nodes[i].kind) {
                continue;
            }
            for k in 0..g.nodes[i].inputs.len() {
                let Some(&source) = sources.get(&g.nodes[i].inputs[k]) else { continue };
                let mut inputs = g.nodes[i].inputs.clone();
                inputs[k] = source;
                if broadcast_of(g, &inputs).as_ref() == Some(&g.values[g.nodes[i].outputs[0]].shape) {
                    g.nodes[i].inputs = inputs;
                    changed = true;
                }
            }
        }
        changed
    }
}

/// Each `broadcast_to` output with fully known shapes, and the value it broadcasts.
fn broadcast_sources(g: &Graph) -> HashMap<ValueId, ValueId> {
    g.nodes
        .iter()
        .filter(|n| matches!(n.kind, NodeKind::Op(Op::Layout(LayoutOp::BroadcastTo(_)))))
        .filter(|n| g.values[n.inputs[0]].shape.is_known() && g.values[n.outputs[0]].shape.is_known())
        .map(|n| (n.outputs[0], n.inputs[0]))
        .collect()
}

/// Ops whose operands broadcast against each other to the output's shape (NumPy's rules).
fn broadcasts_its_operands(kind: &NodeKind) -> bool {
    matches!(kind, NodeKind::Op(Op::Elementwise(ElementwiseOp::Binary(_) | ElementwiseOp::Compare(_) | ElementwiseOp::Where)))
}

/// The shape `inputs` broadcast to together, if all are known and they do.
fn broadcast_of(g: &Graph, inputs: &[ValueId]) -> Option<Shape> {
    let mut shape = Shape::scalar();
    for &v in inputs {
        let s = &g.values[v].shape;
        if !s.is_known() {
            return None;
        }
        shape = broadcast_shapes(&shape, s)?;
    }
    Some(shape)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compile::tests::{assert_same, body, traced};
    use crate::compile::{Dce, Fuse};
    use crate::prelude::*;

    /// The shape of a mean's gradient in LayerNorm's backward: a per-row value broadcast to the
    /// rows, added to a full-size gradient. The add reads the per-row value, the copy goes, and
    /// the add joins the elementwise work around it in one fused node.
    #[test]
    fn a_mean_gradient_is_read_broadcast_and_fuses() -> Result<()> {
        let g_full = Tensor::from_vec(vec![1.0f32, -0.0, 0.5, 4.0, -2.0, 3.0], &[2, 3])?;
        let per_row = Tensor::from_vec(vec![-0.0f32, 10.0], &[2, 1])?;
        let mut g = traced(&[&g_full, &per_row], || Ok(vec![g_full.mul(2.0)?.add(&per_row.div(3.0)?.broadcast_to(&[2, 3])?)?.neg()?]));
        let before = g.clone();
        assert_eq!(
            body(&g),
            "  v2: f32[2, 3] = mul[rhs=2.0](a0)\n  v3: f32[2, 1] = div[rhs=3.0](a1)\n  v4: f32[2, 3] = broadcast_to[shape=[2, 3]](v3)\n  \
             v5: f32[2, 3] = add(v2, v4)\n  v6: f32[2, 3] = neg(v5)\n  return (v6)"
        );
        assert!(ImplicitBroadcast.run(&mut g));
        Dce.run(&mut g);
        assert_eq!(
            body(&g),
            "  v2: f32[2, 3] = mul[rhs=2.0](a0)\n  v3: f32[2, 1] = div[rhs=3.0](a1)\n  v5: f32[2, 3] = add(v2, v3)\n  v6: f32[2, 3] = neg(v5)\n  return (v6)"
        );
        assert_same(&before, &g, &[&g_full, &per_row]);
        // By hand: -(2 g + r / 3); row 0 adds -0.0 / 3 = -0.0, so 2 * -0.0 + -0.0 is -0.0 and
        // its negation +0.0, as with the copy.
        let out = crate::compile::Executable::new(&g, false).run(&[&g_full, &per_row])?;
        let want = [-2.0f32, 0.0, -1.0, -(8.0 + 10.0 / 3.0), -(-4.0 + 10.0 / 3.0), -(6.0 + 10.0 / 3.0)];
        let got = out[0].to_vec::<f32>()?;
        assert_eq!(got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), want.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
        Fuse.run(&mut g);
        assert_eq!(g.count_op("fused"), 1, "{}", g.to_text());
        Ok(())
    }

    /// A broadcast stays where the op would not broadcast to its output shape on its own: both
    /// operands per row, a unary op, or a graph output.
    #[test]
    fn keeps_broadcasts_an_op_needs() -> Result<()> {
        let per_row = Tensor::from_vec(vec![1.0f32, 2.0], &[2, 1])?;
        let other = Tensor::from_vec(vec![3.0f32, 4.0], &[2, 1])?;
        let mut g = traced(&[&per_row, &other], || {
            let wide = per_row.broadcast_to(&[2, 3])?;
            Ok(vec![wide.add(&other)?, wide.exp()?, wide.clone()])
        });
        let before = g.to_text();
        assert!(!ImplicitBroadcast.run(&mut g));
        assert_eq!(g.to_text(), before);
        Ok(())
    }

    /// Each operand on its own: `where(c, b1, b2)` with a full-size condition reads both
    /// broadcasts' sources; `b + b` reads the source on one side and the copy on the other
    /// (reading the source on both would give a `[2, 1]` result).
    #[test]
    fn every_operand_that_can_be_read_broadcast_is() -> Result<()> {
        let cond = Tensor::from_vec(vec![true, false, true, false, false, true], &[2, 3])?;
        let (a, b) = (Tensor::from_vec(vec![1.0f64, 2.0], &[2, 1])?, Tensor::from_vec(vec![5.0f64, 6.0, 7.0], &[3])?);
        let mut g = traced(&[&cond, &a, &b], || {
            let (wa, wb) = (a.broadcast_to(&[2, 3])?, b.broadcast_to(&[2, 3])?);
            Ok(vec![Tensor::where_(&cond, &wa, &wb)?, wa.add(&wa)?])
        });
        let before = g.clone();
        assert!(ImplicitBroadcast.run(&mut g));
        Dce.run(&mut g);
        let text = body(&g);
        assert!(text.contains("where(a0, a1, a2)"), "{text}");
        assert_eq!(g.count_op("broadcast_to"), 1, "{text}");
        assert_same(&before, &g, &[&cond, &a, &b]);
        let out = crate::compile::Executable::new(&g, false).run(&[&cond, &a, &b])?;
        assert_eq!(out[0].to_vec::<f64>()?, vec![1.0, 6.0, 1.0, 5.0, 6.0, 2.0]);
        assert_eq!(out[1].to_vec::<f64>()?, vec![2.0, 2.0, 2.0, 4.0, 4.0, 4.0]);
        Ok(())
    }
}
