//! A PyTorch training script ported to tensor-core, as a user crate would port it. The
//! original is `classifier()` in `tests/fixtures/make_torch_fixtures.py`:
//!
//! ```python
//! class Classifier(nn.Module):
//!     def __init__(self):
//!         super().__init__()
//!         self.body = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.LayerNorm(32),
//!                                   nn.Linear(32, 32), nn.GELU(), nn.Linear(32, 3))
//!     def forward(self, x):
//!         return self.body(x)
//!
//! opt = torch.optim.AdamW(model.parameters(), lr=0.01, weight_decay=0.01)
//! sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=60)
//! for step in range(60):
//!     opt.zero_grad()
//!     loss = F.cross_entropy(model(x), y)
//!     loss.backward()
//!     opt.step()
//!     sched.step()
//! ```
//!
//! The port starts from the weights PyTorch initialized (its `state_dict()`, saved as
//! safetensors, loaded strictly), trains with AdamW in one `#[graph_fn]` step under a cosine
//! schedule — one trace for every step, the rate read from a tensor — beside the same step
//! run eagerly, and compares both with the losses PyTorch recorded. It then saves model,
//! optimizer and schedule in one checkpoint, resumes a fresh run from it, and exports the
//! forward pass for any batch size.
//!
//! cargo run --release -p examples --bin port_from_pytorch [-- --steps N --out DIR]
#![deny(warnings)]

use clap::Parser;
use std::path::{Path, PathBuf};
use tensor_core::function::{lookup, ConcreteFunction};
use tensor_core::io;
use tensor_core::nn::{self, Gelu, LayerNorm, Linear, Module, ReLU, Sequential};
use tensor_core::optim::lr_scheduler::{CosineAnnealingLR, LrScheduler};
use tensor_core::optim::{AdamConfig, AdamW, Optimizer};
use tensor_core::prelude::*;
use tensor_core::shape::UNKNOWN;

/// The fixtures PyTorch wrote: the model's initial state dict, and the data with PyTorch's
/// logits and losses.
const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures");

/// How far tensor-core's losses may be from PyTorch's, relative: both compute in f32, in
/// other orders, and 60 AdamW steps carry the rounding differences along (1.4e-6 measured).
const LOSS_TOLERANCE: f64 = 1e-4;

#[derive(Parser)]
#[command(about = "A PyTorch training script ported to tensor-core: PyTorch's checkpoint, AdamW, a cosine schedule, save/load, any-batch export")]
struct Args {
    /// Training steps (the schedule's T_max is always PyTorch's 60; PyTorch's losses are
    /// compared for the steps both ran).
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=60))]
    steps: u64,
    /// Where the checkpoint and the exported graph are written (default: the temp dir).
    #[arg(long)]
    out: Option<PathBuf>,
}

/// The model: `self.body = nn.Sequential(...)`, so its state dict is `body.0.weight`, ...
#[derive(GraphArg)]
struct Classifier {
    body: Sequential,
}

impl Classifier {
    /// The layers, drawn as PyTorch draws them (the values are replaced by the checkpoint).
    fn new(seed: u64) -> Result<Classifier> {
        let rng = &Generator::new(seed);
        let body = Sequential::new()
            .add(Linear::new(4, 32, DType::F32, rng)?)
            .add(ReLU)
            .add(LayerNorm::new(32, 1e-5, DType::F32)?)
            .add(Linear::new(32, 32, DType::F32, rng)?)
            .add(Gelu::new())
            .add(Linear::new(32, 3, DType::F32, rng)?);
        Ok(Classifier { body })
    }

    /// The model with PyTorch's weights: every key must match (PyTorch's `strict=True`).
    fn from_pytorch(path: &Path, seed: u64) -> Result<Classifier> {
        let mut model = Classifier::new(seed)?;
        io::load_safetensors(&mut model, path)?;
        Ok(model)
    }

    /// `opt.zero_grad(); loss = F.cross_entropy(model(x), y); loss.backward(); opt.step()`.
    fn train_step(&self, opt: &AdamW, x: &Tensor, y: &Tensor) -> Result<Tensor> {
        opt.zero_grad()?;
        let loss = nn::cross_entropy(&self.forward(x)?, y)?;
        loss.backward()?;
        opt.step()?;
        Ok(loss)
    }

    /// [`train_step`](Self::train_step) as a graph function: traced at the first call,
    /// replayed after (the learning rate is a tensor the graph reads).
    #[graph_fn]
    fn train_step_graph(&self, opt: &AdamW, x: &Tensor, y: &Tensor) -> Result<Tensor> {
        self.train_step(opt, x, y)
    }
}

