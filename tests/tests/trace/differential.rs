//! Eager == graph, bit for bit: every public op on `Tensor`, run eagerly and
//! traced with `ConcreteFunction::trace` then called — with the inputs it was traced with and
//! with new inputs of the same shapes — gives the same dtype, shape and bits; so does every
//! op's gradient, with `backward` inside the traced body and `.grad` read after the call
//! (twice, so accumulation into existing grads is checked too). Then random op programs
//! (proptest) over a register file of tensors, run eagerly and traced.

use proptest::prelude::*;
use tensor_core::function::ConcreteFunction;
use tensor_core::graph::validate;
use tensor_core::ops::CmpOp;
use tensor_core::prelude::*;
use tensor_core::Element;
use tests::{assert_bits_eq, is_float, per_dtype, vals};

/// Test cases as boxed closures: one input, two inputs, a list updated in place.
type UnaryCase = Box<dyn Fn(&Tensor) -> Result<Tensor>>;
type BinaryCase = Box<dyn Fn(&Tensor, &Tensor) -> Result<Tensor>>;
type InPlaceCase = Box<dyn Fn(&[Tensor]) -> Result<Vec<Tensor>>>;

// ------------------------------------------------------------------------------ data

/// `n` deterministic pseudo-random values in `[lo, hi)` (an LCG; `seed` picks the stream).
fn uniform(n: usize, seed: u64, lo: f64, hi: f64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x2545_F491_4F6C_DD1D;
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            lo + (hi - lo) * ((s >> 11) as f64 / (1u64 << 53) as f64)
        })
        .collect()
}

/// A tensor of `T` with values in `[lo, hi)` (integers: the floor of them).
fn data<T: Element>(dims: &[usize], seed: u64, lo: f64, hi: f64) -> Tensor {
    let v = uniform(dims.iter().product(), seed, lo, hi);
    let v: Vec<f64> = if is_float::<T>() { v } else { v.into_iter().map(f64::floor).collect() };
    Tensor::from_vec(vals::<T>(&v), dims).expect("data fills its shape")
}

/// Values on a grid of halves in `[lo, hi)`, so comparisons, max/min and argmax meet ties.
fn grid<T: Element>(dims: &[usize], seed: u64, lo: f64, hi: f64) -> Tensor {
    let v: Vec<f64> = uniform(dims.iter().product(), seed, lo, hi).into_iter().map(|x| (x * 2.0).floor() / 2.0).collect();
    let v: Vec<f64> = if is_float::<T>() { v } else { v.into_iter().map(f64::floor).collect() };
    Tensor::from_vec(vals::<T>(&v), dims).expect("data fills its shape")
}

/// Indices in `0..size` of dtype `dtype` (i64 or i32).
fn index(dims: &[usize], seed: u64, size: usize, dtype: DType) -> Tensor {
    let v: Vec<i64> = uniform(dims.iter().product(), seed ^ 0xABCD, 0.0, size as f64).into_iter().map(|x| x as i64).collect();
    match dtype {
        DType::I32 => Tensor::from_vec(v.into_iter().map(|x| x as i32).collect(), dims),
        _ => Tensor::from_vec(v, dims),
    }
    .expect("data fills its shape")
}

/// A bool tensor.
fn mask(dims: &[usize], seed: u64) -> Tensor {
    let v = uniform(dims.iter().product(), seed ^ 0x5151, 0.0, 1.0).into_iter().map(|x| x < 0.5).collect();
    Tensor::from_vec(v, dims).expect("data fills its shape")
}

/// A fixed gradient for `y` (same dtype and dims) made from plain data, so that inside a
/// trace it is a constant, not ops.
fn cotangent(y: &Tensor) -> Tensor {
    let dims = y.dims();
    let v = uniform(dims.iter().product(), 77, -1.0, 1.0);
    match y.dtype() {
        DType::F32 => Tensor::from_vec(v.into_iter().map(|x| x as f32).collect(), &dims),
        _ => Tensor::from_vec(v, &dims),
    }
    .expect("data fills its shape")
}

// ------------------------------------------------------------------------------ harness

type Make<'a> = &'a dyn Fn(u64) -> Vec<Tensor>;
type Body<'a> = &'a dyn Fn(&[Tensor]) -> Result<Vec<Tensor>>;
type Scalar1<'a> = &'a dyn Fn(&[Tensor]) -> Result<Tensor>;

/// Asserts `eager` and `graph` are the same bits, saying which case differs.
#[track_caller]
fn same(ctx: &str, eager: &Tensor, graph: &Tensor) {
    let equal = eager.dtype() == graph.dtype() && eager.shape() == graph.shape() && eager.bit_eq(graph).expect("concrete");
    if !equal {
        eprintln!("{ctx}: eager and graph differ");
    }
    assert_bits_eq(eager, graph);
}

/// Traces `f` with `inputs` as the arguments `a0, a1, ...` and checks the graph is valid.
fn trace(name: &str, inputs: &[Tensor], f: Body) -> Result<ConcreteFunction> {
    let names: Vec<String> = (0..inputs.len()).map(|i| format!("a{i}")).collect();
    let args: Vec<(&str, &Tensor)> = names.iter().map(String::as_str).zip(inputs).collect();
    let cf = ConcreteFunction::trace(name, &args, || f(inputs))?;
    assert_eq!(validate(cf.traced_graph()), Ok(()), "{name}: the traced graph is invalid");
    assert_eq!(validate(cf.graph()), Ok(()), "{name}: the graph that runs is invalid");
    Ok(cf)
}

fn refs(v: &[Tensor]) -> Vec<&Tensor> {
    v.iter().collect()
}

/// `f` eagerly and as a graph, on the inputs it was traced with and on new ones: the same
/// outputs, and the same argument values after the call (in-place updates of arguments).
fn check(name: &str, make: Make, f: Body) -> Result<()> {
    let traced_with = make(0);
    let cf = trace(name, &traced_with, f)?;
    for (i, (t, fresh)) in traced_with.iter().zip(make(0)).enumerate() {
        same(&format!("{name}: argument {i} after tracing (tracing must not change it)"), &fresh, t);
    }
    for seed in [0, 1, 2] {
        let eager_in = make(seed);
        let eager_out = f(&eager_in)?;
        let graph_in = make(seed);
        let graph_out = cf.call(&refs(&graph_in))?;
        assert_eq!(eager_out.len(), graph_out.len(), "{name}: number of outputs");
        for (i, (e, g)) in eager_out.iter().zip(&graph_out).enumerate() {
            same(&format!("{name} (inputs {seed}): output {i}"), e, g);
        }
        for (i, (e, g)) in eager_in.iter().zip(&graph_in).enumerate() {
            same(&format!("{name} (inputs {seed}): argument {i} after the call"), e, g);
        }
    }
    Ok(())
}

