//! The trace cache of `#[graph_fn]`: a key traces exactly once however many threads call it
//! at once; the cache is bounded (least recently used evicted) and can be cleared; a failed
//! or panicking trace leaves no entry behind. The assertions are about counts and values,
//! never timing.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Barrier;
use tensor_core::function::{lookup, GraphFunction};
use tensor_core::prelude::*;

fn function(name: &str) -> &'static GraphFunction {
    lookup(name).unwrap_or_else(|| panic!("`{name}` is registered once called"))
}

// ----------------------------------------------------------------------------- concurrency

static MIX_BODIES: AtomicUsize = AtomicUsize::new(0);

#[graph_fn]
fn mix(x: &Tensor, k: i32) -> Result<Tensor> {
    MIX_BODIES.fetch_add(1, Ordering::SeqCst); // a host side effect: runs once per trace
    x.mul(k)?.add(1)
}

/// The input of call `j` of thread `i`: one of 4 signatures, with values depending on both.
fn mix_input(i: usize, j: usize) -> (Tensor, i32, Vec<f64>) {
    let v = (i * 1000 + j) as f64;
    let (x, k) = match (i + j) % 4 {
        0 => (Tensor::from_vec(vec![v as f32, 1.0], &[2]), 1),
        1 => (Tensor::from_vec(vec![v as f32, 2.0, 3.0], &[3]), 1),
        2 => (Tensor::from_vec(vec![v as i32, -4], &[2]), 1),
        _ => (Tensor::from_vec(vec![v as f32, 0.5], &[2]), 2),
    };
    let x = x.expect("valid data");
    let expected = tests::as_f64(&x).iter().map(|e| e * k as f64 + 1.0).collect();
    (x, k, expected)
}

/// 8 threads × 1,000 calls over a mix of 4 signatures, all starting together: exactly 4
/// traces (the body's host side effect ran 4 times), and every result is right.
#[test]
fn eight_threads_trace_four_signatures_exactly_four_times() {
    const THREADS: usize = 8;
    const CALLS: usize = 1000;
    let start = Barrier::new(THREADS);
    let wrong = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for i in 0..THREADS {
            let (start, wrong) = (&start, &wrong);
            s.spawn(move || {
                start.wait();
                for j in 0..CALLS {
                    let (x, k, expected) = mix_input(i, j);
                    let y = mix(&x, k).expect("a valid call");
                    if y.dtype() != x.dtype() || tests::as_f64(&y) != expected {
                        wrong.fetch_add(1, Ordering::SeqCst);
                    }
                }
            });
        }
    });
    assert_eq!(wrong.load(Ordering::SeqCst), 0, "every result is right");
    let f = function("mix");
    assert_eq!(f.trace_count(), 4);
    assert_eq!(MIX_BODIES.load(Ordering::SeqCst), 4);
    let mut signatures = f.cached_signatures();
    signatures.sort();
    assert_eq!(signatures, ["x: f32[2], k: 1", "x: f32[2], k: 2", "x: f32[3], k: 1", "x: i32[2], k: 1"]);
    assert_eq!(f.traces().len(), 4);
    assert_eq!(f.traces().iter().filter(|t| t.reason == "first call").count(), 1);
}

static ONCE_BODIES: AtomicUsize = AtomicUsize::new(0);

#[graph_fn]
fn traced_once(x: &Tensor) -> Tensor {
    ONCE_BODIES.fetch_add(1, Ordering::SeqCst);
    x * 3.0
}

/// Many threads calling one new signature at the same moment: one traces, the others wait
/// for its graph.
#[test]
fn concurrent_first_calls_trace_once() -> Result<()> {
    let start = Barrier::new(8);
    let results: Vec<Vec<f32>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|i| {
                let start = &start;
                s.spawn(move || {
                    let x = Tensor::from_vec(vec![i as f32, 1.0], &[2]).expect("valid");
                    start.wait();
                    traced_once(&x).to_vec::<f32>().expect("concrete")
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("no panic")).collect()
    });
    for (i, r) in results.iter().enumerate() {
        assert_eq!(r, &[3.0 * i as f32, 3.0]);
    }
    assert_eq!(function("traced_once").trace_count(), 1);
    assert_eq!(ONCE_BODIES.load(Ordering::SeqCst), 1);
    Ok(())
}

// -------------------------------------------------------------------------------- eviction

#[graph_fn(cache_capacity = 3)]
fn lru(n: i32) -> Tensor {
    Tensor::scalar(n)
}

/// The cache keeps `cache_capacity` signatures and evicts the least recently used; an
/// evicted signature traces again when called.
#[test]
fn the_least_recently_used_signature_is_evicted() -> Result<()> {
    for n in [1, 2, 3, 1] {
        assert_eq!(lru(n).item::<i32>()?, n);
    }
    let f = function("lru");
    assert_eq!((f.trace_count(), f.cached_signatures()), (3, vec!["n: 1".to_string(), "n: 2".into(), "n: 3".into()]));
    lru(4); // 2 is the least recently used
    assert_eq!(f.cached_signatures(), ["n: 1", "n: 3", "n: 4"]);
    assert_eq!(lru(2).item::<i32>()?, 2); // traces again, evicting 3
    assert_eq!(f.trace_count(), 5);
    assert_eq!(f.cached_signatures(), ["n: 1", "n: 4", "n: 2"]);
    assert_eq!(f.retrace_reasons()[4], "the signature was evicted from the cache (capacity 3)");
    for n in [1, 4, 2] {
        assert_eq!(lru(n).item::<i32>()?, n);
    }
    assert_eq!(f.trace_count(), 5, "cached signatures do not trace");
    assert_eq!(f.concrete_functions().len(), 3);
    Ok(())
}