/// `def forward(self, x): return self.body(x)`; `parameters()` comes with the trait: the
/// tensors of the model that require grad, in state dict order.
impl Module for Classifier {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.body.forward(x)
    }
}

/// `torch.optim.AdamW(model.parameters(), lr=0.01, weight_decay=0.01)` and
/// `CosineAnnealingLR(opt, T_max=60)`.
fn optimizer(model: &Classifier) -> Result<(AdamW, CosineAnnealingLR)> {
    let opt = AdamW::with_config(model.parameters(), AdamConfig { lr: 0.01, betas: (0.9, 0.999), eps: 1e-8, weight_decay: 0.01 })?;
    let sched = CosineAnnealingLR::new(&opt, 60, 0.0)?;
    Ok((opt, sched))
}

/// Two more scheduled steps (the first at the rate the schedule had reached): their losses
/// and the logits after them.
fn two_more_steps(model: &Classifier, opt: &AdamW, sched: &mut CosineAnnealingLR, x: &Tensor, y: &Tensor) -> Result<Vec<Tensor>> {
    let mut results = Vec::new();
    for _ in 0..2 {
        results.push(model.train_step_graph(opt, x, y)?);
        sched.step()?;
    }
    results.push(model.forward(x)?);
    Ok(results)
}

/// A tensor-core error, or a result that differs from PyTorch's.
type Fallible<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// The tensors of a fixture file, by name.
struct Fixture(Vec<(String, Tensor)>);

impl Fixture {
    fn get(&self, name: &str) -> Fallible<Tensor> {
        let found = self.0.iter().find(|(n, _)| n == name).map(|(_, t)| t.clone());
        found.ok_or_else(|| format!("the fixture has no tensor `{name}`").into())
    }
}

/// The largest difference between `a` and `b`, relative to `b`'s largest magnitude.
fn relative_difference(a: &Tensor, b: &Tensor) -> Result<f64> {
    let (a, b) = (a.to_vec::<f32>()?, b.to_vec::<f32>()?);
    let scale = b.iter().fold(1e-6f64, |m, v| m.max(v.abs() as f64));
    Ok(a.iter().zip(&b).map(|(x, y)| (*x as f64 - *y as f64).abs()).fold(0.0, f64::max) / scale)
}

fn same_bits(a: &Tensor, b: &Tensor) -> Result<bool> {
    let bits = |t: &Tensor| -> Result<Vec<u32>> { Ok(t.to_vec::<f32>()?.iter().map(|v| v.to_bits()).collect()) };
    Ok(a.dims() == b.dims() && bits(a)? == bits(b)?)
}

/// Fails with `what` unless `ok`.
fn check(ok: bool, what: &str) -> Fallible<()> {
    match ok {
        true => Ok(()),
        false => Err(what.into()),
    }
}

