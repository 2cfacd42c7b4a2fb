//! A sum of zero pads that tile an axis becomes one concat: `pad(a) + pad(b) + pad(c)`, where
//! the pads place `a`, `b` and `c` side by side along one axis, is `concat(a + 0.0, b + 0.0,
//! c + 0.0)`. The gradient of a split (each part's `narrow` has a `pad` as its adjoint, and the
//! parts' gradients are summed) is the case this is for: three full-size pads and a sum of
//! them become three copies of a third the size and one concat.
//!
//! Why this keeps bits: each element of the sum adds one part's value `x` to zeros (`+0.0`,
//! the pads' fill), in whatever order the adds come, and that is `x + 0.0` in every order:
//! `0 + 0` is `+0.0`, and `x + 0`, `0 + x` and `(x + 0) + 0` are all `x` except that `-0.0`
//! becomes `+0.0` and a NaN is quieted. A plain concat would keep `-0.0`; the `+ 0.0`
//! written with the scalar add keeps what the sum gave.

use super::pass::{use_counts, Pass};
use crate::dtype::Scalar;
use crate::graph::{Graph, Node, NodeKind, ValueId};
use crate::math::ScalarAttr;
use crate::ops::{BinaryOp, ElementwiseOp, LayoutOp, Op};
use std::collections::HashMap;

/// Sums of pads that tile an axis become concats.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::compile::{PadSumToConcat, Pass};
/// use tensor_core::graph::{Graph, InputSource, NodeKind};
/// use tensor_core::ops::{BinaryOp, ElementwiseOp, LayoutOp, Op};
/// let mut g = Graph::new("g");
/// g.slot_names.extend(["a".to_string(), "b".to_string()]);
/// g.num_arg_slots = 2;
/// let a = g.add_value(DType::F32, Shape::new(&[2, 1]), Some("a".into()));
/// let b = g.add_value(DType::F32, Shape::new(&[2, 3]), Some("b".into()));
/// g.inputs.extend([(a, InputSource::Data(0)), (b, InputSource::Data(1))]);
/// let pad = |axis, before, after| NodeKind::Op(Op::Layout(LayoutOp::Pad { axis, before, after }));
/// let pa = g.add_node(pad(1, 0, 3), &[a], DType::F32, Shape::new(&[2, 4]));
/// let pb = g.add_node(pad(1, 1, 0), &[b], DType::F32, Shape::new(&[2, 4]));
/// let add = NodeKind::Op(Op::Elementwise(ElementwiseOp::Binary(BinaryOp::Add)));
/// let sum = g.add_node(add, &[pa, pb], DType::F32, Shape::new(&[2, 4]));
/// g.outputs.push(sum);
/// assert!(PadSumToConcat.run(&mut g));
/// assert_eq!(g.count_op("concat"), 1);
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub struct PadSumToConcat;

