//! Runs many generated programs on several threads, counts what happened, and shrinks and
//! prints each program whose graph differs from eager.

use super::check::{check_with_fingerprint, Agreement};
use super::generator::{generate, Config};
use super::interp;
use super::print::to_rust;
use super::program::Program;
use super::shrink::shrink;
use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, Once};
use std::time::{Duration, Instant};

/// What running one program gave.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Eager and graph agree on every bit.
    Same,
    /// They agree except for gradients absent eagerly and zeros from the graph, in a program
    /// with `cond` or `while_loop` (the known difference; the detail says where).
    ZeroGrads(String),
    /// The eager run failed: the program is invalid (a generator shortcoming).
    Invalid(String),
    /// Eager and graph differ (or only one of them failed).
    Mismatch(String),
    /// The library panicked.
    Panic(String),
}

/// Runs `p` eagerly and as a graph (see [`check`](super::check)) and says how it went.
///
/// ```
/// use tests::fuzz::{generate, run_program, Config, Outcome};
/// let p = generate(1, 0, &Config::default());
/// assert!(matches!(run_program(&p), Outcome::Same | Outcome::Invalid(_)));
/// ```
pub fn run_program(p: &Program) -> Outcome {
    run_with_fingerprint(p).0
}

fn run_with_fingerprint(p: &Program) -> (Outcome, u64) {
    install_quiet_panics();
    QUIET.with(|q| q.set(true));
    let specs = p.specs();
    let f = |xs: &[tensor_core::Tensor]| interp::run(p, xs);
    let relaxed = !has_broadcasting_assign(&p.body, p);
    let result = catch_unwind(AssertUnwindSafe(|| check_with_fingerprint(&specs, p.grad, p.preset_grads, relaxed, &f)));
    QUIET.with(|q| q.set(false));
    match result {
        Ok((Ok(Agreement::Same), fp)) => (Outcome::Same, fp),
        Ok((Ok(Agreement::SameButZeroGrads(d)), fp)) if has_control_flow(&p.body) => (Outcome::ZeroGrads(d), fp),
        Ok((Ok(Agreement::SameButZeroGrads(d)), fp)) => (Outcome::Mismatch(format!("zero gradients without control flow: {d}")), fp),
        Ok((Ok(Agreement::EagerFailed(e)), fp)) => (Outcome::Invalid(e), fp),
        Ok((Err(m), fp)) => (Outcome::Mismatch(m.to_string()), fp),
        Err(payload) => {
            let msg = payload.downcast_ref::<String>().cloned().or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()));
            (Outcome::Panic(msg.unwrap_or_else(|| "a panic".into())), 0)
        }
    }
}

/// Whether `b` assigns a value of another shape to a tensor: in a trace with unknown dims the
/// graph takes the target's shape from the source, which is known to be wrong when the source
/// broadcasts (docs/TESTING.md), so such programs skip the relaxed trace.
fn has_broadcasting_assign(b: &super::program::Block, p: &Program) -> bool {
    b.steps.iter().any(|s| match &s.node {
        super::program::Node::Assign(t, src) => p.ty(*t) != p.ty(*src),
        node => node.blocks().iter().any(|inner| has_broadcasting_assign(inner, p)),
    })
}

fn has_control_flow(b: &super::program::Block) -> bool {
    b.steps.iter().any(|s| !s.node.blocks().is_empty())
}

thread_local! {
    /// Panics on this thread are expected (caught and reported): do not print them.
    static QUIET: Cell<bool> = const { Cell::new(false) };
}

/// A panic hook that stays silent on threads running a program and defers to the previous
/// hook elsewhere.
fn install_quiet_panics() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !QUIET.with(|q| q.get()) {
                previous(info);
            }
        }));
    });
}

/// What to run.
#[derive(Clone, Debug)]
pub struct Options {
    /// The stream's seed.
    pub seed: u64,
    /// The first program index.
    pub start: u64,
    /// How many programs.
    pub programs: u64,
    /// Worker threads.
    pub threads: usize,
    /// Program limits.
    pub config: Config,
    /// Shrink failing programs (and print them as Rust).
    pub shrink: bool,
    /// Stop after this many failures.
    pub max_failures: usize,
    /// Print progress to stderr every few seconds.
    pub progress: bool,
    /// Keep a fingerprint of each program's eager results (to compare SIMD levels).
    pub fingerprints: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            seed: 1,
            start: 0,
            programs: 1000,
            threads: 1,
            config: Config::default(),
            shrink: true,
            max_failures: 5,
            progress: false,
            fingerprints: false,
        }
    }
}

/// A program whose graph differs from eager.
#[derive(Clone, Debug)]
pub struct Failure {
    /// Its index in the stream.
    pub index: u64,
    /// What differed (or the panic).
    pub what: String,
    /// The program as generated.
    pub program: Program,
    /// The shrunk program (the same when not shrinking).
    pub shrunk: Program,
    /// What differed in the shrunk program.
    pub shrunk_what: String,
}

impl Failure {
    /// The shrunk program as a Rust test.
    pub fn rust(&self) -> String {
        to_rust(&self.shrunk)
    }
}

/// What a campaign found.
#[derive(Clone, Debug, Default)]
pub struct CampaignReport {
    /// Programs run.
    pub programs: u64,
    /// Ops in them (nested steps included).
    pub ops: u64,
    /// Programs the eager run rejected, and a few of their messages.
    pub invalid: u64,
    /// `(index, message)` of the first invalid programs.
    pub invalid_examples: Vec<(u64, String)>,
    /// Programs that differed or panicked.
    pub failures: Vec<Failure>,
    /// Programs that agreed except for gradients absent eagerly and zeros from the graph.
    pub zero_grads: u64,
    /// The first of them, shrunk (as a failure record).
    pub zero_grads_example: Option<Failure>,
    /// Wall time.
    pub elapsed: Duration,
    /// Each program's eager-results fingerprint, by index from `start` (when asked for;
    /// `None` for programs not run, after `max_failures`).
    pub fingerprints: Vec<Option<u64>>,
}

