//! LeNet-5 on real handwritten digits, trained twice from the same seed: eagerly (every op
//! runs as it is called) and as a graph (the whole training step — forward, loss, backward
//! and the Adam update — traced once by `#[graph_fn]`, optimized, then replayed). Both runs
//! produce the same losses bit for bit; the table at the end compares their speed.
//!
//! cargo run --release -p examples --bin lenet5
//! cargo run --release -p examples --bin lenet5 -- --data ~/mnist --epochs 3   # MNIST IDX files
//! cargo run --release -p examples --bin lenet5 -- --epochs 5 --save ck.safetensors
//! cargo run --release -p examples --bin lenet5 -- --epochs 5 --resume ck.safetensors --export lenet5.tcg
//!
//! `--save` writes a checkpoint (the model, Adam's state and the epoch, in safetensors);
//! `--resume` continues from one exactly as if training had never stopped; `--export` writes
//! the trained forward pass for one image, weights included, for the `serve` example.
//!
//! The default data are the UCI optical digits shipped in `examples/data/digits/` (8x8 images
//! upscaled to LeNet's 28x28, see `examples::data::digits`).

use clap::Parser;
use examples::data::{self, Dataset, Split};
use examples::run_mode::{Mode, Modes};
use indicatif::{ProgressBar, ProgressStyle};
use std::error::Error as StdError;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};
use tensor_core::distributed::{self, DataParallel, Reduce, ShardSampler};
use tensor_core::function::ConcreteFunction;
use tensor_core::io::{self, prefixed, unprefixed};
use tensor_core::nn::{Conv2d, Linear, Module};
use tensor_core::optim::{Adam, Optimizer};
use tensor_core::prelude::*;

/// Train LeNet-5 eagerly and as a traced graph, from the same seed, and compare.
///
/// Both runs print the mean training loss and the test accuracy after each epoch, check that
/// every step's loss is identical bit for bit, and end with a table of time per epoch.
#[derive(Parser, Debug)]
#[command(name = "lenet5", after_help = AFTER_HELP)]
struct Args {
    /// Passes over the training set.
    #[arg(long, value_name = "N", default_value = "15", value_parser = at_least_one)]
    epochs: usize,
    /// Images per training step (the last partial batch of an epoch is dropped).
    #[arg(long, value_name = "N", default_value = "32", value_parser = at_least_one)]
    batch_size: usize,
    /// Which training modes to run.
    #[arg(long, value_enum, default_value_t = Modes::Both)]
    mode: Modes,
    /// Worker threads for the kernels [default: all cores].
    #[arg(long, value_name = "N", value_parser = at_least_one)]
    threads: Option<usize>,
    /// A directory with MNIST's four IDX files, raw or gzipped (.gz) [default: the shipped
    /// UCI digits].
    #[arg(long, value_name = "DIR", value_parser = mnist_dir)]
    data: Option<PathBuf>,
    /// The seed of the initial parameters and the epoch shuffles.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Train on the first N training images only (for quick runs).
    #[arg(long, value_name = "N", value_parser = at_least_one)]
    limit: Option<usize>,
    /// Where to write the plot of the loss per step (SVG), relative to the current directory.
    #[arg(long, value_name = "FILE", default_value = "lenet5_loss.svg")]
    plot: PathBuf,
    /// After training, save a checkpoint to FILE: the model, Adam's state and the epoch
    /// count, in safetensors.
    #[arg(long, value_name = "FILE")]
    save: Option<PathBuf>,
    /// Resume from a checkpoint written by --save: load the model and Adam's state and
    /// train --epochs more epochs, continuing the epoch count (and the shuffles) where it
    /// stopped, as if training had never stopped.
    #[arg(long, value_name = "FILE")]
    resume: Option<PathBuf>,
    /// After training, export the forward pass for one image [1, 1, 28, 28], with the
    /// trained weights, to FILE (for the serve example).
    #[arg(long, value_name = "FILE")]
    export: Option<PathBuf>,
    /// After training, export the same forward pass as ONNX (opset 17) to FILE.
    #[arg(long, value_name = "FILE")]
    onnx: Option<PathBuf>,
    /// Data-parallel training across the processes of `mpirun -np N` (needs the `mpi`
    /// feature): each rank trains on its 1/N of every global batch of --batch-size and the
    /// gradients are averaged (eagerly in overlapped buckets, in the graph as all-reduce
    /// nodes), so the loss curve is the single-process one. Rank 0 prints.
    #[arg(long)]
    distributed: bool,
    /// Write every step's loss of the last mode to FILE, one a line (its f32 bits in hex, then
    /// the value), for comparing runs.
    #[arg(long, value_name = "FILE")]
    losses: Option<PathBuf>,
}

