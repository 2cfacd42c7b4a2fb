//! The launches as data: hand-built plans whose groups are worked out by hand, and a traced
//! Adam step over parameters of three sizes.

use super::*;
use crate::dtype::Scalar;
use crate::graph::Graph;
use crate::math::{BinaryOp, ElementwiseOp, Operand, ScalarAttr, UnaryOp};
use crate::ops::Op;
use crate::shape::Shape;

/// `x * 0.5 + y` over `shape` (`y`: one value when `scalar_y`): the kernel of these tests.
fn axpy(shape: &[usize], scalar_y: bool) -> NodeKind {
    let shape = Shape::from(shape.to_vec());
    let y = if scalar_y { Shape::scalar() } else { shape.clone() };
    let half = ElementwiseOp::BinaryScalar { op: BinaryOp::Mul, scalar: ScalarAttr(Scalar::Float(0.5)), scalar_first: false };
    let instrs = vec![
        Instr { op: half, args: smallvec::smallvec![Operand::Input(0)], dtype: DType::F32 },
        Instr { op: ElementwiseOp::Binary(BinaryOp::Add), args: smallvec::smallvec![Operand::ResultOf(0), Operand::Input(1)], dtype: DType::F32 },
    ];
    NodeKind::Fused(std::sync::Arc::new(FusedProgram {
        shape: shape.clone(),
        inputs: vec![(DType::F32, shape), (DType::F32, y)],
        instrs,
        outputs: vec![1],
    }))
}

fn neg() -> NodeKind {
    NodeKind::Op(Op::from(ElementwiseOp::Unary(UnaryOp::Neg)))
}

/// A plan of steps `(kind, inputs, outputs)`, each value freed after its last reader
/// (`kept` values never).
fn plan(steps: Vec<(NodeKind, &[usize], &[usize])>, kept: &[usize]) -> (Plan, usize) {
    let values = 1 + steps.iter().flat_map(|(_, i, o)| i.iter().chain(o.iter())).max().copied().unwrap_or(0);
    let mut last = vec![usize::MAX; values];
    for (s, (_, inputs, _)) in steps.iter().enumerate() {
        inputs.iter().for_each(|&v| last[v] = s);
    }
    let steps = steps
        .into_iter()
        .enumerate()
        .map(|(s, (kind, inputs, outputs))| {
            let frees = inputs.iter().copied().filter(|&v| last[v] == s && !kept.contains(&v)).collect();
            Step {
                node: Node { kind, inputs: inputs.iter().copied().collect(), outputs: outputs.iter().copied().collect() },
                frees,
                donate: SmallVec::from_elem(false, inputs.len()),
                with_next: false,
                streams: false,
            }
        })
        .collect();
    (Plan { steps, checks_shapes: false, on_worker: false }, values)
}

fn order(p: &(Plan, usize)) -> Vec<Vec<usize>> {
    launch_order(&p.0, p.1).into_iter().map(|m| m.to_vec()).collect()
}

/// Every value is made by an earlier launch than any that reads it, and every step runs once.
fn assert_valid(plan: &Plan, order: &[Vec<usize>]) {
    let mut launch_of = vec![usize::MAX; plan.steps.len()];
    for (l, members) in order.iter().enumerate() {
        members.iter().for_each(|&s| launch_of[s] = l);
    }
    assert!(launch_of.iter().all(|&l| l != usize::MAX), "every step runs: {order:?}");
    assert_eq!(order.iter().map(Vec::len).sum::<usize>(), plan.steps.len());
    let values = 1 + plan.steps.iter().flat_map(|s| s.node.inputs.iter().chain(&s.node.outputs)).max().copied().unwrap_or(0);
    let readers = readers(plan, values);
    let launches: Vec<SmallVec<[usize; 1]>> = order.iter().map(|m| m.iter().copied().collect()).collect();
    assert!(Links::new(plan, values).respected_by(&launches));
    for (s, rs) in readers.iter().enumerate() {
        for &r in rs {
            assert!(launch_of[s] < launch_of[r], "step {r} reads step {s} but launches at {} <= {}: {order:?}", launch_of[r], launch_of[s]);
        }
    }
}

#[test]
fn interleaved_runs_of_two_kernels_make_two_batched_launches() {
    // An optimizer's shape: per parameter, a 0-d program (its bias correction) and then the
    // update reading it, one parameter after another, of three sizes.
    let p = plan(
        vec![
            (axpy(&[], false), &[0, 1], &[10]),
            (axpy(&[3], true), &[2, 10], &[11]),
            (axpy(&[], false), &[0, 3], &[12]),
            (axpy(&[2, 5], true), &[4, 12], &[13]),
            (axpy(&[], false), &[0, 5], &[14]),
            (axpy(&[7], true), &[6, 14], &[15]),
        ],
        &[11, 13, 15],
    );
    let o = order(&p);
    assert_eq!(o, [vec![0, 2, 4], vec![1, 3, 5]]);
    assert_valid(&p.0, &o);
}

