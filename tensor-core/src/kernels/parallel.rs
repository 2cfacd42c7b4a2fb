//! Thread settings shared by all kernels: how many worker threads rayon and the matmul
//! backend use, and below which size a kernel stays on the calling thread (handing work to
//! another thread costs microseconds, more than a small kernel takes); and the one entry
//! into rayon that the generic kernels share ([`for_each_task`]).

use super::shared_out::SharedOut;
use rayon::prelude::*;
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Elements per parallel chunk of an elementwise kernel (64 KiB of f32).
pub const CHUNK: usize = 16 * 1024;

/// Kernels over fewer elements than this run on the calling thread.
pub const PAR_MIN_LEN: usize = 64 * 1024;

static THREADS: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// Set while this thread runs a kernel that must keep to it (`on_one_thread`).
    static ONE_THREAD: Cell<bool> = const { Cell::new(false) };
}

/// Sets the number of worker threads the kernels use (rayon's global pool and the matmul
/// backend). Call it once, before the first op, to take effect for rayon; later calls
/// still change the matmul backend and the serial/parallel choice.
///
/// ```standalone_crate
/// tensor_core::set_num_threads(2);
/// assert_eq!(tensor_core::num_threads(), 2);
/// ```
pub fn set_num_threads(n: usize) {
    let n = n.max(1);
    THREADS.store(n, Ordering::Relaxed);
    // Fails harmlessly if the global pool already exists.
    let _ = rayon::ThreadPoolBuilder::new().num_threads(n).build_global();
}

/// The number of worker threads kernels use (default: all cores).
pub fn num_threads() -> usize {
    if ONE_THREAD.with(Cell::get) {
        return 1;
    }
    match THREADS.load(Ordering::Relaxed) {
        0 => rayon::current_num_threads(),
        n => n.min(rayon::current_num_threads()),
    }
}

/// The length from which an elementwise kernel goes parallel (never, with one thread).
pub fn par_min_len() -> usize {
    if num_threads() > 1 {
        PAR_MIN_LEN
    } else {
        usize::MAX
    }
}

/// Runs `f` on a worker of the global pool and waits for it — on this thread if it already
/// is one, or if kernels use one thread.
///
/// A graph whose kernels go parallel runs its steps there. From outside the pool every
/// parallel kernel hands its work to the workers and sleeps until they finish, so each step
/// costs a wake-up of the workers and one of the caller (a futex each way, microseconds on a
/// busy machine). From a worker, the thread that runs the steps takes its share of each
/// kernel itself and only the other workers are handed work: one hand-over per run instead
/// of one per kernel. The other workers are kept awake for the run ([`keep_awake`]), so a
/// kernel's share reaches a running thread rather than one to be woken.
pub fn on_worker<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    if num_threads() == 1 || rayon::current_thread_index().is_some() {
        return f();
    }
    /// Ends the run's [`keep_awake`]s, also when `f` panics.
    struct Done<'a>(&'a AtomicBool);
    impl Drop for Done<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Release);
        }
    }
    let mut result = None;
    let done = AtomicBool::new(false);
    rayon::scope(|s| {
        let (owner, done) = (rayon::current_thread_index(), &done);
        for _ in 1..num_threads() {
            s.spawn(move |_| keep_awake(owner, done));
        }
        let _done = Done(done);
        result = Some(f());
    });
    result.expect("the scope ran its body")
}

/// Keeps a worker taking the run's parallel work as soon as there is some, instead of
/// sleeping between kernels, until the run is `done` or no work came for a while (ONNX
/// Runtime's and OpenMP's workers spin between parallel sections the same way).
///
/// A sleeping worker is woken by a futex and scheduled again: tens of microseconds a kernel
/// on a virtual machine, and it was ~40 context switches a call of ResNet-18 at batch 1 on
/// two threads (10 a call with this; 4-5% of the call's time, docs/PERFORMANCE.md). Which
/// thread runs a task never changes a result: the kernels' tasks depend on the geometry and
/// the thread count alone. The owner itself, should it pick this job up while it waits
/// inside a kernel, returns at once (it would spin above its own unfinished run).
fn keep_awake(owner: Option<usize>, done: &AtomicBool) {
    if rayon::current_thread_index() == owner {
        return;
    }
    let mut idle_since = std::time::Instant::now();
    while !done.load(Ordering::Acquire) {
        match rayon::yield_now() {
            Some(rayon::Yield::Executed) => idle_since = std::time::Instant::now(),
            _ if idle_since.elapsed() > IDLE_LIMIT => return,
            // A pause between looks, so the looks do not slow the owner's own deque.
            _ => (0..SPINS).for_each(|_| std::hint::spin_loop()),
        }
    }
}

/// Spin-loop hints between two looks for work in [`keep_awake`].
const SPINS: usize = 64;

/// How long [`keep_awake`] waits for work before it lets the worker sleep.
const IDLE_LIMIT: std::time::Duration = std::time::Duration::from_millis(2);

