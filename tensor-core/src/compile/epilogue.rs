//! Epilogue fusion: the elementwise work right after a matmul or a convolution — the bias add
//! and activation of a layer — runs on the anchor's output as it is made, instead of as a
//! later step over memory. A convolution hands each image's output to the program as soon as
//! that image's GEMM is done, while it is still in the core's cache; a matmul its whole output,
//! which the program then overwrites in place when nothing else reads it.
//!
//! Why this keeps bits: the anchor runs exactly as alone (same kernel, same GEMM calls, same
//! accumulation order), and the program reads the finished values — only *when* the
//! elementwise ops run changes, not what they compute. (Folding the bias into the GEMM's own
//! accumulator would round differently once `k` spans several blocks, so it is not done.)
//!
//! The pass runs after elementwise fusion. It takes a `Fused` node, or a lone elementwise op,
//! that reads the output of a `matmul`, `conv2d` or `depthwise2d` over that output's whole shape, when no node
//! between the two reads it, and makes the pair one `Epilogue` node in the consumer's place.

use super::fuse::fused_node;
use super::pass::Pass;
use crate::dtype::DType;
use crate::error::Result;
use crate::graph::{Epilogue, Graph, Instr, Node, NodeKind, Operand, StateWrite, ValueId};
use crate::kernels::clamp::Clamp;
use crate::kernels::fused::{CompiledProgram, Input};
use crate::math::{BinaryOp, ElementwiseOp, ScalarAttr};
use crate::ops::{ConvOp, LinalgOp, Op};
use crate::storage::{Element, Storage, Unwritten};
use smallvec::SmallVec;
use std::sync::Arc;

/// Epilogue fusion.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::compile::{Fuse, FuseEpilogue, Pass};
/// use tensor_core::function::ConcreteFunction;
/// let (x, w, b) = (Tensor::ones(&[4, 3], DType::F32), Tensor::ones(&[3, 2], DType::F32), Tensor::ones(&[2], DType::F32));
/// let f = ConcreteFunction::trace_with_shapes("f", &[("x", &x)], &[x.shape()], false, || Ok(vec![x.matmul(&w)?.add(&b)?.relu()?]))?;
/// let mut g = f.traced_graph().clone();
/// Fuse.run(&mut g);
/// assert!(FuseEpilogue.run(&mut g));
/// assert_eq!(g.nodes.len(), 1);
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub struct FuseEpilogue;

impl Pass for FuseEpilogue {
    fn name(&self) -> &'static str {
        "fuse_epilogue"
    }

    fn run(&self, g: &mut Graph) -> bool {
        let mut changed = false;
        let mut f = 0;
        while f < g.nodes.len() {
            match find_anchor(g, f) {
                Some((m, v)) => {
                    let node = epilogue_node(g, m, f, v);
                    g.nodes[f] = node;
                    g.nodes.remove(m);
                    changed = true;
                }
                None => f += 1,
            }
        }
        changed
    }
}

/// The elementwise program node `f` runs: a fused node's, or one made for a lone op.
fn program_of(g: &Graph, f: usize) -> Option<Node> {
    let node = &g.nodes[f];
    let known = |vs: &[ValueId]| vs.iter().all(|&v| g.values[v].shape.is_known());
    if !known(&node.inputs) || !known(&node.outputs) {
        return None;
    }
    match &node.kind {
        NodeKind::Fused(_) => Some(node.clone()),
        NodeKind::Op(op) if op.is_elementwise() && g.values[node.outputs[0]].shape.numel() > 0 => Some(fused_node(g, &[f])),
        _ => None,
    }
}

