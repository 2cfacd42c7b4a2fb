//! Serves an exported model: loads the file `lenet5 --export PATH` wrote and classifies the
//! test digits one image at a time, printing the accuracy and the latency per image. There
//! is no model code here — no layers, no weights, no forward pass: the graph, its constants
//! and its weights all come from the file.
//!
//! cargo run --release -p examples --bin lenet5 -- --export lenet5.tcg
//! cargo run --release -p examples --bin serve -- --model lenet5.tcg

use clap::Parser;
use examples::data::{self, Split};
use std::error::Error as StdError;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};
use tensor_core::prelude::*;

/// Classify the test digits with an exported model.
#[derive(Parser, Debug)]
#[command(name = "serve")]
struct Args {
    /// The exported model (written by `lenet5 --export FILE`).
    #[arg(long, value_name = "FILE")]
    model: PathBuf,
    /// A directory with MNIST's IDX files [default: the shipped UCI digits, as lenet5].
    #[arg(long, value_name = "DIR")]
    data: Option<PathBuf>,
    /// Worker threads for the kernels [default: all cores].
    #[arg(long, value_name = "N")]
    threads: Option<usize>,
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
    let start = Instant::now();
    let model = tensor_core::export::load(&args.model)?;
    let load = start.elapsed();
    let input = match model.args() {
        [one] if one.dtype == DType::F32 && one.shape.dims() == [1, 1, 28, 28] => one,
        other => return Err(format!("{}: expected a model of one f32[1, 1, 28, 28] image, found arguments {other:?}", args.model.display()).into()),
    };
    println!(
        "loaded {} in {:.2} ms: `{}` ({} nodes, argument `{}`, {} weight tensors)",
        args.model.display(),
        load.as_secs_f64() * 1e3,
        model.name(),
        model.graph().nodes.len(),
        input.name,
        model.captures().len()
    );
    let split: Split = match &args.data {
        Some(dir) => data::idx::load_mnist(dir)?,
        None => data::digits::load()?,
    };
    let (mut correct, mut latencies) = (0, Vec::with_capacity(split.test.len()));
    for i in 0..split.test.len() {
        let (image, _) = split.test.batch(&[i])?;
        let t = Instant::now();
        let logits = model.call(&[&image])?;
        latencies.push(t.elapsed());
        if predicted(&logits[0])? == split.test.labels[i] {
            correct += 1;
        }
    }
    let total = split.test.len();
    println!("{}: test accuracy {:.1}% ({correct}/{total} images, one at a time)", split.name, 100.0 * correct as f64 / total.max(1) as f64);
    latencies.sort();
    let median = latencies.get(latencies.len() / 2).copied().unwrap_or(Duration::ZERO);
    println!("latency per image: median {:.1} µs", median.as_secs_f64() * 1e6);
    Ok(())
}

/// The class with the largest logit (the first of equal ones).
fn predicted(logits: &Tensor) -> Result<i64> {
    let values = logits.to_vec::<f32>()?;
    let best = values.iter().enumerate().fold(0, |best, (i, &v)| if v > values[best] { i } else { best });
    Ok(best as i64)
}