/// Runs `f` with kernels keeping to this thread: the graph executor runs two independent
/// products side by side this way, one per worker, rather than each on every worker in turn.
pub fn on_one_thread<R>(f: impl FnOnce() -> R) -> R {
    /// Restores the setting, also when `f` panics.
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            ONE_THREAD.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(ONE_THREAD.with(|c| c.replace(true)));
    f()
}

/// Runs `task(k)` for every `k` in `0..tasks` on the pool's workers (the caller takes a
/// share), returning when all are done.
///
/// Not generic on purpose: each kernel generic over its element types and its scalar
/// function (`map` alone has ~340 instances) once built its own copy of rayon's splitting,
/// joining and unwinding code around its closure, and those copies were a third of the
/// crate's compiled code (`cargo llvm-lines`). Through this one instance the kernels pay a
/// dynamic call per task, a chunk of thousands of elements.
pub fn for_each_task(tasks: usize, task: &(dyn Fn(usize) + Sync)) {
    (0..tasks).into_par_iter().for_each(task);
}

/// Values a part of an operand's scan by [`any_part`]: enough to pay for its hand-over (a
/// scan of 32 Ki f32 takes a few microseconds).
pub const SCAN_PART: usize = 32 * 1024;

/// Whether `test` holds for some part of `s`, cut into parts of `part` values (the last may be
/// shorter) that the pool's workers look at together; on the calling thread alone when `s`
/// has fewer than two parts or kernels use one thread. For the scans a kernel makes of its
/// operands before it starts (a NaN anywhere sends it another way), which otherwise run on one
/// thread while the others wait.
pub fn any_part<T: Sync>(s: &[T], part: usize, test: &(dyn Fn(&[T]) -> bool + Sync)) -> bool {
    assert!(part > 0, "parts of no values");
    if num_threads() == 1 || s.len() < 2 * part {
        return test(s);
    }
    let seen = AtomicBool::new(false);
    for_each_task(s.len().div_ceil(part), &|k| {
        if test(&s[k * part..((k + 1) * part).min(s.len())]) {
            seen.store(true, Ordering::Relaxed);
        }
    });
    seen.into_inner()
}

/// Splits `out` into consecutive parts of `chunk` elements (the last may be shorter) and
/// runs `fill(start, part)` for each on the pool's workers, `start` being the part's offset
/// in `out`.
pub fn for_each_chunk<U: Send>(out: &mut [U], chunk: usize, fill: &(dyn Fn(usize, &mut [U]) + Sync)) {
    assert!(chunk > 0, "chunks of no elements");
    let (n, base) = (out.len(), SharedOut::new(out));
    for_each_task(n.div_ceil(chunk), &|k| {
        let start = k * chunk;
        // SAFETY: the parts `[start, start + len)` of distinct tasks do not overlap and lie
        // inside `out`, which this function borrows mutably until every task has returned.
        let part = unsafe { std::slice::from_raw_parts_mut(base.at(start), chunk.min(n - start)) };
        fill(start, part);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_part_looks_at_every_value_once_and_finds_the_last() {
        let s: Vec<u32> = (0..100_000).collect();
        let (seen, parts) = (AtomicUsize::new(0), AtomicUsize::new(0));
        let count = |p: &[u32]| {
            seen.fetch_add(p.iter().map(|&v| v as usize).sum::<usize>(), Ordering::Relaxed);
            parts.fetch_add(1, Ordering::Relaxed);
            false
        };
        assert!(!any_part(&s, 30_000, &count));
        assert_eq!(seen.into_inner(), 100_000 * 99_999 / 2, "every value once");
        let want_parts = if num_threads() > 1 { 4 } else { 1 };
        assert_eq!(parts.into_inner(), want_parts, "parts of 30,000, the last of 10,000");
        assert!(any_part(&s, 30_000, &|p| p.contains(&99_999)), "in the short last part");
        assert!(any_part(&s, 30_000, &|p| p.contains(&0)));
        assert!(!any_part(&s, 30_000, &|p| p.contains(&100_000)));
    }

    /// Runs through `on_worker` from several threads at once, each run handing parallel work
    /// to the workers it keeps awake (and to those other runs keep awake): every run gets its
    /// own sums, and none waits on another for good.
    #[test]
    fn runs_on_workers_kept_awake_from_several_threads_at_once() {
        std::thread::scope(|s| {
            for caller in 0..4usize {
                s.spawn(move || {
                    for round in 0..40usize {
                        let got = on_worker(|| {
                            let sum = AtomicUsize::new(0);
                            for_each_task(64, &|k| {
                                sum.fetch_add(k * (caller + round), Ordering::Relaxed);
                            });
                            sum.into_inner()
                        });
                        assert_eq!(got, 64 * 63 / 2 * (caller + round), "caller {caller}, round {round}");
                    }
                });
            }
        });
    }

    /// A run that panics passes the panic on, and the workers it kept awake are let go: the
    /// next run completes.
    #[test]
    fn a_panicking_run_lets_its_workers_go() {
        let panicked = std::panic::catch_unwind(|| on_worker(|| -> usize { panic!("a kernel failed") }));
        assert!(panicked.is_err());
        assert_eq!(on_worker(|| 7), 7);
    }
}
