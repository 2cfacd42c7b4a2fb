//! The GPU checks and GPU timings of `scripts/gpu_device_check.sh` (feature `cuda`): every
//! GPU op against the CPU op on the same data (bits for elementwise ops, 1e-5 relative for
//! products and reductions), gradients on the GPU against the CPU's, the errors, graph
//! functions, a transformer's ops and W7's training step (`transformer`), the opt-in fast
//! math (`fast_math`), then timings of W2 (eager and as one fused kernel), W3, W5, W6 and W7.
//! Prints one line per check and ends with `N passed, M failed`; `--json FILE` appends the
//! timings as the bench's JSON lines; `--w2-bandwidth` prints only W2 graph's throughput
//! against a copy, in the process's fast-math mode.
//!
//! ```sh
//! cargo run --release -p examples --features cuda --bin gpu_check -- --json gpu.jsonl
//! ```

mod fast_math;
mod transformer;

use examples::bench::workloads::{w2_graph, w3_batch, w3_graph, w6_graph, Mlp};
use std::time::Instant;
use tensor_core::function::lookup;
use tensor_core::graph::NodeKind;
use tensor_core::prelude::*;

const GPU: Device = Device::Cuda(0);

#[derive(Default)]
struct Checks {
    passed: usize,
    failed: usize,
}

impl Checks {
    fn record(&mut self, name: &str, outcome: Result<String>) {
        match outcome {
            Ok(detail) if !detail.starts_with("FAIL") => {
                self.passed += 1;
                println!("ok    {name}: {detail}");
            }
            Ok(detail) => {
                self.failed += 1;
                println!("FAIL  {name}: {detail}");
            }
            Err(e) => {
                self.failed += 1;
                println!("FAIL  {name}: error: {e}");
            }
        }
    }
}

/// Values that find the edges: zeros of both signs, NaN, infinities, subnormals, the ends of
/// the fast functions' ranges, then a sweep.
fn special_f32() -> Vec<f32> {
    let mut v = vec![
        0.0,
        -0.0,
        1.0,
        -1.0,
        0.5,
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        1e-40,
        -1e-40,
        88.72283,
        88.8,
        -87.33654,
        -87.4,
        100.0,
        -100.0,
        7.905311,
        -7.905311,
        7.95,
        3e-4,
        4e-4,
        -3e-4,
        1e30,
        -1e30,
        f32::MAX,
        f32::MIN_POSITIVE,
    ];
    v.extend((0..8192).map(|i| -20.0 + i as f32 * (40.0 / 8192.0) + 1e-3));
    v.extend((0..2048).map(|i| -100.0 + i as f32 * (200.0 / 2048.0)));
    v
}

fn bits_f32(t: &Tensor) -> Result<Vec<u32>> {
    Ok(t.to_cpu()?.to_vec::<f32>()?.iter().map(|x| if x.is_nan() { 0x7fc0_0000 } else { x.to_bits() }).collect())
}

fn bits_f64(t: &Tensor) -> Result<Vec<u64>> {
    Ok(t.to_cpu()?.to_vec::<f64>()?.iter().map(|x| if x.is_nan() { 0x7ff8_0000_0000_0000 } else { x.to_bits() }).collect())
}

/// How many results differ in their bits, and the largest difference in ulps (NaNs equal).
fn compare_bits(cpu: &Tensor, gpu: &Tensor) -> Result<(usize, u64)> {
    let pairs: Vec<(u64, u64)> = match cpu.dtype() {
        DType::F32 => bits_f32(cpu)?.into_iter().zip(bits_f32(gpu)?).map(|(a, b)| (a as u64, b as u64)).collect(),
        DType::F64 => bits_f64(cpu)?.into_iter().zip(bits_f64(gpu)?).collect(),
        DType::I32 => cpu.to_vec::<i32>()?.into_iter().zip(gpu.to_cpu()?.to_vec::<i32>()?).map(|(a, b)| (a as u32 as u64, b as u32 as u64)).collect(),
        DType::I64 => cpu.to_vec::<i64>()?.into_iter().zip(gpu.to_cpu()?.to_vec::<i64>()?).map(|(a, b)| (a as u64, b as u64)).collect(),
        DType::Bool => cpu.to_vec::<bool>()?.into_iter().zip(gpu.to_cpu()?.to_vec::<bool>()?).map(|(a, b)| (a as u64, b as u64)).collect(),
    };
    let differ = pairs.iter().filter(|(a, b)| a != b).count();
    let worst = pairs.iter().map(|(a, b)| a.abs_diff(*b)).max().unwrap_or(0);
    Ok((differ, worst))
}