/// Prints on rank 0 only (every rank of a --distributed run computes the same numbers).
macro_rules! say {
    ($($t:tt)*) => {
        if tensor_core::distributed::rank() == 0 {
            println!($($t)*);
        }
    };
}

const AFTER_HELP: &str = "\
Examples:
  lenet5                                  15 epochs on the shipped digits, eager and graph
  lenet5 --epochs 2 --mode graph          only the traced training step
  lenet5 --data ~/mnist --epochs 3        MNIST: train-images-idx3-ubyte, train-labels-idx1-ubyte,
                                          t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte (or .gz)
  lenet5 --epochs 5 --save ck.safetensors                 a checkpoint after 5 epochs
  lenet5 --epochs 5 --resume ck.safetensors               epochs 6 to 10, as if never stopped
  lenet5 --export lenet5.tcg                              then: serve --model lenet5.tcg";

/// A count that must be at least 1 (epochs, batch size, threads, limit).
fn at_least_one(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(0) => Err("must be at least 1".to_string()),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("{e}: expected a whole number, at least 1")),
    }
}

/// A `--data` directory that exists (its files are checked when they are read).
fn mnist_dir(text: &str) -> Result<PathBuf, String> {
    let dir = PathBuf::from(text);
    match dir.is_dir() {
        true => Ok(dir),
        false => Err(format!(
            "no such directory; --data takes a directory holding MNIST's IDX files ({}), raw or gzipped (.gz)",
            data::idx::MNIST_FILES.join(", ")
        )),
    }
}

/// LeNet-5 (the seed's Keras model) and its optimizer. The parameters are the tensor
/// fields: `#[derive(GraphArg)]` makes them leaves of the training step's signature, read by
/// reference at each call, and the in-place Adam updates inside the graph are written back
/// to them. Adam itself is left out of the signature (`skip`); its moments and step counts
/// are tensors the traced step uses, so the graph captures them and updates them in place
/// too, exactly as the eager step would.
#[derive(GraphArg)]
struct LeNet5 {
    conv1_w: Tensor, // [6, 1, 5, 5]
    conv1_b: Tensor,
    conv2_w: Tensor, // [16, 6, 5, 5]
    conv2_b: Tensor,
    fc1_w: Tensor, // [120, 400]: nn.Linear's [out, in]
    fc1_b: Tensor,
    fc2_w: Tensor, // [84, 120]
    fc2_b: Tensor,
    fc3_w: Tensor, // [10, 84]
    fc3_b: Tensor,
    #[graph_arg(skip)]
    opt: Adam,
    /// Average the gradients and the loss across the ranks of a distributed job.
    #[graph_arg(static)]
    distributed: bool,
    /// Eagerly, the gradients are averaged by this (overlapped buckets); in the graph, by
    /// one all-reduce node per gradient.
    #[graph_arg(skip)]
    ddp: Option<DataParallel>,
}

impl LeNet5 {
    /// Parameters drawn as PyTorch initializes `nn.Conv2d` and `nn.Linear`, from `seed`;
    /// Adam with lr 1e-3.
    fn new(seed: u64, distributed: bool) -> Result<LeNet5> {
        let rng = &Generator::new(seed);
        let conv1 = Conv2d::new(1, 6, [5, 5], DType::F32, rng)?;
        let conv2 = Conv2d::new(6, 16, [5, 5], DType::F32, rng)?;
        let fc1 = Linear::new(400, 120, DType::F32, rng)?;
        let fc2 = Linear::new(120, 84, DType::F32, rng)?;
        let fc3 = Linear::new(84, 10, DType::F32, rng)?;
        let params = [conv1.parameters(), conv2.parameters(), fc1.parameters(), fc2.parameters(), fc3.parameters()].concat();
        let opt = Adam::new(params.clone(), 1e-3)?;
        let [conv1_w, conv1_b, conv2_w, conv2_b, fc1_w, fc1_b, fc2_w, fc2_b, fc3_w, fc3_b] = params.try_into().expect("ten parameters");
        let model = LeNet5 { conv1_w, conv1_b, conv2_w, conv2_b, fc1_w, fc1_b, fc2_w, fc2_b, fc3_w, fc3_b, opt, distributed, ddp: None };
        if distributed {
            // Every rank starts from rank 0's parameters.
            distributed::broadcast_parameters(&model.parameters().into_iter().cloned().collect::<Vec<_>>(), 0)?;
        }
        Ok(model)
    }

