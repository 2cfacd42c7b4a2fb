//! The benchmark binary of `docs/WORKLOADS.md`: one JSON line per (workload, mode).
//!
//! cargo run --release -p examples --bin bench -- --workload W3 --mode graph [--threads N] [--calls K] [--allocs]
//!
//! W8 runs LeNet-5's forward pass on one image as exported and loaded back (`graph`) or
//! eagerly; `--onnx FILE` writes the same model as ONNX, for ONNX Runtime beside it.
//!
//! W9 serves imported ONNX models (ResNet-18 at batch 1 and 8, MobileNetV2 at batch 1), one
//! line per case, from the folder of `--models DIR` (or `$TENSOR_CORE_ONNX_MODELS`) that
//! `scripts/onnx_real_models.py` writes; `--mode tract` runs them in tract-onnx (feature
//! `tract`).

use clap::Parser;
use examples::bench::{alloc, baseline, lenet, roofline, timing, w7, w9, workloads as w, Mode, WORKLOADS};
use examples::gpt;
use std::hint::black_box;
use std::path::PathBuf;
use std::time::Duration;
use tensor_core::optim::Adam;
use tensor_core::prelude::*;

#[global_allocator]
static ALLOC: alloc::Counting = alloc::Counting;

#[derive(Parser)]
#[command(about = "Runs the benchmark workloads of docs/WORKLOADS.md and prints one JSON line per run")]
struct Args {
    /// W1..W9, or all (W9 only when its models are found).
    #[arg(long, default_value = "all")]
    workload: String,
    /// eager, graph, graph-forward (W3, W4: forward and loss a graph call, backward and the
    /// optimizer eager), ndarray, tract (W9, feature `tract`), or all.
    #[arg(long, default_value = "all")]
    mode: String,
    /// Worker threads for kernels (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Timed calls at least.
    #[arg(long, default_value_t = 20)]
    calls: usize,
    /// Seconds of timed calls at least.
    #[arg(long, default_value_t = 2.0)]
    min_time: f64,
    /// Also count heap allocations per call (the mean of 10 calls, all threads).
    #[arg(long)]
    allocs: bool,
    /// Where the workload runs: cpu, or cuda / cuda:N (feature `cuda`; W2, W3, W5, W6 and W7
    /// in eager and graph mode, each call followed by a synchronization; the line adds
    /// `gpu_us`, the median GPU time of a call by CUDA events).
    #[arg(long, default_value = "cpu", value_parser = parse_device)]
    device: Device,
    /// Measure the machine's limits and exit: one line per thread count up to --threads, with
    /// f32 FMA GFLOP/s and copy and triad GB/s. (Every CPU line carries them too, measured
    /// once per process at its thread count, with the workload's rates against them.)
    #[arg(long)]
    peak: bool,
    /// Write W8's model (W4's LeNet-5, forward pass on one image) as ONNX to FILE and exit.
    #[arg(long, value_name = "FILE")]
    onnx: Option<PathBuf>,
    /// W9's models: the folder `python scripts/onnx_real_models.py DIR resnet18 mobilenet_v2`
    /// writes (default: $TENSOR_CORE_ONNX_MODELS).
    #[arg(long, value_name = "DIR")]
    models: Option<PathBuf>,
    /// W9: only the cases whose name (resnet18_b1, resnet18_b8, mobilenet_v2_b1) contains
    /// this text.
    #[arg(long, value_name = "TEXT")]
    case: Option<String>,
    /// After each CPU graph line, time every step of 10 more calls and print where a call's
    /// time goes (per kind of step and input shapes, most first) to stderr
    /// (`TENSOR_CORE_CPU_PROFILE=1`).
    #[arg(long, hide = true)]
    profile: bool,
}

type Call = Box<dyn FnMut()>;

/// A call made ready to time: its extra JSON fields, and the key of its work in
/// `roofline::work` (the workload, or `W9:<case>`).
struct Made {
    call: Call,
    extra: String,
    work: String,
}

impl Made {
    fn new(call: Call, extra: String, work: &str) -> Made {
        Made { call, extra, work: work.to_string() }
    }
}

