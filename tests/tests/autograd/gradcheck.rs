//! Finite-difference gradient checks, in f64, for every differentiable op.
//!
//! `gradcheck(f, inputs)` compares the analytic gradient of `sum(f(x) * R)` (for a fixed
//! random `R`) with central differences of the same function, for every float input and
//! every element. Inputs are drawn from a seeded generator, away from the points where an op
//! is not differentiable (ties for max/relu/abs/clamp, non-positive arguments of log/sqrt,
//! negative bases of pow). Second-order gradients are checked the same way, by running
//! `gradcheck` on a function that itself returns a gradient computed with `create_graph`.
//!
//! Every check runs both ways: the body eagerly, and the body traced into a graph whose call
//! is differentiated from outside; the two must give the same output and gradient bits.

use tensor_core::function::ConcreteFunction;
use tensor_core::prelude::*;
use tests::as_f64;

// ------------------------------------------------------------------------------ the checker

/// Step and tolerance of one check: `|analytic - numeric| <= tol * max(1, |numeric|)`.
#[derive(Clone, Copy)]
struct Tol {
    eps: f64,
    tol: f64,
}

const F64_TOL: Tol = Tol { eps: 1e-6, tol: 1e-6 };

/// The seed of the fixed random weights `R` of `sum(f(x) * R)`.
const WEIGHT_SEED: u64 = 0x5eed;

/// Checks the gradients `f` computes against central differences (f64, eps 1e-6, 1e-6
/// relative).
#[track_caller]
fn gradcheck(f: impl Fn(&[Tensor]) -> Result<Tensor>, inputs: &[Tensor]) {
    gradcheck_with(f, inputs, F64_TOL)
}

/// Fresh leaves for one evaluation: float inputs require grad, the others (indices,
/// conditions) are passed as they are.
fn leaves(inputs: &[Tensor]) -> Vec<Tensor> {
    inputs.iter().map(|t| if t.dtype().is_float() { t.detach().requires_grad_(true).unwrap() } else { t.clone() }).collect()
}

/// `sum(f(inputs) * r)` computed in f64 on the host.
fn weighted_sum(f: &impl Fn(&[Tensor]) -> Result<Tensor>, inputs: &[Tensor], r: &[f64]) -> f64 {
    let out = f(&leaves(inputs)).expect("forward");
    as_f64(&out).iter().zip(r).map(|(o, w)| o * w).sum()
}

/// `inputs` with element `j` of input `i` moved by `delta`.
fn perturbed(inputs: &[Tensor], i: usize, j: usize, delta: f64) -> Vec<Tensor> {
    let mut out = inputs.to_vec();
    let mut v = as_f64(&inputs[i]);
    v[j] += delta;
    let t = Tensor::from_vec(v, &inputs[i].dims()).unwrap();
    out[i] = t.cast(inputs[i].dtype()).unwrap();
    out
}

#[track_caller]
fn gradcheck_with(f: impl Fn(&[Tensor]) -> Result<Tensor>, inputs: &[Tensor], tol: Tol) {
    check_gradients(f, inputs, tol, true)
}

/// [`gradcheck`] of the eager body only, for bodies a graph cannot hold (an output whose
/// length depends on a captured tensor's values).
fn gradcheck_eager(f: impl Fn(&[Tensor]) -> Result<Tensor>, inputs: &[Tensor]) {
    check_gradients(f, inputs, F64_TOL, false)
}

fn check_gradients(f: impl Fn(&[Tensor]) -> Result<Tensor>, inputs: &[Tensor], tol: Tol, as_graph_call_too: bool) {
    let xs = leaves(inputs);
    let out = f(&xs).expect("forward");
    assert!(out.requires_grad(), "the output does not require grad");
    let r = Tensor::randn(&out.dims(), out.dtype(), WEIGHT_SEED);
    let loss = out.mul(&r).unwrap().sum().unwrap();
    loss.backward().expect("backward");
    if as_graph_call_too {
        assert_graph_call_same_gradients(&f, inputs, &xs, &out, &r);
    }
    let r = as_f64(&r);
    let mut any_nonzero = false;
    for (i, x) in inputs.iter().enumerate().filter(|(_, x)| x.dtype().is_float()) {
        let n = x.numel();
        let analytic = match xs[i].grad() {
            Some(g) => {
                assert_eq!((g.dtype(), g.dims()), (x.dtype(), x.dims()), "input {i}: the gradient's dtype and shape");
                as_f64(&g)
            }
            None => vec![0.0; n],
        };
        for (j, &a) in analytic.iter().enumerate() {
            let plus = weighted_sum(&f, &perturbed(inputs, i, j, tol.eps), &r);
            let minus = weighted_sum(&f, &perturbed(inputs, i, j, -tol.eps), &r);
            let numeric = (plus - minus) / (2.0 * tol.eps);
            any_nonzero |= numeric.abs() > 1e-3;
            let err = (a - numeric).abs();
            assert!(
                err <= tol.tol * numeric.abs().max(1.0),
                "input {i} {:?}, element {j}: analytic {a}, numeric {numeric} (error {err:e})",
                x.dims()
            );
        }
    }
    assert!(any_nonzero, "every numeric gradient is zero: the check proves nothing");
}

/// The second way: `f`'s body traced into a graph, called, and differentiated from outside
/// (eager `backward()` through the call's grad node). The output and every gradient must
/// have the bits of the eager run (`xs` holds its gradients, `out` its output).
#[track_caller]
fn assert_graph_call_same_gradients(f: &impl Fn(&[Tensor]) -> Result<Tensor>, inputs: &[Tensor], xs: &[Tensor], out: &Tensor, r: &Tensor) {
    let ys = leaves(inputs);
    let names: Vec<String> = (0..ys.len()).map(|i| format!("x{i}")).collect();
    let args: Vec<(&str, &Tensor)> = names.iter().map(String::as_str).zip(&ys).collect();
    let graph = ConcreteFunction::trace("gradcheck_body", &args, || Ok(vec![f(&ys)?])).expect("trace");
    let out_graph = graph.call(&ys.iter().collect::<Vec<_>>()).expect("graph call").remove(0);
    assert_eq!(bit_vec(&out_graph), bit_vec(out), "the graph call's output");
    assert_eq!(out_graph.grad_fn().map(|g| g.name()), Some("gradcheck_bodyBackward"));
    out_graph.mul(r).unwrap().sum().unwrap().backward().expect("backward through the graph call");
    for (i, (x, y)) in xs.iter().zip(&ys).enumerate().filter(|(_, (x, _))| x.dtype().is_float()) {
        assert_eq!(x.grad().map(|g| bit_vec(&g)), y.grad().map(|g| bit_vec(&g)), "input {i}: graph call vs eager gradient bits");
    }
}

fn bit_vec(t: &Tensor) -> Vec<u64> {
    as_f64(t).iter().map(|v| v.to_bits()).collect()
}

/// `f` turned into the function `x -> d sum(f(x) * R1) / dx` (all float inputs, flattened
/// and concatenated), computed with `create_graph`; gradchecking it checks the second-order
/// gradients (Hessian-vector products) of `f`.
fn first_order(f: impl Fn(&[Tensor]) -> Result<Tensor>) -> impl Fn(&[Tensor]) -> Result<Tensor> {
    move |xs: &[Tensor]| {
        let out = f(xs)?;
        let r = Tensor::randn(&out.dims(), out.dtype(), WEIGHT_SEED + 1);
        let loss = out.mul(&r)?.sum()?;
        let floats: Vec<&Tensor> = xs.iter().filter(|x| x.dtype().is_float()).collect();
        let grads = tensor_core::grad(&[&loss], &floats, true)?;
        let flat: Vec<Tensor> = grads.iter().map(|g| g.reshape([-1])).collect::<Result<_>>()?;
        Tensor::concat(&flat.iter().collect::<Vec<_>>(), 0)
    }
}

