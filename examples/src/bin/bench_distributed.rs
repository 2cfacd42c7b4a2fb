//! W3 and W4 trained data-parallel: time per step, communication time per step and how much
//! of it overlaps backward. The global batch is the workload's (W3 128, W4 64), split over
//! the ranks; one thread per process.
//!
//! ```sh
//! cargo build --release -p examples --features mpi --bin bench_distributed
//! target/release/bench_distributed                       # 1 process x 1 thread
//! mpirun -np 2 target/release/bench_distributed          # 2 processes x 1 thread
//! ```

use clap::Parser;
use examples::bench::{lenet, workloads};
use std::time::{Duration, Instant};
use tensor_core::distributed::{self, DataParallel, ShardSampler, StepStats};
use tensor_core::optim::{Adam, Optimizer};
use tensor_core::prelude::*;

#[derive(Parser, Debug)]
struct Args {
    /// Timed steps per workload (after 3 warm-up steps).
    #[arg(long, default_value_t = 30)]
    steps: usize,
    /// Bucket size in KiB.
    #[arg(long, default_value_t = 256)]
    bucket_kib: usize,
    /// Kernel threads per process.
    #[arg(long, default_value_t = 1)]
    threads: usize,
}

/// What the timed steps measured, per step.
#[derive(Default)]
struct Totals {
    step: Duration,
    stats: StepStats,
    buckets: usize,
}

fn main() -> Result<()> {
    let args = Args::parse();
    tensor_core::set_num_threads(args.threads);
    let world = distributed::init()?;
    let (rank, n) = (world.rank(), world.size());
    let w3 = w3(&args)?;
    let w4 = w4(&args)?;
    if rank == 0 {
        println!("{n} process(es) x {} thread(s); buckets of {} KiB; {} steps", args.threads, args.bucket_kib, args.steps);
        println!("| workload | processes | time per step | communication per step | waited for per step | overlap | buckets |");
        println!("|----------|-----------|---------------|------------------------|---------------------|---------|---------|");
        for (name, t) in [("W3", w3), ("W4", w4)] {
            let per = |d: Duration| d.as_secs_f64() * 1e3 / args.steps as f64;
            println!(
                "| {name} | {n} | {:.2} ms | {:.2} ms | {:.2} ms | {:.0}% | {} |",
                per(t.step),
                per(t.stats.communication),
                per(t.stats.waited),
                t.stats.overlap() * 100.0,
                t.buckets
            );
        }
    }
    drop(world);
    Ok(())
}

/// Runs `step` 3 times untimed, then `args.steps` times; sums its time and statistics.
fn measure(args: &Args, mut step: impl FnMut() -> Result<StepStats>) -> Result<Totals> {
    for _ in 0..3 {
        step()?;
    }
    let mut t = Totals::default();
    for _ in 0..args.steps {
        let start = Instant::now();
        let s = step()?;
        t.step += start.elapsed();
        t.stats.communication += s.communication;
        t.stats.waited += s.waited;
        t.stats.finish += s.finish;
        t.buckets = s.buckets;
    }
    Ok(t)
}

/// This rank's rows of a global batch.
fn shard(x: &Tensor, y: &Tensor) -> Result<(Tensor, Tensor)> {
    let rows = ShardSampler::current().batch_range(x.shape().dims()[0])?;
    Ok((x.narrow(0, rows.start, rows.len())?, y.narrow(0, rows.start, rows.len())?))
}

/// W3: the MLP with SGD.
fn w3(args: &Args) -> Result<Totals> {
    let model = workloads::Mlp::new(0)?;
    let (x, y) = workloads::w3_batch(1)?;
    let (x, y) = shard(&x, &y)?;
    let ddp = DataParallel::new(model.params.clone(), args.bucket_kib << 10)?;
    measure(args, || {
        model.params.iter().try_for_each(Tensor::zero_grad)?;
        model.forward(&x)?.cross_entropy(&y)?.backward()?;
        let stats = ddp.finish()?;
        no_grad(|| model.params.iter().try_for_each(|p| p.sub_(&(p.grad().expect("a gradient") * 0.01f32))))?;
        Ok(stats)
    })
}

/// W4: LeNet-5 with Adam.
fn w4(args: &Args) -> Result<Totals> {
    let model = lenet::LeNet::new(0)?;
    let opt = Adam::new(model.parameters(), 1e-3)?;
    let (x, y) = lenet::batch(1)?;
    let (x, y) = shard(&x, &y)?;
    let ddp = DataParallel::new(model.parameters(), args.bucket_kib << 10)?;
    measure(args, || {
        opt.zero_grad()?;
        model.forward(&x)?.cross_entropy(&y)?.backward()?;
        let stats = ddp.finish()?;
        opt.step()?;
        Ok(stats)
    })
}