fn main() -> Result<()> {
    let args = Args::parse();
    let threads = args.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    // matrixmultiply (the ndarray baseline's matmul) reads this on first use.
    // SAFETY: the program is still single-threaded here (no kernel or pool has started).
    unsafe { std::env::set_var("MATMUL_NUM_THREADS", threads.to_string()) };
    if args.profile {
        // SAFETY: as above; the library reads it on its first graph call.
        unsafe { std::env::set_var("TENSOR_CORE_CPU_PROFILE", "1") };
    }
    tensor_core::set_num_threads(threads);
    if let Some(path) = &args.onnx {
        tensor_core::onnx::export(&w::w8_forward(&lenet::LeNet::new(7)?)?, path)?;
        eprintln!("W8's model as ONNX: {}", path.display());
        return Ok(());
    }
    if args.peak {
        for t in 1..=threads {
            let m = roofline::Machine::measure(t);
            println!("{{\"framework\":\"tensor-core\",\"peak\":true,\"threads\":{t}{}}}", m.json_fields(None, 0.0));
        }
        return Ok(());
    }
    // The machine's limits, for the lines' fractions of the peak (CPU runs only).
    let machine = (!args.device.is_cuda()).then(|| roofline::Machine::measure(threads));
    let workloads: Vec<&str> = if args.workload == "all" { WORKLOADS.to_vec() } else { vec![args.workload.as_str()] };
    let modes: Vec<Mode> = match args.mode.as_str() {
        "all" => vec![Mode::Eager, Mode::Graph, Mode::GraphForward, Mode::Ndarray, Mode::Tract],
        m => vec![<Mode as clap::ValueEnum>::from_str(m, true).map_err(|e| Error::InvalidArgument { op: "bench", arg: "mode", reason: e })?],
    };
    for workload in &workloads {
        for &mode in &modes {
            let made: Vec<Made> = match *workload {
                _ if args.device.is_cuda() => make_on_gpu(workload, mode, args.device)?
                    .map(|call| Made::new(call, format!(",\"device\":\"{}\"", args.device), workload))
                    .into_iter()
                    .collect(),
                "W8" => make_w8(mode)?.map(|(call, extra)| Made::new(call, extra, "W8")).into_iter().collect(),
                "W9" => match make_w9(mode, args.models.as_deref(), args.case.as_deref()) {
                    // `all` runs W9 only where its models are: it says why it skips.
                    Err(e) if args.workload == "all" => {
                        eprintln!("skipping W9: {e}");
                        break;
                    }
                    made => made?,
                },
                _ => make(workload, mode)?.map(|call| Made::new(call, String::new(), workload)).into_iter().collect(),
            };
            if made.is_empty() && args.workload != "all" && args.mode != "all" {
                eprintln!("{workload} has no {} mode", mode.name());
            }
            for made in made {
                run_and_print(&args, threads, machine.as_ref(), workload, mode, made)?;
            }
        }
    }
    Ok(())
}

/// Times one call and prints its line.
fn run_and_print(args: &Args, threads: usize, machine: Option<&roofline::Machine>, workload: &str, mode: Mode, made: Made) -> Result<()> {
    let Made { mut call, extra, work } = made;
    let t = timing::time(&mut call, 3, args.calls, Duration::from_secs_f64(args.min_time));
    let gpu = match args.device.is_cuda() {
        true => format!(",\"gpu_us\":{:.2}", gpu_median_us(&mut call, args.device, 50)?),
        false => String::new(),
    };
    if args.profile && !args.device.is_cuda() {
        print_profile(&mut call, 100);
    }
    let allocs = if args.allocs { format!(",\"allocs_per_call\":{}", alloc::per_call(&mut call, 10)) } else { String::new() };
    let peak = machine.map_or(String::new(), |m| m.json_fields(roofline::work(&work), t.median_us));
    let framework = if mode == Mode::Tract { "tract" } else { "tensor-core" };
    println!(
        "{{\"framework\":\"{framework}\",\"mode\":\"{}\",\"workload\":\"{workload}\",\"threads\":{threads},\"median_us\":{:.2},\"min_us\":{:.2},\"max_us\":{:.1},\"calls\":{},\"first_us\":{:.1}{allocs}{gpu}{extra}{peak}}}",
        mode.name(),
        t.median_us,
        t.min_us,
        t.max_us,
        t.calls,
        t.first_us
    );
    Ok(())
}

