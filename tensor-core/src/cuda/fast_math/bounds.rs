//! The error bounds docs/GPU.md states for fast math, derived without a GPU: a model of
//! `prelude_fast.cuh`'s steps in f32 (its fused multiply-adds as `mul_add`, its selects as
//! ifs), whose approximate instructions give, in turn, every result the PTX manual allows at
//! the edges of their error (`ex2.approx`: the rounded 2^t and its neighbours up to 2 ulp
//! away; `rcp.approx`: within 1 ulp of 1/x), keeping each input's worst result against f64.
//! The hardware's results lie inside that envelope as far as the manual's bounds hold;
//! gpu_check measures them on the device and asserts the same bounds.

use crate::math::fastmath::{exp_reduce, exp_scale, tanh_by, EXP_HI, EXP_LO, LOG2E};
use crate::math::{GELU_C, GELU_K};

// The bounds of docs/GPU.md ("Fast math"), which gpu_check asserts on the device too: 1.4 to
// 2.3 times the worst of the envelope (each noted below), which is itself the worst the
// manual allows, not what the hardware gives.
/// `exp`: ulps of the f64 result over its normal range (envelope: 2.8).
const EXP_ULPS: f64 = 4.0;
/// `tanh`: absolute error (envelope: 4.4e-7; the CPU's rational alone: 2.9e-7).
const TANH_ABS: f64 = 1e-6;
/// `sigmoid`: absolute error (envelope: 1.8e-7).
const SIGMOID_ABS: f64 = 4e-7;
/// GELU's tanh form: absolute error (envelope: 1.1e-6; the CPU's: 9.2e-7).
const GELU_TANH_ABS: f64 = 2e-6;
/// W2 (`tanh(1.5 x + 0.5) sigmoid(x) - 0.5 x`): error relative to max(1, |W2(x)|)
/// (envelope: 5.0e-7; the CPU's: 3.6e-7).
const W2_REL: f64 = 1e-6;

/// `x` moved by `k` ulps (toward +inf for k > 0).
fn nudge(x: f32, k: i32) -> f32 {
    (0..k.abs()).fold(x, |y, _| if k > 0 { y.next_up() } else { y.next_down() })
}

/// `ex2.approx.ftz.f32` at the edge `k` (-2..=2) of its error: the rounded 2^t moved by `k`
/// ulps; a subnormal `t` counts as 0.
fn ex2_at(k: i32) -> impl Fn(f32) -> f32 {
    move |t| if t.abs() < f32::MIN_POSITIVE { 1.0 } else { nudge(2f64.powf(t as f64) as f32, k) }
}

/// `rcp.approx.ftz.f32` at the edge `k` (-1..=1) of its error; a result below 2^-126 is 0.
fn rcp_at(k: i32) -> impl Fn(f32) -> f32 {
    move |d| {
        let r = nudge(1.0 / d, k);
        if r.abs() < f32::MIN_POSITIVE {
            0.0
        } else {
            r
        }
    }
}

/// `tc_fast_exp`, with `ex2` for the instruction: the CPU's reduction and scaling around it.
fn exp_with(x: f32, ex2: &dyn Fn(f32) -> f32) -> f32 {
    if x.is_nan() {
        return x;
    }
    let (r, ki) = exp_reduce(x);
    exp_scale(ex2(r * LOG2E), ki, x)
}

/// `tc_fast_tanh`, with `rcp` for the instruction: the CPU's rational, its quotient a product
/// with the reciprocal.
fn tanh_with(x: f32, rcp: &dyn Fn(f32) -> f32) -> f32 {
    tanh_by(x, |n, q| {
        assert!(q.is_nan() || (0.0048..0.92).contains(&q), "tanh's denominator {q} at {x}: prelude_fast.cuh says [0.0049, 0.91]");
        n * rcp(q)
    })
}

/// `tc_fast_sigmoid`, with `ex2` and `rcp` for the instructions.
fn sigmoid_with(x: f32, ex2: &dyn Fn(f32) -> f32, rcp: &dyn Fn(f32) -> f32) -> f32 {
    let d = 1.0 + exp_with(-x, ex2);
    if d == 1.0 {
        1.0
    } else {
        rcp(d)
    }
}

fn gelu_tanh_with(x: f32, rcp: &dyn Fn(f32) -> f32) -> f32 {
    let inner = (x + GELU_C as f32 * x * x * x) * GELU_K as f32;
    0.5 * x * (1.0 + tanh_with(inner, rcp))
}

/// W2's fast kernel: `tanh(x * 1.5 + 0.5) * sigmoid(x) - x * 0.5` (`+` and `*` are IEEE's).
fn w2_with(x: f32, ex2: &dyn Fn(f32) -> f32, rcp_t: &dyn Fn(f32) -> f32, rcp_s: &dyn Fn(f32) -> f32) -> f32 {
    tanh_with(x * 1.5 + 0.5, rcp_t) * sigmoid_with(x, ex2, rcp_s) - x * 0.5
}

/// Every result each function may give for `x`, the instructions at every edge of their error.
fn exp_results(x: f32) -> Vec<f32> {
    (-2..=2).map(|k| exp_with(x, &ex2_at(k))).collect()
}

fn tanh_results(x: f32) -> Vec<f32> {
    (-1..=1).map(|k| tanh_with(x, &rcp_at(k))).collect()
}

fn sigmoid_results(x: f32) -> Vec<f32> {
    (-2..=2).flat_map(|k| (-1..=1).map(move |j| sigmoid_with(x, &ex2_at(k), &rcp_at(j)))).collect()
}