/// Makes the float tensors of `inputs` leaves that require grad.
fn leaves(inputs: Vec<Tensor>) -> Result<Vec<Tensor>> {
    for t in &inputs {
        if t.dtype().is_float() {
            t.requires_grad_(true)?;
        }
    }
    Ok(inputs)
}

/// The gradient of `f` eagerly and inside a graph (`backward_from` a fixed cotangent in the
/// body, `.grad` read after the call): the same output and grads, on the traced inputs and
/// on new ones, and again after a second call accumulates into the grads.
fn check_grad(name: &str, make: Make, f: Scalar1) -> Result<()> {
    let forward_backward = |inputs: &[Tensor]| -> Result<Tensor> {
        let y = f(inputs)?;
        y.backward_from(&cotangent(&y))?;
        Ok(y)
    };
    let traced_with = leaves(make(0))?;
    let cf = trace(&format!("{name}_grad"), &traced_with, &|a| Ok(vec![forward_backward(a)?]))?;
    assert!(traced_with.iter().all(|t| t.grad().is_none()), "{name}: tracing must not write real grads");
    for seed in [0, 1] {
        let eager_in = leaves(make(seed))?;
        let graph_in = leaves(make(seed))?;
        for round in 1..=2 {
            let e = forward_backward(&eager_in)?;
            let g = cf.call(&refs(&graph_in))?;
            same(&format!("{name} (inputs {seed}, call {round}): output"), &e, &g[0]);
            for (i, (a, b)) in eager_in.iter().zip(&graph_in).enumerate() {
                match (a.grad(), b.grad()) {
                    (Some(ga), Some(gb)) => same(&format!("{name} (inputs {seed}, call {round}): grad of input {i}"), &ga, &gb),
                    // An input the output does not depend on gets no grad either way.
                    (None, None) => {}
                    (ga, gb) => panic!("{name}: grad of input {i}: eager {ga:?}, graph {gb:?}"),
                }
            }
        }
    }
    Ok(())
}

/// `check` and, for float `T`, `check_grad` of a one-output function.
fn check_both<T: Element>(name: &str, make: Make, f: Scalar1) -> Result<()> {
    check(name, make, &|a| Ok(vec![f(a)?]))?;
    if is_float::<T>() {
        check_grad(name, make, f)?;
    }
    Ok(())
}

type UnaryFn = fn(&Tensor) -> Result<Tensor>;

// ------------------------------------------------------------------------------ elementwise

fn unary_float_ops<T: Element>() -> Result<()> {
    let ops: [(&str, UnaryFn, f64, f64); 7] = [
        ("exp", Tensor::exp, -4.0, 4.0),
        ("log", Tensor::log, 0.05, 5.0),
        ("sqrt", Tensor::sqrt, 0.0, 9.0),
        ("tanh", Tensor::tanh, -5.0, 5.0),
        ("sigmoid", Tensor::sigmoid, -8.0, 8.0),
        ("exp_wide", Tensor::exp, -100.0, 100.0),
        ("tanh_wide", Tensor::tanh, -30.0, 30.0),
    ];
    for (name, op, lo, hi) in ops {
        // An odd length, so vectorized kernels also run their tails.
        check_both::<T>(name, &|s| vec![data::<T>(&[5, 37], s, lo, hi)], &|a| op(&a[0]))?;
    }
    Ok(())
}
per_dtype!(unary_float_ops: f32, f64);

fn unary_numeric_ops<T: Element>() -> Result<()> {
    let ops: [(&str, UnaryFn); 4] = [("neg", Tensor::neg), ("relu", Tensor::relu), ("abs", Tensor::abs), ("neg_operator", |x| Ok(-x))];
    for (name, op) in ops {
        check_both::<T>(name, &|s| vec![grid::<T>(&[3, 5], s, -4.0, 4.0)], &|a| op(&a[0]))?;
    }
    // sign has no gradient.
    check("sign", &|s| vec![grid::<T>(&[3, 5], s, -2.0, 2.0)], &|a| Ok(vec![a[0].sign()?, -&a[0]]))
}
per_dtype!(unary_numeric_ops: f32, f64, i32, i64);

#[test]
fn logical_not_and_bool_sum() -> Result<()> {
    check("logical_not", &|s| vec![mask(&[3, 4], s)], &|a| Ok(vec![a[0].logical_not()?, a[0].sum()?]))
}

/// Operand shape pairs that broadcast in every way NumPy allows.
const PAIRS: [(&[usize], &[usize]); 6] =
    [(&[3, 4], &[3, 4]), (&[3, 1], &[1, 4]), (&[3, 4], &[4]), (&[4], &[3, 1]), (&[], &[3, 4]), (&[2, 3, 4], &[3, 1])];