    /// Logits `[n, 10]` of images `[n, 1, 28, 28]`.
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let x = x.conv2d(&self.conv1_w, Some(&self.conv1_b), [1, 1], [2, 2])?.relu()?; // 6@28x28 ('same')
        let x = x.max_pool2d([2, 2], [2, 2])?; // 6@14x14
        let x = x.conv2d(&self.conv2_w, Some(&self.conv2_b), [1, 1], [0, 0])?.relu()?; // 16@10x10
        let x = x.max_pool2d([2, 2], [2, 2])?.flatten_from(1)?; // 16@5x5 -> 400
        let x = x.matmul_t(&self.fc1_w, false, true)?.add(&self.fc1_b)?.relu()?; // 120: x @ Wᵀ + b, W [out, in] read in place, as in nn::Linear
        let x = x.matmul_t(&self.fc2_w, false, true)?.add(&self.fc2_b)?.relu()?; // 84
        x.matmul_t(&self.fc3_w, false, true)?.add(&self.fc3_b) // 10
    }

    /// One training step on a batch; returns the batch's mean cross-entropy. The first call
    /// per batch shape traces this into one graph; under `run_functions_eagerly(true)` the
    /// same body runs as plain eager code.
    #[graph_fn]
    fn train_step(&self, x: &Tensor, y: &Tensor) -> Result<Tensor> {
        self.opt.zero_grad()?;
        let loss = self.forward(x)?.cross_entropy(y)?;
        loss.backward()?;
        if !self.distributed {
            self.opt.step()?;
            return Ok(loss);
        }
        match &self.ddp {
            // Eagerly: the buckets' all-reduces started during backward; wait for them.
            Some(ddp) if tensor_core::executing_eagerly() => drop(ddp.finish()?),
            // Traced: one all-reduce node per gradient, in the graph.
            _ => distributed::average_gradients(&self.parameters().into_iter().cloned().collect::<Vec<_>>())?,
        }
        self.opt.step()?;
        distributed::all_reduce(&loss, Reduce::Mean)
    }

    fn parameters(&self) -> Vec<&Tensor> {
        vec![&self.conv1_w, &self.conv1_b, &self.conv2_w, &self.conv2_b, &self.fc1_w, &self.fc1_b, &self.fc2_w, &self.fc2_b, &self.fc3_w, &self.fc3_b]
    }
}

/// One mode's training run and what it measured.
struct Run {
    mode: Mode,
    model: LeNet5,
    losses: Vec<f32>,
    epoch_times: Vec<Duration>,
    first_step: Duration,
    accuracy: f64,
}

impl Run {
    fn new(mode: Mode, seed: u64, distributed: bool) -> Result<Run> {
        let mut model = LeNet5::new(seed, distributed)?;
        if distributed && mode == Mode::Eager {
            // 64 KiB buckets: LeNet-5's 62k parameters make 4, the first sent while backward
            // is still in the convolutions.
            model.ddp = Some(DataParallel::new(model.parameters().into_iter().cloned().collect(), 64 << 10)?);
        }
        Ok(Run { mode, model, losses: Vec::new(), epoch_times: Vec::new(), first_step: Duration::ZERO, accuracy: 0.0 })
    }