#[graph_fn]
fn resizable(n: i32) -> Tensor {
    Tensor::scalar(n)
}

/// The capacity can be changed at run time (shrinking evicts at once) and the cache cleared.
#[test]
fn capacity_is_configurable_and_the_cache_clearable() -> Result<()> {
    for n in 0..10 {
        resizable(n);
    }
    let f = function("resizable");
    assert_eq!(f.cache_capacity(), 64, "the default");
    assert_eq!(f.cached_signatures().len(), 10);
    resizable(3);
    f.set_cache_capacity(2);
    assert_eq!(f.cache_capacity(), 2);
    assert_eq!(f.cached_signatures(), ["n: 3", "n: 9"]);
    f.clear_cache();
    assert!(f.cached_signatures().is_empty() && f.concrete_functions().is_empty());
    assert_eq!(f.trace_count(), 10, "the count and history stay");
    assert_eq!(resizable(3).item::<i32>()?, 3);
    assert_eq!(f.trace_count(), 11);
    assert_eq!(f.retrace_reasons().last().map(String::as_str), Some("the cache was cleared"));
    Ok(())
}

static MANY_BODIES: AtomicUsize = AtomicUsize::new(0);

#[graph_fn(cache_capacity = 4)]
fn bounded(n: i32) -> Tensor {
    MANY_BODIES.fetch_add(1, Ordering::SeqCst);
    Tensor::scalar(n)
}

/// Under concurrent calls over more signatures than the capacity the cache stays bounded
/// and every result is right.
#[test]
fn eviction_under_concurrency_keeps_results_right() {
    std::thread::scope(|s| {
        for i in 0..4 {
            s.spawn(move || {
                for j in 0..200 {
                    let n = (i * 7 + j) % 10;
                    assert_eq!(bounded(n).item::<i32>().expect("concrete"), n);
                }
            });
        }
    });
    let f = function("bounded");
    assert!(f.cached_signatures().len() <= 4, "{:?}", f.cached_signatures());
    assert_eq!(f.trace_count(), MANY_BODIES.load(Ordering::SeqCst), "every trace is counted");
}

// -------------------------------------------------------------------- failures leave nothing

static FALLIBLE_BODIES: AtomicUsize = AtomicUsize::new(0);

#[graph_fn]
fn fallible(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    FALLIBLE_BODIES.fetch_add(1, Ordering::SeqCst);
    a.matmul(b)
}

/// An `Err` while tracing reaches the caller as that `Err`, is not counted as a trace and
/// leaves no cache entry: the same call traces (and fails) again.
#[test]
fn a_trace_time_error_leaves_no_entry() -> Result<()> {
    let (a, b) = (Tensor::ones(&[2, 3], DType::F32), Tensor::ones(&[2, 3], DType::F32));
    let direct = a.matmul(&b).unwrap_err().to_string();
    assert_eq!(fallible(&a, &b).unwrap_err().to_string(), direct, "the body's own error");
    assert_eq!(fallible(&a, &b).unwrap_err().to_string(), direct);
    let f = function("fallible");
    assert_eq!(FALLIBLE_BODIES.load(Ordering::SeqCst), 2, "no cached failure: traced again");
    assert_eq!(f.trace_count(), 0);
    assert!(f.cached_signatures().is_empty());
    let y = fallible(&a, &Tensor::ones(&[3, 1], DType::F32))?;
    assert_eq!(y.to_vec::<f32>()?, [3.0, 3.0]);
    assert_eq!((f.trace_count(), f.retrace_reasons()), (1, vec!["first call".to_string()]));
    assert!(tensor_core::executing_eagerly());
    Ok(())
}

#[graph_fn]
fn panicky(x: &Tensor, explode: bool) -> Tensor {
    if explode {
        panic!("boom while tracing");
    }
    x + 1.0
}

/// A panic while tracing leaves no cache entry and no stuck trace context.
#[test]
fn a_panic_while_tracing_leaves_no_entry() -> Result<()> {
    let x = Tensor::from_vec(vec![1.0f32], &[1])?;
    let caught = std::panic::catch_unwind(|| panicky(&x, true));
    assert!(caught.is_err());
    assert!(tensor_core::executing_eagerly(), "the trace context was popped");
    let f = function("panicky");
    assert_eq!(f.trace_count(), 0);
    assert!(f.cached_signatures().is_empty());
    assert!(std::panic::catch_unwind(|| panicky(&x, true)).is_err(), "traces (and panics) again");
    assert_eq!(panicky(&x, false).to_vec::<f32>()?, [2.0]);
    assert_eq!(f.trace_count(), 1);
    Ok(())
}