impl Pass for PadSumToConcat {
    fn name(&self) -> &'static str {
        "pad_sum_to_concat"
    }

    fn run(&self, g: &mut Graph) -> bool {
        let producer: HashMap<ValueId, usize> = g.nodes.iter().enumerate().flat_map(|(i, n)| n.outputs.iter().map(move |&v| (v, i))).collect();
        let uses = use_counts(g);
        let is_add = |i: usize| matches!(g.nodes[i].kind, NodeKind::Op(Op::Elementwise(ElementwiseOp::Binary(BinaryOp::Add))));
        // The node reading each value (the last one, which for a value read once is the one).
        let reader: HashMap<ValueId, usize> = g.nodes.iter().enumerate().flat_map(|(i, n)| n.inputs.iter().map(move |&v| (v, i))).collect();
        // Each sum whose root is an add that no other add of a sum reads alone, with its parts.
        let mut rewrites = Vec::new();
        for (i, node) in g.nodes.iter().enumerate() {
            // (Checked first: some nodes, a print, have no output.)
            if !is_add(i) {
                continue;
            }
            let out = node.outputs[0];
            if uses[out] == 1 && reader.get(&out).is_some_and(|&r| is_add(r)) {
                continue;
            }
            let mut leaves = Vec::new();
            node.inputs.iter().for_each(|&v| collect_leaves(g, v, &producer, &uses, &is_add, &mut leaves));
            if let Some(parts) = tiling_parts(g, &producer, &leaves, node.outputs[0]) {
                rewrites.push((i, parts));
            }
        }
        let changed = !rewrites.is_empty();
        // Later nodes first, so that inserting before one leaves the earlier indices alone.
        for (i, (axis, parts)) in rewrites.into_iter().rev() {
            let mut pieces = Vec::with_capacity(parts.len());
            let mut added = Vec::with_capacity(parts.len());
            for part in parts {
                let (dtype, shape) = (g.values[part].dtype, g.values[part].shape.clone());
                let plus_zero = g.add_value(dtype, shape, None);
                let zero = if dtype.is_float() { Scalar::Float(0.0) } else { Scalar::Int(0) };
                let op = ElementwiseOp::BinaryScalar { op: BinaryOp::Add, scalar: ScalarAttr(zero), scalar_first: false };
                added.push(Node {
                    kind: NodeKind::Op(Op::Elementwise(op)),
                    inputs: [part].into_iter().collect(),
                    outputs: [plus_zero].into_iter().collect(),
                });
                pieces.push(plus_zero);
            }
            g.nodes[i].kind = NodeKind::Op(LayoutOp::Concat { axis }.into());
            g.nodes[i].inputs = pieces.into_iter().collect();
            g.nodes.splice(i..i, added);
        }
        changed
    }
}

/// The terms of the sum `v` belongs to: `v` itself, or, for an add read only there, its
/// operands' terms.
fn collect_leaves(
    g: &Graph,
    v: ValueId,
    producer: &HashMap<ValueId, usize>,
    uses: &[usize],
    is_add: &impl Fn(usize) -> bool,
    leaves: &mut Vec<ValueId>,
) {
    match producer.get(&v) {
        Some(&p) if uses[v] == 1 && is_add(p) => g.nodes[p].inputs.iter().for_each(|&w| collect_leaves(g, w, producer, uses, is_add, leaves)),
        _ => leaves.push(v),
    }
}

