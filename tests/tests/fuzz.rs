//! The random-program differential fuzz (`tests::fuzz`), a bounded slice of it, and the
//! programs it found, kept as regression tests. Long campaigns: `cargo run --release -p tests
//! --bin fuzz` (docs/TESTING.md). Its own test binary: the slice changes the process-wide
//! SIMD level.

use tensor_core::function::ConcreteFunction;
use tensor_core::kernels::simd::{level, set_max_level, Level};
use tensor_core::ops::CmpOp;
use tensor_core::prelude::*;
use tests::fuzz::{campaign, check, check_relaxed, relaxed_campaign, same_bits, Agreement, DimTest, Dist, Fallible, GradMode, InputSpec, Options};
use tests::fuzz::{Relax, RelaxedProgram, RelaxedStep};

/// Programs per level in the slice: about 10 s of a debug-profile `cargo test` on two cores.
const SLICE: u64 = 18_000;

/// Runs the slice at every SIMD level the CPU has: graph equals eager at each, and each
/// level's eager results equal the baseline's.
#[test]
fn a_slice_of_the_fuzz_finds_no_difference_at_any_level() {
    set_max_level(Level::Avx512);
    let widest = level();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let opts = Options { seed: 20_260_101, programs: SLICE, threads, max_failures: 1, fingerprints: true, ..Options::default() };
    let mut baseline: Option<Vec<Option<u64>>> = None;
    for cap in [Level::Baseline, Level::Avx2, Level::Avx512].into_iter().filter(|&l| l <= widest) {
        set_max_level(cap);
        two_nans_sum_to_the_first(cap);
        let r = campaign(&opts);
        if let Some(f) = r.failures.first() {
            panic!("program {} at {cap:?}: {}\nshrunk: {}\n{}", f.index, f.what, f.shrunk_what, f.rust());
        }
        assert_eq!(r.programs, SLICE);
        assert!(r.ops > 5 * SLICE, "programs of a few ops each: {} ops", r.ops);
        assert!(r.invalid * 200 < SLICE, "{} invalid programs, e.g. {:?}", r.invalid, r.invalid_examples.first());
        assert_eq!(r.zero_grads, 0, "no gradient goes through control flow by default");
        match &baseline {
            None => baseline = Some(r.fingerprints),
            Some(base) => {
                let differ = base.iter().zip(&r.fingerprints).position(|(a, b)| a.is_none() || a != b);
                assert_eq!(differ, None, "eager results of program {differ:?} differ between the baseline and {cap:?}");
            }
        }
    }
    set_max_level(Level::Avx512);
}

/// Relaxed programs in the slice: about half a second of a debug-profile `cargo test`.
const RELAXED_SLICE: u64 = 600;

/// Relaxed-shape programs called at several sizes each (some failing their guards and
/// tracing again) give eager's bits at every size, with few traces.
#[test]
fn a_slice_of_the_relaxed_fuzz_finds_no_difference() {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let r = relaxed_campaign(20_261_127, 0, RELAXED_SLICE, threads);
    if let Some((index, p, what)) = r.failures.first() {
        panic!("relaxed program {index}: {what}\n{p:#?}");
    }
    assert_eq!(r.programs, RELAXED_SLICE);
    assert!(r.reading * 4 > RELAXED_SLICE, "a quarter or more read the batch dim: {}", r.reading);
    assert!(r.traces < r.calls, "relaxed traces serve several sizes: {} traces for {} calls", r.traces, r.calls);
    assert!(r.failed_calls * 5 < r.calls, "most calls are valid: {} of {} failed eagerly", r.failed_calls, r.calls);
}

/// A program that branches on the batch: one relaxed trace per side of its guard, each
/// serving every size on its side, with eager's bits (the check counts the traces).
#[test]
fn a_relaxed_program_branching_on_the_batch_retraces_once_per_side() {
    let p = RelaxedProgram {
        cols: 3,
        steps: vec![RelaxedStep::OverBatch(1, 0), RelaxedStep::Branch(0, DimTest::Less(6)), RelaxedStep::Binary(tests::fuzz::Binary::Add, 2, 1)],
        outputs: vec![3],
        sizes: vec![2, 3, 5, 1, 9, 12, 4, 7],
        relax: Relax::ReduceRetracing,
        seed: 5,
    };
    // [2] exactly, [n0] where n0 < 6 serving 3, 5, 1 and 4; [n0] where n0 >= 6 serving 9, 12, 7.
    assert_eq!(check_relaxed(&p), Ok(3));
    let fixed = RelaxedProgram { relax: Relax::Signature, ..p };
    assert_eq!(check_relaxed(&fixed), Ok(2));
}

