//! A tiny character-level GPT trained on Ambrose Bierce's *The Devil's Dictionary* (public
//! domain, shipped in `examples/data/devils-dictionary/`), twice from the same seed: eagerly
//! and as a graph (the whole training step — forward, loss, backward, AdamW — traced once by
//! `#[graph_fn]`). Dropout is on, drawn from a `Generator` whose state is a tensor the graph
//! advances on every call, so both runs draw the same masks and give the same losses, bit for
//! bit. At the end the model writes a few lines of its own.
//!
//! cargo run --release -p examples --bin gpt
//! cargo run --release -p examples --bin gpt -- --steps 2000 --d-model 256 --layers 4

use clap::Parser;
use examples::gpt::{self, Gpt, GptConfig};
use examples::run_mode::{Mode, Modes};
use indicatif::{ProgressBar, ProgressStyle};
use std::error::Error as StdError;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};
use tensor_core::optim::{AdamConfig, AdamW};
use tensor_core::prelude::*;

/// The shipped text.
const TEXT: &str = include_str!("../../data/devils-dictionary/devils_dictionary.txt");

/// Train a character-level GPT eagerly and as a traced graph, from the same seed, and compare.
#[derive(Parser, Debug)]
#[command(name = "gpt")]
struct Args {
    /// Training steps.
    #[arg(long, value_name = "N", default_value = "300", value_parser = at_least_one)]
    steps: usize,
    /// Sequences per step.
    #[arg(long, value_name = "N", default_value = "16", value_parser = at_least_one)]
    batch_size: usize,
    /// Characters per sequence (the model's context).
    #[arg(long, value_name = "N", default_value = "64", value_parser = at_least_one)]
    context: usize,
    /// Transformer blocks.
    #[arg(long, value_name = "N", default_value = "2", value_parser = at_least_one)]
    layers: usize,
    /// Width of the residual stream (a multiple of --heads).
    #[arg(long, value_name = "N", default_value = "128", value_parser = at_least_one)]
    d_model: usize,
    /// Attention heads.
    #[arg(long, value_name = "N", default_value = "4", value_parser = at_least_one)]
    heads: usize,
    /// Dropout probability (embeddings, attention weights, residual branches).
    #[arg(long, value_name = "P", default_value = "0.1", value_parser = probability)]
    dropout: f64,
    /// AdamW learning rate.
    #[arg(long, value_name = "LR", default_value = "1e-3")]
    lr: f64,
    /// The seed of the weights, the batches, the dropout masks and the sampling.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Which training modes to run.
    #[arg(long, value_enum, default_value_t = Modes::Both)]
    mode: Modes,
    /// Worker threads for the kernels [default: all cores].
    #[arg(long, value_name = "N", value_parser = at_least_one)]
    threads: Option<usize>,
    /// Characters to sample at the end (0: none).
    #[arg(long, value_name = "N", default_value = "400")]
    sample: usize,
    /// Train on this text file instead of the shipped one.
    #[arg(long, value_name = "FILE")]
    text: Option<PathBuf>,
}

fn at_least_one(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(0) => Err("must be at least 1".to_string()),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("{e}: expected a whole number, at least 1")),
    }
}

fn probability(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(p) if (0.0..1.0).contains(&p) => Ok(p),
        Ok(p) => Err(format!("{p} is not in [0, 1)")),
        Err(e) => Err(format!("{e}: expected a probability in [0, 1)")),
    }
}

/// A text as tokens: one per distinct character, in sorted order.
struct Corpus {
    chars: Vec<char>,
    train: Vec<i64>,
    valid: Vec<i64>,
}

impl Corpus {
    /// The text's characters as tokens; the last 10% held out for validation.
    fn new(text: &str, context: usize) -> Result<Corpus, Box<dyn StdError>> {
        let mut chars: Vec<char> = text.chars().collect();
        chars.sort_unstable();
        chars.dedup();
        let tokens: Vec<i64> = text.chars().map(|c| chars.binary_search(&c).expect("every char is in the vocabulary") as i64).collect();
        let split = tokens.len() * 9 / 10;
        if split <= context + 1 || tokens.len() - split <= context + 1 {
            return Err(format!("the text has {} characters: too short for windows of {context}; lower --context", tokens.len()).into());
        }
        Ok(Corpus { chars, valid: tokens[split..].to_vec(), train: tokens[..split].to_vec() })
    }