// ------------------------------------------------------------------------------ test data

/// A seeded source of f64 test tensors.
struct Gen(u64);

impl Gen {
    fn seed(&mut self) -> u64 {
        self.0 += 1;
        self.0.wrapping_mul(0x9e37_79b9_7f4a_7c15)
    }

    /// Standard normal values.
    fn normal(&mut self, dims: &[usize]) -> Tensor {
        Tensor::randn(dims, DType::F64, self.seed())
    }

    /// Uniform values in `[lo, hi)`.
    fn uniform(&mut self, dims: &[usize], lo: f64, hi: f64) -> Tensor {
        let v = as_f64(&Tensor::rand(dims, DType::F64, self.seed()));
        from(v.iter().map(|u| lo + (hi - lo) * u).collect(), dims)
    }

    /// Values with `|v| >= 0.25` (away from the kinks of relu and abs, the pole of 1/x).
    fn nonzero(&mut self, dims: &[usize]) -> Tensor {
        let v = as_f64(&self.normal(dims));
        from(v.iter().map(|u| u.signum() * (0.25 + u.abs())).collect(), dims)
    }

    /// Distinct values, pairwise at least 0.1 apart, in random order (no ties for max/min).
    fn distinct(&mut self, dims: &[usize]) -> Tensor {
        let u = as_f64(&Tensor::rand(dims, DType::F64, self.seed()));
        let mut order: Vec<usize> = (0..u.len()).collect();
        order.sort_by(|&a, &b| u[a].total_cmp(&u[b]));
        let mut v = vec![0.0; u.len()];
        let half = u.len() as f64 / 2.0;
        for (rank, &pos) in order.iter().enumerate() {
            v[pos] = (rank as f64 - half) * 0.1 + 0.01 * u[pos];
        }
        from(v, dims)
    }

    /// `len` i64 indices in `0..size`.
    fn index(&mut self, dims: &[usize], size: usize) -> Tensor {
        let u = as_f64(&Tensor::rand(dims, DType::F64, self.seed()));
        Tensor::from_vec(u.iter().map(|x| (x * size as f64) as i64).collect(), dims).unwrap()
    }
}

/// One input, as the slice `gradcheck` takes.
fn one(x: &Tensor) -> &[Tensor] {
    std::slice::from_ref(x)
}

fn from(v: Vec<f64>, dims: &[usize]) -> Tensor {
    Tensor::from_vec(v, dims).unwrap()
}

/// Asserts no element of `a` is within `gap` of the one of `b` it meets when broadcast.
#[track_caller]
fn assert_no_ties(a: &Tensor, b: &Tensor, gap: f64) {
    let d = a.sub(b).unwrap().abs().unwrap().min().unwrap().item::<f64>().unwrap();
    assert!(d > gap, "inputs too close to a tie ({d})");
}

/// The broadcasting shape pairs every binary op is checked on.
const PAIRS: [(&[usize], &[usize]); 5] = [(&[3, 1, 4], &[2, 4]), (&[2, 3], &[2, 3]), (&[4], &[]), (&[], &[2, 3]), (&[2, 1], &[1, 3])];

// ------------------------------------------------------------------------------ elementwise

#[test]
fn add_sub_mul_div_tensor_tensor_with_broadcasting() {
    let mut g = Gen(1);
    for (sa, sb) in PAIRS {
        let (a, b) = (g.normal(sa), g.normal(sb));
        gradcheck(|x| x[0].add(&x[1]), &[a.clone(), b.clone()]);
        gradcheck(|x| x[0].sub(&x[1]), &[a.clone(), b.clone()]);
        gradcheck(|x| x[0].mul(&x[1]), &[a.clone(), b.clone()]);
        gradcheck(|x| x[0].div(&x[1]), &[a.clone(), g.nonzero(sb)]);
        gradcheck(|x| Ok(&x[0] * &x[1] - &x[0] / &x[1] + &x[1]), &[a.clone(), g.nonzero(sb)]);
    }
}

#[test]
fn the_same_tensor_on_both_sides() {
    let mut g = Gen(2);
    let x = g.nonzero(&[2, 3]);
    gradcheck(|x| x[0].mul(&x[0]), one(&x));
    gradcheck(|x| x[0].div(&x[0].add(3.0)?), one(&x));
    gradcheck(|x| x[0].sub(&x[0].tanh()?), one(&x));
}

#[test]
fn scalar_on_either_side() {
    let mut g = Gen(3);
    let x = g.normal(&[2, 3]);
    let nz = g.nonzero(&[2, 3]);
    gradcheck(|x| Ok(&x[0] + 2.5), one(&x));
    gradcheck(|x| Ok(2.5 + &x[0]), one(&x));
    gradcheck(|x| Ok(&x[0] - 2.5), one(&x));
    gradcheck(|x| Ok(2.5 - &x[0]), one(&x));
    gradcheck(|x| Ok(&x[0] * -1.5), one(&x));
    gradcheck(|x| Ok(-1.5 * &x[0]), one(&x));
    gradcheck(|x| Ok(&x[0] / 1.5), one(&x));
    gradcheck(|x| Ok(1.5 / &x[0]), one(&nz));
    gradcheck(|x| x[0].add(2.5), one(&x));
    gradcheck(|x| x[0].sub(2.5), one(&x));
    gradcheck(|x| x[0].mul(2.5), one(&x));
    gradcheck(|x| x[0].div(2.5), one(&x));
    // Scalars of another Rust type take the tensor's dtype.
    gradcheck(|x| Ok(&x[0] * 2.0f32 + 3i32), one(&x));
    gradcheck(|x| x[0].maximum(0.1), one(&x));
    gradcheck(|x| x[0].minimum(0.1), one(&x));
    assert_no_ties(&x, &Tensor::scalar(0.1f64), 1e-3);
}

#[test]
fn unary_math() {
    let mut g = Gen(4);
    let dims = [3, 4];
    let x = g.normal(&dims);
    let pos = g.uniform(&dims, 0.3, 3.0);
    let nz = g.nonzero(&dims);
    gradcheck(|x| x[0].neg(), one(&x));
    gradcheck(|x| Ok(-&x[0]), one(&x));
    gradcheck(|x| x[0].exp(), one(&x));
    gradcheck(|x| x[0].log(), one(&pos));
    gradcheck(|x| x[0].sqrt(), one(&pos));
    gradcheck(|x| x[0].tanh(), one(&x));
    gradcheck(|x| x[0].sigmoid(), one(&x));
    gradcheck(|x| x[0].relu(), one(&nz));
    gradcheck(|x| x[0].abs(), one(&nz));
    // 0-d and large-ish inputs.
    gradcheck(|x| x[0].tanh()?.exp(), &[Tensor::scalar(0.7f64)]);
    gradcheck(|x| x[0].sigmoid(), &[from(vec![-6.0, -2.0, 0.0, 2.0, 6.0], &[5])]);
}