fn main() -> Fallible<()> {
    let args = Args::parse();
    let out = args.out.unwrap_or_else(std::env::temp_dir);
    std::fs::create_dir_all(&out)?;
    let checkpoint = Path::new(FIXTURES).join("torch_classifier.safetensors");
    let data = Fixture(io::load_tensors(Path::new(FIXTURES).join("torch_classifier_io.safetensors"))?);
    let (x, y) = (data.get("x")?, data.get("y")?);

    // 1. PyTorch's initial weights, loaded strictly, twice: one model trains as a graph, the
    //    other eagerly.
    let graph_model = Classifier::from_pytorch(&checkpoint, 0)?;
    let eager_model = Classifier::from_pytorch(&checkpoint, 1)?;
    let names: Vec<String> = graph_model.state_dict()?.into_iter().map(|(n, t)| format!("{n} {:?}", t.dims())).collect();
    println!("loaded PyTorch's state dict strictly: {} tensors ({})", names.len(), names.join(", "));
    let before = relative_difference(&graph_model.forward(&x)?, &data.get("logits_before")?)?;
    println!("logits before training vs PyTorch's: relative difference {before:.2e}");
    check(before <= 1e-6, "the loaded model's logits differ from PyTorch's")?;

    // 2. Training: AdamW under a cosine schedule, as a graph and eagerly.
    let (graph_opt, mut graph_sched) = optimizer(&graph_model)?;
    let (eager_opt, mut eager_sched) = optimizer(&eager_model)?;
    let pytorch_losses = data.get("losses")?.to_vec::<f32>()?;
    let mut worst = 0.0f64;
    let mut identical = true;
    let steps = args.steps as usize;
    for (step, &theirs) in pytorch_losses.iter().take(steps).enumerate() {
        let lr = graph_opt.lr();
        let graph_loss = graph_model.train_step_graph(&graph_opt, &x, &y)?;
        let eager_loss = eager_model.train_step(&eager_opt, &x, &y)?;
        graph_sched.step()?;
        eager_sched.step()?;
        identical &= same_bits(&graph_loss, &eager_loss)?;
        let (ours, theirs) = (graph_loss.item::<f32>()? as f64, theirs as f64);
        worst = worst.max((ours - theirs).abs() / theirs.abs());
        if step % 10 == 0 || step + 1 == steps {
            println!("step {:2}: lr {lr:.6}  loss {ours:.6}  PyTorch {theirs:.6}", step + 1);
        }
    }
    let traces = lookup("Classifier::train_step_graph").map_or(0, |f| f.trace_count());
    println!("Classifier::train_step_graph traced {traces} time(s) in {} steps", args.steps);
    println!("eager and graph losses {} across {} steps", if identical { "identical, bit for bit," } else { "DIFFER" }, args.steps);
    println!("losses vs PyTorch's: largest relative difference {worst:.2e}");
    check(traces == 1 && identical, "the graph step retraced or left the eager bits")?;
    check(worst <= LOSS_TOLERANCE, "the losses drifted from PyTorch's")?;
    if args.steps == 60 {
        let after = relative_difference(&graph_model.forward(&x)?, &data.get("logits_after")?)?;
        println!("logits after training vs PyTorch's: relative difference {after:.2e}");
        check(after <= LOSS_TOLERANCE, "the trained model's logits differ from PyTorch's")?;
    }
    let predicted = graph_model.forward(&x)?.argmax(1, false)?.to_vec::<i64>()?;
    let correct = predicted.iter().zip(y.to_vec::<i64>()?).filter(|(p, l)| **p == *l).count();
    println!("training accuracy {:.1}% ({correct} of {})", 100.0 * correct as f64 / predicted.len() as f64, predicted.len());

    // 3. A checkpoint of model, optimizer and schedule in one file; a fresh run resumes from it
    //    and takes the next step with the bits of the run that never stopped.
    let path = out.join("port_from_pytorch.safetensors");
    let mut named = io::prefixed("model", graph_model.state_dict()?);
    named.extend(io::prefixed("optimizer", graph_opt.state_dict()));
    named.extend(io::prefixed("scheduler", graph_sched.state_dict()));
    io::save_tensors(&path, &named)?;
    let saved = io::load_tensors(&path)?;
    let mut resumed = Classifier::new(2)?;
    resumed.load_state_dict(&io::unprefixed("model", &saved))?;
    let (mut resumed_opt, mut resumed_sched) = optimizer(&resumed)?;
    resumed_opt.load_state_dict(&io::unprefixed("optimizer", &saved))?;
    resumed_sched.load_state_dict(&io::unprefixed("scheduler", &saved))?;
    let next = two_more_steps(&graph_model, &graph_opt, &mut graph_sched, &x, &y)?;
    let next_resumed = two_more_steps(&resumed, &resumed_opt, &mut resumed_sched, &x, &y)?;
    let mut resumed_same = true;
    for (a, b) in next.iter().zip(&next_resumed) {
        resumed_same &= same_bits(a, b)?;
    }
    println!(
        "checkpoint {} ({} tensors): the resumed run's next two steps {}",
        path.display(),
        saved.len(),
        if resumed_same { "are identical, bit for bit" } else { "DIFFERS" }
    );
    check(resumed_same, "the resumed run differs")?;

    // 4. The forward pass exported for any batch size: the batch dim traced unknown, the
    //    weights captured into the file.
    let any_batch = [Shape::new(&[UNKNOWN, 4])];
    let f = no_grad(|| ConcreteFunction::trace_with_shapes("classifier", &[("x", &x)], &any_batch, true, || Ok(vec![graph_model.forward(&x)?])))?;
    let exported = out.join("port_from_pytorch.tcg");
    f.export(&exported)?;
    let loaded = tensor_core::export::load(&exported)?;
    let mut served = Vec::new();
    for batch in [1, 7, 96] {
        let xb = x.narrow(0, 0, batch)?;
        let ok = same_bits(&loaded.call(&[&xb])?[0], &no_grad(|| graph_model.forward(&xb))?)?;
        served.push(format!("{batch}: {}", if ok { "identical" } else { "DIFFERS" }));
        check(ok, "the exported forward pass differs from the model's")?;
    }
    println!("exported {} (any batch size); batches vs the model, bit for bit: {}", exported.display(), served.join(", "));
    Ok(())
}