fn binary_tensor_ops<T: Element>() -> Result<()> {
    let float = is_float::<T>();
    type BinFn = fn(&Tensor, &Tensor) -> Result<Tensor>;
    // (name, op, lhs range, rhs range)
    type Range = (f64, f64);
    let ops: [(&str, BinFn, Range, Range); 11] = [
        ("add", |a, b| a.add(b), (-5.0, 5.0), (-5.0, 5.0)),
        ("sub", |a, b| a.sub(b), (-5.0, 5.0), (-5.0, 5.0)),
        ("mul", |a, b| a.mul(b), (-5.0, 5.0), (-5.0, 5.0)),
        ("div", |a, b| a.div(b), (-5.0, 5.0), if float { (0.25, 4.0) } else { (-4.0, 4.0) }),
        ("pow", |a, b| a.pow(b), if float { (0.25, 3.0) } else { (-3.0, 4.0) }, if float { (-2.0, 2.0) } else { (0.0, 4.0) }),
        ("maximum", |a, b| a.maximum(b), (-2.0, 2.0), (-2.0, 2.0)),
        ("minimum", |a, b| a.minimum(b), (-2.0, 2.0), (-2.0, 2.0)),
        ("add_operator", |a, b| Ok(a + b), (-5.0, 5.0), (-5.0, 5.0)),
        ("sub_operator", |a, b| Ok(a.clone() - b), (-5.0, 5.0), (-5.0, 5.0)),
        ("mul_operator", |a, b| Ok(a * b.clone()), (-5.0, 5.0), (-5.0, 5.0)),
        ("div_operator", |a, b| Ok(a.clone() / b.clone()), (-5.0, 5.0), if float { (0.25, 4.0) } else { (1.0, 4.0) }),
    ];
    for (name, op, (l0, l1), (r0, r1)) in ops {
        for (k, (sa, sb)) in PAIRS.iter().enumerate() {
            let case = format!("{name} {sa:?} {sb:?}");
            // max/min data on a grid so the operands tie.
            let make = |s: u64| vec![grid::<T>(sa, s, l0, l1), grid::<T>(sb, s + 100, r0, r1)];
            let smooth = |s: u64| vec![data::<T>(sa, s, l0, l1), data::<T>(sb, s + 100, r0, r1)];
            let make: Make = if name.starts_with("max") || name.starts_with("min") || !float { &make } else { &smooth };
            check(&case, make, &|a| Ok(vec![op(&a[0], &a[1])?]))?;
            // Gradients for every op; broadcasting pairs only for the first few (the sum_to
            // adjoint is the same for all ops).
            if float && (k < 3 || name == "mul") {
                check_grad(&case, make, &|a| op(&a[0], &a[1]))?;
            }
        }
    }
    Ok(())
}
per_dtype!(binary_tensor_ops: f32, f64, i32, i64);

fn binary_scalar_ops<T: Element>() -> Result<()> {
    let s = if is_float::<T>() { 0.3 } else { 3.0 };
    let ops: Vec<(&str, UnaryCase)> = vec![
        ("add_scalar", Box::new(move |x: &Tensor| x.add(s))),
        ("sub_scalar", Box::new(move |x: &Tensor| x.sub(s))),
        ("mul_scalar", Box::new(move |x: &Tensor| x.mul(s))),
        ("div_scalar", Box::new(move |x: &Tensor| x.div(s))),
        ("pow_scalar", Box::new(|x: &Tensor| x.pow(2.0))),
        ("powf", Box::new(|x: &Tensor| x.powf(3.0))),
        ("maximum_scalar", Box::new(|x: &Tensor| x.maximum(0.5))),
        ("minimum_scalar", Box::new(|x: &Tensor| x.minimum(0.5))),
        ("tensor_plus_scalar", Box::new(move |x: &Tensor| Ok(x + s))),
        ("tensor_minus_scalar", Box::new(move |x: &Tensor| Ok(x.clone() - s))),
        ("tensor_times_scalar", Box::new(move |x: &Tensor| Ok(x * s))),
        ("tensor_over_scalar", Box::new(move |x: &Tensor| Ok(x / s))),
        ("scalar_plus_tensor", Box::new(move |x: &Tensor| Ok(s + x))),
        ("scalar_minus_tensor", Box::new(move |x: &Tensor| Ok(s - x))),
        ("scalar_times_tensor", Box::new(move |x: &Tensor| Ok(s * x.clone()))),
        ("scalar_over_tensor", Box::new(move |x: &Tensor| Ok(s / x))),
        ("i64_minus_tensor", Box::new(|x: &Tensor| Ok(3i64 - x))),
        ("i64_over_tensor", Box::new(|x: &Tensor| Ok(7i64 / x))),
        ("int_literal_plus_tensor", Box::new(|x: &Tensor| Ok(2 + x))),
        ("i64_times_tensor", Box::new(|x: &Tensor| Ok(2i64 * x))),
    ];
    for (name, op) in &ops {
        let lo = if is_float::<T>() { 0.25 } else { -4.0 };
        check_both::<T>(name, &|seed| vec![data::<T>(&[3, 4], seed, lo, 4.0)], &|a| op(&a[0]))?;
    }
    Ok(())
}
per_dtype!(binary_scalar_ops: f32, f64, i32, i64);

fn comparisons<T: Element>() -> Result<()> {
    let make = |s: u64| vec![grid::<T>(&[3, 4], s, -2.0, 2.0), grid::<T>(&[4], s + 1, -2.0, 2.0)];
    check("compare_tensors", &make, &|a| {
        let (x, y) = (&a[0], &a[1]);
        Ok(vec![x.eq(y)?, x.ne(y)?, x.lt(y)?, x.le(y)?, x.gt(y)?, x.ge(y)?, x.compare(CmpOp::Le, y)?])
    })?;
    check("compare_scalars", &make, &|a| {
        let x = &a[0];
        Ok(vec![x.eq(0.5)?, x.ne(0.0)?, x.lt(1.0)?, x.le(-0.5)?, x.gt(0)?, x.ge(1.0)?, x.compare(CmpOp::Gt, -1.0)?])
    })
}
per_dtype!(comparisons: f32, f64, i32, i64);

fn where_and_clamp<T: Element>() -> Result<()> {
    let make = |s: u64| vec![mask(&[3, 1], s), data::<T>(&[3, 4], s, -3.0, 3.0), data::<T>(&[4], s + 1, -3.0, 3.0)];
    check_both::<T>("where_", &make, &|a| Tensor::where_(&a[0], &a[1], &a[2]))?;
    check_both::<T>("where_computed_condition", &make, &|a| Tensor::where_(&a[1].gt(&a[2])?, &a[1], &a[2]))?;
    let make = |s: u64| vec![grid::<T>(&[4, 5], s, -3.0, 3.0)];
    check_both::<T>("clamp", &make, &|a| a[0].clamp(-1.0, 1.5))?;
    check_both::<T>("clamp_min", &make, &|a| a[0].clamp_min(0.5))?;
    check_both::<T>("clamp_max", &make, &|a| a[0].clamp_max(-0.5))
}
per_dtype!(where_and_clamp: f32, f64, i32, i64);