/// When every term of a sum with output `out` is a pad along one axis, all of `out`'s shape,
/// and the padded parts tile that axis (each at least one wide, none overlapping): the axis
/// and the parts in their order along it.
fn tiling_parts(g: &Graph, producer: &HashMap<ValueId, usize>, leaves: &[ValueId], out: ValueId) -> Option<(usize, Vec<ValueId>)> {
    let out_info = &g.values[out];
    if leaves.len() < 2 || !out_info.shape.is_known() {
        return None;
    }
    let mut axis_of_all = None;
    let mut parts = Vec::with_capacity(leaves.len());
    for &leaf in leaves {
        let node = &g.nodes[*producer.get(&leaf)?];
        let NodeKind::Op(Op::Layout(LayoutOp::Pad { axis, before, .. })) = node.kind else { return None };
        let part = node.inputs[0];
        let info = &g.values[leaf];
        if info.shape != out_info.shape
            || info.dtype != out_info.dtype
            || !g.values[part].shape.is_known()
            || *axis_of_all.get_or_insert(axis) != axis
        {
            return None;
        }
        parts.push((before, g.values[part].shape[axis], part));
    }
    parts.sort_unstable();
    let axis = axis_of_all?;
    let mut next = 0;
    for &(before, len, _) in &parts {
        if before != next || len == 0 {
            return None;
        }
        next += len;
    }
    (next == out_info.shape[axis]).then(|| (axis, parts.into_iter().map(|(_, _, p)| p).collect()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compile::tests::{assert_same, body, traced};
    use crate::compile::Dce;
    use crate::prelude::*;

    /// A split's gradient: three parts padded into place along axis 1 and summed. Each part
    /// has a -0.0 (the sum makes it +0.0) and one a NaN with a payload (quieted, kept).
    #[test]
    fn a_split_gradient_becomes_one_concat_with_the_sums_bits() -> Result<()> {
        let nan = f32::from_bits(0x7fa0_0001); // signalling: the add quiets it
        let a = Tensor::from_vec(vec![1.0f32, -0.0, 2.0, 3.0], &[2, 2])?;
        let b = Tensor::from_vec(vec![-0.0f32, 5.0], &[2, 1])?;
        let c = Tensor::from_vec(vec![7.0f32, nan, -0.0, 9.0], &[2, 2])?;
        let mut g = traced(&[&a, &b, &c], || Ok(vec![c.pad_axis(1, 3, 0)?.add(&b.pad_axis(1, 2, 2)?)?.add(&a.pad_axis(1, 0, 3)?)?]));
        let before = g.clone();
        assert!(PadSumToConcat.run(&mut g));
        Dce.run(&mut g);
        assert_eq!(
            body(&g),
            "  v8: f32[2, 2] = add[rhs=0.0](a0)\n  v9: f32[2, 1] = add[rhs=0.0](a1)\n  v10: f32[2, 2] = add[rhs=0.0](a2)\n  \
             v7: f32[2, 5] = concat[axis=1](v8, v9, v10)\n  return (v7)"
        );
        assert_same(&before, &g, &[&a, &b, &c]);
        let out = crate::compile::Executable::new(&g, false).run(&[&a, &b, &c])?[0].to_vec::<f32>()?;
        let quiet = f32::from_bits(0x7fe0_0001);
        let want = [1.0f32, 0.0, 0.0, 7.0, quiet, 2.0, 3.0, 5.0, 0.0, 9.0];
        assert_eq!(out.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), want.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
        Ok(())
    }

    /// Sums that are not a tiling stay: overlapping parts, a gap, pads along two axes, a term
    /// that is not a pad, and an inner sum read elsewhere (its value is needed as it is).
    #[test]
    fn keeps_sums_that_do_not_tile_an_axis() -> Result<()> {
        let a = Tensor::from_vec(vec![1.0f32, 2.0], &[1, 2])?;
        let full = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[1, 4])?;
        let sums: [&dyn Fn() -> Result<Vec<Tensor>>; 5] = [
            &|| Ok(vec![a.pad_axis(1, 0, 2)?.add(&a.pad_axis(1, 1, 1)?)?]),
            &|| Ok(vec![a.narrow(1, 0, 1)?.pad_axis(1, 0, 3)?.add(&a.narrow(1, 1, 1)?.pad_axis(1, 2, 1)?)?]),
            &|| Ok(vec![a.pad_axis(1, 0, 2)?.add(&full.pad_axis(0, 0, 0)?)?]),
            &|| Ok(vec![a.pad_axis(1, 0, 2)?.add(&full)?]),
            &|| {
                let inner = a.pad_axis(1, 0, 2)?.add(&a.narrow(1, 0, 1)?.pad_axis(1, 2, 1)?)?;
                Ok(vec![inner.add(&a.narrow(1, 1, 1)?.pad_axis(1, 3, 0)?)?, inner])
            },
        ];
        // A node without outputs (a print) beside a sum is passed over.
        let printed = traced(&[&a, &full], || {
            crate::trace::tprint_impl("{}", &[&a])?;
            Ok(vec![a.pad_axis(1, 0, 2)?.add(&full)?])
        });
        assert!(printed.nodes.iter().any(|n| n.outputs.is_empty()), "{}", printed.to_text());
        assert!(!PadSumToConcat.run(&mut printed.clone()));
        for (k, sum) in sums.iter().enumerate() {
            let mut g = traced(&[&a, &full], sum);
            let text = g.to_text();
            assert!(!PadSumToConcat.run(&mut g), "sum {k}:\n{}", g.to_text());
            assert_eq!(g.to_text(), text);
        }
        Ok(())
    }
}