    /// `batch` windows of `context` tokens and the tokens that follow each, from `tokens`, at
    /// offsets drawn from `seed`.
    fn batch(tokens: &[i64], batch: usize, context: usize, seed: u64) -> Result<(Tensor, Tensor)> {
        let starts = Tensor::rand(&[batch], DType::F64, seed).mul((tokens.len() - context - 1) as f64)?.to_vec::<f64>()?;
        let (mut x, mut y) = (Vec::with_capacity(batch * context), Vec::with_capacity(batch * context));
        for s in starts {
            let s = s as usize;
            x.extend_from_slice(&tokens[s..s + context]);
            y.extend_from_slice(&tokens[s + 1..s + context + 1]);
        }
        Ok((Tensor::from_vec(x, &[batch, context])?, Tensor::from_vec(y, &[batch, context])?))
    }

    fn decode(&self, tokens: &[i64]) -> String {
        tokens.iter().map(|&t| self.chars[t as usize]).collect()
    }
}

/// One mode's training run.
struct Run {
    mode: Mode,
    model: Gpt,
    opt: AdamW,
    losses: Vec<f32>,
    first_step: Duration,
    time: Duration,
}

impl Run {
    fn new(mode: Mode, config: GptConfig, args: &Args) -> Result<Run> {
        // The dropout masks come from their own generator, seeded alike in both runs.
        let model = Gpt::new(config, args.seed, &Generator::new(args.seed.wrapping_add(1)))?;
        let opt = AdamW::with_config(model.parameters(), AdamConfig { lr: args.lr, betas: (0.9, 0.95), eps: 1e-8, weight_decay: 0.1 })?;
        Ok(Run { mode, model, opt, losses: Vec::new(), first_step: Duration::ZERO, time: Duration::ZERO })
    }

    fn train(&mut self, corpus: &Corpus, args: &Args) -> Result<()> {
        let bar = progress_bar(args.steps, self.mode.name());
        let start = Instant::now();
        for step in 0..args.steps {
            let seed = args.seed.wrapping_mul(1_000_003).wrapping_add(step as u64);
            let (x, y) = Corpus::batch(&corpus.train, args.batch_size, args.context, seed)?;
            let loss = match self.mode {
                Mode::Eager => gpt::train_step(&self.model, &self.opt, &x, &y)?,
                Mode::Graph => gpt::train_step_graph(&self.model, &self.opt, &x, &y)?,
            };
            let loss = loss.item::<f32>()?;
            if step == 0 {
                self.first_step = start.elapsed();
            }
            self.losses.push(loss);
            bar.set_message(format!("loss {loss:.4}"));
            bar.inc(1);
        }
        self.time = start.elapsed();
        bar.finish_and_clear();
        Ok(())
    }

    /// Time per step, the first (tracing) step left out when there are others.
    fn step_time(&self) -> Duration {
        let n = self.losses.len();
        if n > 1 {
            (self.time - self.first_step) / (n - 1) as u32
        } else {
            self.time
        }
    }
}

fn progress_bar(len: usize, label: &str) -> ProgressBar {
    let style = ProgressStyle::with_template("{prefix:>6} [{bar:32}] {pos:>5}/{len} {elapsed_precise} {msg}")
        .expect("a valid template")
        .progress_chars("=> ");
    ProgressBar::new(len as u64).with_style(style).with_prefix(label.to_string())
}

/// The mean loss over a few held-out batches, without dropout or gradients.
fn validation_loss(model: &mut Gpt, corpus: &Corpus, args: &Args) -> Result<f32> {
    model.set_training(false);
    let _no_grad = NoGradGuard::new();
    let batches = 4;
    let mut sum = 0.0;
    for i in 0..batches {
        let (x, y) = Corpus::batch(&corpus.valid, args.batch_size, args.context, 7 + i)?;
        sum += model.loss(&x, &y)?.item::<f32>()?;
    }
    model.set_training(true);
    Ok(sum / batches as f32)
}