fn casts<T: Element>() -> Result<()> {
    let make = |s: u64| vec![data::<T>(&[3, 5], s, -6.0, 6.0), mask(&[3, 5], s)];
    check("cast", &make, &|a| {
        let mut out: Vec<Tensor> = DType::ALL.iter().map(|&d| a[0].cast(d)).collect::<Result<_>>()?;
        out.extend(DType::ALL.iter().map(|&d| a[1].cast(d)).collect::<Result<Vec<_>>>()?);
        Ok(out)
    })?;
    if is_float::<T>() {
        let other = if T::DTYPE == DType::F32 { DType::F64 } else { DType::F32 };
        check_grad("cast_float", &|s| vec![data::<T>(&[3, 5], s, -6.0, 6.0)], &|a| a[0].cast(other)?.mul(1.5)?.cast(T::DTYPE))?;
    }
    Ok(())
}
per_dtype!(casts: f32, f64, i32, i64);

/// Long elementwise chains (what fusion merges into one loop, evaluated in chunks, with
/// buffers reused in place) on tensors large enough for several chunks and odd tails.
fn elementwise_chains<T: Element>() -> Result<()> {
    let float = is_float::<T>();
    let make = |s: u64| vec![data::<T>(&[301, 257], s, -3.0, 3.0), data::<T>(&[257], s + 1, 0.5, 3.0), data::<T>(&[301, 1], s + 2, -2.0, 2.0)];
    check_both::<T>("chain_arith", &make, &|a| {
        let y = (&a[0] * 2.0 + &a[1]) * &a[2] - 1.0;
        let y = (3.0f64 - &y).maximum(&a[2])?.minimum(&(&a[1] * 4.0))?;
        let y = y.clamp(-5.0, 50.0)?.abs()?.relu()?;
        let y = Tensor::where_(&y.gt(&a[1])?, &y, &(-&y))?;
        Ok(&y / &a[1] + &a[0])
    })?;
    if float {
        check_both::<T>("chain_transcendental", &make, &|a| {
            let y = a[0].exp()?.add(&a[1].log()?)?.tanh()?;
            let y = y.sigmoid()?.mul(&a[2].sqrt()?.add(&a[0].abs()?)?.sqrt()?)?;
            let y = y.pow(&a[1])?.sub(&a[0].neg()?.exp()?)?;
            y.cast(DType::F64)?.mul(0.5)?.cast(T::DTYPE)
        })?;
        // Results shared by several consumers, and a chain feeding a reduction.
        check("chain_shared", &make, &|a| {
            let t = a[0].tanh()?;
            let u = (&t * &t).sub(&a[1])?;
            let v = t.exp()?.add(&u)?;
            Ok(vec![u.sum_axes(&[1], true)?, v.mean()?, t])
        })?;
    }
    Ok(())
}
per_dtype!(elementwise_chains: f32, f64, i32, i64);

// ------------------------------------------------------------------------------ reductions

const AXES: [&[isize]; 7] = [&[0], &[1], &[2], &[-1], &[0, 2], &[1, 2], &[0, 1, 2]];

fn reductions<T: Element>() -> Result<()> {
    let float = is_float::<T>();
    let make = |s: u64| vec![grid::<T>(&[2, 3, 4], s, -3.0, 3.0)];
    check_both::<T>("sum", &make, &|a| a[0].sum())?;
    check_both::<T>("max", &make, &|a| a[0].max())?;
    check_both::<T>("min", &make, &|a| a[0].min())?;
    if float {
        check_both::<T>("mean", &make, &|a| a[0].mean())?;
    }
    for axes in AXES {
        for keepdim in [false, true] {
            let name = |op: &str| format!("{op}_axes {axes:?} keepdim={keepdim}");
            check_both::<T>(&name("sum"), &make, &|a| a[0].sum_axes(axes, keepdim))?;
            check_both::<T>(&name("max"), &make, &|a| a[0].max_axes(axes, keepdim))?;
            check_both::<T>(&name("min"), &make, &|a| a[0].min_axes(axes, keepdim))?;
            if float {
                check_both::<T>(&name("mean"), &make, &|a| a[0].mean_axes(axes, keepdim))?;
            }
        }
    }
    for axis in [0, 1, 2, -1] {
        for keepdim in [false, true] {
            check(&format!("argmax {axis} keepdim={keepdim}"), &make, &|a| Ok(vec![a[0].argmax(axis, keepdim)?]))?;
        }
    }
    // Large enough for the blocked summation order (blocks of 16 Ki elements).
    let big = |s: u64| vec![data::<T>(&[3, 20_011], s, -1.0, 1.0)];
    check("sum_large", &big, &|a| Ok(vec![a[0].sum()?, a[0].sum_axes(&[1], false)?, a[0].sum_axes(&[0], true)?, a[0].max()?]))?;
    if float {
        check_both::<T>("mean_large", &big, &|a| a[0].mean_axes(&[1], true))?;
    }
    Ok(())
}
per_dtype!(reductions: f32, f64, i32, i64);

// ------------------------------------------------------------------------------ matmul

fn matmuls<T: Element>() -> Result<()> {
    let shapes: [(&[usize], &[usize]); 6] = [
        (&[3, 4], &[4, 5]),
        (&[2, 3, 4], &[2, 4, 5]),
        (&[2, 3, 4], &[4, 5]),
        (&[1, 3, 4], &[2, 4, 2]),
        (&[2, 1, 3, 4], &[3, 4, 2]),
        (&[17, 33], &[33, 19]),
    ];
    for (sa, sb) in shapes {
        let make = |s: u64| vec![data::<T>(sa, s, -3.0, 3.0), data::<T>(sb, s + 9, -3.0, 3.0)];
        check_both::<T>(&format!("matmul {sa:?} {sb:?}"), &make, &|a| a[0].matmul(&a[1]))?;
    }
    Ok(())
}
per_dtype!(matmuls: f32, f64, i32, i64);

// ------------------------------------------------------------------------------ layout

