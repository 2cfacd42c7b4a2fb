//! What a transformer needs on the GPU: narrow, pad, concat, index_select, index_add (bits
//! against the CPU), layer norm and causal attention with their gradients (1e-5 relative),
//! and W7's training step: eager and graph on the GPU against the CPU, then its timings.

use super::{close, compare_bits, json, pipelined, rel_err, same_bits, time, Checks, GPU};
use examples::bench::w7;
use examples::gpt;
use tensor_core::ops::AttentionOptions;
use tensor_core::prelude::*;

/// `t` where `like` lives (the CPU run keeps CPU tensors, the GPU run moves them).
fn beside(t: &Tensor, like: &Tensor) -> Result<Tensor> {
    t.to_device(like.device())
}

pub fn movement_checks(c: &mut Checks) -> Result<()> {
    let a = Tensor::randn(&[4, 37, 64], DType::F32, 31);
    c.record("narrow axis 2 [5..25)", same_bits(&a, &|t| t.narrow(2, 5, 20), true, 0.0));
    c.record("narrow axis 0 then 1", same_bits(&a, &|t| t.narrow(0, 1, 2)?.narrow(1, 30, 7), true, 0.0));
    // Pad is narrow's gradient: zeros around the incoming gradient.
    let w = Tensor::randn(&[4, 30, 64], DType::F32, 35);
    let padded = |t: &Tensor| -> Result<Tensor> {
        let leaf = t.detach().requires_grad_(true)?;
        leaf.narrow(1, 3, 30)?.mul(&beside(&w, t)?)?.sum()?.backward()?;
        Ok(leaf.grad().expect("a gradient"))
    };
    c.record("pad (narrow's gradient) axis 1", same_bits(&a, &padded, true, 0.0));
    let b = Tensor::randn(&[4, 5, 64], DType::F32, 32);
    c.record("concat axis 1 of three", same_bits(&a, &|t| Tensor::concat(&[t, &beside(&b, t)?, t], 1), true, 0.0));
    let ints = Tensor::from_vec((0..24i64).collect(), &[4, 6])?;
    c.record("concat i64 axis 0", same_bits(&ints, &|t| Tensor::concat(&[t, t], 0), true, 0.0));
    let rows = Tensor::from_vec(vec![3i64, 0, 3, 36, 1, 3], &[6])?;
    c.record("index_select axis 1 (repeats)", same_bits(&a, &|t| t.index_select(1, &beside(&rows, t)?), true, 0.0));
    let rows32 = rows.cast(DType::I32)?;
    c.record(
        "index_select axis 0, i32 index",
        same_bits(&a.narrow(1, 0, 4)?, &|t| t.index_select(0, &beside(&rows32.narrow(0, 0, 2)?, t)?), true, 0.0),
    );
    let table = Tensor::randn(&[50, 16], DType::F32, 33).requires_grad_(true)?;
    let tokens = Tensor::from_vec(vec![7i64, 7, 0, 49, 7, 3, 0, 12], &[2, 4])?;
    let grads = |device: Device| -> Result<(Tensor, Tensor)> {
        let t = table.to_device(device)?;
        let e = t.embedding(&tokens.to_device(device)?)?;
        let w = Tensor::randn(&[2, 4, 16], DType::F32, 34).to_device(device)?;
        e.mul(&w)?.sum()?.backward()?;
        Ok((e, t.grad().expect("a gradient")))
    };
    let ((e_cpu, g_cpu), (e_gpu, g_gpu)) = (grads(Device::Cpu)?, grads(GPU)?);
    let bits = |a: &Tensor, b: &Tensor| -> Result<String> {
        let (differ, _) = compare_bits(a, b)?;
        let on = if b.device() == GPU { "" } else { "FAIL not on the GPU; " };
        Ok(format!("{on}{}{differ} of {} differ", if differ == 0 { "" } else { "FAIL " }, a.numel()))
    };
    c.record("embedding forward", bits(&e_cpu, &e_gpu));
    c.record("embedding gradient (index_add, repeated tokens)", bits(&g_cpu, &g_gpu));
    Ok(())
}

