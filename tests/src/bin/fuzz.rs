//! Long fuzz campaigns: random programs run eagerly and as traced graphs, at each SIMD level
//! the CPU has, compared bit for bit (see docs/TESTING.md).
//!
//! ```sh
//! cargo run --release -p tests --bin fuzz -- --programs 1000000 --seed 1 --levels all
//! cargo run --release -p tests --bin fuzz -- --relaxed --programs 100000 --seed 1
//! ```

use std::process::ExitCode;
use std::time::Duration;
use tensor_core::kernels::simd::{level, set_max_level, Level};
use tests::fuzz::{campaign, generate, relaxed_campaign, run_program, to_rust, Config, Options};

const HELP: &str = "\
usage: fuzz [options]
  --programs N     programs per SIMD level (default 10000)
  --seed S         the stream's seed (default 1)
  --start I        the first program index (default 0)
  --levels L       all | baseline | avx2 | avx512, or a comma list (default all)
  --threads T      worker threads (default: available cores)
  --max-failures K stop a level after K failures (default 5)
  --no-shrink      print failing programs as generated
  --show I         print program I of the stream as Rust, run it, and exit
  --max-steps N    top-level steps per program (default 8)
  --control-grads  also let values that require grad flow through cond/while_loop
                   (their gradients are known to differ, see docs/TESTING.md)
  --relaxed        run relaxed-shape programs instead: each called at several batch
                   sizes through a graph function that relaxes the batch dim";

fn main() -> ExitCode {
    match parse(std::env::args().skip(1).collect()) {
        Ok(Command::Run(args)) if args.relaxed => run_relaxed(&args.opts),
        Ok(Command::Run(args)) => run(&args),
        Ok(Command::Show(seed, index, cfg)) => {
            let p = generate(seed, index, &cfg);
            println!("{}\n// {:?}", to_rust(&p), run_program(&p));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e}\n{HELP}");
            ExitCode::from(2)
        }
    }
}

struct Args {
    opts: Options,
    levels: Vec<Level>,
    relaxed: bool,
}

enum Command {
    Run(Args),
    Show(u64, u64, Config),
}

fn parse(argv: Vec<String>) -> Result<Command, String> {
    let mut opts = Options {
        programs: 10_000,
        threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
        progress: true,
        fingerprints: true,
        ..Options::default()
    };
    let mut levels = "all".to_string();
    let mut show = None;
    let mut relaxed = false;
    let mut it = argv.into_iter();
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        let number = |v: String| v.replace('_', "").parse::<u64>().map_err(|e| format!("{flag}: {e}"));
        match flag.as_str() {
            "--programs" => opts.programs = number(value()?)?,
            "--seed" => opts.seed = number(value()?)?,
            "--start" => opts.start = number(value()?)?,
            "--threads" => opts.threads = number(value()?)? as usize,
            "--max-failures" => opts.max_failures = number(value()?)? as usize,
            "--max-steps" => opts.config.max_steps = number(value()?)? as usize,
            "--levels" => levels = value()?,
            "--no-shrink" => opts.shrink = false,
            "--control-grads" => opts.config.control_grads = true,
            "--show" => show = Some(number(value()?)?),
            "--relaxed" => relaxed = true,
            "--help" | "-h" => return Err("fuzz: random-program differential testing".into()),
            other => return Err(format!("unknown option {other}")),
        }
    }
    if let Some(index) = show {
        return Ok(Command::Show(opts.seed, index, opts.config));
    }
    Ok(Command::Run(Args { levels: parse_levels(&levels)?, opts, relaxed }))
}

/// The levels asked for, capped at what the CPU has (the baseline first).
fn parse_levels(s: &str) -> Result<Vec<Level>, String> {
    let have = level();
    let all = [Level::Baseline, Level::Avx2, Level::Avx512];
    let wanted: Vec<Level> = if s == "all" {
        all.to_vec()
    } else {
        s.split(',')
            .map(|l| match l {
                "baseline" => Ok(Level::Baseline),
                "avx2" => Ok(Level::Avx2),
                "avx512" => Ok(Level::Avx512),
                other => Err(format!("unknown level {other}")),
            })
            .collect::<Result<_, _>>()?
    };
    Ok(wanted.into_iter().filter(|&l| l <= have).collect())
}

/// A campaign of relaxed-shape programs (at the CPU's own SIMD level).
fn run_relaxed(opts: &Options) -> ExitCode {
    println!("relaxed fuzz: seed {}, programs {}..{}, {} threads", opts.seed, opts.start, opts.start + opts.programs, opts.threads);
    let started = std::time::Instant::now();
    let r = relaxed_campaign(opts.seed, opts.start, opts.programs, opts.threads);
    println!(
        "{} programs ({} reading the batch dim), {} calls ({} failing eagerly and in the graph), {} traces, {:.1} s, {} mismatches",
        r.programs,
        r.reading,
        r.calls,
        r.failed_calls,
        r.traces,
        started.elapsed().as_secs_f64(),
        r.failures.len()
    );
    for (index, p, what) in r.failures.iter().take(opts.max_failures) {
        println!("\nrelaxed program {index} (seed {}): {what}\n{p:#?}", opts.seed);
    }
    if r.failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn run(args: &Args) -> ExitCode {
    let opts = &args.opts;
    println!("fuzz: seed {}, programs {}..{}, {} threads, levels {:?}", opts.seed, opts.start, opts.start + opts.programs, opts.threads, args.levels);
    let mut failed = false;
    let mut baseline: Option<Vec<Option<u64>>> = None;
    let (mut programs, mut ops, mut time) = (0u64, 0u64, Duration::ZERO);
    for &l in &args.levels {
        set_max_level(l);
        let r = campaign(opts);
        println!(
            "level {l:?}: {} programs, {} ops, {:.1} s, {} invalid, {} mismatches",
            r.programs,
            r.ops,
            r.elapsed.as_secs_f64(),
            r.invalid,
            r.failures.len()
        );
        for (i, e) in r.invalid_examples.iter().take(5) {
            println!("  invalid program {i}: {e}");
        }
        if r.zero_grads > 0 {
            println!("  {} programs agree but for gradients absent eagerly and zeros from the graph (through cond/while_loop)", r.zero_grads);
            if let Some(f) = &r.zero_grads_example {
                println!("  the first, program {}: {}\n{}", f.index, f.what, f.rust());
            }
        }
        for f in &r.failures {
            failed = true;
            println!("\nprogram {} (seed {}, level {l:?}): {}\nshrunk: {}\n{}", f.index, opts.seed, f.what, f.shrunk_what, f.rust());
        }
        match &baseline {
            None => baseline = Some(r.fingerprints.clone()),
            Some(base) => {
                // Programs that ran at both levels (a level stops after `max_failures`).
                let differ: Vec<u64> = base
                    .iter()
                    .zip(&r.fingerprints)
                    .enumerate()
                    .filter(|(_, (a, b))| a.is_some() && b.is_some() && a != b)
                    .map(|(i, _)| opts.start + i as u64)
                    .collect();
                println!("  eager results differing from the first level's: {}", differ.len());
                for i in differ.iter().take(5) {
                    failed = true;
                    println!("  program {i}:\n{}", to_rust(&generate(opts.seed, *i, &opts.config)));
                }
            }
        }
        programs += r.programs;
        ops += r.ops;
        time += r.elapsed;
    }
    println!("total: {programs} programs, {ops} ops, {:.1} s", time.as_secs_f64());
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
