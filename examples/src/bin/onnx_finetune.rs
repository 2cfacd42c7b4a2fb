//! Fine-tunes a model exported from PyTorch: imports the committed small CNN
//! (`tests/fixtures/onnx_models/small_cnn/model.onnx`, made by
//! `scripts/onnx_real_models.py`: conv + batchnorm + relu, maxpool, conv + batchnorm +
//! relu, depthwise conv, global average pool, linear to 10 classes), makes its weights
//! trainable and trains it as a `#[graph_fn]` step (forward, cross-entropy, backward, Adam:
//! one graph, traced on the first step) on a synthetic 10-class image set.
//!
//! ```text
//! cargo run --release -p examples --bin onnx_finetune [-- --steps 30 --out DIR]
//! ```
//!
//! It prints each step's loss and time, the accuracy before and after, then writes the
//! fine-tuned model as ONNX (`small_cnn_finetuned.onnx`, imported back to check it) and its
//! weights under their PyTorch names (`small_cnn_finetuned.safetensors`, loadable by
//! `model.load_state_dict(safetensors.torch.load_file(...), strict=False)`).

use clap::Parser;
use std::path::{Path, PathBuf};
use std::time::Instant;
use tensor_core::onnx::OnnxModel;
use tensor_core::optim::{Adam, Optimizer};
use tensor_core::prelude::*;

#[derive(Parser)]
#[command(about = "Fine-tunes an imported ONNX model (the committed small CNN) as a graph function")]
struct Args {
    /// The model to fine-tune: an ONNX classifier taking f32[N, 3, 16, 16] images.
    #[arg(long, default_value_os_t = default_model())]
    model: PathBuf,
    /// Training steps (one batch each).
    #[arg(long, default_value_t = 30)]
    steps: usize,
    /// Images per batch.
    #[arg(long, default_value_t = 32)]
    batch_size: usize,
    /// Adam's learning rate.
    #[arg(long, default_value_t = 1e-2)]
    lr: f64,
    /// Where to write the fine-tuned model (default: the system's temporary folder).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Worker threads for kernels (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
}

fn default_model() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/onnx_models/small_cnn/model.onnx")
}

/// Classes in the synthetic set, and its images' size.
const CLASSES: usize = 10;
const IMAGE: [usize; 3] = [3, 16, 16];

/// A synthetic image set: each class is a fixed random colour (one value per channel), each
/// image its class's colour under per-pixel noise twice as strong (so the classes must be
/// told apart through the noise, not memorized).
fn synthetic_set(images: usize, seed: u64) -> Result<(Tensor, Tensor)> {
    let colours = Tensor::randn(&[CLASSES, IMAGE[0], 1, 1], DType::F32, 1000);
    let labels: Vec<i64> = (0..images).map(|i| ((i * 7 + seed as usize) % CLASSES) as i64).collect();
    let labels = Tensor::from_vec(labels, &[images])?;
    let noise = Tensor::randn(&[images, IMAGE[0], IMAGE[1], IMAGE[2]], DType::F32, seed).mul(2.0)?;
    Ok((colours.index_select(0, &labels)?.add(&noise)?, labels))
}

/// One fine-tuning step: cross-entropy of the model's logits, backward, Adam.
fn train_step(model: &OnnxModel, opt: &Adam, x: &Tensor, labels: &Tensor) -> Result<Tensor> {
    opt.zero_grad()?;
    let loss = model.call(&[x])?[0].cross_entropy(labels)?;
    loss.backward()?;
    opt.step()?;
    Ok(loss)
}

/// The step as one graph: traced on the first call, replayed on the others.
#[graph_fn]
fn train_step_graph(model: &OnnxModel, opt: &Adam, x: &Tensor, labels: &Tensor) -> Result<Tensor> {
    train_step(model, opt, x, labels)
}

/// The fraction of `x`'s images the model classifies as `labels`.
fn accuracy(model: &OnnxModel, x: &Tensor, labels: &Tensor) -> Result<f64> {
    let predicted = no_grad(|| model.call(&[x]))?[0].argmax(1, false)?;
    let right = predicted.to_vec::<i64>()?.iter().zip(labels.to_vec::<i64>()?).filter(|(p, l)| **p == *l).count();
    Ok(right as f64 / labels.dims().as_slice()[0] as f64)
}