/// Where `calls` more calls' time goes, step by step (a graph's CPU steps), to stderr: for
/// each kind of step and shapes, ms per call (the mean, and the quietest call's), share of
/// the steps' sum, and steps per call. The quietest call's time is the one to compare on a
/// busy machine, where a step's mean over a few calls can be half noise.
fn print_profile(call: &mut Call, calls: usize) {
    // key -> (steps, seconds in all calls, seconds in the quietest call)
    let mut rows: Vec<(String, usize, f64, f64)> = Vec::new();
    for _ in 0..calls {
        tensor_core::compile::reset_cpu_profile();
        call();
        for (key, n, secs) in tensor_core::compile::cpu_profile() {
            match rows.iter_mut().find(|r| r.0 == key) {
                Some(r) => (r.1, r.2, r.3) = (r.1 + n, r.2 + secs, r.3.min(secs)),
                None => rows.push((key, n, secs, secs)),
            }
        }
    }
    rows.sort_by(|a, b| b.2.total_cmp(&a.2));
    let (total, quiet): (f64, f64) = (rows.iter().map(|r| r.2).sum(), rows.iter().map(|r| r.3).sum());
    eprintln!(
        "profile: {:.3} ms per call in graph steps, {:.3} summing each step's quietest call ({calls} calls)",
        total * 1e3 / calls as f64,
        quiet * 1e3
    );
    for (key, n, secs, min) in rows {
        eprintln!("{:9.3} ms {:9.3} min {:5.1}% {:3}x  {key}", secs * 1e3 / calls as f64, min * 1e3, 100.0 * secs / total, n / calls);
    }
}

/// The median GPU time of `calls` calls, each between two CUDA events (as the peers'
/// `torch.cuda.Event` timings are taken).
fn gpu_median_us(call: &mut Call, device: Device, calls: usize) -> Result<f64> {
    let mut times = (0..calls).map(|_| device.time_on_gpu(&mut *call)).collect::<Result<Vec<f64>>>()?;
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}

fn parse_device(s: &str) -> std::result::Result<Device, String> {
    match s {
        "cpu" => Ok(Device::Cpu),
        "cuda" => Ok(Device::Cuda(0)),
        _ => s.strip_prefix("cuda:").and_then(|n| n.parse().ok()).map(Device::Cuda).ok_or_else(|| format!("`{s}`: expected cpu, cuda or cuda:N")),
    }
}

/// One call of `workload` in `mode` with its tensors on `device`, synchronized, or `None` for
/// what does not run on the GPU yet.
fn make_on_gpu(workload: &str, mode: Mode, device: Device) -> Result<Option<Call>> {
    let on = |t: Tensor| t.to_device(device);
    let call: Box<dyn FnMut() -> Result<Tensor>> = match (workload, mode) {
        ("W2", Mode::Eager | Mode::Graph) => {
            let x = on(Tensor::randn(&[4_194_304], DType::F32, 2))?;
            if mode == Mode::Eager {
                Box::new(move || w::w2(&x))
            } else {
                Box::new(move || w::w2_graph(&x))
            }
        }
        ("W3", Mode::Eager | Mode::Graph) => {
            let (model, (x, labels)) = (w::Mlp::new(3)?.to_device(device)?, w::w3_batch(4)?);
            let (x, labels) = (on(x)?, on(labels)?);
            if mode == Mode::Eager {
                Box::new(move || model.train_step(&x, &labels, 0.01))
            } else {
                Box::new(move || w::w3_graph(&model, &x, &labels))
            }
        }
        ("W5", Mode::Eager | Mode::Graph) => {
            let (a, b) = (on(Tensor::randn(&[1024, 1024], DType::F32, 5))?, on(Tensor::randn(&[1024, 1024], DType::F32, 6))?);
            if mode == Mode::Eager {
                Box::new(move || w::w5(&a, &b))
            } else {
                Box::new(move || w::w5_graph(&a, &b))
            }
        }
        ("W6", Mode::Eager | Mode::Graph) => {
            let x = on(Tensor::ones(&[1], DType::F32))?;
            if mode == Mode::Eager {
                Box::new(move || w::w6(&x))
            } else {
                Box::new(move || w::w6_graph(&x))
            }
        }
        ("W7", Mode::Eager | Mode::Graph) => {
            let ((model, opt), (tokens, targets)) = (w7::setup_on(7, device)?, w7::batch(8)?);
            let (tokens, targets) = (on(tokens)?, on(targets)?);
            if mode == Mode::Eager {
                Box::new(move || gpt::train_step(&model, &opt, &tokens, &targets))
            } else {
                Box::new(move || gpt::train_step_graph(&model, &opt, &tokens, &targets))
            }
        }
        _ => return Ok(None),
    };
    let mut call = call;
    Ok(Some(Box::new(move || {
        drop(black_box(call().expect("GPU workload")));
        device.synchronize().expect("GPU synchronize");
    })))
}