/// The same stream gives the same programs (a failure's index reproduces it).
#[test]
fn programs_are_reproducible_from_seed_and_index() {
    let cfg = tests::fuzz::Config::default();
    for i in 0..50 {
        assert_eq!(tests::fuzz::generate(9, i, &cfg), tests::fuzz::generate(9, i, &cfg));
    }
    assert_ne!(tests::fuzz::generate(9, 0, &cfg), tests::fuzz::generate(9, 1, &cfg));
}

/// The harness is not vacuous: a function that computes differently when traced is caught.
#[test]
fn check_reports_a_graph_that_differs() {
    let specs = [InputSpec::new(DType::F32, &[3], Dist::Normal, 5)];
    let f = |x: &[Tensor]| -> Result<Vec<Tensor>> {
        let y = if executing_eagerly() { x[0].mul(3.0)? } else { x[0].mul(3.0)?.add(1e-7)? };
        Ok(vec![y])
    };
    let err = check(&specs, GradMode::None, false, &f).expect_err("the traced function adds 1e-7");
    assert!(err.detail.starts_with("output 0: element"), "{err}");
}

/// The program: a matmul fed by a fused `where`/`div` (row-major in the graph, eager's
/// result column-major, as its `where_` operand was) and a transposed operand. gemm picked its
/// kernel by the operands' strides, so the two orders of summation differed by 1 ulp.
#[test]
fn matmul_result_does_not_depend_on_the_layout_fusion_hands_it() -> Result<()> {
    fn f(x0: &Tensor, x1: &Tensor, x2: &Tensor) -> Result<Tensor> {
        let cond = x2.softmax(-1)?.compare(CmpOp::Lt, x2)?;
        let a = Tensor::where_(&cond, x2, x1)?;
        let b = x0.maximum(x0)?;
        let c = a.div(&x1.abs()?.add(0.5)?)?;
        c.matmul(&b.t()?)
    }
    let s = 762276714u64;
    let x0 = Tensor::randn(&[4, 3], DType::F32, s * 31);
    let x1 = Tensor::randn(&[1, 3], DType::F32, s * 31 + 1);
    let x2 = Tensor::randn(&[4, 1], DType::F32, s * 31 + 2);
    let cf = ConcreteFunction::trace("f", &[("x0", &x0), ("x1", &x1), ("x2", &x2)], || Ok(vec![f(&x0, &x1, &x2)?]))?;
    assert!(cf.to_text().contains("fused[where,div]"), "{}", cf.to_text());
    let graph = cf.call(&[&x0, &x1, &x2])?;
    assert_eq!(same_bits(&f(&x0, &x1, &x2)?, &graph[0]), Ok(()));
    Ok(())
}

/// A fused program whose dying input could not become its output (a row of a larger buffer
/// nothing else held) freed that input before reading it: the gradient came out as garbage.
#[test]
fn a_fused_program_reads_a_dying_input_it_cannot_reuse() {
    let program = |x: &[Tensor]| -> Result<Vec<Tensor>> {
        let row = Tensor::ones(&[2, 6], DType::F32).mul(&x[1])?.narrow(0, 0, 1)?.reshape([6])?;
        let c = Tensor::from_vec(vec![0.75f32], &[])?;
        let gt = c.compare(CmpOp::Gt, &x[0])?.cast(DType::F32).fallible()?;
        let g = (1.0 - &gt).mul(&row)?;
        // Two outputs of one fused program: g, and the update of x0 in place.
        x[0].sub_(&g.mul(-2.0)?)?;
        Ok(vec![g])
    };
    let inputs =
        [InputSpec::new(DType::F32, &[6], Dist::Normal, 492762000080195), InputSpec::new(DType::F32, &[2, 6], Dist::Normal, 492762000080200)];
    assert_eq!(check(&inputs, GradMode::None, false, &program), Ok(Agreement::Same));
}

/// `x ^ 1.0` is not `x` for a NaN with its sign set (powf returns +NaN), so simplification
/// must keep it.
#[test]
fn a_float_power_of_one_is_not_simplified_away() {
    let program = |x: &[Tensor]| -> Result<Vec<Tensor>> { Ok(vec![x[0].log()?.pow(1.0)?]) };
    let inputs = [InputSpec::new(DType::F32, &[5], Dist::Ties, 12525967027109130)];
    assert_eq!(check(&inputs, GradMode::None, false, &program), Ok(Agreement::Same));
    let x = Tensor::from_vec(vec![-1.0f32], &[1]).expect("one value");
    let nan = x.log().expect("log").to_vec::<f32>().expect("f32")[0];
    assert!(nan.is_nan() && nan.is_sign_negative(), "log(-1) is a negative NaN on this CPU");
}