#[test]
fn a_reader_that_runs_where_it_stands_moves_the_group_before_it() {
    // W7's shape: a weight's update is a product with an epilogue (here a negation at step
    // 3), not batched, and reads its bias correction (step 2). The three 0-d programs read
    // only the call's inputs, so they launch together at step 0; the two updates at step 5.
    let p = plan(
        vec![
            (axpy(&[], false), &[0, 1], &[10]),
            (axpy(&[3], true), &[2, 10], &[11]),
            (axpy(&[], false), &[0, 3], &[12]),
            (neg(), &[12], &[13]),
            (axpy(&[], false), &[0, 5], &[14]),
            (axpy(&[7], true), &[6, 14], &[15]),
        ],
        &[11, 13, 15],
    );
    let o = order(&p);
    assert_eq!(o, [vec![0, 2, 4], vec![3], vec![1, 5]]);
    assert_valid(&p.0, &o);
    // At the last member, step 2 would come after its reader: it stays out.
    let fallback = ordered(6, &last_member_positions(&Links::new(&p.0, p.1), initial_groups(&p.0)));
    assert_eq!(fallback.iter().map(|m| m.to_vec()).collect::<Vec<_>>(), [vec![2], vec![3], vec![0, 4], vec![1, 5]]);
}

#[test]
fn a_dependency_between_two_candidates_splits_them() {
    // Step 1 reads step 0's output: they cannot share a launch; step 0 runs first, alone,
    // and steps 1 and 2 share one at step 2.
    let p = plan(vec![(axpy(&[4], false), &[0, 1], &[2]), (axpy(&[4], false), &[2, 1], &[3]), (axpy(&[4], false), &[0, 0], &[4])], &[3, 4]);
    let o = order(&p);
    assert_eq!(o, [vec![0], vec![1, 2]]);
    assert_valid(&p.0, &o);
}

#[test]
fn a_member_read_before_the_last_member_moves_the_group_earlier() {
    // The negation at step 1 reads step 0's output, so step 0 cannot wait for step 2; but
    // step 2 reads only the call's inputs, so it can run at step 0: one batched launch there.
    let p = plan(vec![(axpy(&[4], false), &[0, 1], &[2]), (neg(), &[2], &[3]), (axpy(&[4], false), &[0, 1], &[4])], &[3, 4]);
    let o = order(&p);
    assert_eq!(o, [vec![0, 2], vec![1]]);
    assert_valid(&p.0, &o);
    // The last-member rule (the fallback) keeps step 0 in place, and step 2 alone is no
    // batch: three plain launches in the plan's order.
    let links = Links::new(&p.0, p.1);
    let fallback = ordered(3, &last_member_positions(&links, initial_groups(&p.0)));
    assert_eq!(fallback.iter().map(|m| m.to_vec()).collect::<Vec<_>>(), [vec![0], vec![1], vec![2]]);
    // When step 2 reads the negation too, neither position fits both: plain launches.
    let p = plan(vec![(axpy(&[4], false), &[0, 1], &[2]), (neg(), &[2], &[3]), (axpy(&[4], false), &[0, 3], &[4])], &[4]);
    assert_eq!(order(&p), [vec![0], vec![1], vec![2]]);
    // Read after step 2 instead, step 0 waits for it: one batched launch, then the negation.
    let p = plan(vec![(axpy(&[4], false), &[0, 1], &[2]), (axpy(&[4], false), &[0, 1], &[4]), (neg(), &[2], &[3])], &[3, 4]);
    let o = order(&p);
    assert_eq!(o, [vec![0, 1], vec![2]]);
    assert_valid(&p.0, &o);
}

#[test]
fn a_single_member_stays_a_plain_launch() {
    let p = plan(vec![(axpy(&[4], false), &[0, 1], &[2]), (neg(), &[2], &[3]), (axpy(&[4], true), &[3, 1], &[4])], &[4]);
    assert_eq!(order(&p), [vec![0], vec![1], vec![2]]);
}

#[test]
fn different_kernels_do_not_share_a_launch_but_sizes_may_differ() {
    // Steps 0 and 2 read y whole, step 1 reads one value of it: two kernels.
    let p = plan(vec![(axpy(&[4], false), &[0, 1], &[2]), (axpy(&[4], true), &[0, 5], &[3]), (axpy(&[9], false), &[6, 7], &[4])], &[2, 3, 4]);
    assert_eq!(order(&p), [vec![1], vec![0, 2]]);
}

#[test]
fn a_strided_input_or_an_unknown_dim_is_not_batched() {
    let mut strided = axpy(&[2, 3], false);
    if let NodeKind::Fused(f) = &mut strided {
        std::sync::Arc::make_mut(f).inputs[1].1 = Shape::from(vec![1, 3]);
    }
    let p = plan(vec![(strided, &[0, 1], &[2]), (axpy(&[2, 3], false), &[0, 0], &[3])], &[2, 3]);
    let q = plan(vec![(axpy(&[2, 3], false), &[0, 1], &[2]), (axpy(&[2, 3], false), &[0, 0], &[3])], &[2, 3]);
    assert_eq!(order(&p), [vec![0], vec![1]]);
    assert_eq!(order(&q), [vec![0, 1]]);
}