    /// One pass over `batches`; returns the mean loss.
    fn epoch(&mut self, batches: &[(Tensor, Tensor)], label: String) -> Result<f32> {
        run_functions_eagerly(self.mode == Mode::Eager);
        let bar = progress_bar(batches.len(), label);
        let start = Instant::now();
        let mut sum = 0.0;
        for (x, y) in batches {
            let (x, y) = match self.model.distributed {
                // This rank's rows of the global batch.
                true => {
                    let rows = ShardSampler::current().batch_range(x.shape().dims()[0])?;
                    (x.narrow(0, rows.start, rows.len())?, y.narrow(0, rows.start, rows.len())?)
                }
                false => (x.clone(), y.clone()),
            };
            let loss = self.model.train_step(&x, &y)?.item::<f32>()?;
            if self.losses.is_empty() {
                self.first_step = start.elapsed();
            }
            self.losses.push(loss);
            sum += loss;
            bar.set_message(format!("loss {loss:.4}"));
            bar.inc(1);
        }
        self.epoch_times.push(start.elapsed());
        bar.finish_and_clear();
        run_functions_eagerly(false);
        Ok(sum / batches.len() as f32)
    }

    /// Loads the model and Adam's state of a checkpoint written by `save`.
    fn resume(&mut self, checkpoint: &[(String, Tensor)]) -> Result<()> {
        self.model.load_state_dict(&unprefixed("model", checkpoint))?;
        self.model.opt.load_state_dict(&unprefixed("optimizer", checkpoint))
    }

    /// Saves the model, Adam's state and the number of epochs trained.
    fn save(&self, path: &Path, epochs: usize) -> Result<()> {
        let mut named = prefixed("model", self.model.state_dict()?);
        named.extend(prefixed("optimizer", self.model.opt.state_dict()));
        named.push(("epoch".to_string(), Tensor::scalar(epochs as i64)));
        io::save_tensors(path, &named)
    }

    fn mean_epoch(&self) -> Duration {
        self.epoch_times.iter().sum::<Duration>() / self.epoch_times.len().max(1) as u32
    }
}

fn progress_bar(len: usize, label: String) -> ProgressBar {
    let style = ProgressStyle::with_template("{prefix:>16} [{bar:32}] {pos:>4}/{len} {elapsed_precise} {msg}")
        .expect("a valid template")
        .progress_chars("=> ");
    match distributed::rank() {
        0 => ProgressBar::new(len as u64).with_style(style).with_prefix(label),
        _ => ProgressBar::hidden(),
    }
}

/// The forward pass for one image, traced with the weights captured (so they travel in the
/// exported file and the caller passes only the image).
fn forward_function(model: &LeNet5) -> Result<ConcreteFunction> {
    let image = Tensor::zeros(&[1, 1, 28, 28], DType::F32);
    no_grad(|| ConcreteFunction::trace("lenet5", &[("image", &image)], || Ok(vec![model.forward(&image)?])))
}

/// The epoch a checkpoint was saved after.
fn saved_epoch(checkpoint: &[(String, Tensor)], path: &Path) -> Result<usize, Box<dyn StdError>> {
    let epoch = checkpoint
        .iter()
        .find(|(name, _)| name == "epoch")
        .ok_or_else(|| format!("{}: not a lenet5 checkpoint (it has no `epoch`)", path.display()))?;
    Ok(epoch.1.item::<i64>()?.max(0) as usize)
}

/// The share of `batches` the model classifies right, in percent.
fn accuracy(model: &LeNet5, batches: &[(Tensor, Vec<i64>)]) -> Result<f64> {
    let _no_grad = NoGradGuard::new();
    let (mut correct, mut total) = (0, 0);
    for (x, labels) in batches {
        let predicted = model.forward(x)?.argmax(1, false)?.to_vec::<i64>()?;
        correct += predicted.iter().zip(labels).filter(|(p, l)| p == l).count();
        total += labels.len();
    }
    Ok(100.0 * correct as f64 / total.max(1) as f64)
}

/// The training batches of one epoch, in a seeded shuffled order. The last partial batch is
/// dropped: a batch of another shape is another signature, which would trace a second graph.
fn train_batches(train: &Dataset, batch_size: usize, seed: u64, epoch: usize) -> Result<Vec<(Tensor, Tensor)>> {
    let order = data::shuffled(train.len(), seed.wrapping_mul(1_000_003).wrapping_add(epoch as u64));
    order.chunks_exact(batch_size).map(|chunk| train.batch(chunk)).collect()
}

fn test_batches(test: &Dataset) -> Result<Vec<(Tensor, Vec<i64>)>> {
    let indices: Vec<usize> = (0..test.len()).collect();
    indices.chunks(500).map(|chunk| Ok((test.batch(chunk)?.0, chunk.iter().map(|&i| test.labels[i]).collect()))).collect()
}

