//! Timing as docs/WORKLOADS.md asks: at least 3 warm-up calls (the first graph call traces and is
//! not counted), then at least 20 timed calls and at least the minimum time.

use std::time::{Duration, Instant};

/// Per-call times of one run, in microseconds.
pub struct Timing {
    pub median_us: f64,
    pub min_us: f64,
    pub max_us: f64,
    pub calls: usize,
    /// The first warm-up call (for graph mode: trace + optimize + run).
    pub first_us: f64,
}

/// Times `call` with `warmup` untimed calls, then until both `min_calls` and `min_time`.
pub fn time(mut call: impl FnMut(), warmup: usize, min_calls: usize, min_time: Duration) -> Timing {
    let start = Instant::now();
    call();
    let first_us = start.elapsed().as_secs_f64() * 1e6;
    for _ in 1..warmup {
        call();
    }
    let mut times = Vec::new();
    let begin = Instant::now();
    while times.len() < min_calls || begin.elapsed() < min_time {
        let t = Instant::now();
        call();
        times.push(t.elapsed().as_secs_f64() * 1e6);
    }
    times.sort_by(f64::total_cmp);
    Timing { median_us: times[times.len() / 2], min_us: times[0], max_us: times[times.len() - 1], calls: times.len(), first_us }
}
