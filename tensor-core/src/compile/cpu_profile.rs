//! `TENSOR_CORE_CPU_PROFILE=1`: each step a graph call runs on the CPU is timed (wall clock,
//! `Instant`) and summed per kind of step and input shapes; [`cpu_profile`] reads the sums.
//! For finding where a graph's CPU time goes, layer by layer (the W9 models' convolutions,
//! pools and fused steps); off, it costs one load of a flag per step.

use crate::graph::{Node, NodeKind};
use crate::storage::Storage;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

/// Whether `TENSOR_CORE_CPU_PROFILE=1` (read once).
pub(crate) fn profiling() -> bool {
    static PROFILING: crate::switch::Switch = crate::switch::Switch::new("TENSOR_CORE_CPU_PROFILE", false);
    PROFILING.on()
}

/// Per step key: (steps, seconds).
static PROFILE: Mutex<Option<HashMap<String, (usize, f64)>>> = Mutex::new(None);

/// What a step is, for the profile: the op (a convolution with its attributes), the fused
/// program's or epilogue's summary, and its inputs' shapes.
fn key(node: &Node, inputs: &[&Storage]) -> String {
    let kind = match &node.kind {
        NodeKind::Op(op) => format!("{} {}", op.name(), op.attrs()),
        NodeKind::Fused(p) => format!("fused[{}]", p.summary()),
        NodeKind::Epilogue(e) => format!("{} {}", e.summary(), e.anchor.attrs()),
        _ => node.kind_name().to_string(),
    };
    let shapes: Vec<String> = inputs.iter().map(|s| format!("{}", s.shape())).collect();
    format!("{kind} {}", shapes.join(" "))
}

/// A step being timed: its row's key and when it started.
pub(crate) struct Timing(String, Instant);

/// Starts timing `node` on `inputs` when profiling (the key is made before the step runs:
/// a fused step may consume its inputs).
pub(crate) fn start(node: &Node, inputs: &[&Storage]) -> Option<Timing> {
    profiling().then(|| Timing(key(node, inputs), Instant::now()))
}

/// Adds a finished step's wall time to its row.
pub(crate) fn finish(timing: Option<Timing>) {
    let Some(Timing(key, start)) = timing else { return };
    let secs = start.elapsed().as_secs_f64();
    let mut guard = PROFILE.lock().unwrap_or_else(|e| e.into_inner());
    let row = guard.get_or_insert_with(HashMap::new).entry(key).or_default();
    row.0 += 1;
    row.1 += secs;
}

/// The CPU steps' sums since the process started (or the last [`reset_cpu_profile`]), with
/// `TENSOR_CORE_CPU_PROFILE=1`: (kind and input shapes, steps, seconds), most first. For
/// `bench --profile`; not part of the public API.
#[doc(hidden)]
pub fn cpu_profile() -> Vec<(String, usize, f64)> {
    let guard = PROFILE.lock().unwrap_or_else(|e| e.into_inner());
    let mut rows: Vec<(String, usize, f64)> = guard.iter().flatten().map(|(k, (n, s))| (k.clone(), *n, *s)).collect();
    rows.sort_by(|a, b| b.2.total_cmp(&a.2));
    rows
}

/// Empties the CPU profile (before the calls to profile: warm-up and tracing excluded).
#[doc(hidden)]
pub fn reset_cpu_profile() {
    *PROFILE.lock().unwrap_or_else(|e| e.into_inner()) = None;
}