fn layout_ops<T: Element>() -> Result<()> {
    let x = |s: u64| vec![data::<T>(&[2, 3, 4], s, -5.0, 5.0)];
    let cases: Vec<(&str, UnaryCase)> = vec![
        ("reshape", Box::new(|x: &Tensor| x.reshape([4, 6]))),
        ("reshape_infer", Box::new(|x: &Tensor| x.reshape([-1, 4]))),
        ("reshape_flat", Box::new(|x: &Tensor| x.reshape([24]))),
        ("permute", Box::new(|x: &Tensor| x.permute(&[2, 0, 1]))),
        ("permute_negative", Box::new(|x: &Tensor| x.permute(&[-1, 0, -2]))),
        ("transpose", Box::new(|x: &Tensor| x.transpose(0, 2))),
        ("transpose_negative", Box::new(|x: &Tensor| x.transpose(-1, -2))),
        ("t", Box::new(|x: &Tensor| x.reshape([6, 4])?.t())),
        ("permute_then_reshape", Box::new(|x: &Tensor| x.permute(&[1, 2, 0])?.reshape([-1]))),
        ("broadcast_to", Box::new(|x: &Tensor| x.broadcast_to(&[5, 2, 3, 4]))),
        ("broadcast_to_ones", Box::new(|x: &Tensor| x.narrow(1, 0, 1)?.broadcast_to(&[2, 6, 4]))),
        ("unsqueeze", Box::new(|x: &Tensor| x.unsqueeze(0))),
        ("unsqueeze_last", Box::new(|x: &Tensor| x.unsqueeze(-1))),
        ("squeeze", Box::new(|x: &Tensor| x.unsqueeze(2)?.squeeze(2))),
        ("flatten_from_1", Box::new(|x: &Tensor| x.flatten_from(1))),
        ("flatten_from_0", Box::new(|x: &Tensor| x.flatten_from(0))),
        ("narrow", Box::new(|x: &Tensor| x.narrow(1, 1, 2))),
        ("slice", Box::new(|x: &Tensor| x.slice(2, 1..3))),
        ("slice_to", Box::new(|x: &Tensor| x.slice(0, ..1))),
        ("slice_from", Box::new(|x: &Tensor| x.slice(-1, 2..))),
        ("slice_inclusive", Box::new(|x: &Tensor| x.slice(1, 0..=1))),
        ("select", Box::new(|x: &Tensor| x.select(1, 2))),
        ("select_last", Box::new(|x: &Tensor| x.select(-1, 0))),
    ];
    for (name, op) in &cases {
        check_both::<T>(name, &x, &|a| op(&a[0]))?;
    }
    let three = |s: u64| vec![data::<T>(&[2, 3, 4], s, -5.0, 5.0), data::<T>(&[2, 1, 4], s + 1, -5.0, 5.0), data::<T>(&[2, 2, 4], s + 2, -5.0, 5.0)];
    check_both::<T>("concat", &three, &|a| Tensor::concat(&[&a[0], &a[1], &a[2]], 1))?;
    check_both::<T>("concat_negative_axis", &three, &|a| Tensor::concat(&[&a[0], &a[0]], -1))?;
    check_both::<T>("concat_axis0", &three, &|a| Tensor::concat(&[&a[0], &a[0].mul(2.0)?], 0))?;
    let two = |s: u64| vec![data::<T>(&[3, 4], s, -5.0, 5.0), data::<T>(&[3, 4], s + 1, -5.0, 5.0)];
    for axis in [0, 1, 2, -1] {
        check_both::<T>(&format!("stack {axis}"), &two, &|a| Tensor::stack(&[&a[0], &a[1], &a[0]], axis))?;
    }
    Ok(())
}
per_dtype!(layout_ops: f32, f64, i32, i64);

// ------------------------------------------------------------------------------ indexing

fn indexing<T: Element>() -> Result<()> {
    for dt in [DType::I64, DType::I32] {
        let make = |s: u64| vec![data::<T>(&[4, 3], s, -5.0, 5.0), index(&[6], s, 4, dt), index(&[5], s + 1, 3, dt)];
        check_both::<T>(&format!("index_select 0 {dt}"), &make, &|a| a[0].index_select(0, &a[1]))?;
        check_both::<T>(&format!("index_select 1 {dt}"), &make, &|a| a[0].index_select(-1, &a[2]))?;
        let make = |s: u64| vec![data::<T>(&[4, 3], s, -5.0, 5.0), index(&[4, 5], s, 3, dt), index(&[2, 3], s + 1, 4, dt)];
        check_both::<T>(&format!("gather 1 {dt}"), &make, &|a| a[0].gather(1, &a[1]))?;
        check_both::<T>(&format!("gather 0 {dt}"), &make, &|a| a[0].gather(0, &a[2]))?;
        let labels = |s: u64| vec![index(&[7], s, 4, dt), index(&[2, 3], s + 1, 5, dt)];
        check(&format!("one_hot {dt}"), &labels, &|a| Ok(vec![a[0].one_hot(4, T::DTYPE)?, a[1].one_hot(5, T::DTYPE)?]))?;
    }
    Ok(())
}
per_dtype!(indexing: f32, f64, i32, i64);

// ------------------------------------------------------------------------------ nn

fn nn_ops<T: Element>() -> Result<()> {
    let shapes: [&[usize]; 2] = [&[4, 5], &[2, 3, 4]];
    for dims in shapes {
        let make = |s: u64| vec![data::<T>(dims, s, -4.0, 4.0)];
        for axis in [0, -1] {
            check_both::<T>(&format!("softmax {dims:?} {axis}"), &make, &|a| a[0].softmax(axis))?;
            check_both::<T>(&format!("log_softmax {dims:?} {axis}"), &make, &|a| a[0].log_softmax(axis))?;
        }
    }
    for dt in [DType::I64, DType::I32] {
        let make = |s: u64| vec![data::<T>(&[6, 5], s, -4.0, 4.0), index(&[6], s, 5, dt)];
        check_both::<T>(&format!("cross_entropy {dt}"), &make, &|a| a[0].cross_entropy(&a[1]))?;
    }
    let make = |s: u64| vec![data::<T>(&[2, 3, 7, 6], s, -1.0, 1.0), data::<T>(&[4, 3, 3, 3], s + 1, -1.0, 1.0), data::<T>(&[4], s + 2, -1.0, 1.0)];
    check_both::<T>("conv2d", &make, &|a| a[0].conv2d(&a[1], Some(&a[2]), [1, 1], [1, 1]))?;
    check_both::<T>("conv2d_strided_padded", &make, &|a| a[0].conv2d(&a[1], Some(&a[2]), [2, 1], [0, 2]))?;
    check_both::<T>("conv2d_no_bias", &make, &|a| a[0].conv2d(&a[1], None, [1, 2], [1, 0]))?;
    let make = |s: u64| vec![grid::<T>(&[2, 3, 6, 7], s, -2.0, 2.0)];
    check_both::<T>("max_pool2d", &make, &|a| a[0].max_pool2d([2, 2], [2, 2]))?;
    check_both::<T>("max_pool2d_overlapping", &make, &|a| a[0].max_pool2d([3, 2], [1, 2]))?;
    check_both::<T>("max_pool2d_padded", &make, &|a| a[0].max_pool2d_padded([3, 3], [2, 2], [1, 1]))?;
    check_both::<T>("max_pool2d_padded_uneven", &make, &|a| a[0].max_pool2d_padded([2, 3], [1, 2], [1, 0]))?;
    Ok(())
}
per_dtype!(nn_ops: f32, f64);