#[test]
fn pow_with_tensor_and_scalar_exponents() {
    let mut g = Gen(5);
    for (sa, sb) in PAIRS {
        gradcheck(|x| x[0].pow(&x[1]), &[g.uniform(sa, 0.4, 2.5), g.normal(sb)]);
    }
    let pos = g.uniform(&[2, 3], 0.4, 2.5);
    gradcheck(|x| x[0].powf(2.5), one(&pos));
    gradcheck(|x| x[0].powf(-1.5), one(&pos));
    gradcheck(|x| x[0].powf(0.5), one(&pos));
    gradcheck(|x| x[0].pow(3.0), one(&pos));
    // An integer exponent is smooth for negative bases too.
    gradcheck(|x| x[0].powf(3.0), &[g.normal(&[2, 3])]);
    gradcheck(|x| x[0].powf(2.0), &[g.normal(&[2, 3])]);
    // A constant base (a tensor that needs no grad) and a variable exponent.
    let base = g.uniform(&[3], 0.4, 2.5);
    gradcheck(move |x| base.pow(&x[0]), &[g.normal(&[2, 3])]);
}

#[test]
fn clamp_maximum_minimum() {
    let mut g = Gen(6);
    let x = g.normal(&[4, 5]);
    for bound in [-0.5, 0.5] {
        assert_no_ties(&x, &Tensor::scalar(bound), 1e-3);
    }
    gradcheck(|x| x[0].clamp(-0.5, 0.5), one(&x));
    gradcheck(|x| x[0].clamp_min(-0.5), one(&x));
    gradcheck(|x| x[0].clamp_max(0.5), one(&x));
    for (sa, sb) in PAIRS {
        let (a, b) = (g.normal(sa), g.normal(sb));
        assert_no_ties(&a, &b, 1e-3);
        gradcheck(|x| x[0].maximum(&x[1]), &[a.clone(), b.clone()]);
        gradcheck(|x| x[0].minimum(&x[1]), &[a.clone(), b.clone()]);
    }
}

#[test]
fn where_with_broadcasting() {
    let mut g = Gen(7);
    let cond = g.normal(&[4]).gt(0.0).unwrap();
    let (a, b) = (g.normal(&[3, 1, 4]), g.normal(&[2, 4]));
    gradcheck(|x| Tensor::where_(&x[0], &x[1], &x[2]), &[cond.clone(), a.clone(), b.clone()]);
    let cond = g.normal(&[3, 2, 1]).gt(0.0).unwrap();
    gradcheck(|x| Tensor::where_(&x[0], &x[1], &x[2]), &[cond, g.normal(&[4]), g.normal(&[])]);
    // The usual use: a condition computed from the input itself.
    gradcheck(|x| Tensor::where_(&x[0].gt(0.0)?, &x[0].exp()?, &x[0].mul(&x[0])?), &[g.nonzero(&[3, 4])]);
}

#[test]
fn cast_chains() {
    let mut g = Gen(8);
    let x = g.normal(&[3, 4]);
    // f64 -> f64 is the identity.
    gradcheck(|x| x[0].cast(DType::F64)?.tanh()?.cast(DType::F64), one(&x));
    // Through f32 and back: exactly the f32-rounded output gradient, by hand ...
    let leaf = x.detach().requires_grad_(true).unwrap();
    let r = Tensor::randn(&[3, 4], DType::F64, 11);
    leaf.cast(DType::F32).unwrap().cast(DType::F64).unwrap().mul(&r).unwrap().sum().unwrap().backward().unwrap();
    tests::assert_bits_eq(&leaf.grad().unwrap(), &r.cast(DType::F32).unwrap().cast(DType::F64).unwrap());
    assert_eq!(leaf.grad_fn().map(|f| f.name()), None);
    // ... and by finite differences, with a step and tolerance fit for f32.
    gradcheck_with(|x| x[0].cast(DType::F32)?.tanh()?.mul(2.0)?.cast(DType::F64), one(&x), Tol { eps: 1e-2, tol: 1e-3 });
    // An f32 input all the way.
    gradcheck_with(|x| x[0].mul(&x[0])?.sigmoid(), &[x.cast(DType::F32).unwrap()], Tol { eps: 1e-2, tol: 1e-3 });
}

// ------------------------------------------------------------------------------ reductions

#[test]
fn sum_and_mean_over_all_and_axes() {
    let mut g = Gen(9);
    let x = g.normal(&[3, 4, 5]);
    gradcheck(|x| x[0].sum(), one(&x));
    gradcheck(|x| x[0].mean(), one(&x));
    for keepdim in [false, true] {
        for axes in [&[0][..], &[1], &[-1], &[0, 2], &[2, 0, 1]] {
            gradcheck(|x| x[0].sum_axes(axes, keepdim), one(&x));
            gradcheck(|x| x[0].mean_axes(axes, keepdim), one(&x));
        }
    }
    gradcheck(|x| x[0].sum(), &[Tensor::scalar(1.5f64)]);
}

#[test]
fn max_and_min_over_all_and_axes() {
    let mut g = Gen(10);
    let x = g.distinct(&[3, 4, 5]);
    gradcheck(|x| x[0].max(), one(&x));
    gradcheck(|x| x[0].min(), one(&x));
    for keepdim in [false, true] {
        for axes in [&[0][..], &[1], &[-1], &[0, 2]] {
            gradcheck(|x| x[0].max_axes(axes, keepdim), one(&x));
            gradcheck(|x| x[0].min_axes(axes, keepdim), one(&x));
        }
    }
}

#[test]
fn max_with_ties_shares_the_gradient() {
    let x = from(vec![1.0, 3.0, 3.0, 0.0, 2.0, 2.0], &[2, 3]).requires_grad_(true).unwrap();
    x.max().unwrap().backward().unwrap();
    tests::assert_values(&x.grad().unwrap(), &[0.0, 0.5, 0.5, 0.0, 0.0, 0.0]);
    x.zero_grad().unwrap();
    x.max_axes(&[1], false).unwrap().sum().unwrap().backward().unwrap();
    tests::assert_values(&x.grad().unwrap(), &[0.0, 0.5, 0.5, 0.0, 0.5, 0.5]);
    let a = Tensor::scalar(1.0f64).requires_grad_(true).unwrap();
    let b = Tensor::scalar(1.0f64).requires_grad_(true).unwrap();
    a.maximum(&b).unwrap().backward().unwrap();
    assert_eq!((a.grad().unwrap().item::<f64>().unwrap(), b.grad().unwrap().item::<f64>().unwrap()), (0.5, 0.5));
}

// ------------------------------------------------------------------------------ matmul

#[test]
fn matmul_2d_and_batched_with_broadcast_batch_dims() {
    let mut g = Gen(11);
    let cases: [(&[usize], &[usize]); 6] =
        [(&[3, 4], &[4, 5]), (&[1, 4], &[4, 1]), (&[2, 3, 4], &[4, 5]), (&[3, 4], &[2, 4, 5]), (&[2, 1, 3, 4], &[3, 4, 2]), (&[1, 3, 4], &[2, 4, 2])];
    for (sa, sb) in cases {
        gradcheck(|x| x[0].matmul(&x[1]), &[g.normal(sa), g.normal(sb)]);
    }
    // x^T x: one input on both sides.
    gradcheck(|x| x[0].t()?.matmul(&x[0]), &[g.normal(&[4, 3])]);
}

/// A product: a's batch dims, b's, and (m, k, n).
type Case = (&'static [usize], &'static [usize], (usize, usize, usize));