#[test]
fn a_class_larger_than_the_table_starts_as_several_groups() {
    // Two inputs and an output: (496 - 1) / (2 + 3) = 99 runs a launch.
    assert_eq!(batch_capacity(3), 99);
    let steps: Vec<(NodeKind, Vec<usize>, Vec<usize>)> = (0..120).map(|k| (axpy(&[4], false), vec![0, 1], vec![2 + k])).collect();
    let kept: Vec<usize> = (2..122).collect();
    let p = plan(steps.iter().map(|(k, i, o)| (k.clone(), i.as_slice(), o.as_slice())).collect(), &kept);
    let sizes: Vec<usize> = order(&p).iter().map(Vec::len).collect();
    assert_eq!(sizes, [99, 21]);
}

#[test]
fn a_batched_launch_frees_its_members_inputs_after_it() {
    // v1 dies at step 0 in the plan; in the batched launch at step 2 it must live until then.
    let p = plan(vec![(axpy(&[4], false), &[0, 1], &[2]), (neg(), &[0], &[3]), (axpy(&[4], false), &[3, 3], &[4])], &[2, 4]);
    let launches = Launches::new(&p.0, p.1, true);
    assert_eq!(launches.members.iter().map(|m| m.to_vec()).collect::<Vec<_>>(), [vec![1], vec![0, 2]]);
    let frees: Vec<Vec<usize>> = launches.plan.steps.iter().map(|s| s.frees.to_vec()).collect();
    assert_eq!(frees, [vec![], vec![0, 1, 3]]);
    assert_eq!(launches.plan.steps[1].node.inputs.as_slice(), [0, 1, 3, 3]);
    assert_eq!(launches.plan.steps[1].node.outputs.as_slice(), [2, 4]);
    // Without batching: the plan's own steps and frees.
    let plain = Launches::new(&p.0, p.1, false);
    assert_eq!(plain.plan.steps.iter().map(|s| s.frees.to_vec()).collect::<Vec<_>>(), [vec![1], vec![0], vec![3]]);
}

/// An Adam step over parameters of three sizes, traced and optimized as a graph function's
/// body is: the updates share launches, and every value is made before it is read.
#[test]
fn a_traced_adam_step_batches_its_per_parameter_programs() {
    use crate::optim::{Adam, Optimizer};
    use crate::prelude::*;
    let params: Vec<Tensor> = [&[3][..], &[2, 5], &[7]]
        .iter()
        .enumerate()
        .map(|(i, s)| Tensor::randn(s, DType::F32, i as u64).requires_grad_(true).expect("a leaf"))
        .collect();
    let opt = Adam::new(params.clone(), 0.01).expect("an optimizer");
    let x = Tensor::scalar(2.0f32);
    let f = crate::function::ConcreteFunction::trace("adam", &[("x", &x)], || {
        let mut loss = Tensor::scalar(0.0f32);
        for p in &params {
            loss = loss.add(&p.mul(&x)?.mul(p)?.sum()?)?;
        }
        loss.backward()?;
        opt.step()?;
        Ok(vec![loss])
    })
    .expect("traces");
    let graph: &Graph = f.graph();
    let plan = Plan::new(graph);
    let o: Vec<Vec<usize>> = launch_order(&plan, graph.values.len()).into_iter().map(|m| m.to_vec()).collect();
    assert_valid(&plan, &o);
    let program = |s: usize| match &plan.steps[s].node.kind {
        NodeKind::Fused(p) => format!("{}{}", p.summary(), p.shape),
        other => format!("{other:?}").chars().take(12).collect(),
    };
    let text = || format!("{}\n{o:?}\n{:?}", f.to_text(), (0..plan.steps.len()).map(program).collect::<Vec<_>>());
    // The plan: per parameter `p * x` (0, 2, 4), each read by its sum (1, 3, 5) at once, so
    // they launch together at step 0 (they read only the call's inputs); the loss (6); the
    // gradients `2 p x` (7, 8, 9), read only by the `.grad` accumulations after them (10, 11,
    // 12); two 0-d programs of the step counts (14, 16, beside the casts 13, 15); then per
    // parameter its step count and bias corrections (17, 19, 21, 0-d) and its update (18, 20,
    // 22), which reads them.
    let expected: Vec<Vec<usize>> =
        [&[0, 2, 4][..], &[1], &[3], &[5], &[6], &[7, 8, 9], &[10], &[11], &[12], &[13], &[15], &[14, 16], &[17, 19, 21], &[18, 20, 22]]
            .iter()
            .map(|m| m.to_vec())
            .collect();
    assert_eq!(o, expected, "{}", text());
    assert!(program(7).starts_with("mul,mul,mul,add[7]") && program(9).starts_with("mul,mul,mul,add[3]"), "{}", text());
    assert!([17, 19, 21].iter().all(|&s| program(s).ends_with("(11 ops)[]")), "{}", text());
    assert!(program(18).ends_with("(13 ops)[3]") && program(22).ends_with("(13 ops)[7]"), "{}", text());
    // 23 steps, 14 launches.
    assert_eq!(launch_summary(graph), (23, 14, vec![3, 3, 2, 3, 3]));
}