// ------------------------------------------------------------------------------ transformer ops

/// A generator state `[key, counter]` as a tensor argument (so the harness compares it after
/// the eager and graph runs: the draws must advance it alike).
fn rng_state(seed: u64) -> Tensor {
    Tensor::from_vec(vec![seed as i64 + 11, 3], &[2]).expect("two values")
}

fn transformer_ops<T: Element>() -> Result<()> {
    use tensor_core::ops::AttentionOptions;
    // An odd length, so vectorized kernels also run their tails.
    let x = |s: u64| vec![data::<T>(&[5, 37], s, -6.0, 6.0)];
    check_both::<T>("gelu", &x, &|a| a[0].gelu())?;
    check_both::<T>("gelu_tanh", &x, &|a| a[0].gelu_tanh())?;
    check_both::<T>("erf", &x, &|a| a[0].erf())?;
    check_both::<T>("gelu_chain", &x, &|a| a[0].mul(1.5)?.gelu_tanh()?.add(&a[0])?.gelu())?;
    let ln = |s: u64| vec![data::<T>(&[3, 4, 9], s, -3.0, 3.0), data::<T>(&[9], s + 1, 0.5, 2.0), data::<T>(&[9], s + 2, -1.0, 1.0)];
    check_both::<T>("layer_norm", &ln, &|a| a[0].layer_norm(&[9], Some(&a[1]), Some(&a[2]), 1e-5))?;
    check_both::<T>("layer_norm_plain", &ln, &|a| a[0].layer_norm(&[4, 9], None, None, 1e-5))?;
    for dt in [DType::I64, DType::I32] {
        let emb = |s: u64| vec![data::<T>(&[7, 5], s, -2.0, 2.0), index(&[3, 4], s, 7, dt)];
        check_both::<T>(&format!("embedding {dt}"), &emb, &|a| a[0].embedding(&a[1]))?;
    }
    let scores = |s: u64| vec![data::<T>(&[2, 6, 6], s, -4.0, 4.0), mask(&[6, 6], s)];
    check_both::<T>("masked_fill", &scores, &|a| a[0].masked_fill(&a[1], -1.5))?;
    check_both::<T>("causal_softmax", &scores, &|a| a[0].masked_fill(&Tensor::causal_mask(6), f64::NEG_INFINITY)?.softmax(-1))?;
    let qkv =
        |s: u64| vec![data::<T>(&[2, 3, 5, 8], s, -2.0, 2.0), data::<T>(&[2, 3, 5, 8], s + 1, -2.0, 2.0), data::<T>(&[2, 3, 5, 8], s + 2, -2.0, 2.0)];
    check_both::<T>("sdpa", &qkv, &|a| a[0].scaled_dot_product_attention(&a[1], &a[2], AttentionOptions::default()))?;
    check_both::<T>("sdpa_causal", &qkv, &|a| {
        a[0].scaled_dot_product_attention(&a[1], &a[2], AttentionOptions { causal: true, ..Default::default() })
    })?;
    // Heads split by reshape and transpose, as a model does: the matmuls read transposed views.
    check_both::<T>("sdpa_heads", &qkv, &|a| {
        let heads = |t: &Tensor| t.reshape([2, 5, 3, 8])?.transpose(1, 2);
        let y =
            heads(&a[0])?.scaled_dot_product_attention(&heads(&a[1])?, &heads(&a[2])?, AttentionOptions { causal: true, ..Default::default() })?;
        y.transpose(1, 2)?.reshape([2, 5, 24])
    })?;
    // Random draws from a state passed as an argument: the same numbers and the same advanced
    // state eagerly and in the graph, on every call.
    let with_state = |s: u64| vec![data::<T>(&[4, 33], s, -2.0, 2.0), rng_state(s)];
    check("draws", &with_state, &|a| {
        let g = Generator::from_state(a[1].clone())?;
        Ok(vec![Tensor::rand_gen(&[3, 5], T::DTYPE, &g)?, Tensor::randn_gen(&[7], T::DTYPE, &g)?, a[0].rand_like_gen(&g)?, a[0].randn_like_gen(&g)?])
    })?;
    check_both::<T>("dropout", &with_state, &|a| a[0].dropout(0.4, &Generator::from_state(a[1].clone())?))?;
    check_both::<T>("sdpa_dropout", &qkv, &|a| {
        let g = Generator::new(5);
        a[0].scaled_dot_product_attention(&a[1], &a[2], AttentionOptions { causal: true, dropout: 0.2, generator: Some(&g), ..Default::default() })
    })
}
per_dtype!(transformer_ops: f32, f64);

// ------------------------------------------------------------------------------ in place