/// `n` characters written by the model after `prompt`: each drawn from the softmax of the
/// last position's logits (temperature 0.8), with uniform numbers from a generator.
fn sample(model: &mut Gpt, corpus: &Corpus, prompt: &str, n: usize, seed: u64) -> Result<String> {
    model.set_training(false);
    let _no_grad = NoGradGuard::new();
    let g = Generator::new(seed);
    let context = model.config().context;
    let mut tokens: Vec<i64> = prompt.chars().filter_map(|c| corpus.chars.binary_search(&c).ok().map(|t| t as i64)).collect();
    let prompt_len = tokens.len();
    for _ in 0..n {
        let window = &tokens[tokens.len().saturating_sub(context)..];
        let x = Tensor::from_vec(window.to_vec(), &[1, window.len()])?;
        let logits = model.forward(&x)?.select(1, window.len() - 1)?.reshape([-1])?;
        let probs = logits.div(0.8)?.softmax(0)?.to_vec::<f32>()?;
        let u = Tensor::rand_gen(&[], DType::F32, &g)?.item::<f32>()?;
        let mut acc = 0.0;
        let next = probs.iter().position(|&p| {
            acc += p;
            u < acc
        });
        tokens.push(next.unwrap_or(probs.len() - 1) as i64);
    }
    model.set_training(true);
    Ok(corpus.decode(&tokens[prompt_len..]))
}

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
    if let Some(n) = args.threads {
        tensor_core::set_num_threads(n);
    }
    if !args.d_model.is_multiple_of(args.heads) {
        return Err(format!("--d-model {} is not a multiple of --heads {}", args.d_model, args.heads).into());
    }
    let text = match &args.text {
        Some(path) => std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?,
        None => TEXT.to_string(),
    };
    let corpus = Corpus::new(&text, args.context)?;
    let config = GptConfig {
        vocab: corpus.chars.len(),
        context: args.context,
        layers: args.layers,
        d_model: args.d_model,
        heads: args.heads,
        mlp: 4 * args.d_model,
        dropout: args.dropout,
    };
    let name = if args.text.is_some() { "the given text" } else { "The Devil's Dictionary" };
    println!(
        "character-level GPT on {name}: {} characters, vocabulary {}; blocks: {}, width {}, heads: {}, context {}, dropout {}",
        text.chars().count(),
        config.vocab,
        config.layers,
        config.d_model,
        config.heads,
        config.context,
        config.dropout
    );
    println!(
        "{} steps of {} sequences; AdamW lr {}; seed {}; {} threads",
        args.steps,
        args.batch_size,
        args.lr,
        args.seed,
        tensor_core::num_threads()
    );
    let modes = args.mode.runs();
    let mut runs = Vec::new();
    for &mode in modes {
        let mut run = Run::new(mode, config, &args)?;
        run.train(&corpus, &args)?;
        let valid = validation_loss(&mut run.model, &corpus, &args)?;
        let (first, last) = (run.losses[0], run.losses[run.losses.len() - 1]);
        println!("{:>5}: train loss {first:.4} -> {last:.4}, validation loss {valid:.4}", mode.name());
        runs.push(run);
    }
    let same = match &runs[..] {
        [eager, graph] => compare(eager, graph)?,
        _ => true,
    };
    if let Some(f) = tensor_core::function::lookup("train_step_graph") {
        let nodes = f.concrete_functions().first().map_or(0, |c| c.graph().nodes.len());
        println!("train_step_graph traced {} time(s); graph: {nodes} nodes", f.trace_count());
    }
    print_table(&runs);
    if args.sample > 0 {
        let run = runs.last_mut().expect("at least one mode");
        let text = sample(&mut run.model, &corpus, "\n", args.sample, args.seed)?;
        println!(
            "\nsampled from the {} model ({} characters after a newline, temperature 0.8):\n>>>\n{}\n<<<",
            run.mode.name(),
            args.sample,
            text.trim_end()
        );
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
        None => println!("losses identical across {} steps (eager vs graph, bit for bit, dropout on)", eager.losses.len()),
        Some(i) => println!("losses differ first at step {}: eager {:e} vs graph {:e}", i + 1, eager.losses[i], graph.losses[i]),
    }
    let mut params_same = true;
    for (p, q) in eager.model.parameters().iter().zip(graph.model.parameters()) {
        let bits = |t: &Tensor| t.to_vec::<f32>().map(|v| v.into_iter().map(f32::to_bits).collect::<Vec<_>>());
        params_same &= bits(p)? == bits(&q)?;
    }
    println!("final parameters {}", if params_same { "identical" } else { "DIFFER" });
    Ok(first_diff.is_none() && params_same)
}

fn print_table(runs: &[Run]) {
    println!();
    println!("| mode  | time per step | first step | total      |");
    println!("|-------|---------------|------------|------------|");
    for run in runs {
        let (step, first) = (run.step_time().as_secs_f64() * 1e3, run.first_step.as_secs_f64() * 1e3);
        println!("| {} | {step:>10.2} ms | {first:>7.1} ms | {:>8.2} s |", run.mode.name(), run.time.as_secs_f64());
    }
    if let [eager, graph] = runs {
        println!("speed-up of the graph: {:.2}x per step", eager.step_time().as_secs_f64() / graph.step_time().as_secs_f64());
    }
    println!("(the graph's first step includes tracing and optimizing it)");
}