/// W8's call in `mode` with the extra JSON fields of its line: `graph` is the forward pass
/// exported, loaded back and called on one image (with the load's time); `eager` the model
/// itself on one image.
fn make_w8(mode: Mode) -> Result<Option<(Call, String)>> {
    let model = lenet::LeNet::new(7)?;
    let image = Tensor::randn(&[1, 1, 28, 28], DType::F32, 8);
    Ok(Some(match mode {
        Mode::Graph => {
            let path = std::env::temp_dir().join(format!("bench-w8-{}.tcg", std::process::id()));
            let (loaded, load) = w::w8_loaded(&model, &path)?;
            let bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
            std::fs::remove_file(&path).ok();
            let extra = format!(",\"load_us\":{:.1},\"file_bytes\":{bytes}", load.as_secs_f64() * 1e6);
            (Box::new(move || drop(black_box(loaded.call(&[&image]).expect("W8")))), extra)
        }
        Mode::Eager => (Box::new(move || drop(black_box(no_grad(|| model.forward(&image)).expect("W8")))), String::new()),
        Mode::Ndarray | Mode::GraphForward | Mode::Tract => return Ok(None),
    }))
}

/// W9's cases in `mode` (graph, eager, or tract with the feature `tract`), each with its
/// line's `case` and `batch` fields; an error saying how to make the models when they are
/// not found.
fn make_w9(mode: Mode, models: Option<&std::path::Path>, only: Option<&str>) -> Result<Vec<Made>> {
    if !matches!(mode, Mode::Graph | Mode::Eager | Mode::Tract) {
        return Ok(Vec::new());
    }
    let dir = w9::models_dir(models)?;
    let mut made = Vec::new();
    for (name, batch) in w9::CASES {
        let case = w9::case_name(name, batch);
        if only.is_some_and(|only| !case.contains(only)) {
            continue;
        }
        let path = w9::model_path(&dir, name)?;
        let x = w9::input(batch);
        let call: Call = match mode {
            Mode::Graph => {
                let f = w9::traced(&tensor_core::onnx::import(&path)?, &x)?;
                Box::new(move || drop(black_box(f.call(&[&x]).expect("W9"))))
            }
            Mode::Eager => {
                let model = tensor_core::onnx::import(&path)?;
                Box::new(move || drop(black_box(no_grad(|| model.call(&[&x])).expect("W9"))))
            }
            _ => match w9_tract(&path, &x)? {
                Some(call) => call,
                None => return Ok(Vec::new()),
            },
        };
        made.push(Made::new(call, format!(",\"case\":\"{case}\",\"batch\":{batch}"), &format!("W9:{case}")));
    }
    Ok(made)
}

/// tract-onnx's plan of a W9 model, called on `x`.
#[cfg(feature = "tract")]
fn w9_tract(path: &std::path::Path, x: &Tensor) -> Result<Option<Call>> {
    let (plan, input) = (w9::tract::plan(path, x)?, w9::tract::input(x)?);
    Ok(Some(Box::new(move || w9::tract::run(&plan, &input).expect("W9 in tract"))))
}

/// Without the feature `tract` there is no tract mode: it says how to get one.
#[cfg(not(feature = "tract"))]
fn w9_tract(_: &std::path::Path, _: &Tensor) -> Result<Option<Call>> {
    eprintln!("W9's tract mode needs the feature: cargo run --release -p examples --features tract --bin bench -- --workload W9 --mode tract");
    Ok(None)
}