fn main() -> Result<()> {
    let args = Args::parse();
    if let Some(n) = args.threads {
        tensor_core::set_num_threads(n);
    }
    let model = tensor_core::onnx::import(&args.model)?;
    println!("imported {}: opset {}, ops {}", args.model.display(), model.opset(), model.ops().join(", "));
    model.trainable(true);
    // Batchnorm's running statistics are state, not weights: the optimizer leaves them.
    let weights: Vec<(String, Tensor)> = model.parameters().into_iter().filter(|(n, t)| t.dtype().is_float() && !n.contains("running_")).collect();
    let count: usize = weights.iter().map(|(_, t)| t.dims().iter().product::<usize>()).sum();
    println!("{} weight tensors, {count} values, trained by Adam (lr {})", weights.len(), args.lr);
    let opt = Adam::new(weights.iter().map(|(_, t)| t.clone()).collect(), args.lr)?;

    let (train_x, train_y) = synthetic_set(args.batch_size * 8, 1)?;
    let (test_x, test_y) = synthetic_set(200, 2)?;
    println!(
        "synthetic set: {} training images in batches of {}, {} test images",
        train_y.dims().as_slice()[0],
        args.batch_size,
        test_y.dims().as_slice()[0]
    );
    println!("test accuracy before: {:.1}%", 100.0 * accuracy(&model, &test_x, &test_y)?);

    let mut times = Vec::new();
    for step in 0..args.steps {
        let start = (step % 8) * args.batch_size;
        let (x, y) = (train_x.narrow(0, start, args.batch_size)?, train_y.narrow(0, start, args.batch_size)?);
        let t = Instant::now();
        let loss = train_step_graph(&model, &opt, &x, &y)?;
        let loss = loss.to_vec::<f32>()?[0];
        let ms = t.elapsed().as_secs_f64() * 1e3;
        times.push(ms);
        let note = if step == 0 { " (traces and optimizes the step)" } else { "" };
        println!("step {:>3}: loss {loss:.4}  {ms:.2} ms{note}", step + 1);
    }
    let traces = tensor_core::function::lookup("train_step_graph").map_or(0, |f| f.trace_count());
    if times.len() > 1 {
        let mut later = times[1..].to_vec();
        later.sort_by(f64::total_cmp);
        println!("time per step: first {:.1} ms, then median {:.2} ms; train_step_graph traced {traces} time(s)", times[0], later[later.len() / 2]);
    }
    println!("test accuracy after: {:.1}%", 100.0 * accuracy(&model, &test_x, &test_y)?);
    save(&model, &args.out.unwrap_or_else(std::env::temp_dir), &test_x)
}

/// Writes the fine-tuned model as ONNX (its inference graph, batch dim dynamic), imports
/// it back to check it gives the same logits, and writes the weights as safetensors.
fn save(model: &OnnxModel, dir: &Path, check_x: &Tensor) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| Error::InvalidArgument {
        op: "onnx_finetune",
        arg: "out",
        reason: format!("{}: {e}", dir.display()),
    })?;
    let onnx = dir.join("small_cnn_finetuned.onnx");
    let f = no_grad(|| model.trace("small_cnn_finetuned"))?;
    tensor_core::onnx::export(&f, &onnx)?;
    let back = tensor_core::onnx::import(&onnx)?;
    let (ours, theirs) = (no_grad(|| model.call(&[check_x]))?, back.call(&[check_x])?);
    let same = ours[0].to_vec::<f32>()?.iter().zip(theirs[0].to_vec::<f32>()?).all(|(a, b)| (a - b).abs() <= 1e-5 * (1.0 + b.abs()));
    println!("fine-tuned model: {} (imported back: same logits: {same})", onnx.display());
    let weights = dir.join("small_cnn_finetuned.safetensors");
    tensor_core::io::save_tensors(&weights, &model.parameters())?;
    println!("fine-tuned weights, PyTorch's names: {}", weights.display());
    Ok(())
}