#[test]
fn matmul_with_transposed_operands() {
    // Every flag combination: 2-d, broadcast batches, and a 2-d right operand under a batched
    // left one (the weight-gradient form that folds the batch into rows).
    let mut g = Gen(13);
    let cases: [Case; 4] = [(&[], &[], (3, 4, 5)), (&[2, 1], &[3], (3, 2, 4)), (&[2, 3], &[], (2, 4, 3)), (&[], &[2], (1, 3, 2))];
    for (ba, bb, (m, k, n)) in cases {
        for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
            let dims = |batch: &[usize], r, c, t| batch.iter().copied().chain(if t { [c, r] } else { [r, c] }).collect::<Vec<_>>();
            gradcheck(|x| x[0].matmul_t(&x[1], ta, tb), &[g.normal(&dims(ba, m, k, ta)), g.normal(&dims(bb, k, n, tb))]);
        }
    }
    // x xᵀ and xᵀ x: one input on both sides, through the flags.
    gradcheck(|x| x[0].matmul_t(&x[0], false, true), &[g.normal(&[3, 4])]);
    gradcheck(|x| x[0].matmul_t(&x[0], true, false), &[g.normal(&[3, 4])]);
}

#[test]
fn matmul_vector_forms() {
    let mut g = Gen(12);
    let cases: [(&[usize], &[usize]); 6] =
        [(&[3, 4], &[4]), (&[4], &[4, 5]), (&[4], &[4]), (&[2, 3, 4], &[4]), (&[4], &[2, 4, 3]), (&[2, 1, 3, 4], &[2, 4, 2])];
    for (sa, sb) in cases {
        gradcheck(|x| x[0].matmul(&x[1]), &[g.normal(sa), g.normal(sb)]);
    }
    // v^T A v: one vector on both sides.
    gradcheck(|x| x[0].matmul(&x[1])?.matmul(&x[0]), &[g.normal(&[3]), g.normal(&[3, 3])]);
}

// ------------------------------------------------------------------------------ indexing

#[test]
fn chunk_split_masks_and_integer_array_indexing() {
    let mut g = Gen(13);
    let weights = |n: usize| Tensor::arange(1.0f64, 1.0 + n as f64);
    // Every piece used with its own weight, so a misplaced gradient shows.
    gradcheck(
        |x| {
            let parts = x[0].chunk(3, 1)?;
            let mut acc = parts[0].sum()?;
            for (i, p) in parts.iter().enumerate().skip(1) {
                acc = acc.add(&p.mul((i + 2) as f64)?.sum()?)?;
            }
            let s = x[0].split_sizes(&[1, 2], 0)?;
            acc.add(&s[1].exp()?.sum()?)?.add(&s[0].mul(&weights(7).reshape([1, 7])?)?.sum()?)
        },
        &[g.normal(&[3, 7])],
    );
    let mask = Tensor::from_vec(vec![true, false, true, true, false, true], &[2, 3]).unwrap();
    // A captured mask is read when the graph runs, so a graph cannot know the selection's
    // length: masked_select is checked eagerly (its refusal in a trace is tested in ops).
    gradcheck_eager(|x| x[0].masked_select(&mask)?.mul(&weights(4)), &[g.normal(&[2, 3])]);
    // Repeated indices: the gradient adds every use (a scatter-add).
    let idx = Tensor::from_vec(vec![2i64, 0, 2, 2], &[2, 2]).unwrap();
    gradcheck(|x| x[0].index(&idx)?.tanh(), &[g.normal(&[3, 2])]);
    // Assignment through a mask, on a non-leaf: the gradient goes to the source where the
    // mask is true and to the old value elsewhere.
    let rows = Tensor::from_vec(vec![true, false, true], &[3, 1]).unwrap();
    gradcheck(
        |x| {
            let y = x[0].mul(2.0)?;
            y.masked_assign_(&rows, &x[1])?;
            y.masked_fill_(&mask.reshape([3, 2])?.logical_not()?, 0.5)?;
            y.exp()
        },
        &[g.normal(&[3, 2]), g.normal(&[2])],
    );
}

// ------------------------------------------------------------------------------ layout

#[test]
fn reshape_permute_broadcast_squeeze() {
    let mut g = Gen(12);
    let x = g.normal(&[3, 4, 5]);
    gradcheck(|x| x[0].reshape([4, -1]), one(&x));
    gradcheck(|x| x[0].reshape([60]), one(&x));
    gradcheck(|x| x[0].flatten_from(1), one(&x));
    gradcheck(|x| x[0].permute(&[2, 0, 1]), one(&x));
    gradcheck(|x| x[0].transpose(0, 2), one(&x));
    gradcheck(|x| x[0].transpose(-1, 1), one(&x));
    gradcheck(|x| x[0].t(), &[g.normal(&[3, 4])]);
    gradcheck(|x| x[0].broadcast_to(&[2, 3, 4]), &[g.normal(&[3, 1])]);
    gradcheck(|x| x[0].broadcast_to(&[3, 4]), &[g.normal(&[4])]);
    gradcheck(|x| x[0].broadcast_to(&[2, 3]), &[g.normal(&[])]);
    gradcheck(|x| x[0].unsqueeze(1)?.unsqueeze(-1), &[g.normal(&[3, 4])]);
    gradcheck(|x| x[0].squeeze(1)?.squeeze(-1), &[g.normal(&[3, 1, 4, 1])]);
}

#[test]
fn concat_stack_narrow_slice() {
    let mut g = Gen(13);
    let (a, b, c) = (g.normal(&[2, 3, 4]), g.normal(&[2, 1, 4]), g.normal(&[2, 2, 4]));
    gradcheck(|x| Tensor::concat(&[&x[0], &x[1], &x[2]], 1), &[a.clone(), b.clone(), c.clone()]);
    gradcheck(|x| Tensor::concat(&[&x[0], &x[0]], -1), one(&a));
    gradcheck(|x| Tensor::stack(&[&x[0], &x[1]], 1), &[g.normal(&[2, 3]), g.normal(&[2, 3])]);
    gradcheck(|x| Tensor::stack(&[&x[0], &x[1], &x[0]], 0), &[g.normal(&[3]), g.normal(&[3])]);
    gradcheck(|x| x[0].narrow(1, 1, 2), one(&a));
    gradcheck(|x| x[0].slice(2, 1..3), one(&a));
    gradcheck(|x| x[0].slice(0, ..1), one(&a));
    gradcheck(|x| x[0].slice(-1, 2..), one(&a));
    gradcheck(|x| x[0].select(1, 2), one(&a));
    // Overlapping slices of one tensor add up.
    gradcheck(|x| x[0].narrow(0, 0, 3)?.mul(&x[0].narrow(0, 1, 3)?), &[g.normal(&[4, 2])]);
}

// ------------------------------------------------------------------------------ indexing

#[test]
fn index_select_and_gather_with_repeated_indices() {
    let mut g = Gen(14);
    let x = g.normal(&[4, 5]);
    let idx = Tensor::from_vec(vec![2i64, 0, 2, 3, 2], &[5]).unwrap();
    gradcheck(|x| x[0].index_select(0, &x[1]), &[x.clone(), idx.clone()]);
    gradcheck(|x| x[0].index_select(1, &x[1]), &[x.clone(), idx.clone()]);
    gradcheck(|x| x[0].index_select(-1, &x[1]), &[x.clone(), Tensor::from_vec(vec![4i32, 4, 1], &[3]).unwrap()]);
    gradcheck(|x| x[0].gather(1, &x[1]), &[x.clone(), g.index(&[4, 7], 5)]);
    gradcheck(|x| x[0].gather(0, &x[1]), &[x.clone(), g.index(&[6, 5], 4)]);
    gradcheck(|x| x[0].gather(2, &x[1]), &[g.normal(&[2, 3, 4]), g.index(&[2, 3, 2], 4)]);
}

// ------------------------------------------------------------------------------ nn