/// `zero_` broadcasts zero to its target's shape; with its dims unknown in the trace the
/// graph panicked when it ran. Now tracing says why it cannot. (`assign_` from a source of
/// the same shape gives the graph the dims, and works.)
#[test]
fn zeroing_a_tensor_of_unknown_shape_is_an_error_when_traced() {
    use tensor_core::shape::UNKNOWN;
    let x = Tensor::ones(&[2, 3], DType::F32);
    let f = |x: &Tensor| -> Result<Vec<Tensor>> {
        let y = x.mul(2.0)?;
        y.zero_()?;
        Ok(vec![y])
    };
    let relaxed = ConcreteFunction::trace_with_shapes("f", &[("x", &x)], &[Shape::new(&[UNKNOWN, UNKNOWN])], true, || f(&x));
    let err = relaxed.expect_err("zero_ on a value of unknown shape").to_string();
    assert!(err.contains("zero_") && err.contains("unknown"), "{err}");
    assert_eq!(f(&x).expect("eagerly it works")[0].to_vec::<f32>().expect("f32"), vec![0.0; 6]);
    let g = |x: &Tensor| -> Result<Vec<Tensor>> {
        let y = x.mul(2.0)?;
        y.assign_(&x.add(1.0)?)?;
        Ok(vec![y])
    };
    let relaxed = ConcreteFunction::trace_with_shapes("g", &[("x", &x)], &[Shape::new(&[UNKNOWN, UNKNOWN])], true, || g(&x)).expect("same shapes");
    assert_eq!(same_bits(&g(&x).expect("eager")[0], &relaxed.call(&[&x]).expect("graph")[0]), Ok(()));
}

/// Two reshapes merged into one kept the second one's `-1`, which a relaxed trace cannot
/// resolve to the size the first one fixed: the optimized graph's types no longer checked.
#[test]
fn merged_reshapes_keep_their_known_dims_in_a_relaxed_trace() -> Result<()> {
    use tensor_core::shape::UNKNOWN;
    let x = Tensor::from_vec(vec![1i32, 2, 3], &[1, 3, 1])?;
    let f = |x: &Tensor| -> Result<Vec<Tensor>> { Ok(vec![x.reshape([3, 1, 1, 1])?.flatten_from(2)?]) };
    let relaxed = ConcreteFunction::trace_with_shapes("f", &[("x", &x)], &[Shape::new(&[UNKNOWN; 3])], true, || f(&x))?;
    assert_eq!(same_bits(&f(&x)?[0], &relaxed.call(&[&x])?[0]), Ok(()));
    Ok(())
}

/// A sum of two NaNs of different signs (`g + (-g)` in a gradient, `g` a NaN): which one
/// comes out was the compiled loop's choice (the compiler may swap the operands of `+`), and
/// the fused loop chose differently from the eager one at the baseline level. (Run at each
/// level by the slice above.)
fn two_nans_sum_to_the_first(cap: Level) {
    let program = |x: &[Tensor]| -> Result<Vec<Tensor>> {
        let labels = Tensor::from_vec(vec![0i32, 0, 0, 1, 0], &[5])?;
        let loss = x[0].cross_entropy(&labels)?;
        loss.sub_(&loss)?; // 0, so the division below gives ±inf and NaN
        Ok(vec![x[1].div(&loss)?.sum().fallible()?])
    };
    let inputs = [
        InputSpec::new(DType::F32, &[5, 2], Dist::Normal, 23095254447085735).requires_grad(),
        InputSpec::new(DType::F32, &[2, 1, 3, 5], Dist::Normal, 23095254447085739),
    ];
    assert_eq!(check(&inputs, GradMode::Functional, false, &program), Ok(Agreement::Same), "{cap:?}");
}

/// Flattening an empty batch (`[0, 1, 5]`) failed eagerly — `[0, -1]` is ambiguous — while the
/// relaxed graph, whose `-1` stood for the batch, gave `[0, 5]`. The flattened size is now the
/// product of the rest when it is known, as in PyTorch.
#[test]
fn an_empty_batch_flattens_eagerly_as_in_the_relaxed_graph() -> Result<()> {
    let empty = Tensor::zeros(&[0, 1, 5], DType::F32);
    assert_eq!(empty.flatten_from(1)?.dims(), vec![0, 5]);
    let p = RelaxedProgram {
        cols: 5,
        steps: vec![RelaxedStep::Regroup(0, 1)],
        outputs: vec![1],
        sizes: vec![4, 0, 5, 0],
        relax: Relax::ReduceRetracing,
        seed: 3,
    };
    assert_eq!(check_relaxed(&p), Ok(2));
    Ok(())
}