fn in_place_on_arguments<T: Element>() -> Result<()> {
    let float = is_float::<T>();
    let make = move |s: u64| vec![data::<T>(&[3, 4], s, -5.0, 5.0), data::<T>(&[4], s + 1, if float { 0.5 } else { -3.0 }, 3.0)];
    // Each updates argument a0 in place; the harness compares a0 after eager and graph runs.
    let cases: Vec<(&str, InPlaceCase)> = vec![
        ("add_", Box::new(|a: &[Tensor]| a[0].add_(&a[1]).map(|_| vec![]))),
        ("sub_", Box::new(|a: &[Tensor]| a[0].sub_(&a[1]).map(|_| vec![]))),
        ("mul_", Box::new(|a: &[Tensor]| a[0].mul_(&a[1]).map(|_| vec![]))),
        ("div_", Box::new(|a: &[Tensor]| a[0].div_(&a[1]).map(|_| vec![]))),
        ("assign_", Box::new(|a: &[Tensor]| a[0].assign_(&a[1]).map(|_| vec![]))),
        ("zero_", Box::new(|a: &[Tensor]| a[0].zero_().map(|_| vec![]))),
        (
            "scalar_ops_",
            Box::new(|a: &[Tensor]| {
                a[0].add_(1.5)?;
                a[0].mul_(2.0)?;
                a[0].sub_(0.25)?;
                a[0].div_(3.0)?;
                Ok(vec![])
            }),
        ),
        (
            "chain_and_read",
            Box::new(|a: &[Tensor]| {
                let before = a[0].mul(1.0)?;
                a[0].add_(&a[1])?;
                let mid = a[0].sum_axes(&[1], false)?;
                a[0].mul_(&a[0])?;
                a[1].sub_(1.0)?;
                Ok(vec![before, mid, a[0].clone(), a[1].clone()])
            }),
        ),
    ];
    for (name, f) in &cases {
        check(name, &make, f.as_ref())?;
    }
    Ok(())
}
per_dtype!(in_place_on_arguments: f32, f64, i32, i64);

fn in_place_on_values<T: Element>() -> Result<()> {
    let float = is_float::<T>();
    let nonzero = if float { 0.5 } else { 1.0 };
    let make = move |s: u64| {
        vec![
            data::<T>(&[3, 4], s, -5.0, 5.0),
            data::<T>(&[4], s + 1, -3.0, 3.0),
            data::<T>(&[3, 1], s + 2, -3.0, 3.0),
            data::<T>(&[3, 4], s + 3, nonzero, 3.0),
        ]
    };
    check_both::<T>("in_place_chain", &make, &|a| {
        let y = a[0].mul(1.0)?;
        y.add_(&a[1])?;
        y.mul_(&a[2])?;
        y.sub_(0.5)?;
        y.div_(&a[3])?;
        y.add_(2.0)?;
        y.mul_(&y)?;
        Ok(y)
    })?;
    check_both::<T>("assign_value", &make, &|a| {
        let y = a[0].mul(2.0)?;
        y.assign_(&a[1].mul(3.0)?)?;
        y.add(&a[0])
    })?;
    // A tensor created inside the body and then updated in place (a constant that becomes a
    // graph value while tracing).
    check_both::<T>("in_place_on_created", &make, &|a| {
        let c = Tensor::zeros(&[3, 4], T::DTYPE);
        c.add_(&a[0])?;
        c.mul_(&a[3])?;
        c.sub_(&a[2])?;
        Ok(c)
    })
}
per_dtype!(in_place_on_values: f32, f64, i32, i64);

// ------------------------------------------------------------------------------ functional and higher-order grads

/// `grad` (functional, create_graph) inside the body: first and second derivatives come out
/// of the graph as outputs, the same bits as eagerly; `.grad`s stay untouched.
fn higher_order<T: Element>() -> Result<()> {
    // Every function goes through z = x @ w, so both inputs reach every derivative.
    let fns: Vec<(&str, BinaryCase)> = vec![
        ("tanh", Box::new(|z: &Tensor, _: &Tensor| z.tanh()?.sum())),
        ("sigmoid_exp", Box::new(|z: &Tensor, x: &Tensor| z.sigmoid()?.mul(&x.exp()?)?.sum())),
        ("cube", Box::new(|z: &Tensor, _: &Tensor| z.powf(3.0)?.sum())),
        ("softmax", Box::new(|z: &Tensor, x: &Tensor| z.softmax(-1)?.mul(x)?.sum())),
        ("log_softmax_square", Box::new(|z: &Tensor, _: &Tensor| z.log_softmax(1)?.powf(2.0)?.mean())),
        (
            "conv2d",
            Box::new(|z: &Tensor, x: &Tensor| {
                let img = z.reshape([1, 1, 3, 4])?;
                let k = x.narrow(0, 0, 2)?.narrow(1, 0, 2)?.reshape([1, 1, 2, 2])?;
                img.conv2d(&k, None, [1, 1], [1, 1])?.tanh()?.sum()
            }),
        ),
    ];
    for (name, f) in &fns {
        let make = |s: u64| leaves(vec![data::<T>(&[3, 4], s, -1.5, 1.5), data::<T>(&[4, 4], s + 1, -1.0, 1.0)]).expect("float leaves");
        check(&format!("second_order {name}"), &make, &|a| {
            let (x, w) = (&a[0], &a[1]);
            let y = f(&x.matmul(w)?, x)?;
            let gs = tensor_core::grad(&[&y], &[x, w], true)?;
            let gx_sum = gs[0].mul(&gs[0])?.sum()?.add(&gs[1].sum()?)?;
            let gg = tensor_core::grad(&[&gx_sum], &[x, w], false)?;
            assert!(x.grad().is_none() && w.grad().is_none(), "grad() leaves .grad untouched");
            Ok(vec![y.detach(), gs[0].detach(), gs[1].detach(), gg[0].clone(), gg[1].clone()])
        })?;
    }
    Ok(())
}
per_dtype!(higher_order: f32, f64);

/// `backward` twice (retain_graph), `retain_grad` on an intermediate, and `.grad` read inside
/// the body after backward.
fn backward_variants<T: Element>() -> Result<()> {
    let make = |s: u64| leaves(vec![data::<T>(&[2, 3], s, -2.0, 2.0), data::<T>(&[3], s + 1, -2.0, 2.0)]).expect("float leaves");
    check("retain_graph_and_retain_grad", &make, &|a| {
        let (x, b) = (&a[0], &a[1]);
        let h = x.mul(b)?.tanh()?;
        h.retain_grad()?;
        let y = h.mul(&h)?.sum()?;
        y.backward_opts(None, tensor_core::BackwardOptions { retain_graph: Some(true), create_graph: false })?;
        y.backward()?;
        let (gx, gb, gh) = (x.grad().expect("x.grad"), b.grad().expect("b.grad"), h.grad().expect("h.grad"));
        Ok(vec![y, gx, gb, gh])
    })
}
per_dtype!(backward_variants: f32, f64);