#[test]
fn softmax_log_softmax_cross_entropy() {
    let mut g = Gen(15);
    let x = g.normal(&[3, 4, 5]);
    for axis in [0, 1, -1] {
        gradcheck(|x| x[0].softmax(axis), one(&x));
        gradcheck(|x| x[0].log_softmax(axis), one(&x));
    }
    let logits = g.normal(&[6, 4]).mul(2.0).unwrap();
    let labels = Tensor::from_vec(vec![0i64, 3, 3, 1, 2, 0], &[6]).unwrap();
    gradcheck(|x| x[0].cross_entropy(&x[1]), &[logits.clone(), labels.clone()]);
    gradcheck(|x| x[0].cross_entropy(&x[1].cast(DType::I32)?), &[logits.clone(), labels.clone()]);
    // Scaled by a downstream op, so the incoming gradient is not 1.
    gradcheck(|x| x[0].cross_entropy(&x[1])?.mul(&x[2]), &[logits, labels, g.normal(&[])]);
}

#[test]
fn conv2d_stride_padding_bias() {
    let mut g = Gen(16);
    // Stride 2, padding 1, bias; 6x5 input so the strided windows do not cover it evenly.
    let (x, w, b) = (g.normal(&[2, 3, 6, 5]), g.normal(&[4, 3, 3, 3]), g.normal(&[4]));
    gradcheck(|x| x[0].conv2d(&x[1], Some(&x[2]), [2, 2], [1, 1]), &[x.clone(), w.clone(), b.clone()]);
    gradcheck(|x| x[0].conv2d(&x[1], None, [1, 1], [0, 0]), &[x.clone(), w.clone()]);
    gradcheck(|x| x[0].conv2d(&x[1], Some(&x[2]), [1, 2], [2, 0]), &[x.clone(), g.normal(&[2, 3, 2, 3]), g.normal(&[2])]);
    // A weight that needs no gradient: only the input's.
    let fixed = w.clone();
    gradcheck(move |x| x[0].conv2d(&fixed, None, [2, 1], [1, 1]), one(&x));
}

#[test]
fn max_pool2d() {
    let mut g = Gen(17);
    let x = g.distinct(&[2, 2, 6, 6]);
    gradcheck(|x| x[0].max_pool2d([2, 2], [2, 2]), one(&x));
    // Overlapping windows: one input can be the max of several windows.
    gradcheck(|x| x[0].max_pool2d([3, 3], [1, 1]), one(&x));
    gradcheck(|x| x[0].max_pool2d([3, 2], [2, 1]), one(&x));
    // 7x7 with stride 2: the last row and column are in no window.
    gradcheck(|x| x[0].max_pool2d([2, 2], [2, 2]), &[g.distinct(&[1, 1, 7, 7])]);
    // Padded: border windows hold fewer taps, and the padding takes no gradient.
    gradcheck(|x| x[0].max_pool2d_padded([3, 3], [2, 2], [1, 1]), one(&x));
    gradcheck(|x| x[0].max_pool2d_padded([2, 3], [1, 2], [1, 0]), &[g.distinct(&[1, 2, 5, 7])]);
}

// ------------------------------------------------------------------------------ in place

#[test]
fn in_place_ops_on_non_leaves() {
    let mut g = Gen(18);
    let (x, z) = (g.normal(&[3, 4]), g.nonzero(&[4]));
    gradcheck(
        |x| {
            let y = x[0].mul(2.0)?;
            y.add_(&x[1])?;
            Ok(y)
        },
        &[x.clone(), z.clone()],
    );
    gradcheck(
        |x| {
            // tanh saves its output, so an in-place op on it would be an error: add 0 first.
            let y = x[0].tanh()?.add(0.0)?;
            y.mul_(&x[1])?;
            y.sub_(&x[0])?;
            y.div_(&x[1])?;
            y.add_(0.5)?;
            y.mul_(3.0)?;
            Ok(y)
        },
        &[x.clone(), z.clone()],
    );
    // The result of an in-place op feeds later ops, and the value before it fed earlier ones.
    gradcheck(
        |x| {
            let y = x[0].mul(1.5)?;
            let early = y.exp()?;
            y.mul_(&x[1])?;
            early.add(&y.sigmoid()?)
        },
        &[x.clone(), z.clone()],
    );
    // assign_ cuts the old history: x gets no gradient, z all of it.
    gradcheck(
        |x| {
            let y = x[0].mul(2.0)?;
            y.assign_(&x[1])?;
            y.mul(&x[1])
        },
        &[x.clone(), z.clone()],
    );
    gradcheck(
        |x| {
            let y = x[0].exp()?.mul(1.0)?;
            y.zero_()?;
            y.add_(&x[1])?;
            Ok(y)
        },
        &[x.clone(), z.clone()],
    );
    // An in-place op on a tensor that did not require grad makes it part of the graph.
    gradcheck(
        |x| {
            let y = Tensor::ones(&[3, 4], DType::F64);
            y.add_(&x[1])?;
            y.mul_(&x[0])?;
            Ok(y)
        },
        &[x.clone(), z.clone()],
    );
}

#[test]
fn in_place_ops_with_the_target_as_operand() {
    let mut g = Gen(19);
    let x = g.nonzero(&[2, 3]);
    for op in ["add_", "sub_", "mul_", "div_"] {
        gradcheck(
            |x| {
                let y = x[0].mul(1.5)?;
                match op {
                    "add_" => y.add_(&y)?,
                    "sub_" => y.sub_(&y.clone())?,
                    "mul_" => y.mul_(&y)?,
                    _ => y.div_(&y.exp()?)?,
                }
                y.add(&x[0])
            },
            one(&x),
        );
    }
}

// ------------------------------------------------------------------------------ composites

#[test]
fn a_small_network() {
    let mut g = Gen(20);
    let (x, w1, b1, w2) = (g.normal(&[5, 4]), g.normal(&[4, 6]), g.normal(&[6]), g.normal(&[6, 3]));
    let labels = Tensor::from_vec(vec![0i64, 2, 1, 1, 0], &[5]).unwrap();
    gradcheck(
        |p| p[0].matmul(&p[1])?.add(&p[2])?.tanh()?.matmul(&p[3])?.cross_entropy(&p[4]),
        &[x.clone(), w1.clone(), b1.clone(), w2.clone(), labels.clone()],
    );
    // A parameter used twice (weight tying) gets both contributions.
    gradcheck(|p| p[0].matmul(&p[1])?.sigmoid()?.matmul(&p[1].t()?)?.mean(), &[x, g.normal(&[4, 4])]);
}

// ------------------------------------------------------------------------------ second order

#[test]
fn second_derivative_of_x_cubed() {
    let x = Tensor::scalar(2.0f64).requires_grad_(true).unwrap();
    let y = x.powf(3.0).unwrap();
    let dy = tensor_core::grad(&[&y], &[&x], true).unwrap().remove(0);
    assert_eq!(dy.item::<f64>().unwrap(), 12.0);
    assert!(dy.requires_grad(), "create_graph makes the gradient differentiable");
    assert!(x.grad().is_none(), "grad() leaves .grad alone");
    dy.backward().unwrap();
    assert_eq!(x.grad().unwrap().item::<f64>().unwrap(), 12.0);
    // The same with x * x * x and backward_opts(create_graph).
    let x = Tensor::scalar(2.0f64).requires_grad_(true).unwrap();
    let y = &x * &x * &x;
    y.backward_opts(None, tensor_core::BackwardOptions { retain_graph: None, create_graph: true }).unwrap();
    let dy = x.grad().unwrap();
    assert_eq!(dy.item::<f64>().unwrap(), 12.0);
    assert!(dy.requires_grad());
    let d2 = tensor_core::grad(&[&dy], &[&x], false).unwrap().remove(0);
    assert_eq!(d2.item::<f64>().unwrap(), 12.0);
    // Third order of x^3 is 6.
    let x = Tensor::scalar(2.0f64).requires_grad_(true).unwrap();
    let d1 = tensor_core::grad(&[&x.powf(3.0).unwrap()], &[&x], true).unwrap().remove(0);
    let d2 = tensor_core::grad(&[&d1], &[&x], true).unwrap().remove(0);
    let d3 = tensor_core::grad(&[&d2], &[&x], false).unwrap().remove(0);
    assert_eq!((d2.item::<f64>().unwrap(), d3.item::<f64>().unwrap()), (12.0, 6.0));
}