/// For consumer node `f`: the node `m` of a matmul or conv2d whose output `v` the consumer's
/// program reads over its whole shape, with no node in between reading `v`.
fn find_anchor(g: &Graph, f: usize) -> Option<(usize, ValueId)> {
    let program = program_of(g, f)?;
    let NodeKind::Fused(p) = &program.kind else { unreachable!("program_of gives fused nodes") };
    program.inputs.iter().enumerate().find_map(|(k, &v)| {
        let m = (0..f).rev().find(|&m| g.nodes[m].outputs.contains(&v))?;
        let anchor = &g.nodes[m];
        let is_anchor =
            matches!(&anchor.kind, NodeKind::Op(Op::Linalg(LinalgOp::Matmul { .. }) | Op::Conv(ConvOp::Conv2d { .. } | ConvOp::Depthwise2d { .. })));
        let float = g.values[v].dtype.is_float();
        let whole = p.inputs[k].1 == p.shape;
        let inputs_known = anchor.inputs.iter().all(|&u| g.values[u].shape.is_known());
        let read_between = g.nodes[m + 1..f].iter().any(|n| n.inputs.contains(&v));
        (is_anchor && float && whole && inputs_known && !read_between).then_some((m, v))
    })
}

/// The `Epilogue` node for anchor node `m` (output `v`) and consumer node `f`.
fn epilogue_node(g: &Graph, m: usize, f: usize, v: ValueId) -> Node {
    let program = program_of(g, f).expect("checked by find_anchor");
    let NodeKind::Fused(p) = program.kind else { unreachable!("program_of gives fused nodes") };
    let anchor = &g.nodes[m];
    let NodeKind::Op(op) = &anchor.kind else { unreachable!("anchors are op nodes") };
    let slot = program.inputs.iter().position(|&u| u == v).expect("the program reads the anchor");
    let keep_anchor = read_elsewhere(g, f, v);
    let mut inputs: SmallVec<[ValueId; 3]> = anchor.inputs.clone();
    inputs.extend(program.inputs.iter().enumerate().filter(|&(k, _)| k != slot).map(|(_, &u)| u));
    let mut outputs: SmallVec<[ValueId; 1]> = SmallVec::new();
    if keep_anchor {
        outputs.push(v);
    }
    outputs.extend(program.outputs.iter().copied());
    let e = Epilogue { anchor: op.clone(), arity: anchor.inputs.len(), program: p, slot, keep_anchor };
    Node { kind: NodeKind::Epilogue(Arc::new(e)), inputs, outputs }
}

/// True when `v` is read by a node other than `f`, or is an output or a written value.
fn read_elsewhere(g: &Graph, f: usize, v: ValueId) -> bool {
    let by_node = g.nodes.iter().enumerate().any(|(i, n)| i != f && n.inputs.contains(&v));
    let written = g.writes.iter().any(|w| matches!(w, StateWrite::Data { value, .. } | StateWrite::Grad { value: Some(value), .. } if *value == v));
    by_node || written || g.outputs.contains(&v)
}

/// Runs an epilogue node on its inputs (the anchor's, then the program's others), with its
/// program as compiled when the graph was lowered; returns the anchor's output if kept, then
/// the program's outputs.
pub(super) fn run(e: &Epilogue, program: &CompiledProgram, inputs: &[&Storage]) -> Result<SmallVec<[Storage; 1]>> {
    let (anchor_inputs, others) = inputs.split_at(e.arity);
    let program_inputs = |anchor| program_inputs(e, others, anchor);
    let mut results: SmallVec<[Storage; 1]> = SmallVec::new();
    match &e.anchor {
        Op::Conv(conv @ (ConvOp::Conv2d { .. } | ConvOp::Depthwise2d { .. })) => {
            let (dtype, shape) = &e.program.inputs[e.slot];
            // Not zeroed: the convolution writes every element.
            let out = Unwritten::new(*dtype, shape.numel());
            let dst = out.ptr_at(0);
            if let Some(clamp) = clamp_of(e, others) {
                // The program is a clamp, which the convolution applies to its outputs itself
                // (in registers where its kernel can): the program's result, in the buffer.
                // SAFETY: `dst` is `out`'s buffer, of the conv's dtype (f32) and length; the
                // convolution writes every element.
                unsafe {
                    crate::ops::conv2d_into(conv, anchor_inputs, dst, Some(clamp), &|_, _| {});
                    results.push(out.assume_written(shape.dims()));
                }
            } else if e.keep_anchor {
                // SAFETY: `dst` is `out`'s buffer, of the conv's dtype and length.
                let outs = unsafe { conv_then_program(conv, anchor_inputs, dst, program, program_inputs(Input::Filling(&out))) };
                // SAFETY: the convolution wrote every element.
                results.push(unsafe { out.assume_written(shape.dims()) });
                results.extend(outs);
            } else {
                // Nothing else reads the convolution's output: the program writes its result
                // over it, each part once the convolution has finished it (one buffer, not
                // two). The buffer's memory stays where it is when the program takes it over.
                // SAFETY: as above.
                results.extend(unsafe { conv_then_program(conv, anchor_inputs, dst, program, program_inputs(Input::FillingDying(out))) });
            }
        }
        anchor => {
            let out = anchor.compute(anchor_inputs)?;
            if e.keep_anchor {
                let outs = program.run(program_inputs(Input::Shared(&out)));
                results.push(out);
                results.extend(outs);
            } else {
                // Nothing else reads the product: the program may write over it.
                results.extend(program.run(program_inputs(Input::Dying(out))));
            }
        }
    }
    Ok(results)
}