/// Layer norm and causal attention, forward and gradients, against the CPU.
pub fn attention_checks(c: &mut Checks) -> Result<()> {
    let x = Tensor::randn(&[2, 16, 64], DType::F32, 41);
    let w = Tensor::randn(&[64], DType::F32, 42);
    let b = Tensor::randn(&[64], DType::F32, 43);
    c.record("layer_norm forward", close(&[&x, &w, &b], &|t| t[0].layer_norm(&[64], Some(&t[1]), Some(&t[2]), 1e-5), 1e-5));
    let q = Tensor::randn(&[2, 4, 16, 16], DType::F32, 44);
    let causal = AttentionOptions { causal: true, ..Default::default() };
    c.record(
        "causal attention forward",
        close(&[&q, &q.mul(0.5)?, &q.add(1.0)?], &|t| t[0].scaled_dot_product_attention(&t[1], &t[2], causal), 1e-5),
    );
    let run = |device: Device| -> Result<Vec<Tensor>> {
        let leaves = [&x, &w, &b, &q].iter().map(|t| t.to_device(device)?.requires_grad_(true)).collect::<Result<Vec<_>>>()?;
        let y = leaves[0].layer_norm(&[64], Some(&leaves[1]), Some(&leaves[2]), 1e-5)?.gelu_tanh()?;
        let heads = y.reshape([2, 16, 4, 16])?.transpose(1, 2)?;
        let o = heads.scaled_dot_product_attention(&leaves[3], &leaves[3], causal)?;
        let loss = o.mul(&o)?.mean()?;
        loss.backward()?;
        let mut out = vec![loss];
        out.extend(leaves.iter().map(|l| l.grad().expect("a gradient")));
        Ok(out)
    };
    let (cpu, gpu) = (run(Device::Cpu)?, run(GPU)?);
    for (name, (a, b)) in ["loss", "grad x", "grad weight", "grad bias", "grad q/k/v"].iter().zip(cpu.iter().zip(&gpu)) {
        let on = if b.device() == GPU { "" } else { "FAIL not on the GPU; " };
        c.record(
            &format!("layer_norm + gelu + attention {name}"),
            rel_err(a, b).map(|e| format!("{on}{}relative error {e:.2e}", if e <= 1e-5 { "" } else { "FAIL " })),
        );
    }
    Ok(())
}

/// W7's step (AdamW) three times: on the CPU, eagerly on the GPU, as a graph function on the
/// GPU. Losses GPU against CPU within 1e-5; graph against eager on the GPU bit for bit.
pub fn w7_checks(c: &mut Checks) -> Result<()> {
    let (tokens, targets) = w7::batch(8)?;
    let (gt, gy) = (tokens.to_device(GPU)?, targets.to_device(GPU)?);
    let (cpu_model, cpu_opt) = w7::setup_on(7, Device::Cpu)?;
    let (eager_model, eager_opt) = w7::setup_on(7, GPU)?;
    let (graph_model, graph_opt) = w7::setup_on(7, GPU)?;
    let on = eager_model.parameters().iter().all(|p| p.device() == GPU);
    c.record("W7 model moved in place (to_device_)", Ok(format!("{}parameters on the GPU: {on}", if on { "" } else { "FAIL " })));
    for step in 0..3 {
        let l_cpu = gpt::train_step(&cpu_model, &cpu_opt, &tokens, &targets)?;
        let l_eager = gpt::train_step(&eager_model, &eager_opt, &gt, &gy)?;
        let l_graph = gpt::train_step_graph(&graph_model, &graph_opt, &gt, &gy)?;
        let e = rel_err(&l_cpu, &l_eager)?;
        c.record(
            &format!("W7 step {step}: loss GPU eager vs CPU"),
            Ok(format!(
                "{}{:.6} vs {:.6}, relative error {e:.2e}",
                if e <= 1e-5 { "" } else { "FAIL " },
                l_eager.to_cpu()?.item::<f32>()?,
                l_cpu.item::<f32>()?
            )),
        );
        let (differ, _) = compare_bits(&l_eager, &l_graph)?;
        c.record(
            &format!("W7 step {step}: loss graph == eager on the GPU"),
            Ok(format!("{}{differ} differ", if differ == 0 { "" } else { "FAIL " })),
        );
    }
    let mut worst = (0usize, 0usize);
    for (a, b) in eager_model.parameters().iter().zip(graph_model.parameters()) {
        let (differ, _) = compare_bits(a, &b)?;
        worst = (worst.0 + differ, worst.1 + a.numel());
    }
    c.record(
        "W7 parameters after 3 steps, GPU graph == GPU eager",
        Ok(format!("{}{} of {} differ", if worst.0 == 0 { "" } else { "FAIL " }, worst.0, worst.1)),
    );
    let traces = tensor_core::function::lookup("train_step_graph").map_or(0, |f| f.trace_count());
    c.record("W7 graph traced once on the GPU", Ok(format!("{}{traces} trace(s)", if traces == 1 { "" } else { "FAIL " })));
    // The same three graph steps captured without batched launches, then without the
    // planned arena: every parameter's bits equal the default run's (each element runs the
    // same device function; where a buffer lives changes nothing).
    let three_steps = || -> Result<Vec<Tensor>> {
        let (model, opt) = w7::setup_on(7, GPU)?;
        for _ in 0..3 {
            gpt::train_step_graph(&model, &opt, &gt, &gy)?;
        }
        Ok(model.parameters())
    };
    tensor_core::compile::set_cuda_batching(Some(false));
    let unbatched = three_steps();
    tensor_core::compile::set_cuda_batching(None);
    tensor_core::compile::set_cuda_arena(Some(false));
    let pooled = three_steps();
    tensor_core::compile::set_cuda_arena(None);
    for (what, run) in [
        ("graph batched == graph unbatched (TENSOR_CORE_CUDA_BATCH=0)", unbatched),
        ("graph in its arena == graph without (TENSOR_CORE_CUDA_ARENA=0)", pooled),
    ] {
        let mut worst = (0usize, 0usize);
        for (a, b) in run?.iter().zip(graph_model.parameters()) {
            let (differ, _) = compare_bits(a, &b)?;
            worst = (worst.0 + differ, worst.1 + a.numel());
        }
        c.record(
            &format!("W7 parameters after 3 steps, {what}"),
            Ok(format!("{}{} of {} differ", if worst.0 == 0 { "" } else { "FAIL " }, worst.0, worst.1)),
        );
    }
    c.record("W7 launches per call", w7_launches());
    Ok(())
}