#[test]
fn double_backward_elementwise() {
    let mut g = Gen(21);
    let (a, b) = (g.normal(&[3, 1, 4]), g.normal(&[2, 4]));
    gradcheck(first_order(|x| x[0].tanh()), one(&a));
    gradcheck(first_order(|x| x[0].sigmoid()), one(&a));
    gradcheck(first_order(|x| x[0].exp()), one(&a));
    gradcheck(first_order(|x| x[0].log()), &[g.uniform(&[3, 4], 0.5, 2.0)]);
    gradcheck(first_order(|x| x[0].sqrt()), &[g.uniform(&[3, 4], 0.5, 2.0)]);
    gradcheck(first_order(|x| x[0].powf(3.0)), one(&a));
    gradcheck(first_order(|x| Ok(1.5 / &x[0])), &[g.nonzero(&[3, 4])]);
    // Broadcasting binary ops: the first-order gradients contain sum_to, whose gradient is
    // broadcast_to.
    gradcheck(first_order(|x| x[0].mul(&x[1])), &[a.clone(), b.clone()]);
    gradcheck(first_order(|x| x[0].mul(&x[1])?.tanh()), &[a.clone(), b.clone()]);
    gradcheck(first_order(|x| x[0].div(&x[1])), &[a.clone(), g.nonzero(&[2, 4])]);
    gradcheck(first_order(|x| x[0].pow(&x[1])), &[g.uniform(&[3, 1, 4], 0.5, 2.0), b.clone()]);
    gradcheck(first_order(|x| x[0].maximum(&x[1])?.mul(&x[0])), &[a.clone(), b.clone()]);
    gradcheck(first_order(|x| Tensor::where_(&x[0].gt(0.0)?, &x[0].mul(&x[0])?, &x[0].exp()?)), one(&a));
    gradcheck(first_order(|x| x[0].clamp(-0.5, 0.5)?.mul(&x[0])), one(&a));
    gradcheck(first_order(|x| x[0].relu()?.mul(&x[0])), &[g.nonzero(&[3, 4])]);
    gradcheck(first_order(|x| x[0].abs()?.mul(&x[0])), &[g.nonzero(&[3, 4])]);
}

#[test]
fn double_backward_reductions_layout_indexing() {
    let mut g = Gen(22);
    let x = g.distinct(&[3, 4]);
    gradcheck(first_order(|x| x[0].max_axes(&[1], false)?.mul(&x[0].sum_axes(&[1], false)?)), one(&x));
    gradcheck(first_order(|x| x[0].mean_axes(&[0], true)?.mul(&x[0])), one(&x));
    gradcheck(first_order(|x| x[0].narrow(1, 1, 2)?.tanh()), one(&x));
    gradcheck(first_order(|x| Tensor::concat(&[&x[0], &x[0].exp()?], 0)?.tanh()), one(&x));
    gradcheck(first_order(|x| x[0].permute(&[1, 0])?.reshape([2, 6])?.tanh()), one(&x));
    gradcheck(first_order(|x| x[0].broadcast_to(&[2, 3, 4])?.tanh()), one(&x));
    let idx = Tensor::from_vec(vec![2i64, 0, 2], &[3]).unwrap();
    gradcheck(first_order(|x| x[0].index_select(0, &x[1])?.tanh()), &[x.clone(), idx]);
    gradcheck(first_order(|x| x[0].gather(1, &x[1])?.tanh()), &[x.clone(), g.index(&[3, 5], 4)]);
}

#[test]
fn double_backward_matmul_and_nn() {
    let mut g = Gen(23);
    gradcheck(first_order(|x| x[0].matmul(&x[1])?.tanh()), &[g.normal(&[2, 3, 4]), g.normal(&[4, 2])]);
    gradcheck(first_order(|x| x[0].matmul(&x[1])), &[g.normal(&[3, 4]), g.normal(&[4, 2])]);
    gradcheck(first_order(|x| x[0].matmul_t(&x[1], true, true)?.tanh()), &[g.normal(&[2, 4, 3]), g.normal(&[2, 4])]);
    gradcheck(first_order(|x| x[0].matmul_t(&x[1], false, true)?.tanh()), &[g.normal(&[2, 3, 4]), g.normal(&[2, 4])]);
    gradcheck(first_order(|x| x[0].softmax(1)), &[g.normal(&[3, 4])]);
    gradcheck(first_order(|x| x[0].log_softmax(0)), &[g.normal(&[3, 4])]);
    let labels = Tensor::from_vec(vec![0i64, 3, 1], &[3]).unwrap();
    gradcheck(first_order(|x| x[0].cross_entropy(&x[1])), &[g.normal(&[3, 4]), labels]);
}

#[test]
fn double_backward_conv2d() {
    let mut g = Gen(24);
    let (x, w, b) = (g.normal(&[2, 2, 5, 5]), g.normal(&[3, 2, 3, 3]), g.normal(&[3]));
    // Conv2d's first-order gradients are the Conv2dInputGrad / Conv2dWeightGrad ops; this
    // differentiates them.
    gradcheck(first_order(|x| x[0].conv2d(&x[1], Some(&x[2]), [2, 2], [1, 1])), &[x.clone(), w.clone(), b.clone()]);
    gradcheck(first_order(|x| x[0].conv2d(&x[1], None, [1, 1], [0, 1])?.tanh()), &[x.clone(), w.clone()]);
    // Third order through the conv adjoints: the gradient of a gradient of a gradient.
    gradcheck(first_order(first_order(|x| x[0].conv2d(&x[1], None, [2, 1], [1, 0])?.tanh())), &[g.normal(&[1, 2, 4, 4]), g.normal(&[2, 2, 2, 2])]);
}

// ------------------------------------------------------------------------------ transformer ops

#[test]
fn gelu_both_forms_and_erf() {
    let mut g = Gen(30);
    // Both tails and the bend around 0.
    let x = from(vec![-5.0, -2.5, -1.0, -0.3, 0.0, 0.2, 0.9, 1.7, 3.0, 6.0], &[2, 5]);
    gradcheck(|x| x[0].gelu(), one(&x));
    gradcheck(|x| x[0].gelu_tanh(), one(&x));
    gradcheck(|x| x[0].erf(), one(&x));
    gradcheck(|x| x[0].gelu_tanh()?.mul(&x[0]), &[g.normal(&[3, 4])]);
    gradcheck(first_order(|x| x[0].gelu()), &[g.normal(&[3, 4])]);
    gradcheck(first_order(|x| x[0].gelu_tanh()), &[g.normal(&[3, 4])]);
    gradcheck(first_order(|x| x[0].erf()), &[g.normal(&[3, 4])]);
}

#[test]
fn layer_norm_with_and_without_affine() {
    let mut g = Gen(31);
    let x = g.normal(&[2, 3, 5]);
    let (w, b) = (g.normal(&[5]), g.normal(&[5]));
    gradcheck(|x| x[0].layer_norm(&[5], Some(&x[1]), Some(&x[2]), 1e-5), &[x.clone(), w.clone(), b.clone()]);
    gradcheck(|x| x[0].layer_norm(&[5], None, None, 1e-5), one(&x));
    gradcheck(|x| x[0].layer_norm(&[3, 5], Some(&x[1]), None, 1e-3), &[x.clone(), g.normal(&[3, 5])]);
    gradcheck(first_order(|x| x[0].layer_norm(&[5], Some(&x[1]), Some(&x[2]), 1e-5)), &[x, w, b]);
}