/// The convolution into `dst`, each image's part of the program run on it as soon as the
/// convolution has finished that part, on the thread that made it; the program's outputs.
///
/// # Safety
/// `dst` must be the buffer of the program's anchor input, of the conv's dtype and length,
/// and written by nothing else during the call.
unsafe fn conv_then_program<'a>(
    conv: &ConvOp,
    anchor_inputs: &[&Storage],
    dst: *mut u8,
    program: &'a CompiledProgram,
    inputs: SmallVec<[Input<'a>; 4]>,
) -> SmallVec<[Storage; 1]> {
    let run = program.begin(inputs);
    // SAFETY: the caller's contract for `dst`; the program reads an image's part only after
    // `after_image` says it is final, and writes only that part. Every image is announced,
    // so every position of the run is computed.
    unsafe {
        crate::ops::conv2d_into(conv, anchor_inputs, dst, None, &|start, len| run.range(start, len));
        run.finish()
    }
}

/// The clamp that `e`'s program is, when it is one a convolution applies itself
/// (`kernels::clamp`): `maximum(x, lo)`, `minimum(x, hi)`, the first then the second, or
/// `clamp(x)`, of the f32 anchor output `x` (first operand), with bounds that are single
/// values (scalar attributes, or inputs of one element: `others`, the program's other inputs in
/// order) and not NaN; and nothing else reads the anchor's output.
fn clamp_of(e: &Epilogue, others: &[&Storage]) -> Option<Clamp> {
    let p = &e.program;
    let one_result = p.outputs.len() == 1 && p.outputs[0] + 1 == p.instrs.len();
    if e.keep_anchor || !one_result || p.instrs.iter().any(|i| i.dtype != DType::F32) {
        return None;
    }
    let attr = |s: &ScalarAttr| f32::from_scalar(s.0);
    // Program input k's value, when it is one f32 (the anchor's slot is not in `others`).
    let single = |k: usize| {
        let at = match k.cmp(&e.slot) {
            std::cmp::Ordering::Less => k,
            std::cmp::Ordering::Equal => return None,
            std::cmp::Ordering::Greater => k - 1,
        };
        match others.get(at)? {
            Storage::F32(a) if a.len() == 1 => a.iter().next().copied(),
            _ => None,
        }
    };
    // `maximum(x, bound)` or `minimum(x, bound)`: the op and the bound.
    let bound = |i: &Instr, x: Operand| match (&i.op, i.args.as_slice()) {
        (ElementwiseOp::Binary(op @ (BinaryOp::Maximum | BinaryOp::Minimum)), &[a, Operand::Input(k)]) if a == x => Some((*op, single(k)?)),
        (ElementwiseOp::BinaryScalar { op: op @ (BinaryOp::Maximum | BinaryOp::Minimum), scalar, scalar_first: false }, &[a]) if a == x => {
            Some((*op, attr(scalar)))
        }
        _ => None,
    };
    let x = Operand::Input(e.slot);
    match p.instrs.as_slice() {
        [i] => match (&i.op, i.args.as_slice()) {
            (ElementwiseOp::Clamp { min, max }, &[a]) if a == x => Clamp::new(min.as_ref().map(attr), max.as_ref().map(attr)),
            _ => match bound(i, x)? {
                (BinaryOp::Maximum, lo) => Clamp::new(Some(lo), None),
                (_, hi) => Clamp::new(None, Some(hi)),
            },
        },
        [i, j] => match (bound(i, x)?, bound(j, Operand::ResultOf(0))?) {
            ((BinaryOp::Maximum, lo), (BinaryOp::Minimum, hi)) => Clamp::new(Some(lo), Some(hi)),
            _ => None,
        },
        _ => None,
    }
}