fn gelu_tanh_results(x: f32) -> Vec<f32> {
    (-1..=1).map(|k| gelu_tanh_with(x, &rcp_at(k))).collect()
}

fn w2_results(x: f32) -> Vec<f32> {
    let mut out = Vec::with_capacity(45);
    for k in -2..=2 {
        for j in -1..=1 {
            for i in -1..=1 {
                out.push(w2_with(x, &ex2_at(k), &rcp_at(j), &rcp_at(i)));
            }
        }
    }
    out
}

fn ulps(got: f32, want: f64) -> f64 {
    let w = (want as f32).abs();
    let ulp = (w.next_up() - w) as f64;
    (got as f64 - want).abs() / ulp
}

fn sigmoid_f64(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// [-100, 100] in steps of 1/1024 (exact in f32), and every f32 near the ends of exp's range.
fn sweep() -> impl Iterator<Item = f32> {
    let ends = [EXP_LO, EXP_HI, -EXP_LO, -EXP_HI].into_iter().flat_map(|e| (-300..=300).map(move |k| nudge(e, k)));
    (-102_400..=102_400).map(|i| i as f32 / 1024.0).chain(ends)
}

/// The worst of `error` over every result of every input of the sweep.
fn worst(results: impl Fn(f32) -> Vec<f32>, error: impl Fn(f32, f32) -> f64) -> (f64, f32) {
    let mut worst = (0.0, 0.0);
    for x in sweep() {
        for y in results(x) {
            let e = error(x, y);
            if e > worst.0 {
                worst = (e, x);
            }
        }
    }
    worst
}

#[test]
fn exp_is_within_its_bound_over_its_normal_range() {
    let (e, at) = worst(exp_results, |x, y| if x > EXP_LO && x < EXP_HI { ulps(y, (x as f64).exp()) } else { 0.0 });
    assert!(e <= EXP_ULPS, "exp: {e:.2} ulp at {at}");
    assert!(e > EXP_ULPS / 2.0, "exp: the bound is loose ({e:.2} ulp): tighten EXP_ULPS and docs/GPU.md");
}

#[test]
fn tanh_sigmoid_and_gelu_are_within_their_absolute_bounds() {
    let (e, at) = worst(tanh_results, |x, y| (y as f64 - (x as f64).tanh()).abs());
    assert!(e <= TANH_ABS && e > TANH_ABS / 4.0, "tanh: {e:.2e} at {at}");
    let (e, at) = worst(sigmoid_results, |x, y| (y as f64 - sigmoid_f64(x as f64)).abs());
    assert!(e <= SIGMOID_ABS && e > SIGMOID_ABS / 4.0, "sigmoid: {e:.2e} at {at}");
    let gelu = |x: f64| 0.5 * x * (1.0 + (GELU_K * (x + GELU_C * x * x * x)).tanh());
    let (e, at) = worst(gelu_tanh_results, |x, y| (y as f64 - gelu(x as f64)).abs());
    assert!(e <= GELU_TANH_ABS && e > GELU_TANH_ABS / 4.0, "gelu_tanh: {e:.2e} at {at}");
}

#[test]
fn w2_is_within_its_relative_bound() {
    let w2 = |x: f64| (1.5 * x + 0.5).tanh() * sigmoid_f64(x) - 0.5 * x;
    let (e, at) = worst(w2_results, |x, y| (y as f64 - w2(x as f64)).abs() / w2(x as f64).abs().max(1.0));
    assert!(e <= W2_REL && e > W2_REL / 4.0, "W2: {e:.2e} at {at}");
}

/// The special values come out as the CPU's bits at every edge of the instructions' error:
/// the selects decide them, or the manual's exact cases (2^±0 = 1, a subnormal argument
/// flushed to 0, 1/inf = 0).
#[test]
fn special_values_are_the_cpus() {
    use crate::math::fastmath::{exp_f32, sigmoid_f32, tanh_f32};
    let all_cpus = |results: Vec<f32>, cpu: f32| results.iter().all(|y| y.to_bits() == cpu.to_bits() || (y.is_nan() && cpu.is_nan()));
    for x in [0.0, -0.0, 1e-40, -1e-40, f32::INFINITY, f32::NEG_INFINITY, 88.8, 100.0, -87.4, -100.0, f32::NAN] {
        assert!(all_cpus(exp_results(x), exp_f32(x)), "exp({x})");
    }
    for x in [0.0, -0.0, 1e-40, 3e-4, -3e-4, 7.95, -7.95, 8.0, -100.0, f32::INFINITY, f32::NEG_INFINITY, f32::NAN] {
        assert!(all_cpus(tanh_results(x), tanh_f32(x)), "tanh({x})");
    }
    for x in [17.5, 20.0, 100.0, f32::INFINITY, -88.8, -100.0, f32::NEG_INFINITY, f32::NAN] {
        assert!(all_cpus(sigmoid_results(x), sigmoid_f32(x)), "sigmoid({x})");
    }
}

/// The exponent-bits scaling stays exact at the ends of exp's range with ex2's error: the
/// reduced argument keeps 2^t above 1 where k = -126 and below 1 where k = 128.
#[test]
fn exps_scaling_never_leaves_the_normal_range() {
    for x in (-300..=300).flat_map(|k| [nudge(EXP_LO, k), nudge(EXP_HI, k)]).filter(|x| (EXP_LO..=EXP_HI).contains(x)) {
        for y in exp_results(x) {
            assert!(y.is_finite() && y >= f32::MIN_POSITIVE, "exp({x}) = {y}");
        }
    }
}