#[test]
fn embedding_with_repeated_indices() {
    let mut g = Gen(32);
    let table = g.normal(&[6, 4]);
    let tokens = Tensor::from_vec(vec![5i64, 0, 5, 2, 2, 2], &[2, 3]).unwrap();
    gradcheck(|x| x[0].embedding(&x[1]), &[table.clone(), tokens.clone()]);
    gradcheck(|x| x[0].embedding(&x[1].cast(DType::I32)?)?.tanh(), &[table, tokens]);
}

#[test]
fn masked_fill_and_softmax_over_hidden_entries() {
    let mut g = Gen(33);
    let x = g.normal(&[2, 4, 4]);
    let mask = Tensor::causal_mask(4);
    gradcheck(|x| x[0].masked_fill(&x[1], 0.5), &[x.clone(), mask.clone()]);
    gradcheck(|x| x[0].masked_fill(&x[1], f64::NEG_INFINITY)?.softmax(-1), &[x.clone(), mask.clone()]);
    // The hidden entries' weights are exact zeros, and so are their gradients.
    let leaf = x.detach().requires_grad_(true).unwrap();
    let p = leaf.masked_fill(&mask, f64::NEG_INFINITY).unwrap().softmax(-1).unwrap();
    p.mul(&g.normal(&[2, 4, 4])).unwrap().sum().unwrap().backward().unwrap();
    let (pv, gv, m) = (as_f64(&p), as_f64(&leaf.grad().unwrap()), mask.broadcast_to(&[2, 4, 4]).unwrap().to_vec::<bool>().unwrap());
    for i in 0..m.len() {
        if m[i] {
            assert_eq!((pv[i].to_bits(), gv[i].to_bits()), (0, 0), "entry {i}");
        }
    }
}

#[test]
fn scaled_dot_product_attention_causal_masked_and_scaled() {
    use tensor_core::ops::AttentionOptions;
    let mut g = Gen(34);
    let (q, k, v) = (g.normal(&[2, 3, 4]), g.normal(&[2, 3, 4]), g.normal(&[2, 3, 5]));
    gradcheck(|x| x[0].scaled_dot_product_attention(&x[1], &x[2], AttentionOptions::default()), &[q.clone(), k.clone(), v.clone()]);
    gradcheck(
        |x| x[0].scaled_dot_product_attention(&x[1], &x[2], AttentionOptions { causal: true, ..Default::default() }),
        &[q.clone(), k.clone(), v.clone()],
    );
    // A key-padding mask broadcast over the queries, a custom scale and more keys than queries.
    let mask = Tensor::from_vec(vec![false, false, true, false, false, false, false, true], &[2, 1, 4]).unwrap();
    gradcheck(
        move |x| x[0].scaled_dot_product_attention(&x[1], &x[2], AttentionOptions { mask: Some(&mask), scale: Some(0.3), ..Default::default() }),
        &[q.clone(), g.normal(&[2, 4, 4]), g.normal(&[2, 4, 5])],
    );
    gradcheck(first_order(|x| x[0].scaled_dot_product_attention(&x[1], &x[2], AttentionOptions { causal: true, ..Default::default() })), &[q, k, v]);
}

#[test]
fn dropout_with_a_fixed_mask() {
    let mut g = Gen(35);
    let x = g.normal(&[4, 6]);
    // Every evaluation draws from a fresh generator with the same seed: the same mask.
    gradcheck(|x| x[0].dropout(0.3, &Generator::new(9)), one(&x));
    gradcheck(|x| x[0].dropout(0.3, &Generator::new(9))?.tanh()?.dropout(0.5, &Generator::new(10)), one(&x));
}

// ------------------------------------------------------------------------------ CNN forms

#[test]
fn batch_norm_train_and_eval() {
    let mut g = Gen(40);
    let (x, w, b) = (g.normal(&[3, 2, 2, 2]), g.normal(&[2]), g.normal(&[2]));
    // Training: the batch's statistics (running ones given and updated, outside autograd).
    gradcheck(
        |x| {
            let (rm, rv) = (Tensor::zeros(&[2], DType::F64), Tensor::ones(&[2], DType::F64));
            x[0].batch_norm(Some(&rm), Some(&rv), Some(&x[1]), Some(&x[2]), true, 0.1, 1e-5)
        },
        &[x.clone(), w.clone(), b.clone()],
    );
    gradcheck(|x| x[0].batch_norm(None, None, None, None, true, 0.1, 1e-5), &[g.normal(&[4, 3])]);
    // Evaluation: the running statistics, here inputs too.
    let rv = g.uniform(&[2], 0.5, 2.0);
    gradcheck(|x| x[0].batch_norm(Some(&x[3]), Some(&x[4]), Some(&x[1]), Some(&x[2]), false, 0.1, 1e-5), &[x, w, b, g.normal(&[2]), rv]);
}

#[test]
fn group_norm() {
    let mut g = Gen(41);
    let (x, w, b) = (g.normal(&[2, 4, 3]), g.normal(&[4]), g.normal(&[4]));
    gradcheck(|x| x[0].group_norm(2, Some(&x[1]), Some(&x[2]), 1e-5), &[x.clone(), w, b]);
    gradcheck(|x| x[0].group_norm(1, None, None, 1e-5), one(&x));
}

#[test]
fn avg_pool2d_and_adaptive() {
    let mut g = Gen(42);
    let x = g.normal(&[2, 2, 5, 6]);
    gradcheck(|x| x[0].avg_pool2d([2, 2], [2, 2], [0, 0], false, true), one(&x));
    gradcheck(|x| x[0].avg_pool2d([3, 3], [2, 2], [1, 1], false, false), one(&x));
    gradcheck(|x| x[0].avg_pool2d([3, 2], [2, 2], [1, 1], true, true), one(&x));
    gradcheck(|x| x[0].avg_pool2d([2, 3], [2, 2], [0, 1], true, false), one(&x));
    gradcheck(|x| x[0].adaptive_avg_pool2d([3, 4]), one(&x));
    gradcheck(|x| x[0].adaptive_avg_pool2d([1, 3]), one(&x));
    gradcheck(|x| x[0].global_avg_pool(), one(&x));
}

#[test]
fn conv_transpose2d_conv1d_grouped() {
    let mut g = Gen(43);
    let (x, w, b) = (g.normal(&[2, 4, 3, 3]), g.normal(&[4, 3, 3, 2]), g.normal(&[3]));
    gradcheck(|x| x[0].conv_transpose2d(&x[1], Some(&x[2]), [2, 1], [1, 0], [1, 0], 1), &[x.clone(), w.clone(), b.clone()]);
    // Two groups: 4 input channels, 2 per group, each to 3 outputs.
    let wg = g.normal(&[4, 3, 2, 2]);
    gradcheck(|x| x[0].conv_transpose2d(&x[1], None, [2, 2], [0, 0], [0, 0], 2), &[x.clone(), wg]);
    // Depthwise 2-d and grouped 1-d convolutions.
    let wd = g.normal(&[8, 1, 3, 3]);
    gradcheck(|x| x[0].conv2d_grouped(&x[1], Some(&x[2]), [1, 1], [1, 1], 4), &[x, wd, g.normal(&[8])]);
    let (x1, w1) = (g.normal(&[2, 4, 7]), g.normal(&[6, 2, 3]));
    gradcheck(|x| x[0].conv1d(&x[1], Some(&x[2]), 2, 1, 2), &[x1, w1, g.normal(&[6])]);
}