fn load(args: &Args) -> Result<Split, Box<dyn StdError>> {
    let mut split = match &args.data {
        Some(dir) => data::idx::load_mnist(dir)?,
        None => data::digits::load()?,
    };
    if let Some(n) = args.limit {
        split.train = split.train.take(n);
    }
    Ok(split)
}

/// Runs the program; an error is printed as its message (Display), not its Debug form.
fn main() -> ExitCode {
    match run(Args::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: Args) -> Result<(), Box<dyn StdError>> {
    #[cfg(feature = "mpi")]
    let _world = args.distributed.then(distributed::init).transpose()?;
    #[cfg(not(feature = "mpi"))]
    if args.distributed {
        return Err("--distributed needs MPI: build with `--features mpi` and start with `mpirun -np N` (see README)".into());
    }
    if args.distributed && !args.batch_size.is_multiple_of(distributed::size()) {
        return Err(format!("--batch-size {} does not split over {} ranks", args.batch_size, distributed::size()).into());
    }
    if let Some(n) = args.threads {
        tensor_core::set_num_threads(n);
    }
    // A checkpoint is read first, so a bad one is refused before any training output.
    let checkpoint = args.resume.as_ref().map(io::load_tensors).transpose()?;
    let first_epoch = match (&checkpoint, &args.resume) {
        (Some(named), Some(path)) => saved_epoch(named, path)? + 1,
        _ => 1,
    };
    let last_epoch = first_epoch + args.epochs - 1;
    let split = load(&args)?;
    let steps = split.train.len() / args.batch_size;
    if steps == 0 {
        return Err(format!("{} training images make no batch of {}; lower --batch-size", split.train.len(), args.batch_size).into());
    }
    say!(
        "LeNet-5 on {}: {} train / {} test images; batch {}, {steps} steps per epoch (last partial batch dropped); Adam lr 1e-3; seed {}; {} threads; {} process(es)",
        split.name,
        split.train.len(),
        split.test.len(),
        args.batch_size,
        args.seed,
        tensor_core::num_threads(),
        distributed::size()
    );
    let modes = args.mode.runs();
    // Two copies of the model, from the same seed: the same initial parameters.
    let mut runs = modes.iter().map(|&m| Run::new(m, args.seed, args.distributed)).collect::<Result<Vec<_>>>()?;
    if let (Some(named), Some(path)) = (&checkpoint, &args.resume) {
        runs.iter_mut().try_for_each(|run| run.resume(named))?;
        say!("resumed from {} after epoch {}", path.display(), first_epoch - 1);
    }
    let test = test_batches(&split.test)?;
    let wall = Instant::now();
    for epoch in first_epoch..=last_epoch {
        let batches = train_batches(&split.train, args.batch_size, args.seed, epoch)?;
        let mut line = format!("epoch {epoch:>2}/{last_epoch}");
        for run in &mut runs {
            let loss = run.epoch(&batches, format!("epoch {epoch} {}", run.mode.name()))?;
            run.accuracy = accuracy(&run.model, &test)?;
            let secs = run.epoch_times.last().map_or(0.0, Duration::as_secs_f64);
            line += &format!("  | {}: mean train loss {loss:.4}, test accuracy {:5.1}%, time {secs:5.2} s", run.mode.name(), run.accuracy);
        }
        say!("{line}");
    }
    let wall = wall.elapsed();
    let same = match &runs[..] {
        [eager, graph] => compare(eager, graph)?,
        _ => true,
    };
    if let Some(f) = tensor_core::function::lookup("LeNet5::train_step") {
        say!(
            "LeNet5::train_step traced {} time(s); graph: {} nodes",
            f.trace_count(),
            f.concrete_functions().first().map_or(0, |c| c.graph().nodes.len())
        );
    }
    print_table(&runs, wall);
    if let Some(path) = &args.losses {
        let text: String = runs.last().expect("a mode").losses.iter().map(|l| format!("{:08x} {l:e}\n", l.to_bits())).collect();
        std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    if distributed::rank() != 0 {
        return if same { Ok(()) } else { Err("eager and graph training diverged".into()) };
    }
    let plot_path = plot(&args.plot, &runs)?;
    say!("loss plot: {}", plot_path.display());
    let last = runs.last().expect("at least one mode");
    if let Some(path) = &args.save {
        last.save(path, last_epoch)?;
        say!("checkpoint after epoch {last_epoch}: {}", path.display());
    }
    if args.export.is_some() || args.onnx.is_some() {
        let forward = forward_function(&last.model)?;
        if let Some(path) = &args.export {
            forward.export(path)?;
            say!("exported the forward pass for one image to {} (test accuracy {:.1}%)", path.display(), last.accuracy);
        }
        if let Some(path) = &args.onnx {
            tensor_core::onnx::export(&forward, path)?;
            say!("exported the forward pass as ONNX to {}", path.display());
        }
    }
    if !same {
        return Err("eager and graph training diverged (see above)".into());
    }
    Ok(())
}

/// Compares every step's loss, bit for bit, and the final parameters; prints the verdict.
fn compare(eager: &Run, graph: &Run) -> Result<bool> {
    let first_diff = eager.losses.iter().zip(&graph.losses).position(|(a, b)| a.to_bits() != b.to_bits());
    match first_diff {
        None => say!("losses identical across {} steps (eager vs graph, bit for bit)", eager.losses.len()),
        Some(i) => say!("losses differ first at step {}: eager {:e} vs graph {:e}", i + 1, eager.losses[i], graph.losses[i]),
    }
    let mut params_same = true;
    for (p, q) in eager.model.parameters().into_iter().zip(graph.model.parameters()) {
        let bits = |t: &Tensor| t.to_vec::<f32>().map(|v| v.into_iter().map(f32::to_bits).collect::<Vec<_>>());
        params_same &= bits(p)? == bits(q)?;
    }
    say!("final parameters {}", if params_same { "identical" } else { "DIFFER" });
    Ok(first_diff.is_none() && params_same)
}

fn print_table(runs: &[Run], wall: Duration) {
    say!();
    say!("| mode  | time per epoch | first step | test accuracy |");
    say!("|-------|----------------|------------|---------------|");
    for run in runs {
        let first = run.first_step.as_secs_f64() * 1e3;
        say!("| {} | {:>12.3} s | {:>7.1} ms | {:>12.1}% |", run.mode.name(), run.mean_epoch().as_secs_f64(), first, run.accuracy);
    }
    if let [eager, graph] = runs {
        say!("speed-up of the graph: {:.2}x per epoch", eager.mean_epoch().as_secs_f64() / graph.mean_epoch().as_secs_f64());
    }
    say!("(the graph's first step includes tracing and optimizing it; total training and evaluation time {:.1} s)", wall.as_secs_f64());
}

/// Plots each run's loss per step to an SVG file; returns its path.
fn plot(path: &Path, runs: &[Run]) -> Result<PathBuf, Box<dyn StdError>> {
    use plotters::prelude::*;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let steps = runs.iter().map(|r| r.losses.len()).max().unwrap_or(0).max(2);
    let top = runs.iter().flat_map(|r| r.losses.iter().copied()).fold(0.0f32, f32::max).max(0.1) * 1.05;
    let root = SVGBackend::new(path, (960, 540)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption("LeNet-5 training loss: eager vs graph", ("sans-serif", 24))
        .margin(16)
        .x_label_area_size(40)
        .y_label_area_size(56)
        .build_cartesian_2d(0..steps, 0f32..top)?;
    chart.configure_mesh().x_desc("training step").y_desc("cross-entropy loss").draw()?;
    for run in runs {
        let points = run.losses.iter().enumerate().map(|(i, &l)| (i, l));
        // Eager as a wide light line, graph as a thin dark dashed one on top: where they
        // agree (everywhere, bit for bit), the dashes run along the middle of the wide line.
        let (style, label) = match run.mode {
            Mode::Eager => (RGBColor(120, 170, 230).stroke_width(5), "eager"),
            Mode::Graph => (RGBColor(200, 40, 40).stroke_width(1), "graph"),
        };
        let series = match run.mode {
            Mode::Eager => chart.draw_series(LineSeries::new(points, style))?,
            Mode::Graph => chart.draw_series(DashedLineSeries::new(points, 6, 4, style))?,
        };
        series.label(label).legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], style));
    }
    chart.configure_series_labels().border_style(BLACK).background_style(WHITE.mix(0.9)).draw()?;
    root.present()?;
    Ok(path.to_path_buf())
}