/// The program's inputs: `anchor` at the anchor's slot, the node's other inputs around it.
fn program_inputs<'a>(e: &Epilogue, others: &[&'a Storage], anchor: Input<'a>) -> SmallVec<[Input<'a>; 4]> {
    let mut rest = others.iter();
    let mut anchor = Some(anchor);
    (0..e.program.inputs.len())
        .map(|k| if k == e.slot { anchor.take().expect("one slot") } else { Input::Shared(rest.next().expect("one input per slot")) })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compile::tests::{assert_same, traced};
    use crate::compile::{Dce, Fuse};
    use crate::prelude::*;

    /// `g` after fusion and epilogue fusion (then DCE), checked to compute the same bits.
    fn lowered(mut g: Graph, args: &[&Tensor]) -> Graph {
        let before = g.clone();
        Fuse.run(&mut g);
        FuseEpilogue.run(&mut g);
        Dce.run(&mut g);
        crate::graph::validate(&g).unwrap();
        assert_same(&before, &g, args);
        g
    }

    #[test]
    fn a_dense_layer_is_one_matmul_epilogue() -> Result<()> {
        let x = Tensor::randn(&[33, 70], DType::F32, 1);
        let w = Tensor::randn(&[70, 20], DType::F32, 2);
        let b = Tensor::randn(&[20], DType::F32, 3);
        let g = traced(&[&x, &w, &b], || Ok(vec![x.matmul(&w)?.add(&b)?.relu()?]));
        assert_eq!(g.nodes.len(), 3);
        let g = lowered(g, &[&x, &w, &b]);
        assert_eq!(g.nodes.len(), 1, "{}", g.to_text());
        assert_eq!(g.count_op("epilogue"), 1);
        assert!(g.to_text().contains("matmul+fused[add,relu]"), "{}", g.to_text());
        Ok(())
    }

    /// The one epilogue of `g`, and the storages of its program's other inputs (constants:
    /// the tests make their bounds inside the traced code).
    fn only_epilogue(g: &Graph) -> (Arc<Epilogue>, Vec<Storage>) {
        let (node, e) = g
            .nodes
            .iter()
            .find_map(|n| if let NodeKind::Epilogue(e) = &n.kind { Some((n, e.clone())) } else { None })
            .unwrap_or_else(|| panic!("no epilogue:\n{}", g.to_text()));
        let constant = |v: ValueId| g.constants.iter().find(|(c, _)| *c == v).map(|(_, s)| s.clone()).expect("a bound made in the traced code");
        let others = node.inputs[e.arity..].iter().map(|&v| constant(v)).collect();
        (e, others)
    }

    fn clamp_in(g: &Graph) -> Option<Clamp> {
        let (e, others) = only_epilogue(g);
        clamp_of(&e, &others.iter().collect::<Vec<_>>())
    }

    /// A test case's code, traced and run eagerly.
    type Traced<'a, T> = Box<dyn Fn() -> Result<T> + 'a>;

    /// A bound of one value, as ONNX's `Clip` imports it.
    fn bound(v: f32) -> Tensor {
        Tensor::scalar(v)
    }

    /// MobileNetV2's ReLU6, `maximum(y, lo)` then `minimum(.., hi)` with bounds in tensors of
    /// one value, after a pointwise layer `pointwise_direct` takes and after a depthwise one;
    /// `clamp(y, lo, hi)` after a 3x3 layer (clamped by a pass after each part); one bound
    /// alone: each is a clamp the convolution applies itself, with the unfused graph's bits
    /// (`lowered`). The outputs spread past both bounds.
    #[test]
    fn a_clamp_after_a_convolution_runs_in_it_with_the_unfused_bits() -> Result<()> {
        let x = Tensor::randn(&[1, 16, 14, 14], DType::F32, 7);
        let (pw, dw, k3) = (
            Tensor::randn(&[96, 16, 1, 1], DType::F32, 8),
            Tensor::randn(&[16, 1, 3, 3], DType::F32, 9),
            Tensor::randn(&[8, 16, 3, 3], DType::F32, 10),
        );
        let b = Tensor::randn(&[96], DType::F32, 11);
        let relu6 = |y: Tensor| y.maximum(&bound(-0.5))?.minimum(&bound(1.5));
        let cases: [(&str, Traced<'_, Tensor>); 5] = [
            ("pointwise", Box::new(|| relu6(x.conv2d(&pw, Some(&b), [1, 1], [0, 0])?))),
            ("depthwise", Box::new(|| relu6(x.conv2d_depthwise(&dw, None, [1, 1], [1, 1], [1, 1])?))),
            ("3x3", Box::new(|| x.conv2d(&k3, None, [1, 1], [1, 1])?.clamp(-0.5f32, 1.5f32))),
            ("lower bound", Box::new(|| x.conv2d(&pw, Some(&b), [1, 1], [0, 0])?.maximum(&bound(-0.5)))),
            ("upper bound", Box::new(|| x.conv2d(&pw, Some(&b), [1, 1], [0, 0])?.minimum(&bound(1.5)))),
        ];
        for (name, layer) in cases {
            let values = layer()?.to_vec::<f32>()?;
            let (low, high) = (values.contains(&-0.5), values.contains(&1.5));
            assert!(low || name == "upper bound", "{name}: the lower bound bites");
            assert!(high || name == "lower bound", "{name}: the upper bound bites");
            let args = [&x, &pw, &dw, &k3, &b];
            let g = lowered(traced(&args, || Ok(vec![layer()?])), &args);
            assert!(clamp_in(&g).is_some(), "{name}: {}", g.to_text());
        }
        Ok(())
    }

    /// What is not a clamp stays the program's: bounds in the other order, a bound first, a
    /// NaN bound, a conv output something else reads, and an f64 layer.
    #[test]
    fn other_programs_after_a_convolution_are_not_clamps() -> Result<()> {
        let x = Tensor::randn(&[1, 4, 6, 6], DType::F32, 12);
        let w = Tensor::randn(&[8, 4, 1, 1], DType::F32, 13);
        let conv = || x.conv2d(&w, None, [1, 1], [0, 0]);
        let cases: [(&str, Traced<'_, Vec<Tensor>>); 4] = [
            ("minimum first", Box::new(|| Ok(vec![conv()?.minimum(&bound(1.5))?.maximum(&bound(-0.5))?]))),
            ("bound first", Box::new(|| Ok(vec![bound(-0.5).maximum(&conv()?)?]))),
            ("NaN bound", Box::new(|| Ok(vec![conv()?.maximum(&bound(f32::NAN))?]))),
            (
                "kept",
                Box::new(|| {
                    let y = conv()?;
                    Ok(vec![y.maximum(&bound(-0.5))?, y])
                }),
            ),
        ];
        for (name, f) in cases {
            let g = lowered(traced(&[&x, &w], &f), &[&x, &w]);
            assert_eq!(clamp_in(&g), None, "{name}: {}", g.to_text());
        }
        let (x, w) = (x.cast(DType::F64)?, w.cast(DType::F64)?);
        let g = lowered(traced(&[&x, &w], || Ok(vec![x.conv2d(&w, None, [1, 1], [0, 0])?.clamp(0.0, 1.0)?])), &[&x, &w]);
        assert_eq!(clamp_in(&g), None, "f64: {}", g.to_text());
        Ok(())
    }

    #[test]
    fn a_conv_layer_keeps_its_pre_activation_when_backward_reads_it() -> Result<()> {
        for dtype in [DType::F32, DType::F64] {
            let x = Tensor::randn(&[5, 3, 9, 8], dtype, 4);
            let w = Tensor::randn(&[4, 3, 3, 3], dtype, 5).requires_grad_(true)?;
            let b = Tensor::randn(&[4], dtype, 6).requires_grad_(true)?;
            let g = traced(&[&x, &w, &b], || {
                let y = x.conv2d(&w, Some(&b), [1, 1], [1, 1])?.relu()?.sum()?;
                y.backward()?;
                Ok(vec![y])
            });
            let g = lowered(g, &[&x, &w, &b]);
            let e = g.nodes.iter().find_map(|n| if let NodeKind::Epilogue(e) = &n.kind { Some(e.clone()) } else { None });
            let e = e.unwrap_or_else(|| panic!("no epilogue:\n{}", g.to_text()));
            assert!(matches!(e.anchor, Op::Conv(ConvOp::Conv2d { .. })) && e.keep_anchor, "relu's backward reads the conv output:\n{}", g.to_text());
        }
        Ok(())
    }

    #[test]
    fn a_batched_matmul_and_a_conv_with_a_lone_op_keep_the_bits() -> Result<()> {
        let a = Tensor::randn(&[3, 17, 9], DType::F64, 7);
        let m = Tensor::randn(&[9, 5], DType::F64, 8);
        let g = lowered(traced(&[&a, &m], || Ok(vec![a.matmul(&m)?.tanh()?])), &[&a, &m]);
        assert_eq!(g.count_op("epilogue"), 1, "{}", g.to_text());
        // One image per thread and more: both conv paths call the epilogue per image.
        for n in [1, 7] {
            let x = Tensor::randn(&[n, 2, 6, 6], DType::F32, 9);
            let w = Tensor::randn(&[3, 2, 2, 2], DType::F32, 10);
            let g = lowered(traced(&[&x, &w], || Ok(vec![x.conv2d(&w, None, [2, 2], [0, 0])?.sigmoid()?])), &[&x, &w]);
            assert_eq!(g.count_op("epilogue"), 1, "{}", g.to_text());
        }
        // The program writes over the anchor's output (nothing else reads it), part by part as
        // the convolution finishes them: a depthwise layer, and a pointwise one by blocks of
        // positions (parts of every channel at once), on one and several images.
        for n in [1, 3] {
            let x = Tensor::randn(&[n, 8, 12, 12], DType::F32, 13);
            let w = Tensor::randn(&[8, 1, 3, 3], DType::F32, 14);
            let b = Tensor::randn(&[8], DType::F32, 15);
            let y = || x.conv2d_depthwise(&w, Some(&b), [2, 2], [1, 1], [1, 1])?.clamp(0.0, 6.0);
            let g = lowered(traced(&[&x, &w, &b], || Ok(vec![y()?])), &[&x, &w, &b]);
            assert_eq!(g.count_op("epilogue"), 1, "{}", g.to_text());
            let x = Tensor::randn(&[n, 160, 7, 7], DType::F32, 16);
            let w = Tensor::randn(&[64, 160, 1, 1], DType::F32, 17);
            let g = lowered(traced(&[&x, &w], || Ok(vec![x.conv2d(&w, None, [1, 1], [0, 0])?.relu()?])), &[&x, &w]);
            assert_eq!(g.count_op("epilogue"), 1, "{}", g.to_text());
        }
        Ok(())
    }

    #[test]
    fn an_anchor_read_before_its_consumer_is_left_alone() -> Result<()> {
        let x = Tensor::randn(&[4, 6], DType::F32, 11);
        let w = Tensor::randn(&[6, 6], DType::F32, 12);
        let mut g = traced(&[&x, &w], || {
            let y = x.matmul(&w)?;
            let s = y.sum_axes(&[1], true)?; // reads y between the matmul and the relu
            Ok(vec![y.relu()?.add(&s)?])
        });
        Fuse.run(&mut g);
        assert!(!FuseEpilogue.run(&mut g), "{}", g.to_text());
        // An integer matmul has no epilogue either (only float anchors).
        let (xi, wi) = (x.cast(DType::I32)?, w.cast(DType::I32)?);
        let mut g = traced(&[&xi, &wi], || Ok(vec![xi.matmul(&wi)?.add(1)?.abs()?]));
        Fuse.run(&mut g);
        assert!(!FuseEpilogue.run(&mut g), "{}", g.to_text());
        Ok(())
    }
}