#[test]
fn depthwise_convolutions() {
    let mut g = Gen(47);
    // MobileNetV2's stride-2 layer; a dilated one with a channel multiplier of 2 and uneven
    // strides; a bias-free one run through conv2d_grouped.
    let (x, w, b) = (g.normal(&[2, 3, 7, 6]), g.normal(&[3, 1, 3, 3]), g.normal(&[3]));
    gradcheck(|x| x[0].conv2d_depthwise(&x[1], Some(&x[2]), [2, 2], [1, 1], [1, 1]), &[x.clone(), w, b]);
    let (w2, b2) = (g.normal(&[6, 1, 2, 3]), g.normal(&[6]));
    gradcheck(|x| x[0].conv2d_depthwise(&x[1], Some(&x[2]), [1, 2], [2, 1], [2, 2]), &[x.clone(), w2.clone(), b2]);
    gradcheck(|x| x[0].conv2d_grouped(&x[1], None, [1, 1], [0, 1], 3)?.tanh(), &[x.clone(), w2.clone()]);
    // Second and third order, through the depthwise adjoints.
    gradcheck(first_order(|x| x[0].conv2d_depthwise(&x[1], None, [2, 1], [1, 0], [1, 2])?.tanh()), &[x.clone(), w2.clone()]);
    gradcheck(
        first_order(first_order(|x| x[0].conv2d_depthwise(&x[1], None, [1, 1], [1, 1], [1, 1])?.tanh())),
        &[g.normal(&[1, 2, 4, 4]), g.normal(&[2, 1, 2, 2])],
    );
}

#[test]
fn dilated_and_3d_convolutions() {
    let mut g = Gen(45);
    let (x, w, b) = (g.normal(&[2, 4, 5, 6]), g.normal(&[4, 2, 2, 3]), g.normal(&[4]));
    gradcheck(|x| x[0].conv2d_dilated(&x[1], Some(&x[2]), [2, 1], [1, 2], [2, 2], 2), &[x, w, b]);
    let (x3, w3, b3) = (g.normal(&[1, 4, 4, 3, 4]), g.normal(&[2, 2, 2, 2, 2]), g.normal(&[2]));
    gradcheck(|x| x[0].conv3d(&x[1], Some(&x[2]), [1, 2, 1], [1, 0, 1], [2, 1, 1], 2), &[x3, w3, b3]);
}

#[test]
fn nd_pools() {
    let mut g = Gen(46);
    let x = g.distinct(&[1, 2, 4, 3, 5]);
    gradcheck(|x| x[0].max_pool3d([2, 2, 2], [1, 2, 1], [1, 1, 0], [1, 1, 2], true), one(&x));
    gradcheck(|x| x[0].max_pool_nd(&[2, 2], &[1, 1], &[[1, 0], [0, 1]], &[2, 1], false), &[g.distinct(&[1, 2, 5, 4])]);
    gradcheck(|x| x[0].avg_pool_nd(&[2, 3, 2], &[2, 1, 2], &[[1, 0], [1, 1], [0, 1]], &[1, 1, 2], true, false), one(&x));
    gradcheck(|x| x[0].avg_pool3d([2, 2, 3], [2, 1, 2], [1, 1, 1], true, true), one(&x));
    // Lp pooling away from |x|'s kink at 0.
    let nz = g.nonzero(&[1, 2, 3, 3, 4]);
    gradcheck(|x| x[0].lp_pool_nd(3.0, &[2, 2, 2], &[1, 1, 2], &[[0, 0], [0, 0], [1, 1]], &[1, 1, 1], false), one(&nz));
}

#[test]
fn cumsum_topk_relu6() {
    let mut g = Gen(44);
    let x = g.normal(&[3, 5]);
    gradcheck(|x| x[0].cumsum(1), one(&x));
    gradcheck(|x| x[0].cumsum(0), one(&x));
    gradcheck(|x| x[0].cumulative_sum(1, true, true), one(&x));
    // topk: the gradient flows to the chosen entries (distinct values, no ties).
    let d = g.distinct(&[3, 5]);
    gradcheck(|x| Ok(x[0].topk(3, 1, true, true)?.0), one(&d));
    gradcheck(|x| Ok(x[0].topk(2, 0, false, true)?.0), one(&d));
    // relu6 away from its kinks at 0 and 6.
    let r = from(vec![-1.0, 0.5, 3.0, 5.5, 7.0, 2.0], &[6]);
    gradcheck(|x| x[0].relu6(), one(&r));
}

#[test]
fn pad_every_mode() {
    use tensor_core::ops::PadMode;
    let mut g = Gen(45);
    let x = g.normal(&[2, 3, 4]);
    for mode in [PadMode::Constant(1.5), PadMode::Reflect, PadMode::Replicate, PadMode::Circular] {
        gradcheck(move |x| x[0].pad(&[(0, 1), (2, 1), (1, 3)], mode), one(&x));
    }
}

#[test]
fn einsum_forms() {
    let mut g = Gen(46);
    let (a, b, c) = (g.normal(&[2, 3, 4]), g.normal(&[2, 4, 5]), g.normal(&[5]));
    gradcheck(|x| Tensor::einsum("bij,bjk->bik", &[&x[0], &x[1]]), &[a.clone(), b.clone()]);
    gradcheck(|x| Tensor::einsum("bij,bjk,k->ib", &[&x[0], &x[1], &x[2]]), &[a.clone(), b, c]);
    gradcheck(|x| Tensor::einsum("bij->jb", &[&x[0]]), one(&a));
}

#[test]
fn interpolate_modes() {
    use tensor_core::ops::Interpolation;
    let mut g = Gen(47);
    let x = g.normal(&[1, 2, 3, 4]);
    for mode in [Interpolation::Nearest, Interpolation::Bilinear { align_corners: false }, Interpolation::Bilinear { align_corners: true }] {
        gradcheck(move |x| x[0].interpolate([5, 3], mode), one(&x));
    }
}

#[test]
fn resample_and_grid_sample() {
    use tensor_core::ops::{GridMode, GridPadding, GridSampleOptions, Taps};
    let mut g = Gen(53);
    let x = g.normal(&[1, 2, 3, 4]);
    let taps = Taps::new(3, vec![0, 1, 2, 3, 3, 1, 2, 0, 0], vec![0.2, 0.5, -0.25, 1.0, 0.5, 0.5, 0.75, 0.125, 2.0]).unwrap();
    let filled = taps.clone().with_fill(vec![false, true, false], 3.0).unwrap();
    gradcheck(move |x| x[0].resample(3, &taps), one(&x));
    gradcheck(move |x| x[0].resample(-1, &filled), one(&x));
    // To the image, at points kept away from the pixel grid's kinks (finite differences
    // move the image, not the points).
    let grid = Tensor::from_vec(vec![0.1f64, -0.3, 0.9, 0.7, -1.3, 0.2, 0.45, 1.6, -0.8, -0.95, 0.33, 0.05], &[1, 2, 3, 2]).unwrap();
    for mode in [GridMode::Nearest, GridMode::Linear, GridMode::Cubic] {
        for padding in [GridPadding::Zeros, GridPadding::Border, GridPadding::Reflection] {
            for align_corners in [false, true] {
                let (grid, o) = (grid.clone(), GridSampleOptions { mode, padding, align_corners });
                gradcheck(move |x| x[0].grid_sample(&grid, o), one(&x));
            }
        }
    }
}