/// `f` on the CPU and on the GPU: the same bits, or (`exact = false`: a function the CPU
/// takes from the C library) within `tol` of each value, relative to max(|value|, 1), with
/// NaNs and infinities where the CPU has them.
fn same_bits(x: &Tensor, f: &dyn Fn(&Tensor) -> Result<Tensor>, exact: bool, tol: f64) -> Result<String> {
    let cpu = f(x)?;
    let gpu = f(&x.to_device(GPU)?)?;
    if gpu.device() != GPU {
        return Ok(format!("FAIL the result is on {}", gpu.device()));
    }
    let (differ, worst) = compare_bits(&cpu, &gpu)?;
    let n = cpu.numel();
    if exact || differ == 0 || !cpu.dtype().is_float() {
        let verdict = if differ == 0 { "" } else { "FAIL " };
        return Ok(format!("{verdict}{differ} of {n} differ in bits, worst {worst} ulp"));
    }
    let a = cpu.cast(DType::F64)?.to_vec::<f64>()?;
    let b = gpu.to_cpu()?.cast(DType::F64)?.to_vec::<f64>()?;
    let mut err = 0.0f64;
    for (x, y) in a.iter().zip(&b) {
        if x.is_finite() != y.is_finite() || (!x.is_finite() && x.to_bits() != y.to_bits() && !(x.is_nan() && y.is_nan())) {
            return Ok(format!("FAIL {x} on the CPU, {y} on the GPU"));
        }
        if x.is_finite() {
            err = err.max((x - y).abs() / x.abs().max(1.0));
        }
    }
    let verdict = if err <= tol { "" } else { "FAIL " };
    Ok(format!("{verdict}{differ} of {n} differ in bits, worst {worst} ulp, error {err:.1e} (tolerance {tol:.0e})"))
}

/// The largest difference relative to the largest magnitude of the CPU result.
fn rel_err(cpu: &Tensor, gpu: &Tensor) -> Result<f64> {
    let a = cpu.cast(DType::F64)?.to_vec::<f64>()?;
    let b = gpu.to_cpu()?.cast(DType::F64)?.to_vec::<f64>()?;
    if a.len() != b.len() || cpu.dims() != gpu.dims() {
        return Ok(f64::INFINITY);
    }
    let scale = a.iter().fold(0.0f64, |m, v| m.max(v.abs())).max(1e-30);
    Ok(a.iter().zip(&b).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max) / scale)
}

fn close(x: &[&Tensor], f: &dyn Fn(&[Tensor]) -> Result<Tensor>, tol: f64) -> Result<String> {
    let cpu = f(&x.iter().map(|t| (*t).clone()).collect::<Vec<_>>())?;
    let on_gpu = x.iter().map(|t| t.to_device(GPU)).collect::<Result<Vec<_>>>()?;
    let gpu = f(&on_gpu)?;
    let e = rel_err(&cpu, &gpu)?;
    Ok(format!("{}relative error {e:.2e} (tolerance {tol:.0e})", if e <= tol { "" } else { "FAIL " }))
}