/// One call of `workload` in `mode`, or `None` if that mode is not defined for it.
fn make(workload: &str, mode: Mode) -> Result<Option<Call>> {
    Ok(Some(match (workload, mode) {
        ("W1", Mode::Eager) => {
            let x = Tensor::randn(&[16], DType::F32, 1);
            Box::new(move || drop(black_box(w::w1(&x).expect("W1"))))
        }
        ("W1", Mode::Graph) => {
            let x = Tensor::randn(&[16], DType::F32, 1);
            Box::new(move || drop(black_box(w::w1_graph(&x).expect("W1"))))
        }
        ("W1", Mode::Ndarray) => {
            let x0 = Tensor::randn(&[16], DType::F32, 1).to_array::<f32>()?.into_dimensionality::<ndarray::Ix1>().expect("1-d");
            Box::new(move || {
                let mut x = x0.clone();
                baseline::w1(&mut x);
                black_box(x);
            })
        }
        ("W2", Mode::Eager) => {
            let x = Tensor::randn(&[4_194_304], DType::F32, 2);
            Box::new(move || drop(black_box(w::w2(&x).expect("W2"))))
        }
        ("W2", Mode::Graph) => {
            let x = Tensor::randn(&[4_194_304], DType::F32, 2);
            Box::new(move || drop(black_box(w::w2_graph(&x).expect("W2"))))
        }
        ("W2", Mode::Ndarray) => {
            let x = Tensor::randn(&[4_194_304], DType::F32, 2).to_array::<f32>()?.into_dimensionality::<ndarray::Ix1>().expect("1-d");
            Box::new(move || drop(black_box(baseline::w2(&x))))
        }
        ("W3", Mode::Eager) => {
            let (model, (x, labels)) = (w::Mlp::new(3)?, w::w3_batch(4)?);
            Box::new(move || drop(black_box(model.train_step(&x, &labels, 0.01).expect("W3"))))
        }
        ("W3", Mode::Graph) => {
            let (model, (x, labels)) = (w::Mlp::new(3)?, w::w3_batch(4)?);
            Box::new(move || drop(black_box(w::w3_graph(&model, &x, &labels).expect("W3"))))
        }
        ("W4", Mode::Eager) => {
            let model = lenet::LeNet::new(7)?;
            let opt = Adam::new(model.parameters(), 1e-3)?;
            let (x, labels) = lenet::batch(8)?;
            Box::new(move || drop(black_box(lenet::train_step(&model, &opt, &x, &labels).expect("W4"))))
        }
        ("W4", Mode::Graph) => {
            let model = lenet::LeNet::new(7)?;
            let opt = Adam::new(model.parameters(), 1e-3)?;
            let (x, labels) = lenet::batch(8)?;
            Box::new(move || drop(black_box(w::w4_graph(&model, &opt, &x, &labels).expect("W4"))))
        }
        ("W3", Mode::GraphForward) => {
            let (model, (x, labels)) = (w::Mlp::new(3)?, w::w3_batch(4)?);
            Box::new(move || drop(black_box(w::w3_graph_forward(&model, &x, &labels, 0.01).expect("W3"))))
        }
        ("W4", Mode::GraphForward) => {
            let model = lenet::LeNet::new(7)?;
            let opt = Adam::new(model.parameters(), 1e-3)?;
            let (x, labels) = lenet::batch(8)?;
            Box::new(move || drop(black_box(w::w4_graph_forward(&model, &opt, &x, &labels).expect("W4"))))
        }
        ("W3", Mode::Ndarray) => {
            let (model, (x, labels)) = (w::Mlp::new(3)?, w::w3_batch(4)?);
            let mut m = baseline::Mlp::from_params(&model.params);
            let x = x.to_array::<f32>()?.into_dimensionality::<ndarray::Ix2>().expect("2-d");
            let labels: Vec<usize> = labels.to_vec::<i64>()?.into_iter().map(|l| l as usize).collect();
            Box::new(move || {
                black_box(m.train_step(&x, &labels, 0.01));
            })
        }
        ("W5", Mode::Eager) => {
            let (a, b) = (Tensor::randn(&[1024, 1024], DType::F32, 5), Tensor::randn(&[1024, 1024], DType::F32, 6));
            Box::new(move || drop(black_box(w::w5(&a, &b).expect("W5"))))
        }
        ("W5", Mode::Graph) => {
            let (a, b) = (Tensor::randn(&[1024, 1024], DType::F32, 5), Tensor::randn(&[1024, 1024], DType::F32, 6));
            Box::new(move || drop(black_box(w::w5_graph(&a, &b).expect("W5"))))
        }
        ("W5", Mode::Ndarray) => {
            let m = |seed| {
                Tensor::randn(&[1024, 1024], DType::F32, seed).to_array::<f32>().map(|a| a.into_dimensionality::<ndarray::Ix2>().expect("2-d"))
            };
            let (a, b) = (m(5)?, m(6)?);
            Box::new(move || drop(black_box(baseline::w5(&a, &b))))
        }
        ("W6", Mode::Graph) => {
            let x = Tensor::zeros(&[1], DType::F32);
            Box::new(move || drop(black_box(w::w6_graph(&x).expect("W6"))))
        }
        ("W6", Mode::Eager) => {
            let x = Tensor::zeros(&[1], DType::F32);
            Box::new(move || drop(black_box(w::w6(&x).expect("W6"))))
        }
        ("W7", Mode::Eager) => {
            let ((model, opt), (tokens, targets)) = (w7::setup(7)?, w7::batch(8)?);
            Box::new(move || drop(black_box(gpt::train_step(&model, &opt, &tokens, &targets).expect("W7"))))
        }
        ("W7", Mode::Graph) => {
            let ((model, opt), (tokens, targets)) = (w7::setup(7)?, w7::batch(8)?);
            Box::new(move || drop(black_box(gpt::train_step_graph(&model, &opt, &tokens, &targets).expect("W7"))))
        }
        _ => return Ok(None),
    }))
}
