//! The check of a relaxed-shape program (`relaxed.rs`): its graph function called at each of
//! its sizes against the program run eagerly, bit for bit, with a bound on the traces; and a
//! campaign of many such programs on several threads.

use super::check::same_bits;
use super::relaxed::{generate_relaxed, run_relaxed, Relax, RelaxedProgram};
use std::cell::{Cell, RefCell};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use tensor_core::{graph_fn, DType, Result, Tensor};

thread_local! {
    /// The program the graph functions below run on this thread.
    static CURRENT: RefCell<Option<RelaxedProgram>> = const { RefCell::new(None) };
    /// How many traces of them succeeded on this thread.
    static TRACES: Cell<usize> = const { Cell::new(0) };
}

/// Each check's own id: the graph functions' cache key holds it, so no two checks share a
/// trace (a program checked again, at another SIMD level, traces anew).
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

/// The program, run while tracing; a trace that succeeds is counted (one whose body fails
/// is not cached, and traces again).
fn traced_body(x: &Tensor) -> Result<Vec<Tensor>> {
    let out = CURRENT.with(|p| run_relaxed(p.borrow().as_ref().expect("a program is set"), x));
    if out.is_ok() {
        TRACES.with(|t| t.set(t.get() + 1));
    }
    out
}

#[graph_fn(reduce_retracing, cache_capacity = 512)]
fn relaxed_by_retracing(id: u64, x: &Tensor) -> Result<Vec<Tensor>> {
    let _ = id;
    traced_body(x)
}

#[graph_fn(input_signature(x: f32[?, ?]), cache_capacity = 512)]
fn relaxed_by_signature(id: u64, x: &Tensor) -> Result<Vec<Tensor>> {
    let _ = id;
    traced_body(x)
}

/// Where a relaxed program's graph and eager runs differ, or what else went wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RelaxedMismatch {
    /// The call (`call 2 (n = 7)`).
    pub call: String,
    /// What differs.
    pub detail: String,
}

impl std::fmt::Display for RelaxedMismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.call, self.detail)
    }
}

/// Calls `p`'s graph function at each of its sizes and `p` eagerly at the same sizes, and
/// compares every output bit for bit (an `Err` in both is agreement). Returns how many
/// traces the calls made, which must be few: at most one per distinct size and one more, and
/// for a program that never reads `n`, one relaxed trace serving every size after the first.
///
/// ```
/// use tests::fuzz::{check_relaxed, generate_relaxed};
/// let p = generate_relaxed(1, 0);
/// assert!(check_relaxed(&p).is_ok());
/// ```
pub fn check_relaxed(p: &RelaxedProgram) -> std::result::Result<usize, RelaxedMismatch> {
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    CURRENT.with(|c| *c.borrow_mut() = Some(p.clone()));
    let before = TRACES.with(Cell::get);
    let result = p.sizes.iter().enumerate().try_for_each(|(k, &n)| {
        let call = || format!("call {k} (n = {n})");
        let x = Tensor::randn(&[n, p.cols], DType::F32, p.seed.wrapping_add(k as u64));
        let eager = run_relaxed(p, &x);
        let graph = match p.relax {
            Relax::ReduceRetracing => relaxed_by_retracing(id, &x),
            Relax::Signature => relaxed_by_signature(id, &x),
        };
        compare(&eager, &graph).map_err(|detail| RelaxedMismatch { call: call(), detail })
    });
    CURRENT.with(|c| *c.borrow_mut() = None);
    result?;
    let traces = TRACES.with(Cell::get) - before;
    let mut distinct = p.sizes.clone();
    distinct.sort_unstable();
    distinct.dedup();
    let most = match p.reads_dims() {
        true => distinct.len() + 1,
        false if p.relax == Relax::Signature => 1,
        false => distinct.len().min(2),
    };
    match traces <= most {
        true => Ok(traces),
        false => {
            Err(RelaxedMismatch { call: "all calls".into(), detail: format!("{traces} traces for sizes {:?}, expected at most {most}", p.sizes) })
        }
    }
}

fn compare(eager: &Result<Vec<Tensor>>, graph: &Result<Vec<Tensor>>) -> std::result::Result<(), String> {
    match (eager, graph) {
        (Err(_), Err(_)) => Ok(()),
        (Err(e), Ok(_)) => Err(format!("eager failed ({e}) but the graph ran")),
        (Ok(_), Err(e)) => Err(format!("the graph failed ({e}) but eager ran")),
        (Ok(w), Ok(g)) if w.len() != g.len() => Err(format!("{} outputs eagerly, {} from the graph", w.len(), g.len())),
        (Ok(w), Ok(g)) => w.iter().zip(g).enumerate().try_for_each(|(i, (w, g))| same_bits(w, g).map_err(|d| format!("output {i}: {d}"))),
    }
}

/// What a campaign of relaxed programs found.
#[derive(Clone, Debug, Default)]
pub struct RelaxedReport {
    /// Programs run.
    pub programs: u64,
    /// Calls made (each compared with eager).
    pub calls: u64,
    /// Traces made.
    pub traces: u64,
    /// Programs that read `n` as host code (a branch or a number).
    pub reading: u64,
    /// Calls whose eager run failed (and the graph's too: agreement).
    pub failed_calls: u64,
    /// Each program whose graph differs from eager (or panicked): index, program, what.
    pub failures: Vec<(u64, RelaxedProgram, String)>,
}

/// Runs relaxed programs `start..start + programs` of `seed`'s stream on `threads` threads.
///
/// ```
/// let r = tests::fuzz::relaxed_campaign(1, 0, 4, 1);
/// assert_eq!((r.programs, r.failures.len()), (4, 0));
/// ```
pub fn relaxed_campaign(seed: u64, start: u64, programs: u64, threads: usize) -> RelaxedReport {
    let next = AtomicU64::new(start);
    let report = Mutex::new(RelaxedReport::default());
    std::thread::scope(|s| {
        for _ in 0..threads.max(1) {
            s.spawn(|| loop {
                let index = next.fetch_add(1, Ordering::Relaxed);
                if index >= start + programs {
                    break;
                }
                let p = generate_relaxed(seed, index);
                let failed = p.sizes.iter().filter(|&&n| run_relaxed(&p, &Tensor::zeros(&[n, p.cols], DType::F32)).is_err()).count();
                let outcome = catch_unwind(AssertUnwindSafe(|| check_relaxed(&p)));
                let mut r = report.lock().unwrap_or_else(|e| e.into_inner());
                r.programs += 1;
                r.calls += p.sizes.len() as u64;
                r.reading += p.reads_dims() as u64;
                r.failed_calls += failed as u64;
                match outcome {
                    Ok(Ok(traces)) => r.traces += traces as u64,
                    Ok(Err(m)) => r.failures.push((index, p, m.to_string())),
                    Err(_) => r.failures.push((index, p, "the library panicked".into())),
                }
            });
        }
    });
    let mut r = report.into_inner().unwrap_or_else(|e| e.into_inner());
    r.failures.sort_by_key(|f| f.0);
    r
}