// ------------------------------------------------------------------------------ random programs

/// One instruction over the register file; operands are register numbers taken modulo the
/// registers defined so far.
#[derive(Clone, Debug)]
enum Instr {
    Unary(u8, usize),
    Binary(u8, usize, usize),
    Scalar { op: u8, src: usize, quarter: i8, scalar_first: bool },
    Reduce { op: u8, src: usize, axis: usize, keepdim: bool },
    Matmul(usize, usize),
}

fn instr() -> impl Strategy<Value = Instr> {
    prop_oneof![
        3 => (0u8..8, any::<usize>()).prop_map(|(o, s)| Instr::Unary(o, s)),
        4 => (0u8..6, any::<usize>(), any::<usize>()).prop_map(|(o, a, b)| Instr::Binary(o, a, b)),
        3 => (0u8..4, any::<usize>(), -8i8..=8, any::<bool>()).prop_map(|(op, src, quarter, scalar_first)| Instr::Scalar { op, src, quarter, scalar_first }),
        2 => (0u8..4, any::<usize>(), 0usize..3, any::<bool>()).prop_map(|(op, src, axis, keepdim)| Instr::Reduce { op, src, axis, keepdim }),
        2 => (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Instr::Matmul(a, b)),
    ]
}

fn broadcasts(a: &[usize], b: &[usize]) -> bool {
    a.iter().rev().zip(b.iter().rev()).all(|(&x, &y)| x == y || x == 1 || y == 1)
}

fn unary(op: u8, x: &Tensor) -> Result<Tensor> {
    match op {
        0 => x.neg(),
        1 => x.exp(),
        2 => x.tanh(),
        3 => x.sigmoid(),
        4 => x.relu(),
        5 => x.abs(),
        6 => x.abs()?.sqrt(),
        _ => x.abs()?.add(1.0)?.log(),
    }
}

fn binary(op: u8, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    // Operands that do not broadcast meet as tensor and 0-d sum instead.
    let b = if broadcasts(&a.dims(), &b.dims()) { b.clone() } else { b.sum()? };
    match op {
        0 => Ok(a + &b),
        1 => Ok(a - &b),
        2 => Ok(a * &b),
        3 => a.div(&b),
        4 => a.maximum(&b),
        _ => a.minimum(&b),
    }
}

fn scalar(op: u8, x: &Tensor, s: f64, first: bool) -> Tensor {
    match (op, first) {
        (0, false) => x + s,
        (0, true) => s + x,
        (1, false) => x - s,
        (1, true) => s - x,
        (2, false) => x * s,
        (2, true) => s * x,
        (_, false) => x / s,
        (_, true) => s / x,
    }
}

fn reduce(op: u8, x: &Tensor, axis: usize, keepdim: bool) -> Result<Tensor> {
    if x.rank() == 0 {
        return x.sum();
    }
    let axes = [(axis % x.rank()) as isize];
    match op {
        0 => x.sum_axes(&axes, keepdim),
        1 => x.mean_axes(&axes, keepdim),
        2 => x.max_axes(&axes, keepdim),
        _ => x.min_axes(&axes, keepdim),
    }
}

fn matmul(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let (da, db) = (a.dims(), b.dims());
    match (da.len(), db.len()) {
        (2, 2) if da[1] == db[0] => a.matmul(b),
        (2, 2) if da[1] == db[1] => a.matmul(&b.t()?),
        (2, _) => a.matmul(&a.t()?),
        _ => Ok(a * b.sum()?),
    }
}

/// Runs `program` over registers that start as `inputs`; returns every register it defined.
fn run_program(inputs: &[Tensor], program: &[Instr]) -> Result<Vec<Tensor>> {
    let mut regs: Vec<Tensor> = inputs.to_vec();
    for ins in program {
        let r = |i: usize| &regs[i % regs.len()];
        let out = match *ins {
            Instr::Unary(op, s) => unary(op, r(s))?,
            Instr::Binary(op, a, b) => binary(op, r(a), r(b))?,
            Instr::Scalar { op, src, quarter, scalar_first } => scalar(op, r(src), f64::from(quarter) / 4.0 + 0.125, scalar_first),
            Instr::Reduce { op, src, axis, keepdim } => reduce(op, r(src), axis, keepdim)?,
            Instr::Matmul(a, b) => matmul(r(a), r(b))?,
        };
        regs.push(out);
    }
    Ok(regs.split_off(inputs.len()))
}

fn program_inputs(seed: u64, dtype: DType) -> Vec<Tensor> {
    let shapes: [&[usize]; 4] = [&[3, 1], &[1, 4], &[4], &[3, 4]];
    shapes
        .iter()
        .enumerate()
        .map(|(i, s)| match dtype {
            DType::F32 => data::<f32>(s, seed * 4 + i as u64, -2.0, 2.0),
            _ => data::<f64>(s, seed * 4 + i as u64, -2.0, 2.0),
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: tests::proptest_cases(64), ..ProptestConfig::default() })]

    #[test]
    fn random_programs_trace_bit_identically(
        program in prop::collection::vec(instr(), 10..=18),
        seed in 0u64..1_000_000,
        double in any::<bool>(),
    ) {
        let dtype = if double { DType::F64 } else { DType::F32 };
        let traced_with = program_inputs(seed, dtype);
        let cf = trace("program", &traced_with, &|a| run_program(a, &program)).unwrap();
        prop_assert!(cf.traced_graph().nodes.len() >= program.len());
        for s in [seed, seed + 1] {
            let inputs = program_inputs(s, dtype);
            let eager = run_program(&inputs, &program).unwrap();
            let graph = cf.call(&refs(&inputs)).unwrap();
            prop_assert_eq!(eager.len(), graph.len());
            for (i, (e, g)) in eager.iter().zip(&graph).enumerate() {
                same(&format!("register {i} of {program:?}"), e, g);
            }
        }
    }
}