type Unary = (&'static str, fn(&Tensor) -> Result<Tensor>, bool);

fn unary_ops() -> Vec<Unary> {
    // (name, op, bit-exact on f32): the f32 functions ported from fastmath.rs must match;
    // those the CPU takes from the C library (log, erf) need only be close.
    vec![
        ("neg", |x| x.neg(), true),
        ("exp", |x| x.exp(), true),
        ("log", |x| x.abs()?.log(), false),
        ("sqrt", |x| x.abs()?.sqrt(), true),
        ("tanh", |x| x.tanh(), true),
        ("sigmoid", |x| x.sigmoid(), true),
        ("relu", |x| x.relu(), true),
        ("abs", |x| x.abs(), true),
        ("sign", |x| x.sign(), true),
        ("erf", |x| x.erf(), false),
        ("gelu_tanh", |x| x.gelu_tanh(), true),
        ("gelu", |x| x.gelu(), false),
    ]
}

fn elementwise_checks(c: &mut Checks) -> Result<()> {
    let v = special_f32();
    let n = v.len();
    let x32 = Tensor::from_vec(v.clone(), &[n])?;
    let x64 = x32.cast(DType::F64)?;
    let y32 = Tensor::from_vec(v.iter().rev().map(|x| x * 0.75 + 0.25).collect::<Vec<f32>>(), &[n])?;
    let y64 = y32.cast(DType::F64)?;
    for (name, f, exact) in unary_ops() {
        c.record(&format!("{name} f32"), same_bits(&x32, &f, exact, 1e-6));
        // The CPU's f64 transcendental functions are the C library's; CUDA's differ in the
        // last bits.
        let exact64 = matches!(name, "neg" | "relu" | "abs" | "sign" | "sqrt");
        c.record(&format!("{name} f64"), same_bits(&x64, &f, exact64, 1e-14));
    }
    type Binary = (&'static str, fn(&Tensor, &Tensor) -> Result<Tensor>, bool);
    let binary: Vec<Binary> = vec![
        ("add", |a, b| a.add(b), true),
        ("sub", |a, b| a.sub(b), true),
        ("mul", |a, b| a.mul(b), true),
        ("div", |a, b| a.div(b), true),
        ("maximum", |a, b| a.maximum(b), true),
        ("minimum", |a, b| a.minimum(b), true),
        ("pow", |a, b| a.abs()?.pow(b), false),
        ("lt", |a, b| a.lt(b), true),
        ("eq", |a, b| a.eq(b), true),
        ("ge", |a, b| a.ge(b), true),
        ("where", |a, b| Tensor::where_(&a.gt(b)?, a, b), true),
    ];
    for (name, f, exact) in &binary {
        let exact64 = *exact;
        for (dt, x, y) in [("f32", &x32, &y32), ("f64", &x64, &y64)] {
            let g = |t: &Tensor| -> Result<Tensor> {
                let other = if t.device() == GPU { y.to_device(GPU)? } else { y.clone() };
                f(t, &other)
            };
            c.record(&format!("{name} {dt}"), same_bits(x, &g, exact64, if dt == "f32" { 1e-6 } else { 1e-14 }));
        }
    }
    let ints = Tensor::from_vec((0..4096).map(|i| (i * 7919 % 2003) - 1000).collect::<Vec<i64>>(), &[4096])?;
    let other = Tensor::from_vec((0..4096).map(|i| (i * 104_729 % 37) - 18).collect::<Vec<i64>>(), &[4096])?;
    for dt in [DType::I32, DType::I64] {
        let (a, b) = (ints.cast(dt)?, other.cast(dt)?);
        for (name, f, _) in &binary[..6] {
            let g = |t: &Tensor| -> Result<Tensor> {
                let o = if t.device() == GPU { b.to_device(GPU)? } else { b.clone() };
                f(t, &o)
            };
            c.record(&format!("{name} {dt}"), same_bits(&a, &g, true, 0.0));
        }
    }
    // Scalars, clamps and casts: the generator's literals and conversions.
    c.record("x * 1.5 + 0.5 f32", same_bits(&x32, &|t| t.mul(1.5)?.add(0.5), true, 0.0));
    c.record("clamp f32", same_bits(&x32, &|t| t.clamp(-2.0, 3.0), true, 0.0));
    for to in [DType::F64, DType::I32, DType::I64, DType::Bool] {
        c.record(&format!("cast f32 -> {to}"), same_bits(&x32, &|t| t.cast(to), true, 0.0));
    }
    c.record("cast f64 -> f32", same_bits(&x64, &|t| t.cast(DType::F32), true, 0.0));
    c.record("cast i64 -> f32", same_bits(&ints, &|t| t.mul(1_000_003i64)?.cast(DType::F32), true, 0.0));
    Ok(())
}

fn layout_and_product_checks(c: &mut Checks) -> Result<()> {
    let a = Tensor::randn(&[4, 37, 64], DType::F32, 1);
    let row = Tensor::randn(&[64], DType::F32, 2);
    let col = Tensor::randn(&[4, 37, 1], DType::F32, 3);
    c.record(
        "broadcast add [4,37,64] + [64]",
        same_bits(&a, &|t| t.add(&if t.device() == GPU { row.to_device(GPU)? } else { row.clone() }), true, 0.0),
    );
    c.record(
        "broadcast mul [4,37,64] * [4,37,1]",
        same_bits(&a, &|t| t.mul(&if t.device() == GPU { col.to_device(GPU)? } else { col.clone() }), true, 0.0),
    );
    c.record("permute [2,0,1]", same_bits(&a, &|t| t.permute(&[2, 0, 1]), true, 0.0));
    c.record("transpose + reshape", same_bits(&a, &|t| t.transpose(1, 2)?.reshape([4, -1]), true, 0.0));
    c.record("broadcast_to", same_bits(&row, &|t| t.broadcast_to(&[3, 5, 64]), true, 0.0));
    c.record("sum all", close(&[&a], &|t| t[0].sum(), 1e-5));
    c.record("sum axis 1", close(&[&a], &|t| t[0].sum_axes(&[1], false), 1e-5));
    c.record("mean axes 0,2 keepdim", close(&[&a], &|t| t[0].mean_axes(&[0, 2], true), 1e-5));
    c.record("max axis 2", close(&[&a], &|t| t[0].max_axes(&[2], false), 0.0));
    c.record("min all", close(&[&a], &|t| t[0].min(), 0.0));
    // Four elements per output: a thread per output (SERIAL_REDUCE_MAX), not a block.
    c.record("sum axis 0 (a thread per output)", close(&[&a], &|t| t[0].sum_axes(&[0], false), 1e-5));
    c.record("mean axis 0 keepdim (a thread per output)", close(&[&a], &|t| t[0].mean_axes(&[0], true), 1e-5));
    c.record("max axis 0 (a thread per output)", close(&[&a], &|t| t[0].max_axes(&[0], false), 0.0));
    // A block per row, one row kernel; a softmax along another axis is composed.
    let logits = Tensor::randn(&[128, 10], DType::F32, 7);
    c.record("softmax rows [128,10]", close(&[&logits], &|t| t[0].softmax(1), 1e-5));
    c.record("log_softmax rows [4,37,64]", close(&[&a], &|t| t[0].log_softmax(2), 1e-5));
    c.record("softmax axis 1 [4,37,64]", close(&[&a], &|t| t[0].softmax(1), 1e-5));
    let m = Tensor::randn(&[128, 784], DType::F32, 4);
    let w = Tensor::randn(&[784, 512], DType::F32, 5);
    c.record("matmul [128,784]@[784,512]", close(&[&m, &w], &|t| t[0].matmul(&t[1]), 1e-5));
    c.record("matmul aT@b", close(&[&w, &w], &|t| t[0].transpose(0, 1)?.matmul(&t[1]), 1e-5));
    c.record("matmul a@bT", close(&[&m, &m], &|t| t[0].matmul(&t[1].transpose(0, 1)?), 1e-5));
    let q = Tensor::randn(&[4, 8, 128, 64], DType::F32, 6);
    c.record("batched matmul q@kT", close(&[&q, &q], &|t| t[0].matmul(&t[1].transpose(2, 3)?), 1e-5));
    c.record("matmul broadcast batch [4,8,128,64]@[64,32]", close(&[&q, &w.narrow(0, 0, 64)?.narrow(1, 0, 32)?], &|t| t[0].matmul(&t[1]), 1e-5));
    let d = m.cast(DType::F64)?;
    let wd = w.cast(DType::F64)?;
    c.record("matmul f64", close(&[&d, &wd], &|t| t[0].matmul(&t[1]), 1e-12));
    Ok(())
}

/// An MLP's loss and gradients on the GPU against the CPU's.
fn gradient_checks(c: &mut Checks) -> Result<()> {
    let x = Tensor::randn(&[64, 100], DType::F32, 7);
    let target = Tensor::randn(&[64, 10], DType::F32, 8);
    let w1 = Tensor::randn(&[100, 50], DType::F32, 9).mul(0.1)?;
    let w2 = Tensor::randn(&[50, 10], DType::F32, 10).mul(0.1)?;
    let b1 = Tensor::zeros(&[50], DType::F32);
    let run = |device: Device| -> Result<Vec<Tensor>> {
        let params = [&w1, &b1, &w2].iter().map(|p| p.to_device(device)?.requires_grad_(true)).collect::<Result<Vec<_>>>()?;
        let (x, t) = (x.to_device(device)?, target.to_device(device)?);
        let h = x.matmul(&params[0])?.add(&params[1])?.tanh()?;
        let y = h.matmul(&params[2])?;
        let loss = y.sub(&t)?.mul(&y.sub(&t)?)?.mean()?;
        loss.backward()?;
        let mut out = vec![loss];
        out.extend(params.iter().map(|p| p.grad().expect("a gradient")));
        Ok(out)
    };
    let (cpu, gpu) = (run(Device::Cpu)?, run(GPU)?);
    for (name, (a, b)) in ["loss", "grad w1", "grad b1", "grad w2"].iter().zip(cpu.iter().zip(&gpu)) {
        let on = if b.device() == GPU { "" } else { "FAIL not on the GPU; " };
        c.record(&format!("mlp {name}"), rel_err(a, b).map(|e| format!("{on}{}relative error {e:.2e}", if e <= 1e-5 { "" } else { "FAIL " })));
    }
    Ok(())
}

fn error_checks(c: &mut Checks) -> Result<()> {
    let a = Tensor::ones(&[3], DType::F32);
    let g = a.to_device(GPU)?;
    let mixed = g.add(&a);
    c.record(
        "mixing devices is an Err naming both",
        Ok(match mixed {
            Err(e) if e.to_string().contains("cuda:0") && e.to_string().contains("cpu") => format!("{e}"),
            other => format!("FAIL {:?}", other.map(|t| t.device())),
        }),
    );
    let scalar = g.mul(&Tensor::scalar(2.0f32))?;
    c.record("a 0-d CPU tensor goes along", Ok(format!("{:?}", scalar.to_cpu()?.to_vec::<f32>()?)));
    c.record(
        "a missing GPU is an Err",
        Ok(match a.to_device(Device::Cuda(97)) {
            Err(e) => format!("{e}"),
            Ok(_) => "FAIL cuda:97 exists?".into(),
        }),
    );
    c.record(
        "reading GPU data without to_cpu is an Err",
        Ok(match g.to_vec::<f32>() {
            Err(e) => format!("{e}"),
            Ok(_) => "FAIL".into(),
        }),
    );
    c.record(
        "an op without a GPU kernel is an Err",
        Ok(match g.argmax(0, false) {
            Err(e) if e.to_string().contains("to_cpu") => format!("{e}"),
            other => format!("FAIL {:?}", other.map(|t| t.device())),
        }),
    );
    Ok(())
}

#[graph_fn]
fn w2_traced(x: &Tensor) -> Result<Tensor> {
    examples::bench::workloads::w2(x)
}

#[graph_fn(reduce_retracing)]
fn relaxed(x: &Tensor) -> Result<Tensor> {
    x.exp()?.mul(2.0f32)?.add(x)
}

#[graph_fn]
fn on_device(x: &Tensor) -> Result<Tensor> {
    x.exp()?.mul(2.0f32)
}

/// W3's model with its parameters on `device`.
fn mlp_on(device: Device) -> Result<Mlp> {
    Mlp::new(0)?.to_device(device)
}

/// Graph functions on the GPU: one trace per device, graph == eager on the GPU bit for bit,
/// and W3's training step (forward, backward, SGD in place) against the CPU's.
fn graph_checks(c: &mut Checks) -> Result<()> {
    let x = Tensor::randn(&[1000], DType::F32, 21);
    let cpu = on_device(&x)?;
    let gpu = on_device(&x.to_device(GPU)?)?;
    let f = lookup("on_device").expect("traced");
    let reasons = f.retrace_reasons().join("; ");
    c.record(
        "a graph function traces once per device",
        Ok(format!("{}{} traces; {reasons}", if f.trace_count() == 2 { "" } else { "FAIL " }, f.trace_count())),
    );
    c.record("its GPU call returns GPU data", Ok(format!("{}{}", if gpu.device() == GPU { "" } else { "FAIL " }, gpu.device())));
    let (differ, _) = compare_bits(&cpu, &gpu)?;
    c.record("graph on the GPU == graph on the CPU (exp, mul)", Ok(format!("{}{differ} of 1000 differ", if differ == 0 { "" } else { "FAIL " })));
    for n in [3, 4, 5, 9] {
        let x = Tensor::randn(&[n], DType::F32, n as u64);
        let (cpu, gpu) = (relaxed(&x)?, relaxed(&x.to_device(GPU)?)?);
        let (differ, _) = compare_bits(&cpu, &gpu)?;
        c.record(&format!("a relaxed trace on the GPU, size {n}"), Ok(format!("{}{differ} differ", if differ == 0 { "" } else { "FAIL " })));
    }
    let big = Tensor::randn(&[1 << 20], DType::F32, 22).to_device(GPU)?;
    let (eager, graph) = (examples::bench::workloads::w2(&big)?, w2_graph(&big)?);
    let (differ, _) = compare_bits(&eager, &graph)?;
    c.record("W2 graph == W2 eager on the GPU", Ok(format!("{}{differ} of {} differ", if differ == 0 { "" } else { "FAIL " }, 1 << 20)));
    let (bx, labels) = w3_batch(3)?;
    let (cpu_model, eager_model, graph_model) = (mlp_on(Device::Cpu)?, mlp_on(GPU)?, mlp_on(GPU)?);
    let (gx, gl) = (bx.to_device(GPU)?, labels.to_device(GPU)?);
    for step in 0..3 {
        let l_cpu = cpu_model.train_step(&bx, &labels, 0.01)?;
        let l_eager = eager_model.train_step(&gx, &gl, 0.01)?;
        let l_graph = w3_graph(&graph_model, &gx, &gl)?;
        let (differ, _) = compare_bits(&l_eager, &l_graph)?;
        c.record(
            &format!("W3 step {step}: loss graph == eager on the GPU"),
            Ok(format!("{}{differ} differ", if differ == 0 { "" } else { "FAIL " })),
        );
        c.record(
            &format!("W3 step {step}: loss GPU vs CPU"),
            rel_err(&l_cpu, &l_graph).map(|e| format!("{}relative error {e:.2e}", if e <= 1e-5 { "" } else { "FAIL " })),
        );
    }
    for (k, (a, b)) in cpu_model.params.iter().zip(&graph_model.params).enumerate() {
        c.record(
            &format!("W3 param {k} after 3 steps, GPU graph vs CPU"),
            rel_err(a, b).map(|e| format!("{}{} relative error {e:.2e}", if e <= 1e-5 { "" } else { "FAIL " }, b.device())),
        );
    }
    for (k, (a, b)) in eager_model.params.iter().zip(&graph_model.params).enumerate() {
        let (differ, _) = compare_bits(a, b)?;
        c.record(
            &format!("W3 param {k} after 3 steps, GPU graph == GPU eager"),
            Ok(format!("{}{differ} differ", if differ == 0 { "" } else { "FAIL " })),
        );
    }
    // The replayed step writes each parameter in place (resident state); a detached copy
    // shares that buffer, so the next call must run step by step and leave the copy alone.
    let p0 = &graph_model.params[0];
    let snapshot = p0.detach();
    let before = snapshot.to_cpu()?;
    w3_graph(&graph_model, &gx, &gl)?;
    let (kept, _) = compare_bits(&before, &snapshot)?;
    let (stepped, _) = compare_bits(&before, p0)?;
    c.record(
        "a detached parameter keeps its values through a graph step",
        Ok(format!("{}{kept} of its values changed; the parameter's: {stepped}", if kept == 0 && stepped > 0 { "" } else { "FAIL " })),
    );
    Ok(())
}

/// Median microseconds per call of `f`, synchronized after each call.
fn time(mut f: impl FnMut() -> Result<()>, calls: usize) -> Result<f64> {
    for _ in 0..3 {
        f()?;
    }
    GPU.synchronize()?;
    let mut us: Vec<f64> = (0..calls)
        .map(|_| {
            let t = Instant::now();
            f().and_then(|_| GPU.synchronize()).map(|_| t.elapsed().as_secs_f64() * 1e6)
        })
        .collect::<Result<_>>()?;
    us.sort_by(f64::total_cmp);
    Ok(us[us.len() / 2])
}

/// Microseconds per call of `calls` calls queued back to back, then one wait: the GPU's
/// throughput when the host keeps ahead of it (what a training loop sees).
fn pipelined(mut f: impl FnMut() -> Result<()>, calls: usize) -> Result<f64> {
    f()?;
    GPU.synchronize()?;
    let t = Instant::now();
    for _ in 0..calls {
        f()?;
    }
    GPU.synchronize()?;
    Ok(t.elapsed().as_secs_f64() * 1e6 / calls as f64)
}

fn json(workload: &str, mode: &str, median_us: f64, extra: &str, name: &str) -> String {
    format!(
        "{{\"framework\":\"tensor-core\",\"mode\":\"{mode}\",\"workload\":\"{workload}\",\"device\":\"cuda\",\"gpu\":\"{name}\",\"median_us\":{median_us:.2}{extra}}}"
    )
}

fn timings(c: &mut Checks, name: &str) -> Result<Vec<String>> {
    let mut lines = Vec::new();
    let n = 4_194_304;
    let x = Tensor::randn(&[n], DType::F32, 11).to_device(GPU)?;
    let eager = time(|| examples::bench::workloads::w2(&x).map(|_| ()), 50)?;
    let bytes = 2.0 * 4.0 * n as f64;
    lines.push(json("W2", "eager", eager, &format!(",\"gbps\":{:.1}", bytes / eager / 1e3), name));
    // The fused program the graph compiler makes of W2, as one generated kernel.
    let cpu_x = x.to_cpu()?;
    w2_traced(&cpu_x)?;
    let concrete = lookup("w2_traced").expect("traced").concrete_functions();
    let graph = concrete[0].graph();
    let program = graph.nodes.iter().find_map(|node| match &node.kind {
        NodeKind::Fused(p) => Some(p.clone()),
        _ => None,
    });
    if let Some(p) = program {
        let fused = time(|| tensor_core::ops::run_fused(&p, &[&x]).map(|_| ()), 50)?;
        lines.push(json("W2", "fused-kernel", fused, &format!(",\"gbps\":{:.1}", bytes / fused / 1e3), name));
        let out = tensor_core::ops::run_fused(&p, &[&x])?.remove(0);
        let (differ, worst) = compare_bits(&examples::bench::workloads::w2(&cpu_x)?, &out)?;
        c.record("W2 fused kernel vs CPU eager", Ok(format!("{}{differ} of {n} differ, worst {worst} ulp", if differ == 0 { "" } else { "FAIL " })));
    } else {
        c.record("W2 fused kernel", Ok("FAIL the W2 graph has no fused node".into()));
    }
    let graph = time(|| w2_graph(&x).map(|_| ()), 50)?;
    let graph_p = pipelined(|| w2_graph(&x).map(|_| ()), 200)?;
    lines.push(json(
        "W2",
        "graph",
        graph,
        &format!(",\"pipelined_us\":{graph_p:.2},\"gbps\":{:.1},\"gbps_pipelined\":{:.1}", bytes / graph / 1e3, bytes / graph_p / 1e3),
        name,
    ));
    let (bx, labels) = w3_batch(3)?;
    let (gx, gl) = (bx.to_device(GPU)?, labels.to_device(GPU)?);
    let (m_eager, m_graph) = (mlp_on(GPU)?, mlp_on(GPU)?);
    let w3e = time(|| m_eager.train_step(&gx, &gl, 0.01).map(|_| ()), 50)?;
    let w3e_p = pipelined(|| m_eager.train_step(&gx, &gl, 0.01).map(|_| ()), 100)?;
    lines.push(json("W3", "eager", w3e, &format!(",\"pipelined_us\":{w3e_p:.2}"), name));
    let w3g = time(|| w3_graph(&m_graph, &gx, &gl).map(|_| ()), 50)?;
    let w3g_p = pipelined(|| w3_graph(&m_graph, &gx, &gl).map(|_| ()), 100)?;
    lines.push(json("W3", "graph", w3g, &format!(",\"pipelined_us\":{w3g_p:.2}"), name));
    let copy = time(|| x.add(0.0f32).map(|_| ()), 50)?;
    let copy_p = pipelined(|| x.add(0.0f32).map(|_| ()), 200)?;
    lines.push(json(
        "copy",
        "eager",
        copy,
        &format!(",\"pipelined_us\":{copy_p:.2},\"gbps\":{:.1},\"gbps_pipelined\":{:.1}", bytes / copy / 1e3, bytes / copy_p / 1e3),
        name,
    ));
    let a = Tensor::randn(&[1024, 1024], DType::F32, 12).to_device(GPU)?;
    let b = Tensor::randn(&[1024, 1024], DType::F32, 13).to_device(GPU)?;
    let mm = time(|| a.matmul(&b).map(|_| ()), 100)?;
    let mm_p = pipelined(|| a.matmul(&b).map(|_| ()), 200)?;
    let flop = 2.0 * 1024f64.powi(3);
    lines.push(json(
        "W5",
        "eager",
        mm,
        &format!(",\"pipelined_us\":{mm_p:.2},\"tflops\":{:.2},\"tflops_pipelined\":{:.2}", flop / mm / 1e6, flop / mm_p / 1e6),
        name,
    ));
    let one = Tensor::ones(&[1], DType::F32).to_device(GPU)?;
    let w6 = time(|| one.add(1.0f32).map(|_| ()), 200)?;
    let w6_p = pipelined(|| one.add(1.0f32).map(|_| ()), 1000)?;
    lines.push(json("W6", "eager", w6, &format!(",\"pipelined_us\":{w6_p:.2}"), name));
    let w6g = time(|| w6_graph(&one).map(|_| ()), 200)?;
    let w6g_p = pipelined(|| w6_graph(&one).map(|_| ()), 1000)?;
    lines.push(json("W6", "graph", w6g, &format!(",\"pipelined_us\":{w6g_p:.2}"), name));
    lines.extend(transformer::w7_timings(name)?);
    for l in &lines {
        println!("{l}");
    }
    Ok(lines)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let json_file = args.iter().position(|a| a == "--json").and_then(|i| args.get(i + 1).cloned());
    if args.iter().any(|a| a == "--launches-w7") {
        // W7's launches per captured call, from its plan: needs no GPU.
        match transformer::w7_launches_on_cpu() {
            Ok(line) => println!("W7 launches per call: {line}"),
            Err(e) => println!("W7 launches: error: {e}"),
        }
        return;
    }
    let name = match GPU.name() {
        Ok(n) => n,
        Err(e) => {
            println!("no GPU: {e}");
            println!("0 passed, 1 failed");
            std::process::exit(1);
        }
    };
    if args.iter().any(|a| a == "--w2-bandwidth") {
        // W2 graph against a copy, in this process's fast-math mode (the device script runs
        // it with TENSOR_CORE_CUDA_FAST_MATH=0 and 1).
        match fast_math::w2_bandwidth(&name) {
            Ok(line) => println!("{line}"),
            Err(e) => println!("W2 bandwidth: error: {e}"),
        }
        return;
    }
    println!("device cuda:0: {name}");
    if args.iter().any(|a| a == "--profile-w7") {
        // Where W7's graph spends its GPU time, step by step (run with
        // TENSOR_CORE_CUDA_PROFILE=1 TENSOR_CORE_CUDA_GRAPHS=0).
        if let Err(e) = transformer::w7_profile() {
            println!("profile: error: {e}");
        }
        return;
    }
    let mut c = Checks::default();
    for (section, f) in [
        ("elementwise", elementwise_checks as fn(&mut Checks) -> Result<()>),
        ("layout and products", layout_and_product_checks),
        ("gradients", gradient_checks),
        ("errors", error_checks),
        ("graph functions", graph_checks),
        ("movement ops", transformer::movement_checks),
        ("layer norm and attention", transformer::attention_checks),
        ("W7 on the GPU", transformer::w7_checks),
        ("fast math", fast_math::checks),
    ] {
        if let Err(e) = f(&mut c) {
            c.record(section, Err(e));
        }
    }
    match timings(&mut c, &name) {
        Ok(lines) => {
            if let Some(path) = json_file {
                use std::io::Write;
                let written = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&path)
                    .and_then(|mut f| lines.iter().try_for_each(|l| writeln!(f, "{l}")));
                if let Err(e) = written {
                    println!("cannot write {path}: {e}");
                }
            }
        }
        Err(e) => c.record("timings", Err(e)),
    }
    let (captured, failed, last) = tensor_core::compile::cuda_graph_counts();
    let verdict = if captured > 0 && failed == 0 { "" } else { "FAIL " };
    c.record("graph calls replayed as CUDA graphs", Ok(format!("{verdict}{captured} captured, {failed} failed {last}")));
    let arena = tensor_core::compile::cuda_arena_report();
    let verdict = if arena.captures > 0 && arena.failure.is_empty() && arena.bytes <= arena.unshared { "" } else { "FAIL " };
    c.record(
        "captures in one planned arena",
        Ok(format!(
            "{verdict}{} captures; the last: {:.2} MiB, {:.2} MiB without reuse {}",
            arena.captures,
            arena.bytes as f64 / 1048576.0,
            arena.unshared as f64 / 1048576.0,
            arena.failure
        )),
    );
    println!("{} passed, {} failed", c.passed, c.failed);
    std::process::exit(if c.failed == 0 { 0 } else { 1 });
}