/// The launches of W7's traced step in a capture, from its plan (computed on the CPU): the
/// steps, the launches with batching, and the batched launches' sizes.
pub fn w7_launches() -> Result<String> {
    let f = tensor_core::function::lookup("train_step_graph")
        .ok_or_else(|| tensor_core::Error::Device { op: "w7_launches", reason: "train_step_graph has not been called".into() })?;
    let functions = f.concrete_functions();
    let graph = functions.first().map(|c| c.graph()).ok_or_else(|| tensor_core::Error::Device { op: "w7_launches", reason: "no trace".into() })?;
    let (steps, launches, sizes) = tensor_core::compile::launch_summary(graph);
    Ok(format!(
        "{steps} steps without batching, {launches} launches with it ({} batched launches of {} steps: {sizes:?})",
        sizes.len(),
        sizes.iter().sum::<usize>()
    ))
}

/// W7's launches computed on the CPU alone (`--launches-w7`: needs no GPU): one traced call.
pub fn w7_launches_on_cpu() -> Result<String> {
    let (tokens, targets) = w7::batch(8)?;
    let (model, opt) = w7::setup_on(7, Device::Cpu)?;
    gpt::train_step_graph(&model, &opt, &tokens, &targets)?;
    w7_launches()
}

/// W7's step timed on the GPU, eager and graph: per call (synchronized), pipelined, and the
/// GPU time of a call by CUDA events.
pub fn w7_timings(name: &str) -> Result<Vec<String>> {
    let (tokens, targets) = w7::batch(8)?;
    let (gt, gy) = (tokens.to_device(GPU)?, targets.to_device(GPU)?);
    let mut lines = Vec::new();
    for mode in ["eager", "graph"] {
        let (model, opt) = w7::setup_on(7, GPU)?;
        let mut step = || -> Result<()> {
            match mode {
                "eager" => gpt::train_step(&model, &opt, &gt, &gy).map(drop),
                _ => gpt::train_step_graph(&model, &opt, &gt, &gy).map(drop),
            }
        };
        let wall = time(&mut step, 30)?;
        let piped = pipelined(&mut step, 30)?;
        let mut events: Vec<f64> = (0..20).map(|_| GPU.time_on_gpu(|| step().expect("W7 step"))).collect::<Result<_>>()?;
        events.sort_by(f64::total_cmp);
        lines.push(json("W7", mode, wall, &format!(",\"pipelined_us\":{piped:.2},\"gpu_us\":{:.2}", events[events.len() / 2]), name));
    }
    Ok(lines)
}

/// W7's graph run step by step for 5 calls, then the GPU time of each kind of step (most
/// first) and the total per call.
pub fn w7_profile() -> Result<()> {
    let (tokens, targets) = w7::batch(8)?;
    let (gt, gy) = (tokens.to_device(GPU)?, targets.to_device(GPU)?);
    let (model, opt) = w7::setup_on(7, GPU)?;
    // The first call compiles kernels between its events: left out.
    gpt::train_step_graph(&model, &opt, &gt, &gy)?;
    let first: std::collections::HashMap<String, (usize, f64)> =
        tensor_core::compile::cuda_profile().into_iter().map(|(k, n, us)| (k, (n, us))).collect();
    let calls = 5;
    for _ in 0..calls {
        gpt::train_step_graph(&model, &opt, &gt, &gy)?;
    }
    let mut rows: Vec<(String, usize, f64)> = tensor_core::compile::cuda_profile()
        .into_iter()
        .map(|(k, n, us)| {
            let (n0, us0) = first.get(&k).copied().unwrap_or((0, 0.0));
            (k, n - n0, us - us0)
        })
        .collect();
    rows.sort_by(|a, b| b.2.total_cmp(&a.2));
    let total: f64 = rows.iter().map(|r| r.2).sum();
    println!("W7 graph, GPU time per call by step kind (sum {:.1} us per call over {calls} calls):", total / calls as f64);
    for (kind, n, us) in rows.iter().take(40) {
        println!("{:9.1} us {:5.1}% {:4} steps  {kind}", us / calls as f64, 100.0 * us / total, n / calls);
    }
    Ok(())
}
