//! Fast math on the GPU (`TENSOR_CORE_CUDA_FAST_MATH=1`, docs/GPU.md "Fast math"), switched
//! on for these checks by `set_cuda_fast_math`: the fast f32 functions against f64 over 2^20
//! points of [-100, 100], within the bounds docs/GPU.md states (derived without a GPU in
//! tensor-core's `cuda/fast_math/bounds.rs`, from the PTX manual's error of each
//! instruction); the special values as the CPU's bits; W2 within its bound, its graph equal
//! to its eager run bit for bit, and not the default kernel's bits (the mode took effect);
//! a captured training step equal to its eager steps; f64 untouched; and the CPU's bits back
//! once fast math is off. `--w2-bandwidth` times W2 graph in the process's own mode.

use super::{compare_bits, pipelined, Checks, GPU};
use examples::bench::workloads::{w2, w2_graph, w3_batch, w3_graph, Mlp};
use tensor_core::compile::{cuda_graph_counts, set_cuda_fast_math};
use tensor_core::prelude::*;

// The bounds of docs/GPU.md.
/// `exp`: ulps of the f64 result, over exp's normal range.
const EXP_ULPS: f64 = 4.0;
/// `tanh`, `sigmoid`, GELU's tanh form: absolute error.
const TANH_ABS: f64 = 1e-6;
const SIGMOID_ABS: f64 = 4e-7;
const GELU_TANH_ABS: f64 = 2e-6;
/// W2: error relative to max(1, |W2(x)|).
const W2_REL: f64 = 1e-6;
/// Division: ulps from the CPU's correctly rounded quotient, for normal quotients.
const DIV_ULPS: u64 = 2;

/// The ends of exp's normal range (tensor-core's `math/fastmath.rs`): beyond them, inf and 0.
const EXP_LO: f32 = -87.336_54;
const EXP_HI: f32 = 88.722_83;
const INF: f32 = f32::INFINITY;

/// 2^20 points evenly over [-100, 100].
fn sweep() -> Vec<f32> {
    let n = 1 << 20;
    (0..n).map(|i| -100.0 + i as f32 * (200.0 / n as f32)).collect()
}

/// How far `got` is from the f64 `want`, in ulps of `want` rounded to f32.
fn ulps(got: f32, want: f64) -> f64 {
    let w = (want as f32).abs();
    (got as f64 - want).abs() / (w.next_up() - w) as f64
}