/// Runs `opts.programs` programs of the stream `opts.seed` on `opts.threads` threads.
///
/// ```
/// use tests::fuzz::{campaign, Options};
/// let r = campaign(&Options { programs: 20, ..Options::default() });
/// assert_eq!(r.programs, 20);
/// assert!(r.failures.is_empty(), "{:?}", r.failures.first().map(|f| f.rust()));
/// ```
pub fn campaign(opts: &Options) -> CampaignReport {
    let t0 = Instant::now();
    let next = AtomicU64::new(0);
    let ops = AtomicU64::new(0);
    let report = Mutex::new(CampaignReport {
        fingerprints: if opts.fingerprints { vec![None; opts.programs as usize] } else { vec![] },
        ..CampaignReport::default()
    });
    let done = AtomicU64::new(0);
    let working = AtomicU64::new(opts.threads.max(1) as u64);
    std::thread::scope(|s| {
        for _ in 0..opts.threads.max(1) {
            s.spawn(|| {
                worker(opts, &next, &ops, &done, &report);
                working.fetch_sub(1, Ordering::Relaxed);
            });
        }
        if opts.progress {
            s.spawn(|| progress(&working, &done, &report, t0));
        }
    });
    let mut r = report.into_inner().expect("no worker panicked");
    r.programs = done.load(Ordering::Relaxed);
    r.ops = ops.load(Ordering::Relaxed);
    r.elapsed = t0.elapsed();
    r.failures.sort_by_key(|f| f.index);
    r
}

fn worker(opts: &Options, next: &AtomicU64, ops: &AtomicU64, done: &AtomicU64, report: &Mutex<CampaignReport>) {
    loop {
        let k = next.fetch_add(1, Ordering::Relaxed);
        if k >= opts.programs || report.lock().expect("report").failures.len() >= opts.max_failures {
            return;
        }
        let index = opts.start + k;
        let Ok(p) = catch_unwind(|| generate(opts.seed, index, &opts.config)) else {
            let p = Program { inputs: vec![], body: Default::default(), grad: super::program::GradMode::None, preset_grads: false, types: vec![] };
            let what = format!("the generator panicked on program {index}");
            report.lock().expect("report").failures.push(Failure { index, what: what.clone(), program: p.clone(), shrunk: p, shrunk_what: what });
            done.fetch_add(1, Ordering::Relaxed);
            continue;
        };
        ops.fetch_add(p.op_count() as u64, Ordering::Relaxed);
        let (outcome, fp) = run_with_fingerprint(&p);
        done.fetch_add(1, Ordering::Relaxed);
        let mut r = report.lock().expect("report");
        if opts.fingerprints {
            r.fingerprints[k as usize] = Some(fp);
        }
        match outcome {
            Outcome::Same => {}
            Outcome::ZeroGrads(what) => {
                r.zero_grads += 1;
                let first = r.zero_grads == 1 && opts.shrink;
                drop(r);
                if first {
                    let example = minimize_zero_grads(index, &p, what);
                    report.lock().expect("report").zero_grads_example = Some(example);
                }
            }
            Outcome::Invalid(e) => {
                r.invalid += 1;
                if r.invalid_examples.len() < 20 {
                    r.invalid_examples.push((index, e));
                }
            }
            Outcome::Mismatch(what) | Outcome::Panic(what) => {
                drop(r);
                let failure = minimize(opts, index, p, what);
                report.lock().expect("report").failures.push(failure);
            }
        }
    }
}

fn minimize(opts: &Options, index: u64, p: Program, what: String) -> Failure {
    let kind = kind(&what);
    let still = |q: &Program| {
        q.well_formed()
            && match run_program(q) {
                Outcome::Mismatch(w) | Outcome::Panic(w) => self::kind(&w) == kind,
                _ => false,
            }
    };
    let shrunk = if opts.shrink { shrink(&p, &still) } else { p.clone() };
    let shrunk_what = match run_program(&shrunk) {
        Outcome::Mismatch(w) | Outcome::Panic(w) => w,
        other => format!("{other:?}"),
    };
    Failure { index, what, program: p, shrunk, shrunk_what }
}

/// What sort of difference a mismatch is, so shrinking keeps to the same one.
fn kind(what: &str) -> &'static str {
    if what.contains("differs") {
        "value"
    } else if what.contains("absent") {
        "presence"
    } else if what.contains("type") {
        "type"
    } else if what.contains("failed") {
        "error"
    } else {
        "other"
    }
}

fn minimize_zero_grads(index: u64, p: &Program, what: String) -> Failure {
    let still = |q: &Program| q.well_formed() && matches!(run_program(q), Outcome::ZeroGrads(_));
    let shrunk = shrink(p, &still);
    let shrunk_what = format!("{:?}", run_program(&shrunk));
    Failure { index, what, program: p.clone(), shrunk, shrunk_what }
}

fn progress(working: &AtomicU64, done: &AtomicU64, report: &Mutex<CampaignReport>, t0: Instant) {
    let mut last = Instant::now();
    loop {
        std::thread::sleep(Duration::from_millis(200));
        let n = done.load(Ordering::Relaxed);
        if working.load(Ordering::Relaxed) == 0 {
            return;
        }
        if last.elapsed() >= Duration::from_secs(10) {
            last = Instant::now();
            let r = report.lock().expect("report");
            eprintln!("  {n} programs, {} invalid, {} failures, {:.0} s", r.invalid, r.failures.len(), t0.elapsed().as_secs_f64());
        }
    }
}