fn sigmoid_f64(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

fn gelu_tanh_f64(x: f64) -> f64 {
    0.5 * x * (1.0 + (0.797_884_560_802_865_4 * (x + 0.044_715 * x * x * x)).tanh())
}

fn w2_f64(x: f64) -> f64 {
    (1.5 * x + 0.5).tanh() * sigmoid_f64(x) - 0.5 * x
}

/// The worst `error` over the sweep (a NaN error, where the GPU gave NaN for a number, is
/// the worst), with the input where it is.
fn worst(xs: &[f32], ys: &[f32], error: impl Fn(f32, f32) -> f64) -> (f64, f32) {
    xs.iter().zip(ys).fold((0.0, 0.0), |(e, at), (&x, &y)| {
        let here = error(x, y);
        if here.is_nan() || here > e {
            (if here.is_nan() { f64::INFINITY } else { here }, x)
        } else {
            (e, at)
        }
    })
}

/// A unary fast function on the sweep: its worst error against f64, within `bound`.
fn sweep_check(name: &str, f: fn(&Tensor) -> Result<Tensor>, error: impl Fn(f32, f32) -> f64, bound: f64, unit: &str) -> Result<String> {
    let xs = sweep();
    let x = Tensor::from_vec(xs.clone(), &[xs.len()])?;
    let gpu = f(&x.to_device(GPU)?)?;
    let (differ, _) = compare_bits(&f(&x)?, &gpu)?;
    let (e, at) = worst(&xs, &gpu.to_cpu()?.to_vec::<f32>()?, error);
    let verdict = if e <= bound { "" } else { "FAIL " };
    Ok(format!("{verdict}{name}: worst {e:.3e} {unit} at x = {at} (bound {bound:.0e}); {differ} of {} differ from the CPU's bits", xs.len()))
}

/// `f` on the GPU (fast) and on the CPU at the special values: the same bits (NaNs equal).
fn specials_check(f: fn(&Tensor) -> Result<Tensor>, xs: &[f32]) -> Result<String> {
    let x = Tensor::from_vec(xs.to_vec(), &[xs.len()])?;
    let (cpu, gpu) = (f(&x)?, f(&x.to_device(GPU)?)?);
    let (differ, _) = compare_bits(&cpu, &gpu)?;
    let got = gpu.to_cpu()?.to_vec::<f32>()?;
    let verdict = if differ == 0 { "" } else { "FAIL " };
    Ok(format!("{verdict}{differ} of {} differ from the CPU's bits: {:?} -> {got:?}", xs.len(), xs))
}

fn functions(c: &mut Checks) {
    let exp_error = |x: f32, y: f32| if x > EXP_LO && x < EXP_HI { ulps(y, (x as f64).exp()) } else { 0.0 };
    c.record("fast exp f32", sweep_check("exp", |t| t.exp(), exp_error, EXP_ULPS, "ulp"));
    c.record("fast tanh f32", sweep_check("tanh", |t| t.tanh(), |x, y| (y as f64 - (x as f64).tanh()).abs(), TANH_ABS, "abs"));
    c.record("fast sigmoid f32", sweep_check("sigmoid", |t| t.sigmoid(), |x, y| (y as f64 - sigmoid_f64(x as f64)).abs(), SIGMOID_ABS, "abs"));
    let gelu_error = |x: f32, y: f32| (y as f64 - gelu_tanh_f64(x as f64)).abs();
    c.record("fast gelu_tanh f32", sweep_check("gelu_tanh", |t| t.gelu_tanh(), gelu_error, GELU_TANH_ABS, "abs"));
    let nan = f32::NAN;
    c.record("fast exp specials", specials_check(|t| t.exp(), &[0.0, -0.0, 1e-40, -1e-40, INF, -INF, nan, 88.8, 100.0, -87.4, -88.8, -100.0]));
    let tanh_specials = [0.0, -0.0, 1e-40, -1e-40, 3e-4, -3e-4, 7.95, -7.95, 88.8, -100.0, INF, -INF, nan];
    c.record("fast tanh specials", specials_check(|t| t.tanh(), &tanh_specials));
    c.record("fast sigmoid specials", specials_check(|t| t.sigmoid(), &[17.5, 20.0, 88.8, 100.0, INF, -88.8, -100.0, -INF, nan]));
    c.record("fast gelu_tanh specials", specials_check(|t| t.gelu_tanh(), &[0.0, -0.0, 100.0, -100.0, INF, -INF, nan]));
}

/// Quotients over the whole range of f32: numerators from 2^-140 to 2^127 of both signs,
/// denominators chosen so that the quotients spread from 2^-140 to 2^127 too (subnormal
/// operands and denominators above 2^126 among them). Within [`DIV_ULPS`] of the CPU's
/// correctly rounded quotient where it is normal (subnormal quotients reported, not judged);
/// infinities, zeros' signs and NaNs as the CPU's, and IEEE's specials exactly.
fn division(c: &mut Checks) -> Result<()> {
    let value = |m: usize, e: i32, negative: bool| {
        let v = (1.0 + (m % 1000) as f64 / 1000.0) * 2f64.powi(e);
        (if negative { -v } else { v }) as f32
    };
    let n = 1 << 18;
    let (mut a, mut b) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for i in 0..n {
        let ea = (i * 31 % 268) as i32 - 140;
        let quotient = ((i * 37 + 11) % 268) as i32 - 140;
        a.push(value(i * 7919, ea, i % 3 == 0));
        b.push(value(i * 104_729 + 7, (ea - quotient).clamp(-140, 127), i % 5 == 0));
    }
    let (a, b) = (Tensor::from_vec(a, &[n])?, Tensor::from_vec(b, &[n])?);
    let cpu = a.div(&b)?.to_vec::<f32>()?;
    let gpu = a.to_device(GPU)?.div(&b.to_device(GPU)?)?.to_cpu()?.to_vec::<f32>()?;
    let (mut normal, mut subnormal, mut mismatched) = (0u64, 0u64, 0usize);
    for (&q, &g) in cpu.iter().zip(&gpu) {
        if q.is_nan() || g.is_nan() {
            mismatched += usize::from(q.is_nan() != g.is_nan());
        } else if q.is_finite() != g.is_finite() || q.is_sign_negative() != g.is_sign_negative() {
            mismatched += 1;
        } else if q.is_finite() {
            let d = (q.to_bits() as i64 - g.to_bits() as i64).unsigned_abs();
            if q.abs() >= f32::MIN_POSITIVE {
                normal = normal.max(d);
            } else {
                subnormal = subnormal.max(d);
            }
        }
    }
    let verdict = if normal <= DIV_ULPS && mismatched == 0 { "" } else { "FAIL " };
    c.record(
        "fast division f32 over the whole range",
        Ok(format!("{verdict}worst {normal} ulp for normal quotients (bound {DIV_ULPS}), {subnormal} ulp for subnormal ones; {mismatched} of {n} differ in sign, finiteness or NaN")),
    );
    let pairs = [
        (1.0, 0.0),
        (-1.0, 0.0),
        (0.0, 0.0),
        (INF, INF),
        (1.0, INF),
        (-1.0, INF),
        (INF, 1.0),
        (0.0, 5.0),
        (-0.0, 5.0),
        (f32::NAN, 1.0),
        (1.0, f32::NAN),
    ];
    let (x, y): (Vec<f32>, Vec<f32>) = pairs.iter().copied().unzip();
    let (x, y) = (Tensor::from_vec(x, &[pairs.len()])?, Tensor::from_vec(y, &[pairs.len()])?);
    let (cpu, gpu) = (x.div(&y)?, x.to_device(GPU)?.div(&y.to_device(GPU)?)?);
    let (differ, _) = compare_bits(&cpu, &gpu)?;
    let got = gpu.to_cpu()?.to_vec::<f32>()?;
    c.record(
        "fast division specials",
        Ok(format!("{}{differ} of {} differ from the CPU's bits: {got:?}", if differ == 0 { "" } else { "FAIL " }, pairs.len())),
    );
    Ok(())
}

/// W2 in fast mode: within its bound of f64, graph == eager on the GPU bit for bit, and
/// not the default kernel's bits.
fn w2_checks(c: &mut Checks, default_gpu: &Tensor) -> Result<()> {
    let xs = sweep();
    let x = Tensor::from_vec(xs.clone(), &[xs.len()])?.to_device(GPU)?;
    let (eager, graph) = (w2(&x)?, w2_graph(&x)?);
    let (differ, _) = compare_bits(&eager, &graph)?;
    c.record("fast W2 graph == W2 eager on the GPU", Ok(format!("{}{differ} of {} differ", if differ == 0 { "" } else { "FAIL " }, xs.len())));
    let ys = graph.to_cpu()?.to_vec::<f32>()?;
    let (e, at) = worst(&xs, &ys, |x, y| (y as f64 - w2_f64(x as f64)).abs() / w2_f64(x as f64).abs().max(1.0));
    let (changed, _) = compare_bits(default_gpu, &graph)?;
    let verdict = if e <= W2_REL && changed > 0 { "" } else { "FAIL " };
    c.record(
        "fast W2 against f64",
        Ok(format!(
            "{verdict}worst {e:.3e} relative at x = {at} (bound {W2_REL:.0e}); {changed} of {} differ from the default kernel's bits",
            xs.len()
        )),
    );
    Ok(())
}

/// A captured training step in fast mode (W3: its first call in the mode runs step by step
/// and loads the mode's kernels, the second captures): the parameters after three graph
/// steps equal three eager steps' bit for bit, and no capture failed.
fn captured_step(c: &mut Checks) -> Result<()> {
    let failures_before = cuda_graph_counts().1;
    let (bx, labels) = w3_batch(3)?;
    let (gx, gl) = (bx.to_device(GPU)?, labels.to_device(GPU)?);
    let (eager, graph) = (Mlp::new(0)?.to_device(GPU)?, Mlp::new(0)?.to_device(GPU)?);
    for _ in 0..3 {
        eager.train_step(&gx, &gl, 0.01)?;
        w3_graph(&graph, &gx, &gl)?;
    }
    let mut differ = 0;
    for (a, b) in eager.params.iter().zip(&graph.params) {
        differ += compare_bits(a, b)?.0;
    }
    let (_, failures, last) = cuda_graph_counts();
    let verdict = if differ == 0 && failures == failures_before { "" } else { "FAIL " };
    c.record(
        "fast W3: params after 3 captured graph steps == 3 eager steps",
        Ok(format!("{verdict}{differ} values differ; {} capture failures {last}", failures - failures_before)),
    );
    Ok(())
}

/// Every fast-math check; fast math is off again (as the environment says) after them.
pub fn checks(c: &mut Checks) -> Result<()> {
    let x = Tensor::from_vec(sweep(), &[1 << 20])?;
    set_cuda_fast_math(Some(false));
    let default_w2 = w2_graph(&x.to_device(GPU)?)?;
    let default_exp64 = x.cast(DType::F64)?.to_device(GPU)?.exp()?;
    set_cuda_fast_math(Some(true));
    let outcome = checks_in_fast_mode(c, &x, &default_w2, &default_exp64);
    set_cuda_fast_math(Some(false));
    // Off again: W2 graph gives the CPU's bits once more (its kernel generated anew).
    let back = w2_graph(&x.to_device(GPU)?).and_then(|g| compare_bits(&w2(&x)?, &g));
    c.record("fast math off again: W2 graph == CPU bits", back.map(|(d, _)| format!("{}{d} differ", if d == 0 { "" } else { "FAIL " })));
    set_cuda_fast_math(None);
    outcome
}

fn checks_in_fast_mode(c: &mut Checks, x: &Tensor, default_w2: &Tensor, default_exp64: &Tensor) -> Result<()> {
    functions(c);
    division(c)?;
    w2_checks(c, default_w2)?;
    captured_step(c)?;
    let exp64 = x.cast(DType::F64)?.to_device(GPU)?.exp()?;
    let (differ, _) = compare_bits(default_exp64, &exp64)?;
    c.record("fast math leaves f64 alone (exp)", Ok(format!("{}{differ} differ", if differ == 0 { "" } else { "FAIL " })));
    Ok(())
}

/// One JSON line: W2 graph (4 Mi f32) in this process's mode, calls queued back to back
/// (the median of five runs of 200), against `x + 0` (our one-op copy) timed alike, with
/// the fraction of the copy's bandwidth W2 reaches.
pub fn w2_bandwidth(gpu_name: &str) -> Result<String> {
    let n = 4_194_304;
    let x = Tensor::randn(&[n], DType::F32, 11).to_device(GPU)?;
    let median = |f: &mut dyn FnMut() -> Result<()>| -> Result<f64> {
        let mut us = (0..5).map(|_| pipelined(&mut *f, 200)).collect::<Result<Vec<f64>>>()?;
        us.sort_by(f64::total_cmp);
        Ok(us[2])
    };
    let w2_us = median(&mut || w2_graph(&x).map(|_| ()))?;
    let copy_us = median(&mut || x.add(0.0f32).map(|_| ()))?;
    let bytes = 2.0 * 4.0 * n as f64;
    let fast = std::env::var("TENSOR_CORE_CUDA_FAST_MATH").is_ok_and(|v| v.trim() == "1");
    Ok(format!(
        "{{\"framework\":\"tensor-core\",\"mode\":\"graph\",\"workload\":\"W2\",\"device\":\"cuda\",\"gpu\":\"{gpu_name}\",\"fast_math\":{},\"pipelined_us\":{w2_us:.2},\"gbps\":{:.1},\"copy_pipelined_us\":{copy_us:.2},\"copy_gbps\":{:.1},\"frac_copy\":{:.3}}}",
        u8::from(fast),
        bytes / w2_us / 1e3,
        bytes / copy_us / 1e3,
        copy_us / w2_us
    ))
}
